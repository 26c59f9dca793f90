//! In-tree volumes seen as their CSI driver's (upstream's `tryTranslatePVToCSI` and
//! csi-translation-lib): where a node's CSINode lists an in-tree plugin as migrated,
//! a bound GCE PD, AWS EBS, Azure Disk or Cinder volume is checked against that node
//! as the CSI driver would publish it. Only the node affinity matters here: the zone
//! topology moves to the driver's own key (from the volume's zone label when its node
//! affinity names no zone), and a beta region key becomes the GA one.

use berth_sdk::affinity::{NodeSelectorOperator, NodeSelectorRequirement, NodeSelectorTerm};
use berth_sdk::{CsiNode, PersistentVolume, PersistentVolumeSource};
use std::borrow::Cow;
use std::collections::BTreeSet;

const ZONE_GA: &str = "topology.kubernetes.io/zone";
const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
const REGION_GA: &str = "topology.kubernetes.io/region";
const REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
/// How a zone label lists the zones of a volume in several.
const MULTI_ZONE_DELIMITER: &str = "__";

/// The in-tree plugin of a volume, and the topology key its CSI driver publishes
/// zones under (`None`: the translation leaves the topology alone, as Azure Disk's).
fn in_tree_plugin(volume: &PersistentVolume) -> Option<(&'static str, Option<&'static str>)> {
    Some(match volume.source {
        PersistentVolumeSource::GcePersistentDisk { .. } => {
            ("kubernetes.io/gce-pd", Some("topology.gke.io/zone"))
        }
        PersistentVolumeSource::AwsElasticBlockStore { .. } => (
            "kubernetes.io/aws-ebs",
            Some("topology.ebs.csi.aws.com/zone"),
        ),
        PersistentVolumeSource::AzureDisk { .. } => ("kubernetes.io/azure-disk", None),
        PersistentVolumeSource::Cinder { .. } => (
            "kubernetes.io/cinder",
            Some("topology.cinder.csi.openstack.org/zone"),
        ),
        _ => return None,
    })
}

/// The volume as the node's scheduler sees it: translated to CSI when it is an
/// in-tree volume whose plugin the node's CSINode lists as migrated (migration is on
/// for all four plugins in 1.37), else as it is. An error when the translation fails
/// (a GCE PD in several zones whose region cannot be told from them).
pub fn for_node<'a>(
    volume: &'a PersistentVolume,
    csi_node: Option<&CsiNode>,
) -> Result<Cow<'a, PersistentVolume>, String> {
    let Some((plugin, topology_key)) = in_tree_plugin(volume) else {
        return Ok(Cow::Borrowed(volume));
    };
    if !csi_node.is_some_and(|n| n.migrated_plugins.iter().any(|p| p == plugin)) {
        return Ok(Cow::Borrowed(volume));
    }
    if matches!(
        volume.source,
        PersistentVolumeSource::GcePersistentDisk { .. }
    ) {
        check_gce_zones(volume)?;
    }
    let mut translated = volume.clone();
    if let Some(key) = topology_key {
        translate_topology(&mut translated, key);
    }
    Ok(Cow::Owned(translated))
}

/// A GCE PD in several zones (its zone label joins them with `__`) gets a regional
/// handle, so the zones must share one region (`{locale}-{region}-{zone}`).
fn check_gce_zones(volume: &PersistentVolume) -> Result<(), String> {
    let label = volume
        .labels
        .get(ZONE_BETA)
        .filter(|z| !z.is_empty())
        .or_else(|| volume.labels.get(ZONE_GA))
        .map(String::as_str)
        .unwrap_or_default();
    let zones: Vec<&str> = label.split(MULTI_ZONE_DELIMITER).collect();
    if zones.len() < 2 {
        return Ok(());
    }
    let mut regions = BTreeSet::new();
    for zone in &zones {
        let parts: Vec<&str> = zone.split('-').collect();
        if parts.len() != 3 {
            return Err(format!(
                "could not translate pv {:?}: failed to get region from zones: zone in unexpected format, expected: {{locale}}-{{region}}-{{zone}}, got: {zone}",
                volume.name
            ));
        }
        regions.insert(parts[..2].join("-"));
    }
    if regions.len() != 1 {
        return Err(format!(
            "could not translate pv {:?}: failed to get region from zones: multiple or no regions gotten from zones, got: {regions:?}",
            volume.name
        ));
    }
    Ok(())
}

