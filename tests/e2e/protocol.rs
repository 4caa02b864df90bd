//! Protocol behaviour of the real daemon over real sockets, checked with a
//! raw PDU client: shutdown, hostile input, reinstatement, backend errors,
//! keep-alive pings.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::time::Duration;

use ironlun_wire::{
    AsyncEvent, LogoutReason, LogoutRequest, LogoutResult, NopOut, Pdu, RejectReason, TmfFunction,
    TmfResponse, RESERVED_TAG,
};
use support::{Raw, Target};

const NAME: &str = "iqn.2026-11.io.ironlun:e2e-proto";
const TUR: [u8; 6] = [0; 6];
const READ10_1: [u8; 10] = [0x28, 0, 0, 0, 0, 1, 0, 0, 1, 0];

/// Logs in and clears the power-on unit attention.
fn session(t: &Target, isid: [u8; 6]) -> Raw {
    let mut c = Raw::connect(t.addr);
    let (r, _) = c.login(NAME, isid, &[]);
    assert_eq!(
        (r.status.class(), r.status.detail()),
        (0, 0),
        "login failed"
    );
    let (st, _, _) = c.scsi(&TUR, 0, &[]);
    assert_eq!(st, 2, "first command meets the power-on unit attention");
    let (st, _, _) = c.scsi(&TUR, 0, &[]);
    assert_eq!(st, 0);
    c
}

/// Once the daemon has said where it listens, SIGTERM and SIGHUP are
/// handled: a signal sent at that instant ends it cleanly (exit 0) or
/// rescans, never kills it by the signal's default action. Several starts,
/// because the window this guards was short.
#[test]
fn signals_sent_as_soon_as_it_listens_are_handled() {
    for round in 0..8 {
        let mut t = Target::start(&["--name", NAME, "--lun", "ram:1MiB"]);
        // SAFETY: kill(2) on our own child with a valid signal.
        unsafe {
            libc::kill(t.child.id() as i32, libc::SIGHUP);
        }
        assert_eq!(
            t.terminate(Duration::from_secs(20)),
            Some(0),
            "round {round}: {}",
            t.log()
        );
    }
}

#[test]
fn shutdown_asks_initiators_to_log_out_then_exits_zero() {
    let mut t = Target::start(&["--name", NAME, "--lun", "ram:16MiB"]);
    let mut c = session(&t, [0x80, 0, 0, 0, 0, 1]);
    // SAFETY: kill(2) on our own child with a valid signal.
    unsafe {
        libc::kill(t.child.id() as i32, libc::SIGTERM);
    }
    let (pdu, _) = c.recv().expect("async message");
    let Pdu::AsyncMessage(a) = pdu else {
        panic!("expected an Async Message, got {pdu:?}")
    };
    assert_eq!(
        a.async_event,
        AsyncEvent::LOGOUT_REQUEST,
        "target requests logout (RFC 7143 §11.9.1)"
    );
    assert!(a.parameter3 > 0, "Parameter3 gives the time to log out");
    let logout = LogoutRequest {
        immediate: true,
        reason: LogoutReason::CLOSE_SESSION,
        itt: 0x77,
        cid: 0,
        cmd_sn: c.cmd_sn,
        exp_stat_sn: c.exp_stat_sn,
    };
    c.send(&Pdu::LogoutRequest(logout), &[]);
    let (pdu, _) = c.recv().expect("logout response");
    let Pdu::LogoutResponse(l) = pdu else {
        panic!("{pdu:?}")
    };
    assert_eq!((l.response, l.itt), (LogoutResult::CLOSED, 0x77));
    assert!(c.closed());
    assert_eq!(t.terminate(Duration::from_secs(20)), Some(0), "{}", t.log());
}

