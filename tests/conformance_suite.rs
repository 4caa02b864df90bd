//! libiscsi's whole conformance suite (iscsi-test-cu 1.19, `--dataloss`)
//! against the daemon over LU shapes (kind × block size × flags × size,
//! tests/conformance_suite/shape.rs), checked against the expected-skips list
//! (testdata/conformance/expected-skips.txt).
//!
//! Both tests are ignored by default (minutes); `scripts/test` runs the
//! default slice, `scripts/test --matrix` the whole matrix:
//! `cargo test --release --test conformance_suite -- --ignored --nocapture default_slice`
//! Each shape gets a daemon of its own with two portals (the suite's
//! multipath tests; its target resets touch only that daemon), so shapes
//! run in parallel (IRONLUN_CONFORMANCE_JOBS, default 2 for the slice and
//! 4 for the matrix); IRONLUN_CONFORMANCE_SHAPES=a,b runs only the shapes
//! whose names contain one of the substrings (a partial run: coverage
//! across shapes is then not judged). Suite logs: target/conformance/; the
//! matrix's table:
//! target/conformance/matrix.md (docs/conformance.md has the last one).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

#[path = "conformance_suite/shape.rs"]
mod shape;
// The end-to-end tests' support (tests/e2e/main.rs), of which this
// binary uses a part.
#[allow(dead_code)]
mod support;

use support::cu;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cu::{Cover, Expected, LuFacts, Outcome, RunResult};
use shape::{Kind, Run, Shape, Tests};
use support::{tool, Target};

const NAME: &str = "iqn.2026-11.io.ironlun:conformance";
const INITIATOR_1: &str = "iqn.2026-11.io.ironlun:conformance-initiator-1";
const INITIATOR_2: &str = "iqn.2026-11.io.ironlun:conformance-initiator-2";
/// Longest one invocation of the suite may take before it is killed (a
/// hang is a failure, not a stuck test run).
const INVOCATION_LIMIT_S: u32 = 900;

/// One run's results.
struct RunOutcome {
    run: Run,
    tests: BTreeMap<String, Outcome>,
}

/// One shape's results.
struct ShapeOutcome {
    shape: Shape,
    facts: LuFacts,
    runs: Vec<RunOutcome>,
    problems: Vec<String>,
    elapsed: Duration,
}

fn log_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/conformance");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn expected() -> Vec<Expected> {
    cu::expected_skips(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("testdata/conformance/expected-skips.txt"),
        )
        .unwrap(),
    )
    .unwrap()
}

