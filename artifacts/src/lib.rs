//! The WebAssembly components of Berth's plugins and test fixtures, built by this
//! crate's build script from plugins/* and tests/fixtures/*.
#![deny(missing_docs)]

/// A built plugin component.
#[derive(Debug)]
pub struct Artifact {
    /// The crate it was built from, e.g. `node-resources-fit`.
    pub crate_name: &'static str,
    /// Where the component file is.
    pub path: &'static str,
    /// The component's bytes, compiled into whatever links this crate.
    pub bytes: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/artifacts.rs"));
