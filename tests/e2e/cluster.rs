//! A failover cluster's checks of SCSI-3 persistent reservations, end to
//! end: two nodes (two initiator names), each with its own sessions to
//! the daemon over loopback through ironlun's own initiator, run the
//! PERSISTENT RESERVE IN/OUT sequences that clusters run before they
//! trust a shared LUN and when they fail over or fence:
//!
//! * Windows Server Failover Clustering's "Validate SCSI-3 Persistent
//!   Reservation" and "Validate Disk Arbitration": each node registers,
//!   the owner reserves, the other node's reservation attempt fails and
//!   the owner keeps the disk, a failover preempts the owner's key;
//! * Pacemaker's fence_scsi (sg_persist): unfencing is REGISTER AND IGNORE
//!   EXISTING KEY then RESERVE type 5, re-unfencing a registered key adds
//!   a PREEMPT of its own key, fencing is PREEMPT AND ABORT of the victim's
//!   key, and a key is removed with REGISTER and service action key 0;
//! * APTPL across a restart of the target (a power on).
//!
//! Every step asserts the status, sense (decoded with ironlun-scsi-codes)
//! and data SPC-5 requires; sections are cited beside the steps (§5.14 is
//! the reservations model, §6.16 PERSISTENT RESERVE IN, §6.17 PERSISTENT
//! RESERVE OUT). A nexus that must not have a unit attention is checked
//! with TEST UNIT READY, which would report it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;
use crate::support::nexus;

use bytes::Bytes;
use ironlun_initiator::{isid_for, scsi};
use ironlun_scsi_codes::{opcode, service_action as sa, Asc, SenseKey};
use nexus::{got, request, ua, Got, Nexus, ANSWER_WITHIN};
use support::Target;

const TARGET: &str = "iqn.2026-11.test:cluster-disk";
const NODE_A: &str = "iqn.2026-11.test:node-a";
const NODE_B: &str = "iqn.2026-11.test:node-b";
const KEY_A: u64 = 0x1234_0000_0000_000a;
const KEY_B: u64 = 0x1234_0000_0000_000b;
const BLOCK: usize = 512;

/// Persistent reservation types: the TYPE field of PERSISTENT RESERVE
/// OUT (SPC-5 §6.17).
const WR_EX: u8 = 1;
const EX_AC: u8 = 3;
const WR_EX_RO: u8 = 5;
const EX_AC_RO: u8 = 6;
const WR_EX_AR: u8 = 7;
const EX_AC_AR: u8 = 8;

/// A target and the runtime the nodes' sessions run on.
struct Cluster {
    rt: tokio::runtime::Runtime,
    target: Target,
    args: Vec<String>,
}

impl Cluster {
    /// A 16 MiB RAM LUN of 512-byte blocks, plus `extra` flags.
    fn start(extra: &[&str]) -> Cluster {
        let mut args: Vec<String> = ["--name", TARGET, "--lun", "ram:16MiB,bs=512"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let target = Target::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
        Cluster { rt, target, args }
    }

    /// Stops the target (SIGTERM, clean exit) and starts it again with the
    /// same flags: to the LU a power on. Sessions must be gone first.
    fn restart(&mut self) {
        let code = self.target.terminate(ANSWER_WITHIN);
        assert_eq!(code, Some(0), "{}", self.target.log());
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        self.target = Target::start(&args);
    }

    /// Node `name`'s session on path `path` (its own ISID: its own I_T
    /// nexus), with the unit attention every new nexus of a freshly
    /// started target begins with (POWER ON, RESET, OR BUS DEVICE RESET
    /// OCCURRED) seen and gone.
    fn node(&self, name: &str, path: usize) -> Node {
        let base = if name == NODE_A {
            [0x80, 0x0a, 0, 0, 0, 0]
        } else {
            [0x80, 0x0b, 0, 0, 0, 0]
        };
        let label = format!(
            "{} path {path}",
            name.trim_start_matches("iqn.2026-11.test:")
        );
        let portal = self.target.addr.to_string();
        let n = Nexus::login(&self.rt, &portal, TARGET, name, isid_for(base, path), label);
        n.expect_ua(Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET);
        n
    }
}

/// One I_T nexus of a node: a session to the target.
type Node = Nexus;

impl Node {
    /// The next unit attention is `asc`, and it is reported once.
    fn expect_ua(&self, asc: Asc) {
        assert_eq!(self.tur(), ua(asc), "{}: unit attention", self.label);
    }

