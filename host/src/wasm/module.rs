//! The engine, plugin modules and their instances.

use super::CallError;
use super::bindings::berth::scheduler::{host, types as w};
use super::bindings::exports::berth::scheduler as ex;
use super::bindings::{SchedulerPlugin, SchedulerPluginPre};
use super::convert;
use super::limits::{EPOCH_TICK, Limits};
use super::output::{GuestOutput, Level, Stream};
use super::sandbox::{ClockView, Grants, Sandbox, SandboxClock};
use crate::cache::Snapshot;
use crate::cluster::storage::Storage;
use crate::cluster::{Binder, Budgets, Namespaces};
use crate::framework::CyclePod;
use crate::framework::cycle_state::CycleState;
use crate::framework::preemption::{DryRun, Simulation};
use crate::framework::waiting::WaitingPods;
use berth_sdk::EventRegistration;
use berth_sdk::PodFeature;
use berth_sdk::{ExtensionPoint, PreFilterResult, Status};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use wasmtime::component::{Component, HasSelf, Linker, Resource, ResourceTable};
use wasmtime::{Engine, Store, StoreLimits};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// The WIT package version this host speaks.
pub const WIT_VERSION: &str = "0.6.0";

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

/// What the engine is set up with.
#[derive(Clone, Debug, Default)]
pub struct RuntimeOptions {
    /// Where precompiled components are kept; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
    /// The limits of every plugin the configuration sets none for.
    pub limits: Limits,
}

impl RuntimeOptions {
    /// The default cache directory: `$BERTH_CACHE_DIR`, else `$XDG_CACHE_HOME/berth`,
    /// else `~/.cache/berth`.
    pub fn default_cache_dir() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("BERTH_CACHE_DIR") {
            return Some(PathBuf::from(d));
        }
        if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
            return Some(PathBuf::from(d).join("berth"));
        }
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("berth"))
    }
}

