//! The one rule for a cargo test that cannot do its work here (Ceph,
//! Chromium, network namespaces or O_DIRECT missing): where every test
//! is required (`IRONLUN_REQUIRE_ALL=1`, which scripts/test exports under
//! `--require-all` and CI=true; or CI=true itself) the test fails, saying
//! why. Elsewhere it says SKIPPED on the terminal (the stderr handle
//! itself: libtest does not capture that) and appends a line to the file
//! `IRONLUN_SKIP_LOG` names, whose lines scripts/test's summary lists
//! (scripts/verdicts.sh). A skip that cannot be written there fails.
//!
//! One file: `support::skip` in the workspace's own tests (also for
//! `ceph.rs` and `browser.rs`), included by path in ironlun-backend's
//! unit tests and ironlun-rbd's integration tests.

#![allow(dead_code)]

use std::io::Write;
use std::path::Path;

/// Longest skip line kept (a reason may quote a tool's whole output).
const LINE_MAX: usize = 400;

/// Whether every test must run: `IRONLUN_REQUIRE_ALL=1` or `CI=true`.
pub fn required() -> bool {
    std::env::var("IRONLUN_REQUIRE_ALL").as_deref() == Ok("1")
        || std::env::var("CI").as_deref() == Ok("true")
}

/// What skipping `what` for `why` comes to: the failure when every test
/// is `required`, else the skip log's line for `test`.
pub fn verdict(test: &str, what: &str, why: &str, required: bool) -> Result<String, String> {
    if required {
        return Err(format!(
            "{what} cannot run here: {why}\n(IRONLUN_REQUIRE_ALL=1 or CI=true: every test must run; \
             a local run without it skips and lists the skip in scripts/test's summary)"
        ));
    }
    let one_line: String = format!("{test}: {what}: {why}")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    Ok(one_line.chars().take(LINE_MAX).collect())
}

/// Appends `line` to the skip log at `path`.
pub fn record_to(path: &Path, line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    // One write per line: lines of tests running at once do not mix.
    f.write_all(format!("{line}\n").as_bytes())
}

/// This test, as libtest names its thread, after the test binary.
fn this_test() -> String {
    let exe = std::env::args().next().unwrap_or_default();
    let binary = Path::new(&exe)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Cargo's test binaries end in -HASH.
    let binary = binary.rsplit_once('-').map_or(binary.as_str(), |(b, _)| b);
    let name = std::thread::current().name().unwrap_or("main").to_owned();
    format!("{binary} {name}")
}

/// Skips the work `what` needs because of `why`, or fails the test
/// where every test is required.
pub fn skip(what: &str, why: &str) {
    let line = match verdict(&this_test(), what, why, required()) {
        Ok(line) => line,
        Err(failure) => panic!("{failure}"),
    };
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED: {what}: {why}");
    if let Some(path) = std::env::var_os("IRONLUN_SKIP_LOG") {
        if let Err(e) = record_to(Path::new(&path), &line) {
            panic!("a skip could not be written to IRONLUN_SKIP_LOG: {e}: {line}");
        }
    }
}
