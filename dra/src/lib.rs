//! Dynamic resource allocation for Berth: kube-scheduler's structured allocator
//! (`k8s.io/dynamic-resource-allocation/structured`) in Rust, with the CEL device
//! selectors it evaluates. The DynamicResources plugin calls it in the sandbox, so it
//! builds for `wasm32-wasip2` as well as natively.
//!
//! ```
//! use berth_dra::{AllocatedState, Allocator, Features};
//! use berth_sdk::Node;
//! use berth_sdk::dra::*;
//!
//! let class = DeviceClass {
//!     name: "gpu".into(),
//!     uid: String::new(),
//!     selectors: vec![DeviceSelector { expression: r#"device.driver == "gpu.example.com""#.into() }],
//!     config: vec![],
//!     extended_resource_name: None,
//! };
//! let slice = ResourceSlice {
//!     name: "node-1-gpus".into(),
//!     driver: "gpu.example.com".into(),
//!     pool: ResourcePool { name: "node-1".into(), generation: 1, resource_slice_count: 1 },
//!     nodes: SliceNodes::NodeName("node-1".into()),
//!     devices: vec![Device { name: "gpu-0".into(), ..Device::default() }],
//!     shared_counters: vec![],
//! };
//! let claim = ResourceClaim {
//!     namespace: "default".into(),
//!     name: "gpu-claim".into(),
//!     spec: DeviceClaim {
//!         requests: vec![DeviceRequest::Exactly(DeviceSubRequest {
//!             name: "gpu".into(),
//!             device_class_name: "gpu".into(),
//!             selectors: vec![],
//!             allocation_mode: AllocationMode::ExactCount(1),
//!             admin_access: false,
//!             tolerations: vec![],
//!             capacity: Default::default(),
//!         })],
//!         ..DeviceClaim::default()
//!     },
//!     ..ResourceClaim::default()
//! };
//! let allocator = Allocator::new(Features::default(), vec![class], vec![slice], AllocatedState::default(), &[]);
//! let node = Node { name: "node-1".into(), ..Node::default() };
//! let results = allocator.allocate(&node, &[&claim]).unwrap().unwrap();
//! assert_eq!(results[0].devices[0].device, "gpu-0");
//! ```
#![deny(missing_docs)]

mod allocated;
mod allocator;
mod capacity;
pub mod cel;
mod features;
mod pools;
mod score;

pub use allocated::{AllocatedState, AllocatedStateError, ConsumedCapacity};
pub use allocator::{ALLOCATION_RESULTS_MAX_SIZE, Allocator, Devices, FIRST_AVAILABLE_MAX_SIZE};
pub use features::Features;
pub use pools::node_matches;
pub use score::prioritized_list_score;

/// Why claims could not be allocated on a node, other than there being no devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllocError {
    /// Only this node is affected (upstream's `ErrFailedAllocationOnNode`): invalid
    /// resource pools kept the claims from being allocated here. The scheduler
    /// reports it as why the node does not fit, and tries other nodes.
    OnNode(String),
    /// The input is wrong for every node: a missing class, a CEL error, a request
    /// that asks for too much or for a disabled feature. The scheduling attempt fails
    /// with it.
    Invalid(String),
}

impl std::fmt::Display for AllocError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AllocError::OnNode(m) | AllocError::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for AllocError {}
