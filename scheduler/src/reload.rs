//! Hot swap: a new configuration, or new module files behind the same one, built into
//! frameworks off the scheduling path, checked, and handed to the scheduler, which
//! swaps them in between two scheduling cycles ([`crate::scheduler::Scheduler::swap`]).
//!
//! What a build checks, for every plugin whose module, args or sandbox changed (or
//! that is new): that the module loads (a component of the plugin world, of the WIT
//! version this host speaks, with the name the configuration gives it and the sha256
//! it expects), that it implements every extension point the profile enables it at,
//! that `configure` accepts its args, and a trial call on a small built-in pod and
//! node (the one `berth plugin check` makes). A profile in which nothing changed keeps
//! its framework, instances and all; a profile in which something changed gets a new
//! framework whose scheduling instances are made and synced with the cluster before
//! the swap.
//!
//! What a build refuses outright: a change to the profiles' scheduler names (pods in
//! the queue belong to a profile by that name, and pods of a new name were never
//! taken in). A change of the QueueSort plugin is carried over: the swap gives every
//! waiting pod its new sort key.

use crate::config::{Configuration, Profile};
use crate::framework::{Framework, FrameworkError, FrameworkOptions, registry};
use berth_runtime::cache::Snapshot;
use berth_runtime::wasm::module::HostServices;
use berth_runtime::wasm::{LoadError, Module, Runtime};
use berth_sdk::ExtensionPoint;
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

/// Why a configuration or a module was refused: the old version keeps serving.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct ReloadError {
    /// The configuration file.
    pub file: String,
    /// The field of the configuration at fault, when one is.
    pub field: Option<String>,
    /// The plugin at fault, when one is.
    pub plugin: Option<String>,
    /// Its module (a path, or `built-in CRATE`), when known.
    pub module: Option<String>,
    /// Why, as the loader, the configuration check or the plugin said it.
    pub reason: String,
}

impl ReloadError {
    fn config(file: &str, e: impl std::fmt::Display) -> Self {
        ReloadError {
            file: file.to_owned(),
            field: None,
            plugin: None,
            module: None,
            reason: e.to_string(),
        }
    }

    fn describe(&self) -> String {
        let mut s = String::new();
        if let Some(f) = &self.field {
            s.push_str(&format!("{}: {f}: ", self.file));
        }
        s.push_str(&self.reason);
        s
    }
}

/// A version of the scheduler's profiles: the configuration, the profiles it expands
/// to, the modules, and the frameworks built from them.
pub struct Generation {
    /// 1 for the configuration the scheduler started with, then one more per swap.
    pub number: u64,
    /// The configuration file (or how the configuration was given).
    pub file: String,
    /// The configuration.
    pub config: Configuration,
    /// The profiles, in the configuration's order.
    pub profiles: Vec<Profile>,
    /// One framework per profile, in the same order.
    pub frameworks: Vec<Arc<Framework>>,
    /// The module of each plugin, by plugin name.
    pub modules: HashMap<String, Arc<Module>>,
    /// The shadow candidate of each plugin that has one, by plugin name.
    pub candidates: HashMap<String, Arc<Module>>,
    /// The framework options of each profile (parallelism, percentage of nodes to
    /// score).
    options: Vec<FrameworkOptions>,
    /// When this generation was swapped in.
    pub loaded_at: std::time::SystemTime,
}

impl std::fmt::Debug for Generation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generation")
            .field("number", &self.number)
            .field("file", &self.file)
            .field("profiles", &self.profiles)
            .finish_non_exhaustive()
    }
}

impl Generation {
    /// The scheduler names of the profiles, in order.
    pub fn scheduler_names(&self) -> Vec<String> {
        self.profiles
            .iter()
            .map(|p| p.scheduler_name.clone())
            .collect()
    }

