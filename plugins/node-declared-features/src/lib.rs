//! NodeDeclaredFeatures: as upstream's `nodedeclaredfeatures` plugin (GA in 1.37),
//! keeps a pod off the nodes whose kubelet does not declare, in
//! `status.declaredFeatures`, every feature the pod needs.
//!
//! PreFilter infers from the pod's spec which of the registry's features
//! ([`features::all`]) scheduling it needs, and answers Skip when none; Filter
//! rejects a node that lacks one, UnschedulableAndUnresolvable, since evicting pods
//! changes nothing a kubelet declares. A node added, a node whose declared features
//! change, or the pod updated so that it needs other features may let it in.
//!
//! The plugin takes no args.
//!
//! SignPod signs the features inferred, in name order: they are all PreFilter and
//! Filter go by.
//!
//! What Berth cannot do yet: upstream also skips a pod whose resize is deferred (behind
//! `InPlacePodVerticalScalingSchedulerPreemption`), which the record cannot tell
//! either.

pub mod features;

use berth_sdk::events::node_change;
use berth_sdk::{
    ActionType, ClusterEvent, CycleState, EnqueueExtensions, EventRegistration, EventResource,
    Filter, NodeInfo, Object, Plugin, Pod, PreFilter, PreFilterResult, QueueingHint, Sign,
    SignFragment, StateKey, Status, sign,
};
use features::{Feature, PodInfo, SpecFacts, Version};

/// The CycleState key of the features the pod needs, written by PreFilter
/// (upstream's key).
pub const PRE_FILTER_STATE_KEY: &str = "PreFilterNodeDeclaredFeatures";
/// [`PRE_FILTER_STATE_KEY`] with its value: the names of the features the pod needs.
static PRE_FILTER_STATE: StateKey<Vec<String>> = StateKey::new(PRE_FILTER_STATE_KEY);
/// The reason upstream gives when a node lacks a feature the pod needs.
pub const ERR_REASON_UNSATISFIED_REQUIREMENTS: &str =
    "node(s) didn't match Pod's required features";

/// The plugin: a registry of features and the version they are inferred for.
pub struct NodeDeclaredFeatures {
    registry: Vec<Feature>,
    version: Version,
}

impl Plugin for NodeDeclaredFeatures {
    const NAME: &'static str = "NodeDeclaredFeatures";
    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(NodeDeclaredFeatures::with_registry(
            features::all(),
            features::SCHEDULER_VERSION,
        ))
    }

    /// Both with the hint:
    /// - Node Add, and every node update: upstream registers Add and
    ///   UpdateNodeDeclaredFeature; Berth's queue has no action for a change of
    ///   `status.declaredFeatures` (it reports one alone as UpdateOther, one that
    ///   comes with a label or taint change as that), so every update is asked and
    ///   the hint tells a change of the declared features apart.
    /// - UnscheduledPod, every update (upstream's TargetPod Update): the pod itself
    ///   changed, and may need other features now.
    fn events() -> Option<Vec<EventRegistration>> {
        Some(vec![
            EventRegistration::with_hint(EventResource::Node, ActionType::ADD | ActionType::UPDATE),
            EventRegistration::with_hint(EventResource::UnscheduledPod, ActionType::UPDATE),
        ])
    }
}

impl NodeDeclaredFeatures {
    /// The plugin with another registry and version (upstream's tests build it so).
    pub fn with_registry(registry: Vec<Feature>, version: Version) -> Self {
        NodeDeclaredFeatures { registry, version }
    }

    /// The names of the features scheduling `pod` needs, in the registry's order.
    pub fn required(&self, pod: &Pod) -> Vec<String> {
        let spec = SpecFacts::of(pod);
        features::required(&self.registry, &PodInfo { pod, spec: &spec }, self.version)
    }

    /// Upstream's `isSchedulableAfterNodeChange`: Queue for a node added, or a node
    /// whose declared features changed (as lists: a reordering counts, as upstream
    /// compares them); QueueSkip for any other update.
    pub fn is_schedulable_after_node_change(
        &self,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let (original, modified) = node_change(old, new)?;
        Ok(match original {
            Some(o) if o.declared_features == modified.declared_features => QueueingHint::QueueSkip,
            _ => QueueingHint::Queue,
        })
    }

