//! libiscsi's whole conformance suite (iscsi-test-cu 1.19, `--dataloss`)
//! against the daemon, checked against the expected-skips list
//! (testdata/conformance/expected-skips.txt).
//!
//! Ignored by default (a few minutes); `scripts/test` runs it:
//! `cargo test --release --test conformance_suite -- --ignored --nocapture`.
//!
//! One target with two portals (for the suite's multipath tests) and five
//! LUs; the RUNS table says which tests run against which LU. The suite
//! logs go to target/conformance/.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

#[path = "support/cu.rs"]
mod cu;
mod support;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use cu::{Cover, Outcome, RunResult};
use support::{tool, Target};

const NAME: &str = "iqn.2026-11.io.ironlun:conformance";
const INITIATOR_1: &str = "iqn.2026-11.io.ironlun:conformance-initiator-1";
const INITIATOR_2: &str = "iqn.2026-11.io.ironlun:conformance-initiator-2";

/// What a run executes.
enum Tests {
    /// `--test=ALL`.
    All,
    /// These families or suites, one invocation each.
    Some(&'static [&'static str]),
    /// Every test under this prefix, one invocation each (minus the tests
    /// the expected-skips list leaves out).
    Each(&'static str),
}

struct Run {
    name: &'static str,
    lun: u16,
    tests: Tests,
    allow_sanitize: bool,
    /// Pass the second portal's URL for the multipath tests.
    multipath: bool,
}

/// LUs of the target, by LUN.
fn lun_specs(dir: &std::path::Path) -> Vec<String> {
    vec![
        // 0: the main LU.
        "ram:128MiB,thin,sanitize".into(),
        // 1: the same on a file.
        format!(
            "file:{},size=128MiB,thin,sanitize",
            dir.join("lun1.img").display()
        ),
        // 2: 512e, 8 logical blocks per physical block.
        "ram:64MiB,thin,pbs=4096".into(),
        // 3: read-only.
        "ram:64MiB,thin,ro".into(),
        // 4: fully provisioned.
        "ram:64MiB".into(),
    ]
}

const RUNS: &[Run] = &[
    Run {
        name: "ram",
        lun: 0,
        tests: Tests::All,
        allow_sanitize: false,
        multipath: true,
    },
    Run {
        name: "file",
        lun: 1,
        tests: Tests::All,
        allow_sanitize: false,
        multipath: true,
    },
    Run {
        name: "sanitize-ram",
        lun: 0,
        tests: Tests::Each("ALL.Sanitize."),
        allow_sanitize: true,
        multipath: false,
    },
    Run {
        name: "sanitize-file",
        lun: 1,
        tests: Tests::Each("ALL.Sanitize."),
        allow_sanitize: true,
        multipath: false,
    },
    Run {
        name: "512e",
        lun: 2,
        tests: Tests::Some(&[
            "ALL.CompareAndWrite",
            "ALL.WriteSame10",
            "ALL.WriteSame16",
            "ALL.Unmap",
        ]),
        allow_sanitize: false,
        multipath: false,
    },
    Run {
        name: "readonly",
        lun: 3,
        tests: Tests::Some(&["ALL.ReadOnly"]),
        allow_sanitize: false,
        multipath: false,
    },
    Run {
        name: "fully-provisioned",
        lun: 4,
        tests: Tests::Some(&["ALL.Inquiry"]),
        allow_sanitize: false,
        multipath: false,
    },
];

