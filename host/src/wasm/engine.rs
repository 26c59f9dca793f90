//! The engine: one wasmtime engine per process, its linker and epoch ticker, and the
//! on-disk cache of precompiled components.

use super::bindings::SchedulerPlugin;
use super::host_imports::HostCtx;
use super::limits::{EPOCH_TICK, Limits};
use super::module::LoadError;
use super::sandbox::{ClockView, Grants, Sandbox};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use wasmtime::Engine;
use wasmtime::component::{Component, HasSelf, Linker};

/// Why the engine could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// wasmtime refused the engine's configuration.
    #[error("{0:#}")]
    Engine(wasmtime::Error),
    /// The host's imports (WASI, the plugin world, Berth's monotonic clock) could not
    /// be linked.
    #[error("{0:#}")]
    Link(wasmtime::Error),
    /// The epoch ticker's thread could not be started.
    #[error(transparent)]
    Ticker(#[from] std::io::Error),
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
    pub(super) engine: Engine,
    pub(super) linker: Linker<HostCtx>,
    pub(super) options: RuntimeOptions,
    stop_ticker: Arc<AtomicBool>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

impl Runtime {
    /// Builds the engine and starts the epoch ticker.
    pub fn new(options: RuntimeOptions) -> Result<Arc<Self>, RuntimeError> {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        // `BERTH_WASM_PROFILER=perfmap` writes /tmp/perf-PID.map so `perf report` names
        // the plugins' compiled functions.
        if std::env::var_os("BERTH_WASM_PROFILER").is_some_and(|v| v == "perfmap") {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config).map_err(RuntimeError::Engine)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(RuntimeError::Link)?;
        SchedulerPlugin::add_to_linker::<HostCtx, HasSelf<HostCtx>>(&mut linker, |c| c)
            .map_err(RuntimeError::Link)?;
        super::sandbox::add_to_linker(&mut linker, |c: &mut HostCtx| {
            ClockView::new(&c.clock, &mut c.table)
        })
        .map_err(RuntimeError::Link)?;

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
}

impl Runtime {
    pub(super) fn compile_cached(
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

/// Why a compiled component could not be written to the cache.
#[derive(Debug, thiserror::Error)]
enum CacheError {
    /// Creating the directory, or writing or renaming the file.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// wasmtime could not serialize the component.
    #[error("{0:#}")]
    Serialize(wasmtime::Error),
}

fn write_cache(dir: &Path, path: &Path, component: &Component) -> Result<(), CacheError> {
    std::fs::create_dir_all(dir)?;
    let bytes = component.serialize().map_err(CacheError::Serialize)?;
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

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