    /// What `/plugins` shows: per profile, each plugin with its module, sha256,
    /// version, WIT version, extension points, args and load time.
    pub fn describe(&self) -> serde_json::Value {
        use serde_json::json;
        let time = |t: std::time::SystemTime| {
            k8s_openapi::jiff::Timestamp::try_from(t)
                .map(|t| t.to_string())
                .unwrap_or_default()
        };
        let profiles: Vec<serde_json::Value> = self
            .profiles
            .iter()
            .map(|p| {
                let plugins: Vec<serde_json::Value> = p
                    .plugin_names()
                    .iter()
                    .filter_map(|name| {
                        let m = self.modules.get(name)?;
                        let points: Vec<serde_json::Value> = ExtensionPoint::ALL
                            .iter()
                            .filter_map(|pt| {
                                let (_, w) = p.plugins_at(*pt).iter().find(|(n, _)| n == name)?;
                                Some(if pt.weighted() {
                                    json!({"point": pt.as_str(), "weight": w})
                                } else {
                                    json!({"point": pt.as_str()})
                                })
                            })
                            .collect();
                        let shadow = p.shadows.get(name).and_then(|sh| {
                            let c = self.candidates.get(name)?;
                            Some(json!({
                                "module": c.source(),
                                "sha256": c.sha256(),
                                "version": c.version(),
                                "loadedAt": time(c.loaded_at()),
                                "args": sh.args,
                            }))
                        });
                        Some(json!({
                            "name": name,
                            "shadow": shadow,
                            "module": m.source(),
                            "builtIn": registry::is_builtin(m),
                            "sha256": m.sha256(),
                            "version": m.version(),
                            "witVersion": m.wit_version(),
                            "loadedAt": time(m.loaded_at()),
                            "extensionPoints": points,
                            "args": p.args.get(name).cloned().unwrap_or(serde_json::Value::Null),
                            "failurePolicy": if p.fail_open.contains(name) { "FailOpen" } else { "FailClosed" },
                        }))
                    })
                    .collect();
                json!({"schedulerName": p.scheduler_name, "plugins": plugins})
            })
            .collect();
        json!({
            "generation": self.number,
            "configuration": self.file,
            "loadedAt": time(self.loaded_at),
            "profiles": profiles,
        })
    }
}

/// What a build made: a new generation, and how it differs from the one it was built
/// against.
pub struct Built {
    /// The new generation (numbered once swapped in).
    pub generation: Generation,
    /// The number of the generation it was built against.
    pub base: u64,
    /// Plugins whose module, args, sandbox, failure policy or extension points changed,
    /// and plugins added or removed: the swap moves the pods they rejected.
    pub changed: BTreeSet<String>,
    /// Whether the QueueSort plugin (or its module or args) changed: the swap re-keys
    /// the waiting pods.
    pub queue_sort_changed: bool,
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Built")
            .field("base", &self.base)
            .field("changed", &self.changed)
            .field("queue_sort_changed", &self.queue_sort_changed)
            .finish_non_exhaustive()
    }
}

impl Built {
    /// Whether the build changes nothing (the files were touched, not changed).
    pub fn is_noop(&self) -> bool {
        self.changed.is_empty() && !self.queue_sort_changed
    }
}

/// Builds generations: what every framework of the scheduler shares (the engine, the
/// host services, the base options). Cheap to clone, and `Send`: a build runs on any
/// thread.
#[derive(Clone)]
pub struct Builder {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) services: HostServices,
    pub(crate) options: FrameworkOptions,
}

