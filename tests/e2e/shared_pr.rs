//! Persistent reservations shared by the gateways of one RBD image
//! through RADOS (`pr=rados`, issue 37 item 3, docs/ha.md "Shared
//! reservations"), on a real single-node Ceph (scripts/ceph-cluster):
//! two `ironlun target` daemons on loopback serve one image as one
//! target (same name, portal group tags and relative ports 1 and 2).
//! Raw PDUs from three initiator names run the cluster-validation
//! sequence: register through A and through B, reserve Write Exclusive -
//! Registrants Only through A, B refuses the unregistered initiator and
//! lets the registered one write, B preempts A's key (A's initiator is
//! told and then refused), APTPL keeps the state across a restart of
//! both gateways (PRgeneration back to 0); without APTPL a gateway
//! restarted while the other runs keeps it, and a restart of both
//! clears it. An SPC-2 RESERVE through A conflicts through B, and its
//! holder's logout has ended it on B by the time the Logout Response
//! arrives.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;
use crate::support::ceph;

use std::path::Path;
use std::time::{Duration, Instant};

use ceph::Ceph;
use ironlun_scsi_codes::SenseCode;
use ironlun_wire::{LogoutReason, LogoutRequest, LogoutResult, Pdu};
use support::{Raw, Target};

const NAME: &str = "iqn.2026-11.test:shared";
const IMAGE: &str = "shared";
const TUR: [u8; 6] = [0; 6];
const WRITE10: [u8; 10] = [0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0];
const READ10: [u8; 10] = [0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0];

const GOOD: u8 = 0;
const CHECK: u8 = 2;
const CONFLICT: u8 = 0x18;

const REGISTER: u8 = 0;
const RESERVE: u8 = 1;
const PREEMPT: u8 = 4;
const REGISTER_IGNORE: u8 = 6;
const WERO: u8 = 5;
const APTPL: u8 = 0x01;

/// Gateway `tag` (portal group tag and relative port), its config in
/// `dir`.
fn gateway(dir: &Path, ceph: &Ceph, tag: u16) -> Target {
    gateway_with(dir, ceph, tag, "")
}

/// [`gateway`] with more options in the LUN's spec (`,timeout=5`).
fn gateway_with(dir: &Path, ceph: &Ceph, tag: u16, more: &str) -> Target {
    use std::os::unix::fs::PermissionsExt;
    let cfg = dir.join(format!("gw{tag}.toml"));
    let text = format!(
        r#"listen = ["127.0.0.1:0"]
[[target]]
name = "{NAME}"
portal_group_tag = {tag}
[target.alua]
mode = "implicit"
local_group = {tag}
groups = [
  {{ id = 1, state = "active/optimized" }},
  {{ id = 2, state = "active/optimized" }},
]
[[target.lun]]
spec = "rbd:rbd/{IMAGE},conf={},pr=rados{more}"
"#,
        ceph.conf.display()
    );
    std::fs::write(&cfg, text).unwrap();
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o600)).unwrap();
    let t = Target::start_with(&["--config", cfg.to_str().unwrap()], false);
    assert!(
        t.wait_log(
            "persistent reservations shared through",
            Duration::from_secs(30)
        ),
        "gateway {tag} did not take up the shared reservations:\n{}",
        t.log()
    );
    t
}

/// A session of initiator `who` whose power-on unit attention is taken.
fn session(t: &Target, who: &str) -> Raw {
    let mut c = Raw::connect(t.addr);
    let name = format!("iqn.2026-11.test:{who}");
    let (r, _) = c.login(NAME, [0x80, 0, 0, 0, 0, 1], &[("InitiatorName", &name)]);
    assert_eq!(
        (r.status.class(), r.status.detail()),
        (0, 0),
        "login of {who}"
    );
    let (st, _, _) = c.scsi(&TUR, 0, &[]);
    assert_eq!(st, CHECK, "the power-on unit attention");
    c
}

