//! Shared reservations without Ceph: the stored form, the
//! compare-and-swap loop against a store that others write meanwhile,
//! and two LUs (two gateways, relative ports 1 and 2) sharing one store
//! through the cluster-validation sequence.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, Weak};

use ironlun_backend::RamBackend;
use ironlun_scsi_codes::{opcode, SenseKey, Status};

use super::*;
use crate::reservations::{ItNexus, Registration, Reservation};
use crate::test_util::{cfg, read10, sense_of, write10};
use crate::{DataOutBuffer, LunMap, NexusId, Response};

/// An object store in memory: text and version, and the knobs a test
/// turns (writes by "another gateway" before ours, failures, the watch).
#[derive(Default)]
struct FakeStore {
    object: Mutex<(Option<String>, u64)>,
    /// So many of the next conditional writes find that another gateway
    /// wrote first (it registers `iqn.2026-11.test:other`).
    interfere: AtomicUsize,
    failing: AtomicBool,
    /// The store is reached through a client the cluster fenced.
    fenced: AtomicBool,
    out_of_step: AtomicBool,
    writes: AtomicUsize,
    /// The LUs that watch, told on each announcement.
    watchers: Mutex<Vec<Weak<LogicalUnit>>>,
}

fn other() -> ItNexus {
    ItNexus::new("iqn.2026-11.test:other", [0x80, 0, 0, 0, 0, 9], 2)
}

impl FakeStore {
    fn failure(&self) -> io::Result<()> {
        if self.failing.load(Ordering::SeqCst) {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "cluster away"));
        }
        if self.fenced.load(Ordering::SeqCst) {
            return Err(ironlun_backend::Fault::Fenced.into());
        }
        Ok(())
    }

    fn someone_else_writes(&self, o: &mut (Option<String>, u64)) {
        let mut st =
            o.0.as_deref()
                .map(|t| decode(t).unwrap())
                .unwrap_or_default();
        let key = 0x900 + o.1;
        st.pr.registrations.push(Registration {
            nexus: ItNexus {
                relative_port: u16::try_from(o.1 % 1000).unwrap(),
                ..other()
            },
            key,
            all_tg_pt: false,
        });
        st.pr.generation += 1;
        *o = (Some(encode(&st)), o.1 + 1);
    }
}

impl SharedPr for FakeStore {
    fn load(&self) -> io::Result<Stored> {
        self.failure()?;
        let o = self.object.lock().unwrap();
        let state =
            o.0.as_deref()
                .map(|t| decode(t).unwrap())
                .unwrap_or_default();
        Ok(Stored {
            state,
            version: o.1,
        })
    }

    fn store_if(&self, version: u64, state: &SharedState) -> io::Result<Option<u64>> {
        self.failure()?;
        let mut o = self.object.lock().unwrap();
        if self
            .interfere
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            self.someone_else_writes(&mut o);
        }
        if o.1 != version {
            return Ok(None);
        }
        *o = (Some(encode(state)), version + 1);
        self.writes.fetch_add(1, Ordering::SeqCst);
        Ok(Some(version + 1))
    }

    fn announce(&self) {
        let watchers: Vec<_> = self.watchers.lock().unwrap().clone();
        for lu in watchers.iter().filter_map(Weak::upgrade) {
            lu.take_up_shared(self.load().unwrap());
        }
    }

    fn in_step(&self) -> bool {
        !self.out_of_step.load(Ordering::SeqCst)
    }
}

/// A gateway: one LU at relative port `port` over the shared store.
fn gateway(store: &Arc<FakeStore>, port: u16) -> (LunMap, Arc<LogicalUnit>) {
    let mut c = cfg(512);
    c.relative_port = port;
    let mut lu = LogicalUnit::new(c, Arc::new(RamBackend::new(512 * 64))).unwrap();
    lu.set_shared_pr(store.clone(), store.load().unwrap());
    let lu = Arc::new(lu);
    store.watchers.lock().unwrap().push(Arc::downgrade(&lu));
    (LunMap::new(vec![(0, Arc::clone(&lu))]), lu)
}