impl Builder {
    /// A builder of profiles for `runtime`, whose plugins get `services` and the
    /// framework `options` (its feature gates among them).
    pub fn new(runtime: Arc<Runtime>, services: HostServices, options: FrameworkOptions) -> Self {
        Builder {
            runtime,
            services,
            options,
        }
    }
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The field of the configuration that names a plugin's module.
fn module_field(config: &Configuration, plugin: &str) -> String {
    if let Some(k) = config.modules.iter().position(|m| m.name == plugin) {
        return format!("modules[{k}]");
    }
    if let Some(k) = config
        .berth
        .iter()
        .flat_map(|b| b.modules.iter())
        .position(|m| m.name == plugin)
    {
        return format!("berth.modules[{k}]");
    }
    format!("plugin {plugin} (built in)")
}

/// The field of a profile that gives a plugin its args, else the field of its module.
pub fn args_field(config: &Configuration, profile: usize, plugin: &str) -> String {
    config
        .profiles
        .get(profile)
        .and_then(|p| p.plugin_config.iter().position(|a| a.name == plugin))
        .map(|j| format!("profiles[{profile}].pluginConfig[{j}].args"))
        .unwrap_or_else(|| module_field(config, plugin))
}

/// The `pluginConfig` args of built-in plugins their profile does not enable, each
/// handed to the plugin's `configure`: kube-scheduler validates the args of its
/// in-tree plugins whether the profile enables them or not. A `modules` entry of that
/// name is another plugin, and is left alone. One refusal per entry refused, naming
/// its field.
pub fn refused_args_of_disabled_builtins(
    runtime: &Arc<Runtime>,
    config: &Configuration,
    specs: &[crate::config::ProfileSpec],
    file: &str,
) -> Vec<ReloadError> {
    let builtins = registry::builtin_plugins();
    let sources = config.modules();
    let defaults = runtime.limits();
    let mut refusals = Vec::new();
    for spec in specs {
        let Some(profile) = config.profiles.get(spec.index) else {
            continue;
        };
        let enabled = spec.plugin_names();
        for entry in &profile.plugin_config {
            let name = &entry.name;
            if !builtins.contains_key(name)
                || sources.iter().any(|s| &s.name == name)
                || enabled.contains(name)
            {
                continue;
            }
            let args = entry.args.to_string();
            let checked =
                registry::load_modules_with(runtime, &sources, std::slice::from_ref(name), &|n| {
                    config.sandbox_for(n, defaults)
                })
                .map_err(|e| e.to_string())
                .and_then(|loaded| {
                    loaded
                        .values()
                        .try_for_each(|m| m.instantiate(&args, HostServices::default()).map(drop))
                        .map_err(|e| e.to_string())
                });
            if let Err(reason) = checked {
                refusals.push(ReloadError {
                    file: file.to_owned(),
                    field: Some(args_field(config, spec.index, name)),
                    plugin: Some(name.clone()),
                    module: None,
                    reason,
                });
            }
        }
    }
    refusals
}

/// The plugin a framework error is about.
fn plugin_of(e: &FrameworkError) -> Option<String> {
    match e {
        FrameworkError::MissingExtensionPoint { plugin, .. }
        | FrameworkError::NoModule { plugin, .. } => Some(plugin.clone()),
        FrameworkError::Load(l) => match l {
            LoadError::Configure { plugin, .. } | LoadError::Sandbox { plugin, .. } => {
                Some(plugin.clone())
            }
            _ => None,
        },
    }
}

/// How a plugin is set up in a profile: its module, args, failure policy and where it
/// is enabled, with weights. Two equal setups run the same.
fn setup(p: &Profile, modules: &HashMap<String, Arc<Module>>, name: &str) -> Option<String> {
    let m = modules.get(name)?;
    let points: Vec<(ExtensionPoint, i64)> = p
        .points
        .iter()
        .filter_map(|(pt, list)| list.iter().find(|(n, _)| n == name).map(|(_, w)| (*pt, *w)))
        .collect();
    if points.is_empty() {
        return None;
    }
    Some(format!(
        "{}|{}|{:?}|{}|{}|{:?}",
        m.sha256(),
        m.source(),
        m.sandbox(),
        p.args.get(name).cloned().unwrap_or_default(),
        p.fail_open.contains(name),
        points
    ))
}

impl Builder {
    /// Loads the shadow candidates the profiles name, one per plugin, each in its
    /// plugin's sandbox; one loaded already (the same bytes, path and sandbox) is
    /// kept. A new candidate gets the trial call a new module gets.
    fn load_candidates(
        &self,
        config: &Configuration,
        file: &str,
        profiles: &[Profile],
        base: Option<&Generation>,
    ) -> Result<HashMap<String, Arc<Module>>, ReloadError> {
        let defaults = self.runtime.limits();
        let mut out: HashMap<String, Arc<Module>> = HashMap::new();
        for p in profiles {
            for (name, spec) in &p.shadows {
                let refused = |reason: String| ReloadError {
                    file: file.to_owned(),
                    field: Some(spec.field()),
                    plugin: Some(name.clone()),
                    module: Some(spec.path.display().to_string()),
                    reason,
                };
                if !out.contains_key(name) {
                    let sandbox = config.sandbox_for(name, defaults);
                    let m = registry::load_candidate(&self.runtime, name, spec, sandbox)
                        .map_err(|e| refused(format!("shadow candidate of {name}: {e}")))?;
                    let kept = base.and_then(|b| b.candidates.get(name)).filter(|old| {
                        old.sha256() == m.sha256()
                            && old.source() == m.source()
                            && old.sandbox() == m.sandbox()
                    });
                    out.insert(name.clone(), kept.cloned().unwrap_or(m));
                }
                let m = &out[name];
                let mut lines = Vec::new();
                crate::testing::trial(m, &spec.args.to_string(), &mut lines).map_err(|why| {
                    refused(format!(
                        "shadow candidate of {name} ({}): the trial call failed: {why}",
                        m.source()
                    ))
                })?;
            }
        }
        Ok(out)
    }

