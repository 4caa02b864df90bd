//! The saved form's reader accepts every state the running code can
//! reach: random sequences of PERSISTENT RESERVE OUT commands, from
//! nexuses on two target ports (one the LU has, one as a second port
//! would give), each state after each command encoded and decoded back
//! unchanged. A state the reader refused would take the LU offline at
//! the next start (APTPL), so a hostile initiator must not reach one.
//! Seeded: every run makes the same sequences, and a failure names its
//! seed and step.

use std::sync::{Arc, Mutex};

use ironlun_backend::RamBackend;

use super::*;
use crate::test_util::cfg;
use crate::{DataOutBuffer, LunMap};
use ironlun_scsi_codes::opcode;

/// xorshift64*: small, deterministic, good enough to pick commands.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }

    fn flag(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

struct Saved(Mutex<Option<String>>);

impl PrStore for Saved {
    fn save(&self, text: &str) -> std::io::Result<()> {
        *self.0.lock().unwrap() = Some(text.to_owned());
        Ok(())
    }
    fn clear(&self) -> std::io::Result<()> {
        *self.0.lock().unwrap() = None;
        Ok(())
    }
}

/// Initiator ports: two names, two ISIDs; each logs in through ports 1
/// (the LU's) and 2.
fn identities() -> Vec<ItNexus> {
    let mut v = Vec::new();
    for name in ["iqn.2026-11.test:a", "iqn.2026-11.test:b"] {
        for isid in [1, 2] {
            for port in [1, 2] {
                v.push(ItNexus::new(name, [0x80, 0, 0, 0, 0, isid], port));
            }
        }
    }
    v
}

/// One random PERSISTENT RESERVE OUT from `me`: its CDB and parameter
/// list. Keys and senders lean towards those that get past the first
/// checks (the sender's own key, the holder moving its reservation), so
/// that the sequences go deep.
fn command(rng: &mut Rng, ids: &[ItNexus], st: &PrState, me: &ItNexus) -> (Vec<u8>, Vec<u8>) {
    const KEYS: [u64; 4] = [0, 1, 2, 3];
    const TYPES: [u8; 7] = [1, 3, 5, 6, 7, 8, 2];
    // REGISTER, RESERVE, RELEASE, CLEAR, PREEMPT, PREEMPT AND ABORT,
    // REGISTER AND IGNORE EXISTING KEY, REGISTER AND MOVE.
    const ACTIONS: [u8; 20] = [0, 0, 0, 0, 1, 1, 1, 1, 2, 3, 4, 4, 5, 6, 6, 6, 7, 7, 7, 7];
    let sa = rng.pick(&ACTIONS);
    let own = st.registration(me).map(|g| g.key);
    let res_key = match own {
        Some(k) if rng.below(4) != 0 => k,
        _ => rng.pick(&KEYS),
    };
    let mut p = vec![0u8; 24];
    p[..8].copy_from_slice(&res_key.to_be_bytes());
    p[8..16].copy_from_slice(&rng.pick(&KEYS).to_be_bytes());
    if sa == service_action::REGISTER_AND_MOVE {
        p[17] = u8::from(rng.flag()) << 1 | u8::from(rng.flag());
        let port = rng.pick(&[1u16, 1, 2, 3]);
        p[18..20].copy_from_slice(&port.to_be_bytes());
        let dest = &ids[rng.below(ids.len() as u64) as usize];
        let tid = transport_id(dest);
        p[20..24].copy_from_slice(&(tid.len() as u32).to_be_bytes());
        p.extend_from_slice(&tid);
    } else {
        // ALL_TG_PT and APTPL.
        p[20] = u8::from(rng.flag()) << 2 | u8::from(rng.flag());
    }
    let len = (p.len() as u32).to_be_bytes();
    let ty = rng.pick(&TYPES);
    let cdb = vec![
        opcode::PERSISTENT_RESERVE_OUT,
        sa,
        ty,
        0,
        0,
        len[0],
        len[1],
        len[2],
        len[3],
        0,
    ];
    (cdb, p)
}

/// The sender of the next command: often the reservation's holder.
fn sender(rng: &mut Rng, ids: &[ItNexus], st: &PrState) -> usize {
    let holder = st
        .reservation
        .as_ref()
        .and_then(|r| ids.iter().position(|n| *n == r.holder));
    match holder {
        Some(i) if rng.flag() => i,
        _ => rng.below(ids.len() as u64) as usize,
    }
}

/// The state as the reader gives it back: APTPL set (it was saved).
fn round_trip(st: &PrState) -> Result<PrState, String> {
    PrState::decode(&st.encode())
}

#[test]
fn every_reachable_state_is_read_back_as_it_was() {
    let ids = identities();
    let mut moves = 0;
    for seed in 1..=300u64 {
        let store = Arc::new(Saved(Mutex::new(None)));
        let mut lu = LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(512 * 16))).unwrap();
        lu.set_pr_store(store.clone(), None);
        let lu = Arc::new(lu);
        let m = LunMap::new(vec![(0, lu.clone())]);
        for (i, n) in ids.iter().enumerate() {
            let nexus = NexusId(i as u64 + 1);
            m.attach_nexus(nexus, n, false);
            m.execute(Some(0), nexus, &[0; 6], &DataOutBuffer::new());
        }
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        for step in 0..100 {
            let before = lu.pr_state();
            let i = sender(&mut rng, &ids, &before);
            let (cdb, data) = command(&mut rng, &ids, &before, &ids[i]);
            let from = NexusId(i as u64 + 1);
            let r = m.execute(Some(0), from, &cdb, &DataOutBuffer::copy_from_slice(&data));
            if cdb[1] == service_action::REGISTER_AND_MOVE && r.status == Status::GOOD {
                moves += 1;
            }
            let st = lu.pr_state();
            let back = round_trip(&st)
                .unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}\nfrom {:?} cdb {cdb:02x?} data {data:02x?}\nbefore {before:#?}\nafter {st:#?}", ids[i]));
            let want = PrState { aptpl: true, ..st };
            assert_eq!(back, want, "seed {seed} step {step}");
            if let Some(text) = store.0.lock().unwrap().as_deref() {
                PrState::decode(text)
                    .unwrap_or_else(|e| panic!("seed {seed} step {step}: saved: {e}"));
            }
        }
    }
    assert!(
        moves > 20,
        "the sequences reach REGISTER AND MOVE ({moves})"
    );
}