fn nexus(name: &str, port: u16) -> ItNexus {
    ItNexus::new(
        &format!("iqn.2026-11.test:{name}"),
        [0x80, 0, 0, 0, 0, 1],
        port,
    )
}

/// Attaches `n` and takes its power-on unit attention.
fn login(m: &LunMap, n: NexusId, who: &ItNexus) {
    m.attach_nexus(n, who, false);
    m.execute(Some(0), n, &[0; 6], &DataOutBuffer::new());
}

fn prout(m: &LunMap, n: NexusId, sa: u8, ty: u8, key: u64, sa_key: u64) -> Response {
    let mut p = [0u8; 24];
    p[..8].copy_from_slice(&key.to_be_bytes());
    p[8..16].copy_from_slice(&sa_key.to_be_bytes());
    m.execute(
        Some(0),
        n,
        &[opcode::PERSISTENT_RESERVE_OUT, sa, ty, 0, 0, 0, 0, 0, 24, 0],
        &DataOutBuffer::copy_from_slice(&p),
    )
}

fn read_keys(m: &LunMap, n: NexusId) -> Vec<u64> {
    let r = m.execute(
        Some(0),
        n,
        &[opcode::PERSISTENT_RESERVE_IN, 0, 0, 0, 0, 0, 0, 1, 0, 0],
        &DataOutBuffer::new(),
    );
    assert_eq!(r.status, Status::GOOD);
    let d = r.data.as_mem().unwrap().to_vec();
    d[8..]
        .chunks(8)
        .map(|k| u64::from_be_bytes(k.try_into().unwrap()))
        .collect()
}

fn write(m: &LunMap, n: NexusId) -> Response {
    m.execute(
        Some(0),
        n,
        &write10(0, 1, 0),
        &DataOutBuffer::copy_from_slice(&[7; 512]),
    )
}

const REGISTER: u8 = 0;
const RESERVE: u8 = 1;
const PREEMPT: u8 = 4;
const WERO: u8 = pr_type::WRITE_EXCLUSIVE_REGISTRANTS_ONLY;

#[test]
fn the_shared_form_keeps_aptpl_and_the_generation() {
    for aptpl in [false, true] {
        let st = PrState {
            generation: 9,
            registrations: vec![Registration {
                nexus: nexus("a", 2),
                key: 5,
                all_tg_pt: true,
            }],
            reservation: Some(Reservation {
                holder: nexus("a", 2),
                pr_type: WERO,
            }),
            aptpl,
        };
        let st = SharedState { pr: st, spc2: None };
        let text = encode(&st);
        assert!(text.starts_with(&format!("aptpl {}\nironlun-pr 2\n", u8::from(aptpl))));
        assert_eq!(decode(&text), Ok(st));
    }
}

#[test]
fn a_damaged_shared_form_is_refused() {
    let good = encode(&SharedState::default());
    for bad in [
        String::new(),
        "aptpl 2\n".to_owned() + &good[8..],
        good.replacen("aptpl 0", "aptpl  0", 1),
        good.replace("end\n", ""),
        "x".repeat(MAX_SHARED_BYTES + 1),
    ] {
        assert!(decode(&bad).is_err(), "{bad:?}");
    }
}

#[test]
fn an_update_is_redone_on_the_state_another_gateway_wrote() {
    let store = FakeStore::default();
    store.interfere.store(2, Ordering::SeqCst);
    let mut tries = 0;
    let out = update(&store, |mut st| {
        tries += 1;
        st.pr.generation += 1;
        st.pr.registrations.push(Registration {
            nexus: nexus("a", 1),
            key: 1,
            all_tg_pt: false,
        });
        Ok::<_, ()>((st, ()))
    })
    .unwrap();
    assert_eq!(tries, 3);
    let Updated::Done {
        state,
        version,
        written,
        ..
    } = out
    else {
        panic!("refused")
    };
    assert!(written);
    assert_eq!(version, 3);
    // Both of the other gateway's registrations and ours: none lost.
    assert_eq!(state.pr.registrations.len(), 3);
    assert_eq!(store.load().unwrap().state, state);
    assert_eq!(store.writes.load(Ordering::SeqCst), 1);
}

