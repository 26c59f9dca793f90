//! The traits a plugin implements, one per extension point, and the table the export
//! macro builds from them.

use crate::events::{ClusterEvent, EventRegistration, Object, QueueingHint};
use crate::preemption::{
    DryRun, NodeVictims, PostFilter, PostFilterResult, PreFilterExtensions, SelectVictims,
};
use crate::sign::{Sign, SignFragment};
use crate::types::{ExtensionPoint, NodeInfo, Pod, Status};
use crate::workload::{
    NormalizePlacementScore, Placement, PlacementFeasible, PlacementGenerate, PlacementProgress,
    PlacementScore, PodGroup, PodGroupAssignments, PodGroupPostFilter, PodGroupPostFilterResult,
};
use serde::{Serialize, de::DeserializeOwned};
use std::any::Any;
use std::rc::Rc;

/// Where a cycle's state lives. In the sandbox it is the host's `cycle-state`
/// resource; natively (tests, native builds) any map will do.
pub trait StateStore {
    /// The bytes stored under `key`.
    fn read(&self, key: &str) -> Option<Vec<u8>>;
    /// Stores bytes under `key`.
    fn write(&self, key: &str, value: &[u8]);
    /// Removes `key`.
    fn delete(&self, key: &str);
}

/// The state of one scheduling cycle, shared by every plugin call of that cycle (and
/// its binding cycle), as kube-scheduler's `CycleState`. Values are encoded with
/// postcard; prefix keys with the plugin's name to stay out of others' way.
pub struct CycleState<'a> {
    store: &'a dyn StateStore,
    /// Values already read during this call, as bytes and decoded (a batch over many
    /// nodes reads the same keys for every node; in the sandbox each read is a call
    /// into the host).
    read_cache: std::cell::RefCell<ReadCache>,
    /// Values [`CycleState::value`] decoded during this call, by the address of their
    /// [`StateKey`]'s name: found without hashing or comparing the key.
    typed: std::cell::RefCell<TypedCache>,
}

/// A CycleState key and the type of its value: the fast way to read state that
/// Filter or Score look up once per node. Declare it as a `static` (or `const`)
/// next to the plugin, write with [`CycleState::set`], and read with
/// [`CycleState::value`], which after the first read of a call finds the decoded
/// value by the key's address alone.
///
/// ```
/// use berth_sdk::{CycleState, MemoryState, StateKey};
///
/// static WANT: StateKey<Vec<u32>> = StateKey::new("Demo/want");
///
/// let store = MemoryState::default();
/// let state = CycleState::new(&store);
/// state.set(&WANT, &vec![1, 2]);
/// assert_eq!(state.value(&WANT).as_deref(), Some(&vec![1, 2]));
/// ```
pub struct StateKey<T> {
    name: &'static str,
    value: std::marker::PhantomData<fn() -> T>,
}

impl<T> StateKey<T> {
    /// A key named `name`; prefix it with the plugin's name.
    pub const fn new(name: &'static str) -> Self {
        StateKey {
            name,
            value: std::marker::PhantomData,
        }
    }

    /// The key's name, as [`CycleState::read`] and [`CycleState::write`] take it.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

impl<T> std::fmt::Debug for StateKey<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StateKey").field(&self.name).finish()
    }
}

/// What one call read, by key. Filter and Score look a key up once per node, and
/// PodTopologySpread reads one key per topology domain: a map, with a hash cheaper
/// than std's for short keys.
type ReadCache = crate::helpers::FastHashMap<String, Cached>;

/// What [`CycleState::value`] decoded, by key name (compared by address), with the
/// type it was decoded as.
type TypedCache = Vec<Typed>;

/// One value [`CycleState::value`] decoded.
struct Typed {
    name: &'static str,
    /// The `T` of the key it was read with: a second key declared with the same
    /// string and another type is decoded on its own.
    type_id: std::any::TypeId,
    /// `None`: absent, or not a `T`.
    value: Option<Rc<dyn Any>>,
}

/// A key's bytes (`None`: absent) and, once [`CycleState::get`] decoded them, the
/// value.
struct Cached {
    bytes: Option<Rc<[u8]>>,
    decoded: Option<Rc<dyn Any>>,
}

