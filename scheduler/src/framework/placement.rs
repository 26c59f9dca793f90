//! The runners of the extension points that act on a pod group as a whole
//! (kube-scheduler's workload-aware scheduling): PlacementScore ranks the placements
//! a pod group's cycle found feasible; PlacementFeasible says, member after member,
//! whether the group can still be placed.

use berth_sdk::{
    Code, ExtensionPoint, MAX_NODE_SCORE, MIN_NODE_SCORE, Placement, PlacementProgress, PodGroup,
    PodGroupAssignments,
};

use super::{Framework, PluginError, lock};
use berth_runtime::cache::Snapshot;
use berth_runtime::plugin::CycleState;

/// What PlacementScore made of a pod group's placements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacementScores {
    /// Per placement (in the order given): the sum of every plugin's weighted score.
    pub totals: Vec<i64>,
    /// Per plugin, in profile order: its name, weight, and final (normalized) score
    /// of each placement.
    pub by_plugin: Vec<(String, i64, Vec<i64>)>,
}

impl PlacementScores {
    /// The index of the best placement: the highest total, the first of equals (the
    /// order of the placements the cycle generated); `None` with no placement.
    pub fn best(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (k, &t) in self.totals.iter().enumerate() {
            if best.is_none_or(|b| t > self.totals[b]) {
                best = Some(k);
            }
        }
        best
    }
}

impl Framework {
    /// Runs the profile's PlacementScore plugins over `placements` (each with the
    /// node proposed for every member placed in it), with the pod group cycle's
    /// `state`: each plugin scores every placement, normalizes its scores when it
    /// implements NormalizePlacementScore, and must then answer within [0, 100]; its
    /// weight multiplies them, and the totals add up. A plugin's Error (or any other
    /// status than Success), a trap, a score out of range or an answer of the wrong
    /// length fails the run, naming the plugin and the group.
    pub fn score_placements(
        &self,
        state: &CycleState,
        group: &PodGroup,
        placements: &[PodGroupAssignments],
    ) -> Result<PlacementScores, PluginError> {
        let mut timer = self.time_point("PlacementScore");
        let mut out = PlacementScores {
            totals: vec![0; placements.len()],
            by_plugin: Vec::new(),
        };
        let group_key = format!("{}/{}", group.namespace, group.name);
        let mut main = lock(&self.instances.main);
        for &(i, weight) in self.at(ExtensionPoint::PlacementScore) {
            let name = &self.plugins[i].name;
            let refused = |what: &str, status: &berth_sdk::Status| PluginError {
                plugin: name.clone(),
                message: format!(
                    "{what} of pod group {group_key}: {}: {}",
                    status.code.as_str(),
                    status.message()
                ),
            };
            let mut scores = Vec::with_capacity(placements.len());
            for placement in placements {
                let t = self.plugin_clock(state);
                let answer = main
                    .get(i, &self.plugins)?
                    .score_placement(state, group, placement)?;
                self.observe_plugin(
                    i,
                    "PlacementScore",
                    answer
                        .as_ref()
                        .map_or_else(|s| s.code.as_str(), |_| "Success"),
                    t,
                );
                let what = format!("PlacementScore of placement {:?}", placement.placement.name);
                scores.push(answer.map_err(|s| refused(&what, &s))?);
            }
            let normalizes = self.plugins[i]
                .module
                .extension_points()
                .contains(&ExtensionPoint::NormalizePlacementScore);
            if normalizes {
                let t = self.plugin_clock(state);
                let answer = main
                    .get(i, &self.plugins)?
                    .normalize_placement_score(state, group, &scores)?;
                self.observe_plugin(
                    i,
                    "NormalizePlacementScore",
                    answer
                        .as_ref()
                        .map_or_else(|s| s.code.as_str(), |_| "Success"),
                    t,
                );
                scores = answer.map_err(|s| refused("NormalizePlacementScore", &s))?;
            }
            for (k, s) in scores.iter().enumerate() {
                if !(MIN_NODE_SCORE..=MAX_NODE_SCORE).contains(s) {
                    timer.status = "Error";
                    return Err(PluginError {
                        plugin: name.clone(),
                        message: format!(
                            "scored placement {:?} of pod group {group_key} {s}, outside [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}]",
                            placements[k].placement.name
                        ),
                    });
                }
                out.totals[k] += s * weight;
            }
            out.by_plugin.push((name.clone(), weight, scores));
        }
        timer.status = "Success";
        Ok(out)
    }

    /// Whether the profile has PlacementGenerate plugins: its pod groups are tried
    /// within the placements they generate.
    pub fn has_placement_generate(&self) -> bool {
        !self.at(ExtensionPoint::PlacementGenerate).is_empty()
    }