#[test]
fn an_update_gives_up_when_others_keep_writing() {
    let store = FakeStore::default();
    store.interfere.store(usize::MAX, Ordering::SeqCst);
    let out = update(&store, |mut st| {
        st.pr.generation += 1;
        Ok::<_, ()>((st, ()))
    });
    assert!(matches!(out, Err(UpdateError::Contended)));
    assert_eq!(store.writes.load(Ordering::SeqCst), 0);
}

#[test]
fn a_refusal_or_no_change_writes_nothing() {
    let store = FakeStore::default();
    let out = update(&store, |_| Err::<(SharedState, ()), _>("conflict"));
    assert_eq!(out.unwrap(), Updated::Refused("conflict"));
    let out = update(&store, |st| Ok::<_, ()>((st, ()))).unwrap();
    assert!(matches!(out, Updated::Done { written: false, .. }));
    assert_eq!(store.writes.load(Ordering::SeqCst), 0);
}

/// The cross-gateway sequence of issue 37 (cluster validation): register
/// through A and through B, reserve Write Exclusive - Registrants Only
/// through A, B enforces it for an unregistered initiator and lets the
/// registered one write, B preempts A's key and A learns of it.
#[test]
fn two_gateways_enforce_one_reservation() {
    let store = Arc::new(FakeStore::default());
    let (a, _lu_a) = gateway(&store, 1);
    let (b, _lu_b) = gateway(&store, 2);
    let (n1, n2, n3) = (NexusId(1), NexusId(2), NexusId(3));
    login(&a, n1, &nexus("one", 1));
    login(&b, n2, &nexus("two", 2));
    login(&b, n3, &nexus("three", 2));
    assert_eq!(prout(&a, n1, REGISTER, 0, 0, 0x1111).status, Status::GOOD);
    assert_eq!(prout(&b, n2, REGISTER, 0, 0, 0x2222).status, Status::GOOD);
    assert_eq!(prout(&a, n1, RESERVE, WERO, 0x1111, 0).status, Status::GOOD);
    // B never saw these commands: it enforces what A stored.
    assert_eq!(write(&b, n3).status, Status::RESERVATION_CONFLICT);
    assert_eq!(write(&b, n2).status, Status::GOOD);
    assert_eq!(read_keys(&b, n3), vec![0x1111, 0x2222]);
    // B preempts A's key and takes the reservation.
    assert_eq!(
        prout(&b, n2, PREEMPT, WERO, 0x2222, 0x1111).status,
        Status::GOOD
    );
    // A's initiator hears that its registration is gone, then conflicts.
    let r = write(&a, n1);
    assert_eq!(sense_of(&r), (SenseKey::UNIT_ATTENTION, 0x2a, 0x05));
    assert_eq!(write(&a, n1).status, Status::RESERVATION_CONFLICT);
    assert_eq!(read_keys(&a, n1), vec![0x2222]);
    let stored = store.load().unwrap().state;
    assert_eq!(stored.pr.reservation.unwrap().holder, nexus("two", 2));
}

/// A gateway the cluster fenced reaches the store through the fenced
/// client (docs/ha.md, "Fencing and rejoining"): its reservation
/// commands say so, as its media access does, and change nothing.
#[test]
fn a_fenced_store_answers_manual_intervention() {
    let store = Arc::new(FakeStore::default());
    let (a, lu) = gateway(&store, 1);
    login(&a, NexusId(1), &nexus("one", 1));
    store.fenced.store(true, Ordering::SeqCst);
    let r = prout(&a, NexusId(1), REGISTER, 0, 0, 0x1111);
    assert_eq!(sense_of(&r), (SenseKey::NOT_READY, 0x04, 0x03));
    let r = a.execute(
        Some(0),
        NexusId(1),
        &[opcode::PERSISTENT_RESERVE_IN, 0, 0, 0, 0, 0, 0, 1, 0, 0],
        &DataOutBuffer::new(),
    );
    assert_eq!(sense_of(&r), (SenseKey::NOT_READY, 0x04, 0x03));
    assert!(lu.pr_state().registrations.is_empty());
    assert_eq!(store.writes.load(Ordering::SeqCst), 0);
}

