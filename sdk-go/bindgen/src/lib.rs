//! The Go SDK's build-time half: Go bindings to Berth's WIT package, generated from
//! `wit/` with `wit-parser` (never checked in), and the step that turns the WASI
//! preview 1 reactor `go build` makes into a component of the `scheduler-plugin`
//! world.
//!
//! ```no_run
//! let wit = std::path::Path::new("wit");
//! let go = berth_go_bindgen::bindings(wit).unwrap();
//! std::fs::write("/tmp/zz_bindings.go", go).unwrap();
//! let core = std::fs::read("/tmp/plugin.core.wasm").unwrap();
//! let component = berth_go_bindgen::componentize(wit, &core).unwrap();
//! std::fs::write("/tmp/plugin.wasm", component).unwrap();
//! ```
#![deny(missing_docs)]

use std::path::Path;

use anyhow::{Context, Result};
use wit_parser::{Resolve, WorldId};

mod build;
mod core;
mod golang;

pub use build::{GoBuild, SDK_MODULE, build};

/// The world every plugin is built for.
pub const WORLD: &str = "scheduler-plugin";

/// The Go package the bindings belong to (`sdk-go/internal/wit`).
pub const GO_PACKAGE: &str = "wit";

/// The WIT source of the package in `wit` (its one file, `scheduler.wit`).
pub fn wit_source(wit: &Path) -> Result<String> {
    let file = wit.join("scheduler.wit");
    std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))
}

fn load(wit: &str) -> Result<(Resolve, WorldId)> {
    let mut resolve = Resolve::default();
    let pkg = resolve
        .push_str("scheduler.wit", wit)
        .context("reading the WIT package")?;
    let world = resolve.select_world(&[pkg], Some(WORLD))?;
    Ok((resolve, world))
}

/// The Go source of the bindings to the `scheduler-plugin` world of the WIT package
/// in `wit`: its types, their canonical-ABI lifting and lowering, the host's
/// functions as Go functions, and every export as a `//go:wasmexport` function that
/// calls the `Export<Interface>` value the SDK sets.
pub fn bindings(wit: &Path) -> Result<String> {
    bindings_source(&wit_source(wit)?)
}

/// [`bindings`] of a WIT source.
pub fn bindings_source(wit: &str) -> Result<String> {
    let (resolve, world) = load(wit)?;
    golang::generate(&resolve, world, GO_PACKAGE)
}

/// Turns a core module built by `GOOS=wasip1 GOARCH=wasm go build
/// -buildmode=c-shared` with the bindings into a component: the world's WIT is
/// embedded and the WASI preview 1 imports are adapted to preview 2 with the
/// reactor adapter of the wasmtime release the host runs.
pub fn componentize(wit: &Path, core: &[u8]) -> Result<Vec<u8>> {
    componentize_source(&wit_source(wit)?, core)
}

/// [`componentize`] with a WIT source.
pub fn componentize_source(wit: &str, core: &[u8]) -> Result<Vec<u8>> {
    let (resolve, world) = load(wit)?;
    let mut module = core::prepare(core)?;
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )?;
    wit_component::ComponentEncoder::default()
        .module(&module)?
        .adapter(
            "wasi_snapshot_preview1",
            wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )?
        .validate(true)
        .encode()
        .context("making the component")
}
