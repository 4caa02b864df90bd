//! Reservations: the conflict rules and saved state, SPC-2 RESERVE and
//! RELEASE, and PERSISTENT RESERVE IN/OUT between nexuses.

use std::sync::Arc;

use ironlun_backend::RamBackend;

use super::*;
use crate::test_util::{cfg, id, ram_map, read10, sense_of, write10, N};
use crate::{DataOutBuffer, LunMap};
use ironlun_scsi_codes::opcode;

#[test]
fn nexus_names_and_transport_ids() {
    let n = ItNexus::new("iqn.2026-11.X:init", [0x80, 1, 2, 3, 4, 5], 1);
    assert_eq!(n.initiator_port, "iqn.2026-11.x:init,i,0x800102030405");
    assert_eq!(n.initiator_name(), "iqn.2026-11.x:init");
    let t = transport_id(&n);
    assert_eq!(t[0], 0x45);
    assert_eq!(t.len() % 4, 0);
    assert_eq!(
        parse_transport_id(&t),
        Some((n.initiator_port.clone(), true))
    );
}

#[test]
fn conflict_rules_per_type() {
    let a = ItNexus::new("iqn.x:a", [0; 6], 1);
    let b = ItNexus::new("iqn.x:b", [0; 6], 1);
    let c = ItNexus::new("iqn.x:c", [0; 6], 1);
    for (ty, b_read, b_write, c_read, c_write) in [
        // (type, registered non-holder read/write, unregistered read/write)
        (pr_type::WRITE_EXCLUSIVE, false, true, false, true),
        (pr_type::EXCLUSIVE_ACCESS, true, true, true, true),
        (
            pr_type::WRITE_EXCLUSIVE_REGISTRANTS_ONLY,
            false,
            false,
            false,
            true,
        ),
        (
            pr_type::EXCLUSIVE_ACCESS_REGISTRANTS_ONLY,
            false,
            false,
            true,
            true,
        ),
        (
            pr_type::WRITE_EXCLUSIVE_ALL_REGISTRANTS,
            false,
            false,
            false,
            true,
        ),
        (
            pr_type::EXCLUSIVE_ACCESS_ALL_REGISTRANTS,
            false,
            false,
            true,
            true,
        ),
    ] {
        let st = PrState {
            generation: 0,
            registrations: vec![
                Registration {
                    nexus: a.clone(),
                    key: 1,
                    all_tg_pt: false,
                },
                Registration {
                    nexus: b.clone(),
                    key: 2,
                    all_tg_pt: false,
                },
            ],
            reservation: Some(Reservation {
                holder: a.clone(),
                pr_type: ty,
            }),
            aptpl: false,
        };
        assert!(!st.conflicts(&a, Access::Write), "holder writes, type {ty}");
        assert_eq!(
            st.conflicts(&b, Access::Read),
            b_read,
            "registrant read, type {ty}"
        );
        assert_eq!(
            st.conflicts(&b, Access::Write),
            b_write,
            "registrant write, type {ty}"
        );
        assert_eq!(
            st.conflicts(&c, Access::Read),
            c_read,
            "stranger read, type {ty}"
        );
        assert_eq!(
            st.conflicts(&c, Access::Write),
            c_write,
            "stranger write, type {ty}"
        );
        assert!(!st.conflicts(&c, Access::Other));
    }
}

/// PERSISTENT RESERVE OUT with the basic 24-byte parameter list.
fn prout(m: &LunMap, n: NexusId, sa: u8, ty: u8, key: u64, sa_key: u64, flags: u8) -> Response {
    let mut p = [0u8; 24];
    p[..8].copy_from_slice(&key.to_be_bytes());
    p[8..16].copy_from_slice(&sa_key.to_be_bytes());
    p[20] = flags;
    m.execute(
        Some(0),
        n,
        &[opcode::PERSISTENT_RESERVE_OUT, sa, ty, 0, 0, 0, 0, 0, 24, 0],
        &DataOutBuffer::copy_from_slice(&p),
    )
}

fn prin(m: &LunMap, n: NexusId, sa: u8) -> Vec<u8> {
    let r = m.execute(
        Some(0),
        n,
        &[opcode::PERSISTENT_RESERVE_IN, sa, 0, 0, 0, 0, 0, 0x10, 0, 0],
        &DataOutBuffer::new(),
    );
    assert_eq!(r.status, Status::GOOD, "{:?}", sense_of(&r));
    r.bytes().to_vec()
}

