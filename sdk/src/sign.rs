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
/// Key: the host ports the containers and sidecars hold.
pub const HOST_PORTS: &str = "spec.containers[*].ports[*].hostPort";
/// Key: `spec.volumes` (the sources, and the namespace their claims are in).
pub const VOLUMES: &str = "spec.volumes";
/// Key: the images of the containers and init containers.
pub const IMAGES: &str = "spec.initContainers+containers[*].image";
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

/// The host ports the pod holds while it runs ([`Pod::running_host_ports`]: its
/// containers' and sidecars', as NodePorts checks them), as a sorted set (whether a
/// port conflicts does not depend on the order or on repeats). A plain init
/// container's port is left out: it is given back before the pod runs, and two pods
/// that differ only there are judged alike.
pub fn host_ports(pod: &Pod) -> SignFragment {
    let mut ports: Vec<_> = pod.running_host_ports().collect();
    ports.sort_unstable();
    ports.dedup();
    SignFragment::json(HOST_PORTS, &ports)
}

/// The pod's volumes as the volume plugins read them (VolumeBinding, VolumeZone,
/// VolumeRestrictions, NodeVolumeLimits): each volume's source in the pod's order
/// (claims are looked at, and bound, in that order), and the pod's namespace when a
/// volume names a PersistentVolumeClaim (claims are looked up in it). A volume of a
/// kind scheduling does not check (emptyDir, configMap, secret, the projected
/// service account token with its generated name, ...) counts only as being there:
/// its name is read by no plugin, and keeping it would tell apart every pod of a
/// workload.
///
/// Unsignable when the pod has a generic ephemeral volume: its claim is named after
/// the pod (`<pod>-<volume>`) and must be owned by it, so no two pods read the same
/// claim.
pub fn volumes(pod: &Pod) -> Result<SignFragment, Status> {
    use crate::volumes::VolumeSource;
    if pod
        .volumes
        .iter()
        .any(|v| matches!(v.source, VolumeSource::Ephemeral))
    {
        return Err(Status::unschedulable(
            "pods with generic ephemeral volumes are not signable: their claims are the pod's own",
        ));
    }
    let sources: Vec<&VolumeSource> = pod.volumes.iter().map(|v| &v.source).collect();
    let claims = sources
        .iter()
        .any(|s| matches!(s, VolumeSource::PersistentVolumeClaim { .. }));
    let namespace = claims.then_some(pod.namespace.as_str());
    Ok(SignFragment::json(VOLUMES, &(namespace, sources)))
}

/// The images of the pod's containers, init containers included, as ImageLocality
/// reads them: sorted, with repeats (it sums a score per container and counts the
/// containers, so how many use an image matters, their order does not).
pub fn images(pod: &Pod) -> SignFragment {
    let mut i: Vec<&str> = pod
        .init_containers
        .iter()
        .chain(&pod.containers)
        .map(|c| c.image.as_str())
        .collect();
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

    fn port(port: i32) -> crate::HostPort {
        crate::HostPort {
            host_ip: String::new(),
            protocol: "TCP".into(),
            port,
        }
    }

    fn container(image: &str, ports: &[i32], restartable: bool) -> crate::Container {
        crate::Container {
            image: image.into(),
            ports: ports.iter().map(|&p| port(p)).collect(),
            restartable,
            ..crate::Container::default()
        }
    }

    #[test]
    fn host_ports_are_those_the_running_pod_holds() {
        let plain = Pod {
            init_containers: vec![container("", &[80], false)],
            ..Pod::default()
        };
        let sidecar = Pod {
            init_containers: vec![container("", &[80], true)],
            ..Pod::default()
        };
        let main = Pod {
            containers: vec![container("", &[80, 80], false)],
            ..Pod::default()
        };
        // A plain init container's port is free again once the pod runs: as none.
        assert_eq!(host_ports(&plain), host_ports(&Pod::default()));
        // A sidecar's is held, like a container's (repeats count once).
        assert_ne!(host_ports(&plain), host_ports(&sidecar));
        assert_eq!(host_ports(&sidecar), host_ports(&main));
        let other = Pod {
            containers: vec![container("", &[81], false)],
            ..Pod::default()
        };
        assert_ne!(host_ports(&main), host_ports(&other));
    }

    #[test]
    fn images_count_init_containers_and_repeats() {
        let pod = |init: &[&str], main: &[&str]| Pod {
            init_containers: init.iter().map(|i| container(i, &[], false)).collect(),
            containers: main.iter().map(|i| container(i, &[], false)).collect(),
            ..Pod::default()
        };
        assert_eq!(images(&pod(&["a"], &["b"])), images(&pod(&["b"], &["a"])));
        assert_eq!(
            images(&pod(&[], &["b", "a"])),
            images(&pod(&[], &["a", "b"]))
        );
        assert_ne!(images(&pod(&["a"], &["b"])), images(&pod(&[], &["b"])));
        assert_ne!(images(&pod(&[], &["a", "a"])), images(&pod(&[], &["a"])));
    }

    fn volume(name: &str, source: crate::VolumeSource) -> crate::Volume {
        crate::Volume {
            name: name.into(),
            source,
        }
    }

    fn claim(name: &str) -> crate::VolumeSource {
        crate::VolumeSource::PersistentVolumeClaim {
            claim_name: name.into(),
            read_only: false,
        }
    }

    #[test]
    fn volumes_sign_sources_in_order_and_the_namespace_of_claims() {
        use crate::VolumeSource;
        let pod = |namespace: &str, volumes: Vec<crate::Volume>| Pod {
            namespace: namespace.into(),
            volumes,
            ..Pod::default()
        };
        let sign = |p: &Pod| volumes(p).expect("signable");
        // Volumes scheduling does not check count as there, whatever their names.
        let token = |n: &str| volume(n, VolumeSource::Other);
        assert_eq!(
            sign(&pod("a", vec![token("kube-api-access-x1")])),
            sign(&pod("b", vec![token("kube-api-access-y2")]))
        );
        assert_ne!(sign(&pod("a", vec![token("t")])), sign(&pod("a", vec![])));
        // A claim is looked up in the pod's namespace.
        let data = |ns: &str| pod(ns, vec![volume("data", claim("c"))]);
        assert_eq!(sign(&data("a")), sign(&data("a")));
        assert_ne!(sign(&data("a")), sign(&data("b")));
        assert_ne!(
            sign(&data("a")),
            sign(&pod("a", vec![volume("data", claim("d"))]))
        );
        // Claims are bound in the pod's order.
        let two = |x: &str, y: &str| pod("a", vec![volume("x", claim(x)), volume("y", claim(y))]);
        assert_ne!(sign(&two("c", "d")), sign(&two("d", "c")));
        // A generic ephemeral volume's claim is the pod's own.
        let ephemeral = pod("a", vec![volume("scratch", VolumeSource::Ephemeral)]);
        assert_eq!(
            volumes(&ephemeral).unwrap_err().code,
            crate::Code::Unschedulable
        );
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
