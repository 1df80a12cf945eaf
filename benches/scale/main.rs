//! What each operation of a run costs on large repositories, beside what git or ripgrep pays
//! for the same work on the same tree. It makes committed repositories of 10,000 and 100,000
//! small files itself, runs each operation and its floor alternately, and prints the median
//! and minimum of both and their ratio.
//!
//!     cargo bench --bench scale                        # every section, both sizes
//!     cargo bench --bench scale -- --sizes 10000 --runs 5 --only search
//!
//! Floors that are other programs (`rg`) are skipped, with a line saying so, when the program
//! is not on PATH.
// A benchmark, like a test, stops at the first thing that goes wrong.
#![allow(clippy::expect_used, clippy::unwrap_used)]

// Each section uses a part of what the sections share.
#[allow(dead_code)]
mod common;
mod harness;
mod memory;
mod process;
mod setup;
mod tools;
mod whole;

use common::Options;

/// Measures one operation on a repository and prints its lines.
type Section = fn(&common::Repo, &Options);

/// Each section: its name (for `--only`) and what it measures.
const SECTIONS: &[(&str, Section)] = &[
    ("test run", harness::test_run),
    ("run_command", harness::run_command),
    ("commit", harness::commit),
    ("process wait", process::section),
    ("search", tools::search),
    ("list_files", tools::list_files),
    ("setup", setup::run),
    ("memory", memory::section),
    ("whole run", whole::section),
];

fn main() {
    // The memory section runs this binary again: for what libgit2 alone pays for a checkout,
    // and to measure a peak from a small process.
    if let Some(code) = memory::checkout_only().or_else(memory::peak_of) {
        std::process::exit(code);
    }
    let options = Options::from_args();
    println!(
        "median (min) of {} alternating runs; ratio = operation / floor, of medians",
        options.runs
    );
    for &files in &options.sizes {
        let started = std::time::Instant::now();
        let repo = common::Repo::make(files);
        println!(
            "\n## {files} files (made in {:.1} s)",
            started.elapsed().as_secs_f64()
        );
        for (name, section) in SECTIONS {
            if options.wants(name) {
                section(&repo, &options);
            }
        }
    }
}
