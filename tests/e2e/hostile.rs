//! Hostile clients against the real daemon on loopback. One daemon serves
//! a well-behaved session for the whole run; each hostile case runs on
//! connections of its own, and after each the suite checks that the
//! daemon is alive and accepts new logins, that the well-behaved session
//! still writes and reads back verified data, that the daemon's memory
//! did not grow without bound, and that the log says what happened.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::net::TcpStream;
use std::time::Duration;

use ironlun_scsi_codes::Status;
use ironlun_wire::{Digests, LoginRequest, Pdu, RejectReason, Residual};
use support::{Raw, Target};

const NAME: &str = "iqn.2026-11.io.ironlun:hostile";
const TUR: [u8; 6] = [0; 6];
/// Bytes the daemon may grow by over the whole suite (RAM LUN pages the
/// good session touches, allocator slack); a leak per connection or per
/// PDU of the floods below would exceed it.
const RSS_SLACK: u64 = 48 << 20;

fn session(t: &Target, isid_tail: u8, extra: &[(&str, &str)]) -> Raw {
    let mut c = Raw::connect(t.addr);
    let (r, _) = c.login(NAME, [0x80, 0, 0, 0, 0, isid_tail], extra);
    assert_eq!(
        (r.status.class(), r.status.detail()),
        (0, 0),
        "login failed"
    );
    // The power-on unit attention, then a clean TUR.
    let _ = c.scsi(&TUR, 0, &[]);
    let (st, _, _) = c.scsi(&TUR, 0, &[]);
    assert_eq!(st, 0);
    c
}

fn write10(lba: u32, blocks: u16) -> [u8; 10] {
    let l = lba.to_be_bytes();
    let b = blocks.to_be_bytes();
    [0x2a, 0, l[0], l[1], l[2], l[3], 0, b[0], b[1], 0]
}

fn read10(lba: u32, blocks: u16) -> [u8; 10] {
    let mut c = write10(lba, blocks);
    c[0] = 0x28;
    c
}

fn rss(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb << 10
}

struct Suite {
    t: Target,
    good: Raw,
    round: u32,
    baseline: u64,
}

impl Suite {
    fn start() -> Suite {
        let t = Target::start(&["--name", NAME, "--lun", "ram:16MiB"]);
        let good = session(&t, 1, &[]);
        let mut s = Suite {
            t,
            good,
            round: 0,
            baseline: 0,
        };
        s.after("start", &[]);
        s.baseline = rss(s.t.child.id());
        s
    }

    /// The checks after each case: the good session writes a pattern
    /// unique to this round and reads it back; a new session logs in; the
    /// log shows `expect`; memory stays bounded.
    fn after(&mut self, case: &str, expect: &[&str]) {
        self.round += 1;
        let lba = self.round * 8;
        let pattern: Vec<u8> = (0..4096u32)
            .map(|i| (i as u8) ^ (self.round as u8).wrapping_mul(31))
            .collect();
        let (st, sense, _) = self.good.scsi(&write10(lba, 8), 0, &pattern);
        assert_eq!(st, 0, "{case}: good write failed: {sense:?}");
        let (st, _, data) = self.good.scsi(&read10(lba, 8), 4096, &[]);
        assert_eq!(st, 0, "{case}: good read failed");
        assert_eq!(data, pattern, "{case}: good session read back other data");
        let mut fresh = session(&self.t, 200, &[]);
        let (st, _, _) = fresh.scsi(&TUR, 0, &[]);
        assert_eq!(st, 0, "{case}: a new session does not work");
        drop(fresh);
        for needle in expect {
            assert!(
                self.t.wait_log(needle, Duration::from_secs(10)),
                "{case}: the log does not say {needle:?}:\n{}",
                self.t.log()
            );
        }
        assert!(
            !self.t.log().contains("panicked"),
            "{case}: {}",
            self.t.log()
        );
        if self.baseline > 0 {
            let now = rss(self.t.child.id());
            assert!(
                now < self.baseline + RSS_SLACK,
                "{case}: RSS grew from {} to {} bytes",
                self.baseline,
                now
            );
        }
        eprintln!("{case}: survived");
    }

    fn addr(&self) -> std::net::SocketAddr {
        self.t.addr
    }
}