/// Runs iscsi-test-cu once; its output goes to `log` and is parsed. No
/// summary (a crash, a hang killed by the limit) is a problem.
fn invoke(
    cu: &str,
    run: &Run,
    test: &str,
    urls: &[String],
    log: &Path,
) -> Result<RunResult, String> {
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "10", &INVOCATION_LIMIT_S.to_string(), cu]);
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
    if r.summary.is_none() {
        return Err(format!(
            "{test}: no CUnit summary (exit {:?}, log {}); stderr: {}",
            out.status.code(),
            log.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(r)
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

/// The `--test=` selections of a run, one invocation each.
fn selections(cu: &str, expected: &[Expected], run: &Run) -> Vec<String> {
    match &run.tests {
        Tests::All => vec!["ALL".into()],
        Tests::Some(list) => list.iter().map(|s| (*s).to_owned()).collect(),
        Tests::Each(prefix, except) => list_tests(cu, prefix)
            .into_iter()
            .filter(|t| !except.contains(&t.as_str()))
            .filter(|t| !cu::not_run(expected, t.trim_start_matches("ALL.")))
            .collect(),
        Tests::AllBut(except) => {
            let all = list_tests(cu, "ALL.");
            let suites = all.iter().filter(|t| t.matches('.').count() == 1);
            let mut out = Vec::new();
            for suite in suites {
                let prefix = format!("{suite}.");
                if except.iter().any(|x| x.starts_with(&prefix)) {
                    out.extend(
                        all.iter()
                            .filter(|t| t.starts_with(&prefix) && !except.contains(&t.as_str()))
                            .filter(|t| !cu::not_run(expected, t.trim_start_matches("ALL.")))
                            .cloned(),
                    );
                } else {
                    out.push(suite.clone());
                }
            }
            out
        }
    }
}

/// A loop device over a sparse file, detached on drop.
struct Loop(String);

impl Loop {
    fn over(file: &Path, size: u64) -> Loop {
        let f = std::fs::File::create(file).unwrap();
        f.set_len(size).unwrap();
        let losetup = tool("losetup", "mount");
        let (rc, out) = support::run(&losetup, &["-f", "--show", file.to_str().unwrap()]);
        assert_eq!(rc, 0, "losetup (needs root): {out}");
        Loop(out.trim().to_owned())
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// Starts a daemon with one LU of this shape and runs the shape's runs.
fn run_shape(cu: &str, expected: &[Expected], shape: &Shape, logs: &Path) -> ShapeOutcome {
    let started = Instant::now();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let device =
        (shape.kind == Kind::Block).then(|| Loop::over(&dir.path().join("dev.img"), shape.size));
    if shape.flags.ro && matches!(shape.kind, Kind::File | Kind::FileDirect) {
        // A read-only file LU serves an existing file (the daemon will not
        // create one it may not write).
        let f = std::fs::File::create(dir.path().join("lu.img")).unwrap();
        f.set_len(shape.size).unwrap();
    }
    let spec = shape.spec(dir.path(), device.as_ref().map(|d| d.0.as_str()));
    let state = dir.path().join("state");
    let args = [
        "--name",
        NAME,
        "--state-dir",
        state.to_str().unwrap(),
        "--lun",
        &spec,
    ];
    let t = Target::start_portals(&args, 2);
    let facts = cu::lu_facts(t.addr, NAME, 0);
    let file_name = shape.name().replace('/', "_");
    let mut problems = Vec::new();
    let mut runs = Vec::new();
    for (r, run) in shape.runs().into_iter().enumerate() {
        let urls: Vec<String> = t.addrs[..if run.multipath { 2 } else { 1 }]
            .iter()
            .map(|a| format!("iscsi://{a}/{NAME}/0"))
            .collect();
        let sels = selections(cu, expected, &run);
        assert!(!sels.is_empty(), "run {} selects no tests", run.label);
        let mut tests = BTreeMap::new();
        for (i, sel) in sels.iter().enumerate() {
            let log = logs.join(format!("{file_name}-{r}-{i}.log"));
            match invoke(cu, &run, sel, &urls, &log) {
                Err(e) => problems.push(format!("{}: {e}", run.label)),
                Ok(res) => {
                    problems.extend(count_problems(&run.label, sel, &res, &log));
                    tests.extend(res.tests);
                }
            }
        }
        runs.push(RunOutcome { run, tests });
    }
    let log = t.log();
    if log.contains("panicked") {
        problems.push(format!("{}: the target panicked:\n{log}", shape.name()));
    }
    drop(t);
    ShapeOutcome {
        shape: *shape,
        facts,
        runs,
        problems,
        elapsed: started.elapsed(),
    }
}

/// CUnit's own counts: every test ran, none failed, each was parsed.
fn count_problems(label: &str, sel: &str, r: &RunResult, log: &Path) -> Vec<String> {
    let (total, ran, _, failed) = r.summary.unwrap_or_default();
    let mut out = Vec::new();
    if failed != 0 || ran != total {
        out.push(format!(
            "{label} {sel}: {failed} of {total} failed, {ran} ran (log {})",
            log.display()
        ));
    }
    if r.tests.len() as u32 != total {
        out.push(format!(
            "{label} {sel}: parsed {} tests, CUnit counted {total} (log {})",
            r.tests.len(),
            log.display()
        ));
    }
    out
}

/// Runs every shape, `jobs` at a time, in the order given.
fn run_shapes(shapes: &[Shape], jobs: usize) -> Vec<ShapeOutcome> {
    let cu = tool("iscsi-test-cu", "libiscsi-bin");
    let expected = expected();
    let logs = log_dir();
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(shape) = shapes.get(i) else { break };
                let o = run_shape(&cu, &expected, shape, &logs);
                println!(
                    "{:>3}/{} {:<40} {:>4} tests in {:>4.0?}{}",
                    i + 1,
                    shapes.len(),
                    shape.name(),
                    o.runs.iter().map(|r| r.tests.len()).sum::<usize>(),
                    o.elapsed,
                    if o.problems.is_empty() {
                        ""
                    } else {
                        "  PROBLEMS"
                    }
                );
                done.lock().unwrap().push((i, o));
            });
        }
    });
    let mut done = done.into_inner().unwrap();
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, o)| o).collect()
}

