//! Scheduler configuration, shaped like kube-scheduler's `KubeSchedulerConfiguration`:
//! profiles name plugins per extension point (enabled on top of the defaults, with
//! `disabled` and `'*'` as upstream), score weights and plugin args; `modules` says
//! where a plugin's WebAssembly component comes from when it is not built in.
//!
//! ```yaml
//! apiVersion: berth.dev/v1alpha1
//! kind: BerthConfiguration
//! percentageOfNodesToScore: 0
//! profiles:
//! - schedulerName: default-scheduler
//!   plugins:
//!     score:
//!       enabled:
//!       - name: NodeResourcesFit
//!         weight: 2
//!   pluginConfig:
//!   - name: NodeResourcesFit
//!     args:
//!       scoringStrategy:
//!         type: MostAllocated
//! modules:
//! - name: MyPlugin
//!   path: ./my_plugin.wasm
//! ```

pub mod duration;

use berth_sdk::ExtensionPoint;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The scheduler name pods get when they name none.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// The file.
        file: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid YAML or a field has the wrong type.
    #[error("{file}: {field}: {message}")]
    Parse {
        /// The file.
        file: String,
        /// The field path.
        field: String,
        /// What was wrong.
        message: String,
    },
    /// A value is not allowed.
    #[error("{file}: {field}: {message}")]
    Invalid {
        /// The file (or "<default>").
        file: String,
        /// The field path.
        field: String,
        /// What was wrong.
        message: String,
    },
}

/// The configuration file.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Configuration {
    /// `berth.dev/v1alpha1`.
    #[serde(default)]
    pub api_version: Option<String>,
    /// `BerthConfiguration`.
    #[serde(default)]
    pub kind: Option<String>,
    /// Worker threads for Filter and Score (default: the number of cores).
    #[serde(default)]
    pub parallelism: Option<usize>,
    /// Percentage of nodes to score (0 or absent: upstream's adaptive default).
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<u32>,
    /// One profile per scheduler name.
    #[serde(default)]
    pub profiles: Vec<ProfileConfig>,
    /// Where plugins that are not built in come from (or built-in ones are replaced).
    #[serde(default)]
    pub modules: Vec<ModuleSource>,
    /// How `berth run` talks to the API server (kube-scheduler's `clientConnection`).
    #[serde(default)]
    pub client_connection: Option<ClientConnection>,
    /// Whether and how `berth run` takes turns with its other replicas (kube-scheduler's
    /// `leaderElection`).
    #[serde(default)]
    pub leader_election: Option<LeaderElectionConfig>,
}

/// kube-scheduler's `leaderElection`: replicas take turns holding a
/// `coordination.k8s.io/v1` Lease; only the holder schedules.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaderElectionConfig {
    /// Whether to elect a leader (default true, as upstream).
    #[serde(default)]
    pub leader_elect: Option<bool>,
    /// How long a lease lasts after its last renewal before another replica may take
    /// it (default 15s).
    #[serde(default, deserialize_with = "duration::deserialize_opt")]
    pub lease_duration: Option<std::time::Duration>,
    /// How long the leader keeps trying to renew before it gives up leading (10s).
    #[serde(default, deserialize_with = "duration::deserialize_opt")]
    pub renew_deadline: Option<std::time::Duration>,
    /// How often replicas try to take or renew the lease (2s).
    #[serde(default, deserialize_with = "duration::deserialize_opt")]
    pub retry_period: Option<std::time::Duration>,
    /// Only `leases` (the default) is supported, as in current Kubernetes.
    #[serde(default)]
    pub resource_lock: Option<String>,
    /// The Lease's name (default `berth`, so that Berth never competes for
    /// kube-scheduler's own lease when it runs beside it).
    #[serde(default)]
    pub resource_name: Option<String>,
    /// The Lease's namespace (default `kube-system`).
    #[serde(default)]
    pub resource_namespace: Option<String>,
}