fn login_req() -> LoginRequest {
    LoginRequest {
        transit: true,
        cont: false,
        csg: 1,
        nsg: 3,
        isid: [0x80, 0, 0, 0, 0, 9],
        ..Default::default()
    }
}

/// Malformed header fields, lengths that lie, oversize segments, unknown
/// opcodes, full-feature PDUs before login.
fn malformed_headers_and_lying_lengths(s: &mut Suite) {
    // Version-min above what any target speaks: 0x0205.
    let mut c = Raw::connect(s.addr());
    let mut req = login_req();
    req.version_min = 7;
    c.send(
        &Pdu::LoginRequest(req),
        b"InitiatorName=iqn.2026-11.test:y\0TargetName=iqn.2026-11.io.ironlun:hostile\0",
    );
    let (pdu, _) = c.recv().expect("login response");
    let Pdu::LoginResponse(r) = pdu else {
        panic!("{pdu:?}")
    };
    assert_eq!((r.status.class(), r.status.detail()), (2, 5));
    assert!(c.closed());

    // A SCSI Command as the first PDU: invalid during login (0x020b).
    let mut c = Raw::connect(s.addr());
    let mut bhs = [0u8; 48];
    bhs[0] = 0x01;
    bhs[1] = 0x80;
    c.send_bytes(&bhs).unwrap();
    let (pdu, _) = c.recv().expect("login response");
    let Pdu::LoginResponse(r) = pdu else {
        panic!("{pdu:?}")
    };
    assert_eq!((r.status.class(), r.status.detail()), (2, 0x0b));
    assert!(c.closed());

    // A login header announcing AHS and a data segment that never come.
    let mut c = Raw::connect(s.addr());
    let mut bhs = [0u8; 48];
    bhs[0] = 0x43;
    bhs[4] = 0xff; // 1020 bytes of AHS
    bhs[5..8].copy_from_slice(&[0, 0x10, 0]);
    c.send_bytes(&bhs).unwrap();
    c.send_bytes(&[0xee; 100]).unwrap();
    drop(c);

    // Logged in: a data segment longer than the target's
    // MaxRecvDataSegmentLength (RFC 7143 §13.12) closes the connection.
    let mut c = session(&s.t, 10, &[]);
    let mut bhs = [0u8; 48];
    bhs[0] = 0x04; // Text Request
    bhs[1] = 0x80;
    let len: u32 = 4 << 20;
    bhs[5..8].copy_from_slice(&len.to_be_bytes()[1..]);
    bhs[16..20].copy_from_slice(&77u32.to_be_bytes());
    c.send_bytes(&bhs).unwrap();
    let _ = c.send_bytes(&vec![b'A'; 64 << 10]);
    assert!(c.closed(), "an oversize segment must end the connection");

    // Unknown opcodes and a target-only opcode: Reject, session lives.
    let mut c = session(&s.t, 11, &[]);
    for op in [0x1c, 0x3f, 0x21] {
        let mut bad = [0u8; 48];
        bad[0] = op;
        bad[16..20].copy_from_slice(&5u32.to_be_bytes());
        c.send_bytes(&bad).unwrap();
        let (pdu, _) = c.recv().expect("reject");
        assert!(matches!(pdu, Pdu::Reject(_)), "opcode {op:#x}: {pdu:?}");
    }
    let (st, _, _) = c.scsi(&TUR, 0, &[]);
    assert_eq!(st, 0);

    // A READ whose expected length disagrees with its CDB: the target
    // sends what was expected and reports the rest as an overflow
    // residual (RFC 7143 §11.4.5, §11.7.5), not a crash.
    let itt = c.command(&read10(0, 8), 512, 0, &[]);
    let mut got = 0;
    let (status, residual) = loop {
        let (pdu, data) = c.recv().expect("response");
        match pdu {
            Pdu::ScsiResponse(r) => {
                assert_eq!(r.itt, itt);
                break (r.status, r.residual);
            }
            Pdu::DataIn(d) => {
                assert_eq!(d.itt, itt);
                got += data.len();
                if let Some(st) = d.status {
                    break (st, d.residual);
                }
            }
            _ => {}
        }
    };
    assert_eq!(
        (status, residual, got),
        (Status::GOOD, Residual::Overflow(8 * 512 - 512), 512),
        "status, residual and bytes for 8 blocks read into 512"
    );
    // Immediate data beyond the expected length.
    let itt = c.command(&write10(0, 1), 0, 512, &[0x11; 1024]);
    let (pdu, _) = c.recv().expect("answer");
    assert!(
        matches!(&pdu, Pdu::ScsiResponse(r) if r.itt == itt) || matches!(pdu, Pdu::Reject(_)),
        "{pdu:?}"
    );
    s.after(
        "malformed headers and lying lengths",
        &[
            "login rejected: 0x0205",
            "login rejected: 0x020b",
            "received during login",
            "exceeds MaxRecvDataSegmentLength",
        ],
    );
}

