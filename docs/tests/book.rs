//! The book builds and its links resolve: the checks that need no `berth` binary, so
//! `cargo test --release -p berth-docs` runs them in seconds. The samples and the
//! references are checked against the binary by `host/tests/book.rs`.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_path_buf()
}

#[test]
fn the_book_builds_and_every_link_resolves() {
    let out = tempfile::tempdir().unwrap();
    berth_docs::build_book(&repo().join("docs"), out.path()).unwrap();
    assert!(out.path().join("index.html").exists());
    let mut problems = berth_docs::html_links(out.path());
    for file in berth_docs::markdown_files(&repo()) {
        problems.extend(berth_docs::markdown_links(&repo(), &file));
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_console_block_is_marked() {
    let mut problems = Vec::new();
    let mut run = 0;
    for file in berth_docs::markdown_files(&repo()) {
        match berth_docs::samples(&file) {
            Ok(s) => run += s.iter().filter(|s| s.skip.is_none()).count(),
            Err(e) => problems.extend(e),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(run >= 20, "only {run} samples are run");
}