/// One wasmtime engine per process, its linker, and the epoch ticker that enforces
/// call deadlines.
pub struct Runtime {
    engine: Engine,
    linker: Linker<HostCtx>,
    options: RuntimeOptions,
    stop_ticker: Arc<AtomicBool>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

impl Runtime {
    /// Builds the engine and starts the epoch ticker.
    pub fn new(options: RuntimeOptions) -> anyhow::Result<Arc<Self>> {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        // `BERTH_WASM_PROFILER=perfmap` writes /tmp/perf-PID.map so `perf report` names
        // the plugins' compiled functions.
        if std::env::var_os("BERTH_WASM_PROFILER").is_some_and(|v| v == "perfmap") {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        SchedulerPlugin::add_to_linker::<HostCtx, HasSelf<HostCtx>>(&mut linker, |c| c)?;
        super::sandbox::add_to_linker(&mut linker, |c: &mut HostCtx| {
            ClockView::new(&c.clock, &mut c.table)
        })?;

        let stop_ticker = Arc::new(AtomicBool::new(false));
        let (weak_engine, stop) = (engine.weak(), stop_ticker.clone());
        std::thread::Builder::new()
            .name("berth-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match weak_engine.upgrade() {
                        Some(e) => e.increment_epoch(),
                        None => break,
                    }
                }
            })?;
        Ok(Arc::new(Runtime {
            engine,
            linker,
            options,
            stop_ticker,
        }))
    }

    /// The limits of plugins the configuration sets none for.
    pub fn limits(&self) -> Limits {
        self.options.limits
    }

    /// The sandbox of plugins the configuration says nothing of: the default limits,
    /// nothing granted.
    pub fn default_sandbox(&self) -> Sandbox {
        Sandbox {
            limits: self.options.limits,
            grants: Grants::default(),
        }
    }

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
        let world_err = |e: wasmtime::Error| LoadError::World {
            source_name: source_name.to_owned(),
            message: self.world_mismatch(&component, e),
        };
        let pre = self.linker.instantiate_pre(&component).map_err(world_err)?;
        let pre = SchedulerPluginPre::new(pre).map_err(world_err)?;
        let mut module = Module {
            runtime: self.clone(),
            pre,
            name: String::new(),
            extension_points: Vec::new(),
            wants_pods: false,
            pre_filter_extensions: false,
            only_for_pods_with: Vec::new(),
            events: None,
            sha256,
            source: source_name.to_owned(),
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
            .berth_scheduler_plugin()
            .call_info(&mut store)
            .map_err(|e| LoadError::Metadata {
                source_name: source_name.to_owned(),
                message: format!("plugin.info trapped: {e:#}"),
            })?;
        if info.wit_version != WIT_VERSION {
            return Err(LoadError::Metadata {
                source_name: source_name.to_owned(),
                message: format!(
                    "built against berth:scheduler@{}, this host speaks @{WIT_VERSION}",
                    info.wit_version
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
        module.only_for_pods_with = info
            .only_for_pods_with
            .into_iter()
            .map(|f| match f {
                w::PodFeature::Volumes => PodFeature::Volumes,
                w::PodFeature::HostPorts => PodFeature::HostPorts,
            })
            .collect();
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
        Ok(Arc::new(module))
    }

    /// Why a component does not link against the plugin world, in the plugin author's
    /// terms: a component built against another version of `berth:scheduler` says
    /// which; otherwise wasmtime's message names what is missing or different.
    fn world_mismatch(&self, component: &Component, e: wasmtime::Error) -> String {
        let ty = component.component_type();
        let names = ty
            .imports(&self.engine)
            .map(|(n, _)| n)
            .chain(ty.exports(&self.engine).map(|(n, _)| n));
        let mut versions: Vec<&str> = names
            .filter_map(|n| n.strip_prefix("berth:scheduler/"))
            .filter_map(|n| n.split_once('@').map(|(_, v)| v))
            .filter(|v| *v != WIT_VERSION)
            .collect();
        versions.sort_unstable();
        versions.dedup();
        if !versions.is_empty() {
            return format!(
                "built against berth:scheduler@{}, this host speaks @{WIT_VERSION}",
                versions.join(", @")
            );
        }
        format!("{e:#}")
    }

    fn compile_cached(
        &self,
        source_name: &str,
        sha256: &str,
        bytes: &[u8],
    ) -> Result<Component, LoadError> {
        let compile_err = |e: wasmtime::Error| LoadError::Compile {
            source_name: source_name.to_owned(),
            message: format!("{e:#}"),
        };
        let Some(dir) = &self.options.cache_dir else {
            return Component::new(&self.engine, bytes).map_err(compile_err);
        };
        // The artifact is valid only for this wasmtime version and configuration.
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&self.engine.precompile_compatibility_hash(), &mut h);
        let compat = std::hash::Hasher::finish(&h);
        let path = dir.join(format!("{sha256}-{compat:016x}.cwasm"));
        if path.exists() {
            // SAFETY: the file was written by `Component::serialize` of an engine with
            // the same compatibility hash (it is in the name), in Berth's own cache.
            match unsafe { Component::deserialize_file(&self.engine, &path) } {
                Ok(c) => return Ok(c),
                Err(e) => {
                    tracing::warn!(path = %path.display(), "discarding bad cached component: {e:#}")
                }
            }
        }
        let component = Component::new(&self.engine, bytes).map_err(compile_err)?;
        if let Err(e) = write_cache(dir, &path, &component) {
            tracing::warn!(dir = %dir.display(), "cannot cache compiled component: {e:#}");
        }
        Ok(component)
    }
}

fn write_cache(dir: &Path, path: &Path, component: &Component) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)?;
    let bytes = component.serialize()?;
    let tmp = tempfile_in(dir)?;
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

fn tempfile_in(dir: &Path) -> std::io::Result<PathBuf> {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    Ok(dir.join(format!(".tmp-{}-{n}", std::process::id())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A compiled, linked plugin module and what it says of itself.
pub struct Module {
    runtime: Arc<Runtime>,
    pre: SchedulerPluginPre<HostCtx>,
    name: String,
    extension_points: Vec<ExtensionPoint>,
    wants_pods: bool,
    pre_filter_extensions: bool,
    only_for_pods_with: Vec<PodFeature>,
    events: Option<Vec<EventRegistration>>,
    sha256: String,
    source: String,
    sandbox: Sandbox,
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
enum StoreError {
    /// The WASI context of the grants (a directory that cannot be opened).
    Sandbox(anyhow::Error),
    /// Instantiation (a missing import, a trap in a start function, a limit).
    Instantiate(wasmtime::Error),
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

    /// The features a pod needs for the plugin to take part in its cycles (empty:
    /// every pod).
    pub fn only_for_pods_with(&self) -> &[PodFeature] {
        &self.only_for_pods_with
    }

    /// Whether the plugin takes part in `pod`'s scheduling and binding cycles (see
    /// [`berth_sdk::Plugin::ONLY_FOR_PODS_WITH`]).
    pub fn takes_part(&self, pod: &berth_sdk::Pod) -> bool {
        PodFeature::takes_part(&self.only_for_pods_with, pod)
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
    /// The WIT package version the module speaks (a module of another version is
    /// refused when it loads, so it is the host's).
    pub fn wit_version(&self) -> &'static str {
        WIT_VERSION
    }

    fn store_error(&self, e: StoreError) -> LoadError {
        match e {
            StoreError::Sandbox(e) => LoadError::Sandbox {
                plugin: if self.name.is_empty() {
                    "(not yet named)".to_owned()
                } else {
                    self.name.clone()
                },
                source_name: self.source.clone(),
                message: format!("{e:#}"),
            },
            StoreError::Instantiate(e) => LoadError::World {
                source_name: self.source.clone(),
                message: format!("{e:#}"),
            },
        }
    }

    fn new_store(
        &self,
        services: HostServices,
    ) -> Result<(Store<HostCtx>, SchedulerPlugin), StoreError> {
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
            limits: limits.store_limits(),
            clock: self.sandbox.clock(),
            services,
            output,
            dry_run: None,
            waited: std::time::Duration::ZERO,
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
        let bindings = self
            .pre
            .instantiate(&mut store)
            .map_err(StoreError::Instantiate)?;
        Ok((store, bindings))
    }

    /// A new instance, configured with the args (JSON), whose imports reach `services`.
    pub fn instantiate(
        self: &Arc<Self>,
        args_json: &str,
        services: HostServices,
    ) -> Result<Instance, LoadError> {
        let metrics = services.metrics.clone();
        let (store, bindings) = self.new_store(services).map_err(|e| self.store_error(e))?;
        let mut inst = Instance {
            module: self.clone(),
            store,
            bindings,
            replica_generation: None,
            overlaid: Vec::new(),
            cycle_pod: None,
            cycle_pod_key: String::new(),
            call_pod_key: None,
            node_names: Vec::new(),
            sent: Vec::new(),
            broken: false,
            point: "Configure",
            metrics,
            call_histograms: Vec::new(),
        };
        let configured = inst.call(|b, s| b.berth_scheduler_plugin().call_configure(s, args_json));
        let configured = inst.located(configured, On::Nothing);
        match configured {
            Ok(Ok(())) => Ok(inst),
            Ok(Err(message)) => Err(LoadError::Configure {
                plugin: self.name.clone(),
                source_name: self.source.clone(),
                message,
            }),
            Err(e) => Err(LoadError::Configure {
                plugin: self.name.clone(),
                source_name: self.source.clone(),
                message: e.to_string(),
            }),
        }
    }
}

/// What a store holds: the WASI context (what the plugin's grants allow, see
/// [`super::sandbox`]), the resource table, limits, the monotonic clock, where
/// bindings go and where output goes.
pub struct HostCtx {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
    clock: SandboxClock,
    services: HostServices,
    output: GuestOutput,
    /// The what-if API, lent during a PostFilter call.
    dry_run: Option<DryRun>,
    /// How long the current call has waited in the host for the cluster
    /// (`wait-storage-change`): not counted against the call deadline.
    waited: std::time::Duration,
}

/// What the host offers an instance's imports: where bindings go, the namespaces,
/// the pods waiting at Permit.
#[derive(Clone, Default)]
pub struct HostServices {
    /// What `bind-pod` reaches (binding-cycle instances only).
    pub binder: Option<Arc<dyn Binder>>,
    /// What `namespace-labels` reads.
    pub namespaces: Namespaces,
    /// What the waiting-pod calls act on.
    pub waiting: WaitingPods,
    /// Where calls' durations and traps are counted (none: not counted).
    pub metrics: Option<crate::metrics::Metrics>,
    /// What `pod-disruption-budgets` reads.
    pub budgets: Budgets,
    /// What the storage listers (`get-persistent-volume-claim`, ...) read.
    pub storage: Storage,
}

impl WasiView for HostCtx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl w::Host for HostCtx {}

impl host::Host for HostCtx {
    fn log(&mut self, level: host::LogLevel, message: String) {
        let level = match level {
            host::LogLevel::Trace => Level::Trace,
            host::LogLevel::Debug => Level::Debug,
            host::LogLevel::Info => Level::Info,
            host::LogLevel::Warn => Level::Warn,
            host::LogLevel::Error => Level::Error,
        };
        self.output.log(level, &message);
    }

    fn waiting_pods(&mut self) -> Vec<host::WaitingPod> {
        self.services
            .waiting
            .list()
            .into_iter()
            .map(|p| host::WaitingPod {
                uid: p.uid,
                namespace: p.namespace,
                name: p.name,
                node: p.node,
                pending_plugins: p.pending_plugins,
            })
            .collect()
    }

    fn allow_waiting_pod(&mut self, uid: String, plugin: String) {
        self.services.waiting.allow(&uid, &plugin);
    }

    fn reject_waiting_pod(&mut self, uid: String, plugin: String, message: String) {
        self.services.waiting.reject(&uid, &plugin, &message);
    }

    fn pod_disruption_budgets(&mut self) -> Vec<w::PodDisruptionBudget> {
        self.services
            .budgets
            .list()
            .iter()
            .map(convert::budget_to_wit)
            .collect()
    }

    fn get_persistent_volume_claim(
        &mut self,
        namespace: String,
        name: String,
    ) -> Option<w::PersistentVolumeClaim> {
        self.services
            .storage
            .claim(&namespace, &name)
            .as_ref()
            .map(convert::claim_to_wit)
    }

    fn get_persistent_volume(&mut self, name: String) -> Option<w::PersistentVolume> {
        self.services
            .storage
            .volume(&name)
            .as_ref()
            .map(convert::volume_to_wit)
    }

    fn get_storage_class(&mut self, name: String) -> Option<w::StorageClass> {
        self.services
            .storage
            .class(&name)
            .as_ref()
            .map(convert::class_to_wit)
    }

    fn get_csi_node(&mut self, name: String) -> Option<w::CsiNode> {
        self.services
            .storage
            .csi_node(&name)
            .as_ref()
            .map(convert::csi_node_to_wit)
    }

    fn get_csi_driver(&mut self, name: String) -> Option<w::CsiDriver> {
        self.services
            .storage
            .csi_driver(&name)
            .as_ref()
            .map(convert::csi_driver_to_wit)
    }

    fn persistent_volumes_of_class(&mut self, class: String) -> Vec<w::PersistentVolume> {
        self.services
            .storage
            .volumes_of_class(&class)
            .iter()
            .map(convert::volume_to_wit)
            .collect()
    }

    fn assume_volume_bound(&mut self, volume: String, claim: w::ClaimRef) -> Result<(), String> {
        self.services
            .storage
            .assume_volume_bound(&volume, &convert::claim_ref_from_wit(claim))
    }

    fn assume_claim_provisioned(
        &mut self,
        namespace: String,
        name: String,
        node: String,
    ) -> Result<(), String> {
        self.services
            .storage
            .assume_claim_provisioned(&namespace, &name, &node)
    }

    fn restore_volume(&mut self, name: String) {
        self.services.storage.restore_volume(&name);
    }

    fn restore_claim(&mut self, namespace: String, name: String) {
        self.services.storage.restore_claim(&namespace, &name);
    }

    fn bind_volume(&mut self, volume: String, claim: w::ClaimRef) -> Result<(), String> {
        match &self.services.binder {
            Some(b) => b.bind_volume(&volume, &convert::claim_ref_from_wit(claim)),
            None => Err("bind-volume is only available to binding-cycle instances".into()),
        }
    }

    fn select_node_for_claim(
        &mut self,
        namespace: String,
        name: String,
        node: String,
    ) -> Result<(), String> {
        match &self.services.binder {
            Some(b) => b.select_node_for_claim(&namespace, &name, &node),
            None => {
                Err("select-node-for-claim is only available to binding-cycle instances".into())
            }
        }
    }

    fn storage_generation(&mut self) -> u64 {
        self.services.storage.generation()
    }

    fn wait_storage_change(&mut self, after: u64, timeout_ms: u64) -> (u64, u64) {
        if self.services.binder.is_none() {
            // Outside a binding cycle a wait would hold up scheduling: answer at once.
            return (self.services.storage.generation(), 0);
        }
        let (generation, waited) = self
            .services
            .storage
            .wait_for_change(after, std::time::Duration::from_millis(timeout_ms));
        self.waited += waited;
        (
            generation,
            u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
        )
    }

    fn simulate(&mut self, node: String) -> Result<Resource<Simulation>, w::Status> {
        let Some(dry) = self.dry_run.as_mut() else {
            return Err(convert::status_to_wit(&Status::error(
                "simulate is only available during PostFilter",
            )));
        };
        let sim = dry
            .simulate(&node)
            .map_err(|s| convert::status_to_wit(&s))?;
        self.table
            .push(sim)
            .map_err(|e| convert::status_to_wit(&Status::error(format!("resource table: {e}"))))
    }

    fn namespace_labels(&mut self, namespace: String) -> Option<Vec<(String, String)>> {
        self.services
            .namespaces
            .labels(&namespace)
            .map(|l| l.into_iter().collect())
    }

    fn bind_pod(
        &mut self,
        namespace: String,
        name: String,
        uid: String,
        node: String,
    ) -> Result<(), String> {
        let pod = berth_sdk::Pod {
            namespace,
            name,
            uid,
            ..berth_sdk::Pod::default()
        };
        match &self.services.binder {
            Some(b) => b.bind(&pod, &node),
            None => Err("bind-pod is only available to binding-cycle instances".into()),
        }
    }
}

impl host::HostNodeSimulation for HostCtx {
    fn remove_pod(&mut self, this: Resource<Simulation>, uid: String) -> w::Status {
        let status = match (self.table.get_mut(&this), self.dry_run.as_mut()) {
            (Ok(sim), Some(dry)) => dry.remove_pod(sim, &uid),
            _ => Status::error("the what-if is over: its PostFilter call returned"),
        };
        convert::status_to_wit(&status)
    }
    fn add_pod(&mut self, this: Resource<Simulation>, uid: String) -> w::Status {
        let status = match (self.table.get_mut(&this), self.dry_run.as_mut()) {
            (Ok(sim), Some(dry)) => dry.add_pod(sim, &uid),
            _ => Status::error("the what-if is over: its PostFilter call returned"),
        };
        convert::status_to_wit(&status)
    }
    fn fits(&mut self, this: Resource<Simulation>) -> w::Status {
        let status = match (self.table.get(&this), self.dry_run.as_mut()) {
            (Ok(sim), Some(dry)) => dry.fits(sim),
            _ => Status::error("the what-if is over: its PostFilter call returned"),
        };
        convert::status_to_wit(&status)
    }
    fn drop(&mut self, rep: Resource<Simulation>) -> wasmtime::Result<()> {
        self.table.delete(rep)?;
        Ok(())
    }
}

impl host::HostCycleState for HostCtx {
    fn read(&mut self, this: Resource<CycleState>, key: String) -> Option<Vec<u8>> {
        self.table.get(&this).ok().and_then(|s| s.read(&key))
    }
    fn write(&mut self, this: Resource<CycleState>, key: String, value: Vec<u8>) {
        if let Ok(s) = self.table.get(&this) {
            s.write(&key, value);
        }
    }
    fn delete(&mut self, this: Resource<CycleState>, key: String) {
        if let Ok(s) = self.table.get(&this) {
            s.delete(&key);
        }
    }
    fn drop(&mut self, rep: Resource<CycleState>) -> wasmtime::Result<()> {
        self.table.delete(rep)?;
        Ok(())
    }
}

/// One live instance of a plugin module, owned by one thread at a time.
pub struct Instance {
    module: Arc<Module>,
    store: Store<HostCtx>,
    bindings: SchedulerPlugin,
    /// The snapshot generation the guest's node replica matches.
    replica_generation: Option<u64>,
    /// Slots whose replica holds a per-cycle overlay (nominated pods added) rather
    /// than the snapshot's node: the next sync sends them again.
    overlaid: Vec<u32>,
    /// The id of the [`CyclePod`] the guest holds (its last `begin-cycle`).
    cycle_pod: Option<u64>,
    /// `namespace/name` of that pod, for error messages.
    cycle_pod_key: String,
    /// The pod of the call under way when it is not the cycle's (QueueSort,
    /// PreEnqueue, queueing hints).
    call_pod_key: Option<String>,
    /// Node names by slot, as the replica holds them, for error messages.
    node_names: Vec<Option<String>>,
    /// The snapshot's version of each node the replica holds, by slot: a later
    /// version with the same node object goes as the change of its pods.
    sent: Vec<Option<Arc<berth_sdk::NodeInfo>>>,
    broken: bool,
    /// The extension point of the call under way (the metrics' label).
    point: &'static str,
    metrics: Option<crate::metrics::Metrics>,
    /// The call-duration histogram of each extension point this instance was called
    /// at, taken on its first call there.
    call_histograms: Vec<(&'static str, prometheus::Histogram)>,
}

impl Instance {
    /// The module this instance runs.
    pub fn module(&self) -> &Arc<Module> {
        &self.module
    }

    /// Whether a call trapped; a broken instance must be replaced.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    fn call<R>(
        &mut self,
        f: impl FnOnce(&SchedulerPlugin, &mut Store<HostCtx>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let limits = self.module.sandbox.limits;
        self.store.set_epoch_deadline(limits.deadline_ticks());
        self.store.data_mut().waited = std::time::Duration::ZERO;
        self.store.data().output.begin_call();
        let started = self.metrics.is_some().then(std::time::Instant::now);
        let result = f(&self.bindings, &mut self.store);
        self.store.data().output.end_call();
        if let (Some(m), Some(t)) = (&self.metrics, started) {
            let point = self.point;
            let histogram = match self.call_histograms.iter().find(|(p, _)| *p == point) {
                Some((_, h)) => h,
                None => {
                    let h = m.plugin_call_histogram(&self.module.name, point);
                    self.call_histograms.push((point, h));
                    &self.call_histograms[self.call_histograms.len() - 1].1
                }
            };
            histogram.observe(t.elapsed().as_secs_f64());
        }
        match result {
            Ok(r) => Ok(r),
            Err(e) => {
                self.broken = true;
                if let Some(m) = &self.metrics {
                    m.count_trap(&self.module.name);
                }
                // A host function's refusal (a sleep past the deadline) is the root
                // cause under wasmtime's backtrace context; say it without the
                // backtrace.
                let mut message = e.root_cause().to_string();
                if let Some(trap) = e.downcast_ref::<wasmtime::Trap>() {
                    message = match trap {
                        wasmtime::Trap::Interrupt => {
                            format!("deadline of {:?} exceeded", limits.call_deadline)
                        }
                        wasmtime::Trap::UnreachableCodeReached => {
                            "unreachable code reached (a panic or an abort)".to_owned()
                        }
                        other => other.to_string(),
                    };
                }
                let said = self.store.data().output.stderr_tail();
                if !said.is_empty() {
                    message = format!("{message}; guest said: {}", said.join(" | "));
                }
                Err(CallError::Trap {
                    plugin: self.module.name.clone(),
                    context: String::new(),
                    message,
                })
            }
        }
    }

    /// A call's answer the host cannot use: the instance is discarded too, since a
    /// guest that answers out of shape may be in any state.
    fn bad_answer(&mut self, message: String) -> CallError {
        self.broken = true;
        CallError::BadAnswer {
            plugin: self.module.name.clone(),
            context: String::new(),
            message,
        }
    }

    /// Where a failed call was: the extension point, the pod and the nodes.
    fn context(&self, nodes: On<'_>) -> String {
        let mut out = format!("at {}", self.point);
        let pod = self.call_pod_key.as_deref().unwrap_or(&self.cycle_pod_key);
        if !pod.is_empty() {
            out.push_str(" for pod ");
            out.push_str(pod);
        }
        match nodes {
            On::Nothing => {}
            On::Node(n) => {
                out.push_str(" on node ");
                out.push_str(n);
            }
            On::Slots(slots) => {
                const NAMED: usize = 3;
                let name = |s: &u32| {
                    self.node_names
                        .get(*s as usize)
                        .and_then(Option::as_deref)
                        .map_or_else(|| format!("<slot {s}>"), str::to_owned)
                };
                let named: Vec<String> = slots.iter().take(NAMED).map(name).collect();
                out.push_str(if slots.len() == 1 {
                    " on node "
                } else {
                    " on nodes "
                });
                out.push_str(&named.join(", "));
                if slots.len() > NAMED {
                    out.push_str(&format!(" and {} more", slots.len() - NAMED));
                }
            }
        }
        out
    }

    /// Adds where the call was to its error.
    fn located<R>(&self, r: Result<R, CallError>, nodes: On<'_>) -> Result<R, CallError> {
        r.map_err(|e| e.with_context(self.context(nodes)))
    }

    /// Runs a call of `pod`'s cycle: begins the cycle in the guest first unless it
    /// holds that pod already, so the pod crosses once per cycle per instance.
    fn in_cycle<R>(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        f: impl FnOnce(
            &SchedulerPlugin,
            &mut Store<HostCtx>,
            Resource<CycleState>,
        ) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        self.call_pod_key = None;
        if self.cycle_pod != Some(pod.id()) {
            self.cycle_pod = None;
            self.cycle_pod_key = pod.key();
            let wit = pod.wit();
            let point = std::mem::replace(&mut self.point, "BeginCycle");
            let begun = self.call(|b, s| b.berth_scheduler_cycle().call_begin_cycle(s, wit));
            self.point = point;
            begun?;
            self.cycle_pod = Some(pod.id());
        }
        self.with_state(state, f)
    }

    fn with_state<R>(
        &mut self,
        state: &CycleState,
        f: impl FnOnce(
            &SchedulerPlugin,
            &mut Store<HostCtx>,
            Resource<CycleState>,
        ) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let handle = self
            .store
            .data_mut()
            .table
            .push(state.clone())
            .map_err(|e| CallError::BadAnswer {
                plugin: self.module.name.clone(),
                context: String::new(),
                message: format!("resource table: {e}"),
            })?;
        let rep = handle.rep();
        let r = self.call(|b, s| f(b, s, Resource::new_borrow(rep)));
        let _ = self.store.data_mut().table.delete(handle);
        r
    }

    /// Brings the guest's node replica up to the snapshot, sending only what changed
    /// since this instance's last sync.
    pub fn sync(&mut self, snapshot: &Snapshot) -> Result<(), CallError> {
        self.point = "Sync";
        if self.replica_generation == Some(snapshot.generation()) && self.overlaid.is_empty() {
            return Ok(());
        }
        let (mut updated, mut removed) = if self.replica_generation == Some(snapshot.generation()) {
            (Vec::new(), Vec::new())
        } else {
            snapshot.changes_since(self.replica_generation)
        };
        // Undo overlays: the snapshot's version of those nodes goes back.
        for slot in std::mem::take(&mut self.overlaid) {
            if updated.iter().any(|(s, _)| *s == slot) || removed.contains(&slot) {
                continue;
            }
            match snapshot.node(slot) {
                Some(info) => updated.push((slot, info)),
                None => removed.push(slot),
            }
        }
        for &slot in &removed {
            if let Some(n) = self.node_names.get_mut(slot as usize) {
                *n = None;
            }
        }
        for (slot, info) in &updated {
            let slot = *slot as usize;
            if self.node_names.len() <= slot {
                self.node_names.resize(slot + 1, None);
            }
            if self.node_names[slot].as_deref() != Some(info.name()) {
                self.node_names[slot] = Some(info.name().to_owned());
            }
        }
        // A node whose object the replica holds already gets only the change of its
        // pods; a new one, or one whose object changed, is sent whole.
        let wants_pods = self.module.wants_pods;
        let mut whole: Vec<(u32, w::NodeInfo)> = Vec::new();
        let mut changed: Vec<ex::replica::NodePodsChange> = Vec::new();
        let mut sent: Vec<(u32, Option<Arc<berth_sdk::NodeInfo>>)> = Vec::new();
        for (slot, info) in updated {
            let shared = snapshot.shared(slot).cloned();
            match (
                self.sent.get(slot as usize).and_then(Option::as_ref),
                &shared,
            ) {
                (Some(prev), Some(now)) if Arc::ptr_eq(prev, now) => continue,
                (Some(prev), _) if prev.node == info.node => changed.push(
                    convert::node_pods_change_to_wit(slot, prev, info, wants_pods),
                ),
                _ => whole.push((slot, convert::node_info_to_wit(info, wants_pods))),
            }
            sent.push((slot, shared));
        }
        let r = self.call(|b, s| {
            b.berth_scheduler_replica()
                .call_sync_nodes(s, &whole, &changed, &removed)
        });
        let n = whole.len() + changed.len() + removed.len();
        r.map_err(|e| e.with_context(format!("at Sync of {n} nodes")))?;
        for slot in removed {
            self.remember_sent(slot, None);
        }
        for (slot, info) in sent {
            self.remember_sent(slot, info);
        }
        self.replica_generation = Some(snapshot.generation());
        Ok(())
    }

    /// Notes which snapshot version of a node the replica holds (`None`: none, or one
    /// of the host's what-if copies).
    fn remember_sent(&mut self, slot: u32, info: Option<Arc<berth_sdk::NodeInfo>>) {
        let slot = slot as usize;
        if self.sent.len() <= slot {
            self.sent.resize(slot + 1, None);
        }
        self.sent[slot] = info;
    }

    /// Replaces some nodes of the replica, for this cycle only, with versions that
    /// count the pods nominated to them (upstream's first filter pass); the next
    /// [`Instance::sync`] puts the snapshot's versions back.
    pub fn sync_overlay(
        &mut self,
        overlays: &[(u32, &berth_sdk::NodeInfo)],
    ) -> Result<(), CallError> {
        self.point = "Sync";
        if overlays.is_empty() {
            return Ok(());
        }
        let updated: Vec<(u32, w::NodeInfo)> = overlays
            .iter()
            .map(|(slot, info)| {
                (
                    *slot,
                    convert::node_info_to_wit(info, self.module.wants_pods),
                )
            })
            .collect();
        self.overlaid.extend(overlays.iter().map(|(s, _)| *s));
        for (slot, _) in overlays {
            self.remember_sent(*slot, None);
        }
        let r = self.call(|b, s| {
            b.berth_scheduler_replica()
                .call_sync_nodes(s, &updated, &[], &[])
        });
        let n = updated.len();
        r.map_err(|e| e.with_context(format!("at Sync of {n} nodes")))
    }

    /// PreFilterExtensions' AddPod (`add`) or RemovePod of `other` on the node in `slot`.
    pub fn pod_on_node(
        &mut self,
        add: bool,
        state: &CycleState,
        pod: &CyclePod,
        other: &berth_sdk::Pod,
        slot: u32,
    ) -> Result<Status, CallError> {
        self.point = "PreFilterExtension";
        let other = convert::pod_to_wit(other);
        let r = self.in_cycle(state, pod, |b, s, st| {
            let ext = b.berth_scheduler_pre_filter_extensions();
            if add {
                ext.call_add_pod(s, st, &other, slot)
            } else {
                ext.call_remove_pod(s, st, &other, slot)
            }
        })?;
        Ok(convert::status_from_wit(r))
    }

    /// PostFilter, with `dry` lent to the guest's `simulate` calls for its duration.
    pub fn post_filter(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        statuses: &[(u32, Status)],
        dry: DryRun,
    ) -> (DryRun, Result<berth_sdk::PostFilterResult, CallError>) {
        self.point = "PostFilter";
        let statuses: Vec<ex::filter::NodeStatus> = statuses
            .iter()
            .map(|(slot, s)| ex::filter::NodeStatus {
                slot: *slot,
                status: convert::status_to_wit(s),
            })
            .collect();
        self.store.data_mut().dry_run = Some(dry);
        let r = self.in_cycle(state, pod, |b, s, st| {
            b.berth_scheduler_post_filter()
                .call_post_filter(s, st, &statuses)
        });
        let dry = self
            .store
            .data_mut()
            .dry_run
            .take()
            .expect("lent for the call");
        let r = r.map(|r| berth_sdk::PostFilterResult {
            status: convert::status_from_wit(r.status),
            nominated_node_name: r.nominated_node_name,
            victims: r.victims,
            candidates: r
                .candidates
                .into_iter()
                .map(|c| berth_sdk::Candidate {
                    node: c.node,
                    victims: c.victims,
                    pdb_violations: c.pdb_violations,
                })
                .collect(),
        });
        (dry, r)
    }

    /// QueueSort's key.
    pub fn sort_key(&mut self, pod: &w::Pod) -> Result<Vec<i64>, CallError> {
        self.point = "QueueSort";
        self.call_pod_key = Some(format!("{}/{}", pod.namespace, pod.name));
        let r = self.call(|b, s| b.berth_scheduler_queue_sort().call_sort_key(s, pod));
        self.located(r, On::Nothing)
    }

    /// The queueing hint for an event; an error (of the plugin or the call) counts as
    /// Queue at the caller.
    pub fn queueing_hint(
        &mut self,
        event: &berth_sdk::ClusterEvent,
        pod: &w::Pod,
        old: Option<&berth_sdk::Object>,
        new: Option<&berth_sdk::Object>,
    ) -> Result<Result<berth_sdk::QueueingHint, String>, CallError> {
        self.point = "QueueingHint";
        self.call_pod_key = Some(format!("{}/{}", pod.namespace, pod.name));
        let event = convert::event_to_wit(event);
        let old = old.map(convert::object_to_wit);
        let new = new.map(convert::object_to_wit);
        let r = self.call(|b, s| {
            b.berth_scheduler_enqueue_extensions().call_hint(
                s,
                event,
                pod,
                old.as_ref(),
                new.as_ref(),
            )
        });
        let r = self.located(r, On::Nothing)?;
        Ok(r.map(|h| match h {
            w::QueueingHint::Queue => berth_sdk::QueueingHint::Queue,
            w::QueueingHint::QueueSkip => berth_sdk::QueueingHint::QueueSkip,
        }))
    }

    /// PreEnqueue.
    pub fn pre_enqueue(&mut self, pod: &w::Pod) -> Result<Status, CallError> {
        self.point = "PreEnqueue";
        self.call_pod_key = Some(format!("{}/{}", pod.namespace, pod.name));
        let r = self.call(|b, s| b.berth_scheduler_pre_enqueue().call_pre_enqueue(s, pod));
        self.located(r, On::Nothing).map(convert::status_from_wit)
    }

    /// PreFilter.
    pub fn pre_filter(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
    ) -> Result<PreFilterResult, CallError> {
        self.point = "PreFilter";
        let r = self.in_cycle(state, pod, |b, s, st| {
            b.berth_scheduler_pre_filter().call_pre_filter(s, st)
        });
        let r = self.located(r, On::Nothing)?;
        Ok(PreFilterResult {
            status: convert::status_from_wit(r.status),
            node_names: r.node_names,
        })
    }

    /// Filter over many nodes; answers the nodes that did not pass.
    pub fn filter(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        slots: &[u32],
    ) -> Result<Vec<(u32, Status)>, CallError> {
        self.point = "Filter";
        let r = self.in_cycle(state, pod, |b, s, st| {
            b.berth_scheduler_filter().call_filter(s, st, slots)
        });
        let r: Vec<ex::filter::NodeStatus> = self.located(r, On::Slots(slots))?;
        Ok(r.into_iter()
            .map(|n| (n.slot, convert::status_from_wit(n.status)))
            .collect())
    }

    /// PreScore.
    pub fn pre_score(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        slots: &[u32],
    ) -> Result<Status, CallError> {
        self.point = "PreScore";
        let r = self.in_cycle(state, pod, |b, s, st| {
            b.berth_scheduler_pre_score().call_pre_score(s, st, slots)
        });
        self.located(r, On::Slots(slots))
            .map(convert::status_from_wit)
    }

    /// Score over many nodes, one score per slot in order.
    pub fn score(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        slots: &[u32],
    ) -> Result<Result<Vec<i64>, Status>, CallError> {
        self.point = "Score";
        let r = self.in_cycle(state, pod, |b, s, st| {
            b.berth_scheduler_score().call_score(s, st, slots)
        });
        let r = self
            .located(r, On::Slots(slots))?
            .map_err(convert::status_from_wit);
        if let Ok(scores) = &r
            && scores.len() != slots.len()
        {
            let e = self.bad_answer(format!(
                "answered {} scores for {} nodes",
                scores.len(),
                slots.len()
            ));
            return self.located(Err(e), On::Slots(slots));
        }
        Ok(r)
    }

    /// NormalizeScore.
    pub fn normalize_score(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        scores: &[i64],
    ) -> Result<Result<Vec<i64>, Status>, CallError> {
        self.point = "NormalizeScore";
        let r = self.in_cycle(state, pod, |b, s, st| {
            b.berth_scheduler_score()
                .call_normalize_score(s, st, scores)
        });
        let r = self
            .located(r, On::Nothing)?
            .map_err(convert::status_from_wit);
        if let Ok(normalized) = &r
            && normalized.len() != scores.len()
        {
            let e = self.bad_answer(format!(
                "answered {} normalized scores for {} nodes",
                normalized.len(),
                scores.len()
            ));
            return self.located(Err(e), On::Nothing);
        }
        Ok(r)
    }

    /// Reserve.
    pub fn reserve(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<Status, CallError> {
        self.point = "Reserve";
        let r = self.in_cycle(state, pod, |b, s, st| {
            b.berth_scheduler_reserve().call_reserve(s, st, node)
        });
        self.located(r, On::Node(node))
            .map(convert::status_from_wit)
    }

    /// Unreserve.
    pub fn unreserve(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<(), CallError> {
        self.point = "Unreserve";
        let r = self.in_cycle(state, pod, |b, s, st| {
            b.berth_scheduler_reserve().call_unreserve(s, st, node)
        });
        self.located(r, On::Node(node))
    }

    /// Permit: the status and, with Wait, how long to wait.
    pub fn permit(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<(Status, std::time::Duration), CallError> {
        self.point = "Permit";
        let r = self.in_cycle(state, pod, |b, s, st| {
            b.berth_scheduler_permit().call_permit(s, st, node)
        });
        let r = self.located(r, On::Node(node))?;
        Ok((
            convert::status_from_wit(r.status),
            std::time::Duration::from_millis(r.timeout_ms),
        ))
    }

    /// PreBind.
    pub fn pre_bind(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<Status, CallError> {
        self.point = "PreBind";
        let r = self.in_cycle(state, pod, |b, s, st| {
            b.berth_scheduler_pre_bind().call_pre_bind(s, st, node)
        });
        self.located(r, On::Node(node))
            .map(convert::status_from_wit)
    }

    /// Bind.
    pub fn bind(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<Status, CallError> {
        self.point = "Bind";
        let r = self.in_cycle(state, pod, |b, s, st| {
            b.berth_scheduler_bind().call_bind(s, st, node)
        });
        self.located(r, On::Node(node))
            .map(convert::status_from_wit)
    }

    /// PostBind.
    pub fn post_bind(
        &mut self,
        state: &CycleState,
        pod: &CyclePod,
        node: &str,
    ) -> Result<(), CallError> {
        self.point = "PostBind";
        let r = self.in_cycle(state, pod, |b, s, st| {
            b.berth_scheduler_post_bind().call_post_bind(s, st, node)
        });
        self.located(r, On::Node(node))
    }
}

/// The nodes a call concerns, for its error message.
#[derive(Clone, Copy)]
enum On<'a> {
    Nothing,
    Node(&'a str),
    Slots(&'a [u32]),
}

/// The WIT record of a pod, made once per cycle and passed to every call.
pub type WitPod = w::Pod;

/// Converts a pod into its WIT record.
pub fn pod_to_wit(pod: &berth_sdk::Pod) -> WitPod {
    convert::pod_to_wit(pod)
}