impl<'a> CycleState<'a> {
    /// Wraps a store.
    pub fn new(store: &'a dyn StateStore) -> Self {
        CycleState {
            store,
            read_cache: std::cell::RefCell::new(ReadCache::default()),
            typed: std::cell::RefCell::new(Vec::new()),
        }
    }

    /// Runs `f` on the cache entry of `key`, reading it from the store the first time.
    fn cached<R>(&self, key: &str, f: impl FnOnce(&mut Cached) -> R) -> R {
        let mut cache = self.read_cache.borrow_mut();
        if let Some(c) = cache.get_mut(key) {
            return f(c);
        }
        let c = cache.entry(key.to_owned()).or_insert(Cached {
            bytes: self.store.read(key).map(Into::into),
            decoded: None,
        });
        f(c)
    }

    fn forget(&self, key: &str) {
        self.read_cache.borrow_mut().remove(key);
        self.typed.borrow_mut().retain(|t| t.name != key);
    }

    /// Reads and decodes a value into one the caller owns; `None` when absent or not
    /// of type `T`. Each call decodes again: where the same value is read for every
    /// node (Filter, Score), [`CycleState::get`] decodes it once per call instead.
    pub fn read<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        let bytes = self.cached(key, |c| c.bytes.clone())?;
        postcard::from_bytes(&bytes).ok()
    }

    /// Reads a value, decoded once for the rest of this call (a Filter or Score batch
    /// over many nodes) and shared; `None` when absent or not of type `T`. The fast
    /// way to read PreFilter's or PreScore's state inside Filter and Score.
    pub fn get<T: DeserializeOwned + 'static>(&self, key: &str) -> Option<Rc<T>> {
        let (decoded, bytes) = self.cached(key, |c| (c.decoded.clone(), c.bytes.clone()));
        if let Some(value) = decoded
            && let Ok(value) = value.downcast::<T>()
        {
            return Some(value);
        }
        let value = Rc::new(postcard::from_bytes::<T>(&bytes?).ok()?);
        let shared: Rc<dyn Any> = value.clone();
        self.cached(key, |c| c.decoded = Some(shared));
        Some(value)
    }

    /// Reads the value of a typed key, decoded once for the rest of this call and
    /// shared, as [`CycleState::get`]; later reads of the same key in the call cost a
    /// comparison of addresses. `None` when absent or not of type `T`.
    pub fn value<T: DeserializeOwned + 'static>(&self, key: &StateKey<T>) -> Option<Rc<T>> {
        // Filter and Score call this once per node: the hit is a comparison of
        // addresses and of a constant type id, with no call through `Any`'s vtable.
        let type_id = std::any::TypeId::of::<T>();
        let found = self.typed.borrow().iter().find_map(|t| {
            let same = std::ptr::eq(t.name.as_ptr(), key.name.as_ptr())
                && t.name.len() == key.name.len()
                && t.type_id == type_id;
            same.then(|| t.value.clone())
        });
        if let Some(found) = found {
            return found.map(|value| {
                // SAFETY: the value was stored for this type id, so it is a `T`:
                // the pointer, stripped of `Any`'s metadata, is an `Rc<T>`'s.
                unsafe { Rc::from_raw(Rc::into_raw(value).cast::<T>()) }
            });
        }
        let value = self.get::<T>(key.name);
        self.typed.borrow_mut().push(Typed {
            name: key.name,
            type_id,
            value: value.clone().map(|v| v as Rc<dyn Any>),
        });
        value
    }

    /// Encodes and stores the value of a typed key.
    pub fn set<T: Serialize>(&self, key: &StateKey<T>, value: &T) {
        self.write(key.name, value);
    }

    /// Encodes and stores a value.
    pub fn write<T: Serialize>(&self, key: &str, value: &T) {
        self.forget(key);
        // Encoding into a Vec cannot fail for plain data.
        if let Ok(bytes) = postcard::to_allocvec(value) {
            self.store.write(key, &bytes);
        }
    }

    /// Removes a value.
    pub fn delete(&self, key: &str) {
        self.forget(key);
        self.store.delete(key);
    }
}

impl std::fmt::Debug for CycleState<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CycleState")
    }
}

/// A map-backed [`StateStore`] for tests and native runs.
#[derive(Default, Debug)]
pub struct MemoryState(std::cell::RefCell<std::collections::HashMap<String, Vec<u8>>>);

