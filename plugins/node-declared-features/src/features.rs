//! The declared features kube-scheduler 1.37 knows (k8s.io/component-helpers
//! `nodedeclaredfeatures`, its `features.AllFeatures`), and how each infers, from a
//! pod's spec, that scheduling the pod needs a node declaring it.
//!
//! A kubelet lists in `status.declaredFeatures` the features it has; a pod that needs
//! one may only go to a node that lists it. Most of 1.37's features matter only to
//! updates of a running pod (in-place resize), which the API server's admission
//! checks, never to scheduling. Three infer a scheduling requirement, each from spec
//! fields of Berth's pod record (see [`SpecFacts::of`]).

use berth_sdk::Pod;

/// A Kubernetes version, as `major.minor.patch`, compared field by field.
///
/// Upstream compares full semantic versions; a pre-release part only matters when
/// the three numbers are equal, and no 1.37 feature has a pre-release bound, so the
/// three numbers decide every comparison the registry makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// The major version.
    pub major: u32,
    /// The minor version.
    pub minor: u32,
    /// The patch version.
    pub patch: u32,
}

impl Version {
    /// `major.minor.patch`.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Version {
            major,
            minor,
            patch,
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The version whose requirements Berth infers: the kube-scheduler release whose
/// semantics it follows. Upstream takes the scheduler binary's own version.
pub const SCHEDULER_VERSION: Version = Version::new(1, 37, 0);

/// What a container of the pod's spec says that a feature's inference reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerFacts {
    /// The `action` of each of its `restartPolicyRules`.
    pub restart_rule_actions: Vec<String>,
    /// The `bindMountOptions` of each of its `volumeMounts` (empty when a mount
    /// sets none).
    pub bind_mount_options: Vec<Vec<String>>,
}

/// The parts of a pod's spec that 1.37's features infer a scheduling requirement
/// from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpecFacts {
    /// `spec.hostNetwork`.
    pub host_network: bool,
    /// `spec.hostUsers`; none when unset.
    pub host_users: Option<bool>,
    /// `spec.containers`.
    pub containers: Vec<ContainerFacts>,
    /// `spec.initContainers`.
    pub init_containers: Vec<ContainerFacts>,
    /// `spec.ephemeralContainers`.
    pub ephemeral_containers: Vec<ContainerFacts>,
}

impl SpecFacts {
    /// The facts of `pod`: the fields of its record the features' inference reads
    /// (WIT 0.9.0 carries them).
    pub fn of(pod: &Pod) -> SpecFacts {
        let facts = |containers: &[berth_sdk::Container]| {
            containers
                .iter()
                .map(|c| ContainerFacts {
                    restart_rule_actions: c.restart_policy_rule_actions.clone(),
                    bind_mount_options: c
                        .volume_mounts
                        .iter()
                        .map(|m| m.bind_mount_options.clone())
                        .collect(),
                })
                .collect()
        };
        SpecFacts {
            host_network: pod.host_network,
            host_users: pod.host_users,
            containers: facts(&pod.containers),
            init_containers: facts(&pod.init_containers),
            ephemeral_containers: facts(&pod.ephemeral_containers),
        }
    }
}

/// A pod as a feature's inference sees it: the record Berth carries and the spec
/// facts the features read (upstream's `PodInfo`, which wraps the pod's spec).
#[derive(Clone, Copy, Debug)]
pub struct PodInfo<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// The spec fields the features read.
    pub spec: &'a SpecFacts,
}

/// One declared feature.
#[derive(Clone, Copy, Debug)]
pub struct Feature {
    /// Its name, as kubelets declare it.
    pub name: &'static str,
    /// The last version for which the feature still decides where a pod may go
    /// (inclusive); none when it always does. Past it, every node supported by a
    /// scheduler that new has the feature, so it is no longer required.
    pub max_version: Option<Version>,
    /// Whether scheduling the pod needs a node declaring the feature.
    pub infer_for_scheduling: fn(&PodInfo) -> bool,
}

/// The action of a container restart rule that restarts the whole pod.
pub const RESTART_ALL_CONTAINERS: &str = "RestartAllContainers";

