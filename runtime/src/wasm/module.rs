//! Plugin modules: a component loaded from bytes or a file (compiled, or taken from the
//! engine's cache), checked against the plugin world, what it says of itself
//! (`plugin.info`, its version section), and the stores its instances run in.

use super::convert;
use super::engine::hex;
use super::exports::{PluginExports, PluginExportsPre};
use super::output::{GuestOutput, Stream};
use super::sandbox::{Sandbox, SandboxError};
use berth_sdk::EventRegistration;
use berth_sdk::ExtensionPoint;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::Arc;
use wasmtime::Store;
use wasmtime::component::{Component, ResourceTable};

// What this module held before the engine, the host imports and the instances moved
// out of it, still reachable at `wasm::module::...`.
pub use super::engine::{Runtime, RuntimeOptions};
pub use super::host_imports::{FeatureGates, HostCtx, HostServices};
pub use super::instance::{Instance, WitPod, pod_to_wit};

pub use super::abi::WIT_VERSION;
use super::abi::{Policy, Support};

/// Why a module could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    // The OS error is part of the message, not a `source`: shown once in a chain.
    #[error("{path}: cannot read plugin module: {error}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        error: std::io::Error,
    },
    /// The bytes are not a component wasmtime can compile.
    #[error("{source_name}: not a valid WebAssembly component: {message}")]
    Compile {
        /// Where the module came from.
        source_name: String,
        /// What the compiler said.
        message: String,
    },
    /// The component does not target Berth's `scheduler-plugin` world.
    #[error(
        "{source_name}: does not fit the berth:scheduler@{WIT_VERSION} plugin world: {message}"
    )]
    World {
        /// Where the module came from.
        source_name: String,
        /// What was missing or different.
        message: String,
    },
    /// The sandbox the configuration grants cannot be made (a directory that cannot
    /// be opened).
    #[error("plugin {plugin} ({source_name}): sandbox: {message}")]
    Sandbox {
        /// The plugin's name.
        plugin: String,
        /// Where the module came from.
        source_name: String,
        /// What failed.
        message: String,
    },
    /// The module's metadata call failed or answered something unusable.
    #[error("{source_name}: {message}")]
    Metadata {
        /// Where the module came from.
        source_name: String,
        /// What was wrong.
        message: String,
    },
    /// The module refused its args.
    #[error("plugin {plugin} ({source_name}) refused its args: {message}")]
    Configure {
        /// The plugin's name.
        plugin: String,
        /// Where the module came from.
        source_name: String,
        /// The plugin's message.
        message: String,
    },
}

impl Runtime {
    /// Loads a module from a file.
    pub fn load_file(self: &Arc<Self>, path: &Path) -> Result<Arc<Module>, LoadError> {
        let bytes = std::fs::read(path).map_err(|error| LoadError::Read {
            path: path.display().to_string(),
            error,
        })?;
        self.load(&path.display().to_string(), &bytes)
    }

    /// Compiles (or loads the cached precompiled artifact of) a component, links it
    /// against the plugin world and reads its metadata; its instances run in the
    /// default sandbox.
    pub fn load(
        self: &Arc<Self>,
        source_name: &str,
        bytes: &[u8],
    ) -> Result<Arc<Module>, LoadError> {
        self.load_with(source_name, bytes, self.default_sandbox())
    }

    /// [`Runtime::load`], with the instances (the metadata one too) in `sandbox`.
    pub fn load_with(
        self: &Arc<Self>,
        source_name: &str,
        bytes: &[u8],
        sandbox: Sandbox,
    ) -> Result<Arc<Module>, LoadError> {
        let sha256 = hex(&Sha256::digest(bytes));
        let component = self.compile_cached(source_name, &sha256, bytes)?;
        self.link_module(source_name, bytes, sha256, component, sandbox)
    }

    /// [`Runtime::load_with`] for the bytes of a built-in plugin, which are part of
    /// the program: compiled once per runtime, however many schedulers load them.
    pub fn load_builtin(
        self: &Arc<Self>,
        source_name: &str,
        bytes: &'static [u8],
        sandbox: Sandbox,
    ) -> Result<Arc<Module>, LoadError> {
        let (sha256, component) = self.builtin_component(source_name, bytes)?;
        self.link_module(source_name, bytes, sha256, component, sandbox)
    }