    /// Upstream's `isSchedulableAfterTargetPodUpdate`: Queue when the pod's update
    /// changed the features it needs, QueueSkip when it did not (or the update is
    /// another pod's).
    pub fn is_schedulable_after_pod_update(
        &self,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        let as_pod = |o: Option<&Object>, which: &str| match o {
            Some(Object::Pod(p)) => Ok(p.clone()),
            Some(other) => Err(format!("expected a pod, got {}", other.describe())),
            None => Err(format!("the event has no {which} pod")),
        };
        let (original, modified) = (as_pod(old, "old")?, as_pod(new, "new")?);
        if modified.uid != pod.uid {
            return Ok(QueueingHint::QueueSkip);
        }
        Ok(if self.required(&original) == self.required(&modified) {
            QueueingHint::QueueSkip
        } else {
            QueueingHint::Queue
        })
    }
}

impl PreFilter for NodeDeclaredFeatures {
    fn pre_filter(&self, state: &CycleState, pod: &Pod, _nodes: &[&NodeInfo]) -> PreFilterResult {
        let required = self.required(pod);
        // A pod that needs no feature fits every node: Filter need not run.
        if required.is_empty() {
            return Status::skip().into();
        }
        state.set(&PRE_FILTER_STATE, &required);
        Status::success().into()
    }
}

impl Filter for NodeDeclaredFeatures {
    fn filter(&self, state: &CycleState, _pod: &Pod, node: &NodeInfo) -> Status {
        // As upstream, Filter relies on PreFilter's state rather than inferring again.
        let Some(required) = state.value(&PRE_FILTER_STATE) else {
            return Status::error(format!(
                "error reading {PRE_FILTER_STATE_KEY:?} from cycle-state: not found"
            ));
        };
        if declares_all(node, &required) {
            Status::success()
        } else {
            Status::unresolvable(ERR_REASON_UNSATISFIED_REQUIREMENTS)
        }
    }
}

/// Whether the node declares every one of `required`. (Upstream maps the node's
/// list, which the API keeps sorted and unique, onto its registry; a lookup by name
/// answers the same for such a list, and for an unsorted one too.)
pub fn declares_all(node: &NodeInfo, required: &[String]) -> bool {
    let declared = &node.node.declared_features;
    required.iter().all(|r| declared.contains(r))
}

impl EnqueueExtensions for NodeDeclaredFeatures {
    fn queueing_hint(
        &self,
        event: &ClusterEvent,
        pod: &Pod,
        old: Option<&Object>,
        new: Option<&Object>,
    ) -> Result<QueueingHint, String> {
        match event.resource {
            EventResource::Node => self.is_schedulable_after_node_change(old, new),
            EventResource::UnscheduledPod => self.is_schedulable_after_pod_update(pod, old, new),
            // Not registered: requeue rather than guess.
            _ => Ok(QueueingHint::Queue),
        }
    }
}

impl Sign for NodeDeclaredFeatures {
    /// The features the pod needs, as PreFilter infers them (from its spec, at the
    /// instance's version), sorted by name: Filter asks only whether the node
    /// declares each, so their order does not matter.
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status> {
        let mut features = self.required(pod);
        features.sort_unstable();
        features.dedup();
        Ok(vec![SignFragment::json(sign::FEATURES, &features)])
    }
}

