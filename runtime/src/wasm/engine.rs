//! The engine: one wasmtime engine per process, its linker and epoch ticker, and its
//! use of the on-disk cache of precompiled components (`cache.rs`).

use super::bindings::{LinkOptions, SchedulerPlugin};
use super::cache::{CacheError, ComponentCache, Lookup};
use super::host_imports::HostCtx;
use super::limits::{EPOCH_TICK, Limits, MemoryBudget};
use super::module::LoadError;
use super::sandbox::{ClockView, Grants, RandomView, Sandbox};
use std::path::PathBuf;
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
    /// The host's imports (WASI, the plugin world, Berth's monotonic clock and
    /// randomness) could not be linked.
    #[error("{0:#}")]
    Link(wasmtime::Error),
    /// The epoch ticker's thread could not be started.
    #[error(transparent)]
    Ticker(#[from] std::io::Error),
    /// The component cache, or its key, was refused.
    #[error(transparent)]
    Cache(#[from] CacheError),
}

/// What the engine is set up with.
#[derive(Clone, Debug, Default)]
pub struct RuntimeOptions {
    /// Where precompiled components are kept; `None` compiles every time.
    pub cache_dir: Option<PathBuf>,
    /// Where the key that the cache's artifacts are checked with is kept; `None`: the
    /// default (`$BERTH_CACHE_KEY_DIR`, else `$XDG_STATE_HOME/berth`, else
    /// `~/.local/state/berth`; a key of this process only where none can be made).
    pub cache_key_dir: Option<PathBuf>,
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
    /// Every instance's memory together (see [`MemoryBudget`]).
    pub(super) memory: Arc<MemoryBudget>,
    cache: Option<ComponentCache>,
    /// The built-in plugins' components, compiled (or read from the cache) once per
    /// runtime: their bytes are part of the program and never change, so every
    /// scheduler built after the first (tests, `explain`, shadow and what-if
    /// profiles) skips hashing, reading and checking them again. Keyed by the bytes'
    /// address and length; the SHA-256 kept beside each is the module's.
    builtins: std::sync::Mutex<std::collections::HashMap<(usize, usize), (String, Component)>>,
    stop_ticker: Arc<AtomicBool>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

impl Runtime {
    /// Builds the engine, prepares the component cache (see `cache.rs`: a directory
    /// others can write is refused) and starts the epoch ticker.
    pub fn new(options: RuntimeOptions) -> Result<Arc<Self>, RuntimeError> {
        let cache = match &options.cache_dir {
            Some(dir) => Some(ComponentCache::open(dir, options.cache_key_dir.as_deref())?),
            None => None,
        };
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
        // The unstable interfaces this host serves (the WIT's `@unstable` features).
        let mut features = LinkOptions::default();
        features.workload_scheduling(true);
        SchedulerPlugin::add_to_linker::<HostCtx, HasSelf<HostCtx>>(&mut linker, &features, |c| c)
            .map_err(RuntimeError::Link)?;
        // The imports of the tracks this host adapts, served by the current ones.
        super::adapted::add_to_linker(&mut linker).map_err(RuntimeError::Link)?;
        super::sandbox::add_to_linker(&mut linker, |c: &mut HostCtx| {
            ClockView::new(&c.clock, &mut c.table)
        })
        .map_err(RuntimeError::Link)?;
        super::sandbox::add_random_to_linker(&mut linker, |c: &mut HostCtx| {
            RandomView::new(&mut c.clock, c.wasi.random())
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
            memory: Arc::default(),
            cache,
            builtins: Default::default(),
            stop_ticker,
        }))
    }

    /// The directory of the component cache, when the runtime has one (made private
    /// and checked when the runtime started).
    pub fn cache_dir(&self) -> Option<&std::path::Path> {
        self.cache.as_ref().map(|c| c.dir())
    }

    /// The linear memory of every instance of this runtime together, and its bound
    /// (`berth.totalMemoryLimit`, set by the scheduler from its configuration).
    pub fn memory(&self) -> &MemoryBudget {
        &self.memory
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
    /// The SHA-256 and compiled component of bytes that are part of the program (a
    /// built-in plugin), made once per runtime.
    pub(super) fn builtin_component(
        &self,
        source_name: &str,
        bytes: &'static [u8],
    ) -> Result<(String, Component), LoadError> {
        let key = (bytes.as_ptr() as usize, bytes.len());
        if let Some(found) = self.builtins.lock().expect("builtins").get(&key) {
            return Ok(found.clone());
        }
        let sha256 = hex(&<sha2::Sha256 as sha2::Digest>::digest(bytes));
        let component = self.compile_cached(source_name, &sha256, bytes)?;
        self.builtins
            .lock()
            .expect("builtins")
            .insert(key, (sha256.clone(), component.clone()));
        Ok((sha256, component))
    }

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
        let Some(cache) = &self.cache else {
            return Component::new(&self.engine, bytes).map_err(compile_err);
        };
        // The artifact is valid only for this wasmtime version and configuration.
        let mut h = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&self.engine.precompile_compatibility_hash(), &mut h);
        let compat = std::hash::Hasher::finish(&h);
        let name = format!("{sha256}-{compat:016x}.cwasm");
        match cache.load(&self.engine, &name) {
            Lookup::Loaded(c) => return Ok(c),
            Lookup::Missing => {}
            Lookup::OtherKey => tracing::debug!(
                path = %cache.path(&name).display(),
                "recompiling a cached component written under another key"
            ),
            Lookup::Refused(why) => tracing::warn!(
                path = %cache.path(&name).display(),
                "refusing a cached component ({why}); recompiling {source_name}"
            ),
        }
        let component = Component::new(&self.engine, bytes).map_err(compile_err)?;
        if let Err(e) = cache.store(&name, &component) {
            tracing::warn!(dir = %cache.dir().display(), "cannot cache compiled component: {e:#}");
        }
        Ok(component)
    }
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One runtime for a test binary, with the suite's cache of compiled components
/// (`<target>/tmp/component-cache`, as the integration tests keep it): for the
/// tests of this crate and of the crates above it, not for a scheduler.
#[doc(hidden)]
pub fn test_runtime() -> &'static Arc<Runtime> {
    static RUNTIME: std::sync::OnceLock<Arc<Runtime>> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test binary's path");
        let target = exe
            .ancestors()
            .nth(3)
            .expect("<target>/release/deps/<test>");
        Runtime::new(RuntimeOptions {
            cache_dir: Some(target.join("tmp").join("component-cache")),
            ..RuntimeOptions::default()
        })
        .expect("a runtime")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn runtime(cache_dir: &std::path::Path, key_dir: &std::path::Path) -> Arc<Runtime> {
        Runtime::new(RuntimeOptions {
            cache_dir: Some(cache_dir.to_owned()),
            cache_key_dir: Some(key_dir.to_owned()),
            ..RuntimeOptions::default()
        })
        .unwrap()
    }

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A changed byte in a cached artifact is caught by its digest: the artifact is not
    /// loaded, the module is compiled again, the cache rewritten and a warning logged.
    #[test]
    fn a_tampered_artifact_is_refused_and_recompiled() {
        let root = tempfile::tempdir().unwrap();
        let (cache, keys) = (root.path().join("cache"), root.path().join("keys"));
        let module = std::path::Path::new(berth_artifacts::fixtures::FIXTURE_PROBE);
        runtime(&cache, &keys).load_file(module).unwrap();
        let artifact = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "cwasm"))
            .expect("an artifact in the cache");
        assert!(artifact.with_extension("cwasm.mac").exists());
        let good = std::fs::read(&artifact).unwrap();

        let mut bad = good.clone();
        let middle = bad.len() / 2;
        bad[middle] ^= 0x01;
        std::fs::write(&artifact, &bad).unwrap();
        let log = Captured::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let rt = runtime(&cache, &keys);
        tracing::subscriber::with_default(subscriber, || rt.load_file(module)).unwrap();
        let log = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        assert!(
            log.contains("WARN")
                && log.contains(
                    "refusing a cached component (its digest does not match its contents); recompiling"
                )
                && log.contains(&artifact.display().to_string()),
            "{log}"
        );
        assert_eq!(std::fs::read(&artifact).unwrap(), good, "rewritten");
    }
}
