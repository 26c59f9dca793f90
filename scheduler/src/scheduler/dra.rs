//! The dynamic resource allocation objects' bookkeeping: each DeviceClass,
//! ResourceClaim, ResourceClaimTemplate, ResourceSlice and DeviceTaintRule change
//! updates the view the DynamicResources plugin reads, and tells the queue, which
//! may retry the pods the plugin rejected (templates have no event: a claim made
//! from one does).

use super::Scheduler;
use berth_cluster::dra::{Dra, DraChange};
use berth_sdk::dra::{DeviceTaintRule, ResourceSlice};
use berth_sdk::{ActionType, ClusterEvent, EventResource, Object};

/// A cluster event with the object before and after it.
type Event = (ClusterEvent, Option<Object>, Option<Object>);

impl Scheduler {
    /// The cluster's dynamic resource allocation objects, as plugins read them.
    pub fn dra(&self) -> &Dra {
        &self.cluster.dra
    }

    /// A `resource.k8s.io` object appeared, changed or is gone.
    pub fn apply_dra(&mut self, change: DraChange) {
        for (event, old, new) in apply(&self.cluster.dra, change) {
            self.event(event, old, new);
        }
    }

    /// The embedded cluster's resourceclaim controller for a new pod: makes the
    /// claims of its template entries (`cluster::dra::claims_from_templates`; the pod
    /// records them). False, changing nothing, when a template does not exist yet.
    pub fn make_claims_from_templates(&mut self, pod: &mut berth_sdk::Pod) -> bool {
        let Some(claims) = berth_cluster::dra::claims_from_templates(&self.cluster.dra, pod) else {
            return false;
        };
        for claim in claims {
            self.apply_dra(DraChange::Claim(claim));
        }
        true
    }

    /// The embedded cluster's resourceclaim controller once the pod of `uid` is gone
    /// (`cluster::dra::released_by_pod`).
    pub fn release_claims_of(&mut self, uid: &str) {
        for change in berth_cluster::dra::released_by_pod(&self.cluster.dra, uid) {
            self.apply_dra(change);
        }
    }

    /// A `resource.k8s.io` object appeared (`old` none) or changed, already in the
    /// view: the event that may make pods DynamicResources rejected schedulable.
    pub(super) fn dra_event(&mut self, resource: EventResource, old: Option<Object>, new: Object) {
        let (event, old, new) = changed(resource, old, new);
        self.event(event, old, new);
    }
}

fn changed(resource: EventResource, old: Option<Object>, new: Object) -> Event {
    let actions = if old.is_some() {
        ActionType::UPDATE_OTHER
    } else {
        ActionType::ADD
    };
    (ClusterEvent::new(resource, actions), old, Some(new))
}

/// A deletion's event; none for an object the view did not have.
fn deleted(resource: EventResource, old: Option<Object>) -> Option<Event> {
    old.map(|o| {
        (
            ClusterEvent::new(resource, ActionType::DELETE),
            Some(o),
            None,
        )
    })
}

/// Applies `change` to the view; answers the events the queue hears of it.
fn apply(dra: &Dra, change: DraChange) -> Vec<Event> {
    match change {
        DraChange::Class(c) => {
            let old = dra.set_class(c.clone());
            let old = old.map(|o| Object::DeviceClass((*o).clone()));
            vec![changed(
                EventResource::DeviceClass,
                old,
                Object::DeviceClass(c),
            )]
        }
        DraChange::ClassDeleted(name) => {
            let old = dra.remove_class(&name);
            let old = old.map(|o| Object::DeviceClass((*o).clone()));
            deleted(EventResource::DeviceClass, old)
                .into_iter()
                .collect()
        }
        DraChange::Claim(c) => {
            let old = dra.set_claim(c.clone());
            let old = old.map(|o| Object::ResourceClaim((*o).clone()));
            vec![changed(
                EventResource::ResourceClaim,
                old,
                Object::ResourceClaim(c),
            )]
        }
        DraChange::ClaimDeleted { namespace, name } => {
            let old = dra.remove_claim(&namespace, &name);
            let old = old.map(|o| Object::ResourceClaim((*o).clone()));
            deleted(EventResource::ResourceClaim, old)
                .into_iter()
                .collect()
        }
        // Templates are read when a pod's claims are made; no plugin's
        // hint waits on them.
        DraChange::Template(t) => {
            dra.set_template(t);
            Vec::new()
        }
        DraChange::TemplateDeleted { namespace, name } => {
            dra.remove_template(&namespace, &name);
            Vec::new()
        }
        DraChange::Slice(s) => {
            let old = dra.set_slice(s.clone());
            let old = old.map(|o| Object::ResourceSlice((*o).clone()));
            vec![changed(
                EventResource::ResourceSlice,
                old,
                Object::ResourceSlice(s),
            )]
        }
        DraChange::SliceDeleted(name) => {
            let old = dra.remove_slice(&name);
            let old = old.map(|o| Object::ResourceSlice((*o).clone()));
            deleted(EventResource::ResourceSlice, old)
                .into_iter()
                .collect()
        }
        DraChange::TaintRule(r) => {
            let new = r.clone();
            let old = dra.set_taint_rule(r);
            taint_rule_changed(dra, old.as_deref(), Some(&new))
        }
        DraChange::TaintRuleDeleted(name) => {
            let old = dra.remove_taint_rule(&name);
            taint_rule_changed(dra, old.as_deref(), None)
        }
    }
}