    /// No unit attention is pending.
    fn expect_no_ua(&self) {
        assert_eq!(self.tur(), Got::Good, "{}: no unit attention", self.label);
    }

    fn read(&self, lba: u32) -> (Got, Bytes) {
        let r = self.run(scsi::read10(0, lba, 1, BLOCK as u32));
        (got(&r), r.data)
    }

    fn write(&self, lba: u32, fill: u8) -> Got {
        let data = Bytes::from(vec![fill; BLOCK]);
        got(&self.run(scsi::write10(0, lba, 1, data)))
    }

    /// PERSISTENT RESERVE OUT with the basic 24-byte parameter list
    /// (SPC-5 §6.17.3): RESERVATION KEY, SERVICE ACTION RESERVATION KEY,
    /// APTPL.
    fn prout(&self, action: u8, ty: u8, key: u64, sa_key: u64, aptpl: bool) -> Got {
        let mut p = [0u8; 24];
        p[..8].copy_from_slice(&key.to_be_bytes());
        p[8..16].copy_from_slice(&sa_key.to_be_bytes());
        p[20] = u8::from(aptpl);
        let cdb = [
            opcode::PERSISTENT_RESERVE_OUT,
            action,
            ty,
            0,
            0,
            0,
            0,
            0,
            24,
            0,
        ];
        got(&self.run(request(&cdb, 0, Bytes::copy_from_slice(&p))))
    }

    fn prin(&self, action: u8) -> Bytes {
        let cdb = [
            opcode::PERSISTENT_RESERVE_IN,
            action,
            0,
            0,
            0,
            0,
            0,
            0x10,
            0,
            0,
        ];
        let r = self.run(request(&cdb, 0x1000, Bytes::new()));
        assert_eq!(got(&r), Got::Good, "{}: PERSISTENT RESERVE IN", self.label);
        r.data
    }

    /// READ KEYS (SPC-5 §6.16.2): PRgeneration and the keys, sorted.
    fn read_keys(&self) -> (u32, Vec<u64>) {
        let d = self.prin(sa::READ_KEYS);
        let len = be32(&d[4..8]) as usize;
        assert_eq!(d.len(), 8 + len, "{}: READ KEYS length", self.label);
        let mut keys: Vec<u64> = d[8..].chunks(8).map(be64).collect();
        keys.sort_unstable();
        (be32(&d[..4]), keys)
    }

    /// READ RESERVATION (SPC-5 §6.16.3): PRgeneration and the holder's
    /// key and the type, if there is a reservation; its scope must be
    /// LU_SCOPE.
    fn read_reservation(&self) -> (u32, Option<(u64, u8)>) {
        let d = self.prin(sa::READ_RESERVATION);
        let gen = be32(&d[..4]);
        match be32(&d[4..8]) {
            0 => {
                assert_eq!(d.len(), 8, "{}", self.label);
                (gen, None)
            }
            16 => {
                assert_eq!(d.len(), 24, "{}", self.label);
                assert_eq!(d[21] >> 4, 0, "{}: LU_SCOPE", self.label);
                (gen, Some((be64(&d[8..16]), d[21] & 0x0f)))
            }
            n => panic!("{}: READ RESERVATION additional length {n}", self.label),
        }
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b.try_into().unwrap())
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b.try_into().unwrap())
}