#[test]
fn hostile_connections_do_not_disturb_a_logged_in_session() {
    let t = Target::start(&["--name", NAME, "--lun", "ram:16MiB"]);
    let mut good = session(&t, [0x80, 0, 0, 0, 0, 2]);

    // 1. Garbage instead of a login.
    let mut b = Raw::connect(t.addr);
    let mut junk = [0u8; 48];
    for (i, x) in junk.iter_mut().enumerate() {
        *x = (i as u8).wrapping_mul(97).wrapping_add(13);
    }
    junk[0] = 0x1e; // an undefined opcode
    junk[4] = 0; // no AHS
    junk[5..8].copy_from_slice(&[0, 0, 0]);
    b.send_bytes(&junk).unwrap();
    let (pdu, _) = b.recv().expect("login reject");
    let Pdu::LoginResponse(r) = pdu else {
        panic!("{pdu:?}")
    };
    assert_eq!(
        (r.status.class(), r.status.detail()),
        (2, 0x0b),
        "invalid during login"
    );
    assert!(b.closed());

    // 2. A login PDU announcing a 16 MiB data segment: refused before
    // buffering it.
    let mut b = Raw::connect(t.addr);
    let mut hdr = [0u8; 48];
    hdr[0] = 0x43;
    hdr[5..8].copy_from_slice(&[0xff, 0xff, 0xff]);
    b.send_bytes(&hdr).unwrap();
    assert!(b.closed());

    // 3. A half header, then silence, then EOF.
    let mut b = Raw::connect(t.addr);
    b.send_bytes(&hdr[..20]).unwrap();
    drop(b);

    // 4. Logged in, then malformed full-feature PDUs.
    let mut b = session(&t, [0x80, 0, 0, 0, 0, 3]);
    let mut bad = [0u8; 48];
    bad[0] = 0x1c; // undefined initiator opcode
    bad[16..20].copy_from_slice(&5u32.to_be_bytes());
    b.send_bytes(&bad).unwrap();
    let (pdu, data) = b.recv().expect("reject");
    assert!(
        matches!(pdu, Pdu::Reject(ref r) if r.reason == RejectReason::COMMAND_NOT_SUPPORTED),
        "{pdu:?}"
    );
    assert_eq!(data.len(), 48);
    // A target opcode from an initiator.
    bad[0] = 0x21;
    b.send_bytes(&bad).unwrap();
    assert!(
        matches!(b.recv().expect("reject").0, Pdu::Reject(ref r) if r.reason == RejectReason::PROTOCOL_ERROR)
    );
    // Data-Out for a task that does not exist is discarded; the session
    // still answers.
    let mut dout = [0u8; 48];
    dout[0] = 0x05;
    dout[1] = 0x80;
    dout[7] = 4;
    dout[16..20].copy_from_slice(&0xdeadu32.to_be_bytes());
    b.send_bytes(&dout).unwrap();
    b.send_bytes(&[1, 2, 3, 4]).unwrap();
    let (st, _, _) = b.scsi(&TUR, 0, &[]);
    assert_eq!(st, 0);
    // REPORT LUNS still answers on the same session.
    let rl = [0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0];
    let (st, sense, luns) = b.scsi(&rl, 64, &[]);
    assert_eq!(st, 0, "{sense:?}");
    assert_eq!(&luns[..4], &[0, 0, 0, 8]);

    // The first session was never disturbed.
    let (st, _, data) = good.scsi(&READ10_1, 512, &[]);
    assert_eq!((st, data.len()), (0, 512));
    assert!(!t.log().contains("panicked"), "{}", t.log());
}

#[test]
fn login_with_the_same_isid_reinstates_the_session() {
    let t = Target::start(&["--name", NAME, "--lun", "ram:16MiB"]);
    let isid = [0x80, 1, 2, 3, 4, 5];
    let mut old = session(&t, isid);
    let mut new = Raw::connect(t.addr);
    let (r, _) = new.login(NAME, isid, &[]);
    assert_eq!(r.status.class(), 0);
    assert!(
        old.closed(),
        "the old connection is closed by reinstatement"
    );
    // The new nexus sees I_T NEXUS LOSS OCCURRED (29/07), then works.
    let (st, sense, _) = new.scsi(&TUR, 0, &[]);
    assert_eq!(st, 2);
    assert_eq!((sense[2] & 0x0f, sense[12], sense[13]), (6, 0x29, 0x07));
    assert_eq!(new.scsi(&TUR, 0, &[]).0, 0);
    assert!(
        t.wait_log("reinstated", Duration::from_secs(5)),
        "{}",
        t.log()
    );
}