/// REGISTER AND MOVE to the sender's own initiator port through a port
/// the LU does not have, with UNREG: refused, and the state it would have
/// left (the reservation's holder unregistered) is not reached.
#[test]
fn a_move_to_a_port_the_lu_lacks_is_refused() {
    let me = ItNexus::new("iqn.2026-11.test:a", [0x80, 0, 0, 0, 0, 1], 1);
    let store = Arc::new(Saved(Mutex::new(None)));
    let mut lu = LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(512 * 16))).unwrap();
    lu.set_pr_store(store, None);
    let lu = Arc::new(lu);
    let m = LunMap::new(vec![(0, lu.clone())]);
    let n = NexusId(1);
    m.attach_nexus(n, &me, false);
    m.execute(Some(0), n, &[0; 6], &DataOutBuffer::new());
    let prout = |sa: u8, ty: u8, p: &[u8]| {
        let len = (p.len() as u32).to_be_bytes();
        let cdb = [
            opcode::PERSISTENT_RESERVE_OUT,
            sa,
            ty,
            0,
            0,
            len[0],
            len[1],
            len[2],
            len[3],
            0,
        ];
        m.execute(Some(0), n, &cdb, &DataOutBuffer::copy_from_slice(p))
    };
    let mut reg = [0u8; 24];
    reg[15] = 1; // SERVICE ACTION RESERVATION KEY 1
    reg[20] = 0x05; // ALL_TG_PT, APTPL
    assert_eq!(prout(0x00, 0, &reg).status, Status::GOOD);
    let mut res = [0u8; 24];
    res[7] = 1;
    assert_eq!(
        prout(0x01, pr_type::WRITE_EXCLUSIVE, &res).status,
        Status::GOOD
    );
    for port in [2u16, 0, 0xffff] {
        let dest = ItNexus {
            relative_port: port,
            ..me.clone()
        };
        let tid = transport_id(&dest);
        let mut p = vec![0u8; 24];
        p[7] = 1;
        p[15] = 2;
        p[17] = 0x03; // UNREG, APTPL
        p[18..20].copy_from_slice(&port.to_be_bytes());
        p[20..24].copy_from_slice(&(tid.len() as u32).to_be_bytes());
        p.extend_from_slice(&tid);
        let r = prout(service_action::REGISTER_AND_MOVE, 0, &p);
        assert_eq!(r.status, Status::CHECK_CONDITION, "port {port}");
        assert_eq!((r.sense[2], r.sense[12]), (0x05, 0x26), "port {port}");
        // SENSE KEY SPECIFIC: the field pointer names byte 18.
        assert_eq!(r.sense[16..18], [0, 18], "port {port}");
    }
    assert!(round_trip(&lu.pr_state()).is_ok());
}