#[test]
fn a_store_that_fails_never_answers_good() {
    let store = Arc::new(FakeStore::default());
    let (a, lu) = gateway(&store, 1);
    login(&a, NexusId(1), &nexus("one", 1));
    store.failing.store(true, Ordering::SeqCst);
    let r = prout(&a, NexusId(1), REGISTER, 0, 0, 0x1111);
    assert_eq!(sense_of(&r), (SenseKey::NOT_READY, 0x04, 0x01));
    let r = a.execute(
        Some(0),
        NexusId(1),
        &[opcode::PERSISTENT_RESERVE_IN, 0, 0, 0, 0, 0, 0, 1, 0, 0],
        &DataOutBuffer::new(),
    );
    assert_eq!(sense_of(&r), (SenseKey::NOT_READY, 0x04, 0x01));
    assert!(lu.pr_state().registrations.is_empty());
    store.failing.store(false, Ordering::SeqCst);
    // Contention past the bound is NOT READY too, and changes nothing.
    store.interfere.store(usize::MAX, Ordering::SeqCst);
    let r = prout(&a, NexusId(1), REGISTER, 0, 0, 0x1111);
    assert_eq!(sense_of(&r), (SenseKey::NOT_READY, 0x04, 0x01));
    assert!(!lu
        .pr_state()
        .registrations
        .iter()
        .any(|g| g.nexus == nexus("one", 1)));
}

#[test]
fn media_access_waits_while_the_watch_is_lost() {
    let store = Arc::new(FakeStore::default());
    let (a, _lu) = gateway(&store, 1);
    login(&a, NexusId(1), &nexus("one", 1));
    store.out_of_step.store(true, Ordering::SeqCst);
    let r = a.execute(Some(0), NexusId(1), &read10(0, 1), &DataOutBuffer::new());
    assert_eq!(sense_of(&r), (SenseKey::NOT_READY, 0x04, 0x01));
    assert_eq!(sense_of(&write(&a, NexusId(1))).0, SenseKey::NOT_READY);
    // INQUIRY and TEST UNIT READY still answer.
    let inquiry = [opcode::INQUIRY, 0, 0, 0, 96, 0];
    let r = a.execute(Some(0), NexusId(1), &inquiry, &DataOutBuffer::new());
    assert_eq!(r.status, Status::GOOD);
    store.out_of_step.store(false, Ordering::SeqCst);
    assert_eq!(write(&a, NexusId(1)).status, Status::GOOD);
}

#[test]
fn an_older_version_never_replaces_a_newer_one() {
    let store = Arc::new(FakeStore::default());
    let (_a, lu) = gateway(&store, 1);
    let newer = PrState {
        generation: 5,
        ..PrState::default()
    };
    let shared = |pr| SharedState { pr, spc2: None };
    assert!(lu.take_up_shared(Stored {
        state: shared(newer.clone()),
        version: 7,
    }));
    assert!(!lu.take_up_shared(Stored {
        state: SharedState::default(),
        version: 6,
    }));
    assert!(!lu.take_up_shared(Stored {
        state: SharedState::default(),
        version: 7,
    }));
    assert_eq!(lu.pr_state(), newer);
}

