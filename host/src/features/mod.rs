//! `--feature-gates`: kube-scheduler's flag, with kube-scheduler's gates.
//!
//! Every gate kube-scheduler 1.37.2 accepts ([`KUBE_SCHEDULER_1_37`]: Kubernetes'
//! own with client-go's, the generic API server's, zpages', logging's and metrics')
//! is accepted by the same name, with upstream's default and lock, so that a
//! kube-scheduler command line moves to Berth as it is:
//!
//! - a name kube-scheduler does not know is refused with its words
//!   (`unrecognized feature gate: NAME`), and so is a locked gate set against its
//!   lock (`cannot set feature gate NAME to false, feature is locked to true`);
//! - a gate that changes what kube-scheduler decides ([`SCHEDULING`]) is either
//!   followed (Berth turns the feature on or off as told) or fixed: Berth behaves as
//!   with the gate at one value, accepts that value, and refuses the other by name
//!   with the reason, rather than ignoring it;
//! - any other gate changes nothing Berth decides: its default is accepted silently,
//!   the other value with a warning that it has no effect here.

mod kube_1_37;

use crate::framework::FrameworkOptions;
pub use kube_1_37::{DEPENDS, KUBE_SCHEDULER_1_37};

/// A gate's maturity, as kube-scheduler's `--help` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Off by default, may change or go.
    Alpha,
    /// Usually on by default, close to its final form.
    Beta,
    /// Generally available; usually locked on.
    Ga,
    /// On its way out.
    Deprecated,
}

impl Stage {
    /// The name kube-scheduler prints: ALPHA, BETA, GA, DEPRECATED.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Alpha => "ALPHA",
            Stage::Beta => "BETA",
            Stage::Ga => "GA",
            Stage::Deprecated => "DEPRECATED",
        }
    }
}

/// One of kube-scheduler's gates, as it is in the release named by the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gate {
    /// The name `--feature-gates` takes (case-sensitive).
    pub name: &'static str,
    /// On unless told otherwise.
    pub default: bool,
    /// Setting it to the other value is refused.
    pub locked: bool,
    /// Its maturity.
    pub stage: Stage,
}

/// What Berth does with a gate that changes scheduling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InBerth {
    /// Berth follows the gate: `--feature-gates` turns the feature on or off.
    Follows,
    /// Berth behaves as with the gate at `on`, whatever it is set to: that value is
    /// accepted, the other refused with `why`.
    Fixed {
        /// The value Berth behaves as with.
        on: bool,
        /// Why the other value is refused.
        why: &'static str,
    },
    /// Berth has the feature, in part, and behaves as with the gate on, lacking `gap`:
    /// on is accepted, off refused.
    Partly {
        /// What of the feature Berth lacks.
        gap: &'static str,
    },
}

impl InBerth {
    /// The value Berth behaves as with, when it does not follow the gate.
    pub fn fixed_at(self) -> Option<bool> {
        match self {
            InBerth::Follows => None,
            InBerth::Fixed { on, .. } => Some(on),
            InBerth::Partly { .. } => Some(true),
        }
    }
}

const NOT_YET: &str = "Berth does not have this feature yet";
const ALWAYS: &str = "Berth has this feature and cannot turn it off yet";