/// A DeviceTaintRule changed: the slices with a device it selects (before or after)
/// change as the scheduler sees them, taints and all, which upstream's slice tracker
/// reports as updates of those slices. Berth's slices do not carry the rules'
/// taints, so the event's old and new slice are the same object.
fn taint_rule_changed(
    dra: &Dra,
    old: Option<&DeviceTaintRule>,
    new: Option<&DeviceTaintRule>,
) -> Vec<Event> {
    let selects = |rule: Option<&DeviceTaintRule>, slice: &ResourceSlice| {
        rule.is_some_and(|r| {
            slice
                .devices
                .iter()
                .any(|d| r.selector.selects(&slice.driver, &slice.pool.name, &d.name))
        })
    };
    dra.slices()
        .into_iter()
        .filter(|s| selects(old, s) || selects(new, s))
        .map(|slice| {
            let object = Object::ResourceSlice((*slice).clone());
            (
                ClusterEvent::new(EventResource::ResourceSlice, ActionType::UPDATE_OTHER),
                Some(object.clone()),
                Some(object),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use berth_sdk::dra::{
        Device, DeviceClass, DeviceTaint, DeviceTaintEffect, DeviceTaintSelector, ResourceClaim,
        ResourceClaimTemplate, ResourcePool,
    };

    fn kinds(events: &[Event]) -> Vec<(EventResource, ActionType, bool, bool)> {
        events
            .iter()
            .map(|(e, old, new)| (e.resource, e.actions, old.is_some(), new.is_some()))
            .collect()
    }

    fn slice(name: &str, driver: &str, pool: &str, device: &str) -> ResourceSlice {
        ResourceSlice {
            name: name.into(),
            driver: driver.into(),
            pool: ResourcePool {
                name: pool.into(),
                generation: 1,
                resource_slice_count: 1,
            },
            devices: vec![Device {
                name: device.into(),
                ..Device::default()
            }],
            ..ResourceSlice::default()
        }
    }

    #[test]
    fn each_change_of_a_claim_slice_or_class_is_an_event_with_its_objects() {
        let dra = Dra::new();
        let claim = ResourceClaim {
            namespace: "ns".into(),
            name: "gpu".into(),
            resource_version: "1".into(),
            ..ResourceClaim::default()
        };
        let events = apply(&dra, DraChange::Claim(claim.clone()));
        assert_eq!(
            kinds(&events),
            [(EventResource::ResourceClaim, ActionType::ADD, false, true)]
        );
        assert_eq!(events[0].2, Some(Object::ResourceClaim(claim.clone())));
        let mut newer = claim.clone();
        newer.resource_version = "2".into();
        let events = apply(&dra, DraChange::Claim(newer.clone()));
        assert_eq!(
            kinds(&events),
            [(
                EventResource::ResourceClaim,
                ActionType::UPDATE_OTHER,
                true,
                true
            )]
        );
        assert_eq!(events[0].1, Some(Object::ResourceClaim(claim)));
        assert_eq!(events[0].2, Some(Object::ResourceClaim(newer.clone())));
        let events = apply(
            &dra,
            DraChange::ClaimDeleted {
                namespace: "ns".into(),
                name: "gpu".into(),
            },
        );
        assert_eq!(
            kinds(&events),
            [(
                EventResource::ResourceClaim,
                ActionType::DELETE,
                true,
                false
            )]
        );
        assert_eq!(events[0].1, Some(Object::ResourceClaim(newer)));
        // Gone already: nothing to tell.
        assert!(
            apply(
                &dra,
                DraChange::ClaimDeleted {
                    namespace: "ns".into(),
                    name: "gpu".into(),
                }
            )
            .is_empty()
        );

        let s = slice("n1-gpu", "gpu.example.com", "n1", "gpu-0");
        assert_eq!(
            kinds(&apply(&dra, DraChange::Slice(s.clone()))),
            [(EventResource::ResourceSlice, ActionType::ADD, false, true)]
        );
        assert_eq!(
            kinds(&apply(&dra, DraChange::Slice(s))),
            [(
                EventResource::ResourceSlice,
                ActionType::UPDATE_OTHER,
                true,
                true
            )]
        );
        assert_eq!(
            kinds(&apply(&dra, DraChange::SliceDeleted("n1-gpu".into()))),
            [(
                EventResource::ResourceSlice,
                ActionType::DELETE,
                true,
                false
            )]
        );

        let class = DeviceClass {
            name: "gpu.example.com".into(),
            uid: "u".into(),
            selectors: Vec::new(),
            config: Vec::new(),
            extended_resource_name: None,
        };
        let events = apply(&dra, DraChange::Class(class.clone()));
        assert_eq!(
            kinds(&events),
            [(EventResource::DeviceClass, ActionType::ADD, false, true)]
        );
        assert_eq!(events[0].2, Some(Object::DeviceClass(class)));
        assert_eq!(
            kinds(&apply(
                &dra,
                DraChange::ClassDeleted("gpu.example.com".into())
            )),
            [(EventResource::DeviceClass, ActionType::DELETE, true, false)]
        );
        // Templates update the view only.
        let events = apply(
            &dra,
            DraChange::Template(ResourceClaimTemplate {
                namespace: "ns".into(),
                name: "one-gpu".into(),
                ..ResourceClaimTemplate::default()
            }),
        );
        assert!(events.is_empty());
        assert!(dra.template("ns", "one-gpu").is_some());
    }

    #[test]
    fn a_taint_rule_is_an_update_of_the_slices_it_selects_before_or_after() {
        let dra = Dra::new();
        dra.set_slice(slice("n1-gpu", "gpu.example.com", "n1", "gpu-0"));
        dra.set_slice(slice("n2-gpu", "gpu.example.com", "n2", "gpu-0"));
        dra.set_slice(slice("n1-nic", "nic.example.com", "n1", "eth0"));
        let rule = |pool: &str| DeviceTaintRule {
            name: "drain".into(),
            selector: DeviceTaintSelector {
                driver: Some("gpu.example.com".into()),
                pool: Some(pool.into()),
                device: None,
            },
            taint: DeviceTaint {
                key: "drain".into(),
                value: String::new(),
                effect: DeviceTaintEffect::NoSchedule,
                time_added_ms: None,
            },
        };
        let names = |events: Vec<Event>| -> Vec<String> {
            events
                .into_iter()
                .map(|(e, old, new)| {
                    assert_eq!(
                        e,
                        ClusterEvent::new(EventResource::ResourceSlice, ActionType::UPDATE_OTHER)
                    );
                    assert_eq!(old, new);
                    new.unwrap().as_resource_slice().unwrap().name.clone()
                })
                .collect()
        };
        assert_eq!(
            names(apply(&dra, DraChange::TaintRule(rule("n1")))),
            ["n1-gpu"]
        );
        // Moved to another pool: the slices it leaves and the ones it takes.
        assert_eq!(
            names(apply(&dra, DraChange::TaintRule(rule("n2")))),
            ["n1-gpu", "n2-gpu"]
        );
        assert_eq!(
            names(apply(&dra, DraChange::TaintRuleDeleted("drain".into()))),
            ["n2-gpu"]
        );
        assert!(apply(&dra, DraChange::TaintRuleDeleted("drain".into())).is_empty());
    }
}