/// 1.37's registry, sorted by name (as upstream sorts it).
pub fn all() -> Vec<Feature> {
    let mut features = vec![
        Feature {
            name: "RestartAllContainersOnContainerExits",
            max_version: None,
            infer_for_scheduling: needs_restart_all_containers,
        },
        Feature {
            name: "InPlacePodLevelResourcesVerticalScaling",
            max_version: None,
            infer_for_scheduling: only_for_updates,
        },
        Feature {
            name: "ExtendWebSocketsToKubelet",
            max_version: None,
            infer_for_scheduling: never,
        },
        Feature {
            name: "InPlacePodVerticalScalingInitContainers",
            max_version: None,
            infer_for_scheduling: only_for_updates,
        },
        Feature {
            name: "InPlacePodVerticalScalingMemoryBackedVolumes",
            max_version: None,
            infer_for_scheduling: only_for_updates,
        },
        Feature {
            name: "UserNamespacesHostNetworkSupport",
            max_version: None,
            infer_for_scheduling: needs_user_namespaces_with_host_network,
        },
        Feature {
            name: "DRANodeAllocatableResources",
            max_version: None,
            infer_for_scheduling: never,
        },
        Feature {
            name: "VolumeBindMountOptions",
            max_version: None,
            infer_for_scheduling: needs_bind_mount_options,
        },
        Feature {
            name: "DRAOptionalNodeOperations",
            max_version: None,
            // A claim's allocation is not known at PreFilter; DynamicResources checks
            // the nodes for claims that need it.
            infer_for_scheduling: never,
        },
    ];
    features.sort_by_key(|f| f.name);
    features
}

/// The in-place resize features: they say whether a node can apply a resize of a
/// running pod, which admission checks; a pod being scheduled needs none of them.
fn only_for_updates(_: &PodInfo) -> bool {
    false
}

/// Features that matter neither to scheduling nor to updates of a pod's spec.
fn never(_: &PodInfo) -> bool {
    false
}

/// RestartAllContainersOnContainerExits: a container or init container has a
/// restart rule whose action restarts all containers. (Ephemeral containers take
/// no restart rules.)
pub fn needs_restart_all_containers(info: &PodInfo) -> bool {
    info.spec
        .containers
        .iter()
        .chain(&info.spec.init_containers)
        .flat_map(|c| &c.restart_rule_actions)
        .any(|a| a == RESTART_ALL_CONTAINERS)
}

/// UserNamespacesHostNetworkSupport: the pod uses the host's network and its own
/// user namespace (`hostUsers: false`).
pub fn needs_user_namespaces_with_host_network(info: &PodInfo) -> bool {
    info.spec.host_network && info.spec.host_users == Some(false)
}

/// VolumeBindMountOptions: a volume mount of any container, init container or
/// ephemeral container sets `bindMountOptions`.
pub fn needs_bind_mount_options(info: &PodInfo) -> bool {
    info.spec
        .containers
        .iter()
        .chain(&info.spec.init_containers)
        .chain(&info.spec.ephemeral_containers)
        .flat_map(|c| &c.bind_mount_options)
        .any(|options| !options.is_empty())
}