/// The gates kube-scheduler 1.37.2 reads when it schedules (`pkg/scheduler` and its
/// plugins, and the default profile's plugins), each with what Berth does with it.
/// The book lists them (docs/src/operators/feature-gates.md), with where Berth differs
/// from upstream's default.
pub const SCHEDULING: &[(&str, InBerth)] = &[
    ("CompositePodGroup", fixed(false, NOT_YET)),
    ("DRAAdminAccess", fixed(true, ALWAYS)),
    ("DRAConsumableCapacity", InBerth::Follows),
    ("DRADerivedAttributes", fixed(false, NOT_YET)),
    (
        "DRADeviceBindingConditions",
        partly("Filter does not yet reject a claim whose binding conditions timed out"),
    ),
    ("DRADeviceCompatibilityGroups", fixed(false, NOT_YET)),
    ("DRADeviceTaintRules", fixed(true, ALWAYS)),
    ("DRADeviceTaints", fixed(true, ALWAYS)),
    (
        "DRAExtendedResource",
        partly(
            "scoring does not count devices for an extended resource backed by DRA that \
             the scoring strategy names",
        ),
    ),
    (
        "DRAFractionalCapacityRange",
        fixed(
            false,
            "Berth rounds capacity ranges in whole units, not milli-units, yet",
        ),
    ),
    ("DRAListTypeAttributes", fixed(false, NOT_YET)),
    ("DRANodeAllocatableResources", fixed(false, NOT_YET)),
    ("DRAOptionalNodeOperations", fixed(false, NOT_YET)),
    ("DRAPartitionableDevices", InBerth::Follows),
    ("DRAPrioritizedList", fixed(true, ALWAYS)),
    ("DRAResourceClaimDeviceStatus", fixed(true, ALWAYS)),
    (
        "DRASchedulerFilterTimeout",
        fixed(
            false,
            "DynamicResources' filterTimeout is not applied yet: its Filter is bounded by \
             the sandbox's call deadline only",
        ),
    ),
    ("DRAWorkloadResourceClaims", fixed(false, NOT_YET)),
    ("DynamicResourceAllocation", fixed(true, ALWAYS)),
    ("GenericWorkload", InBerth::Follows),
    (
        "InPlacePodLevelResourcesVerticalScaling",
        fixed(
            false,
            "pod-level resources are counted from the spec, not yet from the pod's status",
        ),
    ),
    ("InPlacePodVerticalScaling", fixed(true, ALWAYS)),
    (
        "InPlacePodVerticalScalingSchedulerPreemption",
        fixed(false, NOT_YET),
    ),
    ("InterPodAffinityHostnameFastPath", fixed(false, NOT_YET)),
    ("MatchLabelKeysInPodTopologySpread", fixed(true, ALWAYS)),
    ("NodeDeclaredFeatures", fixed(true, ALWAYS)),
    (
        "NodeInclusionPolicyInPodTopologySpread",
        fixed(true, ALWAYS),
    ),
    (
        "NominatedNodeNameForExpectation",
        fixed(
            false,
            "Berth writes nominatedNodeName for preemption only, not yet before a bind",
        ),
    ),
    ("OpportunisticBatching", InBerth::Follows),
    (
        "PodGroupPreemptionPolicy",
        fixed(
            true,
            "Berth takes a PodGroup's spec.preemptionPolicy and cannot ignore it yet",
        ),
    ),
    ("PodLevelResources", fixed(true, ALWAYS)),
    (
        "SchedulerAsyncAPICalls",
        fixed(
            true,
            "Berth makes its status and nomination calls off the scheduling loop (without \
             upstream's merging of one pod's calls) and cannot make them in the loop",
        ),
    ),
    ("SchedulerAsyncPreemption", fixed(true, ALWAYS)),
    (
        "SchedulerPopFromBackoffQ",
        fixed(
            false,
            "Berth pops pods from the active queue only, not yet from the backoff queue",
        ),
    ),
    ("SchedulerPreQueueingHints", fixed(false, NOT_YET)),
    ("StorageCapacityScoring", fixed(true, ALWAYS)),
    ("TaintTolerationComparisonOperators", fixed(false, NOT_YET)),
    ("TopologyAwareWorkloadScheduling", fixed(false, NOT_YET)),
    (
        "VolumeAttributesClass",
        partly("a claim's volumeAttributesClassName is not yet matched to a volume's"),
    ),
    (
        "VolumeLimitScaling",
        fixed(
            false,
            "CSIDriver's preventPodSchedulingIfMissing is not read yet",
        ),
    ),
];

const fn fixed(on: bool, why: &'static str) -> InBerth {
    InBerth::Fixed { on, why }
}

const fn partly(gap: &'static str) -> InBerth {
    InBerth::Partly { gap }
}

/// kube-scheduler 1.37.2's gate `name`.
pub fn gate(name: &str) -> Option<&'static Gate> {
    KUBE_SCHEDULER_1_37
        .binary_search_by(|g| g.name.cmp(name))
        .ok()
        .map(|i| &KUBE_SCHEDULER_1_37[i])
}

/// What Berth does with `name`, when it is a gate that changes scheduling.
pub fn in_berth(name: &str) -> Option<InBerth> {
    SCHEDULING
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, what)| *what)
}

/// The followed gates that only plugins read (DynamicResources' allocator, through
/// `feature-gate`): the host has nothing of its own to switch.
const READ_BY_PLUGINS: &[&str] = &["DRAConsumableCapacity", "DRAPartitionableDevices"];

/// The value Berth runs gate `name` with when `--feature-gates` leaves it: for a gate
/// it cannot follow, the value it behaves as with, else kube-scheduler's default.
fn unset(name: &str) -> Option<bool> {
    let g = gate(name)?;
    Some(
        in_berth(name)
            .and_then(InBerth::fixed_at)
            .unwrap_or(g.default),
    )
}