/// SPC-5 §5.14.7 across the group: a registration made with ALL_TG_PT
/// through gateway A is the initiator port's through B's port too; one
/// made without it is only A's I_T nexus's, so the same initiator
/// through B is unregistered there (and conflicts).
#[test]
fn all_tg_pt_covers_the_other_gateways_port() {
    let store = Arc::new(FakeStore::default());
    let (a, _lu_a) = gateway(&store, 1);
    let (b, _lu_b) = gateway(&store, 2);
    let (one_a, one_b, two_a, two_b) = (NexusId(1), NexusId(2), NexusId(3), NexusId(4));
    login(&a, one_a, &nexus("one", 1));
    login(&b, one_b, &nexus("one", 2));
    login(&a, two_a, &nexus("two", 1));
    login(&b, two_b, &nexus("two", 2));
    let all_tg_pt = |m: &LunMap, n, key| {
        let mut p = [0u8; 24];
        p[8..16].copy_from_slice(&u64::to_be_bytes(key));
        p[20] = 0x04;
        m.execute(
            Some(0),
            n,
            &[
                opcode::PERSISTENT_RESERVE_OUT,
                REGISTER,
                0,
                0,
                0,
                0,
                0,
                0,
                24,
                0,
            ],
            &DataOutBuffer::copy_from_slice(&p),
        )
    };
    assert_eq!(all_tg_pt(&a, one_a, 0x11).status, Status::GOOD);
    assert_eq!(prout(&a, two_a, REGISTER, 0, 0, 0x22).status, Status::GOOD);
    // "one" reserves through B with the key it registered through A.
    assert_eq!(
        prout(&b, one_b, RESERVE, WERO, 0x11, 0).status,
        Status::GOOD
    );
    assert_eq!(write(&b, one_b).status, Status::GOOD);
    assert_eq!(write(&a, one_a).status, Status::GOOD);
    // "two" registered through A only: a registrant there, not through B.
    assert_eq!(write(&a, two_a).status, Status::GOOD);
    assert_eq!(write(&b, two_b).status, Status::RESERVATION_CONFLICT);
    assert_eq!(
        prout(&b, two_b, RESERVE, WERO, 0x22, 0).status,
        Status::RESERVATION_CONFLICT
    );
}

fn cmd(m: &LunMap, n: NexusId, cdb: &[u8]) -> Status {
    m.execute(Some(0), n, cdb, &DataOutBuffer::new()).status
}

const RESERVE6: [u8; 6] = [opcode::RESERVE_6, 0, 0, 0, 0, 0];
const RELEASE6: [u8; 6] = [opcode::RELEASE_6, 0, 0, 0, 0, 0];
const TUR: [u8; 6] = [0; 6];

#[test]
fn the_spc2_holder_is_stored_on_a_line_of_its_own() {
    let holder = nexus("a b%", 2);
    let st = SharedState {
        pr: PrState::default(),
        spc2: Some(holder.clone()),
    };
    let text = encode(&st);
    assert!(
        text.starts_with(
            "aptpl 0\nspc2 2 iqn.2026-11.test:a%20b%25,i,0x800000000001\nironlun-pr 2\n"
        ),
        "{text}"
    );
    assert_eq!(decode(&text), Ok(st));
    // An object written before the line existed: no SPC-2 reservation.
    let old = "aptpl 1\nironlun-pr 2\ngeneration 3\nend\n";
    let st = decode(old).unwrap();
    assert_eq!((st.spc2, st.pr.aptpl, st.pr.generation), (None, true, 3));
}

#[test]
fn a_damaged_spc2_line_is_refused() {
    let rest = "ironlun-pr 2\ngeneration 0\nend\n";
    let name = "iqn.2026-11.test:a,i,0x800000000001";
    for line in [
        "spc2 ".to_owned(),
        "spc2 2".to_owned(),
        format!("spc2 02 {name}"),
        format!("spc2 +2 {name}"),
        format!("spc2 70000 {name}"),
        format!("spc2 2 {name} x"),
        format!("spc2 2  {name}"),
        format!("spc2 2 {}", name.to_uppercase()),
        "spc2 2 iqn.2026-11.test:a".to_owned(),
        format!("spc2 2 {name}%zz"),
        format!("spc2 2 {name}\nspc2 2 {name}"),
    ] {
        let text = format!("aptpl 0\n{line}\n{rest}");
        let got = decode(&text);
        assert!(got.is_err(), "{text:?}: {got:?}");
    }
    // Only where it belongs: after the aptpl line, before the saved form.
    let late = format!("aptpl 0\n{rest}spc2 2 {name}\n");
    assert!(decode(&late).is_err());
    let unended = format!("aptpl 0\nspc2 2 {name}");
    assert!(decode(&unended).is_err());
}