fn requirements(volume: &PersistentVolume) -> impl Iterator<Item = &NodeSelectorRequirement> {
    volume
        .node_affinity
        .iter()
        .flatten()
        .flat_map(|t| &t.match_expressions)
}

fn has_key(volume: &PersistentVolume, key: &str) -> bool {
    requirements(volume).any(|r| r.key == key)
}

/// The values the node affinity gives `key`, over every term.
fn values(volume: &PersistentVolume, key: &str) -> BTreeSet<String> {
    requirements(volume)
        .filter(|r| r.key == key)
        .flat_map(|r| r.values.iter().cloned())
        .collect()
}

fn rename_key(volume: &mut PersistentVolume, from: &str, to: &str) {
    for term in volume.node_affinity.iter_mut().flatten() {
        for r in &mut term.match_expressions {
            if r.key == from {
                r.key = to.to_owned();
            }
        }
    }
}

/// The zone and region keys the volume uses (upstream's `getTopologyLabel`): GA or
/// beta, by its node affinity first, then by its labels; GA when it says nothing.
fn topology_keys(volume: &PersistentVolume) -> (&'static str, &'static str) {
    if has_key(volume, ZONE_GA) {
        (ZONE_GA, REGION_GA)
    } else if has_key(volume, ZONE_BETA) {
        (ZONE_BETA, REGION_BETA)
    } else if volume.labels.contains_key(ZONE_GA) {
        (ZONE_GA, REGION_GA)
    } else if volume.labels.contains_key(ZONE_BETA) {
        (ZONE_BETA, REGION_BETA)
    } else {
        (ZONE_GA, REGION_GA)
    }
}

/// Upstream's `translateTopologyFromInTreeToCSI`.
fn translate_topology(volume: &mut PersistentVolume, csi_key: &str) {
    let (zone_key, region_key) = topology_keys(volume);
    if !values(volume, zone_key).is_empty() {
        rename_key(volume, zone_key, csi_key);
    } else if let Some(label) = volume.labels.get(zone_key).cloned() {
        add_topology(volume, csi_key, label.split(MULTI_ZONE_DELIMITER));
    }
    // Nodes may carry only the GA region label.
    if region_key == REGION_BETA && !values(volume, region_key).is_empty() {
        rename_key(volume, region_key, REGION_GA);
    }
}