/// Leader election with every default filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct LeaderElection {
    /// Whether to elect a leader.
    pub enabled: bool,
    /// See [`LeaderElectionConfig::lease_duration`].
    pub lease_duration: std::time::Duration,
    /// See [`LeaderElectionConfig::renew_deadline`].
    pub renew_deadline: std::time::Duration,
    /// See [`LeaderElectionConfig::retry_period`].
    pub retry_period: std::time::Duration,
    /// The Lease's name.
    pub name: String,
    /// The Lease's namespace.
    pub namespace: String,
}

/// The Lease Berth's replicas share by default.
pub const DEFAULT_LEASE_NAME: &str = "berth";

impl LeaderElectionConfig {
    /// The effective settings: upstream's defaults where the file says nothing, and
    /// upstream's rules (lease > renew deadline > 1.2 × retry period > 0).
    pub fn resolve(&self, file: &str) -> Result<LeaderElection, ConfigError> {
        use std::time::Duration;
        let invalid = |field: &str, message: String| ConfigError::Invalid {
            file: file.to_owned(),
            field: format!("leaderElection.{field}"),
            message,
        };
        let le = LeaderElection {
            enabled: self.leader_elect.unwrap_or(true),
            lease_duration: self.lease_duration.unwrap_or(Duration::from_secs(15)),
            renew_deadline: self.renew_deadline.unwrap_or(Duration::from_secs(10)),
            retry_period: self.retry_period.unwrap_or(Duration::from_secs(2)),
            name: self
                .resource_name
                .clone()
                .unwrap_or_else(|| DEFAULT_LEASE_NAME.to_owned()),
            namespace: self
                .resource_namespace
                .clone()
                .unwrap_or_else(|| "kube-system".to_owned()),
        };
        if let Some(lock) = &self.resource_lock
            && lock != "leases"
        {
            return Err(invalid(
                "resourceLock",
                format!("{lock:?} is not supported; use \"leases\""),
            ));
        }
        if !le.enabled {
            return Ok(le);
        }
        for (field, d) in [
            ("leaseDuration", le.lease_duration),
            ("renewDeadline", le.renew_deadline),
            ("retryPeriod", le.retry_period),
        ] {
            if d.is_zero() {
                return Err(invalid(field, "must be greater than zero".into()));
            }
        }
        if le.lease_duration <= le.renew_deadline {
            return Err(invalid(
                "leaseDuration",
                format!(
                    "{} must be greater than renewDeadline {}",
                    duration::format(le.lease_duration),
                    duration::format(le.renew_deadline)
                ),
            ));
        }
        if le.renew_deadline.as_secs_f64() <= 1.2 * le.retry_period.as_secs_f64() {
            return Err(invalid(
                "renewDeadline",
                format!(
                    "{} must be greater than 1.2 × retryPeriod {}",
                    duration::format(le.renew_deadline),
                    duration::format(le.retry_period)
                ),
            ));
        }
        if le.name.is_empty() {
            return Err(invalid("resourceName", "must not be empty".into()));
        }
        if le.namespace.is_empty() {
            return Err(invalid("resourceNamespace", "must not be empty".into()));
        }
        Ok(le)
    }
}

/// kube-scheduler's `clientConnection`: the kubeconfig and the client's rate limit.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientConnection {
    /// The kubeconfig file (relative paths are relative to the configuration file);
    /// `--kubeconfig` overrides it.
    #[serde(default)]
    pub kubeconfig: Option<PathBuf>,
    /// Requests per second (default 50; 0 or less: no limit).
    #[serde(default)]
    pub qps: Option<f32>,
    /// Requests that may go at once after a quiet spell (default 100).
    #[serde(default)]
    pub burst: Option<u32>,
    /// Accepted for compatibility; Berth speaks JSON.
    #[serde(default)]
    pub accept_content_types: Option<String>,
    /// Accepted for compatibility; Berth speaks JSON.
    #[serde(default)]
    pub content_type: Option<String>,
}

/// A plugin module on disk.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModuleSource {
    /// The plugin name profiles use; must match the module's own metadata.
    pub name: String,
    /// The component file (relative paths are relative to the configuration file).
    pub path: PathBuf,
    /// The expected sha256 of the file, hex; a mismatch refuses the module.
    #[serde(default)]
    pub sha256: Option<String>,
}