    /// The module of a plugin, its args, and its sandbox: what a trial depends on.
    fn trial_key(p: &Profile, m: &Module, name: &str) -> String {
        format!(
            "{}|{:?}|{}",
            m.sha256(),
            m.sandbox(),
            p.args.get(name).cloned().unwrap_or_default()
        )
    }

    /// Builds a generation for `config`. Against `base` (a reload), modules that did
    /// not change are reused, profiles in which nothing changed keep their framework,
    /// changed or new plugins are put through their checks and a trial call, and the
    /// new frameworks are warmed with `snapshot`. Without `base` (the first build) the
    /// modules are loaded and the frameworks made, as the scheduler starts.
    pub fn build(
        &self,
        config: &Configuration,
        file: &str,
        base: Option<&Generation>,
        snapshot: Option<&Snapshot>,
    ) -> Result<Built, ReloadError> {
        let specs = config
            .resolve_profiles(file, self.options.generic_workload)
            .map_err(|e| ReloadError::config(file, e))?;
        let builtins = registry::builtin_plugins();
        let unknown = config.unknown_plugin_settings(file, |name| builtins.contains_key(name));
        if !unknown.is_empty() {
            return Err(ReloadError::config(
                file,
                crate::config::ConfigError::many(unknown),
            ));
        }
        if let Some(base) = base {
            check_restart_settings(base, config, file, &specs)?;
        }
        let names = crate::config::plugin_names_of(&specs);
        let modules = self.load_modules(config, file, &names, base)?;
        if let Some(refused) =
            refused_args_of_disabled_builtins(&self.runtime, config, &specs, file)
                .into_iter()
                .next()
        {
            return Err(refused);
        }
        let profiles = crate::config::expand_profiles(&specs, file, &modules)
            .map_err(|e| ReloadError::config(file, e))?;
        let candidates = self.load_candidates(config, file, &profiles, base)?;
        let options = self.profile_options(config, &profiles);
        // What changed, plugin by plugin, against the base; each changed module, args
        // and sandbox put through its trial.
        let (changed, queue_sort_changed) = match base {
            Some(base) => {
                Self::trial_changed(config, file, base, &profiles, &modules)?;
                changes_against(base, &profiles, &modules)
            }
            None => (BTreeSet::new(), false),
        };
        let frameworks = profiles
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let kept =
                    base.filter(|b| b.keeps_framework(i, p, &options[i], &modules, &candidates));
                match kept {
                    Some(b) => Ok(b.frameworks[i].clone()),
                    None => {
                        let made = self.make_framework(config, file, i, p, &modules, &options[i]);
                        let mut fw = made?;
                        add_shadows(&mut fw, file, p, &candidates)?;
                        if let Some(s) = snapshot {
                            fw.warm(s).map_err(|e| ReloadError {
                                file: file.to_owned(),
                                field: Some(module_field(config, &e.plugin)),
                                module: modules.get(&e.plugin).map(|m| m.source().to_owned()),
                                plugin: Some(e.plugin.clone()),
                                reason: format!("syncing the cluster's nodes: {e}"),
                            })?;
                        }
                        Ok(Arc::new(fw))
                    }
                }
            })
            .collect::<Result<Vec<_>, ReloadError>>()?;
        Ok(Built {
            generation: Generation {
                number: base.map_or(1, |b| b.number + 1),
                file: file.to_owned(),
                config: config.clone(),
                profiles,
                frameworks,
                modules,
                candidates,
                options,
                loaded_at: std::time::SystemTime::now(),
            },
            base: base.map_or(0, |b| b.number),
            changed,
            queue_sort_changed,
        })
    }

    /// The modules of the plugins `names`, one plugin at a time so that a failure
    /// names its plugin. Against `base`, a built-in plugin in the same sandbox, or the
    /// same bytes from the same source in the same sandbox, keep the module already
    /// loaded (and its load time).
    fn load_modules(
        &self,
        config: &Configuration,
        file: &str,
        names: &[String],
        base: Option<&Generation>,
    ) -> Result<HashMap<String, Arc<Module>>, ReloadError> {
        let defaults = self.runtime.limits();
        let sources = config.modules();
        let mut modules: HashMap<String, Arc<Module>> = HashMap::new();
        for name in names {
            // A built-in plugin in the same sandbox: the same module (its bytes are in
            // the binary); nothing to load again.
            if let Some(old) = base.and_then(|b| b.modules.get(name))
                && registry::is_builtin(old)
                && !sources.iter().any(|s| &s.name == name)
                && *old.sandbox() == config.sandbox_for(name, defaults)
            {
                modules.insert(name.clone(), old.clone());
                continue;
            }
            let loaded = registry::load_modules_with(
                &self.runtime,
                &sources,
                std::slice::from_ref(name),
                &|n| config.sandbox_for(n, defaults),
            )
            .map_err(|e| ReloadError {
                file: file.to_owned(),
                field: Some(module_field(config, name)),
                plugin: Some(name.clone()),
                module: sources
                    .iter()
                    .find(|s| &s.name == name)
                    .map(|s| s.location()),
                reason: e.to_string(),
            })?;
            let mut m = loaded.into_values().next().expect("one module per name");
            if let Some(old) = base.and_then(|b| b.modules.get(name))
                && old.sha256() == m.sha256()
                && old.source() == m.source()
                && old.sandbox() == m.sandbox()
            {
                m = old.clone();
            }
            modules.insert(name.clone(), m);
        }
        Ok(modules)
    }

    /// Each profile's framework options: the builder's, with the configuration's
    /// parallelism and percentage of nodes to score, and the profile's own
    /// percentage over both.
    fn profile_options(
        &self,
        config: &Configuration,
        profiles: &[Profile],
    ) -> Vec<FrameworkOptions> {
        let mut base_options = self.options.clone();
        if let Some(p) = config.parallelism {
            base_options.parallelism = p;
        }
        if let Some(p) = config.percentage_of_nodes_to_score {
            base_options.percentage_of_nodes_to_score = p;
        }
        profiles
            .iter()
            .map(|p| {
                let mut o = base_options.clone();
                if let Some(pct) = p.percentage_of_nodes_to_score {
                    o.percentage_of_nodes_to_score = pct;
                }
                o
            })
            .collect()
    }

    /// The trial of a reload: once per module, args and sandbox that changed against
    /// `base`, `configure` with the args (so that args it refuses are blamed on the
    /// args), then the trial call on the built-in pod and node.
    fn trial_changed(
        config: &Configuration,
        file: &str,
        base: &Generation,
        profiles: &[Profile],
        modules: &HashMap<String, Arc<Module>>,
    ) -> Result<(), ReloadError> {
        let mut tried: BTreeSet<String> = BTreeSet::new();
        for (i, p) in profiles.iter().enumerate() {
            let old = &base.profiles[i];
            for name in p.plugin_names() {
                let m = &modules[&name];
                let key = Self::trial_key(p, m, &name);
                let unchanged = base
                    .modules
                    .get(&name)
                    .is_some_and(|om| Self::trial_key(old, om, &name) == key);
                if unchanged || !tried.insert(format!("{name}|{key}")) {
                    continue;
                }
                let args = crate::config::args_json(&p.args, &name);
                m.instantiate(&args, HostServices::default())
                    .map_err(|e| ReloadError {
                        file: file.to_owned(),
                        field: Some(args_field(config, i, &name)),
                        plugin: Some(name.clone()),
                        module: Some(m.source().to_owned()),
                        reason: e.to_string(),
                    })?;
                let mut lines = Vec::new();
                crate::testing::trial(m, &args, &mut lines).map_err(|why| ReloadError {
                    file: file.to_owned(),
                    field: Some(module_field(config, &name)),
                    plugin: Some(name.clone()),
                    module: Some(m.source().to_owned()),
                    reason: format!(
                        "plugin {name} ({}): the trial call failed: {why}",
                        m.source()
                    ),
                })?;
                tracing::debug!(plugin = %name, module = m.source(), "trial: {}", lines.join("; "));
            }
        }
        Ok(())
    }

    /// Profile `i`'s framework, made anew; an error names the plugin, and the field
    /// of its args or of its module.
    fn make_framework(
        &self,
        config: &Configuration,
        file: &str,
        i: usize,
        p: &Profile,
        modules: &HashMap<String, Arc<Module>>,
        options: &FrameworkOptions,
    ) -> Result<Framework, ReloadError> {
        Framework::new(p, modules, options, &self.services).map_err(|e| {
            let plugin = plugin_of(&e);
            let field = plugin.as_ref().map(|n| match &e {
                FrameworkError::Load(LoadError::Configure { .. }) => args_field(config, i, n),
                _ => module_field(config, n),
            });
            ReloadError {
                file: file.to_owned(),
                field,
                module: plugin
                    .as_ref()
                    .and_then(|n| modules.get(n))
                    .map(|m| m.source().to_owned()),
                plugin,
                reason: e.to_string(),
            }
        })
    }
}

