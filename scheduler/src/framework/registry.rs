//! Which module serves which plugin name: the built-in components (compiled into the
//! `berth` binary) and the modules a configuration names.

use crate::config::{ConfigError, Configuration, ModuleSource};
use berth_runtime::wasm::{LoadError, Module, Runtime, Sandbox};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Arc;

/// Why a plugin has no usable module.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Neither built in nor named in `modules`.
    #[error("plugin {0} is not built in and no entry of `modules` names it")]
    Unknown(String),
    /// The module failed to load.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The configuration's plugin settings are wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The file's hash is not the one the configuration expects.
    #[error("{path}: sha256 is {actual}, the configuration expects {expected}")]
    Sha256 {
        /// The file.
        path: String,
        /// Its hash.
        actual: String,
        /// The expected hash.
        expected: String,
    },
    /// The module could not be pulled from its registry.
    #[error("{error}")]
    Oci {
        /// The plugin.
        name: String,
        /// Why (boxed: the error types that carry this one stay small).
        error: Box<berth_runtime::oci::OciError>,
    },
    /// The module's source names neither a file nor a registry.
    #[error("plugin {0}: its module names neither a path nor an oci reference")]
    NoLocation(String),
    /// The module calls itself by another name.
    #[error(
        "{source_name}: module says it is plugin {actual}, the configuration names it {expected}"
    )]
    Name {
        /// Where the module came from.
        source_name: String,
        /// Its metadata name.
        actual: String,
        /// The name in the configuration.
        expected: String,
    },
}

/// The plugin name of a built-in plugin crate: `node-resources-fit` -> `NodeResourcesFit`.
pub fn plugin_name_of_crate(crate_name: &str) -> String {
    crate_name
        .split(['-', '_'])
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// The built-in plugins, by plugin name.
pub fn builtin_plugins() -> HashMap<String, &'static berth_artifacts::Artifact> {
    berth_artifacts::PLUGINS
        .iter()
        .map(|a| (plugin_name_of_crate(a.crate_name), a))
        .collect()
}

const BUILTIN_PREFIX: &str = "built-in ";

/// Whether a module is a built-in plugin's component (not one a configuration names).
pub fn is_builtin(module: &Module) -> bool {
    module.source().starts_with(BUILTIN_PREFIX)
}

/// Loads the modules for the named plugins: from `sources` when a source names the
/// plugin, else the built-in component; every instance in the runtime's default
/// sandbox.
pub fn load_modules(
    runtime: &Arc<Runtime>,
    sources: &[ModuleSource],
    names: &[String],
) -> Result<HashMap<String, Arc<Module>>, RegistryError> {
    load_modules_with(runtime, sources, names, &|_| runtime.default_sandbox())
}

/// Loads the modules for the named plugins as a configuration says: from its
/// modules, each plugin in the sandbox of its `berth.plugins` settings.
pub fn load_configured(
    runtime: &Arc<Runtime>,
    config: &Configuration,
    file: &str,
    names: &[String],
) -> Result<HashMap<String, Arc<Module>>, RegistryError> {
    let builtins = builtin_plugins();
    let unknown = config.unknown_plugin_settings(file, |name| builtins.contains_key(name));
    if !unknown.is_empty() {
        return Err(ConfigError::many(unknown).into());
    }
    let defaults = runtime.limits();
    load_modules_with(runtime, &config.modules(), names, &|name| {
        config.sandbox_for(name, defaults)
    })
}

/// [`load_modules`], with each plugin's sandbox given by `sandbox`.
pub fn load_modules_with(
    runtime: &Arc<Runtime>,
    sources: &[ModuleSource],
    names: &[String],
    sandbox: &dyn Fn(&str) -> Sandbox,
) -> Result<HashMap<String, Arc<Module>>, RegistryError> {
    let builtins = builtin_plugins();
    let mut out = HashMap::new();
    for name in names {
        let module = if let Some(src) = sources.iter().find(|s| &s.name == name) {
            load_source(runtime, src, sandbox(name))?
        } else if let Some(artifact) = builtins.get(name) {
            runtime.load_builtin(
                &format!("{BUILTIN_PREFIX}{}", artifact.crate_name),
                artifact.bytes,
                sandbox(name),
            )?
        } else {
            return Err(RegistryError::Unknown(name.clone()));
        };
        check_name(&module, name)?;
        out.insert(name.clone(), module);
    }
    Ok(out)
}

/// Loads a module from where its source says: a file, or a registry (pulled, or
/// from the runtime's store of pulled modules; see [`berth_runtime::oci`]).
fn load_source(
    runtime: &Arc<Runtime>,
    src: &ModuleSource,
    sandbox: Sandbox,
) -> Result<Arc<Module>, RegistryError> {
    match (&src.oci, &src.path) {
        (Some(text), _) => {
            let r = berth_runtime::oci::OciRef::parse(text).map_err(|why| RegistryError::Oci {
                name: src.name.clone(),
                error: Box::new(berth_runtime::oci::OciError::Registry {
                    reference: text.clone(),
                    detail: why,
                }),
            })?;
            let store = oci_store(runtime);
            let pulled =
                berth_runtime::oci::pull(&r, &src.access, store.as_ref()).map_err(|error| {
                    RegistryError::Oci {
                        name: src.name.clone(),
                        error: Box::new(error),
                    }
                })?;
            check_and_load(runtime, text, pulled.bytes, src.sha256.as_deref(), sandbox)
        }
        (None, Some(path)) => load_file(runtime, path, src.sha256.as_deref(), sandbox),
        (None, None) => Err(RegistryError::NoLocation(src.name.clone())),
    }
}