/// Whether `test` passes in `run` without a skip the list's entry `e`
/// allows.
fn passes_without(expected: &[Expected], run: &RunOutcome, test: &str, e: &Expected) -> bool {
    run.tests.get(test).is_some_and(|o| {
        o.passed
            && !o.failed
            && !o
                .skips
                .iter()
                .any(|m| cu::allowed(expected, test, m).is_some_and(|again| std::ptr::eq(again, e)))
    })
}

/// Failures, unexpected skips, skips no run covers, unused entries of the
/// expected-skips list and silent skips no LU covers. Prints which entries
/// were used how often.
fn judge(expected: &[Expected], outcomes: &[ShapeOutcome], complete: bool) -> Vec<String> {
    let mut problems: Vec<String> = outcomes.iter().flat_map(|o| o.problems.clone()).collect();
    let runs: Vec<&RunOutcome> = outcomes.iter().flat_map(|o| &o.runs).collect();
    let mut used: BTreeMap<String, u32> = BTreeMap::new();
    for r in &runs {
        for (test, o) in &r.tests {
            if o.failed || !o.passed {
                problems.push(format!("{}: {test} failed", r.run.label));
            }
            for msg in &o.skips {
                let Some(e) = cu::allowed(expected, test, msg) else {
                    problems.push(format!(
                        "{}: {test} skipped unexpectedly: {msg}",
                        r.run.label
                    ));
                    continue;
                };
                *used.entry(e.test.clone() + " | " + &e.message).or_default() += 1;
                if let Cover::Tag(tag) = &e.cover {
                    // "ro+thin": a run whose LU has every one of the tags.
                    let covered = runs.iter().any(|other| {
                        tag.split('+').all(|t| other.run.tags.contains(&t))
                            && passes_without(expected, other, test, e)
                    });
                    if complete && !covered && !cu::not_run(expected, test) {
                        problems.push(format!(
                            "{}: {test} skipped ({msg}), but no run of a \"{tag}\" LU passes it without that skip",
                            r.run.label
                        ));
                    }
                }
            }
        }
    }
    println!("\nskips seen (times, entry, why):");
    for e in expected {
        let key = e.test.clone() + " | " + &e.message;
        match (used.get(&key), &e.cover) {
            (_, Cover::NotRun) => println!("  not run  {}: {}", e.test, e.reason),
            (Some(n), _) => println!("  {n:>7}  {key}: {}", e.reason),
            (None, _) if !complete => println!("  unused   {key} (a partial run: not judged)"),
            (None, _) => {
                println!("  UNUSED   {key}");
                problems.push(format!(
                    "expected skip no run uses (remove it, or find what stopped the skip): {key}"
                ));
            }
        }
    }
    let lus: Vec<(String, LuFacts)> = outcomes
        .iter()
        .map(|o| (o.shape.name(), o.facts.clone()))
        .collect();
    problems.extend(uncovered_silent_skips(&lus));
    problems
}

/// pass / skip / fail counts of a set of results.
fn counts<'a>(tests: impl Iterator<Item = &'a Outcome>) -> [u32; 3] {
    let mut row = [0u32; 3];
    for o in tests {
        let i = if o.failed || !o.passed {
            2
        } else if !o.skips.is_empty() {
            1
        } else {
            0
        };
        row[i] += 1;
    }
    row
}