/// kube-scheduler 1.37.2's gate `name` as Berth runs with `options`: the value
/// `--feature-gates` set, else the value Berth behaves as with for a gate it cannot
/// follow, else upstream's default. None for a name kube-scheduler does not know.
/// This is what plugins read (`feature-gate`).
pub fn effective(name: &str, options: &FrameworkOptions) -> Option<bool> {
    gate(name)?;
    // The gates the host follows have fields of their own, which callers may set.
    match name {
        "OpportunisticBatching" => return Some(options.batching),
        "GenericWorkload" => return Some(options.generic_workload),
        _ => {}
    }
    options.gates.get(name).or_else(|| unset(name))
}

/// Gives every gate kube-scheduler 1.37.2 knows its [`effective`] value in the
/// options' gates, which the framework hands to its plugins: the commands call it
/// (and [`apply`] does), so that a plugin reads every gate, set or not.
pub fn complete(options: &mut FrameworkOptions) {
    for g in KUBE_SCHEDULER_1_37 {
        if let Some(on) = effective(g.name, options) {
            options.gates.set(g.name, on);
        }
    }
}

/// Applies a `--feature-gates` value (`Name=true,Other=false`) to the framework's
/// options, entry by entry as kube-scheduler reads them. An error names the entry
/// and what was wrong with it, and the options keep what the entries before it set.
/// The answer lists what to warn of: gates set to a value that changes nothing
/// Berth decides. Every accepted entry is kept in [`FrameworkOptions::gates`], for
/// the plugins to read.
pub fn apply(list: &str, options: &mut FrameworkOptions) -> Result<Vec<String>, String> {
    complete(options);
    let mut warnings = Vec::new();
    let mut set: Vec<(&str, bool)> = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, value) = entry
            .split_once('=')
            .ok_or_else(|| format!("--feature-gates: {entry:?} is not NAME=true or NAME=false"))?;
        let (name, value) = (name.trim(), value.trim());
        let on = match value.to_ascii_lowercase().as_str() {
            "true" => true,
            "false" => false,
            _ => {
                return Err(format!(
                    "--feature-gates: {name}={value:?}: the value must be true or false"
                ));
            }
        };
        let Some(g) = gate(name) else {
            return Err(format!(
                "--feature-gates: unrecognized feature gate: {name} (not a gate of \
                 kube-scheduler 1.37.2; the names are case-sensitive)"
            ));
        };
        if g.locked && on != g.default {
            return Err(format!(
                "--feature-gates: cannot set feature gate {name} to {on}, feature is locked to {}",
                g.default
            ));
        }
        set.retain(|(n, _)| *n != g.name);
        set.push((g.name, on));
        match in_berth(name) {
            Some(InBerth::Follows) if READ_BY_PLUGINS.contains(&name) => {}
            Some(InBerth::Follows) => match name {
                "OpportunisticBatching" => options.batching = on,
                "GenericWorkload" => options.generic_workload = on,
                _ => unreachable!("{name} is followed but not applied"),
            },
            Some(InBerth::Fixed { on: berth, why }) => {
                if on != berth {
                    return Err(format!(
                        "--feature-gates: {name}={on}: Berth schedules as with {name}={berth} \
                         ({why}; kube-scheduler 1.37.2's default is {})",
                        g.default
                    ));
                }
            }
            Some(InBerth::Partly { gap }) => {
                if !on {
                    return Err(format!(
                        "--feature-gates: {name}=false: Berth has this feature ({gap}) and \
                         cannot turn it off yet"
                    ));
                }
            }
            None if name == "AllAlpha" || name == "AllBeta" => {
                if on != g.default {
                    return Err(format!(
                        "--feature-gates: {name}={on}: Berth does not turn a whole stage on or \
                         off; name the gates (docs/src/operators/feature-gates.md lists them)"
                    ));
                }
            }
            None => {
                if on != g.default {
                    warnings.push(format!(
                        "--feature-gates: {name}={on} changes nothing Berth decides (a {} gate \
                         kube-scheduler accepts; it does not change scheduling)",
                        g.stage.as_str()
                    ));
                }
            }
        }
        options.gates.set(name, on);
    }
    unmet_dependencies(&set)?;
    Ok(warnings)
}

