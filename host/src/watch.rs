//! Watching the configuration file and the module files it names, for `berth run`:
//! when one of them changes, the live loop is asked to reload
//! ([`crate::live::Input::Reload`]).
//!
//! The directories that hold the files are watched (not the files), so that a file
//! replaced by a rename, a file that does not exist yet, and a ConfigMap volume (whose
//! files are symbolic links through `..data`, swapped at once) are all seen. Events
//! are debounced: a reload is asked for once nothing has happened to the files for
//! the debounce interval, so that a module being written is read once complete (a
//! module read half-written fails its checks and is refused; the write that completes
//! it triggers another reload). A reload is asked for only when the content of a file
//! changed, not on a touch.

use crate::config::Configuration;
use crate::live::Input;
use crate::reload::{ReloadJob, ReloadSource};
use notify::{RecursiveMode, Watcher};
use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

/// How long the files must stay quiet before a reload is asked for.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(300);

/// The files a reload depends on, absolute: the configuration and the modules it
/// names (as its last readable version names them).
fn watched_files(config_path: &Path, last: &[PathBuf]) -> Vec<PathBuf> {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    match Configuration::load_unchecked(config_path) {
        Ok(c) => ReloadJob::watched_files(&c, Some(config_path))
            .iter()
            .map(|p| abs(p))
            .collect(),
        Err(_) if !last.is_empty() => last.to_vec(),
        Err(_) => vec![abs(config_path)],
    }
}

/// The content of each file, hashed (`None`: unreadable).
fn fingerprint(files: &[PathBuf]) -> Vec<Option<u64>> {
    files
        .iter()
        .map(|f| {
            std::fs::read(f).ok().map(|bytes| {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                bytes.hash(&mut h);
                h.finish()
            })
        })
        .collect()
}

/// Whether an event concerns one of the files: it names one, or it is a ConfigMap
/// volume's swap of its `..data` link.
fn concerns(event: &notify::Event, files: &[PathBuf]) -> bool {
    event.paths.iter().any(|p| {
        files.iter().any(|f| f == p)
            || p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(".."))
    })
}

/// How long the registry poll waits before it looks again at a version that polls
/// nothing (`berth.oci.pollInterval: 0`): a reload may turn it on.
const IDLE_POLL: Duration = Duration::from_secs(60);