fn sense(s: &[u8]) -> (u8, u8, u8) {
    let c = SenseCode::parse(s).expect("sense data");
    (c.key.0, c.asc, c.ascq)
}

/// PERSISTENT RESERVE OUT: its status (sense shown when not GOOD).
fn prout(c: &mut Raw, sa: u8, ty: u8, key: u64, sa_key: u64, flags: u8) -> (u8, String) {
    let mut p = [0u8; 24];
    p[..8].copy_from_slice(&key.to_be_bytes());
    p[8..16].copy_from_slice(&sa_key.to_be_bytes());
    p[20] = flags;
    let cdb = [0x5f, sa, ty, 0, 0, 0, 0, 0, 24, 0];
    let (st, s, _) = c.scsi(&cdb, 0, &p);
    (st, format!("{s:02x?}"))
}

fn good_prout(c: &mut Raw, sa: u8, ty: u8, key: u64, sa_key: u64, flags: u8) {
    let (st, s) = prout(c, sa, ty, key, sa_key, flags);
    assert_eq!(st, GOOD, "PR OUT {sa} {key:#x} {sa_key:#x}: sense {s}");
}

/// READ KEYS: (PRgeneration, keys).
fn read_keys(c: &mut Raw) -> (u32, Vec<u64>) {
    let (st, s, d) = c.scsi(&[0x5e, 0, 0, 0, 0, 0, 0, 4, 0, 0], 1024, &[]);
    assert_eq!(st, GOOD, "READ KEYS: sense {s:02x?}");
    let generation = u32::from_be_bytes(d[..4].try_into().unwrap());
    let keys = d[8..]
        .chunks(8)
        .map(|k| u64::from_be_bytes(k.try_into().unwrap()))
        .collect();
    (generation, keys)
}

/// READ RESERVATION: (holder's key, type), if reserved.
fn read_reservation(c: &mut Raw) -> Option<(u64, u8)> {
    let (st, s, d) = c.scsi(&[0x5e, 1, 0, 0, 0, 0, 0, 0, 64, 0], 64, &[]);
    assert_eq!(st, GOOD, "READ RESERVATION: sense {s:02x?}");
    let len = u32::from_be_bytes(d[4..8].try_into().unwrap());
    (len >= 16).then(|| {
        (
            u64::from_be_bytes(d[8..16].try_into().unwrap()),
            d[21] & 0x0f,
        )
    })
}

fn status(c: &mut Raw, cdb: &[u8]) -> (u8, Option<(u8, u8, u8)>) {
    let (read, write) = if cdb[0] == 0x2a {
        (0, vec![0x5a; 512])
    } else {
        (512, Vec::new())
    };
    let (st, s, _) = c.scsi(cdb, read, &write);
    (st, (st == CHECK).then(|| sense(&s)))
}