/// A profile.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProfileConfig {
    /// The `spec.schedulerName` this profile serves.
    #[serde(default)]
    pub scheduler_name: Option<String>,
    /// Plugins per extension point, merged with the defaults.
    #[serde(default)]
    pub plugins: PluginsConfig,
    /// Args per plugin.
    #[serde(default)]
    pub plugin_config: Vec<PluginArgs>,
}

/// Args of one plugin.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginArgs {
    /// The plugin name.
    pub name: String,
    /// Its args, passed to the plugin as JSON.
    #[serde(default)]
    pub args: serde_json::Value,
}

/// Plugins per extension point.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(missing_docs)]
pub struct PluginsConfig {
    #[serde(default)]
    pub pre_enqueue: PluginSet,
    #[serde(default)]
    pub queue_sort: PluginSet,
    #[serde(default)]
    pub pre_filter: PluginSet,
    #[serde(default)]
    pub filter: PluginSet,
    #[serde(default)]
    pub post_filter: PluginSet,
    #[serde(default)]
    pub pre_score: PluginSet,
    #[serde(default)]
    pub score: PluginSet,
    #[serde(default)]
    pub reserve: PluginSet,
    #[serde(default)]
    pub permit: PluginSet,
    #[serde(default)]
    pub pre_bind: PluginSet,
    #[serde(default)]
    pub bind: PluginSet,
    #[serde(default)]
    pub post_bind: PluginSet,
}

impl PluginsConfig {
    fn sets(&self) -> [(ExtensionPoint, &PluginSet); 12] {
        use ExtensionPoint as E;
        [
            (E::PreEnqueue, &self.pre_enqueue),
            (E::QueueSort, &self.queue_sort),
            (E::PreFilter, &self.pre_filter),
            (E::Filter, &self.filter),
            (E::PostFilter, &self.post_filter),
            (E::PreScore, &self.pre_score),
            (E::Score, &self.score),
            (E::Reserve, &self.reserve),
            (E::Permit, &self.permit),
            (E::PreBind, &self.pre_bind),
            (E::Bind, &self.bind),
            (E::PostBind, &self.post_bind),
        ]
    }
}

/// Enabled and disabled plugins of one extension point.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSet {
    /// Added after the defaults (or replacing a default of the same name in place).
    #[serde(default)]
    pub enabled: Vec<PluginRef>,
    /// Removed from the defaults; `'*'` removes them all.
    #[serde(default)]
    pub disabled: Vec<PluginRef>,
}

/// A plugin named at an extension point.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginRef {
    /// The plugin name.
    pub name: String,
    /// Score weight (score only; default 1).
    #[serde(default)]
    pub weight: Option<i64>,
}

/// A profile after merging with the defaults: what the framework runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// The scheduler name it serves.
    pub scheduler_name: String,
    /// Plugins per extension point, in order, with their weights (1 except Score).
    pub points: BTreeMap<ExtensionPoint, Vec<(String, i64)>>,
    /// Args per plugin name.
    pub args: BTreeMap<String, serde_json::Value>,
}

impl Profile {
    /// The plugins at one extension point, in order.
    pub fn plugins_at(&self, point: ExtensionPoint) -> &[(String, i64)] {
        self.points.get(&point).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Every plugin the profile names, once, in first-use order.
    pub fn plugin_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for point in ExtensionPoint::ALL {
            for (n, _) in self.plugins_at(point) {
                if !names.contains(n) {
                    names.push(n.clone());
                }
            }
        }
        names
    }
}

