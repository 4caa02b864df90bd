//! Reading libiscsi's iscsi-test-cu output (`-V`): per test, whether it
//! passed and what it skipped; the expected-skips list it is checked
//! against; and the LU properties that keep the suite's unprintable skips
//! out of reach.

use std::collections::BTreeMap;
use std::net::SocketAddr;

/// The outcome of one test in one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub passed: bool,
    pub failed: bool,
    /// Skip messages (see [`skips_in`]), in order, without repeats.
    pub skips: Vec<String>,
}

/// One run's results by "Suite.Test", and CUnit's totals.
#[derive(Debug, Default)]
pub struct RunResult {
    pub tests: BTreeMap<String, Outcome>,
    /// (total, ran, passed, failed) from the "tests" summary line.
    pub summary: Option<(u32, u32, u32, u32)>,
}

/// The bracketed skip markers of libiscsi's test-tool (1.19): `[SKIPPED]`
/// from its CHECK_FOR_* macros and command helpers, `[SKIPPING]` from a
/// few tests (NoMedia.NoMediaSBC, WriteSame10/16.ZeroBlocks).
const SKIP_MARKERS: [&str; 2] = ["[SKIPPED]", "[SKIPPING]"];

/// The skips one line of output reports: the text after each bracketed
/// marker (the marker itself when nothing follows it), or, for a line
/// that says it skips in other words ("--dataloss flag is not set in.
/// Skipping write", "LBPRZ is clear. Skip the read verify"), the whole
/// line. Any word starting with "skip", in any case, counts.
pub fn skips_in(line: &str) -> Vec<String> {
    let mut marks: Vec<(usize, &str)> = SKIP_MARKERS
        .iter()
        .flat_map(|m| line.match_indices(m))
        .collect();
    marks.sort_unstable();
    if marks.is_empty() {
        let says_skip = line.split(|c: char| !c.is_ascii_alphabetic()).any(|w| {
            w.get(..4)
                .is_some_and(|head| head.eq_ignore_ascii_case("skip"))
        });
        return if says_skip {
            vec![line.trim().to_owned()]
        } else {
            Vec::new()
        };
    }
    marks
        .iter()
        .enumerate()
        .map(|(i, (at, mark))| {
            let end = marks.get(i + 1).map_or(line.len(), |next| next.0);
            let msg = line[at + mark.len()..end].trim();
            if msg.is_empty() {
                (*mark).to_owned()
            } else {
                msg.to_owned()
            }
        })
        .collect()
}