/// Both nodes register (REGISTER and REGISTER AND IGNORE EXISTING KEY),
/// each sees both keys, and PRgeneration counts the registrations and
/// nothing else (SPC-5 §5.14.7, §6.16.2).
#[test]
fn both_nodes_register_and_see_both_keys() {
    let c = Cluster::start(&[]);
    let (a, b) = (c.node(NODE_A, 0), c.node(NODE_B, 0));
    let b2 = c.node(NODE_B, 1);
    report_capabilities(&a, false, false);
    assert_eq!(a.read_keys(), (0, vec![]), "nothing registered");
    assert_eq!(a.read_reservation(), (0, None));
    // Table 67: an unregistered nexus registers with RESERVATION KEY 0.
    assert_eq!(a.prout(sa::REGISTER, 0, 0, KEY_A, false), Got::Good);
    // Table 68: REGISTER AND IGNORE EXISTING KEY ignores RESERVATION KEY.
    let ignored = 0xdead;
    let riek = sa::REGISTER_AND_IGNORE_EXISTING_KEY;
    assert_eq!(b.prout(riek, 0, ignored, KEY_B, false), Got::Good);
    for n in [&a, &b, &b2] {
        assert_eq!(n.read_keys(), (2, vec![KEY_A, KEY_B]), "{}", n.label);
    }
    // Table 67: a registered nexus naming another key, and an unregistered
    // one naming a non-zero key, get RESERVATION CONFLICT; neither moves
    // PRgeneration (§6.16.2).
    assert_eq!(b.prout(sa::REGISTER, 0, 0, KEY_B, false), Got::Conflict);
    assert_eq!(
        b2.prout(sa::REGISTER, 0, KEY_B, KEY_B, false),
        Got::Conflict
    );
    assert_eq!(a.read_keys(), (2, vec![KEY_A, KEY_B]));
    // A registration is the I_T nexus's: node B's second path is not
    // registered, and another PERSISTENT RESERVE OUT from it conflicts
    // (§5.14.7).
    assert_eq!(b2.prout(sa::RESERVE, WR_EX, KEY_B, 0, false), Got::Conflict);
    // A registered nexus changes its key with REGISTER, and back with
    // REGISTER AND IGNORE EXISTING KEY.
    assert_eq!(b.prout(sa::REGISTER, 0, KEY_B, 0xb2, false), Got::Good);
    assert_eq!(b.read_keys(), (3, vec![0xb2, KEY_A]));
    assert_eq!(b.prout(riek, 0, 0, KEY_B, false), Got::Good);
    assert_eq!(a.read_keys(), (4, vec![KEY_A, KEY_B]));
    // Registering changes no reservation and tells nobody.
    assert_eq!(b.read_reservation(), (4, None));
    for n in [&a, &b, &b2] {
        n.expect_no_ua();
    }
}

/// REPORT CAPABILITIES (SPC-5 §6.16.4): the types clusters use are all
/// supported; PTPL_C only with a state directory.
fn report_capabilities(n: &Node, ptpl_c: bool, ptpl_a: bool) {
    let d = n.prin(sa::REPORT_CAPABILITIES);
    assert_eq!((d.len(), d[0], d[1]), (8, 0, 8), "LENGTH 8");
    assert_eq!(d[2] & 0x01 != 0, ptpl_c, "PTPL_C");
    assert_eq!(d[3] & 0x80, 0x80, "TMV: the type mask is valid");
    assert_eq!(d[3] & 0x01 != 0, ptpl_a, "PTPL_A");
    // WR_EX_AR, EX_AC_RO, WR_EX_RO, EX_AC, WR_EX; EX_AC_AR.
    assert_eq!((d[4] & 0xea, d[5] & 0x01), (0xea, 0x01), "type mask");
}

/// A holds each type in turn: READ RESERVATION from both nodes, the
/// access each nexus keeps (SPC-5 §5.14.1 and SBC-4's table of commands
/// under reservations), another RESERVE, and the unit attentions of the
/// RELEASE (§5.14.11.2.2).
#[test]
fn every_reservation_type_seen_from_both_nodes() {
    let c = Cluster::start(&[]);
    let (a, b) = (c.node(NODE_A, 0), c.node(NODE_B, 0));
    // Node B's second path never registers: the non-registrant.
    let outsider = c.node(NODE_B, 1);
    let riek = sa::REGISTER_AND_IGNORE_EXISTING_KEY;
    assert_eq!(a.prout(riek, 0, 0, KEY_A, false), Got::Good);
    assert_eq!(b.prout(riek, 0, 0, KEY_B, false), Got::Good);
    for ty in [WR_EX, EX_AC, WR_EX_RO, EX_AC_RO, WR_EX_AR, EX_AC_AR] {
        hold_and_release(&a, &b, &outsider, ty);
    }
    // RESERVE and RELEASE never moved PRgeneration (§6.16.2).
    assert_eq!(b.read_keys(), (2, vec![KEY_A, KEY_B]));
}