    /// Links a compiled component against the plugin world and reads its metadata.
    fn link_module(
        self: &Arc<Self>,
        source_name: &str,
        bytes: &[u8],
        sha256: String,
        component: wasmtime::component::Component,
        sandbox: Sandbox,
    ) -> Result<Arc<Module>, LoadError> {
        // Before linking: wasmtime would link a newer patch of the host's track by
        // its semver-compatible names, and the policy refuses it.
        let (wit_version, adapted_track) = self
            .wit_version_of(&component)
            .map_err(|message| LoadError::World {
                source_name: source_name.to_owned(),
                message,
            })?
            .unzip();
        let world_err = |e: wasmtime::Error| LoadError::World {
            source_name: source_name.to_owned(),
            // Of a version the host loads: wasmtime's message names what is missing
            // or different.
            message: format!("{e:#}"),
        };
        let pre = self.linker.instantiate_pre(&component).map_err(world_err)?;
        let pre =
            PluginExportsPre::new(pre, adapted_track.flatten().as_deref()).map_err(world_err)?;
        let mut module = Module {
            runtime: self.clone(),
            pre,
            name: String::new(),
            extension_points: Vec::new(),
            wants_pods: false,
            pre_filter_extensions: false,
            events: None,
            sha256,
            source: source_name.to_owned(),
            wit_version: wit_version.unwrap_or_else(|| WIT_VERSION.to_owned()),
            sandbox,
            version: plugin_version(bytes),
            loaded_at: std::time::SystemTime::now(),
        };
        // Read the metadata from a throwaway instance.
        let (mut store, bindings) = module
            .new_store(HostServices::default())
            .map_err(|e| module.store_error(e))?;
        store.set_epoch_deadline(module.sandbox.limits.deadline_ticks());
        let info = bindings
            .plugin()
            .call_info(&mut store)
            .map_err(|e| LoadError::Metadata {
                source_name: source_name.to_owned(),
                message: format!("plugin.info trapped: {e:#}"),
            })?;
        let policy = Policy::current();
        if let Support::Refused(why) = policy.classify(&info.wit_version) {
            return Err(LoadError::Metadata {
                source_name: source_name.to_owned(),
                message: format!(
                    "plugin.info says it was {}",
                    policy.refusal(&info.wit_version, why)
                ),
            });
        }
        if info.name.is_empty() {
            return Err(LoadError::Metadata {
                source_name: source_name.to_owned(),
                message: "plugin.info answered an empty name".into(),
            });
        }
        module.name = info.name;
        module.wants_pods = info.wants_pods;
        module.pre_filter_extensions = info.pre_filter_extensions;
        module.events = info.events.map(|list| {
            list.into_iter()
                .map(convert::registration_from_wit)
                .collect()
        });
        module.extension_points = info
            .extension_points
            .into_iter()
            .map(convert::point_from_wit)
            .collect();
        // The points of the optional interfaces the module exports, as each says.
        let optional = bindings
            .implemented(&mut store)
            .map_err(|e| LoadError::Metadata {
                source_name: source_name.to_owned(),
                message: format!("an optional interface's `implemented` trapped: {e:#}"),
            })?;
        for (interface, names, known) in optional {
            for name in names {
                let point = known
                    .contains(&name.as_str())
                    .then(|| ExtensionPoint::from_name(&name))
                    .flatten()
                    .ok_or_else(|| LoadError::Metadata {
                        source_name: source_name.to_owned(),
                        message: format!(
                            "berth:scheduler/{}.implemented answered {name:?}, which is not one of its points ({})",
                            interface.replace('_', "-"),
                            known.join(", ")
                        ),
                    })?;
                if !module.extension_points.contains(&point) {
                    module.extension_points.push(point);
                }
            }
        }
        Ok(Arc::new(module))
    }

    /// The version of `berth:scheduler` a component's imports and exports carry, when
    /// the policy ([`super::abi`]) loads it, and the track whose adapter it loads
    /// through (`None`: the host's own track): `None` when they name no version (the
    /// link then says what is missing). An error names a refused version, the host's
    /// and what the host loads.
    fn wit_version_of(
        &self,
        component: &Component,
    ) -> Result<Option<(String, Option<String>)>, String> {
        let ty = component.component_type();
        let names = ty
            .imports(&self.engine)
            .map(|(n, _)| n)
            .chain(ty.exports(&self.engine).map(|(n, _)| n));
        let versions = names
            .filter_map(|n| n.strip_prefix("berth:scheduler/"))
            .filter_map(|n| n.split_once('@').map(|(_, v)| v));
        let policy = Policy::current();
        match policy.judge(versions) {
            None => Ok(None),
            Some((v, Support::Refused(why))) => Err(policy.refusal(&v, why)),
            Some((v, Support::Adapted { track })) => Ok(Some((v, Some(track)))),
            Some((v, Support::Current | Support::OlderPatch)) => Ok(Some((v, None))),
        }
    }
}

/// A compiled, linked plugin module and what it says of itself.
pub struct Module {
    runtime: Arc<Runtime>,
    pre: PluginExportsPre,
    pub(super) name: String,
    extension_points: Vec<ExtensionPoint>,
    pub(super) wants_pods: bool,
    pre_filter_extensions: bool,
    events: Option<Vec<EventRegistration>>,
    sha256: String,
    pub(super) source: String,
    wit_version: String,
    pub(super) sandbox: Sandbox,
    version: Option<String>,
    loaded_at: std::time::SystemTime,
}