/// Refuses a reload that changes what only a restart can: the profiles' scheduler
/// names; warns of settings read only at start.
fn check_restart_settings(
    base: &Generation,
    config: &Configuration,
    file: &str,
    specs: &[crate::config::ProfileSpec],
) -> Result<(), ReloadError> {
    let now: Vec<String> = specs.iter().map(|s| s.scheduler_name.clone()).collect();
    let was = base.scheduler_names();
    if now != was {
        return Err(ReloadError {
            file: file.to_owned(),
            field: Some("profiles".into()),
            plugin: None,
            module: None,
            reason: format!(
                "the profiles' scheduler names changed (from {was:?} to {now:?}); pods belong to a profile by name, so adding, removing or renaming a profile takes a restart"
            ),
        });
    }
    for (what, old, new) in [
        (
            "clientConnection",
            format!("{:?}", base.config.client_connection),
            format!("{:?}", config.client_connection),
        ),
        (
            "leaderElection",
            format!("{:?}", base.config.leader_election),
            format!("{:?}", config.leader_election),
        ),
        (
            "podInitialBackoffSeconds",
            format!("{:?}", base.config.pod_initial_backoff_seconds),
            format!("{:?}", config.pod_initial_backoff_seconds),
        ),
        (
            "podMaxBackoffSeconds",
            format!("{:?}", base.config.pod_max_backoff_seconds),
            format!("{:?}", config.pod_max_backoff_seconds),
        ),
    ] {
        if old != new {
            tracing::warn!(
                "{file}: {what} changed; it is read only at start and takes effect at the next start"
            );
        }
    }
    Ok(())
}