fn hold_and_release(a: &Node, b: &Node, outsider: &Node, ty: u8) {
    let all_registrants = ty == WR_EX_AR || ty == EX_AC_AR;
    assert_eq!(
        a.prout(sa::RESERVE, ty, KEY_A, 0, false),
        Got::Good,
        "type {ty}"
    );
    // §5.14.9: the holder reserving the same type again changes nothing.
    assert_eq!(a.prout(sa::RESERVE, ty, KEY_A, 0, false), Got::Good);
    // §5.14.10, §6.16.3: the holder's key, zero for all-registrants types.
    let key = if all_registrants { 0 } else { KEY_A };
    for n in [a, b, outsider] {
        assert_eq!(n.read_reservation(), (2, Some((key, ty))), "{}", n.label);
    }
    access_under(a, b, outsider, ty);
    // §5.14.9: B's RESERVE conflicts unless it is a holder too (every
    // registrant holds an all-registrants reservation).
    let want = if all_registrants {
        Got::Good
    } else {
        Got::Conflict
    };
    assert_eq!(b.prout(sa::RESERVE, ty, KEY_B, 0, false), want, "type {ty}");
    if !all_registrants {
        // §5.14.11.2.2: a non-holder's RELEASE is GOOD and does nothing.
        assert_eq!(b.prout(sa::RELEASE, ty, KEY_B, 0, false), Got::Good);
        assert_eq!(b.read_reservation().1, Some((key, ty)));
    }
    // The holder's RELEASE must name the type; then it releases.
    let other = if ty == WR_EX { EX_AC } else { WR_EX };
    let invalid = Asc::INVALID_RELEASE_OF_PERSISTENT_RESERVATION;
    assert_eq!(
        a.prout(sa::RELEASE, other, KEY_A, 0, false),
        Got::Check(SenseKey::ILLEGAL_REQUEST, invalid)
    );
    assert_eq!(a.prout(sa::RELEASE, ty, KEY_A, 0, false), Got::Good);
    assert_eq!(outsider.read_reservation(), (2, None), "type {ty} released");
    // Registrants-only and all-registrants types tell the other
    // registrants RESERVATIONS RELEASED; the others tell nobody.
    if ty >= WR_EX_RO {
        b.expect_ua(Asc::RESERVATIONS_RELEASED);
    }
    for n in [a, b, outsider] {
        n.expect_no_ua();
    }
}

/// Reads and writes under a reservation of type `ty` held by A: the
/// holder does both; a registrant is held to the registrants-only and
/// all-registrants types' rules; the non-registrant reads only under the
/// write exclusive types (SPC-5 §5.14.1, SBC-4 table of commands under
/// persistent reservations). TEST UNIT READY is allowed for everyone.
fn access_under(a: &Node, b: &Node, outsider: &Node, ty: u8) {
    let exclusive_access = matches!(ty, EX_AC | EX_AC_RO | EX_AC_AR);
    let registrants = ty >= WR_EX_RO;
    let allowed = |yes: bool| if yes { Got::Good } else { Got::Conflict };
    assert_eq!(a.read(3).0, Got::Good, "holder reads, type {ty}");
    assert_eq!(a.write(3, 0xa0 + ty), Got::Good, "holder writes, type {ty}");
    let b_reads = registrants || !exclusive_access;
    assert_eq!(b.read(3).0, allowed(b_reads), "registrant reads, type {ty}");
    assert_eq!(
        b.write(4, ty),
        allowed(registrants),
        "registrant writes, type {ty}"
    );
    let o_reads = !exclusive_access;
    assert_eq!(
        outsider.read(3).0,
        allowed(o_reads),
        "outsider reads, type {ty}"
    );
    assert_eq!(
        outsider.write(3, 0xee),
        Got::Conflict,
        "outsider writes, type {ty}"
    );
    // The refused write did not reach the medium.
    let (st, data) = a.read(3);
    assert_eq!((st, data.to_vec()), (Got::Good, vec![0xa0 + ty; BLOCK]));
    for n in [a, b, outsider] {
        assert_eq!(
            n.tur(),
            Got::Good,
            "{}: TEST UNIT READY, type {ty}",
            n.label
        );
    }
}

