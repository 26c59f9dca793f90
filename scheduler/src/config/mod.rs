//! Scheduler configuration in kube-scheduler's shape: a
//! `kubescheduler.config.k8s.io/v1` `KubeSchedulerConfiguration` (or Berth's older
//! `BerthConfiguration`, which reads the same). Profiles name plugins per extension
//! point and in `multiPoint`, merged with the default profile by upstream's rules
//! (the defaults are one `multiPoint` list; a plugin re-configured at a point moves to
//! the front there; `disabled` and `'*'` as upstream), score weights and plugin args.
//! Berth's additions live under the top-level `berth` field: where a plugin's
//! WebAssembly component comes from when it is not built in, and each plugin's
//! sandbox and failure policy ([`plugins`]).
//!
//! ```yaml
//! apiVersion: kubescheduler.config.k8s.io/v1
//! kind: KubeSchedulerConfiguration
//! percentageOfNodesToScore: 0
//! profiles:
//! - schedulerName: default-scheduler
//!   plugins:
//!     multiPoint:
//!       enabled:
//!       - name: MyPlugin
//!     score:
//!       enabled:
//!       - name: NodeResourcesFit
//!         weight: 2
//!   pluginConfig:
//!   - name: NodeResourcesFit
//!     args:
//!       scoringStrategy:
//!         type: MostAllocated
//! berth:
//!   modules:
//!   - name: MyPlugin
//!     path: ./my_plugin.wasm
//! ```

pub mod duration;
pub mod fields;
pub mod plugins;

use berth_sdk::ExtensionPoint;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

// Defined with the manifests, which may carry a configuration document: the cluster
// room sits below this one.
pub use berth_cluster::manifest::{UPSTREAM_API_VERSION, UPSTREAM_KIND};

/// The scheduler name pods get when they name none.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    // The OS error is part of the message, not a `source`: shown once in a chain.
    #[error("{file}: cannot read: {error}")]
    Read {
        /// The file.
        file: String,
        /// The OS error.
        error: std::io::Error,
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
    /// Several problems, each on its own line.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Many(Vec<ConfigError>),
}

impl ConfigError {
    /// One error, or all of them.
    pub fn many(mut errors: Vec<ConfigError>) -> Self {
        if errors.len() == 1 {
            errors.pop().expect("one")
        } else {
            ConfigError::Many(errors)
        }
    }

    /// The single errors.
    pub fn into_list(self) -> Vec<ConfigError> {
        match self {
            ConfigError::Many(v) => v.into_iter().flat_map(ConfigError::into_list).collect(),
            e => vec![e],
        }
    }
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
    /// Where plugins that are not built in come from (or built-in ones are replaced);
    /// `BerthConfiguration` only (a `KubeSchedulerConfiguration` says it under
    /// `berth.modules`). Read through [`Configuration::modules`].
    #[serde(default)]
    pub modules: Vec<ModuleSource>,
    /// Berth's additions to a `KubeSchedulerConfiguration`, kept in one place so that
    /// the rest of the file stays upstream's.
    #[serde(default)]
    pub berth: Option<BerthExtension>,
    /// Backoff after a pod's first failed attempt, in seconds (default 1).
    #[serde(default)]
    pub pod_initial_backoff_seconds: Option<i64>,
    /// The longest backoff, in seconds (default 10).
    #[serde(default)]
    pub pod_max_backoff_seconds: Option<i64>,
    /// Accepted for compatibility with upstream files; Berth serves no profiling
    /// endpoints.
    #[serde(default)]
    pub enable_profiling: Option<bool>,
    /// Accepted for compatibility with upstream files (see `enableProfiling`).
    #[serde(default)]
    pub enable_contention_profiling: Option<bool>,
    /// Accepted for compatibility: followers always keep their cache warm.
    #[serde(default)]
    pub delay_cache_until_active: Option<bool>,
    /// Scheduler extenders (webhooks): not supported; listed so that the error says so.
    #[serde(default)]
    pub extenders: Vec<serde_json::Value>,
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

/// Berth's part of a `KubeSchedulerConfiguration` (the top-level `berth` field).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BerthExtension {
    /// Where plugins that are not built in come from (or built-in ones are replaced).
    #[serde(default)]
    pub modules: Vec<ModuleSource>,
    /// Per-plugin sandbox and failure policy.
    #[serde(default)]
    pub plugins: Vec<plugins::PluginSettings>,
    /// The bound on every plugin instance's linear memory together (bytes or a
    /// quantity such as `640Mi`); none: only each instance's own `memoryLimit`.
    #[serde(default)]
    pub total_memory_limit: Option<plugins::ByteSize>,
    /// How the registries of `oci:` modules are reached and polled.
    #[serde(default)]
    pub oci: Option<OciSettings>,
}

/// Where a plugin module comes from: a file (`path`) or an OCI registry (`oci`);
/// exactly one of the two.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModuleSource {
    /// The plugin name profiles use; must match the module's own metadata.
    pub name: String,
    /// The component file (relative paths are relative to the configuration file).
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// The component in a registry, `oci://REGISTRY/REPOSITORY:TAG[@sha256:DIGEST]`
    /// (a wasm OCI artifact: one `application/wasm` layer). With a digest, that
    /// manifest is pulled; with a tag alone, `berth run` polls it (`berth.oci`).
    #[serde(default)]
    pub oci: Option<String>,
    /// The expected sha256 of the component's bytes, hex; a mismatch refuses the
    /// module.
    #[serde(default)]
    pub sha256: Option<String>,
    /// How its registry is reached: `berth.oci`'s credentials and plain-HTTP
    /// registries, filled in by [`Configuration::modules`].
    #[serde(skip)]
    pub access: berth_runtime::oci::Access,
}

impl ModuleSource {
    /// A module file.
    pub fn file(name: &str, path: impl Into<PathBuf>) -> Self {
        ModuleSource {
            name: name.to_owned(),
            path: Some(path.into()),
            ..ModuleSource::default()
        }
    }

    /// Where it comes from, as messages and `/plugins` name it: the file, or the
    /// `oci://` reference.
    pub fn location(&self) -> String {
        match (&self.oci, &self.path) {
            (Some(r), _) => r.clone(),
            (None, Some(p)) => p.display().to_string(),
            (None, None) => String::new(),
        }
    }

    /// The registry reference, when the module comes from one and the reference
    /// parses ([`Configuration::check`] refuses one that does not).
    pub fn oci_ref(&self) -> Option<berth_runtime::oci::OciRef> {
        berth_runtime::oci::OciRef::parse(self.oci.as_deref()?).ok()
    }

    /// Checks that it names exactly one of `path` and `oci`, and a well-formed
    /// reference; `field` is its field path (`berth.modules[0]`).
    fn check(&self, file: &str, field: &str) -> Vec<ConfigError> {
        let invalid = |f: String, message: String| ConfigError::Invalid {
            file: file.to_owned(),
            field: f,
            message,
        };
        let mut errors = Vec::new();
        match (&self.path, &self.oci) {
            (Some(_), Some(_)) => errors.push(invalid(
                field.to_owned(),
                "gives both path and oci; a module comes from one of them".into(),
            )),
            (None, None) => errors.push(invalid(
                field.to_owned(),
                format!(
                    "gives neither path (a component file) nor oci ({}): say where module {} comes from",
                    berth_runtime::oci::SHAPE,
                    self.name
                ),
            )),
            (None, Some(r)) => {
                if let Err(why) = berth_runtime::oci::OciRef::parse(r) {
                    errors.push(invalid(format!("{field}.oci"), why));
                }
            }
            (Some(_), None) => {}
        }
        errors
    }
}