/// The plugins whose setup changed against `base` (in any profile), and whether a
/// profile's QueueSort did.
fn changes_against(
    base: &Generation,
    profiles: &[Profile],
    modules: &HashMap<String, Arc<Module>>,
) -> (BTreeSet<String>, bool) {
    let mut changed: BTreeSet<String> = BTreeSet::new();
    let mut queue_sort_changed = false;
    for (i, p) in profiles.iter().enumerate() {
        let old = &base.profiles[i];
        let mut all: BTreeSet<String> = p.plugin_names().into_iter().collect();
        all.extend(old.plugin_names());
        for name in all {
            if setup(p, modules, &name) != setup(old, &base.modules, &name) {
                changed.insert(name);
            }
        }
        let sort = |p: &Profile, mods: &HashMap<String, Arc<Module>>| {
            p.plugins_at(ExtensionPoint::QueueSort)
                .iter()
                .map(|(n, _)| setup(p, mods, n))
                .collect::<Vec<_>>()
        };
        if sort(p, modules) != sort(old, &base.modules) {
            queue_sort_changed = true;
        }
    }
    (changed, queue_sort_changed)
}

/// Adds profile `p`'s shadow runs to `fw`; an error names the shadowed plugin and
/// its shadow's field and module.
fn add_shadows(
    fw: &mut Framework,
    file: &str,
    p: &Profile,
    candidates: &HashMap<String, Arc<Module>>,
) -> Result<(), ReloadError> {
    fw.add_shadows(p, candidates).map_err(|e| {
        let plugin = plugin_of(&e).map(|n| n.trim_end_matches(" (shadow candidate)").to_owned());
        let shadow = plugin.as_ref().and_then(|n| p.shadows.get(n));
        ReloadError {
            file: file.to_owned(),
            field: shadow.map(|s| s.field()),
            module: shadow.map(|s| s.path.display().to_string()),
            plugin,
            reason: e.to_string(),
        }
    })
}

