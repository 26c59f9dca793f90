//! Berth's per-plugin settings, under `berth.plugins` of the configuration: each
//! plugin's sandbox (limits and grants) and what a failure of the plugin does to the
//! pod (`failurePolicy`).
//!
//! ```yaml
//! berth:
//!   plugins:
//!   - name: NodePreference
//!     failurePolicy: FailOpen        # FailClosed (default) | FailOpen
//!     sandbox:
//!       callDeadline: 250ms
//!       memoryLimit: 64Mi
//!       tableElements: 20000
//!       tables: 16
//!       instances: 16
//!       memories: 2
//!       grants:
//!         wallClock: true
//!         monotonicClock: true
//!         random: true
//!         env: [{name: ZONE, value: eu-west-1}]
//!         dirs: [{hostPath: ./data, guestPath: /data}]   # read-only
//!     shadow:                        # a candidate run beside it, compared, never used
//!       path: ./node_preference_v2.wasm
//!       sha256: 3f5a...              # optional
//!       args: {}                     # optional: by default the plugin's own args
//! ```

use super::ConfigError;
use super::duration;
use berth_runtime::wasm::limits::{EPOCH_TICK, MAX_MEMORY_BYTES, MIN_MEMORY_BYTES};
use berth_runtime::wasm::{DirGrant, Grants, Limits, Sandbox};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One plugin's settings.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PluginSettings {
    /// The plugin name profiles use.
    pub name: String,
    /// What a failure of the plugin does to the pod (default `FailClosed`).
    #[serde(default)]
    pub failure_policy: Option<FailurePolicy>,
    /// Its sandbox; what is not set takes the process's defaults.
    #[serde(default)]
    pub sandbox: Option<SandboxConfig>,
    /// A candidate module run beside the plugin on the same cycles, its answers
    /// compared with the plugin's and never used (a shadow run).
    #[serde(default)]
    pub shadow: Option<ShadowConfig>,
}

/// A shadow run's candidate: a module of the same plugin (its metadata names the
/// plugin), run in the plugin's sandbox.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShadowConfig {
    /// The component file (relative paths are relative to the configuration file).
    pub path: PathBuf,
    /// The expected sha256 of the file, hex; a mismatch refuses the candidate.
    #[serde(default)]
    pub sha256: Option<String>,
    /// The candidate's args; by default the live plugin's in each profile.
    #[serde(default)]
    pub args: Option<serde_json::Value>,
}

/// What a failure of a plugin (an Error status, a trap, a deadline, a bad answer)
/// does to the pod.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum FailurePolicy {
    /// The pod gets an Error and is retried with backoff.
    #[default]
    FailClosed,
    /// Score plugins only: the plugin's scores are dropped for that cycle and the
    /// other plugins' scores decide (logged, and counted in
    /// `berth_plugin_failures_ignored_total`).
    FailOpen,
}

/// A plugin's sandbox as the configuration writes it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxConfig {
    /// How long one call may run (a duration such as `500ms`).
    #[serde(default, deserialize_with = "duration::deserialize_opt")]
    pub call_deadline: Option<Duration>,
    /// Linear memory of an instance: bytes, or a quantity such as `64Mi`.
    #[serde(default)]
    pub memory_limit: Option<ByteSize>,
    /// The most elements any table may grow to.
    #[serde(default)]
    pub table_elements: Option<u64>,
    /// The most tables an instance may hold.
    #[serde(default)]
    pub tables: Option<u64>,
    /// The most core instances (a component is several).
    #[serde(default)]
    pub instances: Option<u64>,
    /// The most linear memories.
    #[serde(default)]
    pub memories: Option<u64>,
    /// What the plugin may reach; nothing by default.
    #[serde(default)]
    pub grants: GrantsConfig,
}

/// A size in bytes: a number, or a Kubernetes quantity (`64Mi`, `1G`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum ByteSize {
    /// Bytes.
    Bytes(u64),
    /// A quantity.
    Quantity(String),
}

impl ByteSize {
    pub(crate) fn bytes(&self) -> Result<u64, String> {
        match self {
            ByteSize::Bytes(b) => Ok(*b),
            ByteSize::Quantity(q) => berth_cluster::quantity::value(q)
                .map_err(|e| format!("{q:?}: {e}"))
                .and_then(|v| u64::try_from(v).map_err(|_| format!("{q:?} is negative"))),
        }
    }
}

/// What a plugin may reach beyond its own memory.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantsConfig {
    /// The host's wall clock (else it reads 1970-01-01T00:00:00Z).
    #[serde(default)]
    pub wall_clock: bool,
    /// The host's monotonic clock, and sleeping up to the call deadline (else the
    /// clock reads 0 and a sleep returns at once).
    #[serde(default)]
    pub monotonic_clock: bool,
    /// Real randomness from `wasi:random/insecure` too (else a fixed seed and stream,
    /// the same in every instance; `wasi:random/random` is real either way).
    #[serde(default)]
    pub random: bool,
    /// Environment variables the plugin sees.
    #[serde(default)]
    pub env: Vec<EnvVar>,
    /// Host directories the plugin may read (never write).
    #[serde(default)]
    pub dirs: Vec<DirConfig>,
    /// Accepted only as `false`: plugins never get the network.
    #[serde(default)]
    pub network: Option<bool>,
    /// Plugins whose waiting pods this one may also allow or reject (by default a
    /// plugin acts on its own waits only): a coordinator that lets another plugin's
    /// gangs go.
    #[serde(default)]
    pub waits_of: Vec<String>,
}