/// The default plugins per extension point: upstream's default profile (its
/// multi-point list expanded, in its order), restricted to the plugins Berth ships,
/// with upstream's score weights.
pub fn default_plugins() -> BTreeMap<ExtensionPoint, Vec<(String, i64)>> {
    use ExtensionPoint as E;
    let list = |names: &[(&str, i64)]| -> Vec<(String, i64)> {
        names.iter().map(|(n, w)| ((*n).to_owned(), *w)).collect()
    };
    BTreeMap::from([
        (E::PreEnqueue, list(&[("SchedulingGates", 1)])),
        (E::QueueSort, list(&[("PrioritySort", 1)])),
        (
            E::PreFilter,
            list(&[
                ("NodeAffinity", 1),
                ("NodePorts", 1),
                ("NodeResourcesFit", 1),
                ("PodTopologySpread", 1),
                ("InterPodAffinity", 1),
            ]),
        ),
        (
            E::Filter,
            list(&[
                ("NodeUnschedulable", 1),
                ("NodeName", 1),
                ("TaintToleration", 1),
                ("NodeAffinity", 1),
                ("NodePorts", 1),
                ("NodeResourcesFit", 1),
                ("PodTopologySpread", 1),
                ("InterPodAffinity", 1),
            ]),
        ),
        (
            E::PreScore,
            list(&[
                ("TaintToleration", 1),
                ("NodeAffinity", 1),
                ("NodeResourcesFit", 1),
                ("PodTopologySpread", 1),
                ("InterPodAffinity", 1),
                ("NodeResourcesBalancedAllocation", 1),
                ("ImageLocality", 1),
            ]),
        ),
        (
            E::Score,
            list(&[
                ("TaintToleration", 3),
                ("NodeAffinity", 2),
                ("NodeResourcesFit", 1),
                ("PodTopologySpread", 2),
                ("InterPodAffinity", 2),
                ("NodeResourcesBalancedAllocation", 1),
                ("ImageLocality", 1),
            ]),
        ),
        (E::Bind, list(&[("DefaultBinder", 1)])),
    ])
}

impl Configuration {
    /// Reads a configuration file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            file: file.clone(),
            source,
        })?;
        let mut config = Self::parse(&file, &text)?;
        // Module paths are relative to the file.
        let base = path.parent().unwrap_or(Path::new("."));
        for m in &mut config.modules {
            if m.path.is_relative() {
                m.path = base.join(&m.path);
            }
        }
        if let Some(cc) = &mut config.client_connection
            && let Some(k) = &mut cc.kubeconfig
            && k.is_relative()
            && !k.as_os_str().is_empty()
        {
            *k = base.join(&*k);
        }
        Ok(config)
    }

    /// Parses a configuration from YAML (or JSON) text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, ConfigError> {
        let de = serde_yaml::Deserializer::from_str(text);
        let config: Configuration = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            let inner = e.into_inner();
            let message = match inner.location() {
                Some(l) => format!("{inner} (line {}, column {})", l.line(), l.column()),
                None => inner.to_string(),
            };
            ConfigError::Parse {
                file: file.to_owned(),
                field,
                message,
            }
        })?;
        let invalid = |field: &str, message: String| ConfigError::Invalid {
            file: file.to_owned(),
            field: field.to_owned(),
            message,
        };
        if let Some(kind) = &config.kind
            && kind != "BerthConfiguration"
        {
            return Err(invalid(
                "kind",
                format!("expected BerthConfiguration, got {kind:?}"),
            ));
        }
        if let Some(v) = &config.api_version
            && v != "berth.dev/v1alpha1"
        {
            return Err(invalid(
                "apiVersion",
                format!("expected berth.dev/v1alpha1, got {v:?}"),
            ));
        }
        if config.parallelism == Some(0) {
            return Err(invalid("parallelism", "must be at least 1".into()));
        }
        if let Some(cc) = &config.client_connection
            && let Some(qps) = cc.qps
            && !qps.is_finite()
        {
            return Err(invalid(
                "clientConnection.qps",
                format!("{qps} is not a number of requests per second"),
            ));
        }
        config
            .leader_election
            .clone()
            .unwrap_or_default()
            .resolve(file)?;
        if let Some(p) = config.percentage_of_nodes_to_score
            && p > 100
        {
            return Err(invalid(
                "percentageOfNodesToScore",
                format!("{p} is not in 0..=100"),
            ));
        }
        Ok(config)
    }

    /// The profiles after merging with the defaults; a configuration with no
    /// profiles has one default profile.
    pub fn resolve_profiles(&self, file: &str) -> Result<Vec<Profile>, ConfigError> {
        let profiles = if self.profiles.is_empty() {
            vec![ProfileConfig::default()]
        } else {
            self.profiles.clone()
        };
        let mut out: Vec<Profile> = Vec::new();
        for (i, p) in profiles.iter().enumerate() {
            let field = |f: &str| format!("profiles[{i}].{f}");
            let invalid = |f: String, message: String| ConfigError::Invalid {
                file: file.to_owned(),
                field: f,
                message,
            };
            let scheduler_name = p
                .scheduler_name
                .clone()
                .unwrap_or_else(|| DEFAULT_SCHEDULER_NAME.to_owned());
            if out.iter().any(|o| o.scheduler_name == scheduler_name) {
                return Err(invalid(
                    field("schedulerName"),
                    format!("duplicate scheduler name {scheduler_name:?}"),
                ));
            }
            let mut points = default_plugins();
            for (point, set) in p.plugins.sets() {
                let f = format!("plugins.{}", point.as_str());
                let list = points.entry(point).or_default();
                merge(list, set, point, &field(&f)).map_err(|(f, m)| invalid(f, m))?;
            }
            points.retain(|_, v| !v.is_empty());
            if points.get(&ExtensionPoint::QueueSort).map_or(0, Vec::len) != 1 {
                return Err(invalid(
                    field("plugins.queueSort"),
                    "exactly one queueSort plugin must be enabled".into(),
                ));
            }
            if points.get(&ExtensionPoint::Bind).is_none_or(Vec::is_empty) {
                return Err(invalid(
                    field("plugins.bind"),
                    "at least one bind plugin must be enabled".into(),
                ));
            }
            let mut args = BTreeMap::new();
            for (j, a) in p.plugin_config.iter().enumerate() {
                if args.insert(a.name.clone(), a.args.clone()).is_some() {
                    return Err(invalid(
                        field(&format!("pluginConfig[{j}].name")),
                        format!("duplicate args for {}", a.name),
                    ));
                }
            }
            out.push(Profile {
                scheduler_name,
                points,
                args,
            });
        }
        Ok(out)
    }
}