/// Disk arbitration and a failover: A owns the disk (Write Exclusive -
/// Registrants Only) on two paths; B's attempts to take it without
/// preempting fail and A keeps it; then B preempts A's key as a failover
/// does, A's commands conflict, A registers again; PREEMPT AND ABORT
/// removes it again; B's preempt of itself into another type releases
/// the reservation for the remaining registrants.
#[test]
fn failover_preempts_the_owner_and_the_owner_comes_back() {
    let c = Cluster::start(&[]);
    let (a, a2) = (c.node(NODE_A, 0), c.node(NODE_A, 1));
    let (b, outsider) = (c.node(NODE_B, 0), c.node(NODE_B, 1));
    let riek = sa::REGISTER_AND_IGNORE_EXISTING_KEY;
    // Multipath: node A registers its key on each path.
    assert_eq!(a.prout(riek, 0, 0, KEY_A, false), Got::Good);
    assert_eq!(a2.prout(riek, 0, 0, KEY_A, false), Got::Good);
    assert_eq!(a.prout(sa::RESERVE, WR_EX_RO, KEY_A, 0, false), Got::Good);
    // §5.14.7: B, unregistered, may not preempt.
    let pre = sa::PREEMPT;
    assert_eq!(b.prout(pre, WR_EX_RO, 0, KEY_A, false), Got::Conflict);
    assert_eq!(b.prout(riek, 0, 0, KEY_B, false), Got::Good);
    // §5.14.9: a second reservation conflicts; the owner keeps the disk.
    assert_eq!(
        b.prout(sa::RESERVE, WR_EX_RO, KEY_B, 0, false),
        Got::Conflict
    );
    assert_eq!(b.read_reservation(), (3, Some((KEY_A, WR_EX_RO))));
    for n in [&a, &a2, &b] {
        assert_eq!(
            n.write(10, 0x11),
            Got::Good,
            "{}: registrant writes",
            n.label
        );
    }
    assert_eq!(outsider.write(10, 0x11), Got::Conflict);
    b_takes_over(&a, &a2, &b, &outsider);
    a_comes_back_and_is_fenced(&a, &b);
    preempt_into_another_type(&a, &b, &outsider);
}

/// B preempts A's key (§5.14.11.2.4.3): A's registrations on both paths
/// go, B holds the reservation, each of A's paths is told REGISTRATIONS
/// PREEMPTED, and A now meets the reservation as a non-registrant.
fn b_takes_over(a: &Node, a2: &Node, b: &Node, outsider: &Node) {
    assert_eq!(
        b.prout(sa::PREEMPT, WR_EX_RO, KEY_B, KEY_A, false),
        Got::Good
    );
    assert_eq!(outsider.read_reservation(), (4, Some((KEY_B, WR_EX_RO))));
    assert_eq!(b.read_keys(), (4, vec![KEY_B]));
    for n in [a, a2] {
        n.expect_ua(Asc::REGISTRATIONS_PREEMPTED);
        n.expect_no_ua();
    }
    b.expect_no_ua();
    outsider.expect_no_ua();
    // Write Exclusive - Registrants Only: A reads but does not write.
    assert_eq!(a.write(10, 0x22), Got::Conflict);
    assert_eq!(a.read(10), (Got::Good, Bytes::from(vec![0x11; BLOCK])));
    assert_eq!(b.write(10, 0x33), Got::Good);
    // A's old key is no longer its own: table 67 and §5.14.7.
    assert_eq!(a.prout(sa::REGISTER, 0, KEY_A, KEY_A, false), Got::Conflict);
    assert_eq!(
        a.prout(sa::RELEASE, WR_EX_RO, KEY_A, 0, false),
        Got::Conflict
    );
    assert_eq!(b.read_keys(), (4, vec![KEY_B]), "conflicts change nothing");
}