berth_sdk::export_plugin!(
    NodeDeclaredFeatures: queueing_hint,
    pre_filter,
    filter,
    sign_pod
);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{Code, MemoryState, Node};

    const FEATURE_A: &str = "FeatureA";
    const FEATURE_B: &str = "FeatureB";
    const FEATURE_C: &str = "FeatureC";

    /// A feature whose inference answers `infer` whatever the pod (upstream's mock).
    fn mock(name: &'static str, infer: bool, max: Option<Version>) -> Feature {
        Feature {
            name,
            max_version: max,
            infer_for_scheduling: if infer { |_| true } else { |_| false },
        }
    }

    fn v(minor: u32) -> Version {
        Version::new(1, minor, 0)
    }

    fn node(features: &[&str]) -> NodeInfo {
        NodeInfo::new(Node {
            name: "node-1".into(),
            declared_features: features.iter().map(|f| f.to_string()).collect(),
            ..Node::default()
        })
    }

    fn pre_filter(registry: Vec<Feature>, version: Version) -> (Code, Option<Vec<String>>) {
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let plugin = NodeDeclaredFeatures::with_registry(registry, version);
        let result = plugin.pre_filter(&state, &Pod::default(), &[]);
        assert_eq!(result.node_names, None, "PreFilter never narrows the nodes");
        (
            result.status.code,
            state.value(&PRE_FILTER_STATE).map(|v| (*v).clone()),
        )
    }

    #[test]
    fn signs_the_features_the_pod_needs() {
        let plugin = NodeDeclaredFeatures::new(berth_sdk::serde_json::Value::Null).unwrap();
        let sign = |p: &Pod| plugin.sign_pod(p).unwrap();
        let host_network = |host_users: Option<bool>| Pod {
            host_network: true,
            host_users,
            ..Pod::default()
        };
        let needs = host_network(Some(false));
        assert_ne!(sign(&needs), sign(&Pod::default()));
        assert_eq!(
            sign(&needs),
            [SignFragment::json(
                sign::FEATURES,
                &["UserNamespacesHostNetworkSupport"]
            )]
        );
        // The host network alone needs nothing: signed as a pod without it.
        assert_eq!(sign(&host_network(None)), sign(&Pod::default()));
        let elsewhere = Pod {
            name: "other".into(),
            labels: [("app".to_owned(), "x".to_owned())].into(),
            ..host_network(Some(false))
        };
        assert_eq!(sign(&needs), sign(&elsewhere));
    }

    #[test]
    fn signs_features_in_name_order_whatever_the_registry_order() {
        let sign = |registry| {
            NodeDeclaredFeatures::with_registry(registry, v(35))
                .sign_pod(&Pod::default())
                .unwrap()
        };
        let ab = sign(vec![
            mock(FEATURE_A, true, None),
            mock(FEATURE_B, true, None),
        ]);
        let ba = sign(vec![
            mock(FEATURE_B, true, None),
            mock(FEATURE_A, true, None),
        ]);
        assert_eq!(ab, ba);
        let a = sign(vec![
            mock(FEATURE_A, true, None),
            mock(FEATURE_B, false, None),
        ]);
        assert_ne!(ab, a);
    }

    // Upstream's TestPreFilter (its "plugin disabled" case has no counterpart: the
    // plugin is GA, Berth has no gate for it).
    #[test]
    fn pre_filter_records_the_features_the_pod_needs() {
        let (code, state) = pre_filter(
            vec![
                mock("TestFeature1", true, None),
                mock("TestFeature2", false, None),
            ],
            v(35),
        );
        assert_eq!(code, Code::Success);
        assert_eq!(state, Some(vec!["TestFeature1".to_owned()]));
    }

    #[test]
    fn pre_filter_records_several_features() {
        let (code, state) = pre_filter(
            vec![
                mock("TestFeature1", true, Some(v(38))),
                mock("TestFeature2", true, Some(v(38))),
            ],
            v(35),
        );
        assert_eq!(code, Code::Success);
        assert_eq!(
            state,
            Some(vec!["TestFeature1".to_owned(), "TestFeature2".to_owned()])
        );
    }

    #[test]
    fn pre_filter_skips_a_pod_that_needs_nothing() {
        let (code, state) = pre_filter(
            vec![
                mock("TestFeature1", false, None),
                mock("TestFeature2", false, None),
            ],
            v(35),
        );
        assert_eq!(code, Code::Skip);
        assert_eq!(state, None);
    }

    #[test]
    fn pre_filter_skips_a_feature_past_its_max_version() {
        let (code, state) = pre_filter(
            vec![
                mock("TestFeature1", true, Some(v(33))),
                mock("TestFeature2", false, None),
            ],
            v(34),
        );
        assert_eq!(code, Code::Skip);
        assert_eq!(state, None);
    }

    #[test]
    fn the_built_in_registry_skips_every_pod_berth_can_describe() {
        let plugin = NodeDeclaredFeatures::new(berth_sdk::serde_json::Value::Null).unwrap();
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        let pod = Pod {
            containers: vec![Default::default()],
            ..Pod::default()
        };
        assert_eq!(plugin.pre_filter(&state, &pod, &[]).status, Status::skip());
    }

    fn filter(required: Option<&[&str]>, node: &NodeInfo) -> Status {
        let store = MemoryState::default();
        let state = CycleState::new(&store);
        if let Some(r) = required {
            let r: Vec<String> = r.iter().map(|f| f.to_string()).collect();
            state.set(&PRE_FILTER_STATE, &r);
        }
        let plugin = NodeDeclaredFeatures::with_registry(
            vec![
                mock(FEATURE_A, false, None),
                mock(FEATURE_B, false, None),
                mock(FEATURE_C, false, None),
            ],
            v(35),
        );
        plugin.filter(&state, &Pod::default(), node)
    }

    // Upstream's TestFilter.
    #[test]
    fn a_node_with_the_required_features_passes() {
        let n = node(&[FEATURE_A, FEATURE_B]);
        assert_eq!(filter(Some(&[FEATURE_A]), &n), Status::success());
        let n = node(&[FEATURE_A, FEATURE_B, FEATURE_C]);
        assert_eq!(filter(Some(&[FEATURE_A, FEATURE_C]), &n), Status::success());
    }

    #[test]
    fn a_node_lacking_a_required_feature_is_unresolvable() {
        let want = Status::unresolvable(ERR_REASON_UNSATISFIED_REQUIREMENTS);
        // Another feature only.
        assert_eq!(filter(Some(&[FEATURE_A]), &node(&[FEATURE_B])), want);
        // No declared features at all.
        assert_eq!(filter(Some(&[FEATURE_A]), &node(&[])), want);
        // Some but not all.
        assert_eq!(
            filter(Some(&[FEATURE_A, FEATURE_B]), &node(&[FEATURE_A])),
            want
        );
        assert_eq!(want.code, Code::UnschedulableAndUnresolvable);
        assert_eq!(
            want.reasons,
            ["node(s) didn't match Pod's required features"]
        );
    }

    #[test]
    fn filter_without_pre_filter_state_is_an_error() {
        let got = filter(None, &node(&[]));
        assert_eq!(got.code, Code::Error);
        assert_eq!(
            got.reasons,
            ["error reading \"PreFilterNodeDeclaredFeatures\" from cycle-state: not found"]
        );
    }

    #[test]
    fn declared_features_match_by_name_in_any_order() {
        let required = vec![FEATURE_A.to_owned(), FEATURE_C.to_owned()];
        assert!(declares_all(
            &node(&[FEATURE_C, FEATURE_B, FEATURE_A]),
            &required
        ));
        assert!(!declares_all(&node(&[FEATURE_C, FEATURE_B]), &required));
    }

    fn plugin() -> NodeDeclaredFeatures {
        NodeDeclaredFeatures::with_registry(Vec::new(), v(35))
    }

    fn node_object(features: &[&str]) -> Object {
        Object::Node(node(features).node)
    }

    fn node_hint(old: Option<&Object>, new: &Object) -> Result<QueueingHint, String> {
        let actions = if old.is_some() {
            ActionType::UPDATE_OTHER
        } else {
            ActionType::ADD
        };
        let event = ClusterEvent::new(EventResource::Node, actions);
        plugin().queueing_hint(&event, &Pod::default(), old, Some(new))
    }

    // Upstream's TestEnqueueExtensionsNodeUpdate.
    #[test]
    fn a_node_added_with_a_feature_queues() {
        assert_eq!(
            node_hint(None, &node_object(&[FEATURE_A])),
            Ok(QueueingHint::Queue)
        );
    }

    #[test]
    fn a_node_whose_features_change_queues() {
        assert_eq!(
            node_hint(Some(&node_object(&[])), &node_object(&[FEATURE_A])),
            Ok(QueueingHint::Queue)
        );
        // Losing one is a change too, as upstream compares the lists.
        assert_eq!(
            node_hint(Some(&node_object(&[FEATURE_A])), &node_object(&[])),
            Ok(QueueingHint::Queue)
        );
    }

    #[test]
    fn a_node_whose_features_stay_skips() {
        assert_eq!(
            node_hint(Some(&node_object(&[FEATURE_A])), &node_object(&[FEATURE_A])),
            Ok(QueueingHint::QueueSkip)
        );
        // A label change alone does not help.
        let mut labelled = node(&[FEATURE_A]).node;
        labelled.labels.insert("zone".into(), "a".into());
        assert_eq!(
            node_hint(Some(&node_object(&[FEATURE_A])), &Object::Node(labelled)),
            Ok(QueueingHint::QueueSkip)
        );
    }

    #[test]
    fn a_node_hint_about_something_else_is_an_error() {
        let not_a_node = Object::Pod(Pod::default());
        assert!(node_hint(None, &not_a_node).is_err());
        assert!(node_hint(Some(&not_a_node), &node_object(&[])).is_err());
    }

    /// A registry whose one feature is needed by pods with pod-level resources: the
    /// pod update tests change that, as upstream's change a label its mock reads.
    fn by_resources() -> NodeDeclaredFeatures {
        NodeDeclaredFeatures::with_registry(
            vec![Feature {
                name: "TestFeature",
                max_version: None,
                infer_for_scheduling: |info| info.pod.resources.is_some(),
            }],
            v(35),
        )
    }

    fn target(needs: bool) -> Pod {
        Pod {
            name: "test-pod".into(),
            uid: "123".into(),
            resources: needs.then(Default::default),
            ..Pod::default()
        }
    }

    fn pod_hint(
        plugin: &NodeDeclaredFeatures,
        pending: &Pod,
        old: &Pod,
        new: &Pod,
    ) -> Result<QueueingHint, String> {
        let event = ClusterEvent::new(EventResource::UnscheduledPod, ActionType::UPDATE);
        let (old, new) = (Object::Pod(old.clone()), Object::Pod(new.clone()));
        plugin.queueing_hint(&event, pending, Some(&old), Some(&new))
    }

    // Upstream's TestIsSchedulableAfterTargetPodUpdate (its nil-version case has no
    // counterpart: a Rust version is never missing).
    #[test]
    fn a_pod_update_that_changes_its_requirements_queues() {
        let p = by_resources();
        let pending = target(false);
        assert_eq!(
            pod_hint(&p, &pending, &target(false), &target(true)),
            Ok(QueueingHint::Queue),
            "adds a requirement"
        );
        assert_eq!(
            pod_hint(&p, &pending, &target(true), &target(false)),
            Ok(QueueingHint::Queue),
            "removes a requirement"
        );
    }

    #[test]
    fn a_pod_update_that_keeps_its_requirements_skips() {
        let p = by_resources();
        let pending = target(false);
        let mut relabelled = target(false);
        relabelled.labels.insert("foo".into(), "bar".into());
        assert_eq!(
            pod_hint(&p, &pending, &target(false), &relabelled),
            Ok(QueueingHint::QueueSkip)
        );
    }

    #[test]
    fn another_pod_s_update_skips() {
        let p = by_resources();
        let mut other = target(true);
        other.uid = "456".into();
        let mut other_before = target(false);
        other_before.uid = "456".into();
        assert_eq!(
            pod_hint(&p, &target(false), &other_before, &other),
            Ok(QueueingHint::QueueSkip)
        );
    }

    #[test]
    fn a_pod_hint_about_something_else_is_an_error() {
        let event = ClusterEvent::new(EventResource::UnscheduledPod, ActionType::UPDATE);
        let n = node_object(&[]);
        let p = Object::Pod(target(false));
        let pending = target(false);
        assert!(
            by_resources()
                .queueing_hint(&event, &pending, Some(&n), Some(&p))
                .is_err()
        );
        assert!(
            by_resources()
                .queueing_hint(&event, &pending, Some(&p), None)
                .is_err()
        );
    }

    // Upstream's TestEventsToRegister: two registrations when enabled.
    #[test]
    fn registrations() {
        let events = NodeDeclaredFeatures::events().unwrap();
        assert_eq!(events.len(), 2);
        assert!(events.iter().all(|r| r.has_hint));
        let covered = |resource, actions| {
            berth_sdk::events::is_registered(&events, &ClusterEvent::new(resource, actions))
        };
        assert!(covered(EventResource::Node, ActionType::ADD));
        // A change of the declared features alone reaches the hint as UpdateOther.
        assert!(covered(EventResource::Node, ActionType::UPDATE_OTHER));
        assert!(covered(EventResource::Node, ActionType::UPDATE_NODE_LABEL));
        assert!(!covered(EventResource::Node, ActionType::DELETE));
        assert!(covered(
            EventResource::UnscheduledPod,
            ActionType::UPDATE_POD_LABEL
        ));
        assert!(!covered(EventResource::UnscheduledPod, ActionType::ADD));
        assert!(!covered(EventResource::AssignedPod, ActionType::ALL));
    }
}
