//! SANITIZE against the daemon, at a configured medium rate so that an
//! operation lasts long enough to be watched (SBC-4 §4.11):
//!
//! - libiscsi's Sanitize.Reset: the operation outlives ABORT TASK, ABORT
//!   TASK SET, LOGICAL UNIT RESET, warm and cold target resets and a new
//!   login. A 16 MiB RAM LU at 1 MiB/s takes 16 s; the test needs it
//!   running until about 5 s in, and its last loop sleeps 60 s after the
//!   TEST UNIT READY that still sees it, so the test takes about 65 s.
//! - a restart mid-sanitize: a 16 MiB file LU at 1 MiB/s (16 s) is
//!   stopped by SIGTERM after a second or two, resumed, killed (SIGKILL) a
//!   second later, resumed again, and ends with every byte of the file
//!   overwritten and its record gone.
//! - a record that no longer fits the LU (its size changed) is failure
//!   mode until EXIT FAILURE MODE.
//!
//! No assertion depends on how long anything takes: the waits are bounded
//! only so that a hang fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;
use crate::support::cu;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::{run, tool, Raw, Target};

const NAME: &str = "iqn.2026-11.io.ironlun:e2e-sanitize";

#[test]
fn libiscsi_sanitize_reset_passes() {
    let cu = tool("iscsi-test-cu", "libiscsi-bin");
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:16MiB,sanitize,sanitize_rate=1MiB/s",
    ]);
    let url = t.url(NAME, 0);
    let (_, out) = run(
        &cu,
        &["--dataloss", "-S", "-V", "--test=ALL.Sanitize.Reset", &url],
    );
    let r = cu::parse(&out);
    let why = || format!("{out}\ntarget log:\n{}", t.log());
    assert_eq!(r.summary, Some((1, 1, 1, 0)), "{}", why());
    let o = r
        .tests
        .get("Sanitize.Reset")
        .unwrap_or_else(|| panic!("{}", why()));
    assert!(
        o.passed && !o.failed && o.skips.is_empty(),
        "{o:?}\n{}",
        why()
    );
    // It saw the operation under way, before and after the resets and
    // the new login (a test that skipped its checks would not).
    let seen = out
        .matches("[OK] TESTUNITREADY returned CHECK_CONDITION NOT READY(0x02) SANITIZE_IN_PROGRESS")
        .count();
    assert_eq!(seen, 2, "{}", why());
    assert!(!t.log().contains("panicked"), "{}", why());
}

/// A 16 MiB file LU at 1 MiB/s with a state directory, both in `dir`.
struct Setup {
    image: PathBuf,
    state: PathBuf,
}

const LU_BYTES: u64 = 16 << 20;
const PATTERN: u8 = 0xa5;

impl Setup {
    fn new(dir: &Path) -> Setup {
        Setup {
            image: dir.join("lu.img"),
            state: dir.join("state"),
        }
    }

    fn start(&self, size: &str) -> Target {
        let spec = format!(
            "file:{},size={size},sanitize,sanitize_rate=1MiB/s",
            self.image.display()
        );
        Target::start(&[
            "--name",
            NAME,
            "--state-dir",
            self.state.to_str().unwrap(),
            "--lun",
            &spec,
        ])
    }

    /// The record's file: the target name with ':' written %3a
    /// (docs/admin.md, "A LU offline for its state").
    fn record_path(&self) -> PathBuf {
        self.state
            .join(format!("sanitize-{}-lun0.txt", NAME.replace(':', "%3a")))
    }

    fn record(&self) -> Option<String> {
        std::fs::read_to_string(self.record_path()).ok()
    }

    /// Bytes done in the record, if it says an operation is running.
    fn done(&self) -> Option<u64> {
        let text = self.record()?;
        if !text.contains("state running") {
            return None;
        }
        text.lines()
            .find_map(|l| l.strip_prefix("done "))
            .and_then(|d| d.parse().ok())
    }
}

/// Waits (bounded) until `what` holds.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A logged-in session to LUN 0 with its unit attentions taken.
fn session(t: &Target) -> Raw {
    let mut c = Raw::connect(t.addr);
    let (r, _) = c.login(NAME, [0x80, 0x5a, 0x17, 0, 0, 1], &[]);
    assert_eq!((r.status.class(), r.status.detail()), (0, 0), "login");
    for _ in 0..8 {
        let (st, sense, _) = c.scsi(&[0; 6], 0, &[]);
        if st == 0 || sense.get(2).map(|k| k & 0x0f) != Some(0x06) {
            break;
        }
    }
    c
}

/// (status, sense key, ASC, ASCQ) of a command without data.
fn status_of(c: &mut Raw, cdb: &[u8], read_len: u32, out: &[u8]) -> (u8, u8, u8, u8) {
    let (st, s, _) = c.scsi(cdb, read_len, out);
    let b = |i: usize| s.get(i).copied().unwrap_or(0);
    (st, b(2) & 0x0f, b(12), b(13))
}

const NOT_READY_SANITIZING: (u8, u8, u8, u8) = (2, 0x02, 0x04, 0x1b);

