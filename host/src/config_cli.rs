//! `berth config validate` and `berth config default`: a configuration checked as the
//! scheduler would use it (modules loaded, `multiPoint` expanded, plugins given their
//! args), every problem reported at once; and the effective default configuration.
//!
//! A command, not part of [`crate::config`]: it loads modules and builds the
//! profiles' frameworks (as a reload does, without a scheduling loop), which the
//! configuration room below never does.

use crate::cluster::Budgets;
use crate::cluster::Namespaces;
use crate::cluster::storage::Storage;
use crate::config::{
    CONFIGURABLE_POINTS, ConfigError, Configuration, LeaderElectionConfig, UPSTREAM_API_VERSION,
    UPSTREAM_KIND, args_json, default_multi_point, duration, expand_profiles, expand_profiles_with,
};
use crate::framework::FrameworkOptions;
use crate::framework::registry::{RegistryError, builtin_plugins, load_modules};
use crate::framework::waiting::WaitingPods;
use crate::reload::{Builder, args_field, refused_args_of_disabled_builtins};
use crate::wasm::Runtime;
use crate::wasm::module::HostServices;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// Checks the configuration in `path` under the feature gates in `gates` (as set by
/// `--feature-gates`); on success a one-line summary per profile, on failure every
/// problem found, one per line.
pub fn validate(
    runtime: &Arc<Runtime>,
    path: &Path,
    gates: &FrameworkOptions,
) -> Result<String, Vec<String>> {
    let file = path.display().to_string();
    let lines = |e: ConfigError| -> Vec<String> {
        e.into_list().into_iter().map(|e| e.to_string()).collect()
    };
    let config = Configuration::load_unchecked(path).map_err(lines)?;
    let mut found: Vec<String> = Vec::new();
    if let Err(e) = config.check(&file) {
        found.extend(lines(e));
    }
    let builtins = builtin_plugins();
    found.extend(
        config
            .unknown_plugin_settings(&file, |name| builtins.contains_key(name))
            .into_iter()
            .map(|e| e.to_string()),
    );
    let (specs, problems) = config.resolve_profiles_lenient(&file, gates.generic_workload);
    found.extend(problems.into_iter().map(|e| e.to_string()));
    let sources = config.modules();
    let mut errors: Vec<String> = Vec::new();
    let mut modules = HashMap::new();
    for spec in &specs {
        for name in spec.plugin_names() {
            if modules.contains_key(&name) {
                continue;
            }
            match load_modules(runtime, &sources, std::slice::from_ref(&name)) {
                Ok(m) => modules.extend(m),
                Err(e) => errors.push(format!("{file}: plugin {name}: {e}")),
            }
        }
    }
    // Expand with what loaded; a plugin whose module failed (already reported) counts
    // as implementing exactly the points the file names it at, so that it adds no
    // second report.
    let implements = |name: &str| -> Option<Vec<berth_sdk::ExtensionPoint>> {
        match modules.get(name) {
            Some(m) => Some(m.extension_points().to_vec()),
            None => Some(
                specs
                    .iter()
                    .flat_map(|s| s.sets.iter())
                    .filter(|(_, set)| set.enabled.iter().any(|p| p.name == name))
                    .map(|(point, _)| *point)
                    .collect(),
            ),
        }
    };
    let expanded = expand_profiles_with(&specs, &file, &implements);
    found.extend(errors);
    let profiles = match expanded {
        Ok(p) => p,
        Err(e) => {
            found.extend(lines(e));
            Vec::new()
        }
    };
    // Built-in plugins a profile does not enable get their `pluginConfig` args too,
    // as kube-scheduler validates them.
    found.extend(
        refused_args_of_disabled_builtins(runtime, &config, &specs, &file)
            .iter()
            .map(ToString::to_string),
    );
    // Each loaded plugin given its args in each profile, as the scheduler makes its
    // instances, so that args a plugin refuses are reported beside every other
    // problem rather than only once the rest is right.
    for spec in &specs {
        for name in spec.plugin_names() {
            let Some(m) = modules.get(&name) else {
                continue;
            };
            if let Err(e) = m.instantiate(&args_json(&spec.args, &name), HostServices::default()) {
                found.push(format!(
                    "{file}: {}: {e}",
                    args_field(&config, spec.index, &name)
                ));
            }
        }
    }
    if !found.is_empty() {
        return Err(found);
    }
    build_as_the_scheduler(runtime, &config, &file, gates)?;
    let mut out = format!("{file}: valid\n");
    for p in &profiles {
        out.push_str(&profile_summary(runtime, &config, p));
    }
    out.push_str(&memory_summary(runtime, &config, &profiles));
    Ok(out)
}