/// Asks the registries, every `berth.oci.pollInterval` of the running version,
/// where the tags of its `oci:` modules point (the manifest only); when a tag's
/// component is not the one running, asks the live loop to build the running
/// configuration again ([`ReloadSource::Current`]): the new module is pulled and
/// goes through a reload's checks, and is swapped in or refused. A module refused
/// once is not asked for again until its tag moves on; a registry that cannot be
/// reached is logged when it starts failing and when it answers again. Runs as a
/// task on `handle` until aborted or the loop is gone.
pub fn poll_registries(
    view: crate::reload::FollowedView,
    tx: Sender<Input>,
    handle: &tokio::runtime::Handle,
) -> tokio::task::JoinHandle<()> {
    handle.spawn(async move {
        // Per plugin: the layer digest a reload was asked for, and whether the
        // last poll failed.
        let mut asked: std::collections::HashMap<String, String> = Default::default();
        let mut failing: BTreeSet<String> = BTreeSet::new();
        loop {
            let interval = view
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .interval
                .unwrap_or(IDLE_POLL);
            tokio::time::sleep(interval).await;
            let followed = view.read().unwrap_or_else(|e| e.into_inner()).clone();
            if followed.interval.is_none() || followed.modules.is_empty() {
                continue;
            }
            let answers = match tokio::task::spawn_blocking(move || {
                followed
                    .modules
                    .iter()
                    .map(|m| {
                        (
                            m.clone(),
                            crate::oci::resolve(&m.reference, &followed.access),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .await
            {
                Ok(a) => a,
                Err(_) => continue,
            };
            let mut moved = Vec::new();
            for (m, answer) in answers {
                match answer {
                    Ok(now) => {
                        if failing.remove(&m.plugin) {
                            tracing::info!(plugin = %m.plugin, module = %m.reference, "the registry answers again");
                        }
                        let running = format!("sha256:{}", m.sha256);
                        if now.layer_digest == running {
                            asked.remove(&m.plugin);
                        } else if asked.get(&m.plugin) != Some(&now.layer_digest) {
                            tracing::info!(
                                plugin = %m.plugin,
                                module = %m.reference,
                                "the tag moved to {} (component {}; running {running}); reloading",
                                now.manifest_digest,
                                now.layer_digest,
                            );
                            asked.insert(m.plugin.clone(), now.layer_digest);
                            moved.push(m.plugin);
                        }
                    }
                    Err(e) => {
                        if failing.insert(m.plugin.clone()) {
                            tracing::warn!(plugin = %m.plugin, "cannot poll the module's tag, the running module keeps serving: {e}");
                        }
                    }
                }
            }
            if !moved.is_empty() && tx.send(Input::Reload(ReloadSource::Current)).is_err() {
                return;
            }
        }
    })
}

/// Why the configuration file and its modules cannot be watched.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The file watcher could not be set up.
    #[error(transparent)]
    Notify(#[from] notify::Error),
    /// The watching thread could not be started.
    // The OS error is part of the message, not a `source`: shown once in a chain.
    #[error("cannot start the watching thread: {0}")]
    Thread(std::io::Error),
}

/// Why the configuration could not be read from its ConfigMap.
#[derive(Debug, thiserror::Error)]
pub enum ConfigMapError {
    /// The API server did not give the ConfigMap.
    // The API's error is part of the message, not a `source`: shown once in a chain.
    #[error("{label}: cannot read it: {error}")]
    Read {
        /// The ConfigMap and key, as messages name them.
        label: String,
        /// What the API said.
        error: kube::Error,
    },
    /// The ConfigMap has no such key.
    #[error("{label}: no key {key:?} in its data (keys: [{}])", .keys.join(", "))]
    NoKey {
        /// The ConfigMap and key, as messages name them.
        label: String,
        /// The key asked for.
        key: String,
        /// The keys it has.
        keys: Vec<String>,
    },
}

/// Why a `--config-map` reference was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigMapRefError {
    /// The reference is not `NAMESPACE/NAME`.
    #[error("--config-map {0:?}: expected NAMESPACE/NAME")]
    NotNamespaceSlashName(String),
    /// The key is empty.
    #[error("--config-map-key: empty")]
    EmptyKey,
}

/// Watches `config_path` and the modules it names on a thread of its own; each
/// change (after `debounce` of quiet) sends [`Input::Reload`] to `tx`. The thread ends
/// when `tx`'s receiver is gone.
pub fn watch_config(
    config_path: PathBuf,
    tx: Sender<Input>,
    debounce: Duration,
) -> Result<(), WatchError> {
    let (etx, erx) = channel::<notify::Result<notify::Event>>();
    let mut watcher = notify::recommended_watcher(move |ev| {
        let _ = etx.send(ev);
    })?;
    let mut files = watched_files(&config_path, &[]);
    let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
    let mut rewatch = move |watcher: &mut notify::RecommendedWatcher, files: &[PathBuf]| {
        let want: BTreeSet<PathBuf> = files
            .iter()
            .filter_map(|f| f.parent().map(Path::to_path_buf))
            .collect();
        for d in dirs.difference(&want) {
            let _ = watcher.unwatch(d);
        }
        let mut now = BTreeSet::new();
        for d in &want {
            if dirs.contains(d) {
                now.insert(d.clone());
                continue;
            }
            match watcher.watch(d, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    now.insert(d.clone());
                }
                Err(e) => {
                    tracing::warn!(dir = %d.display(), "cannot watch for plugin or configuration changes: {e}")
                }
            }
        }
        dirs = now;
    };
    rewatch(&mut watcher, &files);
    let mut last = fingerprint(&files);
    std::thread::Builder::new()
        .name("berth-watch".into())
        .spawn(move || {
            loop {
                match erx.recv() {
                    Ok(Ok(ev)) if concerns(&ev, &files) => {}
                    Ok(Ok(_)) => continue,
                    Ok(Err(e)) => {
                        tracing::warn!("watching the configuration: {e}");
                        continue;
                    }
                    Err(_) => return,
                }
                // The files quiet for `debounce` first: the writer may not be done.
                // Other files of the directories (a log) may be busy all along.
                let mut until = Instant::now() + debounce;
                loop {
                    match erx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                        Ok(Ok(ev)) if concerns(&ev, &files) => until = Instant::now() + debounce,
                        Ok(_) => {}
                        Err(RecvTimeoutError::Timeout) => break,
                        Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
                let now_files = watched_files(&config_path, &files);
                if now_files != files {
                    rewatch(&mut watcher, &now_files);
                    files = now_files;
                    last.clear();
                }
                let fp = fingerprint(&files);
                if fp == last {
                    continue;
                }
                last = fp;
                tracing::info!(config = %config_path.display(), "the configuration or a module it names changed; reloading");
                if tx
                    .send(Input::Reload(ReloadSource::File(config_path.clone())))
                    .is_err()
                {
                    return;
                }
            }
        })
        .map_err(WatchError::Thread)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn changes_to_the_config_or_a_module_ask_for_one_reload_each() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.yaml");
        let module = dir.path().join("m.wasm");
        std::fs::write(&module, b"one").unwrap();
        std::fs::write(
            &config,
            "modules:\n- name: M\n  path: m.wasm\nprofiles:\n- plugins: {}\n",
        )
        .unwrap();
        let (tx, rx) = channel();
        watch_config(config.clone(), tx, Duration::from_millis(100)).unwrap();
        // A busy log beside the files, all along: it must not hold a reload back.
        let log = dir.path().join("berth.log");
        let stop = Arc::new(AtomicBool::new(false));
        let noise = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::fs::write(&log, b"noise").unwrap();
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        let next = || rx.recv_timeout(Duration::from_secs(10));
        let quiet = || rx.recv_timeout(Duration::from_millis(600)).is_err();

        // Written in pieces: one reload, once done.
        for piece in [b"tw".as_slice(), b"two"] {
            std::fs::write(&module, piece).unwrap();
        }
        assert!(matches!(next(), Ok(Input::Reload(ReloadSource::File(p))) if p == config));
        assert!(quiet());
        // Touched, not changed: nothing.
        std::fs::write(&module, b"two").unwrap();
        assert!(quiet());
        // A new module path, in a directory created afterwards: watched from then on.
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("n.wasm"), b"n").unwrap();
        std::fs::write(
            &config,
            "modules:\n- name: M\n  path: sub/n.wasm\nprofiles:\n- plugins: {}\n",
        )
        .unwrap();
        assert!(matches!(next(), Ok(Input::Reload(_))));
        std::fs::write(sub.join("n.wasm"), b"n2").unwrap();
        assert!(matches!(next(), Ok(Input::Reload(_))));
        // Replaced by a rename, as an installer would.
        std::fs::write(sub.join(".n.tmp"), b"n3").unwrap();
        std::fs::rename(sub.join(".n.tmp"), sub.join("n.wasm")).unwrap();
        assert!(matches!(next(), Ok(Input::Reload(_))));
        assert!(quiet());
        stop.store(true, Ordering::Relaxed);
        noise.join().unwrap();
    }

    /// A ConfigMap volume: the file is a link through `..data`, which the kubelet
    /// points at a new directory at once.
    #[test]
    fn a_config_map_volume_s_swap_asks_for_a_reload() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let version = |n: &str, text: &str| {
            std::fs::create_dir(d.join(n)).unwrap();
            std::fs::write(d.join(n).join("config.yaml"), text).unwrap();
        };
        version("..v1", "profiles: []\n");
        symlink("..v1", d.join("..data")).unwrap();
        symlink("..data/config.yaml", d.join("config.yaml")).unwrap();
        let (tx, rx) = channel();
        watch_config(d.join("config.yaml"), tx, Duration::from_millis(100)).unwrap();
        version("..v2", "parallelism: 1\nprofiles: []\n");
        symlink("..v2", d.join("..data_tmp")).unwrap();
        std::fs::rename(d.join("..data_tmp"), d.join("..data")).unwrap();
        assert!(matches!(
            rx.recv_timeout(Duration::from_secs(10)),
            Ok(Input::Reload(ReloadSource::File(p))) if p == d.join("config.yaml")
        ));
    }
}

/// A configuration kept under one key of a ConfigMap (`berth run --config-map`): read
/// through the API at start and watched, so that an edit of the ConfigMap is swapped in
/// at once (a mounted ConfigMap volume reaches the pod only when the kubelet syncs it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigMapSource {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The key whose value is the configuration.
    pub key: String,
}

