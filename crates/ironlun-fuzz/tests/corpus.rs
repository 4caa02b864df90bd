//! The fuzz harnesses on their committed inputs: the seed corpus must be
//! current and reach deep into each state machine, and every past
//! finding (`fuzz/regressions/<target>/`) must replay cleanly.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ironlun_fuzz::seeds::{all, Seed};
use ironlun_fuzz::{cdb, initiator, login, session, text, wire, TARGETS};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

fn seed(target: &str, name: &str) -> Vec<u8> {
    all()
        .into_iter()
        .find(|s| s.target == target && s.name == name)
        .unwrap_or_else(|| panic!("no seed {target}/{name}"))
        .bytes
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.is_file() && p.file_name().is_none_or(|n| n != "README.md"));
    v.sort();
    v
}

#[test]
fn committed_seeds_are_the_generated_ones() {
    let seeds = all();
    let mut stale = Vec::new();
    for Seed {
        target,
        name,
        bytes,
    } in &seeds
    {
        let path = fuzz_dir().join("seeds").join(target).join(name);
        if std::fs::read(&path).ok().as_ref() != Some(bytes) {
            stale.push(format!("{target}/{name}"));
        }
    }
    let expected: BTreeSet<String> = seeds
        .iter()
        .map(|s| format!("{}/{}", s.target, s.name))
        .collect();
    for t in TARGETS {
        for f in files(&fuzz_dir().join("seeds").join(t)) {
            let n = format!("{t}/{}", f.file_name().unwrap().to_string_lossy());
            if !expected.contains(&n) {
                stale.push(format!("{n} (no longer generated)"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "fuzz/seeds differs from the generated seeds: {stale:?}; run scripts/fuzz --write-seeds"
    );
}

#[test]
fn every_target_has_seeds() {
    for t in TARGETS {
        let n = all().iter().filter(|s| s.target == t).count();
        assert!(n >= 3, "{t} has {n} seeds");
    }
}

#[test]
fn wire_seeds_decode_whole_sessions() {
    let r = wire(&seed("wire", "session-pdus"));
    assert_eq!((r.frames, r.pdus, r.error), (6, 6, None));
    let r = wire(&seed("wire", "session-pdus-with-digests"));
    assert_eq!((r.frames, r.pdus, r.error), (6, 6, None));
    let r = wire(&seed("wire", "every-opcode"));
    assert_eq!(r.frames, 64);
    assert!(r.pdus >= 18, "{r:?}");
    assert_eq!(wire(&seed("wire", "extended-cdb-ahs")).frames, 1);
}

#[test]
fn text_seeds_are_negotiated() {
    let r = text(&seed("text", "operational-offer"));
    assert_eq!(r.pairs, 16);
    assert_eq!(r.answers, 15, "{r:?}");
    // The harness offers everything twice; the repeat is refused
    // (RFC 7143 §6.2).
    assert!(r.negotiation_error, "{r:?}");
    let r = text(&seed("text", "security-stage"));
    assert!(r.pairs == 9 && r.answers > 0, "{r:?}");
}

#[test]
fn cdb_seeds_run_the_command_table() {
    let r = cdb(&seed("cdb", "command-tour"));
    assert!(r.commands >= 50, "{r:?}");
    assert!(r.good >= 35, "{r:?}");
    assert!(r.check_condition >= 5, "{r:?}");
    let thin = cdb(&seed("cdb", "command-tour-thin-sanitize"));
    let ro = cdb(&seed("cdb", "command-tour-write-protected"));
    assert_ne!(thin, r, "thin provisioning changes nothing");
    assert_ne!(ro, r, "write protection changes nothing");
}

#[test]
fn login_seeds_complete_and_authenticate() {
    for name in ["normal", "normal-digests", "discovery"] {
        let r = login(&seed("login", name));
        assert!(r.completed && !r.failed, "{name}: {r:?}");
    }
    for name in ["chap", "mutual-chap", "discovery-mutual-chap"] {
        let r = login(&seed("login", name));
        assert!(r.completed && r.authenticated, "{name}: {r:?}");
    }
}

/// The harness's CHAP account is not vacuous: the recorded CHAP login
/// with one digit of CHAP_R changed is refused.
#[test]
fn a_wrong_chap_response_does_not_log_in() {
    let mut bytes = seed("login", "chap");
    let at = bytes
        .windows(9)
        .position(|w| w == b"CHAP_R=0x")
        .expect("the seed carries CHAP_R")
        + 9;
    bytes[at] = if bytes[at] == b'0' { b'1' } else { b'0' };
    let r = login(&bytes);
    assert!(!r.completed && r.failed && !r.authenticated, "{r:?}");
}

#[test]
fn session_seeds_reach_full_feature_phase() {
    let r = session(&seed("session", "normal-io"));
    assert!(r.logged_in && !r.discovery, "{r:?}");
    assert!(r.commands >= 8, "{r:?}");
    assert!(r.write_bytes >= (96 << 10) + 4096, "{r:?}");
    assert!(r.data_in_bytes >= 96 << 10, "{r:?}");
    assert!(r.r2ts >= 1 && r.text_responses >= 1, "{r:?}");
    assert_eq!(r.tmf_responses, 2, "{r:?}");
    // The LOGICAL UNIT RESET asked the other sessions to end their tasks:
    // the daemon's own connection logic (ironlun-target-core's ConnCore)
    // ran it, as nothing else in the harness makes signals.
    assert_eq!(r.signals, 1, "{r:?}");
    assert!(r.logged_out, "{r:?}");

    let r = session(&seed("session", "mutual-chap-digests-io"));
    assert!(r.authenticated && r.commands >= 8 && r.logged_out, "{r:?}");

    let r = session(&seed("session", "held-commands"));
    assert!(r.nop_pings >= 1, "{r:?}");
    assert!(r.tmf_responses >= 1 && r.logged_out, "{r:?}");

    let r = session(&seed("session", "discovery"));
    assert!(
        r.discovery && r.text_responses >= 3 && r.logged_out,
        "{r:?}"
    );
}

#[test]
fn initiator_seeds_reach_full_feature_phase_and_complete_commands() {
    let r = initiator(&seed("initiator", "normal-io"));
    assert!(r.logged_in && !r.discovery && r.failed.is_none(), "{r:?}");
    // Every task completed with a reply: 11 SCSI commands (the first on
    // each LU ends in a unit attention), a text exchange, two TMFs, a
    // ping and the logout.
    assert_eq!((r.submitted, r.replies, r.errors), (16, 16, 0), "{r:?}");
    assert_eq!(r.good, 9, "{r:?}");
    assert!(r.read_bytes >= 2 * (96 << 10), "{r:?}");
    assert!(r.data_ins >= 12, "{r:?}");
    // Two 96 KiB writes: 16 KiB immediate data each, the rest (64 KiB
    // MaxBurstLength) in answer to two R2Ts each.
    assert!(r.immediate_bytes >= 2 * (16 << 10), "{r:?}");
    assert_eq!((r.r2ts, r.solicited_bytes), (4, 2 * (80 << 10)), "{r:?}");
    assert_eq!(
        (r.text_replies, r.tmf_replies, r.nop_replies),
        (1, 2, 1),
        "{r:?}"
    );
    // Six quiet seconds: the initiator pinged, and answered the target's
    // ping.
    assert!(r.keepalives >= 1 && r.ping_echoes >= 1, "{r:?}");
    assert!(r.logged_out, "{r:?}");

    let r = initiator(&seed("initiator", "mutual-chap-digests-io"));
    assert!(r.authenticated && r.target_authenticated, "{r:?}");
    // The first command on each LU met a unit attention and was sent
    // again: every SCSI command ended GOOD.
    assert_eq!(r.unit_attentions, 2, "{r:?}");
    assert_eq!((r.replies, r.good, r.errors), (12, 11, 0), "{r:?}");
    assert!(r.read_bytes >= 2 * (96 << 10) && r.logged_out, "{r:?}");

    let r = initiator(&seed("initiator", "r2t-only-held"));
    assert_eq!((r.immediate_bytes, r.unsolicited_bytes), (0, 0), "{r:?}");
    assert!(r.solicited_bytes >= 2 * (96 << 10) && r.r2ts >= 5, "{r:?}");
    assert!(r.refused >= 1, "the table of 4 tags never filled: {r:?}");
    assert!(r.tmf_replies == 1 && r.async_events == 1, "{r:?}");
    // The aborted read got no status: the completed ABORT TASK ended it
    // (TaskError::Aborted), so nothing is left to take back.
    assert!(r.logged_out && r.errors == 1 && r.taken_back == 0, "{r:?}");

    let r = initiator(&seed("initiator", "discovery"));
    assert!(r.discovery && r.text_replies == 2, "{r:?}");
    assert!(r.text_continuations >= 2 && r.logged_out, "{r:?}");

    // The hand-written hostile target: tasks fail, a ping is answered,
    // good commands still complete, and the connection ends on a Reject
    // of nothing we sent.
    let r = initiator(&seed("initiator", "hostile-target"));
    assert!(r.logged_in && r.ping_echoes == 1, "{r:?}");
    assert!(r.unsolicited_bytes > 0 && r.good == 2, "{r:?}");
    assert_eq!((r.text_replies, r.text_continuations), (1, 1), "{r:?}");
    assert!(
        r.failed
            .as_deref()
            .is_some_and(|f| f.contains("target rejected")),
        "{r:?}"
    );
}

/// The harness's account of mutual CHAP is not vacuous: the recorded
/// exchange with one digit of the target's CHAP_R changed does not log
/// in (the initiator refuses the impostor before the harness would).
#[test]
fn a_wrong_target_chap_response_does_not_log_in() {
    let mut bytes = seed("initiator", "mutual-chap-digests-io");
    let at = bytes
        .windows(9)
        .position(|w| w == b"CHAP_R=0x")
        .expect("the target's CHAP_R is in the seed")
        + 9;
    bytes[at] = if bytes[at] == b'0' { b'1' } else { b'0' };
    let r = initiator(&bytes);
    assert!(!r.logged_in && !r.target_authenticated, "{r:?}");
    assert!(r.login_error.is_some(), "{r:?}");
}

/// Every input that once failed a harness, replayed. Findings are also
/// named tests of their own, next to the fix.
#[test]
fn past_findings_replay_cleanly() {
    let mut n = 0;
    for t in TARGETS {
        for f in files(&fuzz_dir().join("regressions").join(t)) {
            let data = std::fs::read(&f).unwrap();
            ironlun_fuzz::run(t, &data).unwrap();
            n += 1;
        }
    }
    println!("{n} past findings replayed");
}

#[test]
fn state_files_seeds_read_and_round_trip() {
    use ironlun_fuzz::state_files;
    let r = state_files(&seed("state_files", "pr-v2"));
    assert!(r.decoded && r.registrations == 2 && r.reserved, "{r:?}");
    let r = state_files(&seed("state_files", "pr-v1"));
    assert!(r.decoded && r.registrations == 2 && r.reserved, "{r:?}");
    for name in [
        "sanitize-overwrite",
        "sanitize-block-erase",
        "sanitize-failed-v1",
    ] {
        let r = state_files(&seed("state_files", name));
        assert!(r.kind == "sanitize" && r.decoded, "{name}: {r:?}");
    }
    let r = state_files(&seed("state_files", "pr-built"));
    assert!(r.decoded && r.registrations == 3 && r.reserved, "{r:?}");
}

#[test]
fn config_files_seeds_check_and_answer() {
    use ironlun_fuzz::config_files;
    for name in ["config-every-section", "config-minimal"] {
        let r = config_files(&seed("config_files", name));
        assert!(r.kind == "config" && r.parsed, "{name}: {r:?}");
    }
    for s in all()
        .iter()
        .filter(|s| s.target == "config_files" && s.name.starts_with("op-"))
    {
        let r = config_files(&s.bytes);
        // online-lun answers "not offline"; an apply that changes the
        // portals and the state directory is refused (not live).
        let refused = s.name == "op-apply-refused";
        assert!(r.parsed && r.answered != refused, "{}: {r:?}", s.name);
    }
}