/// A registers again and writes as a registrant; then B fences it the
/// way fence_scsi does, with PREEMPT AND ABORT of A's key (not the
/// holder's: the registration goes, the reservation stays,
/// §5.14.11.2.5-6).
fn a_comes_back_and_is_fenced(a: &Node, b: &Node) {
    let riek = sa::REGISTER_AND_IGNORE_EXISTING_KEY;
    assert_eq!(a.prout(riek, 0, 0, KEY_A, false), Got::Good);
    assert_eq!(a.write(11, 0x44), Got::Good);
    assert_eq!(b.read_keys(), (5, vec![KEY_A, KEY_B]));
    let abort = sa::PREEMPT_AND_ABORT;
    assert_eq!(b.prout(abort, WR_EX_RO, KEY_B, KEY_A, false), Got::Good);
    assert_eq!(b.read_reservation(), (6, Some((KEY_B, WR_EX_RO))));
    a.expect_ua(Asc::REGISTRATIONS_PREEMPTED);
    a.expect_no_ua();
    b.expect_no_ua();
    assert_eq!(a.write(11, 0x55), Got::Conflict);
}

/// The holder preempts itself into Exclusive Access - Registrants Only
/// (§5.14.11.2.4.3: not an error, it keeps its registration): the type
/// changed, so A, registered again, is told RESERVATIONS RELEASED (f);
/// the non-registrant, not registered, is told nothing and may no longer
/// read.
fn preempt_into_another_type(a: &Node, b: &Node, outsider: &Node) {
    let riek = sa::REGISTER_AND_IGNORE_EXISTING_KEY;
    assert_eq!(a.prout(riek, 0, 0, KEY_A, false), Got::Good);
    assert_eq!(
        b.prout(sa::PREEMPT, EX_AC_RO, KEY_B, KEY_B, false),
        Got::Good
    );
    assert_eq!(b.read_reservation(), (8, Some((KEY_B, EX_AC_RO))));
    assert_eq!(b.read_keys(), (8, vec![KEY_A, KEY_B]));
    a.expect_ua(Asc::RESERVATIONS_RELEASED);
    for n in [a, b, outsider] {
        n.expect_no_ua();
    }
    assert_eq!(a.read(10).0, Got::Good, "a registrant reads");
    assert_eq!(outsider.read(10).0, Got::Conflict, "exclusive access");
}

/// RELEASE and CLEAR (SPC-5 §5.14.11.2.2, §5.14.11.2.7): who is told what.
#[test]
fn release_and_clear_tell_the_other_registrants() {
    let c = Cluster::start(&[]);
    let (a, b) = (c.node(NODE_A, 0), c.node(NODE_B, 0));
    let outsider = c.node(NODE_B, 1);
    let riek = sa::REGISTER_AND_IGNORE_EXISTING_KEY;
    assert_eq!(a.prout(riek, 0, 0, KEY_A, false), Got::Good);
    assert_eq!(b.prout(riek, 0, 0, KEY_B, false), Got::Good);
    // No reservation: the holder-less RELEASE is GOOD and tells nobody.
    assert_eq!(a.prout(sa::RELEASE, WR_EX_RO, KEY_A, 0, false), Got::Good);
    assert_eq!(a.prout(sa::RESERVE, WR_EX, KEY_A, 0, false), Got::Good);
    assert_eq!(outsider.write(20, 1), Got::Conflict);
    // §5.14.7: the non-registrant may not CLEAR.
    assert_eq!(outsider.prout(sa::CLEAR, 0, KEY_B, 0, false), Got::Conflict);
    // §5.14.11.2.7: any registrant clears, with its own key; the other
    // registrants are told RESERVATIONS PREEMPTED, the non-registrant and
    // the issuer nothing.
    assert_eq!(
        b.prout(sa::CLEAR, 0, KEY_A, 0, false),
        Got::Conflict,
        "wrong key"
    );
    assert_eq!(b.prout(sa::CLEAR, 0, KEY_B, 0, false), Got::Good);
    assert_eq!(outsider.read_keys(), (3, vec![]));
    assert_eq!(outsider.read_reservation(), (3, None));
    a.expect_ua(Asc::RESERVATIONS_PREEMPTED);
    for n in [&a, &b, &outsider] {
        n.expect_no_ua();
    }
    assert_eq!(outsider.write(20, 1), Got::Good, "nothing reserved");
    // A, no longer registered, must register before it reserves.
    assert_eq!(a.prout(sa::RESERVE, WR_EX, KEY_A, 0, false), Got::Conflict);
}