impl ConfigMapSource {
    /// `NAMESPACE/NAME`, and the key.
    pub fn parse(reference: &str, key: &str) -> Result<Self, ConfigMapRefError> {
        let Some((namespace, name)) = reference
            .split_once('/')
            .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'))
        else {
            return Err(ConfigMapRefError::NotNamespaceSlashName(
                reference.to_owned(),
            ));
        };
        if key.is_empty() {
            return Err(ConfigMapRefError::EmptyKey);
        }
        Ok(ConfigMapSource {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            key: key.to_owned(),
        })
    }

    /// How messages name it (in place of a file name).
    pub fn label(&self) -> String {
        format!("configmap {}/{}[{}]", self.namespace, self.name, self.key)
    }

    fn text_of(
        &self,
        cm: &k8s_openapi::api::core::v1::ConfigMap,
    ) -> Result<String, ConfigMapError> {
        let data = cm.data.as_ref();
        data.and_then(|d| d.get(&self.key))
            .cloned()
            .ok_or_else(|| ConfigMapError::NoKey {
                label: self.label(),
                key: self.key.clone(),
                keys: data
                    .map(|d| d.keys().cloned().collect())
                    .unwrap_or_default(),
            })
    }

    /// Reads the configuration's text now.
    pub async fn fetch(&self, client: &kube::Client) -> Result<String, ConfigMapError> {
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(client.clone(), &self.namespace);
        let cm = api
            .get(&self.name)
            .await
            .map_err(|error| ConfigMapError::Read {
                label: self.label(),
                error,
            })?;
        self.text_of(&cm)
    }

