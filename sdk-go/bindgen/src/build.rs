//! `go build` of a plugin directory against the SDK, then the component.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The SDK's Go sources, embedded so that a `berth` binary builds Go plugins
/// without the repository: (path in the module, contents).
const SDK_FILES: &[(&str, &str)] = &[
    ("go.mod", include_str!("../../go.mod")),
    ("plugin.go", include_str!("../../plugin.go")),
    ("types.go", include_str!("../../types.go")),
    ("exports.go", include_str!("../../exports.go")),
    (
        "internal/wit/abi.go",
        include_str!("../../internal/wit/abi.go"),
    ),
];

/// The SDK's module path, which a plugin's go.mod requires.
pub const SDK_MODULE: &str = "example.invalid/berth/sdk-go";

/// What [`build`] needs besides the plugin's directory.
#[derive(Debug, Clone)]
pub struct GoBuild {
    /// The `go` command (default: `go` on `PATH`).
    pub go: PathBuf,
    /// The WIT source of the `berth:scheduler` package.
    pub wit: String,
}

/// Builds the Go plugin in `dir` into a component: the SDK and its generated
/// bindings are written to a temporary directory that a `go.work` joins to the
/// plugin's module, `go build -buildmode=c-shared` makes a WASI preview 1
/// reactor, and [`crate::componentize_source`] the component.
pub fn build(dir: &Path, opts: &GoBuild) -> Result<Vec<u8>> {
    if !dir.join("go.mod").is_file() {
        bail!("{}: no go.mod: not a Go module", dir.display());
    }
    let dir = dir
        .canonicalize()
        .with_context(|| format!("{}", dir.display()))?;
    let tmp = tempfile::tempdir()?;
    let sdk = tmp.path().join("sdk-go");
    for (path, text) in SDK_FILES {
        let p = sdk.join(path);
        std::fs::create_dir_all(p.parent().expect("a file in a directory"))?;
        std::fs::write(&p, text)?;
    }
    std::fs::write(
        sdk.join("internal/wit/zz_bindings.go"),
        crate::bindings_source(&opts.wit)?,
    )?;
    let work = tmp.path().join("go.work");
    std::fs::write(
        &work,
        format!(
            "go 1.26\n\nuse (\n\t{}\n\t{}\n)\n",
            dir.display(),
            sdk.display()
        ),
    )?;
    let core = tmp.path().join("core.wasm");
    let out = Command::new(&opts.go)
        .current_dir(&dir)
        .env("GOWORK", &work)
        .env("GOOS", "wasip1")
        .env("GOARCH", "wasm")
        .env(
            "GOTOOLCHAIN",
            std::env::var_os("GOTOOLCHAIN").unwrap_or_else(|| "local".into()),
        )
        .args(["build", "-buildmode=c-shared", "-o"])
        .arg(&core)
        .arg(".")
        .output()
        .with_context(|| format!("running {}", opts.go.display()))?;
    if !out.status.success() {
        bail!(
            "go build in {} failed ({}):\n{}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    crate::componentize_source(&opts.wit, &std::fs::read(&core)?)
}