    /// Runs the profile's PlacementGenerate plugins for `group` (upstream's
    /// `RunPlacementGeneratePlugins`): starting from one placement of every node of
    /// the snapshot, each plugin in turn replaces every placement with the ones it
    /// generates within it. Each plugin's replica is brought up to `snapshot` first.
    /// A plugin's status other than Success, a trap, or a placement naming a node
    /// outside its parent fails the run, naming the plugin and the group.
    pub fn generate_placements(
        &self,
        state: &CycleState,
        group: &PodGroup,
        snapshot: &Snapshot,
    ) -> Result<Vec<Placement>, PluginError> {
        let mut timer = self.time_point("PlacementGenerate");
        let every_node = Placement {
            name: String::new(),
            nodes: snapshot
                .slots()
                .iter()
                .filter_map(|&s| snapshot.node(s).map(|n| n.name().to_owned()))
                .collect(),
        };
        let mut placements = vec![every_node];
        let mut main = lock(&self.instances.main);
        for &(i, _) in self.at(ExtensionPoint::PlacementGenerate) {
            let name = &self.plugins[i].name;
            let inst = main.get(i, &self.plugins)?;
            inst.sync(snapshot)?;
            let mut next = Vec::new();
            for parent in &placements {
                let t = self.plugin_clock(state);
                let answer = inst.generate_placements(state, group, parent)?;
                self.observe_plugin(
                    i,
                    "PlacementGenerate",
                    answer
                        .as_ref()
                        .map_or_else(|s| s.code.as_str(), |_| "Success"),
                    t,
                );
                let children = answer.map_err(|status| {
                    timer.status = "Error";
                    PluginError {
                        plugin: name.clone(),
                        message: format!(
                            "PlacementGenerate of pod group {}/{}: {}: {}",
                            group.namespace,
                            group.name,
                            status.code.as_str(),
                            status.message()
                        ),
                    }
                })?;
                let within: std::collections::HashSet<&str> =
                    parent.nodes.iter().map(String::as_str).collect();
                for child in children {
                    if let Some(stray) = child.nodes.iter().find(|n| !within.contains(n.as_str())) {
                        timer.status = "Error";
                        return Err(PluginError {
                            plugin: name.clone(),
                            message: format!(
                                "placement {:?} of pod group {}/{} names node {stray}, outside its parent {:?}",
                                child.name, group.namespace, group.name, parent.name
                            ),
                        });
                    }
                    next.push(child);
                }
            }
            placements = next;
        }
        timer.status = "Success";
        Ok(placements)
    }

    /// Whether the profile has PlacementFeasible plugins.
    pub fn has_placement_feasible(&self) -> bool {
        !self.at(ExtensionPoint::PlacementFeasible).is_empty()
    }

    /// Runs the profile's PlacementFeasible plugins on `group` as placed so far
    /// (upstream's `RunPlacementFeasiblePlugins`): the first rejection stops the run
    /// and is the verdict; a plugin that waits lets the others speak, and the run
    /// then waits; else the group is feasible. A plugin's Error, trap or an answer of
    /// another code fails the run, naming the plugin and the group.
    pub fn placement_feasible(
        &self,
        state: &CycleState,
        group: &PodGroup,
        progress: PlacementProgress,
    ) -> Result<Feasibility, PluginError> {
        let mut timer = self.time_point("PlacementFeasible");
        let mut verdict = Feasibility::Feasible;
        let mut main = lock(&self.instances.main);
        for &(i, _) in self.at(ExtensionPoint::PlacementFeasible) {
            let t = self.plugin_clock(state);
            let status = main
                .get(i, &self.plugins)?
                .placement_feasible(state, group, &progress)?;
            self.observe_plugin(i, "PlacementFeasible", status.code.as_str(), t);
            let plugin = self.plugins[i].name.clone();
            match status.code {
                Code::Success => {}
                Code::Wait => {
                    if verdict == Feasibility::Feasible {
                        verdict = Feasibility::Wait {
                            plugin,
                            message: status.message(),
                        };
                    }
                }
                Code::Unschedulable | Code::UnschedulableAndUnresolvable => {
                    timer.status = "Unschedulable";
                    return Ok(Feasibility::Unschedulable {
                        plugin,
                        message: status.message(),
                    });
                }
                _ => {
                    timer.status = status.code.as_str();
                    return Err(PluginError {
                        plugin,
                        message: format!(
                            "PlacementFeasible of pod group {}/{}: {}: {}",
                            group.namespace,
                            group.name,
                            status.code.as_str(),
                            status.message()
                        ),
                    });
                }
            }
        }
        timer.status = match verdict {
            Feasibility::Feasible => "Success",
            _ => "Wait",
        };
        Ok(verdict)
    }
}

/// What PlacementFeasible says of a pod group as placed so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Feasibility {
    /// It may bind as placed.
    Feasible,
    /// Not yet: go on with the next member (a cycle that ends here binds nothing).
    Wait {
        /// The plugin that waits.
        plugin: String,
        /// Its message.
        message: String,
    },
    /// It cannot be placed: stop, nothing binds.
    Unschedulable {
        /// The plugin that rejected it.
        plugin: String,
        /// Its message.
        message: String,
    },
}
