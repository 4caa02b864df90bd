//! Session takeover (issue 24 item 7): a host that comes back, or a new
//! node that takes over a host's initiator name, is never kept out by the
//! dead session the old one left behind.
//!
//! - Same name and ISID: the login reinstates the session (RFC 7143
//!   §6.3.5) at once, even when the session table is full, and the dead
//!   connection is closed.
//! - Same name, new ISID (a different I_T nexus): the dead session goes
//!   when its pings go unanswered (NOP-In, RFC 7143 §11.19), which frees
//!   its place in a full table and releases its SCSI-2 reservation (I_T
//!   nexus loss, SPC-2 §5.5.1); the new node, retrying its login as
//!   initiators do, gets in and can write.
//!
//! Each test first sees a login with another ISID refused (OUT OF
//! RESOURCES) while the table is full, so that getting in afterwards is
//! the takeover's doing, not a free place.
//!
//! The dead host is a raw connection that stops reading: it neither
//! answers pings nor closes its socket, as a host that lost power behind
//! a switch looks to the target.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::time::{Duration, Instant};

use support::{Raw, Target};

const NAME: &str = "iqn.2026-11.io.ironlun:takeover";
const TUR: [u8; 6] = [0; 6];
const RESERVE6: [u8; 6] = [0x16, 0, 0, 0, 0, 0];
const READ_CAPACITY10: [u8; 10] = [0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0];
const GOOD: u8 = 0x00;
const RESERVATION_CONFLICT: u8 = 0x18;
/// Login status OUT OF RESOURCES (RFC 7143 §11.13.5): the table is full.
const OUT_OF_RESOURCES: (u8, u8) = (0x03, 0x02);

/// A daemon that allows one session and pings after `nop` seconds of
/// silence, waiting `nop` seconds for the answer (0: never pings).
fn daemon(dir: &std::path::Path, nop: u64) -> Target {
    let config = dir.join("takeover.toml");
    let text = format!(
        "[limits]\nmax_sessions = 1\nnop_interval_secs = {nop}\nnop_timeout_secs = {nop}\n\
         [[target]]\nname = \"{NAME}\"\n[[target.lun]]\nspec = \"ram:8MiB\"\n"
    );
    std::fs::write(&config, text).unwrap();
    Target::start(&["--config", config.to_str().unwrap()])
}

/// Logs in with `isid`: the login status (class, detail) and the
/// connection.
fn login(t: &Target, isid: [u8; 6]) -> ((u8, u8), Raw) {
    let mut c = Raw::connect(t.addr);
    let (r, _) = c.login(NAME, isid, &[]);
    ((r.status.class(), r.status.detail()), c)
}

/// A command, past the unit attention a new nexus meets first.
fn command(c: &mut Raw, cdb: &[u8], read_len: u32, write: &[u8]) -> (u8, Vec<u8>) {
    for _ in 0..4 {
        let (st, sense, data) = c.scsi(cdb, read_len, write);
        let unit_attention = st == 0x02 && sense.get(2).is_some_and(|k| k & 0x0f == 0x06);
        if !unit_attention {
            return (st, data);
        }
    }
    panic!("unit attentions do not stop for {cdb:02x?}");
}

/// The LU's block length (READ CAPACITY(10), SBC-4 §5.20).
fn block_length(c: &mut Raw) -> usize {
    let (st, data) = command(c, &READ_CAPACITY10, 8, &[]);
    assert_eq!(st, GOOD);
    u32::from_be_bytes(data[4..8].try_into().unwrap()) as usize
}

const WRITE10_FIRST_BLOCK: [u8; 10] = [0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0];
const READ10_FIRST_BLOCK: [u8; 10] = [0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0];

/// A host that wrote `pattern` to block 0, reserved the LU and died.
fn dead_host(t: &Target, isid: [u8; 6], pattern: u8) -> (Raw, usize) {
    let (status, mut c) = login(t, isid);
    assert_eq!(status, (0, 0), "the first host logs in");
    let len = block_length(&mut c);
    let (st, _) = command(&mut c, &WRITE10_FIRST_BLOCK, 0, &vec![pattern; len]);
    assert_eq!(st, GOOD, "the first host writes");
    assert_eq!(command(&mut c, &RESERVE6, 0, &[]).0, GOOD, "and reserves");
    (c, len)
}

