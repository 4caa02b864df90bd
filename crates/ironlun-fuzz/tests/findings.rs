//! One named test per fuzz finding: the input that failed, replayed
//! through its harness (see fuzz/regressions/README.md).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::Path;

/// Replays `fuzz/regressions/<target>/<name>` through its harness.
fn replay(target: &str, name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions")
        .join(target)
        .join(name);
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    ironlun_fuzz::run(target, &data).unwrap()
}

/// Found by the `session` target (10 min run, 2026-11-22): commands with
/// CmdSN 1..4 wait ahead of the window (ExpCmdSN is 0) while another
/// command reuses ITT 0x20000 of one of them with a CmdSN far outside the
/// window (the target drops it unseen, RFC 7143 §4.2.2.1). The harness
/// took the dropped command's length (0) as the ITT's and called the
/// waiting INQUIRY's 36 bytes of Data-In an overrun. The target was
/// right; the harness now bounds a reused ITT by every length asked for
/// with it. The replay must reach the INQUIRY's Data-In.
#[test]
fn itt_reused_while_ahead_of_the_window() {
    let out = replay("session", "itt-reused-while-ahead-of-the-window");
    assert!(out.contains("logged_in: true"), "{out}");
    assert!(out.contains("data_in_bytes: 36"), "{out}");
}