/// One markdown row per shape.
fn shape_table(outcomes: &[ShapeOutcome]) -> String {
    let mut t = String::from(
        "| shape (kind/block size/flags/size) | runs | tests | pass | pass with skips | fail | problems | time |\n|---|---|---|---|---|---|---|---|\n",
    );
    for o in outcomes {
        let tests = o.runs.iter().flat_map(|r| r.tests.values());
        let [p, s, f] = counts(tests);
        let runs: Vec<String> = o
            .runs
            .iter()
            .map(|r| match &r.run.tests {
                Tests::All => "ALL".to_owned(),
                Tests::Some(l) if r.run.allow_sanitize => format!("{} -S", l.join(" ")),
                Tests::Some(l) => format!("{} read-only families", l.len()),
                Tests::Each(prefix, _) => format!("{prefix}* -S"),
                Tests::AllBut(except) => format!("ALL but {}", except.len()),
            })
            .collect();
        writeln!(
            t,
            "| {} | {} | {} | {p} | {s} | {f} | {} | {:.0?} |",
            o.shape.name(),
            runs.join(" + "),
            p + s + f,
            o.problems.len(),
            o.elapsed
        )
        .unwrap();
    }
    t
}

/// Pass / skip / fail per family over every run.
fn family_table(outcomes: &[ShapeOutcome]) -> String {
    let mut families: BTreeMap<String, Vec<&Outcome>> = BTreeMap::new();
    for (test, o) in outcomes.iter().flat_map(|o| &o.runs).flat_map(|r| &r.tests) {
        let fam = test.split('.').next().unwrap_or(test).to_owned();
        families.entry(fam).or_default().push(o);
    }
    let mut table = format!(
        "{:<28} {:>6} {:>6} {:>6}\n",
        "family", "pass", "skip", "fail"
    );
    let mut totals = [0u32; 3];
    for (fam, os) in &families {
        let row = counts(os.iter().copied());
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
    table
}

fn jobs(default: usize) -> usize {
    std::env::var("IRONLUN_CONFORMANCE_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `shapes`, prints the tables, writes the shape table to
/// target/conformance/`table`, and fails on any problem.
fn run_and_judge(shapes: &[Shape], jobs: usize, table: &str) {
    let started = Instant::now();
    let expected = expected();
    let outcomes = run_shapes(shapes, jobs);
    let complete = std::env::var_os("IRONLUN_CONFORMANCE_SHAPES").is_none();
    let problems = judge(&expected, &outcomes, complete);
    let shapes_md = shape_table(&outcomes);
    println!("\n{shapes_md}\n{}", family_table(&outcomes));
    println!(
        "skip = passed, but the suite skipped part or all of it (each on the expected-skips list)"
    );
    let not_run: Vec<&str> = expected
        .iter()
        .filter(|e| e.cover == Cover::NotRun)
        .map(|e| e.test.as_str())
        .collect();
    if !not_run.is_empty() {
        println!("not run: {}", not_run.join(", "));
    }
    println!(
        "{} shapes, {jobs} at a time, in {:.0?}",
        shapes.len(),
        started.elapsed()
    );
    std::fs::write(log_dir().join(table), &shapes_md).unwrap();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
#[ignore = "libiscsi's suite over several LUs takes minutes: scripts/test runs it"]
fn default_slice_has_no_failures_and_only_expected_skips() {
    run_and_judge(&Shape::default_slice(), jobs(2), "slice.md");
}

#[test]
#[ignore = "the whole matrix takes about half an hour: scripts/test --matrix runs it"]
fn matrix_has_no_failures_and_only_expected_skips() {
    run_and_judge(&Shape::matrix(), jobs(4), "matrix.md");
}

/// The silent skips of `lus` (name, facts) that no LU among them is free
/// of: a 1 GiB LU cannot run Read6's end-of-medium tests, so a 64 MiB LU
/// in the same run must.
fn uncovered_silent_skips(lus: &[(String, LuFacts)]) -> Vec<String> {
    let mut out = Vec::new();
    for (name, facts) in lus {
        for s in cu::silent_skips(facts) {
            let covered = lus
                .iter()
                .any(|(_, other)| !cu::silent_skips(other).iter().any(|o| o.key == s.key));
            if !covered {
                out.push(format!("{name}: {} (no LU of the run covers it)", s.why));
            }
        }
    }
    out
}