#[test]
fn backend_io_error_is_medium_error_and_the_connection_lives() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shrinks.img");
    let spec = format!("file:{},size=1MiB", path.display());
    let t = Target::start(&["--name", NAME, "--lun", &spec]);
    let mut c = session(&t, [0x80, 0, 0, 0, 0, 4]);
    assert_eq!(c.scsi(&READ10_1, 512, &[]).0, 0);
    // Someone truncates the backing file under the target.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    let (st, sense, _) = c.scsi(&READ10_1, 512, &[]);
    assert_eq!(st, 2, "CHECK CONDITION");
    assert_eq!(
        (sense[2] & 0x0f, sense[12]),
        (0x03, 0x11),
        "MEDIUM ERROR, UNRECOVERED READ ERROR"
    );
    assert_eq!(c.scsi(&TUR, 0, &[]).0, 0, "the session goes on");
}

#[test]
fn idle_initiator_is_pinged_and_dropped_when_silent() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("t.toml");
    std::fs::write(
        &cfg,
        format!(
            "[limits]\nnop_interval_secs = 1\nnop_timeout_secs = 1\n[[target]]\nname = \"{NAME}\"\n[[target.lun]]\nspec = \"ram:8MiB\"\n"
        ),
    )
    .unwrap();
    let t = Target::start(&["--config", cfg.to_str().unwrap()]);
    let mut c = session(&t, [0x80, 0, 0, 0, 0, 5]);
    // Answer the first ping; ignore the second.
    let (pdu, _) = c.recv().expect("ping");
    let Pdu::NopIn(n) = pdu else {
        panic!("{pdu:?}")
    };
    assert_eq!(n.itt, RESERVED_TAG);
    assert_ne!(n.ttt, RESERVED_TAG);
    let reply = NopOut {
        immediate: true,
        lun: Default::default(),
        itt: RESERVED_TAG,
        ttt: n.ttt,
        cmd_sn: c.cmd_sn,
        exp_stat_sn: c.exp_stat_sn,
    };
    c.send(&Pdu::NopOut(reply), &[]);
    let (pdu, _) = c.recv().expect("second ping");
    assert!(matches!(pdu, Pdu::NopIn(_)));
    assert!(c.closed(), "unanswered ping closes the connection");
    assert!(
        t.wait_log("NopTimeout", Duration::from_secs(5)),
        "{}",
        t.log()
    );
}

#[test]
fn sighup_rescans_capacity_and_raises_a_unit_attention() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grows.img");
    let spec = format!("file:{},size=1MiB", path.display());
    let t = Target::start(&["--name", NAME, "--lun", &spec]);
    let mut c = session(&t, [0x80, 0, 0, 0, 0, 6]);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(2 << 20)
        .unwrap();
    // SAFETY: kill(2) on our own child with a valid signal.
    unsafe {
        libc::kill(t.child.id() as i32, libc::SIGHUP);
    }
    assert!(
        t.wait_log(
            "capacity changed from 2048 to 4096 blocks",
            Duration::from_secs(10)
        ),
        "{}",
        t.log()
    );
    let (st, sense, _) = c.scsi(&TUR, 0, &[]);
    assert_eq!(st, 2);
    assert_eq!(
        (sense[2] & 0x0f, sense[12], sense[13]),
        (6, 0x2a, 0x09),
        "CAPACITY DATA HAS CHANGED"
    );
    let (st, _, cap) = c.scsi(&[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0], 8, &[]);
    assert_eq!(st, 0);
    assert_eq!(&cap[..4], &4095u32.to_be_bytes());
}

/// PERSISTENT RESERVE OUT with the basic parameter list.
fn prout(c: &mut Raw, sa: u8, ty: u8, key: u64, sa_key: u64, aptpl: bool) -> u8 {
    let mut p = [0u8; 24];
    p[..8].copy_from_slice(&key.to_be_bytes());
    p[8..16].copy_from_slice(&sa_key.to_be_bytes());
    p[20] = u8::from(aptpl);
    c.scsi(&[0x5f, sa, ty, 0, 0, 0, 0, 0, 24, 0], 0, &p).0
}