/// fence_scsi's own sequence, as its `on` and `off` actions send it with
/// sg_persist: unfence A (REGISTER AND IGNORE EXISTING KEY, then RESERVE
/// type 5 as nobody holds one), unfence B (register only), unfence B
/// again with its key already registered (register, PREEMPT of its own
/// key to drop stale registrations of it, register again), fence B from
/// A (PREEMPT AND ABORT), and unregister (REGISTER, service action key 0).
#[test]
fn fence_scsi_unfences_fences_and_unregisters() {
    let c = Cluster::start(&[]);
    let (a, b) = (c.node(NODE_A, 0), c.node(NODE_B, 0));
    let riek = sa::REGISTER_AND_IGNORE_EXISTING_KEY;
    assert_eq!(a.prout(riek, 0, 0, KEY_A, false), Got::Good);
    assert_eq!(a.read_reservation(), (1, None));
    assert_eq!(a.prout(sa::RESERVE, WR_EX_RO, KEY_A, 0, false), Got::Good);
    assert_eq!(b.prout(riek, 0, 0, KEY_B, false), Got::Good);
    assert_eq!(b.read_reservation(), (2, Some((KEY_A, WR_EX_RO))));
    b_unfences_again(&a, &b);
    // Fencing B: PREEMPT AND ABORT -K KEY_A -S KEY_B -T 5 (§5.14.11.2.6).
    let abort = sa::PREEMPT_AND_ABORT;
    assert_eq!(a.prout(abort, WR_EX_RO, KEY_A, KEY_B, false), Got::Good);
    assert_eq!(a.read_keys(), (6, vec![KEY_A]));
    b.expect_ua(Asc::REGISTRATIONS_PREEMPTED);
    b.expect_no_ua();
    a.expect_no_ua();
    assert_eq!(b.write(30, 2), Got::Conflict, "fenced");
    assert_eq!(
        b.read(30).0,
        Got::Good,
        "Write Exclusive - Registrants Only"
    );
    assert_eq!(a.write(30, 3), Got::Good);
    unregister_both(&a, &b);
}

/// Re-unfencing B: its key is registered, so fence_scsi registers, then
/// preempts its own key, which removes B's own registration too without a
/// unit attention for B (SPC-5 §5.14.11.2.5: "It is not an error ...
/// The registration is removed."); as B does not hold the reservation,
/// it registers again. TYPE is ignored when only registrations go.
fn b_unfences_again(a: &Node, b: &Node) {
    let riek = sa::REGISTER_AND_IGNORE_EXISTING_KEY;
    assert_eq!(b.prout(riek, 0, 0, KEY_B, false), Got::Good);
    assert_eq!(b.prout(sa::PREEMPT, 0, KEY_B, KEY_B, false), Got::Good);
    assert_eq!(b.read_keys(), (4, vec![KEY_A]));
    assert_eq!(b.read_reservation(), (4, Some((KEY_A, WR_EX_RO))));
    for n in [a, b] {
        n.expect_no_ua();
    }
    assert_eq!(b.prout(riek, 0, 0, KEY_B, false), Got::Good);
    assert_eq!(a.read_keys(), (5, vec![KEY_A, KEY_B]));
}

/// fence_scsi-style unregistering (REGISTER with SERVICE ACTION
/// RESERVATION KEY 0, table 67): the holder of a registrants-only
/// reservation unregistering releases it and tells the other registrants
/// RESERVATIONS RELEASED (§5.14.11.2.3).
fn unregister_both(a: &Node, b: &Node) {
    let riek = sa::REGISTER_AND_IGNORE_EXISTING_KEY;
    assert_eq!(b.prout(riek, 0, 0, KEY_B, false), Got::Good);
    assert_eq!(a.prout(sa::REGISTER, 0, KEY_A, 0, false), Got::Good);
    assert_eq!(a.read_reservation(), (8, None));
    assert_eq!(a.read_keys(), (8, vec![KEY_B]));
    b.expect_ua(Asc::RESERVATIONS_RELEASED);
    b.expect_no_ua();
    a.expect_no_ua();
    assert_eq!(b.prout(sa::REGISTER, 0, KEY_B, 0, false), Got::Good);
    assert_eq!(a.read_keys(), (9, vec![]));
    // Unregistering an unregistered nexus does nothing (table 67).
    assert_eq!(a.prout(sa::REGISTER, 0, 0, 0, false), Got::Good);
    for n in [a, b] {
        n.expect_no_ua();
    }
}