/// Waits (bounded) until the OSD has dropped every watch on `object`
/// (gateways gone: their watches end with their sessions or time out).
fn no_watchers(ceph: &Ceph, object: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = ceph.tool("rados", &["-p", "rbd", "listwatchers", object]);
        if out.trim().is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "watchers left on {object}: {out}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The object's name, as the gateway logged it.
fn object_of(t: &Target) -> String {
    let log = t.log();
    let at = log.find("ironlun.pr.").expect("object named in the log");
    log[at..]
        .split(|c: char| c.is_whitespace() || c == '"')
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn reservations_hold_across_gateways() {
    let dir = tempfile::tempdir().unwrap();
    let Some(ceph) = Ceph::start(&dir.path().join("ceph")) else {
        return; // skipped loudly (locally, without Ceph) by Ceph::start
    };
    ceph.rbd(&["create", "--size", "16M", &format!("rbd/{IMAGE}")]);
    let d = dir.path();
    let (a, b) = (gateway(d, &ceph, 1), gateway(d, &ceph, 2));
    let object = object_of(&a);
    assert_eq!(object, object_of(&b), "one object for the image");
    let mut one = session(&a, "one");
    let mut two = session(&b, "two");
    let mut stranger = session(&b, "stranger");

    // Registered through A and through B; reserved through A.
    good_prout(&mut one, REGISTER, 0, 0, 0xa1, APTPL);
    good_prout(&mut two, REGISTER, 0, 0, 0xb2, APTPL);
    good_prout(&mut one, RESERVE, WERO, 0xa1, 0, 0);
    // B enforces what A stored: the unregistered initiator may read but
    // not write; the registered one writes.
    assert_eq!(status(&mut stranger, &WRITE10).0, CONFLICT);
    assert_eq!(status(&mut stranger, &READ10).0, GOOD);
    assert_eq!(status(&mut two, &WRITE10).0, GOOD);
    assert_eq!(read_keys(&mut stranger).1, vec![0xa1, 0xb2]);
    assert_eq!(read_reservation(&mut two), Some((0xa1, WERO)));
    // A's holder preempted through B.
    good_prout(&mut two, PREEMPT, WERO, 0xb2, 0xa1, 0);
    assert_eq!(
        status(&mut one, &WRITE10),
        (CHECK, Some((6, 0x2a, 0x05))),
        "REGISTRATIONS PREEMPTED on A's nexus"
    );
    assert_eq!(status(&mut one, &WRITE10).0, CONFLICT);
    assert_eq!(read_keys(&mut one).1, vec![0xb2]);
    assert_eq!(read_reservation(&mut one), Some((0xb2, WERO)));
    let (generation, _) = read_keys(&mut one);
    assert!(generation >= 3, "PRgeneration counts the group's changes");

    // APTPL: a restart of both gateways keeps the state.
    drop((one, two, stranger));
    drop((a, b));
    no_watchers(&ceph, &object);
    let (a, b) = (gateway(d, &ceph, 1), gateway(d, &ceph, 2));
    let mut one = session(&a, "one");
    let mut stranger = session(&b, "stranger");
    assert_eq!(read_keys(&mut one), (0, vec![0xb2]), "kept, PRgeneration 0");
    assert_eq!(read_reservation(&mut stranger), Some((0xb2, WERO)));
    assert_eq!(status(&mut stranger, &WRITE10).0, CONFLICT);
    assert_eq!(status(&mut one, &WRITE10).0, CONFLICT);

    // Without APTPL: kept while a gateway runs, cleared when all restart.
    good_prout(&mut stranger, REGISTER_IGNORE, 0, 0, 0xc3, 0);
    drop(one);
    drop(a);
    let a = gateway(d, &ceph, 1);
    let mut one = session(&a, "one");
    assert_eq!(read_keys(&mut one).1, vec![0xb2, 0xc3], "B ran throughout");
    drop((one, stranger));
    drop((a, b));
    no_watchers(&ceph, &object);
    let (a, _b) = (gateway(d, &ceph, 1), gateway(d, &ceph, 2));
    let mut one = session(&a, "one");
    assert_eq!(read_keys(&mut one), (0, vec![]), "no APTPL: cleared");
    assert_eq!(read_reservation(&mut one), None);
    assert_eq!(status(&mut one, &WRITE10).0, GOOD);
}

/// A gateway that cannot reach the object's cluster answers a
/// reservation command NOT READY, never GOOD, and sees its watch lost
/// (media access is then NOT READY whatever the image answers).
#[test]
fn a_gateway_cut_off_from_rados_never_answers_good() {
    let dir = tempfile::tempdir().unwrap();
    let Some(mut ceph) = Ceph::start(&dir.path().join("ceph")) else {
        return;
    };
    ceph.rbd(&["create", "--size", "16M", &format!("rbd/{IMAGE}")]);
    // The object is reached through the image's client: its operation
    // timeout (5 s here) is the reservation commands' too, and within
    // the raw initiator's 10 s.
    let a = gateway_with(dir.path(), &ceph, 1, ",timeout=5");
    let mut one = session(&a, "one");
    good_prout(&mut one, REGISTER, 0, 0, 0xa1, 0);
    ceph.stop();
    let mut p = [0u8; 24];
    p[..8].copy_from_slice(&0xa1u64.to_be_bytes());
    p[8..16].copy_from_slice(&0xa2u64.to_be_bytes());
    let (st, s, _) = one.scsi(&[0x5f, REGISTER, 0, 0, 0, 0, 0, 0, 24, 0], 0, &p);
    assert_eq!(st, CHECK, "PR OUT without the cluster");
    assert_eq!(sense(&s), (2, 0x04, 0x01), "NOT READY, BECOMING READY");
    let (st, s, _) = one.scsi(&[0x5e, 0, 0, 0, 0, 0, 0, 4, 0, 0], 1024, &[]);
    assert_eq!((st, sense(&s)), (CHECK, (2, 0x04, 0x01)), "PR IN likewise");
    assert!(
        a.wait_log("media access NOT READY", Duration::from_secs(90)),
        "the watch was not seen lost:\n{}",
        a.log()
    );
}

/// SPC-2 RESERVE(6) shared by the gateways (docs/ha.md, "Shared
/// reservations"): held through A, it stops another initiator's commands
/// through B and is stored by identity; its holder's logout ends it
/// across the group before the Logout Response (SPC-2 §5.5.1, RFC 7143
/// §11.14), so B's initiator writes and reserves the moment the holder
/// has its response; the loss of that holder's connection (no logout)
/// ends it too.
#[test]
fn an_spc2_reservation_is_shared_and_ends_with_its_holders_logout() {
    const RESERVE6: [u8; 6] = [0x16, 0, 0, 0, 0, 0];
    let dir = tempfile::tempdir().unwrap();
    let Some(ceph) = Ceph::start(&dir.path().join("ceph")) else {
        return;
    };
    ceph.rbd(&["create", "--size", "16M", &format!("rbd/{IMAGE}")]);
    let d = dir.path();
    let (a, b) = (gateway(d, &ceph, 1), gateway(d, &ceph, 2));
    let object = object_of(&a);
    let mut one = session(&a, "one");
    let mut two = session(&b, "two");
    assert_eq!(status(&mut one, &RESERVE6).0, GOOD);
    let stored = ceph.tool("rados", &["-p", "rbd", "get", &object, "-"]);
    assert!(
        stored.contains("\nspc2 1 iqn.2026-11.test:one,i,0x800000000001\n"),
        "{stored}"
    );
    assert_eq!(status(&mut two, &WRITE10).0, CONFLICT);
    assert_eq!(status(&mut two, &TUR).0, CONFLICT);
    assert_eq!(status(&mut two, &RESERVE6).0, CONFLICT);
    assert_eq!(status(&mut one, &WRITE10).0, GOOD);

    let logout = LogoutRequest {
        immediate: true,
        reason: LogoutReason::CLOSE_SESSION,
        itt: 0x77,
        cid: 0,
        cmd_sn: one.cmd_sn,
        exp_stat_sn: one.exp_stat_sn,
    };
    one.send(&Pdu::LogoutRequest(logout), &[]);
    let (pdu, _) = one.recv().expect("logout response");
    let Pdu::LogoutResponse(l) = pdu else {
        panic!("{pdu:?}")
    };
    assert_eq!(l.response, LogoutResult::CLOSED);
    // At once, no retry: B has taken the release up already.
    assert_eq!(status(&mut two, &WRITE10).0, GOOD);
    assert_eq!(status(&mut two, &RESERVE6).0, GOOD);

    // Held by "two" through B now; its connection lost (no logout).
    let mut three = session(&a, "three");
    assert_eq!(status(&mut three, &WRITE10).0, CONFLICT);
    drop(two);
    let deadline = Instant::now() + Duration::from_secs(30);
    while status(&mut three, &WRITE10).0 != GOOD {
        assert!(Instant::now() < deadline, "the lost nexus kept it");
        std::thread::sleep(Duration::from_millis(100));
    }
    let stored = ceph.tool("rados", &["-p", "rbd", "get", &object, "-"]);
    assert!(!stored.contains("spc2"), "{stored}");
}
