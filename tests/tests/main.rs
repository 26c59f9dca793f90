//! End-to-end tests of Berth across crates: one test binary, one module per subject.
//!
//! One binary rather than one per file: each would link wasmtime, cranelift, kube and
//! the whole host again, and tests in one binary run beside each other where files'
//! binaries ran one after another.

mod batching;
mod binding;
mod components;
mod conformance;
mod declared_features;
mod determinism;
mod differential;
mod dra_bench;
mod dra_gates;
mod gang_scale;
mod gangs;
mod hotswap;
mod page;
mod plugin_abi;
mod preemption;
mod sandbox;
mod shadow;
mod sit_out;
mod twins;
mod volumes;