/// Two gateways (relative ports 1 and 2) over one store, with
/// initiators "one" through A and "two" through B.
fn two_gateways(
    store: &Arc<FakeStore>,
) -> ((LunMap, Arc<LogicalUnit>), (LunMap, Arc<LogicalUnit>)) {
    let (a, lu_a) = gateway(store, 1);
    let (b, lu_b) = gateway(store, 2);
    login(&a, NexusId(1), &nexus("one", 1));
    login(&b, NexusId(2), &nexus("two", 2));
    ((a, lu_a), (b, lu_b))
}

/// SPC-2 §5.5.1 across the group: a RESERVE through A stops every other
/// I_T nexus's commands through B (the same initiator's through B's port
/// too: another I_T nexus), and a RESERVE, PERSISTENT RESERVE IN or OUT
/// there; RELEASE from anyone but the holder changes nothing; once the
/// holder releases, B's initiator reserves and A's conflicts.
#[test]
fn an_spc2_reservation_through_one_gateway_conflicts_through_the_other() {
    let store = Arc::new(FakeStore::default());
    let ((a, _lu_a), (b, lu_b)) = two_gateways(&store);
    let (one, two, one_b) = (NexusId(1), NexusId(2), NexusId(3));
    login(&b, one_b, &nexus("one", 2));
    assert_eq!(cmd(&a, one, &RESERVE6), Status::GOOD);
    assert_eq!(
        store.load().unwrap().state.spc2,
        Some(nexus("one", 1)),
        "stored by identity"
    );
    for n in [two, one_b] {
        assert_eq!(write(&b, n).status, Status::RESERVATION_CONFLICT);
        assert_eq!(cmd(&b, n, &TUR), Status::RESERVATION_CONFLICT);
        assert_eq!(cmd(&b, n, &RESERVE6), Status::RESERVATION_CONFLICT);
        let prin = [opcode::PERSISTENT_RESERVE_IN, 0, 0, 0, 0, 0, 0, 1, 0, 0];
        assert_eq!(cmd(&b, n, &prin), Status::RESERVATION_CONFLICT);
        let r = prout(&b, n, REGISTER, 0, 0, 0x2222);
        assert_eq!(r.status, Status::RESERVATION_CONFLICT);
    }
    assert_eq!(write(&a, one).status, Status::GOOD);
    assert_eq!(cmd(&a, one, &RESERVE6), Status::GOOD, "the holder again");
    let writes = store.writes.load(Ordering::SeqCst);
    assert_eq!(cmd(&b, two, &RELEASE6), Status::GOOD);
    assert_eq!(write(&b, two).status, Status::RESERVATION_CONFLICT);
    assert_eq!(
        store.writes.load(Ordering::SeqCst),
        writes,
        "nothing changed"
    );
    assert_eq!(cmd(&a, one, &RELEASE6), Status::GOOD);
    assert!(lu_b.reservations().spc2_holder.is_none(), "announced to B");
    assert_eq!(write(&b, two).status, Status::GOOD);
    assert_eq!(cmd(&b, two, &RESERVE6), Status::GOOD);
    assert_eq!(write(&a, one).status, Status::RESERVATION_CONFLICT);
    assert_eq!(write(&b, two).status, Status::GOOD);
}

/// A persistent registration through one gateway makes a RESERVE through
/// the other a conflict (SPC-5 §5.14.3, CRH = 1), as on one target.
#[test]
fn a_registration_through_one_gateway_refuses_a_reserve_through_the_other() {
    let store = Arc::new(FakeStore::default());
    let ((a, _), (b, _)) = two_gateways(&store);
    assert_eq!(
        prout(&a, NexusId(1), REGISTER, 0, 0, 0x1111).status,
        Status::GOOD
    );
    assert_eq!(cmd(&b, NexusId(2), &RESERVE6), Status::RESERVATION_CONFLICT);
    assert_eq!(store.load().unwrap().state.spc2, None);
}