/// The plugin's own version, from the custom section the SDK writes (it sits in a
/// nested core module, so every section is looked at); `None` when it has none.
fn plugin_version(bytes: &[u8]) -> Option<String> {
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload {
            Ok(wasmparser::Payload::CustomSection(c)) if c.name() == berth_sdk::VERSION_SECTION => {
                return Some(String::from_utf8_lossy(c.data()).into_owned());
            }
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// Why a store could not be made.
pub(super) enum StoreError {
    /// The WASI context of the grants (a directory that cannot be opened).
    Sandbox(SandboxError),
    /// Instantiation (a missing import, a trap in a start function, a limit).
    Instantiate(wasmtime::Error),
    /// The instance's memory would pass `berth.totalMemoryLimit`.
    Memory(String),
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module")
            .field("name", &self.name)
            .field("source", &self.source)
            .field("sha256", &self.sha256)
            .finish()
    }
}

impl Module {
    /// The plugin's name, from its metadata.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The extension points the plugin says it implements.
    pub fn extension_points(&self) -> &[ExtensionPoint] {
        &self.extension_points
    }
    /// The events that may make pods this plugin rejected schedulable; `None` means
    /// every event.
    pub fn events(&self) -> Option<&[EventRegistration]> {
        self.events.as_deref()
    }

    /// Whether the plugin's replica needs the pods of each node.
    pub fn wants_pods(&self) -> bool {
        self.wants_pods
    }

    /// Whether the plugin exports PreFilterExtensions (AddPod/RemovePod).
    pub fn pre_filter_extensions(&self) -> bool {
        self.pre_filter_extensions
    }
    /// The sha256 of the module's bytes, hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }
    /// Where the module came from.
    pub fn source(&self) -> &str {
        &self.source
    }
    /// The sandbox its instances run in.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }
    /// The plugin's own version (the SDK's `berth:plugin-version` section), if the
    /// component records one.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }
    /// When this module was loaded (compiled or taken from the cache, and checked).
    pub fn loaded_at(&self) -> std::time::SystemTime {
        self.loaded_at
    }
    /// The version of `berth:scheduler` the module's interfaces carry: the host's
    /// ([`WIT_VERSION`]), or an older patch of its track (see [`super::abi`]).
    pub fn wit_version(&self) -> &str {
        &self.wit_version
    }

    pub(super) fn store_error(&self, e: StoreError) -> LoadError {
        let plugin = if self.name.is_empty() {
            "(not yet named)".to_owned()
        } else {
            self.name.clone()
        };
        match e {
            StoreError::Sandbox(e) => LoadError::Sandbox {
                plugin,
                source_name: self.source.clone(),
                message: format!("{e:#}"),
            },
            StoreError::Memory(message) => LoadError::Sandbox {
                plugin,
                source_name: self.source.clone(),
                message,
            },
            StoreError::Instantiate(e) => LoadError::World {
                source_name: self.source.clone(),
                message: format!("{e:#}"),
            },
        }
    }

    pub(super) fn new_store(
        &self,
        services: HostServices,
    ) -> Result<(Store<HostCtx>, PluginExports), StoreError> {
        let limits = self.sandbox.limits;
        let plugin = if self.name.is_empty() {
            self.source.as_str()
        } else {
            self.name.as_str()
        };
        let output = GuestOutput::new(plugin, services.metrics.as_ref());
        let wasi = self
            .sandbox
            .wasi_ctx(output.stdio(Stream::Stdout), output.stdio(Stream::Stderr))
            .map_err(StoreError::Sandbox)?;
        let ctx = HostCtx {
            wasi,
            table: ResourceTable::new(),
            limits: limits.store_limiter(self.runtime.memory.clone()),
            clock: self.sandbox.clock(),
            services,
            output,
            dry_run: None,
            waited: std::time::Duration::ZERO,
            plugin: plugin.to_owned(),
            scope: super::capability::CallScope::default(),
            refused: None,
            pod_gone: false,
            waits_of: self.sandbox.grants.waits_of.clone(),
        };
        let mut store = Store::new(&self.runtime.engine, ctx);
        store.limiter(|c| &mut c.limits);
        store.set_epoch_deadline(limits.deadline_ticks());
        // The deadline traps, except that time the host spent waiting for the cluster
        // on the plugin's behalf is given back.
        store.epoch_deadline_callback(|mut ctx| {
            let waited = std::mem::take(&mut ctx.data_mut().waited);
            let ticks = (waited.as_millis() / super::limits::EPOCH_TICK.as_millis()) as u64;
            Ok(if ticks == 0 {
                wasmtime::UpdateDeadline::Interrupt
            } else {
                wasmtime::UpdateDeadline::Continue(ticks)
            })
        });
        let bindings = match self.pre.instantiate(&mut store) {
            Ok(b) => b,
            // Its first memory did not fit the bound on all instances together.
            Err(_) if store.data().limits.refused().is_some() => {
                let why = store.data().limits.refused().unwrap_or_default();
                return Err(StoreError::Memory(why.to_owned()));
            }
            Err(e) => return Err(StoreError::Instantiate(e)),
        };
        Ok((store, bindings))
    }
}
