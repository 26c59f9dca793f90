//! Applying a reload: a new version of the profiles, built off the loop, swapped in
//! between two scheduling cycles (or refused, and the running version keeps serving).

use super::{Oracle, Scheduler};
use crate::framework::{CyclePod, Framework};
use crate::reload::{
    Builder, Built, FollowedView, Generation, PluginsView, ReloadError, ReloadJob, ReloadSource,
    ShadowsView,
};
use berth_sdk::Pod;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// What a swap did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwapReport {
    /// The version of the profiles now serving.
    pub generation: u64,
    /// The plugins whose setup changed (empty: nothing changed, nothing swapped).
    pub changed: BTreeSet<String>,
    /// Unschedulable pods that a changed plugin had rejected, moved to be retried.
    pub moved: usize,
    /// Gated pods whose PreEnqueue plugin changed, asked again.
    pub regated: usize,
    /// Waiting pods given a new QueueSort key.
    pub rekeyed: usize,
}

/// The profiles: the version of them that serves, and what a reload needs to build
/// the next one.
///
/// What must hold: `frameworks` is `generation.frameworks` (kept beside it so that a
/// cycle finds its profile without going through the `Arc`), and the three views
/// show `generation` once a swap has ended; a swap replaces them together, between
/// two scheduling cycles. Cycles and binding cycles under way keep the framework they
/// hold.
pub(super) struct Profiles {
    /// The frameworks of `generation`, one per profile.
    pub(super) frameworks: Vec<Arc<Framework>>,
    /// The profiles' current version (its frameworks are `frameworks`).
    pub(super) generation: Arc<Generation>,
    /// Builds new versions for a reload.
    pub(super) builder: Builder,
    /// What `/plugins` shows, kept up to date at each swap.
    pub(super) plugins_view: PluginsView,
    /// The `oci:` modules that follow a tag, kept up to date at each swap.
    pub(super) followed_view: FollowedView,
    /// What `/shadows` shows, kept up to date at each swap.
    pub(super) shadows_view: ShadowsView,
}

impl Profiles {
    /// Brings the views others keep (`/plugins`, `/shadows`, the tag poll) up to date
    /// with `generation`.
    fn publish_views(&self) {
        *self.plugins_view.write().unwrap_or_else(|e| e.into_inner()) = self.generation.describe();
        *self
            .followed_view
            .write()
            .unwrap_or_else(|e| e.into_inner()) = self.generation.followed_tags();
        *self.shadows_view.write().unwrap_or_else(|e| e.into_inner()) =
            self.generation.shadow_stats();
    }
}

impl Scheduler {
    /// The profiles' current version: configuration, profiles, modules, frameworks.
    pub fn generation(&self) -> &Arc<Generation> {
        &self.profiles.generation
    }

    /// What `/plugins` shows (a handle the HTTP server keeps; each swap updates it).
    pub fn plugins_view(&self) -> PluginsView {
        self.profiles.plugins_view.clone()
    }

    /// The `oci:` modules that follow a tag (a handle `berth run`'s registry poll
    /// keeps; each swap updates it).
    pub fn followed_view(&self) -> FollowedView {
        self.profiles.followed_view.clone()
    }

    /// What `/shadows` shows (a handle the HTTP server keeps; each swap updates it).
    pub fn shadows_view(&self) -> ShadowsView {
        self.profiles.shadows_view.clone()
    }