/// `berth.oci`: how modules named by `oci:` references are reached and followed.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OciSettings {
    /// A docker config file (`{"auths": {"REGISTRY": {"auth": ...}}}`, as a
    /// `kubernetes.io/dockerconfigjson` Secret's `.dockerconfigjson` key holds)
    /// with the registries' credentials; relative to the configuration file. None:
    /// registries are asked anonymously.
    #[serde(default)]
    pub docker_config: Option<PathBuf>,
    /// How often `berth run` asks the registries where the tags of `oci:` modules
    /// without a digest point, and swaps in a module whose tag moved (default 1m;
    /// `0` never asks).
    #[serde(default, deserialize_with = "duration::deserialize_opt")]
    pub poll_interval: Option<std::time::Duration>,
    /// Registries (`HOST:PORT`, as references name them) reached over plain HTTP,
    /// such as one on loopback; every other is reached over HTTPS.
    #[serde(default)]
    pub plain_http: Vec<String>,
}

/// How often `berth run` polls the tags of `oci:` modules when `berth.oci.pollInterval`
/// is not given.
pub const DEFAULT_OCI_POLL_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// The shortest `berth.oci.pollInterval` other than 0.
pub const MIN_OCI_POLL_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

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
    /// This profile's percentage of nodes to score (overrides the top-level one).
    #[serde(default)]
    pub percentage_of_nodes_to_score: Option<u32>,
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

/// Declares [`PluginsConfig`] from the table of extension points
/// ([`berth_sdk::for_each_extension_point!`]): one field per point a profile
/// configures, named as upstream's configuration names it.
macro_rules! plugins_config {
    ( ()
      $( $gen:ident interface $iface:ident {
            points: [ $( $P:ident $pf:ident $pname:literal $pdoc:literal ),* ],
            also: [ $( $A:ident $af:ident $aname:literal $adoc:literal ),* ],
            calls: [ $( $kind:ident $body:tt ),* $(,)? ],
      } )*
    ) => {
        /// Plugins per extension point.
        #[derive(Clone, Debug, Default, Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct PluginsConfig {
            /// Plugins enabled at every extension point they implement (upstream's
            /// default profile is a multiPoint list).
            #[serde(default)]
            pub multi_point: PluginSet,
            $( $(
                #[doc = $pdoc]
                #[serde(default, rename = $pname)]
                pub $pf: PluginSet,
            )* )*
        }

        impl PluginsConfig {
            /// Each configurable point's set, in upstream's order.
            fn sets(&self) -> [(ExtensionPoint, &PluginSet); ExtensionPoint::CONFIGURABLE.len()] {
                [ $( $( (ExtensionPoint::$P, &self.$pf), )* )* ]
            }
        }
    };
}

berth_sdk::for_each_extension_point!(plugins_config);

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
    /// Weight (score and placementScore only; default 1).
    #[serde(default)]
    pub weight: Option<i64>,
}

/// The args `args` (a profile's, by plugin name) give `plugin`, as the JSON its
/// `configure` receives: `null` when the profile gives it none.
pub fn args_json(args: &BTreeMap<String, serde_json::Value>, plugin: &str) -> String {
    args.get(plugin)
        .unwrap_or(&serde_json::Value::Null)
        .to_string()
}

/// A profile after merging with the defaults and expanding `multiPoint`: what the
/// framework runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// The scheduler name it serves.
    pub scheduler_name: String,
    /// Plugins per extension point, in order, with their weights (1 except at the
    /// weighted points, Score and PlacementScore).
    pub points: BTreeMap<ExtensionPoint, Vec<(String, i64)>>,
    /// Args per plugin name.
    pub args: BTreeMap<String, serde_json::Value>,
    /// The profile's own percentage of nodes to score, if it sets one.
    pub percentage_of_nodes_to_score: Option<u32>,
    /// The plugins of the profile whose failures drop their scores for the cycle
    /// instead of failing the pod (`failurePolicy: FailOpen`).
    pub fail_open: std::collections::BTreeSet<String>,
    /// The candidate module run beside each plugin of the profile that has one
    /// (`berth.plugins[].shadow`), by plugin name.
    pub shadows: BTreeMap<String, Shadow>,
}

/// A shadow run's candidate, as a profile runs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Shadow {
    /// The component file.
    pub path: PathBuf,
    /// Its expected sha256, if the configuration gives one.
    pub sha256: Option<String>,
    /// The candidate's args (its own, else the live plugin's in this profile).
    pub args: serde_json::Value,
    /// Its index in `berth.plugins` (for error field paths).
    pub index: usize,
}

impl Shadow {
    /// The field of the configuration that names it.
    pub fn field(&self) -> String {
        format!("berth.plugins[{}].shadow", self.index)
    }
}

/// The extension points a shadow run compares; a shadowed plugin must be enabled at
/// one of them.
pub const SHADOWED_POINTS: [ExtensionPoint; 2] = [ExtensionPoint::Filter, ExtensionPoint::Score];

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

/// Upstream's default profile: one `multiPoint` list, restricted to the plugins Berth
/// ships, in upstream's order, with upstream's score weights (`None`: no weight given).
/// GangScheduling comes last, and only with `GenericWorkload` on, as upstream adds it.
pub fn default_multi_point(generic_workload: bool) -> Vec<PluginRef> {
    [
        ("SchedulingGates", None),
        ("PrioritySort", None),
        ("NodeName", None),
        ("NodeUnschedulable", None),
        ("TaintToleration", Some(3)),
        ("NodeAffinity", Some(2)),
        ("NodePorts", None),
        ("NodeResourcesFit", Some(1)),
        ("VolumeRestrictions", None),
        ("NodeVolumeLimits", None),
        ("VolumeBinding", None),
        ("VolumeZone", None),
        ("PodTopologySpread", Some(2)),
        ("InterPodAffinity", Some(2)),
        ("DynamicResources", Some(2)),
        ("DefaultPreemption", None),
        ("NodeResourcesBalancedAllocation", Some(1)),
        ("ImageLocality", Some(1)),
        ("DefaultBinder", None),
        ("NodeDeclaredFeatures", None),
        ("GangScheduling", None),
    ]
    .into_iter()
    .filter(|(name, _)| generic_workload || *name != "GangScheduling")
    .map(|(name, weight)| PluginRef {
        name: name.to_owned(),
        weight,
    })
    .collect()
}

/// In-tree plugins of upstream's default profile that Berth does not ship yet: an
/// upstream file may disable them or give them args (ignored, with a warning), but
/// not enable them. Berth ships every one now; the list stays for the next.
pub const NOT_YET_SHIPPED: [&str; 0] = [];

/// A plugin set after merging with the defaults (upstream's `mergePluginSet`): the
/// defaults minus the disabled ones, a default the user enabled again replaced in
/// place, then the user's other plugins in their order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MergedSet {
    /// Enabled, in order.
    pub enabled: Vec<PluginRef>,
    /// Disabled names (`*`: all).
    pub disabled: Vec<String>,
}

fn merge_set(defaults: &[PluginRef], custom: &PluginSet) -> MergedSet {
    let disabled: Vec<String> = custom.disabled.iter().map(|d| d.name.clone()).collect();
    let mut replaced: Vec<usize> = Vec::new();
    let mut enabled = Vec::new();
    if !disabled.iter().any(|d| d == "*") {
        for d in defaults {
            if disabled.contains(&d.name) {
                continue;
            }
            match custom.enabled.iter().position(|c| c.name == d.name) {
                Some(i) => {
                    replaced.push(i);
                    enabled.push(custom.enabled[i].clone());
                }
                None => enabled.push(d.clone()),
            }
        }
    }
    for (i, c) in custom.enabled.iter().enumerate() {
        if !replaced.contains(&i) {
            enabled.push(c.clone());
        }
    }
    MergedSet { enabled, disabled }
}

/// A profile after merging with the defaults, before `multiPoint` is expanded (which
/// needs to know the extension points each plugin implements).
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileSpec {
    /// The scheduler name it serves.
    pub scheduler_name: String,
    /// The merged `multiPoint` set.
    pub multi_point: MergedSet,
    /// The merged set of each extension point.
    pub sets: BTreeMap<ExtensionPoint, MergedSet>,
    /// Args per plugin name.
    pub args: BTreeMap<String, serde_json::Value>,
    /// The profile's own percentage of nodes to score.
    pub percentage_of_nodes_to_score: Option<u32>,
    /// Its index in `profiles` (for error field paths).
    pub index: usize,
    /// The `multiPoint` plugins the file itself enables, in its order (for error
    /// field paths).
    pub multi_point_in_file: Vec<String>,
    /// Plugins with `failurePolicy: FailOpen`, with their index in `berth.plugins`
    /// (for error field paths).
    pub fail_open: Vec<(String, usize)>,
    /// Plugins with a shadow candidate, with their index in `berth.plugins`.
    pub shadows: Vec<(String, usize, plugins::ShadowConfig)>,
}