/// The end of the holder's I_T nexus (logout, connection loss) and an
/// I_T NEXUS RESET release it in the store (SPC-2 §5.5.1, SAM-5 §7.7),
/// on a thread of their own; another nexus's end does not.
#[test]
fn an_spc2_reservation_ends_with_its_nexus() {
    let store = Arc::new(FakeStore::default());
    let ((a, lu_a), (b, lu_b)) = two_gateways(&store);
    let (one, two, three) = (NexusId(1), NexusId(2), NexusId(3));
    login(&a, three, &nexus("three", 1));
    assert_eq!(cmd(&a, one, &RESERVE6), Status::GOOD);
    assert!(lu_a.detach(three).is_none(), "not the holder");
    assert_eq!(write(&b, two).status, Status::RESERVATION_CONFLICT);
    // Cleared in A's copy at once, in the store by the thread.
    let release = lu_a.detach(one).unwrap();
    assert!(lu_a.reservations().spc2_holder.is_none());
    assert!(release.join().unwrap().unwrap(), "written");
    assert_eq!(store.load().unwrap().state.spc2, None);
    assert_eq!(write(&b, two).status, Status::GOOD);
    // I_T NEXUS RESET of the holder (now "two", through B).
    assert_eq!(cmd(&b, two, &RESERVE6), Status::GOOD);
    login(&a, three, &nexus("three", 1));
    assert_eq!(write(&a, three).status, Status::RESERVATION_CONFLICT);
    assert!(lu_b.reset_nexus(two).unwrap().join().unwrap().unwrap());
    assert_eq!(write(&a, three).status, Status::GOOD);
}

/// A reset through any gateway ends the SPC-2 reservation, wherever it
/// was made (SAM-5 §6.3.3), for the other gateways too.
#[test]
fn a_reset_through_either_gateway_ends_an_spc2_reservation() {
    let store = Arc::new(FakeStore::default());
    let ((a, lu_a), (b, lu_b)) = two_gateways(&store);
    let (one, two) = (NexusId(1), NexusId(2));
    assert_eq!(cmd(&a, one, &RESERVE6), Status::GOOD);
    // Through B, which never saw the RESERVE.
    let release = lu_b.reset_here().unwrap();
    assert!(release.join().unwrap().unwrap());
    assert_eq!(store.load().unwrap().state.spc2, None);
    assert!(lu_a.reservations().spc2_holder.is_none(), "announced to A");
    // The reset's unit attention first, then access.
    assert_eq!(cmd(&b, two, &TUR), Status::CHECK_CONDITION);
    assert_eq!(write(&b, two).status, Status::GOOD);
    // Nothing held: a reset writes nothing.
    assert!(lu_a.reset_here().is_none());
    assert!(lu_b.reset_here().is_none());
}

/// A RESERVE or RELEASE that cannot reach the store is NOT READY and
/// changes nothing; a release thread that cannot either reports it.
#[test]
fn a_failing_store_holds_no_spc2_reservation() {
    let store = Arc::new(FakeStore::default());
    let ((a, lu_a), _) = two_gateways(&store);
    store.failing.store(true, Ordering::SeqCst);
    let r = a.execute(Some(0), NexusId(1), &RESERVE6, &DataOutBuffer::new());
    assert_eq!(sense_of(&r), (SenseKey::NOT_READY, 0x04, 0x01));
    assert!(lu_a.reservations().spc2_holder.is_none());
    store.failing.store(false, Ordering::SeqCst);
    assert_eq!(cmd(&a, NexusId(1), &RESERVE6), Status::GOOD);
    store.failing.store(true, Ordering::SeqCst);
    let r = a.execute(Some(0), NexusId(1), &RELEASE6, &DataOutBuffer::new());
    assert_eq!(sense_of(&r), (SenseKey::NOT_READY, 0x04, 0x01));
    let release = lu_a.detach(NexusId(1)).unwrap();
    assert!(matches!(
        release.join().unwrap(),
        Err(UpdateError::Store(_))
    ));
}