/// APTPL (SPC-5 §5.14.5, §6.17.3): with APTPL=1 last received, the
/// registrations and the reservation come back after the target restarts
/// with the same --state-dir; PRgeneration starts again at zero
/// (§6.16.2). With APTPL=0 last received they are gone (§5.14.11.2.1).
#[test]
fn aptpl_keeps_registrations_and_reservation_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut c = Cluster::start(&["--state-dir", state.to_str().unwrap()]);
    {
        let (a, b) = (c.node(NODE_A, 0), c.node(NODE_B, 0));
        report_capabilities(&a, true, false);
        let riek = sa::REGISTER_AND_IGNORE_EXISTING_KEY;
        assert_eq!(a.prout(riek, 0, 0, KEY_A, true), Got::Good);
        assert_eq!(b.prout(sa::REGISTER, 0, 0, KEY_B, true), Got::Good);
        assert_eq!(a.prout(sa::RESERVE, WR_EX_RO, KEY_A, 0, false), Got::Good);
        report_capabilities(&b, true, true);
        assert_eq!(b.read_keys(), (2, vec![KEY_A, KEY_B]));
    }
    assert_eq!(support::state_files(&state), 1, "one saved LU");
    c.restart();
    {
        let (a, b) = (c.node(NODE_A, 0), c.node(NODE_B, 0));
        let outsider = c.node(NODE_B, 1);
        assert_eq!(outsider.read_keys(), (0, vec![KEY_A, KEY_B]));
        assert_eq!(outsider.read_reservation(), (0, Some((KEY_A, WR_EX_RO))));
        report_capabilities(&a, true, true);
        // The same I_T nexuses (initiator port names with their ISIDs)
        // hold what they held.
        assert_eq!(a.write(40, 4), Got::Good);
        assert_eq!(b.write(41, 4), Got::Good);
        assert_eq!(outsider.write(40, 5), Got::Conflict);
        // A registers again with APTPL=0: nothing is kept any more.
        assert_eq!(a.prout(sa::REGISTER, 0, KEY_A, KEY_A, false), Got::Good);
        report_capabilities(&b, true, false);
    }
    assert_eq!(support::state_files(&state), 0, "state removed");
    c.restart();
    let outsider = c.node(NODE_B, 1);
    assert_eq!(outsider.read_keys(), (0, vec![]));
    assert_eq!(outsider.read_reservation(), (0, None));
    assert_eq!(outsider.write(40, 5), Got::Good);
}

/// Without a state directory APTPL=1 is refused (PTPL_C is 0,
/// SPC-5 §6.17.3) and a restart forgets everything.
#[test]
fn without_a_state_directory_a_restart_forgets_reservations() {
    let mut c = Cluster::start(&[]);
    {
        let a = c.node(NODE_A, 0);
        let riek = sa::REGISTER_AND_IGNORE_EXISTING_KEY;
        let bad_field = Asc::INVALID_FIELD_IN_PARAMETER_LIST;
        assert_eq!(
            a.prout(riek, 0, 0, KEY_A, true),
            Got::Check(SenseKey::ILLEGAL_REQUEST, bad_field)
        );
        assert_eq!(
            a.read_keys(),
            (0, vec![]),
            "the refused command did nothing"
        );
        assert_eq!(a.prout(riek, 0, 0, KEY_A, false), Got::Good);
        assert_eq!(a.prout(sa::RESERVE, EX_AC, KEY_A, 0, false), Got::Good);
    }
    c.restart();
    let b = c.node(NODE_B, 0);
    assert_eq!(b.read_keys(), (0, vec![]));
    assert_eq!(b.read_reservation(), (0, None));
    assert_eq!(b.write(0, 6), Got::Good);
}