/// CmdSN far outside the window, Data-Out for unknown and finished
/// transfers, duplicate ITTs.
fn sequence_and_tag_abuse(s: &mut Suite) {
    let mut c = session(&s.t, 12, &[]);
    // A command with a CmdSN far ahead of the window is dropped
    // (RFC 7143 §4.2.2.1); the session goes on with correct numbers.
    let saved = c.cmd_sn;
    c.cmd_sn = saved.wrapping_add(1 << 30);
    c.command(&TUR, 0, 0, &[]);
    c.cmd_sn = saved;
    let (st, _, _) = c.scsi(&TUR, 0, &[]);
    assert_eq!(st, 0, "the out-of-window command disturbed the session");

    // A write completed with immediate data, then Data-Out for it.
    let (st, _, _) = c.scsi(&write10(2000, 1), 0, &[0x22; 512]);
    assert_eq!(st, 0);
    let finished = c.command(&TUR, 0, 0, &[]);
    let _ = c.recv();
    c.data_out(finished, 0, &[0x33; 512], true);
    // And for a task that never existed.
    c.data_out(0xdead_beef, 0, &[0x44; 512], true);
    let (st, _, data) = c.scsi(&read10(2000, 1), 512, &[]);
    assert_eq!(
        (st, data),
        (0, vec![0x22; 512]),
        "stray Data-Out changed data"
    );

    // Two tasks with one ITT: a write waiting for data, then a second
    // command reusing its tag.
    let itt = c.command(&write10(3000, 128), 0, 128 * 512, &[]);
    let cdb = read10(0, 1);
    let mut cmd = [0u8; 48];
    cmd[0] = 0x01;
    cmd[1] = 0xc0; // F, R
    cmd[16..20].copy_from_slice(&itt.to_be_bytes());
    cmd[20..24].copy_from_slice(&512u32.to_be_bytes());
    cmd[24..28].copy_from_slice(&c.cmd_sn.to_be_bytes());
    cmd[28..32].copy_from_slice(&c.exp_stat_sn.to_be_bytes());
    cmd[32..42].copy_from_slice(&cdb);
    c.cmd_sn = c.cmd_sn.wrapping_add(1);
    c.send_bytes(&cmd).unwrap();
    // Whatever the answer (a reject, an error status or closing the
    // connection), the daemon and other sessions carry on.
    let _ = c.stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = c.recv();
    drop(c);
    s.after("sequence and tag abuse", &[]);
}