/// Every plugin the profiles enable anywhere, once, in first-use order: the modules
/// to load before [`expand_profiles`].
pub fn plugin_names_of(specs: &[ProfileSpec]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for n in specs.iter().flat_map(ProfileSpec::plugin_names) {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

impl ProfileSpec {
    /// Every plugin the profile enables anywhere, once, in first-use order: the
    /// modules to load before [`ProfileSpec::expand`].
    pub fn plugin_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        let all = self
            .multi_point
            .enabled
            .iter()
            .chain(self.sets.values().flat_map(|s| s.enabled.iter()));
        for p in all {
            if !names.contains(&p.name) {
                names.push(p.name.clone());
            }
        }
        names
    }

    /// Expands `multiPoint` as upstream's framework does: at each extension point,
    /// first the plugins the point's own list re-configures (in that list's order), then
    /// the `multiPoint` plugins that implement the point and are not disabled there,
    /// then the rest of the point's own list. `*` disabled at a point keeps only its
    /// own list. A Score weight comes from the score list, else from `multiPoint`, else
    /// it is 1. `implements(name)` gives a plugin's extension points (`None`: unknown).
    /// Every problem is reported, not only the first.
    pub fn expand(
        &self,
        file: &str,
        implements: &dyn Fn(&str) -> Option<Vec<ExtensionPoint>>,
    ) -> Result<Profile, ConfigError> {
        let mut errors: Vec<ConfigError> = Vec::new();
        for (k, name) in self.multi_point_in_file.iter().enumerate() {
            if implements(name).is_none() {
                errors.push(self.invalid(
                    file,
                    &format!("multiPoint.enabled[{k}]"),
                    format!("unknown plugin {name:?}"),
                ));
            }
        }
        let mut points: BTreeMap<ExtensionPoint, Vec<(String, i64)>> = BTreeMap::new();
        for point in CONFIGURABLE_POINTS {
            let empty = MergedSet::default();
            let set = self.sets.get(&point).unwrap_or(&empty);
            self.check_enabled(file, point, set, implements, &mut errors);
            let weighted = self.merged_at(point, set, implements);
            if !weighted.is_empty() {
                points.insert(point, weighted);
            }
        }
        if points.get(&ExtensionPoint::QueueSort).map_or(0, Vec::len) != 1 {
            errors.push(self.invalid(
                file,
                "queueSort",
                "exactly one queueSort plugin must be enabled".into(),
            ));
        }
        if points.get(&ExtensionPoint::Bind).is_none_or(Vec::is_empty) {
            errors.push(self.invalid(
                file,
                "bind",
                "at least one bind plugin must be enabled".into(),
            ));
        }
        let fail_open = self.fail_open_of(file, &points, &mut errors);
        let shadows = self.shadows_of(file, &points, &mut errors);
        if !errors.is_empty() {
            return Err(ConfigError::many(errors));
        }
        Ok(Profile {
            scheduler_name: self.scheduler_name.clone(),
            points,
            args: self.args.clone(),
            percentage_of_nodes_to_score: self.percentage_of_nodes_to_score,
            fail_open,
            shadows,
        })
    }

    /// An error in the field `f` of this profile's `plugins`.
    fn invalid(&self, file: &str, f: &str, message: String) -> ConfigError {
        ConfigError::Invalid {
            file: file.to_owned(),
            field: format!("profiles[{}].plugins.{f}", self.index),
            message,
        }
    }

    /// Checks the plugins `set` enables at `point`: known, implementing the point,
    /// weighted only where weights apply.
    fn check_enabled(
        &self,
        file: &str,
        point: ExtensionPoint,
        set: &MergedSet,
        implements: &dyn Fn(&str) -> Option<Vec<ExtensionPoint>>,
        errors: &mut Vec<ConfigError>,
    ) {
        let at = point.as_str();
        for (k, p) in set.enabled.iter().enumerate() {
            match implements(&p.name) {
                None => errors.push(self.invalid(
                    file,
                    &format!("{at}.enabled[{k}]"),
                    format!("unknown plugin {:?}", p.name),
                )),
                Some(pts) if !pts.contains(&point) => {
                    // The points a profile can enable it at: not those that come
                    // with another (NormalizeScore) or that the host asks of every
                    // plugin implementing them (SignPod).
                    let configurable: Vec<ExtensionPoint> = pts
                        .into_iter()
                        .filter(|p| CONFIGURABLE_POINTS.contains(p))
                        .collect();
                    errors.push(self.invalid(
                        file,
                        &format!("{at}.enabled[{k}]"),
                        format!(
                            "plugin {:?} does not implement {at} (it implements {})",
                            p.name,
                            describe_points(&configurable)
                        ),
                    ))
                }
                Some(_) => {}
            }
            if !point.weighted() && p.weight.is_some() {
                errors.push(self.invalid(
                    file,
                    &format!("{at}.enabled[{k}].weight"),
                    format!(
                        "weights apply to {} plugins only",
                        ExtensionPoint::ALL
                            .iter()
                            .filter(|p| p.weighted())
                            .map(|p| p.as_str())
                            .collect::<Vec<_>>()
                            .join(" and ")
                    ),
                ));
            }
        }
    }

    /// The plugins at `point`, in upstream's merge order, with their weights: with
    /// `disabled: ['*']` the point's own list; else the `multiPoint` plugins that
    /// implement it and are not disabled (those the point re-configures first), then
    /// the point's own.
    fn merged_at(
        &self,
        point: ExtensionPoint,
        set: &MergedSet,
        implements: &dyn Fn(&str) -> Option<Vec<ExtensionPoint>>,
    ) -> Vec<(String, i64)> {
        let own: Vec<&str> = set.enabled.iter().map(|p| p.name.as_str()).collect();
        let mut list: Vec<&str> = Vec::new();
        if set.disabled.iter().any(|d| d == "*") {
            list.extend(own.iter().copied());
        } else {
            let mut overrides: Vec<&str> = Vec::new();
            let mut from_multi: Vec<&str> = Vec::new();
            for p in &self.multi_point.enabled {
                let implemented = implements(&p.name).is_some_and(|pts| pts.contains(&point));
                if !implemented || set.disabled.contains(&p.name) {
                    continue;
                }
                if own.contains(&p.name.as_str()) {
                    overrides.push(&p.name);
                } else if !from_multi.contains(&p.name.as_str()) {
                    from_multi.push(&p.name);
                }
            }
            list.extend(overrides.iter().copied());
            list.extend(from_multi);
            list.extend(own.iter().copied().filter(|n| !overrides.contains(n)));
        }
        list.iter()
            .map(|name| {
                let weight = if point.weighted() {
                    set.enabled
                        .iter()
                        .chain(self.multi_point.enabled.iter())
                        .find(|p| p.name == *name)
                        .and_then(|p| p.weight)
                        .filter(|w| *w != 0)
                        .unwrap_or(1)
                } else {
                    1
                };
                ((*name).to_owned(), weight)
            })
            .collect()
    }

    /// The plugins that fail open. Failing open drops a plugin's scores; a plugin
    /// that also filters, reserves or binds would let a pod through that it should
    /// have stopped, so that is an error.
    fn fail_open_of(
        &self,
        file: &str,
        points: &BTreeMap<ExtensionPoint, Vec<(String, i64)>>,
        errors: &mut Vec<ConfigError>,
    ) -> std::collections::BTreeSet<String> {
        let mut fail_open = std::collections::BTreeSet::new();
        for (name, k) in &self.fail_open {
            let used: Vec<&str> = points
                .iter()
                .filter(|(_, list)| list.iter().any(|(n, _)| n == name))
                .map(|(point, _)| point.as_str())
                .collect();
            if used.is_empty() {
                continue;
            }
            let others: Vec<&str> = used
                .iter()
                .copied()
                .filter(|p| !SCORE_POINTS.iter().any(|s| s.as_str() == *p))
                .collect();
            if others.is_empty() {
                fail_open.insert(name.clone());
            } else {
                errors.push(ConfigError::Invalid {
                    file: file.to_owned(),
                    field: format!("berth.plugins[{k}].failurePolicy"),
                    message: format!(
                        "FailOpen is allowed only for plugins used at preScore and score alone; profile {} enables {name} at {}",
                        self.scheduler_name,
                        others.join(", ")
                    ),
                });
            }
        }
        fail_open
    }

    /// The shadow runs of the profile's plugins. A shadow compares Filter and Score
    /// answers: a plugin enabled at neither has nothing to compare (an error).
    fn shadows_of(
        &self,
        file: &str,
        points: &BTreeMap<ExtensionPoint, Vec<(String, i64)>>,
        errors: &mut Vec<ConfigError>,
    ) -> BTreeMap<String, Shadow> {
        let mut shadows = BTreeMap::new();
        for (name, k, shadow) in &self.shadows {
            let used: Vec<ExtensionPoint> = points
                .iter()
                .filter(|(_, list)| list.iter().any(|(n, _)| n == name))
                .map(|(point, _)| *point)
                .collect();
            if used.is_empty() {
                continue;
            }
            if !used.iter().any(|p| SHADOWED_POINTS.contains(p)) {
                errors.push(ConfigError::Invalid {
                    file: file.to_owned(),
                    field: format!("berth.plugins[{k}].shadow"),
                    message: format!(
                        "a shadow run compares Filter and Score answers; profile {} enables {name} at {} only",
                        self.scheduler_name,
                        describe_points(&used)
                    ),
                });
                continue;
            }
            shadows.insert(
                name.clone(),
                Shadow {
                    path: shadow.path.clone(),
                    sha256: shadow.sha256.clone(),
                    args: shadow
                        .args
                        .clone()
                        .or_else(|| self.args.get(name).cloned())
                        .unwrap_or(serde_json::Value::Null),
                    index: *k,
                },
            );
        }
        shadows
    }
}

/// Extension points as a message lists them: `Filter, Score`.
fn describe_points(points: &[ExtensionPoint]) -> String {
    points
        .iter()
        .map(|p| p.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The extension points a plugin with `failurePolicy: FailOpen` may be enabled at:
/// its failures there only drop its scores.
pub const SCORE_POINTS: [ExtensionPoint; 2] = [ExtensionPoint::PreScore, ExtensionPoint::Score];

/// The extension points a profile configures, in upstream's order (NormalizeScore is
/// part of Score).
pub const CONFIGURABLE_POINTS: [ExtensionPoint; ExtensionPoint::CONFIGURABLE.len()] =
    ExtensionPoint::CONFIGURABLE;

impl Configuration {
    /// Reads a configuration file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let config = Self::load_unchecked(path)?;
        config.check(&path.display().to_string())?;
        Ok(config)
    }

    /// Reads a configuration file, checking only its syntax and types (see
    /// [`Configuration::check`] for the values).
    pub fn load_unchecked(path: &Path) -> Result<Self, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            file: file.clone(),
            error,
        })?;
        let mut config = Self::parse_unchecked(&file, &text)?;
        // Module paths are relative to the file.
        config.resolve_paths(path.parent().unwrap_or(Path::new(".")));
        Ok(config)
    }

    /// Makes the relative paths of the configuration (modules, directories granted to
    /// plugins, the kubeconfig) relative to `base`, the directory of the file it was
    /// read from.
    pub fn resolve_paths(&mut self, base: &Path) {
        let config = self;
        let extension = config.berth.iter_mut().flat_map(|b| b.modules.iter_mut());
        for m in config.modules.iter_mut().chain(extension) {
            if let Some(p) = &mut m.path
                && p.is_relative()
            {
                *p = base.join(&*p);
            }
        }
        if let Some(f) = config
            .berth
            .as_mut()
            .and_then(|b| b.oci.as_mut())
            .and_then(|o| o.docker_config.as_mut())
            && f.is_relative()
            && !f.as_os_str().is_empty()
        {
            *f = base.join(&*f);
        }
        for p in config.berth.iter_mut().flat_map(|b| b.plugins.iter_mut()) {
            p.resolve_paths(base);
        }
        if let Some(cc) = &mut config.client_connection
            && let Some(k) = &mut cc.kubeconfig
            && k.is_relative()
            && !k.as_os_str().is_empty()
        {
            *k = base.join(&*k);
        }
    }

    /// Parses a configuration from YAML (or JSON) text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, ConfigError> {
        let config = Self::parse_unchecked(file, text)?;
        config.check(file)?;
        Ok(config)
    }

    /// Parses the syntax and types only.
    pub fn parse_unchecked(file: &str, text: &str) -> Result<Self, ConfigError> {
        let config: Configuration = berth_cluster::yaml::from_str(text).map_err(|e| {
            let message = if e.line > 0 {
                format!("{} (line {}, column {})", e.message, e.line, e.column)
            } else {
                e.message
            };
            ConfigError::Parse {
                file: file.to_owned(),
                // The document as a whole (a syntax error): `.`, as serde_path_to_error
                // writes the top.
                field: if e.path.is_empty() {
                    ".".to_owned()
                } else {
                    e.path
                },
                message,
            }
        })?;
        Ok(config)
    }

    /// Checks the values (kind, version, ranges, leader election): every problem at
    /// once.
    pub fn check(&self, file: &str) -> Result<(), ConfigError> {
        let config = self;
        let invalid = |field: &str, message: String| ConfigError::Invalid {
            file: file.to_owned(),
            field: field.to_owned(),
            message,
        };
        let mut errors: Vec<ConfigError> = Vec::new();
        let upstream = config.kind.as_deref() == Some(UPSTREAM_KIND);
        match config.kind.as_deref() {
            None | Some("BerthConfiguration") | Some(UPSTREAM_KIND) => {}
            Some(kind) => errors.push(invalid(
                "kind",
                format!("expected {UPSTREAM_KIND} or BerthConfiguration, got {kind:?}"),
            )),
        }
        let want_version = if upstream {
            UPSTREAM_API_VERSION
        } else {
            "berth.dev/v1alpha1"
        };
        if let Some(v) = &config.api_version
            && v != want_version
        {
            errors.push(invalid(
                "apiVersion",
                format!("expected {want_version}, got {v:?}"),
            ));
        }
        if upstream && !config.modules.is_empty() {
            errors.push(invalid(
                "modules",
                "a KubeSchedulerConfiguration names modules under berth.modules".into(),
            ));
        }
        if !config.extenders.is_empty() {
            errors.push(invalid(
                "extenders",
                "scheduler extenders are not supported; write the extension as a plugin module"
                    .into(),
            ));
        }
        if let Some(s) = config.pod_initial_backoff_seconds
            && s <= 0
        {
            errors.push(invalid(
                "podInitialBackoffSeconds",
                format!("{s} must be greater than 0"),
            ));
        }
        if let (Some(max), initial) = (
            config.pod_max_backoff_seconds,
            config.pod_initial_backoff_seconds.unwrap_or(1),
        ) && max < initial
        {
            errors.push(invalid(
                "podMaxBackoffSeconds",
                format!("{max} must be at least podInitialBackoffSeconds ({initial})"),
            ));
        }
        if config.parallelism == Some(0) {
            errors.push(invalid("parallelism", "must be at least 1".into()));
        }
        if let Some(cc) = &config.client_connection
            && let Some(qps) = cc.qps
            && !qps.is_finite()
        {
            errors.push(invalid(
                "clientConnection.qps",
                format!("{qps} is not a number of requests per second"),
            ));
        }
        if let Err(e) = config
            .leader_election
            .clone()
            .unwrap_or_default()
            .resolve(file)
        {
            errors.push(e);
        }
        if let Some(p) = config.percentage_of_nodes_to_score
            && p > 100
        {
            errors.push(invalid(
                "percentageOfNodesToScore",
                format!("{p} is not in 0..=100"),
            ));
        }
        errors.extend(self.check_modules(file));
        if errors.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::many(errors))
        }
    }

    /// Checks the modules and Berth's own settings (`berth:`): the memory limit of
    /// all instances, each module's source, the OCI settings, each plugin's settings
    /// (given once).
    fn check_modules(&self, file: &str) -> Vec<ConfigError> {
        let config = self;
        let invalid = |field: &str, message: String| ConfigError::Invalid {
            file: file.to_owned(),
            field: field.to_owned(),
            message,
        };
        let mut errors: Vec<ConfigError> = Vec::new();
        if let Some(total) = config
            .berth
            .as_ref()
            .and_then(|b| b.total_memory_limit.as_ref())
        {
            match total.bytes() {
                Err(e) => errors.push(invalid("berth.totalMemoryLimit", e)),
                Ok(b) if b < berth_runtime::wasm::limits::MIN_MEMORY_BYTES => errors.push(invalid(
                    "berth.totalMemoryLimit",
                    format!("{b} bytes is less than one plugin instance needs (1Mi)"),
                )),
                Ok(_) => {}
            }
        }
        for (k, m) in config.modules.iter().enumerate() {
            errors.extend(m.check(file, &format!("modules[{k}]")));
        }
        for (k, m) in config
            .berth
            .iter()
            .flat_map(|b| b.modules.iter())
            .enumerate()
        {
            errors.extend(m.check(file, &format!("berth.modules[{k}]")));
        }
        if let Some(oci) = config.berth.as_ref().and_then(|b| b.oci.as_ref()) {
            if let Some(i) = oci.poll_interval
                && !i.is_zero()
                && i < MIN_OCI_POLL_INTERVAL
            {
                errors.push(invalid(
                    "berth.oci.pollInterval",
                    format!("{i:?} is shorter than 1s (0 never polls)"),
                ));
            }
            for (k, r) in oci.plain_http.iter().enumerate() {
                if r.is_empty() || r.contains('/') {
                    errors.push(invalid(
                        &format!("berth.oci.plainHttp[{k}]"),
                        format!("{r:?} is not a registry (HOST or HOST:PORT, no scheme or path)"),
                    ));
                }
            }
            if oci
                .docker_config
                .as_ref()
                .is_some_and(|f| f.as_os_str().is_empty())
            {
                errors.push(invalid(
                    "berth.oci.dockerConfig",
                    "empty: name a docker config file, or leave the field out".into(),
                ));
            }
        }
        let settings = config.berth.iter().flat_map(|b| b.plugins.iter());
        let mut seen: Vec<&str> = Vec::new();
        for (k, p) in settings.enumerate() {
            if seen.contains(&p.name.as_str()) {
                errors.push(invalid(
                    &format!("berth.plugins[{k}].name"),
                    format!("settings for {} are given twice", p.name),
                ));
                continue;
            }
            seen.push(&p.name);
            errors.extend(p.check(file, k));
        }
        errors
    }

    /// The profiles after merging with the defaults (upstream's rules; a
    /// configuration with no profiles has one default profile), before `multiPoint`
    /// is expanded. Every problem is reported, not only the first. `generic_workload` is
    /// the `GenericWorkload` gate, which decides whether the defaults have GangScheduling.
    pub fn resolve_profiles(
        &self,
        file: &str,
        generic_workload: bool,
    ) -> Result<Vec<ProfileSpec>, ConfigError> {
        let (specs, errors) = self.resolve_profiles_lenient(file, generic_workload);
        if errors.is_empty() {
            Ok(specs)
        } else {
            Err(ConfigError::many(errors))
        }
    }

    /// [`Configuration::resolve_profiles`], returning what could be resolved beside the
    /// problems (for reporting every problem at once).
    pub fn resolve_profiles_lenient(
        &self,
        file: &str,
        generic_workload: bool,
    ) -> (Vec<ProfileSpec>, Vec<ConfigError>) {
        let profiles = if self.profiles.is_empty() {
            vec![ProfileConfig::default()]
        } else {
            self.profiles.clone()
        };
        let mut errors: Vec<ConfigError> = Vec::new();
        let mut out: Vec<ProfileSpec> = Vec::new();
        let defaults = default_multi_point(generic_workload);
        for (i, p) in profiles.iter().enumerate() {
            let field = |f: &str| format!("profiles[{i}].{f}");
            let mut invalid = |f: String, message: String| {
                errors.push(ConfigError::Invalid {
                    file: file.to_owned(),
                    field: f,
                    message,
                })
            };
            let scheduler_name = p
                .scheduler_name
                .clone()
                .unwrap_or_else(|| DEFAULT_SCHEDULER_NAME.to_owned());
            if out.iter().any(|o| o.scheduler_name == scheduler_name) {
                invalid(
                    field("schedulerName"),
                    format!("duplicate scheduler name {scheduler_name:?}"),
                );
            }
            if let Some(pct) = p.percentage_of_nodes_to_score
                && pct > 100
            {
                invalid(
                    field("percentageOfNodesToScore"),
                    format!("{pct} is not in 0..=100"),
                );
            }
            let mut named = vec![("multiPoint", &p.plugins.multi_point)];
            named.extend(p.plugins.sets().map(|(pt, s)| (pt.as_str(), s)));
            for (at, set) in named {
                for (k, e) in set.enabled.iter().enumerate() {
                    if set.enabled[..k].iter().any(|q| q.name == e.name) {
                        invalid(
                            field(&format!("plugins.{at}.enabled[{k}]")),
                            format!("plugin {:?} is enabled twice", e.name),
                        );
                    }
                    if let Some(w) = e.weight
                        && w < 0
                    {
                        invalid(
                            field(&format!("plugins.{at}.enabled[{k}].weight")),
                            format!("{w} is negative"),
                        );
                    }
                    if NOT_YET_SHIPPED.contains(&e.name.as_str()) {
                        invalid(
                            field(&format!("plugins.{at}.enabled[{k}]")),
                            format!(
                                "{} is an in-tree plugin Berth does not ship yet; disable it or leave it out",
                                e.name
                            ),
                        );
                    }
                }
            }
            let multi_point = merge_set(&defaults, &p.plugins.multi_point);
            let sets: BTreeMap<ExtensionPoint, MergedSet> = p
                .plugins
                .sets()
                .into_iter()
                .map(|(point, set)| (point, merge_set(&[], set)))
                .filter(|(_, m)| !m.enabled.is_empty() || !m.disabled.is_empty())
                .collect();
            let mut args = BTreeMap::new();
            for (j, a) in p.plugin_config.iter().enumerate() {
                if NOT_YET_SHIPPED.contains(&a.name.as_str()) {
                    tracing::warn!(
                        "{file}: profiles[{i}].pluginConfig[{j}]: args of {} ignored: Berth does not ship it yet",
                        a.name
                    );
                    continue;
                }
                if args.insert(a.name.clone(), a.args.clone()).is_some() {
                    invalid(
                        field(&format!("pluginConfig[{j}].name")),
                        format!("duplicate args for {}", a.name),
                    );
                }
            }
            out.push(ProfileSpec {
                scheduler_name,
                multi_point,
                sets,
                args,
                percentage_of_nodes_to_score: p.percentage_of_nodes_to_score,
                index: i,
                multi_point_in_file: p
                    .plugins
                    .multi_point
                    .enabled
                    .iter()
                    .map(|e| e.name.clone())
                    .collect(),
                fail_open: self
                    .berth
                    .iter()
                    .flat_map(|b| b.plugins.iter())
                    .enumerate()
                    .filter(|(_, s)| s.fails_open())
                    .map(|(k, s)| (s.name.clone(), k))
                    .collect(),
                shadows: self
                    .berth
                    .iter()
                    .flat_map(|b| b.plugins.iter())
                    .enumerate()
                    .filter_map(|(k, s)| Some((s.name.clone(), k, s.shadow.clone()?)))
                    .collect(),
            });
        }
        (out, errors)
    }

    /// Where plugin modules come from: `berth.modules`, and the top-level `modules` of
    /// a `BerthConfiguration`.
    pub fn modules(&self) -> Vec<ModuleSource> {
        let mut all = self.modules.clone();
        if let Some(b) = &self.berth {
            all.extend(b.modules.iter().cloned());
        }
        let access = self.oci_access();
        for m in &mut all {
            m.access = access.clone();
        }
        all
    }

    /// How the registries of `oci:` modules are reached (`berth.oci`).
    pub fn oci_access(&self) -> berth_runtime::oci::Access {
        let oci = self.berth.as_ref().and_then(|b| b.oci.as_ref());
        berth_runtime::oci::Access {
            docker_config: oci.and_then(|o| o.docker_config.clone()),
            plain_http: oci.map(|o| o.plain_http.clone()).unwrap_or_default(),
        }
    }

    /// How often `berth run` polls the tags of `oci:` modules; none: never
    /// (`berth.oci.pollInterval: 0`).
    pub fn oci_poll_interval(&self) -> Option<std::time::Duration> {
        let given = self
            .berth
            .as_ref()
            .and_then(|b| b.oci.as_ref())
            .and_then(|o| o.poll_interval);
        match given {
            Some(d) if d.is_zero() => None,
            Some(d) => Some(d),
            None => Some(DEFAULT_OCI_POLL_INTERVAL),
        }
    }

    /// The settings of a plugin under `berth.plugins`, if any.
    pub fn plugin_settings(&self, name: &str) -> Option<&plugins::PluginSettings> {
        self.berth
            .as_ref()
            .and_then(|b| b.plugins.iter().find(|p| p.name == name))
    }

    /// `berth.totalMemoryLimit` in bytes (checked by [`Configuration::check`]).
    pub fn total_memory_limit(&self) -> Option<usize> {
        let total = self.berth.as_ref()?.total_memory_limit.as_ref()?;
        total.bytes().ok().and_then(|b| usize::try_from(b).ok())
    }

    /// The sandbox of a plugin: its settings over `defaults`, nothing granted unless
    /// the settings grant it.
    pub fn sandbox_for(
        &self,
        name: &str,
        defaults: berth_runtime::wasm::Limits,
    ) -> berth_runtime::wasm::Sandbox {
        match self.plugin_settings(name) {
            Some(s) => s.sandbox(defaults),
            None => berth_runtime::wasm::Sandbox {
                limits: defaults,
                grants: berth_runtime::wasm::Grants::default(),
            },
        }
    }

    /// Settings under `berth.plugins` for a plugin that is neither built in nor named
    /// by a module: a typo would otherwise leave the intended plugin unconfined by
    /// them without a word. `is_builtin` says whether a name is a built-in plugin (the
    /// registry knows; this room loads no modules).
    pub fn unknown_plugin_settings(
        &self,
        file: &str,
        is_builtin: impl Fn(&str) -> bool,
    ) -> Vec<ConfigError> {
        let modules = self.modules();
        self.berth
            .iter()
            .flat_map(|b| b.plugins.iter())
            .enumerate()
            .filter(|(_, p)| {
                !p.name.is_empty()
                    && !is_builtin(&p.name)
                    && !modules.iter().any(|m| m.name == p.name)
            })
            .map(|(k, p)| ConfigError::Invalid {
                file: file.to_owned(),
                field: format!("berth.plugins[{k}].name"),
                message: format!(
                    "unknown plugin {:?}: neither built in nor named in berth.modules",
                    p.name
                ),
            })
            .collect()
    }

    /// The queue's backoff settings from `podInitialBackoffSeconds` and
    /// `podMaxBackoffSeconds`, on top of `base`.
    pub fn queue_config(&self, base: crate::queue::QueueConfig) -> crate::queue::QueueConfig {
        let mut q = base;
        if let Some(s) = self.pod_initial_backoff_seconds {
            q.initial_backoff = std::time::Duration::from_secs(s.max(0) as u64);
        }
        if let Some(s) = self.pod_max_backoff_seconds {
            q.max_backoff = std::time::Duration::from_secs(s.max(0) as u64);
        }
        q
    }
}