#[test]
fn aptpl_reservations_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let args = [
        "--name",
        NAME,
        "--lun",
        "ram:16MiB",
        "--state-dir",
        state.to_str().unwrap(),
    ];
    let (holder, other) = ([0x80, 0, 0, 0, 0, 7], [0x80, 0, 0, 0, 0, 8]);
    let mut t = Target::start(&args);
    {
        let mut c = session(&t, holder);
        assert_eq!(
            prout(&mut c, 0x00, 0, 0, 0xfeed, true),
            0,
            "REGISTER, APTPL"
        );
        // Write Exclusive.
        assert_eq!(prout(&mut c, 0x01, 0x01, 0xfeed, 0, false), 0, "RESERVE");
    }
    assert_eq!(t.terminate(Duration::from_secs(20)), Some(0), "{}", t.log());
    assert!(support::state_files(&state) == 1, "one state file");

    let t = Target::start(&args);
    let mut o = session(&t, other);
    let (st, _, keys) = o.scsi(&[0x5e, 0, 0, 0, 0, 0, 0, 0x10, 0, 0], 4096, &[]);
    assert_eq!(st, 0);
    assert_eq!(
        &keys[4..16],
        &[&8u32.to_be_bytes()[..], &0xfeedu64.to_be_bytes()].concat()[..]
    );
    let (st, _, _) = o.scsi(&[0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0], 0, &[0; 512]);
    assert_eq!(
        st, 0x18,
        "RESERVATION CONFLICT: the restored holder is someone else"
    );
    let mut h = session(&t, holder);
    let (st, _, _) = h.scsi(&[0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0], 0, &[0; 512]);
    assert_eq!(st, 0, "the same initiator port holds it again");
    // Unregistering with APTPL clear removes the saved state.
    assert_eq!(prout(&mut h, 0x00, 0, 0xfeed, 0, false), 0);
    assert_eq!(support::state_files(&state), 0);
}

/// Issue 36's attack: an initiator names itself with a newline and a
/// forged `reserve` record, hoping the name lands raw in the APTPL state
/// file. Names are checked where they enter (RFC 7143 §4.2.7, RFC 3722):
/// that name, and every other malformed one, is refused at login with
/// INITIATOR ERROR (0x0200) and logged escaped; nothing reaches the state
/// directory. A good name in upper case is the same initiator as in lower
/// case: its APTPL registration is found again after a restart by a
/// login in lower case.
#[test]
fn names_from_the_wire_are_checked_at_login() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let args = [
        "--name",
        NAME,
        "--lun",
        "ram:16MiB",
        "--state-dir",
        state.to_str().unwrap(),
    ];
    let mut t = Target::start(&args);
    let forged =
        "iqn.2026-11.io.ironlun:e2e\nreserve 1 1 iqn.2026-11.io.ironlun:victim,i,0x800000000009";
    let bad_names = [
        forged,
        "iqn.2026-11.io.ironlun:with space",
        "iqn.2026-11.io.ironlun:tab\there",
        "iqn.2026-11.io.ironlun:bell\u{7}",
        "iqn.2026-11.io.ironlun:esc\u{1b}[2J",
        "eui.0123456789ABCDE",
        "naa.0123456789abcdef01",
        "iqn.x:y",
        "initiator",
    ];
    let isid = [0x80, 0, 0, 0, 0, 9];
    for bad in bad_names {
        for (key, target) in [("InitiatorName", NAME), ("TargetName", bad)] {
            let mut c = Raw::connect(t.addr);
            let extra: &[(&str, &str)] = if key == "InitiatorName" {
                &[("InitiatorName", bad)]
            } else {
                &[]
            };
            let (r, _) = c.login(target, isid, extra);
            assert_eq!(
                (r.status.class(), r.status.detail()),
                (2, 0),
                "{key}={bad:?}: INITIATOR ERROR"
            );
            assert!(c.closed(), "{key}={bad:?}: the connection is closed");
        }
    }
    assert!(
        t.wait_log("login rejected", Duration::from_secs(5)),
        "{}",
        t.log()
    );
    let log = t.log();
    assert!(
        log.contains("ironlun:e2e\\nreserve 1 1"),
        "the forged name is logged escaped:\n{log}"
    );
    assert!(
        !log.lines().any(|l| l.starts_with("reserve")) && !log.contains('\u{1b}'),
        "no line was forged:\n{log}"
    );
    assert!(!state.exists() || support::state_files(&state) == 0);

    // Upper case is the same name: registered with APTPL under it...
    let upper = "IQN.2026-11.IO.IRONLUN:E2E";
    let mut c = Raw::connect(t.addr);
    let (r, _) = c.login(&NAME.to_uppercase(), isid, &[("InitiatorName", upper)]);
    assert_eq!(
        (r.status.class(), r.status.detail()),
        (0, 0),
        "upper case logs in"
    );
    let _ = c.scsi(&TUR, 0, &[]);
    assert_eq!(
        prout(&mut c, 0x00, 0, 0, 0xfeed, true),
        0,
        "REGISTER, APTPL"
    );
    drop(c);
    assert_eq!(t.terminate(Duration::from_secs(20)), Some(0), "{}", t.log());
    // ...and found again, after a restart, by the lower-case name: a
    // REGISTER with the right key is accepted only from a registrant
    // (SPC-5 §5.14.7), anyone else gets RESERVATION CONFLICT.
    let t = Target::start(&args);
    let mut c = Raw::connect(t.addr);
    let lower = upper.to_ascii_lowercase();
    let (r, _) = c.login(NAME, isid, &[("InitiatorName", lower.as_str())]);
    assert_eq!((r.status.class(), r.status.detail()), (0, 0));
    let _ = c.scsi(&TUR, 0, &[]);
    assert_eq!(
        prout(&mut c, 0x00, 0, 0xfeed, 0, false),
        0,
        "the restored registration is this initiator's: {}",
        t.log()
    );
}

