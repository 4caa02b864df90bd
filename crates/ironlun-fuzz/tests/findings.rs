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

/// Found with the `initiator` harness while it was written (a hand-written
/// hostile input, not a libFuzzer run, 2026-11-24): a Reject naming a
/// command still waiting for the command window completed that command
/// but left its slot in the initiator's waiting queue; the next task to
/// take the slot was sent twice, with two CmdSNs ("SCSI Command for ITT
/// 0x20001 sent again while the target holds it"). The initiator now
/// fails the connection on a Reject of something it never sent
/// (ironlun-proto `a_reject_naming_a_command_never_sent_fails_the_connection`).
#[test]
fn reject_of_a_command_never_sent() {
    let out = replay("initiator", "reject-of-a-command-never-sent");
    assert!(out.contains("logged_in: true"), "{out}");
    assert!(
        out.contains("target rejected a PDU we cannot name"),
        "{out}"
    );
}

/// Found with the `initiator` harness while it was written (hand-written
/// input): a NOP-In with ITT and TTT 0xffffffff, which carries the next
/// StatSN without using it (RFC 7143 §11.19.5), advanced the initiator's
/// ExpStatSN, acknowledging a status the target had not sent
/// (ironlun-proto `a_nop_in_with_the_reserved_itt_does_not_advance_exp_stat_sn`).
/// The replay must reach the ping submitted after it.
#[test]
fn window_nop_in_acknowledged() {
    let out = replay("initiator", "window-nop-in-acknowledged");
    assert!(out.contains("submitted: 3"), "{out}");
    assert!(out.contains("failed: None"), "{out}");
}

/// Found with the `initiator` harness while it was written (hand-written
/// input): a target ping carrying 9000 bytes, more than the target's own
/// MaxRecvDataSegmentLength of 8192, was echoed whole, a PDU the target
/// must refuse (ironlun-proto
/// `a_ping_echo_stays_within_the_targets_max_recv_data_segment_length`).
#[test]
fn ping_data_beyond_the_targets_segment() {
    let out = replay("initiator", "ping-data-beyond-the-targets-segment");
    assert!(out.contains("ping_echoes: 1"), "{out}");
}

/// Found by the `initiator` target (libFuzzer, 3 s into its first 60 s run,
/// minimised with `cargo fuzz tmin`): the target's answer DataDigest=CRC32C
/// mangled into an unknown key left the initiator's CRC32C-only proposal
/// unanswered, and the login completed with the RFC default,
/// DataDigest=None ("digests other than the only one offered"). The
/// initiator now fails such a login (ironlun-proto
/// `a_digest_left_unanswered_does_not_fall_back_to_one_not_offered`).
#[test]
fn unanswered_data_digest_falls_back_to_none() {
    let out = replay("initiator", "unanswered-data-digest-falls-back-to-none");
    assert!(out.contains("logged_in: false"), "{out}");
    assert!(out.contains("DataDigest=None in effect"), "{out}");
}

/// Found by the `initiator` target (libFuzzer, 37 s into its second run,
/// minimised): a harness false positive. With CHAP configured and agreed,
/// the target offered AuthMethod=None in a later security-stage response;
/// the initiator refused it with AuthMethod=Reject, which the harness
/// took for a downgrade ("AuthMethod=Reject with CHAP configured"). The
/// initiator was right; the harness now accepts a refusal. The replay
/// must get past that request.
#[test]
fn auth_method_none_offered_after_chap_is_refused() {
    let out = replay(
        "initiator",
        "auth-method-none-offered-after-chap-is-refused",
    );
    assert!(out.contains("login_requests: 4"), "{out}");
}