/// The names of the features of `registry` that scheduling the pod needs at
/// `version`, in the registry's order: those that infer so, unless `version` is
/// past the feature's `max_version` (upstream's `InferForPodScheduling`).
pub fn required(registry: &[Feature], info: &PodInfo, version: Version) -> Vec<String> {
    registry
        .iter()
        .filter(|f| f.max_version.is_none_or(|max| version <= max))
        .filter(|f| (f.infer_for_scheduling)(info))
        .map(|f| f.name.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(actions: &[&str], mounts: &[&[&str]]) -> ContainerFacts {
        ContainerFacts {
            restart_rule_actions: actions.iter().map(|a| a.to_string()).collect(),
            bind_mount_options: mounts
                .iter()
                .map(|m| m.iter().map(|o| o.to_string()).collect())
                .collect(),
        }
    }

    fn plain() -> ContainerFacts {
        container(&[], &[&[]])
    }

    fn infer(f: fn(&PodInfo) -> bool, spec: &SpecFacts) -> bool {
        f(&PodInfo {
            pod: &Pod::default(),
            spec,
        })
    }

    #[test]
    fn the_registry_is_1_37_s_sorted_by_name() {
        let names: Vec<&str> = all().iter().map(|f| f.name).collect();
        assert_eq!(
            names,
            [
                "DRANodeAllocatableResources",
                "DRAOptionalNodeOperations",
                "ExtendWebSocketsToKubelet",
                "InPlacePodLevelResourcesVerticalScaling",
                "InPlacePodVerticalScalingInitContainers",
                "InPlacePodVerticalScalingMemoryBackedVolumes",
                "RestartAllContainersOnContainerExits",
                "UserNamespacesHostNetworkSupport",
                "VolumeBindMountOptions",
            ]
        );
        // None of 1.37's features has an upper bound yet.
        assert!(all().iter().all(|f| f.max_version.is_none()));
    }

    // Upstream's restartallcontainers TestInferForScheduling.
    #[test]
    fn restart_all_containers_from_an_init_container_s_rule() {
        let spec = SpecFacts {
            init_containers: vec![container(&[RESTART_ALL_CONTAINERS], &[])],
            containers: vec![plain()],
            ..SpecFacts::default()
        };
        assert!(infer(needs_restart_all_containers, &spec));
    }

    #[test]
    fn restart_all_containers_from_a_container_s_rule() {
        let spec = SpecFacts {
            init_containers: vec![plain()],
            containers: vec![container(&[RESTART_ALL_CONTAINERS], &[])],
            ..SpecFacts::default()
        };
        assert!(infer(needs_restart_all_containers, &spec));
    }

    #[test]
    fn no_restart_rules_need_nothing() {
        let spec = SpecFacts {
            init_containers: vec![plain()],
            containers: vec![plain()],
            ..SpecFacts::default()
        };
        assert!(!infer(needs_restart_all_containers, &spec));
        // Another action (a container's own restart) does not restart the pod.
        let spec = SpecFacts {
            containers: vec![container(&["Restart"], &[])],
            ..SpecFacts::default()
        };
        assert!(!infer(needs_restart_all_containers, &spec));
        // Ephemeral containers have no restart rules upstream reads.
        let spec = SpecFacts {
            ephemeral_containers: vec![container(&[RESTART_ALL_CONTAINERS], &[])],
            ..SpecFacts::default()
        };
        assert!(!infer(needs_restart_all_containers, &spec));
    }

    // Upstream's usernamespaceshostnetwork TestInferForScheduling.
    #[test]
    fn user_namespaces_with_host_network() {
        for (host_network, host_users, want) in [
            (true, Some(false), true),
            (true, None, false),
            (true, Some(true), false),
            (false, Some(false), false),
        ] {
            let spec = SpecFacts {
                host_network,
                host_users,
                ..SpecFacts::default()
            };
            assert_eq!(
                infer(needs_user_namespaces_with_host_network, &spec),
                want,
                "hostNetwork {host_network}, hostUsers {host_users:?}"
            );
        }
    }

    // Upstream has no test of VolumeBindMountOptions' inference; these follow its
    // code: any mount of any kind of container with options.
    #[test]
    fn bind_mount_options_of_any_container() {
        let with = || container(&[], &[&[], &["rro"]]);
        for spec in [
            SpecFacts {
                containers: vec![with()],
                ..SpecFacts::default()
            },
            SpecFacts {
                containers: vec![plain()],
                init_containers: vec![with()],
                ..SpecFacts::default()
            },
            SpecFacts {
                containers: vec![plain()],
                ephemeral_containers: vec![with()],
                ..SpecFacts::default()
            },
        ] {
            assert!(infer(needs_bind_mount_options, &spec), "{spec:?}");
        }
        let spec = SpecFacts {
            containers: vec![plain(), container(&[], &[&[], &[]])],
            init_containers: vec![plain()],
            ..SpecFacts::default()
        };
        assert!(!infer(needs_bind_mount_options, &spec));
    }

    #[test]
    fn update_only_features_never_need_a_node_to_schedule() {
        let everything = SpecFacts {
            host_network: true,
            host_users: Some(false),
            containers: vec![container(&[RESTART_ALL_CONTAINERS], &[&["rro"]])],
            ..SpecFacts::default()
        };
        let info = PodInfo {
            pod: &Pod::default(),
            spec: &everything,
        };
        let got = required(&all(), &info, SCHEDULER_VERSION);
        assert_eq!(
            got,
            [
                "RestartAllContainersOnContainerExits",
                "UserNamespacesHostNetworkSupport",
                "VolumeBindMountOptions"
            ]
        );
    }

    fn mock(name: &'static str, max: Option<Version>) -> Feature {
        Feature {
            name,
            max_version: max,
            infer_for_scheduling: |info| info.pod.resources.is_some(),
        }
    }

    // Upstream's framework TestInferForPodScheduling.
    #[test]
    fn inference_stops_past_a_feature_s_max_version() {
        let with = Pod {
            resources: Some(Default::default()),
            ..Pod::default()
        };
        let without = Pod::default();
        let spec = SpecFacts::default();
        let info = |pod| PodInfo { pod, spec: &spec };
        let v = |minor| Version::new(1, minor, 0);

        let unbounded = [mock("PodLevelResources", None)];
        assert_eq!(
            required(&unbounded, &info(&with), v(30)),
            ["PodLevelResources"]
        );
        assert!(required(&unbounded, &info(&without), v(30)).is_empty());

        let bounded = [mock("PodLevelResources", Some(v(30)))];
        // Universally available past 1.30: not inferred.
        assert!(required(&bounded, &info(&with), v(31)).is_empty());
        assert!(required(&bounded, &info(&with), v(40)).is_empty());
        // Up to and including the bound it still is.
        assert_eq!(
            required(&bounded, &info(&with), v(30)),
            ["PodLevelResources"]
        );
        // A pre-release build (upstream's `0.0.0-alpha...`) is older than every bound.
        assert_eq!(
            required(&bounded, &info(&with), Version::new(0, 0, 0)),
            ["PodLevelResources"]
        );
    }

    #[test]
    fn the_facts_come_from_the_pod_record() {
        let pod = Pod {
            host_network: true,
            host_users: Some(false),
            containers: vec![
                berth_sdk::Container {
                    restart_policy_rule_actions: vec!["RestartAllContainers".into()],
                    ..Default::default()
                },
                Default::default(),
            ],
            init_containers: vec![berth_sdk::Container {
                volume_mounts: vec![
                    berth_sdk::VolumeMount {
                        name: "a".into(),
                        bind_mount_options: vec!["noexec".into()],
                    },
                    berth_sdk::VolumeMount {
                        name: "b".into(),
                        bind_mount_options: Vec::new(),
                    },
                ],
                ..Default::default()
            }],
            ephemeral_containers: vec![Default::default()],
            ..Pod::default()
        };
        let facts = SpecFacts::of(&pod);
        assert!(facts.host_network);
        assert_eq!(facts.host_users, Some(false));
        assert_eq!(
            facts.containers,
            vec![
                container(&["RestartAllContainers"], &[]),
                ContainerFacts::default()
            ]
        );
        assert_eq!(
            facts.init_containers,
            vec![container(&[], &[&["noexec"], &[]])]
        );
        assert_eq!(facts.ephemeral_containers, vec![ContainerFacts::default()]);
        let info = PodInfo {
            pod: &pod,
            spec: &facts,
        };
        assert_eq!(
            required(&all(), &info, SCHEDULER_VERSION),
            [
                "RestartAllContainersOnContainerExits",
                "UserNamespacesHostNetworkSupport",
                "VolumeBindMountOptions"
            ]
        );
        // A plain pod needs none.
        let plain_pod = Pod::default();
        let facts = SpecFacts::of(&plain_pod);
        let info = PodInfo {
            pod: &plain_pod,
            spec: &facts,
        };
        assert!(required(&all(), &info, SCHEDULER_VERSION).is_empty());
    }
}