/// Where a runtime keeps the modules it pulled: `oci/` in its component cache
/// directory; none when it caches nothing (`--no-cache`).
pub fn oci_store(runtime: &Runtime) -> Option<berth_runtime::oci::Store> {
    runtime
        .cache_dir()
        .map(|d| berth_runtime::oci::Store::new(d.join("oci")))
}

/// Loads a component file, refused when its sha256 is not the `expected` one.
fn load_file(
    runtime: &Arc<Runtime>,
    path: &std::path::Path,
    expected: Option<&str>,
    sandbox: Sandbox,
) -> Result<Arc<Module>, RegistryError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|error| LoadError::Read {
        path: shown.clone(),
        error,
    })?;
    check_and_load(runtime, &shown, bytes, expected, sandbox)
}

/// Loads a module's bytes (named `shown`), refused when their sha256 is not the
/// `expected` one.
fn check_and_load(
    runtime: &Arc<Runtime>,
    shown: &str,
    bytes: Vec<u8>,
    expected: Option<&str>,
    sandbox: Sandbox,
) -> Result<Arc<Module>, RegistryError> {
    let shown = shown.to_owned();
    if let Some(expected) = expected {
        let actual: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        if !actual.eq_ignore_ascii_case(expected) {
            return Err(RegistryError::Sha256 {
                path: shown,
                actual,
                expected: expected.to_owned(),
            });
        }
    }
    Ok(runtime.load_with(&shown, &bytes, sandbox)?)
}

fn check_name(module: &Module, name: &str) -> Result<(), RegistryError> {
    if module.name() != name {
        return Err(RegistryError::Name {
            source_name: module.source().to_owned(),
            actual: module.name().to_owned(),
            expected: name.to_owned(),
        });
    }
    Ok(())
}

/// Loads a shadow run's candidate for plugin `name`: a module of the same plugin (so
/// that promoting it is naming it in `berth.modules`).
pub fn load_candidate(
    runtime: &Arc<Runtime>,
    name: &str,
    shadow: &crate::config::Shadow,
    sandbox: Sandbox,
) -> Result<Arc<Module>, RegistryError> {
    let module = load_file(runtime, &shadow.path, shadow.sha256.as_deref(), sandbox)?;
    check_name(&module, name)?;
    Ok(module)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crate_names_map_to_plugin_names() {
        assert_eq!(
            plugin_name_of_crate("node-resources-fit"),
            "NodeResourcesFit"
        );
        assert_eq!(plugin_name_of_crate("default-binder"), "DefaultBinder");
        assert_eq!(plugin_name_of_crate("priority-sort"), "PrioritySort");
    }

    /// Opportunistic batching runs for a profile only when each of its PreFilter,
    /// Filter, PreScore and Score plugins signs pods: in the default profile every
    /// one does, as its component and as its native twin.
    #[test]
    fn every_default_filter_and_score_plugin_signs_pods_as_wasm_and_native() {
        use berth_sdk::ExtensionPoint as E;
        let runtime = berth_runtime::wasm::test_runtime();
        let config = crate::config::Configuration::parse("x", "{}").unwrap();
        let specs = config.resolve_profiles("x", false).unwrap();
        let modules = load_modules(runtime, &[], &specs[0].plugin_names()).unwrap();
        let profile = &crate::config::expand_profiles(&specs, "x", &modules).unwrap()[0];
        let mut names: Vec<&str> = [E::PreFilter, E::Filter, E::PreScore, E::Score]
            .iter()
            .flat_map(|&p| profile.plugins_at(p))
            .map(|(name, _)| name.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(
            names,
            [
                "DynamicResources",
                "ImageLocality",
                "InterPodAffinity",
                "NodeAffinity",
                "NodeDeclaredFeatures",
                "NodeName",
                "NodePorts",
                "NodeResourcesBalancedAllocation",
                "NodeResourcesFit",
                "NodeUnschedulable",
                "NodeVolumeLimits",
                "PodTopologySpread",
                "TaintToleration",
                "VolumeBinding",
                "VolumeRestrictions",
                "VolumeZone",
            ]
        );
        let twins = berth_runtime::native::registry();
        for name in names {
            assert!(
                modules[name].extension_points().contains(&E::SignPod),
                "{name}'s component does not implement SignPod"
            );
            let twin = twins
                .get(name)
                .unwrap_or_else(|| panic!("{name} has no twin"));
            assert!(
                twin.extension_points().contains(&E::SignPod),
                "{name}'s native twin does not implement SignPod"
            );
        }
        // A plugin that does not sign (DefaultBinder only binds) is told apart.
        assert!(
            !modules["DefaultBinder"]
                .extension_points()
                .contains(&E::SignPod)
        );
        assert!(
            !twins["DefaultBinder"]
                .extension_points()
                .contains(&E::SignPod)
        );
    }
}
