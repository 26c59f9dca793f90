//! `berth config validate` and `berth config default` as an operator runs them.

use crate::common;

use common::{berth, stderr, stdout};

#[test]
fn default_prints_a_kube_scheduler_configuration_that_loads_back() {
    let out = berth(&["config", "default"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("apiVersion: kubescheduler.config.k8s.io/v1\n"),
        "{text}"
    );
    assert!(
        text.contains("kind: KubeSchedulerConfiguration\n"),
        "{text}"
    );
    assert!(
        text.contains("#   filter: NodeName, NodeUnschedulable, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone, PodTopologySpread, InterPodAffinity, DynamicResources, NodeDeclaredFeatures\n"),
        "{text}"
    );
    // What it prints is a configuration Berth loads, with the same profile.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("default.yaml");
    std::fs::write(&file, &text).unwrap();
    let out = berth(&["config", "validate", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = stdout(&out);
    // GenericWorkload is off by default, as upstream's: no GangScheduling.
    assert!(
        summary.contains("profile default-scheduler: 20 plugins\n"),
        "{summary}"
    );
    assert!(
        summary.contains("  preEnqueue  SchedulingGates, DynamicResources\n"),
        "{summary}"
    );
    assert!(!summary.contains("GangScheduling"), "{summary}");
    assert!(
        summary.contains("  postFilter  DynamicResources, DefaultPreemption\n"),
        "{summary}"
    );
    // What each plugin may do beyond reading the cluster.
    assert!(
        summary.contains("  may         DefaultBinder: bind-pod at Bind (the cycle's pod, to the reserved node)\n"),
        "{summary}"
    );
    assert!(
        summary.contains("  may         VolumeBinding: assume-volume-bound at Reserve/Unreserve/PreBind (the cycle's pod's claims); "),
        "{summary}"
    );
    assert!(
        summary.contains("  may         DynamicResources: "),
        "{summary}"
    );
    // Any PostFilter plugin may deallocate the pod's own claims that no other
    // consumer has reserved, and delete the claim an earlier attempt made for its
    // extended resources, as upstream's DynamicResources does there.
    assert!(
        summary.contains("  may         DefaultPreemption: write-resource-claim-status at PostFilter (the cycle's pod's ResourceClaims; at PostFilter only to deallocate one no other consumer has reserved); delete-extended-resource-claim at PostFilter (the claim for the cycle's pod's extended resources)\n"),
        "{summary}"
    );
    assert_eq!(summary.matches("  may ").count(), 4, "{summary}");
    assert!(
        summary.contains("  score       TaintToleration(3), NodeAffinity(2), NodeResourcesFit(1), VolumeBinding(1), PodTopologySpread(2), InterPodAffinity(2), DynamicResources(2), NodeResourcesBalancedAllocation(1), ImageLocality(1)\n"),
        "{summary}"
    );
    assert!(
        summary.contains("  reserve     VolumeBinding, DynamicResources\n"),
        "{summary}"
    );
    assert!(
        summary.contains("  preBind     VolumeBinding, DynamicResources\n"),
        "{summary}"
    );
}

/// With `--feature-gates GenericWorkload=true` the default profile has GangScheduling,
/// as kube-scheduler's does with the gate on; the printed configuration loads back
/// under the same gates with the same plugins.
#[test]
fn generic_workload_adds_gang_scheduling_to_the_default_profile() {
    let gates = "--feature-gates=GenericWorkload=true";
    let out = berth(&["config", "default", gates]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("name: GangScheduling\n"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("default.yaml");
    std::fs::write(&file, &text).unwrap();
    let out = berth(&["config", "validate", gates, file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = stdout(&out);
    assert!(
        summary.contains("profile default-scheduler: 21 plugins\n"),
        "{summary}"
    );
    // GangScheduling: members of a pod group wait at PreEnqueue for their group, and
    // the pod group cycle asks it whether the group can be placed.
    assert!(
        summary.contains("  preEnqueue  SchedulingGates, DynamicResources, GangScheduling\n"),
        "{summary}"
    );
    assert!(
        summary.contains("  placementFeasible GangScheduling\n"),
        "{summary}"
    );
    // A gate Berth cannot follow is refused by name here too.
    let out = berth(&[
        "config",
        "default",
        "--feature-gates=CompositePodGroup=true",
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("CompositePodGroup"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn validate_reports_every_problem_with_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(
        &file,
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 0
profiles:
- plugins:
    multiPoint:
      enabled: [{name: Custom}]
    permit:
      enabled: [{name: NodeName}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: Nonsense}}
- schedulerName: default-scheduler
",
    )
    .unwrap();
    let f = file.display().to_string();
    // NodeResourcesFit's answer to `type: Nonsense`, wherever the file gives it.
    let refusal = format!(
        "{f}: profiles[0].pluginConfig[0].args: plugin NodeResourcesFit (built-in node-resources-fit) refused its args: scoringStrategy.type: Unsupported value: \"Nonsense\": supported values: \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\""
    );
    let out = berth(&["config", "validate", &f]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines,
        [
            format!("{f}: podInitialBackoffSeconds: 0 must be greater than 0"),
            format!(
                "{f}: profiles[1].schedulerName: duplicate scheduler name \"default-scheduler\""
            ),
            format!(
                "{f}: plugin Custom: plugin Custom is not built in and no entry of `modules` names it"
            ),
            format!(
                "{f}: profiles[0].plugins.permit.enabled[0]: plugin \"NodeName\" does not implement permit (it implements filter)"
            ),
            refusal.clone(),
            format!("{f}: 5 problem(s) found"),
        ]
    );

    // Alone, the args problem is reported the same way, its prefix said once.
    std::fs::write(
        &file,
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: Nonsense}}
",
    )
    .unwrap();
    let out = berth(&["config", "validate", &f]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        [refusal.clone(), format!("{f}: 1 problem(s) found"),]
    );

    // As kube-scheduler, the args of a built-in plugin the profile does not enable are
    // checked too.
    std::fs::write(
        &file,
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    multiPoint:
      disabled: [{name: NodeResourcesFit}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: Nonsense}}
",
    )
    .unwrap();
    let out = berth(&["config", "validate", &f]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert_eq!(
        stderr(&out).lines().collect::<Vec<_>>(),
        [refusal.clone(), format!("{f}: 1 problem(s) found"),]
    );
}
