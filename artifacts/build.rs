//! Builds every plugin crate (plugins/*) and test fixture (tests/fixtures/*) into a
//! WebAssembly component, and writes `artifacts.rs` naming each one.
//!
//! The components are built by a nested cargo for `wasm32-wasip2` with a target
//! directory of its own (the outer build holds the lock on the main one), so
//! `cargo build`, `cargo run` and `cargo test` need nothing but the Rust toolchain.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let root = manifest_dir
        .parent()
        .expect("artifacts/ sits in the workspace")
        .to_path_buf();
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));

    for watched in [
        "plugins",
        "tests/fixtures",
        "sdk",
        "dra",
        "wit",
        "Cargo.lock",
        "Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    println!("cargo:rerun-if-env-changed=BERTH_WASM_TARGET_DIR");

    let mut plugins = crates_in(&root.join("plugins"));
    let mut fixtures = crates_in(&root.join("tests/fixtures"));
    // A developer knob: build only these crates (comma-separated), e.g. while another
    // plugin crate is half-written. Unset in CI and normal builds.
    println!("cargo:rerun-if-env-changed=BERTH_ARTIFACTS_ONLY");
    if let Ok(only) = std::env::var("BERTH_ARTIFACTS_ONLY") {
        let keep: Vec<&str> = only.split(',').map(str::trim).collect();
        plugins.retain(|(n, _)| keep.contains(&n.as_str()));
        fixtures.retain(|(n, _)| keep.contains(&n.as_str()));
    }

    // <target>/<profile>/build/berth-artifacts-<hash>/out -> <target>/wasm-plugins
    let target_dir = match std::env::var_os("BERTH_WASM_TARGET_DIR") {
        Some(d) => PathBuf::from(d),
        None => out_dir
            .ancestors()
            .nth(4)
            .map(|t| t.join("wasm-plugins"))
            .unwrap_or_else(|| out_dir.join("wasm-plugins")),
    };

    ensure_target_installed();

    // The plugins as the scheduler runs them: one codegen unit with the SDK inlined
    // into the plugin (the per-node calls of Filter and Score run through SDK
    // helpers). The fixtures only have to behave, not to be fast: built without LTO,
    // each takes seconds rather than the half minute a whole-program optimization
    // of std, serde and the SDK costs per crate.
    build(
        &root,
        &target_dir,
        PLUGIN_PROFILE,
        &plugins,
        &[
            "profile.release.lto=true",
            "profile.release.codegen-units=1",
        ],
    );
    build(
        &root,
        &target_dir,
        FIXTURE_PROFILE,
        &fixtures,
        &["profile.fixtures.inherits=\"release\""],
    );

    let wasm_dir = target_dir.join(TARGET).join(PLUGIN_PROFILE);
    let fixture_dir = target_dir.join(TARGET).join(FIXTURE_PROFILE);
    let mut src = String::new();
    src.push_str("/// The built-in plugin components, one per crate in plugins/.\n");
    src.push_str("pub const PLUGINS: &[Artifact] = &[\n");
    for (name, _) in &plugins {
        let path = wasm_path(&wasm_dir, name);
        writeln!(
            src,
            "    Artifact {{ crate_name: {name:?}, path: {p:?}, bytes: include_bytes!({p:?}) }},",
            p = path.display().to_string()
        )
        .unwrap();
    }
    src.push_str("];\n\n");
    src.push_str(
        "/// Test fixtures (tests/fixtures/*): paths of their components.\npub mod fixtures {\n",
    );
    for (name, _) in &fixtures {
        let path = wasm_path(&fixture_dir, name);
        let konst = name.to_uppercase().replace('-', "_");
        writeln!(
            src,
            "    /// The component of the `{name}` fixture.\n    pub const {konst}: &str = {:?};",
            path.display().to_string()
        )
        .unwrap();
    }
    src.push_str(
        "}\n\n/// Components of the built-in plugins, by crate name.\npub mod plugin_paths {\n",
    );
    for (name, _) in &plugins {
        let path = wasm_path(&wasm_dir, name);
        let konst = name.to_uppercase().replace('-', "_");
        writeln!(
            src,
            "    /// The component of the `{name}` plugin.\n    pub const {konst}: &str = {:?};",
            path.display().to_string()
        )
        .unwrap();
    }
    src.push_str("}\n");
    std::fs::write(out_dir.join("artifacts.rs"), src).expect("write artifacts.rs");
}

/// The cargo profile the plugins are built with (`release`, tuned by [`build`]'s
/// `--config`s), and the one of the test fixtures.
const PLUGIN_PROFILE: &str = "release";
const FIXTURE_PROFILE: &str = "fixtures";

/// Builds `crates` for wasm32-wasip2 with `profile` (and `configs` on top of the
/// settings every component gets) into `target_dir`.
fn build(
    root: &Path,
    target_dir: &Path,
    profile: &str,
    crates: &[(String, PathBuf)],
    configs: &[&str],
) {
    if crates.is_empty() {
        return;
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--profile")
        .arg(profile)
        .arg("--target")
        .arg(TARGET)
        .arg("--target-dir")
        .arg(target_dir)
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"));
    for config in configs {
        cmd.args(["--config", config]);
    }
    // Symbols stay (trap backtraces name functions); debug info goes.
    cmd.args(["--config", &format!("profile.{profile}.debug=false")])
        .args([
            "--config",
            &format!("profile.{profile}.strip=\"debuginfo\""),
        ]);
    for (name, _) in crates {
        cmd.arg("-p").arg(name);
    }
    // Flags meant for the host build must not leak into the wasm build.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_MAKEFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    let output = cmd
        .output()
        .expect("failed to run cargo for the plugin components");
    if !output.status.success() {
        panic!(
            "building the {profile} components for {TARGET} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

fn wasm_path(dir: &Path, crate_name: &str) -> PathBuf {
    let path = dir.join(format!("{}.wasm", crate_name.replace('-', "_")));
    assert!(
        path.exists(),
        "cargo built {crate_name} but {} is missing",
        path.display()
    );
    path
}

/// Crates (package name, folder) directly under `dir`, sorted by name.
fn crates_in(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let manifest = entry.path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        if let Some(name) = package_name(&text) {
            out.push((name, entry.path()));
        }
    }
    out.sort();
    out
}

fn package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && let Some(rest) = line.strip_prefix("name") {
            let value = rest.trim_start().strip_prefix('=')?.trim();
            return Some(value.trim_matches('"').to_owned());
        }
    }
    None
}

/// A fresh machine has the toolchain from rust-toolchain.toml but, when the toolchain
/// was already installed, maybe not its wasm target: add it through rustup.
fn ensure_target_installed() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    if let Some(sysroot) = &sysroot
        && sysroot.join("lib/rustlib").join(TARGET).exists()
    {
        return;
    }
    let status = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status();
    match status {
        Ok(s) if s.success() => {}
        _ => panic!(
            "the {TARGET} target is not installed for this toolchain and `rustup target add {TARGET}` failed; install it and build again"
        ),
    }
}