fn note(outcome: &mut Outcome, text: &str) {
    for msg in skips_in(text) {
        if !outcome.skips.contains(&msg) {
            outcome.skips.push(msg);
        }
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
    /// It runs, without this skip, in a run whose LU has this tag
    /// (tests/conformance_suite/shape.rs, `Run::tags`: the kind, the block size,
    /// thin or full, ro, sanitize, allow-sanitize).
    Tag(String),
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
    /// Why it is expected: the whole-suite run (tests/conformance_suite.rs)
    /// prints it; the end-to-end tests only require one.
    #[allow(dead_code)]
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
            tag => Cover::Tag(tag.to_owned()),
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

/// What iscsi-test-cu reads from a LU when it starts that decides the
/// skips it takes without printing anything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LuFacts {
    /// RETURNED LOGICAL BLOCK ADDRESS + 1 (READ CAPACITY (16), SBC-4
    /// §5.20.2).
    pub blocks: u64,
    /// LBPME: the LU is thin provisioned.
    pub thin: bool,
    /// The Block Limits VPD page (SBC-4 §6.6.4), when the LU answers it.
    pub block_limits: Option<BlockLimits>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockLimits {
    /// MAXIMUM COMPARE AND WRITE LENGTH (byte 5).
    pub max_compare_and_write: u8,
    /// MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT (bytes 24-27).
    pub max_unmap_descriptors: u32,
}

/// Decodes READ CAPACITY (16) parameter data and, if the LU answered it
/// with GOOD status, the Block Limits VPD page.
pub fn lu_facts_from(rc16: &[u8], block_limits: Option<&[u8]>) -> LuFacts {
    let be = |b: &[u8], at: usize, n: usize| -> u64 {
        b.get(at..at + n)
            .map_or(0, |x| x.iter().fold(0u64, |v, &y| v << 8 | u64::from(y)))
    };
    LuFacts {
        blocks: be(rc16, 0, 8).wrapping_add(1),
        thin: rc16.get(14).is_some_and(|b| b & 0x80 != 0),
        block_limits: block_limits
            .filter(|p| p.len() >= 28 && p[1] == 0xb0)
            .map(|p| BlockLimits {
                max_compare_and_write: p[5],
                max_unmap_descriptors: be(p, 24, 4) as u32,
            }),
    }
}

/// Reads [`LuFacts`] from LUN `lun` of `target` over a session of its
/// own.
pub fn lu_facts(addr: SocketAddr, target: &str, lun: u16) -> LuFacts {
    let mut c = crate::support::Raw::connect(addr);
    c.lun = lun;
    let (r, _) = c.login(target, [0x80, 0x1c, 0xf4, 0, 0, lun as u8], &[]);
    assert_eq!((r.status.class(), r.status.detail()), (0, 0), "probe login");
    // Unit attentions (power on, ...) first.
    for _ in 0..4 {
        if c.scsi(&[0; 6], 0, &[]).0 == 0 {
            break;
        }
    }
    let rc16_cdb = [0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0];
    let (st, sense, rc16) = c.scsi(&rc16_cdb, 32, &[]);
    assert_eq!(st, 0, "READ CAPACITY (16) on LUN {lun}: {sense:?}");
    let (st, _, bl) = c.scsi(&[0x12, 0x01, 0xb0, 0, 64, 0], 64, &[]);
    lu_facts_from(&rc16, (st == 0).then_some(&bl[..]))
}

/// The LU properties that keep iscsi-test-cu's unprintable skips out of
/// reach; one problem per property `lu` lacks.
///
/// In libiscsi 1.19 (test-tool/test_*.c) these tests pass by `CU_PASS`
/// alone, printing nothing in any output mode, so no parsing can see them:
/// - READ6 at and beyond the end: blocks 0 ("LUN is too small"), or above
///   0x1fffff / 0x200000 ("LUN is too big", Read6.BeyondEol, Read6.Simple);
/// - the 10- and 12-byte beyond-the-end and zero-block tests (Read10,
///   Read12, Verify10/12, Write10/12, WriteVerify10/12, WriteSame10,
///   Prefetch10): blocks at or above 0x80000000 (implied by the READ6
///   bound);
/// - WriteAtomic16.*, WriteSame10/16.ZeroBlocks: no Block Limits page;
/// - MultipathIO.CompareAndWrite: MAXIMUM COMPARE AND WRITE LENGTH 0;
/// - Unmap.ZeroBlocks on a thin LU: MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT
///   of 1 or less.
///
/// The other `CU_PASS`-only paths do not depend on the LU: "Non-iSCSI" and
/// "device too small for async_*" (sd->iscsi_ctx is set for iscsi:// URLs
/// and maximum_transfer_length only for /dev/sg devices), the "... is not
/// implemented" ones (the command helper prints `[SKIPPED] ... is not
/// implemented.` first), and ExtendedCopy.ValidTgtDescr's NUL-bit part,
/// which is skipped on every SPC-4 target by design (the bit is obsolete
/// in SPC-4; see testdata/conformance/expected-skips.txt).
pub fn silent_skips(lu: &LuFacts) -> Vec<SilentSkip> {
    let mut out = Vec::new();
    if lu.blocks == 0 || lu.blocks > 0x1f_ffff {
        out.push(SilentSkip {
            key: "read6-range",
            why: format!(
                "{} blocks: Read6.BeyondEol and Read6.Simple need 1 to 0x1fffff blocks, or they pass without running",
                lu.blocks
            ),
        });
    }
    let limits = match &lu.block_limits {
        None => {
            out.push(SilentSkip {
                key: "block-limits",
                why: "no Block Limits VPD page: WriteAtomic16.* and WriteSame10/16.ZeroBlocks would pass without running".to_owned(),
            });
            return out;
        }
        Some(bl) => bl,
    };
    if limits.max_compare_and_write == 0 {
        out.push(SilentSkip {
            key: "compare-and-write",
            why: "MAXIMUM COMPARE AND WRITE LENGTH 0: MultipathIO.CompareAndWrite would pass without running".to_owned(),
        });
    }
    if lu.thin && limits.max_unmap_descriptors <= 1 {
        out.push(SilentSkip {
            key: "unmap-descriptors",
            why: format!(
                "MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT {}: Unmap.ZeroBlocks would skip its multi-descriptor part silently",
                limits.max_unmap_descriptors
            ),
        });
    }
    out
}

/// A skip the suite would take without printing it, on one LU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SilentSkip {
    /// Which one: an LU of the same run without this key covers it.
    pub key: &'static str,
    pub why: String,
}

/// The families named by the core target issue.
pub const REQUIRED_FAMILIES: &[&str] = &[
    "ALL.TestUnitReady",
    "ALL.Inquiry",
    "ALL.ReadCapacity10",
    "ALL.ReadCapacity16",
    "ALL.Read6",
    "ALL.Read10",
    "ALL.Read12",
    "ALL.Read16",
    "ALL.Write10",
    "ALL.Write12",
    "ALL.Write16",
    "ALL.ModeSense6",
    "ALL.iSCSIResiduals",
    // The rest of the iSCSI family: CmdSN window, DataSN, task management.
    "iSCSI",
];

/// The problems in one family's output: no summary, tests that did not
/// run or did not pass, a parsed count unlike CUnit's, and skips the
/// expected-skips list does not allow (whether a run elsewhere covers a
/// skipped test is the full run's check). Returns the problems and how
/// many tests passed without skipping anything.
pub fn check_family(expected: &[Expected], fam: &str, out: &str) -> (Vec<String>, u32) {
    let r = parse(out);
    let Some((total, ran, _, failed)) = r.summary else {
        return (vec![format!("{fam}: no CUnit summary")], 0);
    };
    let mut problems = Vec::new();
    if total == 0 || ran != total || failed != 0 {
        problems.push(format!("{fam}: {total} tests, {ran} ran, {failed} failed"));
    }
    if r.tests.len() as u32 != total {
        problems.push(format!(
            "{fam}: parsed {} tests, CUnit counted {total}",
            r.tests.len()
        ));
    }
    let mut clean = 0;
    for (test, o) in &r.tests {
        if o.failed || !o.passed {
            problems.push(format!("{fam}: {test} failed"));
        }
        for msg in &o.skips {
            if allowed(expected, test, msg).is_none() {
                problems.push(format!("{fam}: {test} skipped unexpectedly: {msg}"));
            }
        }
        if o.passed && !o.failed && o.skips.is_empty() {
            clean += 1;
        }
    }
    (problems, clean)
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
    fn every_spelling_of_a_skip_is_seen() {
        let log = "Suite: WriteSame10\n  Test: ZeroBlocks ...\n    [SKIPPING] No MAXIMUM WRITE SAME LENGTH - skipping MAXIMUM WRITE SAME LENGTH asserts.\npassed\n  Test: Unmap ...\n    --dataloss flag is not set in. Skipping write\n    LBPRZ is clear. Skip the read verify\n    [SKIPPED]\npassed\n  Test: Plain ...\n    Test WRITESAME10 of 1-256 blocks at the start of the LUN\npassed\n  Test: Two ...    [SKIPPED] a [SKIPPING] b\npassed\n               tests      4      4      4      0        0\n";
        let r = parse(log);
        assert_eq!(
            r.tests["WriteSame10.ZeroBlocks"].skips,
            ["No MAXIMUM WRITE SAME LENGTH - skipping MAXIMUM WRITE SAME LENGTH asserts."]
        );
        assert_eq!(
            r.tests["WriteSame10.Unmap"].skips,
            [
                "--dataloss flag is not set in. Skipping write",
                "LBPRZ is clear. Skip the read verify",
                "[SKIPPED]"
            ]
        );
        assert!(r.tests["WriteSame10.Plain"].skips.is_empty());
        assert_eq!(r.tests["WriteSame10.Two"].skips, ["a", "b"]);
        // A fabricated [SKIPPING] line is not allowed by an entry for
        // another message, and an empty marker matches no entry.
        let list = expected_skips("WriteSame10.* | LBPPB < 2 | - | r\n").unwrap();
        for msg in &r.tests["WriteSame10.ZeroBlocks"].skips {
            assert!(allowed(&list, "WriteSame10.ZeroBlocks", msg).is_none());
        }
        assert!(allowed(&list, "WriteSame10.Unmap", "[SKIPPED]").is_none());
        assert!(skips_in("Test UNMAP without any descriptors.").is_empty());
        assert!(skips_in("Skipped").len() == 1 && skips_in("SKIP").len() == 1);
    }

    #[test]
    fn lu_facts_and_the_silent_skips_they_allow() {
        // 128 MiB of 512-byte blocks, thin; Block Limits with CAW 1 and
        // 256 UNMAP descriptors.
        let mut rc16 = [0u8; 32];
        rc16[..8].copy_from_slice(&(262_144u64 - 1).to_be_bytes());
        rc16[8..12].copy_from_slice(&512u32.to_be_bytes());
        rc16[14] = 0x80;
        let mut bl = [0u8; 64];
        bl[1] = 0xb0;
        bl[3] = 0x3c;
        bl[5] = 1;
        bl[24..28].copy_from_slice(&256u32.to_be_bytes());
        let good = lu_facts_from(&rc16, Some(&bl));
        assert_eq!(
            good,
            LuFacts {
                blocks: 262_144,
                thin: true,
                block_limits: Some(BlockLimits {
                    max_compare_and_write: 1,
                    max_unmap_descriptors: 256
                })
            }
        );
        assert!(silent_skips(&good).is_empty());
        let with = |f: &dyn Fn(&mut LuFacts)| {
            let mut lu = good.clone();
            f(&mut lu);
            silent_skips(&lu).len()
        };
        assert_eq!(with(&|l| l.blocks = 0x20_0000), 1);
        assert_eq!(with(&|l| l.blocks = 0x1f_ffff), 0);
        assert_eq!(with(&|l| l.blocks = 0), 1);
        assert_eq!(with(&|l| l.block_limits = None), 1);
        assert_eq!(
            with(&|l| l.block_limits.as_mut().unwrap().max_compare_and_write = 0),
            1
        );
        assert_eq!(
            with(&|l| l.block_limits.as_mut().unwrap().max_unmap_descriptors = 1),
            1
        );
        assert_eq!(
            with(&|l| {
                l.thin = false;
                l.block_limits.as_mut().unwrap().max_unmap_descriptors = 0;
            }),
            0
        );
        // A LU that does not answer the page (CHECK CONDITION).
        assert_eq!(lu_facts_from(&rc16, None).block_limits, None);
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
            Cover::Tag("run1".into())
        );
        assert!(expected_skips("A | b | - |").is_err());
        assert!(expected_skips("A | - | - | r").is_err());
    }
}