impl Generation {
    /// Whether profile `i`, now `p` with `options`, keeps this generation's framework:
    /// nothing of it changed (the profile, its parallelism and percentage, each
    /// plugin's module and each shadow's candidate are the same).
    fn keeps_framework(
        &self,
        i: usize,
        p: &Profile,
        options: &FrameworkOptions,
        modules: &HashMap<String, Arc<Module>>,
        candidates: &HashMap<String, Arc<Module>>,
    ) -> bool {
        self.profiles[i] == *p
            && self.options[i].parallelism == options.parallelism
            && self.options[i].percentage_of_nodes_to_score == options.percentage_of_nodes_to_score
            && p.plugin_names()
                .iter()
                .all(|n| Arc::ptr_eq(&modules[n], &self.modules[n]))
            && p.shadows.keys().all(|n| {
                self.candidates
                    .get(n)
                    .is_some_and(|old| Arc::ptr_eq(old, &candidates[n]))
            })
    }
}

/// Where a reload's configuration comes from.
#[derive(Clone, Debug)]
pub enum ReloadSource {
    /// Read (and check) this file.
    File(PathBuf),
    /// A configuration as YAML text (a document of `berth simulate`'s timeline):
    /// `file` names it in messages, relative paths are relative to `base`.
    Text {
        /// The YAML.
        text: String,
        /// What to call it.
        file: String,
        /// The directory relative paths start from.
        base: PathBuf,
    },
    /// The configuration the running version was built from, again: its modules are
    /// loaded anew, so that an `oci:` module whose tag moved is pulled, checked and
    /// swapped in (what `berth run`'s registry poll asks for).
    Current,
    /// This configuration; `file` names it in messages.
    Config {
        /// The configuration.
        config: Box<Configuration>,
        /// What to call it.
        file: String,
    },
}

/// A reload to build: made by [`crate::scheduler::Scheduler::prepare_reload`] on the
/// scheduling thread (cheap), built on any thread ([`ReloadJob::build`]), and its
/// result handed back to [`crate::scheduler::Scheduler::swap`].
pub struct ReloadJob {
    pub(crate) builder: Builder,
    pub(crate) base: Arc<Generation>,
    pub(crate) snapshot: Snapshot,
    pub(crate) source: ReloadSource,
}

