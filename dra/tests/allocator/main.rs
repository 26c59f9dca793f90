//! Upstream's allocator table (`structured/internal/allocatortesting`) as Berth's own
//! conformance cases: each row asserts the outcome upstream asserts, the allocation
//! results or the error text. Rows keep their upstream names; one module per area.

mod common;

mod admin_access;
mod all_devices;
mod basic;
mod binding_conditions;
mod combinations;
mod config;
mod constraints;
mod consumable_capacity;
mod partitionable;
mod pools;
mod prioritized_list;
mod taints;
