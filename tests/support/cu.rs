//! Reading libiscsi's iscsi-test-cu output (`-V`): per test, whether it
//! passed and what it skipped; and the expected-skips list it is checked
//! against.

use std::collections::BTreeMap;

/// The outcome of one test in one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub passed: bool,
    pub failed: bool,
    /// `[SKIPPED]` messages, in order, without repeats.
    pub skips: Vec<String>,
}

/// One run's results by "Suite.Test", and CUnit's totals.
#[derive(Debug, Default)]
pub struct RunResult {
    pub tests: BTreeMap<String, Outcome>,
    /// (total, ran, passed, failed) from the "tests" summary line.
    pub summary: Option<(u32, u32, u32, u32)>,
}

fn note(outcome: &mut Outcome, text: &str) {
    let mut rest = text;
    while let Some(i) = rest.find("[SKIPPED]") {
        let after = &rest[i + "[SKIPPED]".len()..];
        let msg = after.trim().to_owned();
        if !msg.is_empty() && !outcome.skips.contains(&msg) {
            outcome.skips.push(msg);
        }
        rest = after;
    }
    let t = text.trim_start();
    if t.starts_with("passed") {
        outcome.passed = true;
    } else if t.starts_with("FAILED") {
        outcome.failed = true;
    }
}

/// Parses the output of one iscsi-test-cu invocation.
pub fn parse(text: &str) -> RunResult {
    let mut r = RunResult::default();
    let mut suite = String::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(s) = trimmed.strip_prefix("Suite: ") {
            suite = s.trim().to_owned();
            current = None;
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("Test: ") {
            if let Some((name, tail)) = rest.split_once(" ...") {
                let key = format!("{suite}.{}", name.trim());
                let o = r.tests.entry(key.clone()).or_default();
                note(o, tail);
                current = Some(key);
                continue;
            }
        }
        if trimmed.starts_with("tests ") {
            let n: Vec<u32> = trimmed
                .split_whitespace()
                .skip(1)
                .filter_map(|w| w.parse().ok())
                .collect();
            if let [total, ran, passed, failed, ..] = n[..] {
                r.summary = Some((total, ran, passed, failed));
            }
            current = None;
            continue;
        }
        if let Some(o) = current.as_ref().and_then(|k| r.tests.get_mut(k)) {
            note(o, line);
        }
    }
    r
}

/// Who is expected to cover a skipped test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cover {
    /// The test cannot apply to an ironlun LU.
    Nowhere,
    /// It runs, without this skip, in the named run.
    Run(String),
    /// It is left out of every run.
    NotRun,
}

#[derive(Clone, Debug)]
pub struct Expected {
    /// "Suite.Test" or "Suite.*".
    pub test: String,
    /// Substring of the skip message; empty for a test that is not run.
    pub message: String,
    pub cover: Cover,
    pub reason: String,
}

impl Expected {
    pub fn matches_test(&self, test: &str) -> bool {
        match self.test.strip_suffix(".*") {
            Some(suite) => test
                .strip_prefix(suite)
                .is_some_and(|rest| rest.starts_with('.')),
            None => self.test == test,
        }
    }
}

/// Parses the expected-skips file; a malformed line is an error naming it.
pub fn expected_skips(text: &str) -> Result<Vec<Expected>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = line.splitn(4, " | ").map(str::trim).collect();
        let [test, message, cover, reason] = f[..] else {
            return Err(format!(
                "line {}: expected TEST | MESSAGE | COVERED BY | REASON",
                i + 1
            ));
        };
        if reason.is_empty() {
            return Err(format!("line {}: a skip needs a reason", i + 1));
        }
        let cover = match cover {
            "-" => Cover::Nowhere,
            "not run" => Cover::NotRun,
            run => Cover::Run(run.to_owned()),
        };
        let message = if message == "-" {
            String::new()
        } else {
            message.to_owned()
        };
        if (cover == Cover::NotRun) != message.is_empty() {
            return Err(format!(
                "line {}: exactly the tests that are not run have message \"-\"",
                i + 1
            ));
        }
        out.push(Expected {
            test: test.to_owned(),
            message,
            cover,
            reason: reason.to_owned(),
        });
    }
    Ok(out)
}

/// The entry allowing `test` to skip with `message`, if any.
pub fn allowed<'a>(list: &'a [Expected], test: &str, message: &str) -> Option<&'a Expected> {
    list.iter()
        .find(|e| e.cover != Cover::NotRun && e.matches_test(test) && message.contains(&e.message))
}

/// Whether `test` is left out of every run.
pub fn not_run(list: &[Expected], test: &str) -> bool {
    list.iter()
        .any(|e| e.cover == Cover::NotRun && e.matches_test(test))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tests_skips_and_summary() {
        let log = "Suite: StartStopUnit\n  Test: Simple ...    [SKIPPED] Media is not removable.\npassed\n  Test: PwrCnd ...passed\nSuite: X\n  Test: Y ...\n    [FAILED] informational\n    [SKIPPED] a\n    [SKIPPED] a\nFAILED\n    1. x.c:1 - boom\n               tests      3      3      2      1        0\n";
        let r = parse(log);
        assert_eq!(r.summary, Some((3, 3, 2, 1)));
        let s = &r.tests["StartStopUnit.Simple"];
        assert!(s.passed && !s.failed);
        assert_eq!(s.skips, vec!["Media is not removable.".to_owned()]);
        assert!(r.tests["StartStopUnit.PwrCnd"].passed);
        let y = &r.tests["X.Y"];
        assert!(y.failed && !y.passed);
        assert_eq!(y.skips, vec!["a".to_owned()]);
    }

    #[test]
    fn expected_entries() {
        let list = expected_skips(
            "# c\nA.* | not removable | - | fixed\nB.C | - | not run | slow\nD.E | x | run1 | there\n",
        )
        .unwrap();
        assert!(allowed(&list, "A.Z", "LUN is not removable.").is_some());
        assert!(allowed(&list, "AB.Z", "not removable").is_none());
        assert!(allowed(&list, "B.C", "anything").is_none());
        assert!(not_run(&list, "B.C"));
        assert_eq!(
            allowed(&list, "D.E", "x y").unwrap().cover,
            Cover::Run("run1".into())
        );
        assert!(expected_skips("A | b | - |").is_err());
        assert!(expected_skips("A | - | - | r").is_err());
    }
}