impl StateStore for MemoryState {
    fn read(&self, key: &str) -> Option<Vec<u8>> {
        self.0.borrow().get(key).cloned()
    }
    fn write(&self, key: &str, value: &[u8]) {
        self.0.borrow_mut().insert(key.to_owned(), value.to_vec());
    }
    fn delete(&self, key: &str) {
        self.0.borrow_mut().remove(key);
    }
}

/// Every plugin: its name and how it is built from the profile's args.
pub trait Plugin: Sized + 'static {
    /// The name used in profiles, e.g. "NodeResourcesFit".
    const NAME: &'static str;

    /// Whether the plugin reads [`NodeInfo::pods`]; the host sends the pods of each
    /// node to the plugin's replica only when it does, since they cost memory and
    /// copying.
    const WANTS_PODS: bool = false;

    /// Builds the plugin from its args (`serde_json::Value::Null` when the profile
    /// gives none). An error refuses the module with that message.
    fn new(args: serde_json::Value) -> Result<Self, String>;

    /// When not empty, the plugin, as its args configured it, has nothing to do with
    /// a pod that has none of these features: its PreFilter and PreScore answer Skip
    /// for such a pod, and its other extension points succeed without an effect. The
    /// host then leaves the plugin out of that pod's scheduling and binding cycles
    /// entirely (no call, and the pod is not sent), which is what a plugin that only
    /// cares about, say, volumes costs a pod without any. Asked once, after
    /// [`Plugin::new`]. A promise: a plugin that would act on such a pod must not
    /// make it.
    fn only_for_pods_with(&self) -> &[crate::PodFeature] {
        &[]
    }

    /// The cluster events that may make a pod this plugin rejected schedulable
    /// (upstream's `EventsToRegister`). `None`, the default, means every event.
    fn events() -> Option<Vec<EventRegistration>> {
        None
    }
}

/// EnqueueExtensions: decides whether an event may help a pod this plugin rejected.
pub trait EnqueueExtensions: Plugin {
    /// Queue or QueueSkip; an error counts as Queue.
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String>;
}

/// PreEnqueue: may keep a pod out of the active queue (e.g. scheduling gates).
pub trait PreEnqueue: Plugin {
    /// Success lets the pod in; anything else keeps it waiting.
    fn pre_enqueue(&self, pod: &Pod) -> Status;
}

/// QueueSort: orders the active queue with a key computed once per pod.
///
/// The queue holds pod groups as wholes (kube-scheduler's queue compares entities: a
/// pod, or a pod group): a PodGroup whose members wait is keyed once, by the key of
/// the pod that stands for it ([`Pod::standing_for_pod_group`]: the group's namespace
/// and name, the PodGroup's priority, no UID). A plugin that keys by priority needs
/// nothing more; [`Pod::stands_for_pod_group`] tells such a pod apart.
pub trait QueueSort: Plugin {
    /// Lower keys pop first; ties pop in enqueue order.
    fn sort_key(&self, pod: &Pod) -> Vec<i64>;
}

/// What PreFilter answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreFilterResult {
    /// Success, Skip (Filter is not called for this pod), or a rejection.
    pub status: Status,
    /// When set, only these nodes are considered.
    pub node_names: Option<Vec<String>>,
}

impl From<Status> for PreFilterResult {
    fn from(status: Status) -> Self {
        PreFilterResult {
            status,
            node_names: None,
        }
    }
}

/// PreFilter: runs once per cycle before Filter.
pub trait PreFilter: Plugin {
    /// Computes per-cycle state, may reject the pod or narrow the node set. `nodes`
    /// are all the nodes of the snapshot.
    fn pre_filter(&self, state: &CycleState, pod: &Pod, nodes: &[&NodeInfo]) -> PreFilterResult;
}

