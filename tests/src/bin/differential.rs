//! Differential conformance at any size: `cargo run --release -p berth-tests --bin
//! differential -- [--seed N] [--cases N] [--out DIR] [--no-native]`. Generates
//! clusters from the seed on, explains each case's pending pod with Berth (wasm and
//! native) and with upstream kube-scheduler 1.37.2's plugins (the Go oracle in
//! tests/oracle), and prints progress, then a summary; each kind of divergence is
//! shrunk to a cluster file in the output directory. Exits 1 on any divergence or
//! error. `--dump` only writes the cases' cluster files to the output directory;
//! `--show-explained` prints each divergence the book explains, with its case's
//! file (kept in the output directory's `cases/`).

use berth_tests::differential::{Differential, generate, oracle_bin, out_dir};
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let mut seed = 1u64;
    let mut cases = 1000u64;
    let mut out: Option<PathBuf> = None;
    let mut native = true;
    let mut dump = false;
    let mut show_explained = false;
    let mut args = std::env::args().skip(1);
    let usage = "usage: differential [--seed N] [--cases N] [--out DIR] [--no-native] [--dump] [--show-explained]";
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| fail(&format!("{name} needs a value; {usage}")))
        };
        match a.as_str() {
            "--seed" => seed = number(&value("--seed"), "--seed"),
            "--cases" => cases = number(&value("--cases"), "--cases"),
            "--out" => out = Some(PathBuf::from(value("--out"))),
            "--no-native" => native = false,
            "--dump" => dump = true,
            "--show-explained" => show_explained = true,
            "-h" | "--help" => {
                println!("{usage}");
                return;
            }
            other => fail(&format!("unknown argument {other:?}; {usage}")),
        }
    }
    let out = out.unwrap_or_else(out_dir);
    if dump {
        std::fs::create_dir_all(&out).unwrap_or_else(|e| fail(&format!("{}: {e}", out.display())));
        for i in 0..cases {
            let case = generate::case(seed.wrapping_add(i));
            let file = out.join(format!("case-{}.yaml", case.seed));
            std::fs::write(&file, case.to_file_text())
                .unwrap_or_else(|e| fail(&format!("{}: {e}", file.display())));
            println!("{} {}", file.display(), case.pod);
        }
        return;
    }
    let bin = oracle_bin().unwrap_or_else(|e| fail(&e));
    let mut d = Differential::new(berth_tests::runtime(), &bin).unwrap_or_else(|e| fail(&e));
    d.native = native;
    d.show_explained = show_explained;
    if show_explained {
        // The cases named must stay to be read.
        d.keep = Some(out.join("cases"));
        std::fs::create_dir_all(out.join("cases"))
            .unwrap_or_else(|e| fail(&format!("{}: {e}", out.display())));
    }
    let start = Instant::now();
    let mut last = Instant::now();
    let summary = d.run(seed, cases, &out, |s| {
        if last.elapsed().as_secs() >= 10 || s.cases == cases {
            last = Instant::now();
            let rate = s.cases as f64 / start.elapsed().as_secs_f64();
            eprintln!(
                "differential: {}/{cases} cases, {} diverging kinds, {} errors ({rate:.1} cases/s)",
                s.cases,
                s.divergences.len(),
                s.errors.len()
            );
        }
    });
    println!(
        "seed {seed}, {} cases in {:.0} s\n{summary}",
        summary.cases,
        start.elapsed().as_secs_f64()
    );
    if !summary.clean() {
        std::process::exit(1);
    }
}

fn number(s: &str, name: &str) -> u64 {
    s.parse()
        .unwrap_or_else(|_| fail(&format!("{name}: {s:?} is not a whole number")))
}

fn fail(msg: &str) -> ! {
    eprintln!("differential: {msg}");
    std::process::exit(2)
}