/// The new node's view: block 0 holds the dead host's data and a write
/// goes through (no reservation conflict).
fn new_node_works(c: &mut Raw, len: usize, pattern: u8) {
    let (st, data) = command(c, &READ10_FIRST_BLOCK, len as u32, &[]);
    assert_eq!(st, GOOD);
    assert_eq!(data, vec![pattern; len], "the dead host's write is there");
    let (st, _) = command(c, &WRITE10_FIRST_BLOCK, 0, &vec![!pattern; len]);
    assert_eq!(st, GOOD, "the new node writes (status {st:#04x})");
    assert_eq!(command(c, &TUR, 0, &[]).0, GOOD);
}

/// A login with `isid` is refused because the table is full (the dead
/// host's session holds its one place).
fn refused_while_full(t: &Target, isid: [u8; 6], why: &str) {
    let (status, _) = login(t, isid);
    assert_eq!(
        status,
        OUT_OF_RESOURCES,
        "{why}: a login with ISID {isid:02x?} was not refused as the table is full\n{}",
        t.log()
    );
}

#[test]
fn a_node_taking_over_the_name_and_isid_reinstates_the_dead_session_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // No pings at all: only reinstatement can clear the dead session.
    let t = daemon(dir.path(), 0);
    let isid = [0x80, 0, 0, 0, 0, 1];
    let (mut dead, len) = dead_host(&t, isid, 0xa5);
    // The table is full: another nexus is kept out, so what lets the
    // node in below is the reinstatement.
    refused_while_full(&t, [0x80, 0, 0, 0, 0, 9], "another ISID");

    let (status, mut node) = login(&t, isid);
    assert_eq!(
        status,
        (0, 0),
        "reinstatement is let in with the table full"
    );
    assert!(dead.closed(), "the dead session's connection is closed");
    assert!(
        t.wait_log("reinstated", Duration::from_secs(10)),
        "{}",
        t.log()
    );
    new_node_works(&mut node, len, 0xa5);
}

#[test]
fn a_host_back_with_a_new_isid_gets_in_once_pings_clear_the_dead_session() {
    let dir = tempfile::tempdir().unwrap();
    let t = daemon(dir.path(), 2);
    let (mut dead, len) = dead_host(&t, [0x80, 0, 0, 0, 0, 2], 0x3c);
    // While the host is alive (it has just spoken, and speaks again
    // between the tries: pings start only after 2 s of silence) the new
    // node's logins are refused: the table is full.
    for _ in 0..3 {
        refused_while_full(&t, [0x80, 0, 0, 0, 0, 3], "the host is alive");
        assert_eq!(command(&mut dead, &TUR, 0, &[]).0, GOOD);
    }

    // The new node retries its login as an initiator does (open-iscsi
    // every few seconds); only a full table may refuse it meanwhile.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut refused = 0;
    let mut node = loop {
        let (status, c) = login(&t, [0x80, 0, 0, 0, 0, 3]);
        if status == (0, 0) {
            break c;
        }
        assert_eq!(status, OUT_OF_RESOURCES, "refused for another reason");
        refused += 1;
        assert!(
            Instant::now() < deadline,
            "still refused after {refused} logins: the dead session lingers\n{}",
            t.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    println!("the new node got in after {refused} more refused login(s)");
    assert!(
        t.wait_log("NopTimeout", Duration::from_secs(10)),
        "the dead session was not cleared by its ping timeout:\n{}",
        t.log()
    );
    // Its reservation went with it; a reservation conflict here would
    // mean the dead nexus still holds the LU.
    let (st, _) = command(&mut node, &TUR, 0, &[]);
    assert_ne!(st, RESERVATION_CONFLICT);
    new_node_works(&mut node, len, 0x3c);
}