/// Requires `key` In `zones` (trimmed, without empties and duplicates) in every term
/// of the node affinity, making one when there is none; nothing when no zone is left.
fn add_topology<'z>(
    volume: &mut PersistentVolume,
    key: &str,
    zones: impl Iterator<Item = &'z str>,
) {
    let zones: BTreeSet<String> = zones
        .map(str::trim)
        .filter(|z| !z.is_empty())
        .map(str::to_owned)
        .collect();
    if zones.is_empty() {
        return;
    }
    let terms = volume.node_affinity.get_or_insert_with(Vec::new);
    if terms.is_empty() {
        terms.push(NodeSelectorTerm::default());
    }
    for term in terms {
        term.match_expressions.push(NodeSelectorRequirement {
            key: key.to_owned(),
            operator: NodeSelectorOperator::In,
            values: zones.iter().cloned().collect(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gce(labels: &[(&str, &str)], affinity: Option<Vec<NodeSelectorTerm>>) -> PersistentVolume {
        PersistentVolume {
            name: "pv".into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            source: PersistentVolumeSource::GcePersistentDisk {
                pd_name: "disk".into(),
            },
            node_affinity: affinity,
            ..PersistentVolume::default()
        }
    }

    fn migrated(plugin: &str) -> CsiNode {
        CsiNode {
            name: "node1".into(),
            migrated_plugins: vec![plugin.into()],
            ..CsiNode::default()
        }
    }

    fn req(key: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: NodeSelectorOperator::In,
            values: values.iter().map(|v| (*v).to_owned()).collect(),
        }
    }

    fn term(reqs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: reqs,
            match_fields: vec![],
        }
    }

    #[test]
    fn only_a_plugin_the_node_lists_as_migrated_is_translated() {
        let pv = gce(&[(ZONE_BETA, "us-east-1")], None);
        assert!(matches!(for_node(&pv, None).unwrap(), Cow::Borrowed(_)));
        let other = migrated("kubernetes.io/aws-ebs");
        assert!(matches!(
            for_node(&pv, Some(&other)).unwrap(),
            Cow::Borrowed(_)
        ));
        let node = migrated("kubernetes.io/gce-pd");
        let t = for_node(&pv, Some(&node)).unwrap();
        assert_eq!(
            t.node_affinity,
            Some(vec![term(vec![req(
                "topology.gke.io/zone",
                &["us-east-1"]
            )])])
        );
    }

    #[test]
    fn zone_keys_in_the_affinity_move_to_the_driver_key_and_beta_region_to_ga() {
        let pv = gce(
            &[],
            Some(vec![
                term(vec![req(ZONE_BETA, &["a"]), req(REGION_BETA, &["r"])]),
                term(vec![req(ZONE_BETA, &["b"])]),
            ]),
        );
        let node = migrated("kubernetes.io/gce-pd");
        let t = for_node(&pv, Some(&node)).unwrap();
        assert_eq!(
            t.node_affinity,
            Some(vec![
                term(vec![
                    req("topology.gke.io/zone", &["a"]),
                    req(REGION_GA, &["r"])
                ]),
                term(vec![req("topology.gke.io/zone", &["b"])]),
            ])
        );
    }

    #[test]
    fn zones_from_the_label_join_every_term() {
        let pv = PersistentVolume {
            source: PersistentVolumeSource::AwsElasticBlockStore {
                volume_id: "vol-1".into(),
            },
            ..gce(
                &[(ZONE_GA, "b__a__ __a")],
                Some(vec![term(vec![req("rack", &["1"])]), term(vec![])]),
            )
        };
        let node = migrated("kubernetes.io/aws-ebs");
        let t = for_node(&pv, Some(&node)).unwrap();
        let key = "topology.ebs.csi.aws.com/zone";
        assert_eq!(
            t.node_affinity,
            Some(vec![
                term(vec![req("rack", &["1"]), req(key, &["a", "b"])]),
                term(vec![req(key, &["a", "b"])]),
            ])
        );
    }

    #[test]
    fn azure_disk_keeps_its_topology() {
        let pv = PersistentVolume {
            source: PersistentVolumeSource::AzureDisk {
                disk_uri: "uri".into(),
            },
            ..gce(&[(ZONE_GA, "eastus-1")], None)
        };
        let node = migrated("kubernetes.io/azure-disk");
        assert_eq!(for_node(&pv, Some(&node)).unwrap().node_affinity, None);
    }

    #[test]
    fn a_regional_gce_disk_needs_one_region() {
        let node = migrated("kubernetes.io/gce-pd");
        let ok = gce(&[(ZONE_GA, "us-east1-a__us-east1-b")], None);
        assert!(for_node(&ok, Some(&node)).is_ok());
        let bad = gce(&[(ZONE_GA, "us-east1-a__europe-west1-b")], None);
        assert!(
            for_node(&bad, Some(&node))
                .unwrap_err()
                .contains("multiple or no regions")
        );
        let odd = gce(&[(ZONE_GA, "a__b")], None);
        assert!(
            for_node(&odd, Some(&node))
                .unwrap_err()
                .contains("zone in unexpected format")
        );
    }
}
