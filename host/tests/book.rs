//! The book (`docs/`) and the repository's own pages against the `berth` cargo just
//! built: every marked command sample prints what it shows, the command reference
//! holds `--help` of every subcommand, the configuration reference every field the
//! configuration accepts, the README stays one page, and LICENSE, CONTRIBUTING.md and
//! CHANGELOG.md agree with the workspace. That the book builds and its links resolve
//! is `docs/tests/book.rs`. How a sample is marked:
//! `docs/src/contributors/documentation.md`.
//!
//! Fast subset: `cargo test --release -p berth --test end_to_end book::`.

use crate::common::{component_cache, workspace};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn book_src() -> PathBuf {
    workspace().join("docs/src")
}

#[test]
fn the_readme_is_one_page_with_the_two_set_up_commands() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines < 200,
        "README.md has {lines} lines; the rest belongs in the book"
    );
    for command in [
        "$ cargo run --release -- simulate examples/cluster.yaml",
        "$ cargo test --workspace --release",
    ] {
        assert!(readme.contains(command), "README.md lacks `{command}`");
    }
    // CI runs exactly the README's test command.
    let ci = std::fs::read_to_string(workspace().join(".ci/run")).unwrap();
    assert!(
        ci.contains("\ncargo test --workspace --release --no-fail-fast 2>&1"),
        ".ci/run no longer runs the README's test command"
    );
}

/// Every marked sample, with what is wrong with the marks themselves.
fn all_samples() -> Vec<berth_docs::Sample> {
    let mut samples = Vec::new();
    let mut problems = Vec::new();
    for file in berth_docs::markdown_files(&workspace()) {
        match berth_docs::samples(&file) {
            Ok(s) => samples.extend(s),
            Err(e) => problems.extend(e),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    samples
}

#[test]
fn every_sample_prints_what_it_shows() {
    let runner = berth_docs::Runner {
        berth: PathBuf::from(env!("CARGO_BIN_EXE_berth")),
        repo: workspace(),
        env: vec![(
            "BERTH_CACHE_DIR".into(),
            component_cache().display().to_string(),
        )],
        timeout: Duration::from_secs(300),
    };
    let samples = all_samples();
    let run: Vec<_> = samples.iter().filter(|s| s.skip.is_none()).collect();
    assert!(run.len() >= 20, "only {} samples are run", run.len());
    let failures: Vec<String> = run.iter().filter_map(|s| runner.run(s).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} samples differ from what their commands print:\n\n{}",
        failures.len(),
        run.len(),
        failures.join("\n\n")
    );
}

/// `berth`'s subcommands, as `berth [PATH] --help` lists them: `simulate`,
/// `config validate`, ...
fn subcommands(path: &[&str]) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_berth"))
        .args(path)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let Some((_, list)) = help.split_once("\nCommands:\n") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for line in list.lines().take_while(|l| l.starts_with("  ")) {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        if name == "help" {
            continue;
        }
        let mut sub: Vec<&str> = path.to_vec();
        sub.push(name);
        found.push(sub.join(" "));
        found.extend(subcommands(&sub));
    }
    found
}

#[test]
fn the_command_reference_has_every_subcommands_help() {
    let reference = book_src().join("operators/commands.md");
    let samples = berth_docs::samples(&reference).unwrap();
    let run: Vec<&str> = samples
        .iter()
        .filter(|s| s.skip.is_none())
        .flat_map(|s| s.steps.iter().map(|step| step.command.as_str()))
        .collect();
    let commands = subcommands(&[]);
    assert!(commands.len() >= 10, "{commands:?}");
    let missing: Vec<String> = std::iter::once(String::new())
        .chain(commands.iter().map(|c| format!(" {c}")))
        .map(|c| format!("berth{c} --help"))
        .filter(|c| !run.contains(&c.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{} lacks a sample of: {missing:?}",
        reference.display()
    );
}

#[test]
fn the_configuration_reference_has_every_field() {
    let reference = book_src().join("operators/configuration.md");
    let documented = berth_docs::reference_fields(&reference);
    let accepted = berth::config::fields::fields();
    let problems = berth_docs::compare_fields(&documented, &accepted);
    assert!(
        problems.is_empty(),
        "{} and the configuration differ:\n{}",
        reference.display(),
        problems.join("\n")
    );
}

/// The workspace's `[workspace.package]` value of `key`.
fn workspace_package(key: &str) -> String {
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    let section = manifest
        .split("[workspace.package]")
        .nth(1)
        .expect("a [workspace.package] table");
    section
        .lines()
        .take_while(|l| !l.starts_with('['))
        .find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
        })
        .unwrap_or_else(|| panic!("no {key} in [workspace.package]"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn license_contributing_and_changelog_agree_with_the_workspace() {
    assert_eq!(workspace_package("license"), "Apache-2.0");
    let license = read("LICENSE");
    assert!(
        license.trim_start().starts_with("Apache License")
            && license.contains("Version 2.0, January 2004")
            && license.contains("END OF TERMS AND CONDITIONS"),
        "LICENSE is not the Apache License 2.0 the workspace declares"
    );
    let version = workspace_package("version");
    let changelog = read("CHANGELOG.md");
    assert!(
        changelog.contains(&format!("## {version} ")),
        "CHANGELOG.md has no section for the workspace's version {version}"
    );
    let contributing = read("CONTRIBUTING.md");
    for needle in [
        "Apache-2.0",
        "cargo test --workspace --release",
        "CHANGELOG.md",
    ] {
        assert!(
            contributing.contains(needle),
            "CONTRIBUTING.md does not mention {needle}"
        );
    }
    assert!(read("README.md").contains("Apache-2.0"));
    // Every crate of the workspace takes the workspace's license, and the example
    // plugins (crates of their own) state the same one.
    for manifest in crate_manifests(&workspace()) {
        let text = std::fs::read_to_string(&manifest).unwrap();
        if !text.contains("[package]") {
            continue;
        }
        assert!(
            text.contains("license.workspace = true") || text.contains("license = \"Apache-2.0\""),
            "{} declares another license, or none",
            manifest.display()
        );
    }
}

/// Every Cargo.toml of the repository's crates (not of what cargo built).
fn crate_manifests(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for dir in [
        "host",
        "sdk",
        "dra",
        "artifacts",
        "docs",
        "plugins",
        "tests",
        "examples",
    ] {
        let mut dirs = vec![root.join(dir)];
        while let Some(d) = dirs.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if path.is_dir() && name != "target" && name != "src" && !name.starts_with('.') {
                    dirs.push(path);
                } else if name == "Cargo.toml" {
                    found.push(path);
                }
            }
        }
    }
    assert!(found.len() > 20, "{found:?}");
    found
}
