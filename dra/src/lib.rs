//! Dynamic resource allocation for Berth.
#![deny(missing_docs)]

pub mod cel;
