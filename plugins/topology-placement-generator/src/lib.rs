//! TopologyPlacementGenerator: a pod group whose PodGroup names a topology
//! (`spec.schedulingConstraints.topology[0].key`, a node label) is tried within each
//! domain of that label, one placement per value, as kube-scheduler's plugin of the
//! same name (workload-aware scheduling). Members already bound or assumed pin the
//! group to their domain. A group without a topology keeps its parent placement.
//! Upstream serves one topology constraint; the first is read.

use berth_sdk::{CycleState, NodeInfo, Placement, PlacementGenerate, Plugin, PodGroup, Status};
use std::collections::BTreeMap;

/// The plugin.
pub struct TopologyPlacementGenerator;

impl Plugin for TopologyPlacementGenerator {
    const NAME: &'static str = "TopologyPlacementGenerator";

    fn new(_args: berth_sdk::serde_json::Value) -> Result<Self, String> {
        Ok(TopologyPlacementGenerator)
    }
}

impl PlacementGenerate for TopologyPlacementGenerator {
    fn generate_placements(
        &self,
        _state: &CycleState,
        group: &PodGroup,
        parent: &Placement,
        nodes: &[&NodeInfo],
    ) -> Result<Vec<Placement>, Status> {
        let Some(key) = group.topology_keys.first() else {
            return Ok(vec![parent.clone()]);
        };
        // The domain the members already scheduled are in, if any.
        let mut required: Option<&str> = None;
        for name in &group.scheduled_nodes {
            let Some(node) = nodes.iter().find(|n| n.node.name == *name) else {
                // Outside this parent: the group cannot be placed within it.
                return Ok(Vec::new());
            };
            let Some(domain) = node.node.labels.get(key) else {
                return Err(Status::error(format!(
                    "no topology domain {key} found for node {name} of a scheduled member"
                )));
            };
            match required {
                Some(r) if r != domain => {
                    return Err(Status::error(format!(
                        "more than one domain found for the pod group: {r}, {domain}"
                    )));
                }
                _ => required = Some(domain),
            }
        }
        // One placement per domain, by value (the nodes in the parent's order).
        let mut domains: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for node in nodes {
            if let Some(domain) = node.node.labels.get(key)
                && required.is_none_or(|r| r == domain)
            {
                domains
                    .entry(domain.as_str())
                    .or_default()
                    .push(node.node.name.clone());
            }
        }
        Ok(domains
            .into_iter()
            .map(|(domain, nodes)| Placement {
                name: domain.to_owned(),
                nodes,
            })
            .collect())
    }
}

berth_sdk::export_plugin!(TopologyPlacementGenerator: placement_generate);

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::{MemoryState, Node};

    fn node(name: &str, zone: Option<&str>) -> NodeInfo {
        let mut n = Node {
            name: name.into(),
            ..Node::default()
        };
        if let Some(z) = zone {
            n.labels.insert("zone".into(), z.into());
        }
        NodeInfo::new(n)
    }

    fn generate(group: &PodGroup, nodes: &[NodeInfo]) -> Result<Vec<Placement>, Status> {
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let parent = Placement {
            name: String::new(),
            nodes: nodes.iter().map(|n| n.node.name.clone()).collect(),
        };
        let state = MemoryState::default();
        TopologyPlacementGenerator.generate_placements(
            &CycleState::new(&state),
            group,
            &parent,
            &refs,
        )
    }

    fn group(keys: &[&str], scheduled_nodes: &[&str]) -> PodGroup {
        PodGroup {
            namespace: "default".into(),
            name: "g".into(),
            topology_keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            scheduled_nodes: scheduled_nodes.iter().map(|n| (*n).to_owned()).collect(),
            ..PodGroup::default()
        }
    }

    fn names(placements: &[Placement]) -> Vec<(String, Vec<String>)> {
        placements
            .iter()
            .map(|p| (p.name.clone(), p.nodes.clone()))
            .collect()
    }

    #[test]
    fn one_placement_per_domain_and_none_without_the_label() {
        let nodes = [
            node("a1", Some("a")),
            node("b1", Some("b")),
            node("a2", Some("a")),
            node("x", None),
        ];
        let got = generate(&group(&["zone"], &[]), &nodes).unwrap();
        assert_eq!(
            names(&got),
            [
                ("a".to_owned(), vec!["a1".to_owned(), "a2".to_owned()]),
                ("b".to_owned(), vec!["b1".to_owned()]),
            ]
        );
    }

    #[test]
    fn a_group_without_a_topology_keeps_its_parent() {
        let nodes = [node("a1", Some("a")), node("b1", Some("b"))];
        let got = generate(&group(&[], &[]), &nodes).unwrap();
        assert_eq!(
            names(&got),
            [(String::new(), vec!["a1".into(), "b1".into()])]
        );
    }

    #[test]
    fn scheduled_members_pin_the_group_to_their_domain() {
        let nodes = [
            node("a1", Some("a")),
            node("b1", Some("b")),
            node("b2", Some("b")),
        ];
        let got = generate(&group(&["zone"], &["b2"]), &nodes).unwrap();
        assert_eq!(
            names(&got),
            [("b".to_owned(), vec!["b1".into(), "b2".into()])]
        );
        // Members in two domains: upstream's error.
        let e = generate(&group(&["zone"], &["a1", "b1"]), &nodes).unwrap_err();
        assert_eq!(
            e.reasons,
            ["more than one domain found for the pod group: a, b"]
        );
        // A member on a node without the label.
        let nodes = [node("a1", Some("a")), node("x", None)];
        assert!(generate(&group(&["zone"], &["x"]), &nodes).is_err());
    }
}
