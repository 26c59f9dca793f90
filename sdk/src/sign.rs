//! SignPod: a pod's signature, for opportunistic batching (kube-scheduler's
//! `SignPlugin`, KEP-5598).
//!
//! A plugin that implements [`Sign`] names the parts of a pod its PreFilter, Filter,
//! PreScore and Score read, as [`SignFragment`]s. The host joins the fragments of every
//! such plugin of a profile (and the pod's scheduler name) into the pod's signature:
//! two pods with the same signature must get the same verdicts and scores on the same
//! nodes, so the host may place the second from the first one's cycle. A plugin whose
//! verdicts depend on more than the pod and the node it judges (other pods' placement,
//! as topology spread) answers Unschedulable for such a pod: it cannot be signed, and
//! its cycle runs in full.
//!
//! The signers below are the fragments the built-in plugins share (several plugins
//! read the same part of a pod; equal keys carry equal values, so the host keeps one).

use crate::plugin::Plugin;
use crate::types::{Pod, Status};
use serde::{Deserialize, Serialize};

/// One part of a pod's signature: what was read (`key`) and its value in a canonical
/// text form (equal values give equal text).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SignFragment {
    /// What was read, e.g. [`TOLERATIONS`].
    pub key: String,
    /// Its value.
    pub value: String,
}

impl SignFragment {
    /// A fragment whose value is `value`'s JSON form. Serde writes a struct's fields in
    /// declaration order and a `BTreeMap` in key order, so equal values encode alike;
    /// a set kept in a `Vec` must be sorted first.
    pub fn json(key: &str, value: &impl Serialize) -> SignFragment {
        SignFragment {
            key: key.to_owned(),
            // Serializing the SDK's plain data cannot fail: no maps with non-string
            // keys, no custom serializers that error.
            value: serde_json::to_string(value).unwrap_or_default(),
        }
    }
}

/// SignPod: the parts of a pod this plugin's filtering and scoring read.
pub trait Sign: Plugin {
    /// The pod's fragments, or Unschedulable when this plugin cannot sign the pod
    /// (which turns batching off for it); Error on failure.
    fn sign_pod(&self, pod: &Pod) -> Result<Vec<SignFragment>, Status>;
}

/// The answer of a plugin that cannot sign `pod`: Unschedulable, with why.
pub fn unsignable(why: impl Into<String>) -> Result<Vec<SignFragment>, Status> {
    Err(Status::unschedulable(why))
}

/// Key: the pod's scheduler name (the host adds it to every signature).
pub const SCHEDULER_NAME: &str = "spec.schedulerName";
/// Key: the requests NodeResourcesFit and BalancedAllocation count.
pub const RESOURCES: &str = "spec.containers[*].resources+overhead";
/// Key: `spec.tolerations`.
pub const TOLERATIONS: &str = "spec.tolerations";
/// Key: `spec.nodeSelector` and `spec.affinity.nodeAffinity`.
pub const NODE_AFFINITY: &str = "spec.nodeSelector+affinity.nodeAffinity";
/// Key: `spec.nodeName`.
pub const NODE_NAME: &str = "spec.nodeName";
/// Key: the host ports the containers ask for.
pub const HOST_PORTS: &str = "spec.containers[*].ports[*].hostPort";
/// Key: `spec.volumes`.
pub const VOLUMES: &str = "spec.volumes";
/// Key: the containers' images.
pub const IMAGES: &str = "spec.containers[*].image";
/// Key: the namespace and labels other pods' affinity terms select the pod by.
pub const LABELS: &str = "metadata.namespace+labels";
/// Key: the node features the pod needs (NodeDeclaredFeatures).
pub const FEATURES: &str = "requiredNodeFeatures";

/// The requests NodeResourcesFit and BalancedAllocation read: what the pod asks
/// for (containers, init containers and sidecars, overhead, pod-level resources) and
/// the same with upstream's defaults for missing CPU and memory (which scoring uses).
pub fn resources(pod: &Pod) -> SignFragment {
    SignFragment::json(RESOURCES, &(pod.requests(), pod.non_zero_requests()))
}

/// The pod's tolerations, in a canonical order.
pub fn tolerations(pod: &Pod) -> SignFragment {
    let mut t: Vec<String> = pod
        .tolerations
        .iter()
        .map(|t| serde_json::to_string(t).unwrap_or_default())
        .collect();
    t.sort_unstable();
    SignFragment::json(TOLERATIONS, &t)
}

/// The pod's node selector and node affinity.
pub fn node_affinity(pod: &Pod) -> SignFragment {
    SignFragment::json(
        NODE_AFFINITY,
        &(&pod.node_selector, &pod.affinity.node_affinity),
    )
}

/// The node the pod names, if any.
pub fn node_name(pod: &Pod) -> SignFragment {
    SignFragment::json(NODE_NAME, &pod.node_name)
}

/// The host ports the pod asks for, as a sorted set.
pub fn host_ports(pod: &Pod) -> SignFragment {
    let mut ports: Vec<_> = pod.host_ports().collect();
    ports.sort_unstable();
    ports.dedup();
    SignFragment::json(HOST_PORTS, &ports)
}

/// The pod's volumes, as scheduling reads them.
pub fn volumes(pod: &Pod) -> SignFragment {
    let mut v: Vec<String> = pod
        .volumes
        .iter()
        .map(|v| serde_json::to_string(v).unwrap_or_default())
        .collect();
    v.sort_unstable();
    SignFragment::json(VOLUMES, &v)
}

/// The images of the pod's containers (as ImageLocality reads them).
pub fn images(pod: &Pod) -> SignFragment {
    let mut i: Vec<&str> = pod.containers.iter().map(|c| c.image.as_str()).collect();
    i.sort_unstable();
    SignFragment::json(IMAGES, &i)
}

/// The namespace and labels of the pod.
pub fn labels(pod: &Pod) -> SignFragment {
    SignFragment::json(LABELS, &(&pod.namespace, &pod.labels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Toleration, TolerationOperator};

    fn toleration(key: &str) -> Toleration {
        Toleration {
            key: key.into(),
            operator: TolerationOperator::Exists,
            value: String::new(),
            effect: None,
            toleration_seconds: None,
        }
    }

    #[test]
    fn sets_sign_alike_in_any_order() {
        let a = Pod {
            tolerations: vec![toleration("a"), toleration("b")],
            ..Pod::default()
        };
        let b = Pod {
            tolerations: vec![toleration("b"), toleration("a")],
            ..Pod::default()
        };
        assert_eq!(tolerations(&a), tolerations(&b));
        let c = Pod {
            tolerations: vec![toleration("a")],
            ..Pod::default()
        };
        assert_ne!(tolerations(&a), tolerations(&c));
    }

    #[test]
    fn requests_tell_pods_apart() {
        let mut a = Pod::default();
        a.containers.push(crate::Container::default());
        let mut b = a.clone();
        assert_eq!(resources(&a), resources(&b));
        b.containers[0].requests.insert(crate::CPU.into(), 500);
        assert_ne!(resources(&a), resources(&b));
    }
}