/// Filter: can the pod run on this node?
pub trait Filter: Plugin {
    /// Success, or why not.
    fn filter(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Status;
}

/// PreScore: runs once per cycle before Score, with the feasible nodes.
pub trait PreScore: Plugin {
    /// Success, Skip (Score is not called for this pod), or an error. `nodes` are the
    /// feasible nodes, `all_nodes` every node of the snapshot.
    fn pre_score(
        &self,
        state: &CycleState,
        pod: &Pod,
        nodes: &[&NodeInfo],
        all_nodes: &[&NodeInfo],
    ) -> Status;
}

/// Score: ranks a feasible node.
pub trait Score: Plugin {
    /// A score; after normalization scores lie in [0, 100].
    fn score(&self, state: &CycleState, pod: &Pod, node: &NodeInfo) -> Result<i64, Status>;
}

/// NormalizeScore (upstream's ScoreExtensions): rescales this plugin's scores.
pub trait NormalizeScore: Plugin {
    /// Rescales `scores` in place into [0, 100].
    fn normalize_score(&self, state: &CycleState, pod: &Pod, scores: &mut [i64]) -> Status;
}

/// Reserve: claims what the chosen node gives the pod; Unreserve gives it back.
pub trait Reserve: Plugin {
    /// Claims; a failure aborts the cycle.
    fn reserve(&self, state: &CycleState, pod: &Pod, node: &str) -> Status;
    /// Releases; must be idempotent.
    fn unreserve(&self, state: &CycleState, pod: &Pod, node: &str);
}

/// Permit: approves, rejects or delays binding.
pub trait Permit: Plugin {
    /// Success, a rejection, or Wait with how long to wait.
    fn permit(&self, state: &CycleState, pod: &Pod, node: &str) -> (Status, std::time::Duration);
}

/// PreBind: prepares binding (e.g. volumes).
pub trait PreBind: Plugin {
    /// Success, Skip, or a failure that aborts binding.
    fn pre_bind(&self, state: &CycleState, pod: &Pod, node: &str) -> Status;
}

/// Bind: binds the pod to the node.
pub trait Bind: Plugin {
    /// Success, Skip (the next bind plugin is tried), or a failure.
    fn bind(&self, state: &CycleState, pod: &Pod, node: &str) -> Status;
}

/// PostBind: informational, after a successful bind.
pub trait PostBind: Plugin {
    /// Called after the pod is bound.
    fn post_bind(&self, state: &CycleState, pod: &Pod, node: &str);
}

/// Declares [`VTable`] from one row per extension point: the name
/// [`plugin_vtable!`](crate::plugin_vtable) knows it by (the field and the method that
/// fills it), the function's type, the entry of a type implementing the point's
/// trait, and the [`ExtensionPoint`] it counts as (`-` for none).
macro_rules! vtable {
    (@point $out:ident, $entry:expr, -) => {};
    (@point $out:ident, $entry:expr, $point:ident) => {
        if $entry.is_some() {
            $out.push(ExtensionPoint::$point);
        }
    };
    ($(
        $(#[$doc:meta])*
        $name:ident: $ty:ty = $entry:expr, if $bound:ident, $point:tt;
    )*) => {
        /// The extension points a plugin type implements, as function pointers. Built
        /// by [`export_plugin!`](crate::export_plugin) (or
        /// [`plugin_vtable!`](crate::plugin_vtable) for native use); the host runs
        /// native builds of plugins through the same table.
        #[allow(clippy::type_complexity)]
        pub struct VTable<T> {
            $( $(#[$doc])* pub $name: Option<$ty>, )*
        }

        impl<T> Default for VTable<T> {
            fn default() -> Self {
                VTable { $( $name: None, )* }
            }
        }

        impl<T> VTable<T> {
            /// The extension points present in the table.
            pub fn extension_points(&self) -> Vec<ExtensionPoint> {
                let mut out = Vec::new();
                $( vtable!(@point out, self.$name, $point); )*
                out
            }

            $(
                $(#[$doc])*
                /// Fills this entry from the plugin type's implementation.
                pub fn $name(mut self) -> Self
                where
                    T: $bound,
                {
                    self.$name = Some($entry);
                    self
                }
            )*
        }
    };
}

vtable! {
    /// PreEnqueue.
    pre_enqueue: fn(&T, &Pod) -> Status = T::pre_enqueue, if PreEnqueue, PreEnqueue;
    /// Queueing hints.
    queueing_hint: fn(
        &T,
        &ClusterEvent,
        &Pod,
        Option<&Object>,
        Option<&Object>,
    ) -> Result<QueueingHint, String> = T::queueing_hint, if EnqueueExtensions, -;
    /// QueueSort.
    queue_sort: fn(&T, &Pod) -> Vec<i64> = T::sort_key, if QueueSort, QueueSort;
    /// PreFilter.
    pre_filter: fn(&T, &CycleState, &Pod, &[&NodeInfo]) -> PreFilterResult =
        T::pre_filter, if PreFilter, PreFilter;
    /// PreFilterExtensions: AddPod and RemovePod.
    pre_filter_extensions: (
        fn(&T, &CycleState, &Pod, &Pod, &NodeInfo) -> Status,
        fn(&T, &CycleState, &Pod, &Pod, &NodeInfo) -> Status,
    ) = (T::add_pod, T::remove_pod), if PreFilterExtensions, -;
    /// Filter.
    filter: fn(&T, &CycleState, &Pod, &NodeInfo) -> Status = T::filter, if Filter, Filter;
    /// PostFilter.
    post_filter: fn(&T, &CycleState, &Pod, &[(&NodeInfo, Status)], &dyn DryRun) -> PostFilterResult =
        T::post_filter, if PostFilter, PostFilter;
    /// PreScore.
    pre_score: fn(&T, &CycleState, &Pod, &[&NodeInfo], &[&NodeInfo]) -> Status =
        T::pre_score, if PreScore, PreScore;
    /// Score.
    score: fn(&T, &CycleState, &Pod, &NodeInfo) -> Result<i64, Status> =
        T::score, if Score, Score;
    /// NormalizeScore.
    normalize_score: fn(&T, &CycleState, &Pod, &mut [i64]) -> Status =
        T::normalize_score, if NormalizeScore, NormalizeScore;
    /// Reserve and Unreserve.
    reserve: (
        fn(&T, &CycleState, &Pod, &str) -> Status,
        fn(&T, &CycleState, &Pod, &str),
    ) = (T::reserve, T::unreserve), if Reserve, Reserve;
    /// Permit.
    permit: fn(&T, &CycleState, &Pod, &str) -> (Status, std::time::Duration) =
        T::permit, if Permit, Permit;
    /// PreBind.
    pre_bind: fn(&T, &CycleState, &Pod, &str) -> Status = T::pre_bind, if PreBind, PreBind;
    /// Bind.
    bind: fn(&T, &CycleState, &Pod, &str) -> Status = T::bind, if Bind, Bind;
    /// PostBind.
    post_bind: fn(&T, &CycleState, &Pod, &str) = T::post_bind, if PostBind, PostBind;
    /// PlacementScore.
    placement_score: fn(&T, &CycleState, &PodGroup, &PodGroupAssignments) -> Result<i64, Status> =
        T::score_placement, if PlacementScore, PlacementScore;
    /// NormalizePlacementScore.
    normalize_placement_score: fn(&T, &CycleState, &PodGroup, &mut [i64]) -> Status =
        T::normalize_placement_score, if NormalizePlacementScore, NormalizePlacementScore;
    /// PlacementFeasible.
    placement_feasible: fn(&T, &CycleState, &PodGroup, &PlacementProgress) -> Status =
        T::placement_feasible, if PlacementFeasible, PlacementFeasible;
    /// PlacementGenerate.
    placement_generate: fn(&T, &CycleState, &PodGroup, &Placement, &[&NodeInfo]) -> Result<Vec<Placement>, Status> =
        T::generate_placements, if PlacementGenerate, PlacementGenerate;
    /// PodGroupPostFilter.
    pod_group_post_filter: fn(&T, &CycleState, &PodGroup, &[&NodeInfo]) -> PodGroupPostFilterResult =
        T::pod_group_post_filter, if PodGroupPostFilter, PodGroupPostFilter;
    /// SignPod.
    sign_pod: fn(&T, &Pod) -> Result<Vec<SignFragment>, Status> = T::sign_pod, if Sign, SignPod;
    /// SelectVictimsOnNode.
    select_victims_on_node: fn(&T, &CycleState, &Pod, &NodeInfo, &dyn DryRun) -> Result<NodeVictims, Status> =
        T::select_victims_on_node, if SelectVictims, SelectVictimsOnNode;
}

/// Implemented by [`plugin_vtable!`](crate::plugin_vtable): the table of a plugin type.
pub trait Registered: Plugin {
    /// The table of extension points this type implements.
    fn vtable() -> VTable<Self>;
}

/// Implements [`Registered`] for a plugin type, listing the extension points it
/// implements: `plugin_vtable!(Fit: pre_filter, filter, score);`. Names:
/// `queueing_hint`, `pre_enqueue`, `queue_sort`, `pre_filter`, `pre_filter_extensions`,
/// `filter`, `post_filter`, `pre_score`, `score`, `normalize_score`, `reserve`, `permit`,
/// `pre_bind`, `bind`, `post_bind`, `placement_score`, `normalize_placement_score`,
/// `placement_feasible`, `placement_generate`, `pod_group_post_filter`, `sign_pod`,
/// `select_victims_on_node`.
#[macro_export]
macro_rules! plugin_vtable {
    ($t:ty : $($ep:ident),* $(,)?) => {
        impl $crate::Registered for $t {
            fn vtable() -> $crate::VTable<Self> {
                $crate::VTable::<Self>::default() $( .$ep() )*
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store that counts its reads.
    #[derive(Default)]
    struct Counting(MemoryState, std::cell::Cell<u32>);

    impl StateStore for Counting {
        fn read(&self, key: &str) -> Option<Vec<u8>> {
            self.1.set(self.1.get() + 1);
            self.0.read(key)
        }
        fn write(&self, key: &str, value: &[u8]) {
            self.0.write(key, value)
        }
        fn delete(&self, key: &str) {
            self.0.delete(key)
        }
    }

    #[test]
    fn get_decodes_once_per_call_and_sees_writes() {
        let store = Counting::default();
        let state = CycleState::new(&store);
        state.write("k", &vec![1i64, 2]);
        let a = state.get::<Vec<i64>>("k").unwrap();
        let b = state.get::<Vec<i64>>("k").unwrap();
        assert!(
            Rc::ptr_eq(&a, &b),
            "the second get shares the first's value"
        );
        assert_eq!(store.1.get(), 1, "one read from the store");
        // Another type of the same bytes decodes again rather than answering the
        // value decoded as the first type.
        assert_eq!(state.read::<Vec<i64>>("k"), Some(vec![1, 2]));
        assert_eq!(state.get::<String>("missing"), None);
        state.write("k", &vec![3i64]);
        assert_eq!(*state.get::<Vec<i64>>("k").unwrap(), [3]);
        state.delete("k");
        assert_eq!(state.get::<Vec<i64>>("k"), None);
        // A new call (a new CycleState over the same store) reads afresh.
        state.write("k", &vec![4i64]);
        let next = CycleState::new(&store);
        assert_eq!(*next.get::<Vec<i64>>("k").unwrap(), [4]);
    }

    #[test]
    fn typed_keys_decode_once_per_call_and_see_writes() {
        static K: StateKey<Vec<i64>> = StateKey::new("k");
        let store = Counting::default();
        let state = CycleState::new(&store);
        assert_eq!(state.value(&K), None, "absent");
        state.set(&K, &vec![1, 2]);
        let a = state.value(&K).unwrap();
        let b = state.value(&K).unwrap();
        assert!(
            Rc::ptr_eq(&a, &b),
            "the second read shares the first's value"
        );
        assert_eq!(*a, [1, 2]);
        // The same name read by string sees what the typed key wrote, and a write by
        // string is seen through the typed key.
        assert_eq!(state.read::<Vec<i64>>("k"), Some(vec![1, 2]));
        state.write("k", &vec![3i64]);
        assert_eq!(*state.value(&K).unwrap(), [3]);
        state.delete("k");
        assert_eq!(state.value(&K), None);
        // A second key with the same name and another type decodes on its own.
        static TEXT: StateKey<String> = StateKey::new("t");
        static BYTES: StateKey<Vec<u8>> = StateKey::new("t");
        state.set(&TEXT, &"ab".to_owned());
        assert_eq!(
            state.value(&TEXT).as_deref().map(String::as_str),
            Some("ab")
        );
        assert_eq!(state.value(&BYTES).as_deref(), Some(&b"ab".to_vec()));
        // A new call reads afresh.
        state.set(&K, &vec![4]);
        let next = CycleState::new(&store);
        assert_eq!(*next.value(&K).unwrap(), [4]);
    }
}