/// Builds the profiles of `config` as a scheduler builds them: every plugin
/// instantiated with its args.
fn build_as_the_scheduler(
    runtime: &Arc<Runtime>,
    config: &Configuration,
    file: &str,
    gates: &FrameworkOptions,
) -> Result<(), Vec<String>> {
    // Instantiating every plugin with its args is what the scheduler does next; a
    // plugin that refuses its args fails here. The profiles are built as a scheduler
    // builds them, with the host services it gives (the embedded cluster binds), but
    // no loop and no binding threads.
    let cluster: Arc<dyn crate::cluster::Binder> =
        Arc::new(crate::cluster::memory::MemoryCluster::new());
    let builder = Builder::new(
        runtime.clone(),
        HostServices {
            binder: Some(cluster.clone()),
            claim_writer: Some(cluster),
            namespaces: Namespaces::new(),
            waiting: WaitingPods::new(),
            metrics: Some(crate::metrics::Metrics::new()),
            budgets: Budgets::new(),
            storage: Storage::new(),
            pod_groups: Default::default(),
            dra: Default::default(),
            // The framework gives its plugins its options' gates.
            gates: Default::default(),
        },
        gates.clone(),
    );
    builder
        .build(config, file, None, None)
        .map(drop)
        .map_err(|e| {
            vec![match e.field {
                Some(_) => e.to_string(),
                None => format!("{file}: {}", e.reason),
            }]
        })
}

/// The lines `validate` prints of one profile: its plugins at each point, what each
/// may do beyond reading, its shadow runs.
fn profile_summary(
    runtime: &Arc<Runtime>,
    config: &Configuration,
    p: &crate::config::Profile,
) -> String {
    let mut out = format!(
        "profile {}: {} plugins\n",
        p.scheduler_name,
        p.plugin_names().len()
    );
    for point in CONFIGURABLE_POINTS {
        let list = p.plugins_at(point);
        if list.is_empty() {
            continue;
        }
        let names: Vec<String> = list
            .iter()
            .map(|(n, w)| {
                if point.weighted() {
                    format!("{n}({w})")
                } else {
                    n.clone()
                }
            })
            .collect();
        out.push_str(&format!("  {:<11} {}\n", point.as_str(), names.join(", ")));
    }
    // What each plugin may do beyond reading (see `wasm::capability`).
    let mut by_plugin: Vec<(String, Vec<berth_sdk::ExtensionPoint>)> = Vec::new();
    for point in CONFIGURABLE_POINTS {
        for (name, _) in p.plugins_at(point) {
            match by_plugin.iter_mut().find(|(n, _)| n == name) {
                Some((_, points)) => points.push(point),
                None => by_plugin.push((name.clone(), vec![point])),
            }
        }
    }
    for (name, points) in &by_plugin {
        let mut calls: Vec<String> = crate::wasm::capability::granted(points)
            .iter()
            .map(|(call, at)| format!("{} at {} ({})", call.as_str(), at.join("/"), call.scope()))
            .collect();
        let waits_of = config.sandbox_for(name, runtime.limits()).grants.waits_of;
        if !waits_of.is_empty() {
            calls.push(format!(
                "allow-waiting-pod, reject-waiting-pod for the waits of {} too (sandbox.grants.waitsOf)",
                waits_of.join(", ")
            ));
        }
        if !calls.is_empty() {
            out.push_str(&format!("  {:<11} {name}: {}\n", "may", calls.join("; ")));
        }
    }
    for (name, shadow) in &p.shadows {
        out.push_str(&format!(
            "  {:<11} {name}: candidate {}\n",
            "shadow",
            shadow.path.display()
        ));
    }
    out
}