/// REGISTER with ALL_TG_PT from one port of an initiator port already
/// registered through another: the new registration takes the old one's
/// place (one registration per I_T nexus), the reservation stays with
/// its holder, and the saved state reads back.
#[test]
fn all_tg_pt_takes_the_place_of_the_ports_other_registrations() {
    let one = ItNexus::new("iqn.2026-11.test:a", [0x80, 0, 0, 0, 0, 1], 1);
    let two = ItNexus {
        relative_port: 2,
        ..one.clone()
    };
    let other = ItNexus::new("iqn.2026-11.test:b", [0x80, 0, 0, 0, 0, 1], 1);
    let store = Arc::new(Saved(Mutex::new(None)));
    let mut lu = LogicalUnit::new(cfg(512), Arc::new(RamBackend::new(512 * 16))).unwrap();
    lu.set_pr_store(store.clone(), None);
    let lu = Arc::new(lu);
    let m = LunMap::new(vec![(0, lu.clone())]);
    for (i, n) in [&one, &two, &other].into_iter().enumerate() {
        let nexus = NexusId(i as u64 + 1);
        m.attach_nexus(nexus, n, false);
        m.execute(Some(0), nexus, &[0; 6], &DataOutBuffer::new());
    }
    let prout = |n: u64, sa: u8, ty: u8, key: u64, sa_key: u64, flags: u8| {
        let mut p = [0u8; 24];
        p[..8].copy_from_slice(&key.to_be_bytes());
        p[8..16].copy_from_slice(&sa_key.to_be_bytes());
        p[20] = flags;
        let cdb = [opcode::PERSISTENT_RESERVE_OUT, sa, ty, 0, 0, 0, 0, 0, 24, 0];
        m.execute(
            Some(0),
            NexusId(n),
            &cdb,
            &DataOutBuffer::copy_from_slice(&p),
        )
        .status
    };
    assert_eq!(prout(3, 0x00, 0, 0, 9, 0), Status::GOOD);
    assert_eq!(prout(2, 0x00, 0, 0, 5, 0), Status::GOOD);
    assert_eq!(
        prout(2, 0x01, pr_type::WRITE_EXCLUSIVE, 5, 0, 0),
        Status::GOOD
    );
    // Port 1 of the same initiator port: ALL_TG_PT and APTPL.
    assert_eq!(prout(1, 0x00, 0, 0, 6, 0x05), Status::GOOD);
    let st = lu.pr_state();
    let mine: Vec<_> = st
        .registrations
        .iter()
        .filter(|g| g.nexus.initiator_port == one.initiator_port)
        .collect();
    assert_eq!(mine.len(), 1, "{st:#?}");
    assert!(mine[0].all_tg_pt && mine[0].key == 6);
    assert_eq!(st.reservation.as_ref().map(|r| &r.holder), Some(&two));
    let saved = store.0.lock().unwrap().clone().expect("saved (APTPL)");
    assert_eq!(PrState::decode(&saved), Ok(st));
    // The holder writes; the other registrant does not (WRITE EXCLUSIVE).
    let write = [0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0];
    let data = DataOutBuffer::copy_from_slice(&[0; 512]);
    assert_eq!(
        m.execute(Some(0), NexusId(2), &write, &data).status,
        Status::GOOD
    );
    assert_eq!(
        m.execute(Some(0), NexusId(3), &write, &data).status,
        Status::RESERVATION_CONFLICT
    );
}