    /// What each shadow run of the current version has seen so far.
    pub fn shadow_reports(&self) -> Vec<crate::framework::ShadowStats> {
        self.profiles
            .generation
            .shadow_stats()
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).clone())
            .collect()
    }

    /// Starts a reload: captures what a build needs (the current version to compare
    /// with, the host services, a copy of the node snapshot to sync the new instances
    /// with). Cheap; run [`ReloadJob::build`] off the scheduling thread, then hand its
    /// result to [`Scheduler::finish_reload`].
    pub fn prepare_reload(&mut self, source: ReloadSource) -> ReloadJob {
        self.cluster.refresh_snapshot();
        ReloadJob {
            builder: self.profiles.builder.clone(),
            base: self.profiles.generation.clone(),
            snapshot: self.cluster.snapshot.clone(),
            source,
        }
    }

    /// Reloads here and now: [`Scheduler::prepare_reload`], the build, and
    /// [`Scheduler::finish_reload`] on this thread (for tests and `simulate`; `berth
    /// run` builds on a thread of its own).
    pub fn reload(&mut self, source: ReloadSource) -> Result<SwapReport, ReloadError> {
        let built = self.prepare_reload(source).build();
        self.finish_reload(built)
    }

    /// Takes a build's result between two scheduling cycles: swaps the new version in,
    /// or refuses it (a warning naming the plugin, the module and why, and
    /// `berth_plugin_reloads_total{result="refused"}`); a refused reload changes
    /// nothing and the old version keeps serving.
    pub fn finish_reload(
        &mut self,
        built: Result<Built, ReloadError>,
    ) -> Result<SwapReport, ReloadError> {
        let r = built.and_then(|b| self.swap(b));
        if let Err(e) = &r {
            self.services
                .metrics
                .count_reload(e.plugin.as_deref().unwrap_or(""), "refused");
            tracing::warn!(
                plugin = e.plugin.as_deref().unwrap_or("-"),
                module = e.module.as_deref().unwrap_or("-"),
                "reload refused, the running version keeps serving: {e}"
            );
        }
        r
    }

    /// Swaps a built version in. Cycles and binding cycles under way keep the
    /// framework they hold; the next cycle takes the new one. Waiting pods keep their
    /// place (re-keyed if the QueueSort plugin changed); unschedulable pods a changed
    /// plugin rejected are retried, and gated pods a changed PreEnqueue plugin keeps
    /// out are asked again.
    fn swap(&mut self, built: Built) -> Result<SwapReport, ReloadError> {
        if built.base != self.profiles.generation.number {
            return Err(ReloadError {
                file: built.generation.file.clone(),
                field: None,
                plugin: None,
                module: None,
                reason: format!(
                    "built against version {} of the profiles, but version {} serves now",
                    built.base, self.profiles.generation.number
                ),
            });
        }
        let same = built.is_noop()
            && built
                .generation
                .frameworks
                .iter()
                .zip(&self.profiles.frameworks)
                .all(|(a, b)| Arc::ptr_eq(a, b));
        if same {
            tracing::debug!(file = %built.generation.file, "configuration reloaded: nothing changed");
            return Ok(SwapReport {
                generation: self.profiles.generation.number,
                ..SwapReport::default()
            });
        }
        let new = &built.generation.frameworks;
        let profile_of = |pod: &Pod| {
            new.iter()
                .find(|f| f.scheduler_name() == pod.scheduler_name)
        };
        // New sort keys first: a QueueSort plugin that fails on a waiting pod refuses
        // the whole swap, so that keys of two plugins never mix in one heap.
        let mut keys: HashMap<String, Vec<i64>> = HashMap::new();
        let mut group_keys = HashMap::new();
        if built.queue_sort_changed {
            let pods = self
                .queue
                .waiting()
                .map(|q| &q.pod)
                .chain(self.bindings.binding.values().map(|b| &b.qp.pod));
            for pod in pods {
                let Some(fw) = profile_of(pod) else { continue };
                let key = fw
                    .sort_key(&CyclePod::new(pod.clone()))
                    .map_err(|e| rekey_error(&built, e, &format!("pod {}", pod.key())))?;
                keys.insert(pod.uid.clone(), key);
            }
            // Each pod group keyed in the queue, with the profile of a waiting member
            // (with none waiting, it is keyed again when the next is enqueued).
            for id in self.queue.keyed_groups() {
                let Some(group) = self.cluster.pod_groups.get(&id.0, &id.1) else {
                    continue;
                };
                let Some(fw) = self
                    .waiting_member(&id.0, &id.1)
                    .and_then(|qp| profile_of(&qp.pod))
                else {
                    continue;
                };
                let key = fw
                    .sort_key(&CyclePod::new(super::group::standing_pod(&group)))
                    .map_err(|e| rekey_error(&built, e, &format!("pod group {}/{}", id.0, id.1)))?;
                group_keys.insert(id.clone(), key);
            }
        }
        let queue_sort_changed = built.queue_sort_changed;
        let Built {
            mut generation,
            changed,
            ..
        } = built;
        generation.loaded_at = std::time::SystemTime::now();
        self.profiles.frameworks = generation.frameworks.clone();
        self.profiles
            .builder
            .runtime
            .memory()
            .set_limit(generation.config.total_memory_limit());
        self.profiles.generation = Arc::new(generation);
        if queue_sort_changed {
            self.queue.rekey(&keys, &group_keys);
            for (uid, b) in self.bindings.binding.iter_mut() {
                if let Some(k) = keys.get(uid) {
                    b.qp.key = k.clone();
                }
            }
        }
        let now = self.services.clock.now();
        let moved = self.queue.move_rejected_by(&changed, now, "PluginReload");
        let mut regated = 0;
        for pod in self.queue.gated_by(&changed) {
            let Some(fw) = self.framework_for(&pod.scheduler_name).cloned() else {
                continue;
            };
            match self.gate(&fw, &pod) {
                Ok((key, gate)) => {
                    regated += 1;
                    self.queue
                        .update(pod, key, gate, now, &Oracle(&self.profiles.frameworks));
                }
                // Not dropped: it backs off and is asked again.
                Err(e) => self.enqueue_failed(pod, &e),
            }
        }
        self.profiles.publish_views();
        for p in &changed {
            self.services.metrics.count_reload(p, "success");
        }
        tracing::info!(
            file = %self.profiles.generation.file,
            generation = self.profiles.generation.number,
            "configuration reloaded: plugins changed: [{}]; {moved} unschedulable pod(s) they rejected retried, {regated} gated pod(s) asked again{}",
            changed.iter().cloned().collect::<Vec<_>>().join(", "),
            if keys.is_empty() { String::new() } else { format!("; {} pod(s) re-keyed for the new QueueSort", keys.len()) },
        );
        Ok(SwapReport {
            generation: self.profiles.generation.number,
            changed,
            moved,
            regated,
            rekeyed: keys.len(),
        })
    }
}

/// A QueueSort plugin of a new generation failed to key `what` (a waiting pod, or a
/// pod group) in the queue: the swap is refused, naming the plugin and its module.
fn rekey_error(built: &Built, e: crate::framework::PluginError, what: &str) -> ReloadError {
    let module = built
        .generation
        .modules
        .get(&e.plugin)
        .map(|m| m.source().to_owned());
    ReloadError {
        file: built.generation.file.clone(),
        field: None,
        plugin: Some(e.plugin.clone()),
        module,
        reason: format!("re-keying {what} in the queue: {e}"),
    }
}