/// A persistent reservation file of LUN 1 that does not parse (what the
/// issue 36 attack left in a version 1 file: a name that ended its line
/// and added a reservation), placed before the start: the daemon starts,
/// LUN 0 serves I/O, LUN 1 answers NOT READY, MANUAL INTERVENTION
/// REQUIRED (INQUIRY and REPORT LUNS still work), the log names the file,
/// `ironlun admin state` shows the reason, and the file is kept aside.
/// Then the operator's way back: the marker removed, `admin lun online`.
#[test]
fn a_state_file_that_does_not_parse_takes_only_its_lun_offline() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let sock = dir.path().join("admin.sock");
    // The state file's name: the target name in lower case, ':' as %3a.
    let name = format!("pr-{}-lun1.txt", NAME.replace(':', "%3a"));
    let pr1 = state.join(&name);
    let forged = "ironlun-pr 1\ngeneration 1\n\
        register 00000000000000aa 0 1 iqn.2026-11.test:evil\n\
        reserve 3 1 iqn.2026-11.test:victim,i,0x800000000001 ,i,0x800000000009\n";
    std::fs::write(&pr1, forged).unwrap();
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:16MiB",
        "--lun",
        "ram:16MiB",
        "--state-dir",
        state.to_str().unwrap(),
        "--admin-socket",
        sock.to_str().unwrap(),
    ]);
    let log = t.log();
    assert!(
        log.contains(&format!("target {NAME} LUN 1: offline"))
            && log.contains(pr1.to_str().unwrap())
            && log.contains("does not parse"),
        "{log}"
    );

    let mut c = session(&t, [0x80, 0, 0, 0, 0, 0x21]);
    let block: Vec<u8> = (0..512u32).map(|i| (i * 7) as u8).collect();
    let write = [0x2a, 0, 0, 0, 0, 9, 0, 0, 1, 0];
    let read = [0x28, 0, 0, 0, 0, 9, 0, 0, 1, 0];
    assert_eq!(c.scsi(&write, 0, &block).0, 0, "LUN 0 takes a write");
    assert_eq!(c.scsi(&read, 512, &[]).2, block, "and reads it back");

    c.lun = 1;
    let (st, sense, _) = c.scsi(&TUR, 0, &[]);
    assert_eq!(
        (st, sense3(&sense).0),
        (2, 6),
        "LUN 1's power-on unit attention first"
    );
    for (cdb, read_len, data) in [
        (&TUR[..], 0, &[][..]),
        (&read, 512, &[]),
        (&write, 0, &block),
    ] {
        let (st, sense, _) = c.scsi(cdb, read_len, data);
        assert_eq!(st, 2, "{cdb:02x?}");
        assert_eq!(
            sense3(&sense),
            (2, 0x04, 0x03),
            "NOT READY, MANUAL INTERVENTION REQUIRED"
        );
    }
    let (st, _, inq) = c.scsi(&[0x12, 0, 0, 0, 96, 0], 96, &[]);
    assert_eq!((st, inq.len() >= 36), (0, true), "INQUIRY answers");
    let (st, _, luns) = c.scsi(&[0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0], 64, &[]);
    assert_eq!(
        (st, &luns[..4]),
        (0, &16u32.to_be_bytes()[..]),
        "REPORT LUNS: two LUNs"
    );

    let shown = support::ironlun_ok(&["admin", "--socket", sock.to_str().unwrap(), "state"]);
    let lun1 = shown
        .lines()
        .find(|l| l.contains("o- lun1 "))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        lun1.contains("OFFLINE: ") && lun1.contains("does not parse"),
        "{shown}"
    );

    let aside: Vec<_> = std::fs::read_dir(&state)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&format!("{name}.corrupt-")))
        .collect();
    assert_eq!(aside.len(), 1, "kept aside once: {aside:?}");
    assert_eq!(
        std::fs::read_to_string(state.join(&aside[0])).unwrap(),
        forged
    );
    assert!(shown.contains(&aside[0]), "{shown}");

    // The marker holds it offline; removed, LUN 1 comes back empty.
    let online = [
        "admin",
        "--socket",
        sock.to_str().unwrap(),
        "lun",
        "online",
        NAME,
        "1",
    ];
    let (rc, out) = support::run(support::ironlun_bin(), &online);
    assert!(rc != 0 && out.contains("still offline"), "{rc}: {out}");
    std::fs::remove_file(&pr1).unwrap();
    support::ironlun_ok(&online);
    let (st, sense, _) = c.scsi(&TUR, 0, &[]);
    assert_eq!(
        (st, sense3(&sense)),
        (2, (6, 0x29, 0x00)),
        "told as after a power on"
    );
    assert_eq!(c.scsi(&TUR, 0, &[]).0, 0, "LUN 1 is ready");
    assert_eq!(c.scsi(&write, 0, &block).0, 0, "and takes writes");
    assert!(!t.log().contains("panicked"), "{}", t.log());
}