/// Upstream's check once every entry is set: each gate that is on (as given, else by
/// default) needs the gates it depends on to be on; the first gate, by name, that
/// does not have them is refused in kube-scheduler's words.
fn unmet_dependencies(set: &[(&str, bool)]) -> Result<(), String> {
    let on = |name: &str| {
        set.iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .or_else(|| gate(name).map(|g| g.default))
            .unwrap_or(false)
    };
    for (name, needs) in DEPENDS {
        if !on(name) {
            continue;
        }
        let off: Vec<&str> = needs.iter().copied().filter(|d| !on(d)).collect();
        if !off.is_empty() {
            return Err(format!(
                "--feature-gates: {name} is enabled, but depends on features that are \
                 disabled: [{}]",
                off.join(" ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_names_every_scheduling_gate() {
        for w in KUBE_SCHEDULER_1_37.windows(2) {
            assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
        }
        for (name, what) in SCHEDULING {
            let g = gate(name).unwrap_or_else(|| panic!("{name} is not a 1.37.2 gate"));
            // A locked gate Berth cannot follow is fixed at its lock (or partly there).
            if let Some(on) = what.fixed_at() {
                assert!(!g.locked || on == g.default, "{name}");
            }
        }
    }

    #[test]
    fn the_book_lists_every_scheduling_gate_as_berth_has_it() {
        let readme = include_str!("../../../docs/src/operators/feature-gates.md");
        for (name, what) in SCHEDULING {
            let prefix = format!("| `{name}` |");
            let row = readme
                .lines()
                .find(|l| l.starts_with(&prefix))
                .unwrap_or_else(|| panic!("the book's feature gates have no row for {name}"));
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let g = gate(name).unwrap();
            let upstream = if g.default { "on" } else { "off" };
            assert!(cells[2].starts_with(upstream), "{row}");
            let berth = match what {
                InBerth::Follows => "follows the flag",
                InBerth::Fixed { on: true, .. } => "on",
                InBerth::Fixed { on: false, .. } => "off",
                InBerth::Partly { .. } => "on, in part",
            };
            assert_eq!(cells[3], berth, "{row}");
        }
    }

    #[test]
    fn batching_is_on_by_default_and_the_flag_turns_it_off() {
        let mut o = FrameworkOptions::default();
        assert!(o.batching);
        apply("OpportunisticBatching=false", &mut o).unwrap();
        assert!(!o.batching);
        apply(" OpportunisticBatching = True ", &mut o).unwrap();
        assert!(o.batching);
    }

    #[test]
    fn generic_workload_is_off_by_default_and_follows_the_flag() {
        let mut o = FrameworkOptions::default();
        assert!(!o.generic_workload);
        assert_eq!(apply("GenericWorkload=true", &mut o), Ok(vec![]));
        assert!(o.generic_workload);
        assert_eq!(apply("GenericWorkload=false", &mut o), Ok(vec![]));
        assert!(!o.generic_workload);
    }

    /// A gate that is on needs what it depends on, checked once every entry is set
    /// (so the order of the entries does not matter), in kube-scheduler's words.
    #[test]
    fn dependencies_are_checked_after_every_entry_as_upstream() {
        let mut o = FrameworkOptions::default();
        let e = apply("PodGroupPreemptionPolicy=true", &mut o).unwrap_err();
        assert!(
            e.ends_with(
                "PodGroupPreemptionPolicy is enabled, but depends on features that are \
                 disabled: [GenericWorkload]"
            ),
            "{e}"
        );
        let e = apply(
            "GenericWorkload=true,PodGroupPreemptionPolicy=true,GenericWorkload=false",
            &mut o,
        )
        .unwrap_err();
        assert!(e.contains("[GenericWorkload]"), "{e}");
        assert_eq!(
            apply("PodGroupPreemptionPolicy=true,GenericWorkload=true", &mut o),
            Ok(vec![])
        );
        assert!(o.generic_workload);
        for (name, needs) in DEPENDS {
            assert!(gate(name).is_some(), "{name}");
            for d in *needs {
                assert!(gate(d).is_some(), "{name} needs {d}");
            }
        }
        assert!(DEPENDS.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn defaults_are_accepted_and_what_berth_cannot_do_is_refused_by_name() {
        let mut o = FrameworkOptions::default();
        // Every gate at kube-scheduler's default is accepted, silently, except the
        // ones Berth is fixed the other way.
        for g in KUBE_SCHEDULER_1_37 {
            let answer = apply(&format!("{}={}", g.name, g.default), &mut o);
            match in_berth(g.name).and_then(InBerth::fixed_at) {
                Some(on) if on != g.default => {
                    let e = answer.unwrap_err();
                    assert!(e.contains(g.name), "{e}");
                }
                _ => assert_eq!(answer, Ok(vec![]), "{}", g.name),
            }
        }
        assert!(o.batching);
        // Berth has DRADeviceTaints and cannot turn it off yet.
        let e = apply("DRADeviceTaints=false", &mut o).unwrap_err();
        assert!(e.contains("DRADeviceTaints=false"), "{e}");
        assert!(e.contains("cannot turn it off"), "{e}");
        // Nor does it have CompositePodGroup.
        let e = apply("CompositePodGroup=true", &mut o).unwrap_err();
        assert!(e.contains("does not have this feature yet"), "{e}");
        // A locked gate, in kube-scheduler's words.
        let e = apply("DynamicResourceAllocation=false", &mut o).unwrap_err();
        assert!(
            e.contains("cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"),
            "{e}"
        );
        // A gate that changes no scheduling: accepted, with a warning.
        let w = apply("ContextualLogging=false", &mut o).unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("changes nothing Berth decides"), "{}", w[0]);
    }

    #[test]
    fn plugins_read_a_gate_as_set_else_as_berth_behaves_else_upstream_s_default() {
        let mut o = FrameworkOptions::default();
        assert_eq!(effective("NoSuchGate", &o), None);
        assert_eq!(effective("OpportunisticBatching", &o), Some(true));
        assert_eq!(effective("ContextualLogging", &o), Some(true));
        // On upstream, off in Berth (fixed): Berth's value.
        assert_eq!(effective("DRASchedulerFilterTimeout", &o), Some(false));
        // The options hold no gate until they are completed.
        assert_eq!(o.gates.get("OpportunisticBatching"), None);
        complete(&mut o);
        for g in KUBE_SCHEDULER_1_37 {
            assert_eq!(o.gates.get(g.name), effective(g.name, &o), "{}", g.name);
        }
        assert_eq!(o.gates.get("DRASchedulerFilterTimeout"), Some(false));
        // What the flag sets, followed or not, is what plugins read.
        let w = apply(
            "OpportunisticBatching=false,ContextualLogging=false",
            &mut o,
        )
        .unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(o.gates.get("OpportunisticBatching"), Some(false));
        assert_eq!(o.gates.get("ContextualLogging"), Some(false));
        assert_eq!(effective("ContextualLogging", &o), Some(false));
        // `apply` completes too; a refused entry is not kept.
        let mut o = FrameworkOptions::default();
        apply("DRASchedulerFilterTimeout=true", &mut o).unwrap_err();
        assert_eq!(o.gates.get("DRASchedulerFilterTimeout"), Some(false));
        assert_eq!(o.gates.get("DynamicResourceAllocation"), Some(true));
    }

    #[test]
    fn the_dra_gates_dynamic_resources_follows_reach_its_gates() {
        let mut o = FrameworkOptions::default();
        assert_eq!(apply("", &mut o), Ok(vec![]));
        assert_eq!(o.gates.get("DRAPartitionableDevices"), Some(true));
        assert_eq!(o.gates.get("DRAConsumableCapacity"), Some(true));
        let w = apply(
            "DRAPartitionableDevices=false,DRAConsumableCapacity=false",
            &mut o,
        );
        assert_eq!(w, Ok(vec![]));
        assert_eq!(o.gates.get("DRAPartitionableDevices"), Some(false));
        assert_eq!(o.gates.get("DRAConsumableCapacity"), Some(false));
        // Nothing else moved.
        assert!(o.batching);
        assert_eq!(o.gates.get("DRADeviceTaints"), Some(true));
        apply("DRAConsumableCapacity=true", &mut o).unwrap();
        assert_eq!(o.gates.get("DRAConsumableCapacity"), Some(true));
        for name in READ_BY_PLUGINS {
            assert_eq!(in_berth(name), Some(InBerth::Follows), "{name}");
        }
    }

    #[test]
    fn bad_entries_are_refused_by_name() {
        let mut o = FrameworkOptions::default();
        let e = apply("OpportunisticBatchin=false", &mut o).unwrap_err();
        assert!(
            e.contains("unrecognized feature gate: OpportunisticBatchin "),
            "{e}"
        );
        let e = apply("opportunisticbatching=false", &mut o).unwrap_err();
        assert!(e.contains("case-sensitive"), "{e}");
        let e = apply("OpportunisticBatching=no", &mut o).unwrap_err();
        assert!(e.contains("must be true or false"), "{e}");
        let e = apply("OpportunisticBatching", &mut o).unwrap_err();
        assert!(e.contains("is not NAME=true"), "{e}");
        let e = apply("OpportunisticBatching=false,AllAlpha=true", &mut o).unwrap_err();
        assert!(e.contains("AllAlpha=true"), "{e}");
        assert!(
            !o.batching,
            "the entries before a refused one are applied, as kube-scheduler's"
        );
    }
}
