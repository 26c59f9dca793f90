//! Checks of Berth's book (`docs/src`) and of the repository's own Markdown files:
//!
//! - [`build_book`] builds the book with mdBook's library, as `mdbook build docs`
//!   would, into a directory of its own, and fails on any warning mdBook gives;
//! - [`html_links`] checks that every relative link and anchor of the built book
//!   resolves, and [`markdown_links`] does the same for Markdown files read on the
//!   forge (README.md, CONTRIBUTING.md, ...), with the forge's heading anchors;
//! - [`samples`] finds the command samples of a Markdown file, and [`Runner`] runs
//!   them and compares what they print with what the sample says (see
//!   `docs/src/contributors/documentation.md` for how a sample is written);
//! - [`reference_fields`] reads the field paths the configuration reference
//!   documents, and [`compare_fields`] holds them against the fields the
//!   configuration accepts.
//!
//! `host/tests/book.rs` runs them all against the `berth` binary cargo built.

mod links;
mod reference;
mod samples;

pub use links::{html_links, markdown_links, slug};
pub use reference::{compare_fields, reference_fields};
pub use samples::{Runner, Sample, samples};

use std::path::Path;
use std::sync::{Arc, Mutex};

/// Builds the book whose `book.toml` is in `root` into `out` with mdBook's HTML
/// renderer. Anything mdBook warns about is an error too.
pub fn build_book(root: &Path, out: &Path) -> Result<(), String> {
    let log = Arc::new(Mutex::new(Vec::<u8>::new()));
    let writer = {
        let log = Arc::clone(&log);
        move || Log(Arc::clone(&log))
    };
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .without_time()
        .with_writer(writer)
        .finish();
    let built = tracing::subscriber::with_default(subscriber, || {
        let mut book = mdbook_driver::MDBook::load(root).map_err(|e| format!("{e:#}"))?;
        book.config.build.build_dir = out.to_path_buf();
        book.build().map_err(|e| format!("{e:#}"))
    });
    let warnings = String::from_utf8_lossy(&log.lock().expect("the log")).into_owned();
    match built {
        Err(e) => Err(format!("mdBook failed: {e}\n{warnings}")),
        Ok(()) if !warnings.trim().is_empty() => Err(format!("mdBook warned:\n{warnings}")),
        Ok(()) => Ok(()),
    }
}

/// Where mdBook's log goes while the book is built.
struct Log(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("the log").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The Markdown files read on the forge rather than in the book.
pub const PAGES: [&str; 5] = [
    "README.md",
    "CONTRIBUTING.md",
    "CHANGELOG.md",
    "ARCHITECTURE.md",
    "BENCHMARKS.md",
];

/// Every Markdown file whose links and samples are checked: [`PAGES`] and the book's.
pub fn markdown_files(repo: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = PAGES.iter().map(|p| repo.join(p)).collect();
    files.extend(book_files(&repo.join("docs/src")));
    files
}

/// The Markdown files of the book's `src` directory, sorted.
pub fn book_files(src: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read the book's directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}