/// Sense key, ASC and ASCQ of fixed-format sense data.
/// Clears the control mode page's TAS bit (byte 5 bit 6, SPC-5 §7.5.8)
/// with MODE SENSE(6) and MODE SELECT(6).
fn set_tas_off(c: &mut Raw) {
    let (st, _, data) = c.scsi(&[0x1a, 0x08, 0x0a, 0, 255, 0], 255, &[]);
    assert_eq!(st, 0, "MODE SENSE");
    let mut page = data[4..16].to_vec();
    assert_eq!(page[5] & 0x40, 0x40, "TAS is on by default");
    page[5] &= !0x40;
    let mut list = vec![0u8; 4];
    list.extend_from_slice(&page);
    let (st, _, _) = c.scsi(&[0x15, 0x10, 0, 0, list.len() as u8, 0], 0, &list);
    assert_eq!(st, 0, "MODE SELECT");
}

fn sense3(sense: &[u8]) -> (u8, u8, u8) {
    (sense[2] & 0x0f, sense[12], sense[13])
}

#[test]
fn task_management_reaches_other_sessions_tasks() {
    use TmfFunction as F;
    const COMPLETE: TmfResponse = TmfResponse::FUNCTION_COMPLETE;
    const SUCCEEDED: TmfResponse = TmfResponse::FUNCTION_SUCCEEDED;
    let t = Target::start(&["--name", NAME, "--lun", "ram:16MiB"]);
    let mut a = session(&t, [0x80, 0, 0, 0, 0, 9]);
    // TAS=0: other nexuses' aborted tasks end without a response
    // (TAS=1, the default, is tests/e2e/abort.rs). Set before b's nexus
    // exists, so b has no MODE PARAMETERS CHANGED to clear.
    set_tas_off(&mut a);
    let mut b = session(&t, [0x80, 0, 0, 0, 0, 10]);
    // A write that waits for its (unsolicited) data.
    let write8 = [0x2a, 0, 0, 0, 0, 0, 0, 0, 8, 0];
    let itt = a.command(&write8, 0, 4096, &[]);
    assert_eq!(
        a.tmf(F::QUERY_TASK, itt),
        SUCCEEDED,
        "the write is in the task set"
    );
    assert_eq!(a.tmf(F::QUERY_TASK_SET, 0xffff_ffff), SUCCEEDED);
    assert_eq!(
        b.tmf(F::QUERY_TASK_SET, 0xffff_ffff),
        COMPLETE,
        "b has no tasks"
    );
    // b clears the shared task set: a's write ends without a response.
    assert_eq!(b.tmf(F::CLEAR_TASK_SET, 0xffff_ffff), COMPLETE);
    assert_eq!(a.tmf(F::QUERY_TASK, itt), COMPLETE, "the write is gone");
    a.data_out(itt, 0, &[0xaa; 4096], true);
    let (st, sense, _) = a.scsi(&TUR, 0, &[]);
    assert_eq!(
        (st, sense3(&sense)),
        (2, (6, 0x2f, 0)),
        "COMMANDS CLEARED BY ANOTHER INITIATOR"
    );
    let (st, _, data) = a.scsi(&READ10_1, 512, &[]);
    assert_eq!(st, 0);
    assert_ne!(
        data,
        vec![0xaa; 512],
        "the aborted write's late data was dropped"
    );
    // b resets the LU: both nexuses learn of it.
    let itt = a.command(&write8, 0, 4096, &[]);
    assert_eq!(
        a.tmf(F::QUERY_TASK, itt),
        SUCCEEDED,
        "the target has the write"
    );
    assert_eq!(b.tmf(F::LOGICAL_UNIT_RESET, 0xffff_ffff), COMPLETE);
    assert_eq!(a.tmf(F::QUERY_TASK, itt), COMPLETE, "the write is gone");
    for c in [&mut a, &mut b] {
        let (st, sense, _) = c.scsi(&TUR, 0, &[]);
        assert_eq!(
            (st, sense3(&sense)),
            (2, (6, 0x29, 0x03)),
            "BUS DEVICE RESET FUNCTION OCCURRED"
        );
    }
    // I_T NEXUS RESET concerns only the issuer.
    assert_eq!(a.tmf(F::I_T_NEXUS_RESET, 0xffff_ffff), COMPLETE);
    let (st, sense, _) = a.scsi(&TUR, 0, &[]);
    assert_eq!(
        (st, sense3(&sense)),
        (2, (6, 0x29, 0x07)),
        "I_T NEXUS LOSS OCCURRED"
    );
    assert_eq!(b.scsi(&TUR, 0, &[]).0, 0);
    // TARGET COLD RESET: the response, then every connection closes.
    assert_eq!(b.tmf(F::TARGET_COLD_RESET, 0xffff_ffff), COMPLETE);
    assert!(b.closed());
    assert!(a.closed());
    // New sessions work.
    let mut c = session(&t, [0x80, 0, 0, 0, 0, 11]);
    assert_eq!(c.scsi(&READ10_1, 512, &[]).0, 0);
    assert!(!t.log().contains("panicked"), "{}", t.log());
}