fn keys(m: &LunMap, n: NexusId) -> (u32, Vec<u64>) {
    let d = prin(m, n, 0);
    let gen = u32::from_be_bytes(d[..4].try_into().unwrap());
    let len = u32::from_be_bytes(d[4..8].try_into().unwrap()) as usize;
    (
        gen,
        d[8..8 + len]
            .chunks(8)
            .map(|c| u64::from_be_bytes(c.try_into().unwrap()))
            .collect(),
    )
}

fn two_nexus_map() -> (LunMap, NexusId, NexusId) {
    let m = ram_map(100, 512);
    let (a, b) = (NexusId(1), NexusId(2));
    m.attach_nexus(a, &id("a"), false);
    m.attach_nexus(b, &id("b"), false);
    for n in [a, b] {
        m.execute(Some(0), n, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    }
    (m, a, b)
}

const CONFLICT: Status = Status::RESERVATION_CONFLICT;

/// The status of a command without data from nexus `n`.
fn status_of(m: &LunMap, n: NexusId, cdb: &[u8]) -> Status {
    m.execute(Some(0), n, cdb, &DataOutBuffer::new()).status
}

/// The status of a one-block WRITE(10) at LBA 0 from nexus `n`.
fn write_status(m: &LunMap, n: NexusId) -> Status {
    m.execute(
        Some(0),
        n,
        &write10(0, 1, 0),
        &DataOutBuffer::copy_from_slice(&[0; 512]),
    )
    .status
}

#[test]
fn spc2_reserve_release_between_two_nexuses() {
    let (m, a, b) = two_nexus_map();
    let reserve = [0x16, 0, 0, 0, 0, 0];
    let release = [0x17, 0, 0, 0, 0, 0];
    assert_eq!(status_of(&m, a, &reserve), Status::GOOD);
    assert_eq!(
        status_of(&m, a, &reserve),
        Status::GOOD,
        "holder may re-reserve"
    );
    assert_eq!(status_of(&m, b, &reserve), CONFLICT);
    assert_eq!(status_of(&m, b, &read10(0, 1)), CONFLICT);
    assert_eq!(
        status_of(&m, b, &[opcode::INQUIRY, 0, 0, 0, 36, 0]),
        Status::GOOD,
        "INQUIRY passes"
    );
    assert_eq!(
        status_of(&m, b, &release),
        Status::GOOD,
        "a non-holder's RELEASE is a no-op"
    );
    assert_eq!(status_of(&m, b, &reserve), CONFLICT);
    assert_eq!(status_of(&m, a, &read10(0, 1)), Status::GOOD);
    assert_eq!(status_of(&m, a, &release), Status::GOOD);
    assert_eq!(status_of(&m, b, &reserve), Status::GOOD);
    // Nexus loss releases it; so does a LU reset.
    m.detach_nexus(b);
    assert_eq!(status_of(&m, a, &reserve), Status::GOOD);
    m.get(0).unwrap().reset();
    m.attach_nexus(b, &id("b"), true);
    m.execute(Some(0), b, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    assert_eq!(status_of(&m, b, &reserve), Status::GOOD);
}

#[test]
fn persistent_register_reserve_release_and_conflicts() {
    let (m, a, b) = two_nexus_map();
    register_a_and_b(&m, a, b);
    a_holds_write_exclusive(&m, a, b);
    release_needs_the_type_and_the_holder(&m, a, b);
    unregistering_the_holder_releases(&m, a, b);
}

/// a registers with key 0x1111 (REGISTER), b with 0x2222 (REGISTER AND
/// IGNORE); the wrong current key conflicts.
fn register_a_and_b(m: &LunMap, a: NexusId, b: NexusId) {
    // REGISTER with a non-zero key from an unregistered nexus conflicts.
    assert_eq!(prout(m, a, 0x00, 0, 5, 0x1111, 0).status, CONFLICT);
    assert_eq!(prout(m, a, 0x00, 0, 0, 0x1111, 0).status, Status::GOOD);
    assert_eq!(
        prout(m, b, 0x06, 0, 0, 0x2222, 0).status,
        Status::GOOD,
        "REGISTER AND IGNORE"
    );
    let (gen, k) = keys(m, a);
    assert_eq!((gen, k), (2, vec![0x1111, 0x2222]));
    // Re-registering with the wrong current key conflicts.
    assert_eq!(prout(m, a, 0x00, 0, 0x9999, 0x3333, 0).status, CONFLICT);
}

/// a reserves Write Exclusive: b reads but neither writes nor reserves.
fn a_holds_write_exclusive(m: &LunMap, a: NexusId, b: NexusId) {
    assert_eq!(
        prout(m, a, 0x01, pr_type::WRITE_EXCLUSIVE, 0x1111, 0, 0).status,
        Status::GOOD
    );
    let r = prin(m, a, 1);
    assert_eq!(&r[4..8], &16u32.to_be_bytes());
    assert_eq!(&r[8..16], &0x1111u64.to_be_bytes());
    assert_eq!(r[21] & 0x0f, pr_type::WRITE_EXCLUSIVE);
    assert_eq!(
        status_of(m, b, &read10(0, 1)),
        Status::GOOD,
        "reads pass WE"
    );
    assert_eq!(write_status(m, b), CONFLICT);
    assert_eq!(write_status(m, a), Status::GOOD);
    // Another RESERVE by b conflicts; RESERVE(6) conflicts with PR state.
    assert_eq!(
        prout(m, b, 0x01, pr_type::WRITE_EXCLUSIVE, 0x2222, 0, 0).status,
        CONFLICT
    );
    assert_eq!(
        status_of(m, b, &[opcode::RESERVE_6, 0, 0, 0, 0, 0]),
        CONFLICT
    );
}

/// RELEASE of a's reservation: with the wrong type an error, by b a
/// no-op, by a the end of it; neither changes the generation.
fn release_needs_the_type_and_the_holder(m: &LunMap, a: NexusId, b: NexusId) {
    assert_eq!(
        sense_of(&prout(m, a, 0x02, pr_type::EXCLUSIVE_ACCESS, 0x1111, 0, 0)),
        (SenseKey::ILLEGAL_REQUEST, 0x26, 0x04)
    );
    assert_eq!(
        prout(m, b, 0x02, pr_type::WRITE_EXCLUSIVE, 0x2222, 0, 0).status,
        Status::GOOD
    );
    assert_eq!(write_status(m, b), CONFLICT);
    assert_eq!(
        prout(m, a, 0x02, pr_type::WRITE_EXCLUSIVE, 0x1111, 0, 0).status,
        Status::GOOD
    );
    assert_eq!(write_status(m, b), Status::GOOD);
    // Reserve/release do not bump the generation.
    assert_eq!(keys(m, a).0, 2);
}

/// Unregistering the holder of a registrants-only reservation ends it and
/// tells the others.
fn unregistering_the_holder_releases(m: &LunMap, a: NexusId, b: NexusId) {
    assert_eq!(
        prout(
            m,
            a,
            0x01,
            pr_type::WRITE_EXCLUSIVE_REGISTRANTS_ONLY,
            0x1111,
            0,
            0
        )
        .status,
        Status::GOOD
    );
    assert_eq!(prout(m, a, 0x00, 0, 0x1111, 0, 0).status, Status::GOOD);
    let r = m.execute(Some(0), b, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    assert_eq!(
        sense_of(&r),
        (SenseKey::UNIT_ATTENTION, 0x2a, 0x04),
        "RESERVATIONS RELEASED"
    );
    assert_eq!(prin(m, b, 1)[4..8], 0u32.to_be_bytes());
}

#[test]
fn all_registrants_reservation_survives_its_maker() {
    let (m, a, b) = two_nexus_map();
    prout(&m, a, 0x06, 0, 0, 1, 0);
    prout(&m, b, 0x06, 0, 0, 2, 0);
    assert_eq!(
        prout(
            &m,
            a,
            0x01,
            pr_type::EXCLUSIVE_ACCESS_ALL_REGISTRANTS,
            1,
            0,
            0
        )
        .status,
        Status::GOOD
    );
    let r = prin(&m, b, 1);
    assert_eq!(
        &r[8..16],
        &0u64.to_be_bytes(),
        "all-registrants reservations report key 0"
    );
    assert_eq!(write_status(&m, b), Status::GOOD);
    prout(&m, a, 0x00, 0, 1, 0, 0);
    assert_eq!(
        prin(&m, b, 1)[4..8],
        16u32.to_be_bytes(),
        "b still holds it"
    );
    prout(&m, b, 0x00, 0, 2, 0, 0);
    assert_eq!(
        prin(&m, a, 1)[4..8],
        0u32.to_be_bytes(),
        "gone with the last registrant"
    );
}

#[test]
fn preempt_and_clear() {
    let (m, a, b) = two_nexus_map();
    prout(&m, a, 0x06, 0, 0, 1, 0);
    prout(&m, b, 0x06, 0, 0, 2, 0);
    let gen = keys(&m, a).0;
    // No reservation: PREEMPT removes the registrations with that key.
    let r = prout(&m, b, 0x04, pr_type::EXCLUSIVE_ACCESS, 2, 1, 0);
    assert_eq!(
        (r.status, r.abort_nexuses),
        (Status::GOOD, vec![]),
        "PREEMPT aborts nothing"
    );
    assert_eq!(keys(&m, b), (gen + 1, vec![2]));
    let r = m.execute(Some(0), a, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    assert_eq!(
        sense_of(&r),
        (SenseKey::UNIT_ATTENTION, 0x2a, 0x05),
        "REGISTRATIONS PREEMPTED"
    );
    assert_eq!(
        prout(&m, b, 0x04, pr_type::EXCLUSIVE_ACCESS, 2, 7, 0).status,
        CONFLICT,
        "nobody has key 7"
    );
    // Preempting the holder takes its reservation.
    prout(&m, a, 0x06, 0, 0, 1, 0);
    prout(&m, a, 0x01, pr_type::EXCLUSIVE_ACCESS, 1, 0, 0);
    assert_eq!(status_of(&m, b, &read10(0, 1)), CONFLICT);
    let r = prout(&m, b, 0x05, pr_type::WRITE_EXCLUSIVE, 2, 1, 0);
    assert_eq!(
        (r.status, r.abort_nexuses),
        (Status::GOOD, vec![a]),
        "PREEMPT AND ABORT ends a's tasks"
    );
    let r = m.execute(Some(0), a, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    assert_eq!(
        sense_of(&r),
        (SenseKey::UNIT_ATTENTION, 0x2a, 0x05),
        "the preempted holder is told"
    );
    let r = prin(&m, a, 1);
    assert_eq!(
        (&r[8..16], r[21] & 0x0f),
        (&2u64.to_be_bytes()[..], pr_type::WRITE_EXCLUSIVE)
    );
    // CLEAR by a registrant removes everything.
    assert_eq!(prout(&m, b, 0x03, 0, 2, 0, 0).status, Status::GOOD);
    assert_eq!(keys(&m, a).1, Vec::<u64>::new());
    assert_eq!(prin(&m, a, 1)[4..8], 0u32.to_be_bytes());
}

#[test]
fn persistent_reserve_in_forms() {
    let (m, a, _b) = two_nexus_map();
    prout(&m, a, 0x06, 0, 0, 0xabc, 0);
    let caps = prin(&m, a, 2);
    assert_eq!(&caps[..2], &8u16.to_be_bytes());
    assert_eq!(caps[3] & 0x80, 0x80, "TMV");
    assert_eq!((caps[4], caps[5]), (0xea, 0x01));
    assert_eq!(caps[2] & 0x01, 0, "no APTPL without a store");
    let full = prin(&m, a, 3);
    assert_eq!(
        u32::from_be_bytes(full[4..8].try_into().unwrap()) as usize,
        full.len() - 8
    );
    assert_eq!(&full[8..16], &0xabcu64.to_be_bytes());
    let tid = &full[8 + 24..];
    assert_eq!(tid[0], 0x45);
    assert!(std::str::from_utf8(tid)
        .unwrap()
        .contains("iqn.2026-11.test:a,i,0x800000000001"));
    // Truncation keeps the additional length.
    let r = m.execute(
        Some(0),
        a,
        &[opcode::PERSISTENT_RESERVE_IN, 0, 0, 0, 0, 0, 0, 0, 8, 0],
        &DataOutBuffer::new(),
    );
    assert_eq!(r.data.len(), 8);
    assert_eq!(&r.bytes()[4..8], &8u32.to_be_bytes());
    for sa in 4..0x20u8 {
        let r = m.execute(
            Some(0),
            a,
            &[opcode::PERSISTENT_RESERVE_IN, sa, 0, 0, 0, 0, 0, 0x10, 0, 0],
            &DataOutBuffer::new(),
        );
        assert_eq!(
            sense_of(&r).0,
            SenseKey::ILLEGAL_REQUEST,
            "PR IN service action {sa}"
        );
    }
    // APTPL without a store, and a short parameter list.
    assert_eq!(sense_of(&prout(&m, a, 0x06, 0, 0, 1, 0x01)).1, 0x26);
    let r = m.execute(
        Some(0),
        a,
        &[opcode::PERSISTENT_RESERVE_OUT, 0, 0, 0, 0, 0, 0, 0, 8, 0],
        &DataOutBuffer::copy_from_slice(&[0; 8]),
    );
    assert_eq!(sense_of(&r).1, 0x1a);
}

struct MemStore(std::sync::Mutex<Option<String>>);

impl PrStore for MemStore {
    fn save(&self, text: &str) -> std::io::Result<()> {
        *self.0.lock().unwrap() = Some(text.to_owned());
        Ok(())
    }
    fn clear(&self) -> std::io::Result<()> {
        *self.0.lock().unwrap() = None;
        Ok(())
    }
}

#[test]
fn aptpl_state_is_saved_and_restored() {
    let store = Arc::new(MemStore(std::sync::Mutex::new(None)));
    let mut lu = LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(512 * 100))).unwrap();
    lu.set_pr_store(store.clone(), None);
    let m = LunMap::new(vec![(0, Arc::new(lu))]);
    m.attach_nexus(N, &id("a"), false);
    m.execute(Some(0), N, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    assert_eq!(prout(&m, N, 0x06, 0, 0, 77, 0x01).status, Status::GOOD);
    assert_eq!(
        prout(&m, N, 0x01, pr_type::EXCLUSIVE_ACCESS, 77, 0, 0).status,
        Status::GOOD
    );
    let saved = store.0.lock().unwrap().clone().expect("saved with APTPL");
    // A new LU (a restart) restored from the saved text: the same nexus
    // identity still holds the reservation, another one conflicts.
    let mut lu = LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(512 * 100))).unwrap();
    lu.set_pr_store(store.clone(), Some(PrState::decode(&saved).unwrap()));
    let m2 = LunMap::new(vec![(0, Arc::new(lu))]);
    m2.attach_nexus(NexusId(5), &id("a"), false);
    m2.attach_nexus(NexusId(6), &id("b"), false);
    m2.execute(
        Some(0),
        NexusId(5),
        &[0, 0, 0, 0, 0, 0],
        &DataOutBuffer::new(),
    );
    m2.execute(
        Some(0),
        NexusId(6),
        &[0, 0, 0, 0, 0, 0],
        &DataOutBuffer::new(),
    );
    assert_eq!(status_of(&m2, NexusId(5), &read10(0, 1)), Status::GOOD);
    assert_eq!(status_of(&m2, NexusId(6), &read10(0, 1)), CONFLICT);
    assert_eq!(prin(&m2, NexusId(5), 2)[3] & 0x01, 1, "PTPL_A");
    // Clearing APTPL forgets the saved state.
    assert_eq!(
        prout(&m2, NexusId(5), 0x00, 0, 77, 77, 0).status,
        Status::GOOD
    );
    assert!(store.0.lock().unwrap().is_none());
}

/// Three registered nexuses a (key 1), b (2) and c (3), their power-on
/// unit attentions cleared.
fn three_registered() -> (LunMap, [NexusId; 3]) {
    let (m, a, b) = two_nexus_map();
    let c = NexusId(3);
    m.attach_nexus(c, &id("c"), false);
    m.execute(Some(0), c, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    for (n, key) in [(a, 1), (b, 2), (c, 3)] {
        assert_eq!(prout(&m, n, 0x06, 0, 0, key, 0).status, Status::GOOD);
    }
    (m, [a, b, c])
}

/// The unit attention nexus `n` sees next (its ASC and ASCQ), or None
/// when TEST UNIT READY is GOOD.
fn next_ua(m: &LunMap, n: NexusId) -> Option<(u8, u8)> {
    let r = m.execute(Some(0), n, &[0, 0, 0, 0, 0, 0], &DataOutBuffer::new());
    if r.status == Status::GOOD {
        return None;
    }
    let (key, asc, ascq) = sense_of(&r);
    assert_eq!(key, SenseKey::UNIT_ATTENTION);
    Some((asc, ascq))
}

#[test]
fn preempt_naming_ones_own_key_removes_that_registration_too() {
    // fence_scsi's unfencing when its key is already registered: REGISTER
    // AND IGNORE EXISTING KEY, then PREEMPT with RESERVATION KEY and
    // SERVICE ACTION RESERVATION KEY both its own key, to drop stale
    // registrations of that key (SPC-5 §5.14.11.2.5: not an error, the
    // registration is removed, no unit attention for the issuer).
    let (m, [a, b, c]) = three_registered();
    assert_eq!(
        prout(
            &m,
            a,
            0x01,
            pr_type::WRITE_EXCLUSIVE_REGISTRANTS_ONLY,
            1,
            0,
            0
        )
        .status,
        Status::GOOD
    );
    let gen = keys(&m, a).0;
    // TYPE 0 is invalid, but removing registrations ignores SCOPE and
    // TYPE (§5.14.11.2.5 b).
    let r = prout(&m, b, 0x04, 0, 2, 2, 0);
    assert_eq!((r.status, r.abort_nexuses), (Status::GOOD, vec![]));
    assert_eq!(keys(&m, a), (gen + 1, vec![1, 3]));
    for n in [a, b, c] {
        assert_eq!(next_ua(&m, n), None, "no unit attention for {n:?}");
    }
    assert_eq!(write_status(&m, b), CONFLICT, "b is no longer registered");
    assert_eq!(prin(&m, c, 1)[8..16], 1u64.to_be_bytes(), "a still holds");
    // Registered again, b writes under Write Exclusive - Registrants Only.
    assert_eq!(prout(&m, b, 0x06, 0, 0, 2, 0).status, Status::GOOD);
    assert_eq!(write_status(&m, b), Status::GOOD);
    // The holder preempting itself keeps its registration
    // (§5.14.11.2.4.3).
    let same = pr_type::WRITE_EXCLUSIVE_REGISTRANTS_ONLY;
    assert_eq!(prout(&m, a, 0x04, same, 1, 1, 0).status, Status::GOOD);
    assert_eq!(keys(&m, a).1, vec![1, 3, 2]);
    // Under an all-registrants reservation a non-zero key only removes
    // registrations; the last registrant removing itself ends it
    // (§5.14.11.2.1 table 71).
    assert_eq!(prout(&m, a, 0x03, 0, 1, 0, 0).status, Status::GOOD, "CLEAR");
    assert_eq!(prout(&m, a, 0x06, 0, 0, 1, 0).status, Status::GOOD);
    let ar = pr_type::WRITE_EXCLUSIVE_ALL_REGISTRANTS;
    assert_eq!(prout(&m, a, 0x01, ar, 1, 0, 0).status, Status::GOOD);
    assert_eq!(prout(&m, a, 0x04, 0, 1, 1, 0).status, Status::GOOD);
    assert_eq!(prin(&m, a, 1)[4..8], 0u32.to_be_bytes(), "no reservation");
}

#[test]
fn preempt_that_changes_the_type_releases_for_the_remaining_registrants() {
    // SPC-5 §5.14.11.2.4.3: the preempted holder gets REGISTRATIONS
    // PREEMPTED (e); with a new type every other registrant left gets
    // RESERVATIONS RELEASED (f); the preempting nexus gets nothing.
    let (m, [a, b, c]) = three_registered();
    let wero = pr_type::WRITE_EXCLUSIVE_REGISTRANTS_ONLY;
    let earo = pr_type::EXCLUSIVE_ACCESS_REGISTRANTS_ONLY;
    assert_eq!(prout(&m, a, 0x01, wero, 1, 0, 0).status, Status::GOOD);
    assert_eq!(prout(&m, b, 0x04, earo, 2, 1, 0).status, Status::GOOD);
    assert_eq!(
        next_ua(&m, a),
        Some((0x2a, 0x05)),
        "REGISTRATIONS PREEMPTED"
    );
    assert_eq!(next_ua(&m, a), None);
    assert_eq!(next_ua(&m, c), Some((0x2a, 0x04)), "RESERVATIONS RELEASED");
    assert_eq!(next_ua(&m, c), None);
    assert_eq!(next_ua(&m, b), None);
    assert_eq!(prin(&m, c, 1)[21], earo);
    // The same type again: only the preempted registrant hears of it.
    assert_eq!(prout(&m, a, 0x06, 0, 0, 1, 0).status, Status::GOOD);
    assert_eq!(prout(&m, c, 0x01, earo, 3, 0, 0).status, CONFLICT);
    let r = prout(&m, c, 0x05, earo, 3, 2, 0);
    assert_eq!((r.status, r.abort_nexuses), (Status::GOOD, vec![b]));
    assert_eq!(next_ua(&m, b), Some((0x2a, 0x05)));
    assert_eq!(next_ua(&m, a), None, "the type did not change");
    assert_eq!(next_ua(&m, c), None);
    // A type outside table 177 is refused when a reservation is taken.
    assert_eq!(
        sense_of(&prout(&m, a, 0x04, 2, 1, 3, 0)),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0x00)
    );
}

#[test]
fn a_power_on_keeps_saved_registrations_and_zeroes_the_generation() {
    let st = PrState {
        generation: 9,
        registrations: vec![Registration {
            nexus: id("a"),
            key: 5,
            all_tg_pt: false,
        }],
        reservation: None,
        aptpl: true,
    };
    let after = st.clone().after_power_on();
    assert_eq!(after.generation, 0, "SPC-5 §6.16.2");
    assert_eq!((after.registrations, after.aptpl), (st.registrations, true));
}

/// REGISTER AND MOVE from `n` to `dest` (its TransportID, relative port
/// 1), UNREG as given.
fn register_and_move_to(
    m: &LunMap,
    n: NexusId,
    keys: (u64, u64),
    unreg: bool,
    dest: &ItNexus,
) -> Response {
    let tid = transport_id(dest);
    let mut p = vec![0u8; 24];
    p[..8].copy_from_slice(&keys.0.to_be_bytes());
    p[8..16].copy_from_slice(&keys.1.to_be_bytes());
    p[17] = u8::from(unreg) << 1;
    p[18..20].copy_from_slice(&dest.relative_port.to_be_bytes());
    p[20..24].copy_from_slice(&(tid.len() as u32).to_be_bytes());
    p.extend_from_slice(&tid);
    let len = (p.len() as u32).to_be_bytes();
    m.execute(
        Some(0),
        n,
        &[
            opcode::PERSISTENT_RESERVE_OUT,
            0x07,
            0,
            0,
            0,
            len[0],
            len[1],
            len[2],
            len[3],
            0,
        ],
        &DataOutBuffer::copy_from_slice(&p),
    )
}

#[test]
fn register_and_move_answers_as_table_70_says() {
    let (m, [a, b, c]) = three_registered();
    // No reservation to move: INVALID FIELD IN CDB (SPC-5 §5.14.8).
    assert_eq!(
        sense_of(&register_and_move_to(&m, a, (1, 0x22), false, &id("b"))),
        (SenseKey::ILLEGAL_REQUEST, 0x24, 0x00)
    );
    assert_eq!(
        prout(&m, a, 0x01, pr_type::WRITE_EXCLUSIVE, 1, 0, 0).status,
        Status::GOOD
    );
    // Table 70: a registrant that is not the holder, or the holder naming
    // another key, conflicts.
    let r = register_and_move_to(&m, b, (2, 0x22), false, &id("c"));
    assert_eq!(r.status, CONFLICT);
    let r = register_and_move_to(&m, a, (9, 0x22), false, &id("b"));
    assert_eq!(r.status, CONFLICT);
    // A key of zero, or the holder itself as the destination: INVALID
    // FIELD IN PARAMETER LIST.
    for (sa_key, dest) in [(0, id("b")), (0x22, id("a"))] {
        let r = register_and_move_to(&m, a, (1, sa_key), false, &dest);
        assert_eq!(sense_of(&r), (SenseKey::ILLEGAL_REQUEST, 0x26, 0x00));
    }
    // The move: b holds with its new key, a (UNREG) is gone.
    let r = register_and_move_to(&m, a, (1, 0x22), true, &id("b"));
    assert_eq!(r.status, Status::GOOD);
    assert_eq!(keys(&m, c).1, vec![0x22, 3]);
    assert_eq!(prin(&m, c, 1)[8..16], 0x22u64.to_be_bytes());
    assert_eq!(write_status(&m, b), Status::GOOD);
    assert_eq!(write_status(&m, a), CONFLICT);
    // An all-registrants reservation is not moved: RESERVATION CONFLICT.
    let ar = pr_type::WRITE_EXCLUSIVE_ALL_REGISTRANTS;
    assert_eq!(
        prout(&m, b, 0x02, pr_type::WRITE_EXCLUSIVE, 0x22, 0, 0).status,
        Status::GOOD
    );
    assert_eq!(prout(&m, b, 0x01, ar, 0x22, 0, 0).status, Status::GOOD);
    let r = register_and_move_to(&m, b, (0x22, 0x33), false, &id("c"));
    assert_eq!(r.status, CONFLICT);
}

#[test]
fn registrations_are_bounded() {
    let m = ram_map(100, 512);
    let nexus = |i: u64| NexusId(100 + i);
    for i in 0..=MAX_REGISTRATIONS as u64 {
        let name = format!("iqn.2026-11.test:i{i}");
        m.attach_nexus(
            nexus(i),
            &ItNexus::new(&name, [0x80, 0, 0, 0, 0, 1], 1),
            false,
        );
        m.execute(Some(0), nexus(i), &[0; 6], &DataOutBuffer::new());
    }
    for i in 0..MAX_REGISTRATIONS as u64 {
        assert_eq!(
            prout(&m, nexus(i), 0x00, 0, 0, i + 1, 0).status,
            Status::GOOD
        );
    }
    let last = nexus(MAX_REGISTRATIONS as u64);
    assert_eq!(
        sense_of(&prout(&m, last, 0x00, 0, 0, 9, 0)),
        (SenseKey::ILLEGAL_REQUEST, 0x55, 0x04),
        "INSUFFICIENT REGISTRATION RESOURCES"
    );
    // One registration less, and there is room again.
    assert_eq!(prout(&m, nexus(0), 0x00, 0, 1, 0, 0).status, Status::GOOD);
    assert_eq!(prout(&m, last, 0x00, 0, 0, 9, 0).status, Status::GOOD);
}

/// REGISTER AND MOVE names a destination that is saved like any
/// registration: one with white space or a control character in its name
/// is INVALID FIELD IN PARAMETER LIST.
#[test]
fn register_and_move_wants_a_plain_destination() {
    let (m, [a, ..]) = three_registered();
    assert_eq!(
        prout(&m, a, 0x01, pr_type::WRITE_EXCLUSIVE, 1, 0, 0).status,
        Status::GOOD
    );
    for name in ["iqn.2026-11.test:x\nreserve 3 1 y", "iqn.2026-11.test:x y"] {
        let dest = ItNexus::new(name, [0x80, 0, 0, 0, 0, 9], 1);
        let r = register_and_move_to(&m, a, (1, 0x22), false, &dest);
        assert_eq!(
            sense_of(&r),
            (SenseKey::ILLEGAL_REQUEST, 0x26, 0x00),
            "{name:?}"
        );
    }
    let r = register_and_move_to(&m, a, (1, 0x22), false, &id("d"));
    assert_eq!(r.status, Status::GOOD);
}

/// REGISTER AND MOVE's destination name goes through the transport's rule
/// for names, as a login's does: a name it refuses is INVALID FIELD IN
/// PARAMETER LIST, and one it rewrites is registered in the form a login
/// of that initiator has, so the initiator holds the reservation.
#[test]
fn register_and_move_names_go_through_the_transports_rule() {
    fn rule(n: &str) -> Option<String> {
        (!n.contains('_')).then(|| n.replace("test2", "test"))
    }
    let mut lu = LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(512 * 100))).unwrap();
    lu.set_name_rule(rule);
    let m = LunMap::new(vec![(0, Arc::new(lu))]);
    let (a, b) = (NexusId(1), NexusId(2));
    m.attach_nexus(a, &id("a"), false);
    m.execute(Some(0), a, &[0; 6], &DataOutBuffer::new());
    assert_eq!(prout(&m, a, 0x00, 0, 0, 1, 0).status, Status::GOOD);
    assert_eq!(
        prout(&m, a, 0x01, pr_type::WRITE_EXCLUSIVE, 1, 0, 0).status,
        Status::GOOD
    );
    let isid = [0x80, 0, 0, 0, 0, 9];
    let refused = ItNexus::new("iqn.2026-11.test:bad_name", isid, 1);
    let r = register_and_move_to(&m, a, (1, 0x22), false, &refused);
    assert_eq!(sense_of(&r), (SenseKey::ILLEGAL_REQUEST, 0x26, 0x00));
    let written = ItNexus::new("iqn.2026-11.test2:b", isid, 1);
    let r = register_and_move_to(&m, a, (1, 0x22), true, &written);
    assert_eq!(r.status, Status::GOOD);
    m.attach_nexus(b, &ItNexus::new("iqn.2026-11.test:b", isid, 1), false);
    m.execute(Some(0), b, &[0; 6], &DataOutBuffer::new());
    assert_eq!(write_status(&m, b), Status::GOOD, "b holds it");
}