impl std::fmt::Debug for ReloadJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadJob")
            .field("base", &self.base.number)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl ReloadJob {
    /// Reads the configuration (for a file), loads and checks what changed, and
    /// builds and warms the new frameworks. Slow (compiles modules it has not seen):
    /// run it off the scheduling thread.
    pub fn build(self) -> Result<Built, ReloadError> {
        let (config, file) = match self.source {
            ReloadSource::File(path) => {
                let file = path.display().to_string();
                let config =
                    Configuration::load(&path).map_err(|e| ReloadError::config(&file, e))?;
                (config, file)
            }
            ReloadSource::Text { text, file, base } => {
                let mut config = Configuration::parse_unchecked(&file, &text)
                    .map_err(|e| ReloadError::config(&file, e))?;
                config.resolve_paths(&base);
                config
                    .check(&file)
                    .map_err(|e| ReloadError::config(&file, e))?;
                (config, file)
            }
            ReloadSource::Current => {
                let (config, file) = (self.base.config.clone(), self.base.file.clone());
                config
                    .check(&file)
                    .map_err(|e| ReloadError::config(&file, e))?;
                (config, file)
            }
            ReloadSource::Config { config, file } => {
                config
                    .check(&file)
                    .map_err(|e| ReloadError::config(&file, e))?;
                (*config, file)
            }
        };
        self.builder
            .build(&config, &file, Some(&self.base), Some(&self.snapshot))
    }

    /// The files a reload of this configuration depends on: the configuration file
    /// and every module it names (what `berth run` watches).
    pub fn watched_files(config: &Configuration, file: Option<&std::path::Path>) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = file.map(|f| f.to_path_buf()).into_iter().collect();
        out.extend(config.modules().into_iter().filter_map(|m| m.path));
        out.extend(
            config
                .berth
                .iter()
                .flat_map(|b| b.plugins.iter())
                .filter_map(|p| Some(p.shadow.as_ref()?.path.clone())),
        );
        out
    }
}

/// What `/plugins` serves: the current version's [`Generation::describe`], replaced
/// at each swap.
pub type PluginsView = Arc<std::sync::RwLock<serde_json::Value>>;

/// The `oci:` modules of a version that follow a tag (no digest pinned), with what
/// each runs now: what `berth run` polls the registries about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FollowedTags {
    /// How often to ask (`berth.oci.pollInterval`); none: never.
    pub interval: Option<std::time::Duration>,
    /// How the registries are reached.
    pub access: berth_runtime::oci::Access,
    /// The modules, in the configuration's order.
    pub modules: Vec<FollowedTag>,
}

/// One module that follows a tag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FollowedTag {
    /// The plugin it serves.
    pub plugin: String,
    /// Its reference (a tag, no digest).
    pub reference: berth_runtime::oci::OciRef,
    /// The sha256 of the component running now (hex): a tag whose layer has
    /// another digest moved.
    pub sha256: String,
}

/// The running version's [`FollowedTags`], replaced at each swap.
pub type FollowedView = Arc<std::sync::RwLock<FollowedTags>>;

impl Generation {
    /// The modules of this version that follow a tag, and how to poll them.
    pub fn followed_tags(&self) -> FollowedTags {
        let modules = self
            .config
            .modules()
            .iter()
            .filter_map(|src| {
                let reference = src.oci_ref()?;
                let running = self.modules.get(&src.name)?;
                reference.moves().then(|| FollowedTag {
                    plugin: src.name.clone(),
                    reference,
                    sha256: running.sha256().to_owned(),
                })
            })
            .collect();
        FollowedTags {
            interval: self.config.oci_poll_interval(),
            access: self.config.oci_access(),
            modules,
        }
    }
}

/// What `/shadows` serves: the shadow runs of the current version (replaced at each
/// swap), read as they are at each request.
pub type ShadowsView =
    Arc<std::sync::RwLock<Vec<Arc<std::sync::Mutex<crate::framework::ShadowStats>>>>>;

/// The shadow runs of a view, as `/shadows` shows them.
pub fn render_shadows(view: &ShadowsView) -> serde_json::Value {
    let stats: Vec<crate::framework::ShadowStats> = view
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).clone())
        .collect();
    serde_json::json!({ "shadows": stats })
}

impl Generation {
    /// The shadow runs of every profile of this version.
    pub fn shadow_stats(&self) -> Vec<Arc<std::sync::Mutex<crate::framework::ShadowStats>>> {
        self.frameworks
            .iter()
            .flat_map(|f| f.shadow_stats())
            .collect()
    }
}