/// RFC 7144 (level 2): an initiator that offers iSCSIProtocolLevel=2 gets 2 (and
/// the SAM-5 task management functions that level adds are answered); one
/// that does not offer it is not asked about it, and one that offers 1
/// stays at 1.
#[test]
fn protocol_level_2_is_answered_when_offered() {
    let t = Target::start(&["--name", NAME, "--lun", "ram:16MiB"]);
    let level = |pairs: &[(String, String)]| {
        pairs
            .iter()
            .find(|(k, _)| k == "iSCSIProtocolLevel")
            .map(|(_, v)| v.clone())
    };
    for (offer, answer) in [(Some("2"), Some("2")), (Some("1"), Some("1")), (None, None)] {
        let mut c = Raw::connect(t.addr);
        let extra: Vec<(&str, &str)> = offer
            .map(|o| ("iSCSIProtocolLevel", o))
            .into_iter()
            .collect();
        let (r, pairs) = c.login(NAME, [0x80, 0, 0, 0, 0, 0x21], &extra);
        assert_eq!(
            (r.status.class(), r.status.detail()),
            (0, 0),
            "login with {offer:?}"
        );
        assert!(r.transit, "one login round, offer {offer:?}: {pairs:?}");
        assert_eq!(level(&pairs).as_deref(), answer, "offer {offer:?}");
        if offer == Some("2") {
            assert_eq!(
                c.tmf(TmfFunction::QUERY_TASK_SET, 0xffff_ffff),
                TmfResponse::FUNCTION_COMPLETE,
                "no task in the task set"
            );
        }
    }
}