/// The PROGRESS INDICATION REQUEST SENSE reports during a sanitize.
fn progress(c: &mut Raw) -> u16 {
    let (st, _, d) = c.scsi(&[0x03, 0, 0, 0, 18, 0], 18, &[]);
    assert_eq!(st, 0, "REQUEST SENSE");
    assert_eq!((d[2] & 0x0f, d[12], d[13]), (0x02, 0x04, 0x1b), "{d:?}");
    assert_eq!(d[15] & 0x80, 0x80, "SKSV: a progress indication");
    u16::from_be_bytes([d[16], d[17]])
}

/// SANITIZE OVERWRITE with IMMED: one pass of [`PATTERN`].
fn start_overwrite(c: &mut Raw) {
    let params = [0x01, 0, 0, 1, PATTERN];
    let cdb = [0x48, 0x81, 0, 0, 0, 0, 0, 0, params.len() as u8, 0];
    assert_eq!(status_of(c, &cdb, 0, &params), (0, 0, 0, 0), "SANITIZE");
}

/// The progress indication `done` bytes of the one pass mean.
fn progress_of(done: u64) -> u16 {
    (u128::from(done) * 65535 / u128::from(LU_BYTES)) as u16
}

/// What the log says when the LU resumes at `done` bytes.
fn resuming_at(done: u64) -> String {
    let percent = u32::from(progress_of(done)) * 100 / 65536;
    format!("resuming the interrupted sanitize at {percent}%")
}

#[test]
fn a_sanitize_resumes_after_a_stop_and_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let s = Setup::new(dir.path());
    let mut t = s.start("16MiB");
    let mut c = session(&t);
    start_overwrite(&mut c);
    assert_eq!(status_of(&mut c, &[0; 6], 0, &[]), NOT_READY_SANITIZING);
    eventually("a checkpoint", || s.done().is_some_and(|d| d > 0));
    drop(c);

    // SIGTERM: the operation stops at a checkpoint instead of finishing.
    assert_eq!(t.terminate(Duration::from_secs(60)), Some(0), "{}", t.log());
    assert!(t.log().contains("sanitize stopped at"), "{}", t.log());
    let stopped_at = s.done().expect("still recorded as running");
    assert!((1..LU_BYTES).contains(&stopped_at), "{stopped_at}");

    // Started again: it resumes from there, not from the beginning, and
    // the LU is NOT READY with at least that much progress.
    let t = s.start("16MiB");
    let resumed = resuming_at(stopped_at);
    assert!(
        t.wait_log(&resumed, Duration::from_secs(10)),
        "{resumed}: {}",
        t.log()
    );
    let mut c = session(&t);
    assert_eq!(status_of(&mut c, &[0; 6], 0, &[]), NOT_READY_SANITIZING);
    let p = progress(&mut c);
    assert!(p >= progress_of(stopped_at), "{p} < {stopped_at} bytes");
    eventually("a checkpoint after the resumption", || {
        s.done().is_some_and(|d| d > stopped_at)
    });
    drop(c);

    // Killed: it resumes from its last checkpoint and finishes.
    drop(t);
    let crashed_at = s.done().expect("still recorded as running");
    assert!(crashed_at > stopped_at);
    let mut t = s.start("16MiB");
    let resumed = resuming_at(crashed_at);
    assert!(
        t.wait_log(&resumed, Duration::from_secs(10)),
        "{resumed}: {}",
        t.log()
    );
    let mut c = session(&t);
    eventually("the operation ends", || {
        status_of(&mut c, &[0; 6], 0, &[]).0 == 0
    });
    assert_eq!(s.record(), None, "the record is gone when it succeeds");
    drop(c);
    assert_eq!(t.terminate(Duration::from_secs(60)), Some(0), "{}", t.log());
    let data = std::fs::read(&s.image).unwrap();
    assert_eq!(data.len() as u64, LU_BYTES);
    let wrong = data.iter().filter(|&&b| b != PATTERN).count();
    assert_eq!(wrong, 0, "bytes not overwritten");
    assert!(!t.log().contains("panicked"), "{}", t.log());
}

#[test]
fn a_sanitize_that_cannot_resume_is_failure_mode_until_exit() {
    let dir = tempfile::tempdir().unwrap();
    let s = Setup::new(dir.path());
    let t = s.start("16MiB");
    let mut c = session(&t);
    start_overwrite(&mut c);
    eventually("a checkpoint", || s.done().is_some_and(|d| d > 0));
    drop(c);
    drop(t);

    // The LUN grew while the target was down (its file grown: size= does
    // not grow a file unasked): the record is of another medium, so the
    // LU cannot resume and enters failure mode.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&s.image)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    let t = s.start("32MiB");
    assert!(
        t.wait_log("sanitize failure mode", Duration::from_secs(10)),
        "{}",
        t.log()
    );
    assert!(t.log().contains("another medium"), "{}", t.log());
    let mut c = session(&t);
    let read10 = [0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0];
    assert_eq!(status_of(&mut c, &read10, 512, &[]), (2, 0x03, 0x31, 0x03));
    assert!(s.record().unwrap().contains("state failed"));
    // EXIT FAILURE MODE: reads work again and the record is gone.
    let exit = [0x48, 0x1f, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(status_of(&mut c, &exit, 0, &[]), (0, 0, 0, 0));
    assert_eq!(status_of(&mut c, &read10, 512, &[]).0, 0);
    assert_eq!(s.record(), None);
}