/// An environment variable.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvVar {
    /// Its name.
    pub name: String,
    /// Its value.
    #[serde(default)]
    pub value: String,
}

/// A host directory, read-only.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DirConfig {
    /// The directory on the host (relative paths are relative to the configuration
    /// file).
    pub host_path: PathBuf,
    /// Where the plugin sees it: an absolute path such as `/data`.
    pub guest_path: String,
}

impl PluginSettings {
    /// Every problem of these settings (entry `index` of `berth.plugins`).
    pub(crate) fn check(&self, file: &str, index: usize) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        let mut invalid = |field: &str, message: String| {
            errors.push(ConfigError::Invalid {
                file: file.to_owned(),
                field: format!("berth.plugins[{index}].{field}"),
                message,
            })
        };
        if self.name.is_empty() {
            invalid("name", "must not be empty".into());
        }
        let Some(sb) = &self.sandbox else {
            return errors;
        };
        if let Some(d) = sb.call_deadline
            && d < EPOCH_TICK
        {
            invalid(
                "sandbox.callDeadline",
                format!("{d:?} is shorter than the deadline clock's tick ({EPOCH_TICK:?})"),
            );
        }
        if let Some(m) = &sb.memory_limit {
            match m.bytes() {
                Err(e) => invalid("sandbox.memoryLimit", e),
                Ok(b) if !(MIN_MEMORY_BYTES..=MAX_MEMORY_BYTES).contains(&b) => invalid(
                    "sandbox.memoryLimit",
                    format!("{b} bytes is not between 1Mi and 4Gi (what a wasm32 memory can hold)"),
                ),
                Ok(_) => {}
            }
        }
        for (field, v) in [
            ("tableElements", sb.table_elements),
            ("tables", sb.tables),
            ("instances", sb.instances),
            ("memories", sb.memories),
        ] {
            if v == Some(0) {
                invalid(&format!("sandbox.{field}"), "must be at least 1".into());
            }
        }
        let g = &sb.grants;
        if g.network == Some(true) {
            invalid(
                "sandbox.grants.network",
                "plugins are never granted the network".into(),
            );
        }
        for (k, w) in g.waits_of.iter().enumerate() {
            if w.is_empty() {
                invalid(
                    &format!("sandbox.grants.waitsOf[{k}]"),
                    "must name a plugin".into(),
                );
            }
        }
        for (k, e) in g.env.iter().enumerate() {
            let at = format!("sandbox.grants.env[{k}].name");
            if e.name.is_empty() || e.name.contains(['=', '\0']) {
                invalid(
                    &at,
                    format!("{:?} is not an environment variable name", e.name),
                );
            } else if g.env[..k].iter().any(|o| o.name == e.name) {
                invalid(&at, format!("{} is set twice", e.name));
            }
            if e.value.contains('\0') {
                invalid(
                    &format!("sandbox.grants.env[{k}].value"),
                    "must not contain NUL".into(),
                );
            }
        }
        for (k, d) in g.dirs.iter().enumerate() {
            let guest = format!("sandbox.grants.dirs[{k}].guestPath");
            if !d.guest_path.starts_with('/') {
                invalid(
                    &guest,
                    format!("{:?} must be an absolute path", d.guest_path),
                );
            } else if g.dirs[..k].iter().any(|o| o.guest_path == d.guest_path) {
                invalid(&guest, format!("{} is granted twice", d.guest_path));
            }
            match std::fs::metadata(&d.host_path) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => invalid(
                    &format!("sandbox.grants.dirs[{k}].hostPath"),
                    format!("{} is not a directory", d.host_path.display()),
                ),
                Err(e) => invalid(
                    &format!("sandbox.grants.dirs[{k}].hostPath"),
                    format!("{}: {e}", d.host_path.display()),
                ),
            }
        }
        errors
    }

    /// Makes relative host directories relative to `base` (the configuration file's
    /// directory).
    pub(crate) fn resolve_paths(&mut self, base: &Path) {
        if let Some(sh) = &mut self.shadow
            && sh.path.is_relative()
        {
            sh.path = base.join(&sh.path);
        }
        if let Some(sb) = &mut self.sandbox {
            for d in &mut sb.grants.dirs {
                if d.host_path.is_relative() {
                    d.host_path = base.join(&d.host_path);
                }
            }
        }
    }

    /// The sandbox these settings make on top of `defaults` (checked settings; a
    /// value that does not fit keeps the default).
    pub fn sandbox(&self, defaults: Limits) -> Sandbox {
        let Some(sb) = &self.sandbox else {
            return Sandbox {
                limits: defaults,
                grants: Grants::default(),
            };
        };
        let size = |v: Option<u64>, d: usize| v.and_then(|v| usize::try_from(v).ok()).unwrap_or(d);
        let limits = Limits {
            call_deadline: sb.call_deadline.unwrap_or(defaults.call_deadline),
            max_memory_bytes: size(
                sb.memory_limit.as_ref().and_then(|m| m.bytes().ok()),
                defaults.max_memory_bytes,
            ),
            max_table_elements: size(sb.table_elements, defaults.max_table_elements),
            max_tables: size(sb.tables, defaults.max_tables),
            max_instances: size(sb.instances, defaults.max_instances),
            max_memories: size(sb.memories, defaults.max_memories),
        };
        let g = &sb.grants;
        Sandbox {
            limits,
            grants: Grants {
                wall_clock: g.wall_clock,
                monotonic_clock: g.monotonic_clock,
                random: g.random,
                env: g
                    .env
                    .iter()
                    .map(|e| (e.name.clone(), e.value.clone()))
                    .collect(),
                dirs: g
                    .dirs
                    .iter()
                    .map(|d| DirGrant {
                        host_path: d.host_path.clone(),
                        guest_path: d.guest_path.clone(),
                    })
                    .collect(),
                waits_of: g.waits_of.clone(),
            },
        }
    }

    /// Whether the plugin fails open.
    pub fn fails_open(&self) -> bool {
        self.failure_policy == Some(FailurePolicy::FailOpen)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Configuration;
    use super::*;

    #[test]
    fn settings_make_the_sandbox_over_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "berth:\n  plugins:\n  - name: P\n    failurePolicy: FailOpen\n    sandbox:\n      callDeadline: 250ms\n      memoryLimit: 64Mi\n      tables: 3\n      grants:\n        random: true\n        env: [{{name: ZONE, value: eu}}]\n        dirs: [{{hostPath: {}, guestPath: /data}}]\n  - name: Q\n",
            dir.path().display()
        );
        let c = Configuration::parse("c.yaml", &text).unwrap();
        let d = Limits::default();
        let p = c.plugin_settings("P").unwrap();
        assert!(p.fails_open());
        let sb = p.sandbox(d);
        assert_eq!(sb.limits.call_deadline, Duration::from_millis(250));
        assert_eq!(sb.limits.max_memory_bytes, 64 << 20);
        assert_eq!(sb.limits.max_tables, 3);
        assert_eq!(sb.limits.max_instances, d.max_instances);
        assert!(sb.grants.random && !sb.grants.wall_clock && !sb.grants.monotonic_clock);
        assert_eq!(sb.grants.env, [("ZONE".to_owned(), "eu".to_owned())]);
        assert_eq!(sb.grants.dirs[0].guest_path, "/data");
        let q = c.plugin_settings("Q").unwrap();
        assert!(!q.fails_open());
        assert_eq!(q.sandbox(d), Sandbox::default());
        assert!(c.plugin_settings("R").is_none());
        assert_eq!(c.sandbox_for("R", d), Sandbox::default());
    }

    #[test]
    fn every_bad_setting_is_reported_with_its_field() {
        let text = r#"
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
berth:
  plugins:
  - name: P
    sandbox:
      callDeadline: 1ms
      memoryLimit: 10Gi
      tables: 0
      grants:
        network: true
        env: [{name: "A=B"}, {name: X}, {name: X}]
        dirs: [{hostPath: /no/such/dir, guestPath: data}]
  - name: P
  - name: ""
    sandbox: {memoryLimit: lots}
"#;
        let e = Configuration::parse("c.yaml", text).unwrap_err();
        let lines: Vec<String> = e.to_string().lines().map(str::to_owned).collect();
        assert_eq!(
            lines,
            [
                "c.yaml: berth.plugins[0].sandbox.callDeadline: 1ms is shorter than the deadline clock's tick (5ms)",
                "c.yaml: berth.plugins[0].sandbox.memoryLimit: 10737418240 bytes is not between 1Mi and 4Gi (what a wasm32 memory can hold)",
                "c.yaml: berth.plugins[0].sandbox.tables: must be at least 1",
                "c.yaml: berth.plugins[0].sandbox.grants.network: plugins are never granted the network",
                "c.yaml: berth.plugins[0].sandbox.grants.env[0].name: \"A=B\" is not an environment variable name",
                "c.yaml: berth.plugins[0].sandbox.grants.env[2].name: X is set twice",
                "c.yaml: berth.plugins[0].sandbox.grants.dirs[0].guestPath: \"data\" must be an absolute path",
                "c.yaml: berth.plugins[0].sandbox.grants.dirs[0].hostPath: /no/such/dir: No such file or directory (os error 2)",
                "c.yaml: berth.plugins[1].name: settings for P are given twice",
                "c.yaml: berth.plugins[2].name: must not be empty",
                "c.yaml: berth.plugins[2].sandbox.memoryLimit: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ]
        );
        let e = Configuration::parse(
            "c.yaml",
            "berth:\n  plugins:\n  - name: P\n    failurePolicy: Ignore\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("c.yaml: berth.plugins[0].failurePolicy: ")
                && e.contains("unknown variant `Ignore`, expected `FailClosed` or `FailOpen`"),
            "{e}"
        );
    }
}