/// With digests negotiated, a PDU with a wrong header digest and one with
/// a wrong data digest.
fn wrong_digests(s: &mut Suite) {
    let on = [("HeaderDigest", "CRC32C"), ("DataDigest", "CRC32C")];
    for corrupt_data in [false, true] {
        let mut c = Raw::connect(s.addr());
        let (r, keys) = c.login(NAME, [0x80, 0, 0, 0, 0, 13], &on);
        assert_eq!((r.status.class(), r.status.detail()), (0, 0));
        assert!(
            keys.iter()
                .any(|(k, v)| k == "HeaderDigest" && v == "CRC32C"),
            "{keys:?}"
        );
        c.digests = Digests {
            header: true,
            data: true,
        };
        let _ = c.scsi(&TUR, 0, &[]);
        // A WRITE with immediate data, correctly framed, then one byte
        // flipped: in the header digest or in the data digest.
        let itt_cmd = write10(4000, 1);
        let mut raw = Vec::new();
        {
            use bytes::BytesMut;
            let mut cdb = [0u8; 16];
            cdb[..10].copy_from_slice(&itt_cmd);
            let cmd = ironlun_wire::ScsiCommand {
                immediate: false,
                final_bit: true,
                read: false,
                write: true,
                attr: 1,
                lun: ironlun_wire::Lun::from_index(0),
                itt: 0x5151,
                expected_data_transfer_length: 512,
                cmd_sn: c.cmd_sn,
                exp_stat_sn: c.exp_stat_sn,
                cdb,
            };
            let mut out = BytesMut::new();
            ironlun_wire::encode_frame(
                &Pdu::ScsiCommand(cmd).encode(),
                &[],
                &[0x55; 512],
                c.digests,
                &mut out,
            )
            .unwrap();
            raw.extend_from_slice(&out);
        }
        let at = if corrupt_data { raw.len() - 1 } else { 48 + 3 };
        raw[at] ^= 0x40;
        c.send_bytes(&raw).unwrap();
        let _ = c.stream.set_read_timeout(Some(Duration::from_secs(3)));
        // RFC 7143 §7.8 at ERL 0: a header digest error ends the
        // connection; a data digest error gets the PDU rejected (reason
        // 0x02, data digest error), and the command cannot be recovered,
        // so the connection ends too. Either way the data must not be
        // written.
        if corrupt_data {
            match c.next_pdu() {
                Ok((Pdu::Reject(r), _)) => {
                    assert_eq!(r.reason, RejectReason::DATA_DIGEST_ERROR, "{r:?}")
                }
                other => panic!("no Reject for the data digest error: {other:?}"),
            }
        }
        assert!(
            c.closed(),
            "a digest error left the connection open ({corrupt_data})"
        );
    }
    let (st, _, data) = s.good.scsi(&read10(4000, 1), 512, &[]);
    assert_eq!(st, 0);
    assert_ne!(data, vec![0x55; 512], "data with a bad digest was written");
    s.after(
        "wrong digests",
        &["header digest mismatch", "data digest mismatch"],
    );
}

/// Disconnects in the middle of Data-Out and of Data-In.
fn disconnects_mid_transfer(s: &mut Suite) {
    for _ in 0..3 {
        let mut c = session(&s.t, 14, &[]);
        // 1 MiB write with 64 KiB immediate data; the rest never comes.
        c.command(&write10(5000, 2048), 0, 1 << 20, &[0x66; 64 << 10]);
        c.data_out(1, 64 << 10, &[0x66; 8192], false);
        drop(c);
        let mut c = session(&s.t, 15, &[]);
        // 8 MiB read; close before reading any of it.
        c.command(&read10(0, 16384), 8 << 20, 0, &[]);
        std::thread::sleep(Duration::from_millis(20));
        drop(c);
    }
    s.after(
        "disconnects mid transfer",
        &["logout: connection closed by initiator"],
    );
}

/// Hundreds of half-open connections and stalled logins while the good
/// session works; twice, to see memory come back.
fn login_floods(s: &mut Suite) {
    for round in 0..2 {
        let mut idle: Vec<TcpStream> = Vec::new();
        for i in 0..400 {
            let mut st = TcpStream::connect(s.addr()).unwrap();
            if i % 2 == 0 {
                // Half a login header, then nothing.
                use std::io::Write;
                let _ = st.write_all(&[0x43, 0x87, 0, 0, 0, 0, 0x01]);
            }
            idle.push(st);
        }
        // The good session and new logins still work with all of them
        // open.
        s.after(&format!("login flood {round} (open)"), &[]);
        drop(idle);
        std::thread::sleep(Duration::from_millis(300));
        s.after(&format!("login flood {round} (closed)"), &[]);
    }
}

/// One daemon, every case in turn (a failing case names itself).
#[test]
fn hostile_clients_never_disturb_a_well_behaved_session() {
    let mut s = Suite::start();
    malformed_headers_and_lying_lengths(&mut s);
    sequence_and_tag_abuse(&mut s);
    wrong_digests(&mut s);
    disconnects_mid_transfer(&mut s);
    login_floods(&mut s);
    if std::env::var_os("HOSTILE_LOG").is_some() {
        eprintln!("{}", s.t.log());
    }
    eprintln!(
        "daemon RSS: {} KiB at start, {} KiB at the end",
        s.baseline >> 10,
        rss(s.t.child.id()) >> 10
    );
}