/// Why the default configuration could not be printed.
#[derive(Debug, thiserror::Error)]
pub enum DefaultConfigError {
    /// The default profile or leader election settings were refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A built-in plugin's module could not be loaded.
    #[error(transparent)]
    Modules(#[from] RegistryError),
    /// The configuration could not be written as YAML.
    #[error(transparent)]
    Yaml(#[from] serde_saphyr::SerializeError),
}

/// The effective default configuration as a `KubeSchedulerConfiguration`, with the
/// default profile's `multiPoint` list and, as comments, what it expands to, under
/// the feature gates in `gates`.
pub fn default_configuration(
    runtime: &Arc<Runtime>,
    gates: &FrameworkOptions,
) -> Result<String, DefaultConfigError> {
    let config = Configuration::default();
    let specs = config.resolve_profiles("<default>", gates.generic_workload)?;
    let modules = load_modules(runtime, &[], &specs[0].plugin_names())?;
    let profile = &expand_profiles(&specs, "<default>", &modules)?[0];
    let le = LeaderElectionConfig::default().resolve("<default>")?;
    let queue = crate::queue::QueueConfig::default();
    let multi_point: Vec<serde_json::Value> = default_multi_point(gates.generic_workload)
        .into_iter()
        .map(|p| match p.weight {
            Some(w) => serde_json::json!({"name": p.name, "weight": w}),
            None => serde_json::json!({"name": p.name}),
        })
        .collect();
    let doc = serde_json::json!({
        "apiVersion": UPSTREAM_API_VERSION,
        "kind": UPSTREAM_KIND,
        "parallelism": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "percentageOfNodesToScore": 0,
        "podInitialBackoffSeconds": queue.initial_backoff.as_secs(),
        "podMaxBackoffSeconds": queue.max_backoff.as_secs(),
        "clientConnection": {
            "kubeconfig": "",
            "qps": crate::cluster::kube::DEFAULT_QPS,
            "burst": crate::cluster::kube::DEFAULT_BURST,
        },
        "leaderElection": {
            "leaderElect": le.enabled,
            "leaseDuration": duration::format(le.lease_duration),
            "renewDeadline": duration::format(le.renew_deadline),
            "retryPeriod": duration::format(le.retry_period),
            "resourceLock": "leases",
            "resourceName": le.name,
            "resourceNamespace": le.namespace,
        },
        "profiles": [{
            "schedulerName": profile.scheduler_name,
            "plugins": {"multiPoint": {"enabled": multi_point}},
        }],
    });
    let mut out = crate::yaml::to_string(&doc)?;
    out.push_str("# The default profile's multiPoint list, expanded per extension point:\n");
    for point in CONFIGURABLE_POINTS {
        let list = profile.plugins_at(point);
        if list.is_empty() {
            continue;
        }
        let names: Vec<String> = list.iter().map(|(n, _)| n.clone()).collect();
        out.push_str(&format!("#   {}: {}\n", point.as_str(), names.join(", ")));
    }
    out.push_str(
        "# Berth's additions go under `berth:`: berth.modules: [{name, path, sha256}] and\n# berth.plugins: [{name, failurePolicy, sandbox: {callDeadline, memoryLimit, grants}}].\n",
    );
    Ok(out)
}

/// The plugins' memory in the worst case, and its bound: every profile keeps, for each
/// of its plugins, an instance for its own calls, one per worker and one per binding
/// cycle under way (`berth run`'s default of them), each up to its `memoryLimit`.
fn memory_summary(
    runtime: &Runtime,
    config: &Configuration,
    profiles: &[crate::config::Profile],
) -> String {
    let workers = config
        .parallelism
        .unwrap_or_else(|| FrameworkOptions::default().parallelism);
    let per_plugin = 1 + workers + crate::scheduler::DEFAULT_PARALLEL_BINDINGS;
    let mut instances = 0usize;
    let mut worst = 0u128;
    for p in profiles {
        for name in p.plugin_names() {
            let limit = config
                .sandbox_for(&name, runtime.limits())
                .limits
                .max_memory_bytes;
            instances += per_plugin;
            worst += per_plugin as u128 * limit as u128;
        }
    }
    let bound = match config.total_memory_limit() {
        Some(b) => format!("bounded by berth.totalMemoryLimit: {}", mib(b as u128)),
        None => "unbounded: set berth.totalMemoryLimit".to_owned(),
    };
    format!(
        "plugin memory: {instances} instances at most (1 + {workers} workers + {} binding cycles per plugin and profile), {} in the worst case; {bound}\n",
        crate::scheduler::DEFAULT_PARALLEL_BINDINGS,
        mib(worst)
    )
}

fn mib(bytes: u128) -> String {
    format!("{}Mi", bytes >> 20)
}