    /// The configuration in `text`, its relative paths taken from `base` (the working
    /// directory), checked; errors name the ConfigMap and key as a file.
    pub fn parse_config(
        &self,
        text: &str,
        base: &Path,
    ) -> Result<Configuration, crate::config::ConfigError> {
        let file = self.label();
        let mut config = Configuration::parse_unchecked(&file, text)?;
        config.resolve_paths(base);
        config.check(&file)?;
        Ok(config)
    }
}

/// Watches the ConfigMap on `handle`; each change of the key's text (from `first`, the
/// text the scheduler started with) sends [`Input::Reload`] to `tx`. A missing key or
/// a deleted ConfigMap is logged and the running version keeps serving. The task ends
/// when `tx`'s receiver is gone.
pub fn watch_config_map(
    client: kube::Client,
    source: ConfigMapSource,
    first: String,
    base: PathBuf,
    tx: Sender<Input>,
    handle: &tokio::runtime::Handle,
) -> tokio::task::JoinHandle<()> {
    use futures::StreamExt;
    use kube::runtime::WatchStreamExt;
    use kube::runtime::watcher::{self, Event};
    handle.spawn(async move {
        let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
            kube::Api::namespaced(client, &source.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", source.name));
        let mut stream = watcher::watcher(api, config).default_backoff().boxed();
        let mut last = first;
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Apply(cm) | Event::InitApply(cm)) => match source.text_of(&cm) {
                    Ok(text) if text != last => {
                        last = text.clone();
                        let reload = Input::Reload(ReloadSource::Text {
                            text,
                            file: source.label(),
                            base: base.clone(),
                        });
                        if tx.send(reload).is_err() {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!("{e}; the running version keeps serving"),
                },
                Ok(Event::Delete(_)) => tracing::warn!(
                    "{} was deleted; the running version keeps serving",
                    source.label()
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!("watching {}: {e}", source.label()),
            }
        }
    })
}

#[cfg(test)]
mod config_map_tests {
    use super::ConfigMapSource;

    #[test]
    fn a_reference_is_namespace_slash_name() {
        let s = ConfigMapSource::parse("kube-system/berth", "config.yaml").unwrap();
        assert_eq!(s.label(), "configmap kube-system/berth[config.yaml]");
        for bad in ["berth", "/berth", "kube-system/", "a/b/c"] {
            let e = ConfigMapSource::parse(bad, "config.yaml").unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("--config-map {bad:?}: expected NAMESPACE/NAME")
            );
        }
        assert_eq!(
            ConfigMapSource::parse("a/b", ""),
            Err(super::ConfigMapRefError::EmptyKey)
        );
    }
}