fn log_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/conformance");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs iscsi-test-cu once; its output goes to `log` and is parsed.
fn invoke(cu: &str, run: &Run, test: &str, urls: &[String], log: &std::path::Path) -> RunResult {
    let mut cmd = Command::new(cu);
    cmd.args(["-d", "-V", "-i", INITIATOR_1, "-I", INITIATOR_2]);
    if run.allow_sanitize {
        cmd.arg("-S");
    }
    cmd.arg(format!("--test={test}")).args(urls);
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .expect("run iscsi-test-cu");
    let text = String::from_utf8_lossy(&out.stdout);
    std::fs::write(log, text.as_bytes()).unwrap();
    let r = cu::parse(&text);
    assert!(
        r.summary.is_some(),
        "{test}: no CUnit summary (exit {:?}); stderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    r
}

fn list_tests(cu: &str, prefix: &str) -> Vec<String> {
    let out = Command::new(cu)
        .arg("--list")
        .output()
        .expect("iscsi-test-cu --list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with(prefix) && l.len() > prefix.len())
        .map(str::to_owned)
        .collect()
}

#[test]
#[ignore = "the whole libiscsi suite takes minutes: scripts/test runs it"]
fn libiscsi_suite_has_no_failures_and_only_expected_skips() {
    let cu = tool("iscsi-test-cu", "libiscsi-bin");
    let expected = cu::expected_skips(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("testdata/conformance/expected-skips.txt"),
        )
        .unwrap(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let specs = lun_specs(dir.path());
    let mut args = vec!["--name", NAME, "--state-dir", state.to_str().unwrap()];
    for s in &specs {
        args.extend(["--lun", s.as_str()]);
    }
    let t = Target::start_portals(&args, 2);
    let logs = log_dir();
    let mut problems = Vec::new();

    // The LU properties that keep the suite's unprintable skips out of
    // reach (cu::silent_skips).
    for (lun, spec) in specs.iter().enumerate() {
        let facts = cu::lu_facts(t.addr, NAME, lun as u16);
        for p in cu::silent_skips(&facts) {
            problems.push(format!("LUN {lun} ({spec}): {p}"));
        }
    }

    // Results by run name, then by test.
    let mut results: BTreeMap<&str, BTreeMap<String, Outcome>> = BTreeMap::new();
    for run in RUNS {
        let url = |portal: usize| format!("iscsi://{}/{NAME}/{}", t.addrs[portal], run.lun);
        let mut urls = vec![url(0)];
        if run.multipath {
            urls.push(url(1));
        }
        let selections: Vec<String> = match run.tests {
            Tests::All => vec!["ALL".into()],
            Tests::Some(list) => list.iter().map(|s| (*s).to_owned()).collect(),
            Tests::Each(prefix) => list_tests(&cu, prefix)
                .into_iter()
                .filter(|t| !cu::not_run(&expected, t.trim_start_matches("ALL.")))
                .collect(),
        };
        assert!(!selections.is_empty(), "run {} selects no tests", run.name);
        let started = std::time::Instant::now();
        let mut tests = BTreeMap::new();
        for (i, sel) in selections.iter().enumerate() {
            let log = logs.join(format!("{}-{i}.log", run.name));
            let r = invoke(&cu, run, sel, &urls, &log);
            let (total, ran, _, failed) = r.summary.unwrap_or_default();
            if failed != 0 || ran != total {
                problems.push(format!(
                    "run {} {sel}: {failed} of {total} failed, {ran} ran (log {})",
                    run.name,
                    log.display()
                ));
            }
            if r.tests.len() as u32 != total {
                problems.push(format!(
                    "run {} {sel}: parsed {} tests, CUnit counted {total} (log {})",
                    run.name,
                    r.tests.len(),
                    log.display()
                ));
            }
            tests.extend(r.tests);
        }
        println!(
            "run {:<13} LUN {} ({}): {} tests in {:.0?}",
            run.name,
            run.lun,
            specs[usize::from(run.lun)].split(',').next().unwrap_or(""),
            tests.len(),
            started.elapsed()
        );
        results.insert(run.name, tests);
    }

    // Failures, unexpected skips, and coverage claims.
    let mut used: BTreeMap<String, u32> = BTreeMap::new();
    for (run, tests) in &results {
        for (test, o) in tests {
            if o.failed || !o.passed {
                problems.push(format!("{run}: {test} failed"));
            }
            for msg in &o.skips {
                match cu::allowed(&expected, test, msg) {
                    None => problems.push(format!("{run}: {test} skipped unexpectedly: {msg}")),
                    Some(e) => {
                        *used.entry(e.test.clone() + " | " + &e.message).or_default() += 1;
                        if let Cover::Run(other) = &e.cover {
                            // Covered: the other run passes the test and
                            // does not skip it for this reason (any other
                            // skip there is checked on its own).
                            let covered = results
                                .get(other.as_str())
                                .and_then(|r| r.get(test))
                                .is_some_and(|o| {
                                    o.passed
                                        && !o.failed
                                        && !o.skips.iter().any(|m| {
                                            cu::allowed(&expected, test, m)
                                                .is_some_and(|again| std::ptr::eq(again, e))
                                        })
                                });
                            if !covered && !cu::not_run(&expected, test) {
                                problems.push(format!(
                                    "{run}: {test} skipped ({msg}), but run {other} does not pass it without skips"
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    println!("\nskips seen (times, entry, why):");
    for e in &expected {
        let key = e.test.clone() + " | " + &e.message;
        match (used.get(&key), &e.cover) {
            (_, Cover::NotRun) => println!("  not run  {}: {}", e.test, e.reason),
            (Some(n), _) => println!("  {n:>7}  {key}: {}", e.reason),
            (None, _) => {
                println!("  UNUSED   {key}");
                problems.push(format!(
                    "expected skip no run uses (remove it, or find what stopped the skip): {key}"
                ));
            }
        }
    }

    // Per-family summary over all runs.
    let mut families: BTreeMap<String, [u32; 3]> = BTreeMap::new();
    for tests in results.values() {
        for (test, o) in tests {
            let fam = test.split('.').next().unwrap_or(test).to_owned();
            let row = families.entry(fam).or_default();
            if o.failed || !o.passed {
                row[2] += 1;
            } else if !o.skips.is_empty() {
                row[1] += 1;
            } else {
                row[0] += 1;
            }
        }
    }
    let mut table = format!(
        "{:<28} {:>6} {:>6} {:>6}\n",
        "family", "pass", "skip", "fail"
    );
    let mut totals = [0u32; 3];
    for (fam, row) in &families {
        writeln!(table, "{fam:<28} {:>6} {:>6} {:>6}", row[0], row[1], row[2]).unwrap();
        for i in 0..3 {
            totals[i] += row[i];
        }
    }
    writeln!(
        table,
        "{:<28} {:>6} {:>6} {:>6}",
        "total (test runs)", totals[0], totals[1], totals[2]
    )
    .unwrap();
    println!("\n{table}");
    println!(
        "skip = passed, but the suite skipped part or all of it (each on the expected-skips list)"
    );
    let not_run: Vec<&str> = expected
        .iter()
        .filter(|e| e.cover == Cover::NotRun)
        .map(|e| e.test.as_str())
        .collect();
    println!("not run: {}", not_run.join(", "));

    let log = t.log();
    if log.contains("panicked") {
        problems.push(format!("the target panicked:\n{log}"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