/// Expands every profile with the extension points of loaded modules.
pub fn expand_profiles(
    specs: &[ProfileSpec],
    file: &str,
    modules: &std::collections::HashMap<String, std::sync::Arc<berth_runtime::wasm::Module>>,
) -> Result<Vec<Profile>, ConfigError> {
    let implements = |name: &str| -> Option<Vec<ExtensionPoint>> {
        modules.get(name).map(|m| m.extension_points().to_vec())
    };
    expand_profiles_with(specs, file, &implements)
}

/// [`expand_profiles`] with the extension points each plugin implements given by
/// `implements`.
pub fn expand_profiles_with(
    specs: &[ProfileSpec],
    file: &str,
    implements: &dyn Fn(&str) -> Option<Vec<ExtensionPoint>>,
) -> Result<Vec<Profile>, ConfigError> {
    let mut errors = Vec::new();
    let mut out = Vec::new();
    for s in specs {
        match s.expand(file, implements) {
            Ok(p) => out.push(p),
            Err(e) => errors.extend(e.into_list()),
        }
    }
    // Upstream: every profile sorts its queue with the same plugin.
    if let Some(first) = out.first() {
        let sort = first.plugins_at(ExtensionPoint::QueueSort).to_vec();
        for (i, p) in out.iter().enumerate().skip(1) {
            if p.plugins_at(ExtensionPoint::QueueSort) != sort.as_slice() {
                errors.push(ConfigError::Invalid {
                    file: file.to_owned(),
                    field: format!("profiles[{i}].plugins.queueSort"),
                    message: "every profile must use the same queueSort plugin".into(),
                });
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(ConfigError::many(errors))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use ExtensionPoint as E;

    /// The extension points of Berth's built-in plugins (what their modules declare;
    /// tests/tests/components.rs checks the expansion against the real modules), and
    /// two custom plugins. (SignPod and NormalizeScore are not configured: expanding
    /// leaves them out, and so does a message naming where a plugin may go.)
    fn implements(name: &str) -> Option<Vec<ExtensionPoint>> {
        Some(match name {
            "SchedulingGates" => vec![E::PreEnqueue],
            "PrioritySort" => vec![E::QueueSort],
            "NodeUnschedulable" | "NodeName" => vec![E::Filter, E::SignPod],
            "TaintToleration" => vec![
                E::Filter,
                E::PreScore,
                E::Score,
                E::NormalizeScore,
                E::SignPod,
            ],
            "NodeAffinity" | "PodTopologySpread" | "InterPodAffinity" => vec![
                E::PreFilter,
                E::Filter,
                E::PreScore,
                E::Score,
                E::NormalizeScore,
                E::SignPod,
            ],
            "NodePorts" | "NodeDeclaredFeatures" => vec![E::PreFilter, E::Filter, E::SignPod],
            "NodeResourcesFit" => {
                vec![E::PreFilter, E::Filter, E::PreScore, E::Score, E::SignPod]
            }
            "NodeResourcesBalancedAllocation" => vec![E::PreScore, E::Score, E::SignPod],
            "ImageLocality" => vec![E::PreScore, E::Score, E::SignPod],
            "VolumeRestrictions" | "NodeVolumeLimits" | "VolumeZone" => {
                vec![E::PreFilter, E::Filter, E::SignPod]
            }
            "VolumeBinding" => vec![
                E::PreFilter,
                E::Filter,
                E::PreScore,
                E::Score,
                E::Reserve,
                E::PreBind,
                E::SignPod,
            ],
            "DynamicResources" => vec![
                E::PreEnqueue,
                E::PreFilter,
                E::Filter,
                E::PostFilter,
                E::PreScore,
                E::Score,
                E::NormalizeScore,
                E::Reserve,
                E::PreBind,
                E::SignPod,
            ],
            "DefaultBinder" => vec![E::Bind],
            "GangScheduling" => vec![E::PreEnqueue, E::PlacementFeasible],
            "Custom" => vec![E::Filter, E::Score, E::NormalizeScore, E::SignPod],
            "Gate" => vec![E::Permit],
            _ => return None,
        })
    }

    fn expand_one(text: &str) -> Result<Profile, ConfigError> {
        let c = Configuration::parse("c.yaml", text)?;
        let specs = c.resolve_profiles("c.yaml", false)?;
        specs[0].expand("c.yaml", &implements)
    }

    fn names(p: &Profile, point: ExtensionPoint) -> Vec<&str> {
        p.plugins_at(point)
            .iter()
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// The default profile, expanded: upstream's order at every point (with
    /// GangScheduling when `GenericWorkload` is on).
    pub(crate) fn expected_default_points(
        generic_workload: bool,
    ) -> BTreeMap<ExtensionPoint, Vec<(String, i64)>> {
        let list = |names: &[(&str, i64)]| -> Vec<(String, i64)> {
            names.iter().map(|(n, w)| ((*n).to_owned(), *w)).collect()
        };
        let prefilter = [
            ("NodeAffinity", 1),
            ("NodePorts", 1),
            ("NodeResourcesFit", 1),
            ("VolumeRestrictions", 1),
            ("NodeVolumeLimits", 1),
            ("VolumeBinding", 1),
            ("VolumeZone", 1),
            ("PodTopologySpread", 1),
            ("InterPodAffinity", 1),
            ("DynamicResources", 1),
            ("NodeDeclaredFeatures", 1),
        ];
        let mut pre_enqueue = vec![("SchedulingGates", 1), ("DynamicResources", 1)];
        if generic_workload {
            pre_enqueue.push(("GangScheduling", 1));
        }
        let mut points = BTreeMap::from([
            (E::PreEnqueue, list(&pre_enqueue)),
            (E::QueueSort, list(&[("PrioritySort", 1)])),
            (E::PreFilter, list(&prefilter)),
            (
                E::Filter,
                list(&[
                    ("NodeName", 1),
                    ("NodeUnschedulable", 1),
                    ("TaintToleration", 1),
                    ("NodeAffinity", 1),
                    ("NodePorts", 1),
                    ("NodeResourcesFit", 1),
                    ("VolumeRestrictions", 1),
                    ("NodeVolumeLimits", 1),
                    ("VolumeBinding", 1),
                    ("VolumeZone", 1),
                    ("PodTopologySpread", 1),
                    ("InterPodAffinity", 1),
                    ("DynamicResources", 1),
                    ("NodeDeclaredFeatures", 1),
                ]),
            ),
            (E::PostFilter, list(&[("DynamicResources", 1)])),
            (
                E::PreScore,
                list(&[
                    ("TaintToleration", 1),
                    ("NodeAffinity", 1),
                    ("NodeResourcesFit", 1),
                    ("VolumeBinding", 1),
                    ("PodTopologySpread", 1),
                    ("InterPodAffinity", 1),
                    ("DynamicResources", 1),
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
                    ("VolumeBinding", 1),
                    ("PodTopologySpread", 2),
                    ("InterPodAffinity", 2),
                    ("DynamicResources", 2),
                    ("NodeResourcesBalancedAllocation", 1),
                    ("ImageLocality", 1),
                ]),
            ),
            (
                E::Reserve,
                list(&[("VolumeBinding", 1), ("DynamicResources", 1)]),
            ),
            (
                E::PreBind,
                list(&[("VolumeBinding", 1), ("DynamicResources", 1)]),
            ),
            (E::Bind, list(&[("DefaultBinder", 1)])),
        ]);
        if generic_workload {
            points.insert(E::PlacementFeasible, list(&[("GangScheduling", 1)]));
        }
        points
    }

    #[test]
    fn empty_config_is_the_default_profile() {
        let p = expand_one("{}").unwrap();
        assert_eq!(p.scheduler_name, DEFAULT_SCHEDULER_NAME);
        assert_eq!(p.points, expected_default_points(false));
        // The same, said as upstream says it.
        let p = expand_one(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: default-scheduler\n",
        )
        .unwrap();
        assert_eq!(p.points, expected_default_points(false));
    }

    /// Upstream adds GangScheduling to the default profile only with `GenericWorkload`
    /// on (off by default in 1.37); a profile may still enable it by name.
    #[test]
    fn gang_scheduling_is_a_default_plugin_only_with_generic_workload() {
        let c = Configuration::parse("c.yaml", "{}").unwrap();
        let on = c.resolve_profiles("c.yaml", true).unwrap()[0]
            .expand("c.yaml", &implements)
            .unwrap();
        assert_eq!(on.points, expected_default_points(true));
        assert!(
            !default_multi_point(false)
                .iter()
                .any(|p| p.name == "GangScheduling")
        );
        assert_eq!(
            default_multi_point(true).last().unwrap().name,
            "GangScheduling"
        );
        let named = expand_one(
            "profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: GangScheduling}]\n",
        )
        .unwrap();
        assert_eq!(named.points, expected_default_points(true));
    }

    #[test]
    fn enabled_and_disabled_merge_as_upstream() {
        let text = r#"
profiles:
- schedulerName: custom
  plugins:
    filter:
      disabled: [{name: NodeName}]
      enabled: [{name: Custom}]
    score:
      disabled: [{name: "*"}]
      enabled: [{name: NodeResourcesFit, weight: 5}]
"#;
        let p = expand_one(text).unwrap();
        assert_eq!(
            names(&p, E::Filter),
            [
                "NodeUnschedulable",
                "TaintToleration",
                "NodeAffinity",
                "NodePorts",
                "NodeResourcesFit",
                "VolumeRestrictions",
                "NodeVolumeLimits",
                "VolumeBinding",
                "VolumeZone",
                "PodTopologySpread",
                "InterPodAffinity",
                "DynamicResources",
                "NodeDeclaredFeatures",
                "Custom"
            ]
        );
        assert_eq!(p.plugins_at(E::Score), [("NodeResourcesFit".to_owned(), 5)]);
    }

    #[test]
    fn multi_point_expands_as_upstream_s_framework() {
        // A custom multiPoint plugin lands at every point it implements, after the
        // defaults, with its weight.
        let p = expand_one(
            "profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: Custom, weight: 5}]\n",
        )
        .unwrap();
        assert_eq!(names(&p, E::Filter).last(), Some(&"Custom"));
        assert_eq!(
            p.plugins_at(E::Score).last(),
            Some(&("Custom".to_owned(), 5))
        );
        assert!(!names(&p, E::PreFilter).contains(&"Custom"));

        // A default re-configured at one point comes first there, with the point's
        // weight; the rest keep upstream's order.
        let p = expand_one("profiles:\n- plugins:\n    score:\n      enabled: [{name: ImageLocality, weight: 7}]\n").unwrap();
        assert_eq!(p.plugins_at(E::Score)[0], ("ImageLocality".to_owned(), 7));
        assert_eq!(p.plugins_at(E::Score).len(), 9);
        assert_eq!(p.plugins_at(E::Score)[1], ("TaintToleration".to_owned(), 3));

        // A default re-configured in multiPoint keeps its place and takes the weight.
        let p = expand_one("profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: TaintToleration, weight: 10}]\n").unwrap();
        assert_eq!(
            p.plugins_at(E::Score)[0],
            ("TaintToleration".to_owned(), 10)
        );
        assert_eq!(names(&p, E::Filter)[2], "TaintToleration");

        // Disabled at one point only.
        let p = expand_one(
            "profiles:\n- plugins:\n    filter:\n      disabled: [{name: TaintToleration}]\n",
        )
        .unwrap();
        assert!(!names(&p, E::Filter).contains(&"TaintToleration"));
        assert!(names(&p, E::Score).contains(&"TaintToleration"));

        // Every default disabled: only what the file enables.
        let p = expand_one(
            "profiles:\n- plugins:\n    multiPoint:\n      disabled: [{name: '*'}]\n      enabled: [{name: PrioritySort}, {name: DefaultBinder}, {name: Custom}]\n",
        )
        .unwrap();
        assert_eq!(names(&p, E::Filter), ["Custom"]);
        assert_eq!(names(&p, E::PreFilter), Vec::<&str>::new());
        assert_eq!(names(&p, E::QueueSort), ["PrioritySort"]);

        // `*` disabled at a point stops the expansion there.
        let p = expand_one("profiles:\n- plugins:\n    preScore:\n      disabled: [{name: '*'}]\n")
            .unwrap();
        assert!(p.plugins_at(E::PreScore).is_empty());
        assert_eq!(p.plugins_at(E::Score).len(), 9);

        // A plugin enabled at a point and in multiPoint is there once.
        let p = expand_one(
            "profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: Gate}]\n    permit:\n      enabled: [{name: Gate}]\n",
        )
        .unwrap();
        assert_eq!(names(&p, E::Permit), ["Gate"]);
    }

    #[test]
    fn an_upstream_file_using_in_tree_plugins_loads_as_is() {
        let text = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
parallelism: 8
percentageOfNodesToScore: 50
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 20
enableProfiling: false
leaderElection:
  leaderElect: true
  resourceName: my-scheduler
clientConnection:
  qps: 100
  burst: 200
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      disabled:
      - name: VolumeBinding
      - name: DefaultPreemption
    score:
      enabled:
      - name: NodeResourcesFit
        weight: 3
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
  - name: VolumeBinding
    args:
      bindTimeoutSeconds: 600
- schedulerName: spread
  percentageOfNodesToScore: 100
"#;
        let c = Configuration::parse("up.yaml", text).unwrap();
        let specs = c.resolve_profiles("up.yaml", false).unwrap();
        let p0 = specs[0].expand("up.yaml", &implements).unwrap();
        assert_eq!(
            p0.plugins_at(E::Score)[0],
            ("NodeResourcesFit".to_owned(), 3)
        );
        assert!(p0.args.contains_key("NodeResourcesFit"));
        // VolumeBinding is disabled, its args kept (they would apply if enabled).
        assert!(p0.args.contains_key("VolumeBinding"));
        assert!(
            !p0.plugins_at(E::Reserve)
                .iter()
                .any(|(n, _)| n == "VolumeBinding")
        );
        let p1 = specs[1].expand("up.yaml", &implements).unwrap();
        assert_eq!(p1.percentage_of_nodes_to_score, Some(100));
        assert_eq!(p1.points, expected_default_points(false));
        let q = c.queue_config(crate::queue::QueueConfig::default());
        assert_eq!(q.initial_backoff, std::time::Duration::from_secs(2));
        assert_eq!(q.max_backoff, std::time::Duration::from_secs(20));
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let text = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 0
extenders: [{urlPrefix: "http://x"}]
modules: [{name: X, path: x.wasm}]
"#;
        let e = Configuration::parse("c.yaml", text).unwrap_err();
        let lines: Vec<String> = e.to_string().lines().map(str::to_owned).collect();
        assert_eq!(
            lines,
            [
                "c.yaml: modules: a KubeSchedulerConfiguration names modules under berth.modules",
                "c.yaml: extenders: scheduler extenders are not supported; write the extension as a plugin module",
                "c.yaml: podInitialBackoffSeconds: 0 must be greater than 0",
            ]
        );

        let text = r#"
profiles:
- plugins:
    multiPoint:
      enabled: [{name: DynamicResources}]
- schedulerName: default-scheduler
"#;
        let c = Configuration::parse("c.yaml", text).unwrap();
        let e = c.resolve_profiles("c.yaml", false).unwrap_err().to_string();
        // DynamicResources ships: enabling it again is no error, only the duplicate is.
        assert_eq!(
            e,
            "c.yaml: profiles[1].schedulerName: duplicate scheduler name \"default-scheduler\""
        );

        let e = expand_one(
            "profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: Custom}, {name: Custom}]\n",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "c.yaml: profiles[0].plugins.multiPoint.enabled[1]: plugin \"Custom\" is enabled twice"
        );
        let e = expand_one(
            "profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: Other}]\n    permit:\n      enabled: [{name: Custom}, {name: Nope}]\n",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e.lines().collect::<Vec<_>>(),
            [
                "c.yaml: profiles[0].plugins.multiPoint.enabled[0]: unknown plugin \"Other\"",
                "c.yaml: profiles[0].plugins.permit.enabled[0]: plugin \"Custom\" does not implement permit (it implements filter, score)",
                "c.yaml: profiles[0].plugins.permit.enabled[1]: unknown plugin \"Nope\"",
            ]
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
        let e = c.resolve_profiles("c.yaml", false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "c.yaml: profiles[0].plugins.score.enabled[0].weight: -1 is negative"
        );

        let c = Configuration::parse(
            "c.yaml",
            "profiles:\n- plugins:\n    queueSort:\n      disabled: [{name: '*'}]\n",
        )
        .unwrap();
        let e = c.resolve_profiles("c.yaml", false).unwrap()[0]
            .expand("c.yaml", &implements)
            .unwrap_err();
        assert!(
            e.to_string().contains("exactly one queueSort plugin"),
            "{e}"
        );
    }

    #[test]
    fn a_module_comes_from_a_path_or_a_registry_and_registries_are_reached_as_berth_oci_says() {
        let text = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
berth:
  modules:
  - {name: A, path: a.wasm}
  - {name: B, oci: "oci://127.0.0.1:5000/plugins/b:1.0"}
  oci:
    dockerConfig: secrets/docker.json
    pollInterval: 30s
    plainHttp: ["127.0.0.1:5000"]
"#;
        let mut c = Configuration::parse("c.yaml", text).unwrap();
        c.resolve_paths(Path::new("/etc/berth"));
        let m = c.modules();
        assert_eq!(m[0].path.as_deref(), Some(Path::new("/etc/berth/a.wasm")));
        assert_eq!(m[0].location(), "/etc/berth/a.wasm");
        assert_eq!(m[1].path, None);
        assert_eq!(m[1].location(), "oci://127.0.0.1:5000/plugins/b:1.0");
        assert_eq!(m[1].oci_ref().unwrap().tag(), Some("1.0"));
        let access = berth_runtime::oci::Access {
            docker_config: Some(PathBuf::from("/etc/berth/secrets/docker.json")),
            plain_http: vec!["127.0.0.1:5000".into()],
        };
        assert!(m.iter().all(|m| m.access == access));
        assert_eq!(
            c.oci_poll_interval(),
            Some(std::time::Duration::from_secs(30))
        );
        let none = Configuration::parse("c.yaml", "berth: {oci: {pollInterval: 0}}").unwrap();
        assert_eq!(none.oci_poll_interval(), None);
        let default = Configuration::parse("c.yaml", "{}").unwrap();
        assert_eq!(default.oci_poll_interval(), Some(DEFAULT_OCI_POLL_INTERVAL));
        assert_eq!(default.oci_access(), berth_runtime::oci::Access::default());

        let text = r#"
berth:
  modules:
  - {name: Both, path: a.wasm, oci: "oci://r.io/a:1"}
  - {name: Neither}
  - {name: Typo, oci: "r.io/a:1"}
  - {name: NoTag, oci: "oci://r.io/a"}
  oci:
    pollInterval: 100ms
    plainHttp: ["http://r.io"]
    dockerConfig: ""
"#;
        let e = Configuration::parse("c.yaml", text)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e.lines().collect::<Vec<_>>(),
            [
                "c.yaml: berth.modules[0]: gives both path and oci; a module comes from one of them",
                "c.yaml: berth.modules[1]: gives neither path (a component file) nor oci (oci://REGISTRY/REPOSITORY:TAG[@sha256:DIGEST]): say where module Neither comes from",
                "c.yaml: berth.modules[2].oci: \"r.io/a:1\" does not start with oci:// (expected oci://REGISTRY/REPOSITORY:TAG[@sha256:DIGEST])",
                "c.yaml: berth.modules[3].oci: \"oci://r.io/a\" names neither a tag (:TAG) nor a digest (@sha256:DIGEST)",
                "c.yaml: berth.oci.pollInterval: 100ms is shorter than 1s (0 never polls)",
                "c.yaml: berth.oci.plainHttp[0]: \"http://r.io\" is not a registry (HOST or HOST:PORT, no scheme or path)",
                "c.yaml: berth.oci.dockerConfig: empty: name a docker config file, or leave the field out",
            ]
        );
    }
}