fn merge(
    list: &mut Vec<(String, i64)>,
    set: &PluginSet,
    point: ExtensionPoint,
    field: &str,
) -> Result<(), (String, String)> {
    if set.disabled.iter().any(|d| d.name == "*") {
        list.clear();
    } else {
        list.retain(|(n, _)| !set.disabled.iter().any(|d| &d.name == n));
    }
    for (i, e) in set.enabled.iter().enumerate() {
        let weight = match (point, e.weight) {
            (ExtensionPoint::Score, Some(w)) if w < 0 => {
                return Err((
                    format!("{field}.enabled[{i}].weight"),
                    format!("{w} is negative"),
                ));
            }
            (ExtensionPoint::Score, Some(w)) if w > 0 => w,
            (ExtensionPoint::Score, _) => 1,
            (_, Some(_)) => {
                return Err((
                    format!("{field}.enabled[{i}].weight"),
                    "weights apply to score plugins only".into(),
                ));
            }
            (_, None) => 1,
        };
        match list.iter_mut().find(|(n, _)| n == &e.name) {
            Some(existing) => existing.1 = weight,
            None => list.push((e.name.clone(), weight)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_config_is_the_default_profile() {
        let c = Configuration::parse("c.yaml", "{}").unwrap();
        let p = c.resolve_profiles("c.yaml").unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].scheduler_name, DEFAULT_SCHEDULER_NAME);
        assert_eq!(p[0].points, default_plugins());
    }

    #[test]
    fn enabled_and_disabled_merge_as_upstream() {
        let text = r#"
profiles:
- schedulerName: custom
  plugins:
    filter:
      disabled: [{name: NodeName}]
      enabled: [{name: Extra}]
    score:
      disabled: [{name: "*"}]
      enabled: [{name: NodeResourcesFit, weight: 5}]
"#;
        let c = Configuration::parse("c.yaml", text).unwrap();
        let p = &c.resolve_profiles("c.yaml").unwrap()[0];
        let filters: Vec<&str> = p
            .plugins_at(ExtensionPoint::Filter)
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(
            filters,
            [
                "NodeUnschedulable",
                "TaintToleration",
                "NodeAffinity",
                "NodePorts",
                "NodeResourcesFit",
                "PodTopologySpread",
                "InterPodAffinity",
                "Extra"
            ]
        );
        assert_eq!(
            p.plugins_at(ExtensionPoint::Score),
            [("NodeResourcesFit".to_owned(), 5)]
        );
    }

    #[test]
    fn leader_election_defaults_and_rules_are_upstream_s() {
        let c = Configuration::parse("c.yaml", "{}").unwrap();
        let le = c
            .leader_election
            .clone()
            .unwrap_or_default()
            .resolve("c.yaml")
            .unwrap();
        assert!(le.enabled);
        assert_eq!(
            (le.lease_duration, le.renew_deadline, le.retry_period),
            (
                std::time::Duration::from_secs(15),
                std::time::Duration::from_secs(10),
                std::time::Duration::from_secs(2)
            )
        );
        assert_eq!(
            (le.name.as_str(), le.namespace.as_str()),
            ("berth", "kube-system")
        );

        let text = "leaderElection:\n  leaderElect: true\n  leaseDuration: 30s\n  renewDeadline: 20s\n  retryPeriod: 1s\n  resourceName: mine\n  resourceNamespace: sched\n";
        let c = Configuration::parse("c.yaml", text).unwrap();
        let le = c.leader_election.unwrap().resolve("c.yaml").unwrap();
        assert_eq!(le.lease_duration, std::time::Duration::from_secs(30));
        assert_eq!((le.name.as_str(), le.namespace.as_str()), ("mine", "sched"));

        for (text, want) in [
            (
                "leaderElection: {leaseDuration: 10s, renewDeadline: 10s}\n",
                "c.yaml: leaderElection.leaseDuration: 10s must be greater than renewDeadline 10s",
            ),
            (
                "leaderElection: {renewDeadline: 2s, retryPeriod: 2s}\n",
                "c.yaml: leaderElection.renewDeadline: 2s must be greater than 1.2 × retryPeriod 2s",
            ),
            (
                "leaderElection: {resourceLock: endpoints}\n",
                "c.yaml: leaderElection.resourceLock: \"endpoints\" is not supported; use \"leases\"",
            ),
        ] {
            let e = Configuration::parse("c.yaml", text).unwrap_err();
            assert_eq!(e.to_string(), want);
        }
        let e = Configuration::parse("c.yaml", "leaderElection: {leaseDuration: 15}\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("c.yaml: leaderElection.leaseDuration: ")
                && e.contains("unit is missing"),
            "{e}"
        );
        // Turned off, the timings are not checked.
        let c = Configuration::parse(
            "c.yaml",
            "leaderElection: {leaderElect: false, leaseDuration: 1s}\n",
        )
        .unwrap();
        assert!(
            !c.leader_election
                .unwrap()
                .resolve("c.yaml")
                .unwrap()
                .enabled
        );
    }

    #[test]
    fn errors_name_the_file_and_field() {
        let e = Configuration::parse(
            "c.yaml",
            "profiles:\n- schedulerName: x\n  plugins:\n    filtre: {}\n",
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("c.yaml: profiles[0].plugins"), "{msg}");
        assert!(msg.contains("filtre"), "{msg}");

        let e = Configuration::parse("c.yaml", "percentageOfNodesToScore: 101\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "c.yaml: percentageOfNodesToScore: 101 is not in 0..=100"
        );

        let c = Configuration::parse(
            "c.yaml",
            "profiles:\n- plugins:\n    score:\n      enabled: [{name: X, weight: -1}]\n",
        )
        .unwrap();
        let e = c.resolve_profiles("c.yaml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "c.yaml: profiles[0].plugins.score.enabled[0].weight: -1 is negative"
        );

        let c = Configuration::parse(
            "c.yaml",
            "profiles:\n- plugins:\n    queueSort:\n      disabled: [{name: '*'}]\n",
        )
        .unwrap();
        let e = c.resolve_profiles("c.yaml").unwrap_err();
        assert!(
            e.to_string().contains("exactly one queueSort plugin"),
            "{e}"
        );
    }
}
