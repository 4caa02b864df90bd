//! Forwarding of media writes from an active/non-optimized port to the
//! LU's owner (docs/ha.md, "Forwarding"): a gateway of a group that does
//! not hold the image's lock cannot write it, but SPC-5 §5.16.2.4.3 says
//! an active/non-optimized port serves every command; so it hands the
//! write to the gateway that owns the LU and answers with what came back.
//!
//! **Owns:** which commands are forwarded ([`forwarded_opcode`]), when
//! ([`forwards`]: at an active/non-optimized port, from a nexus that is not
//! a peer gateway's, so nothing is forwarded twice), and how the owner's
//! answer becomes this port's ([`ForwardReply::into_response`]).
//!
//! **Must not know:** how the owner is reached or found (the target's
//! [`Forwarder`], set on the LUs of a gateway group).

use bytes::Bytes;
use ironlun_backend::Payload;
use ironlun_scsi_codes::opcode::{
    COMPARE_AND_WRITE, ORWRITE_16, UNMAP, WRITE_10, WRITE_12, WRITE_16, WRITE_6,
    WRITE_AND_VERIFY_10, WRITE_AND_VERIFY_12, WRITE_AND_VERIFY_16, WRITE_ATOMIC_16, WRITE_SAME_10,
    WRITE_SAME_16,
};
use ironlun_scsi_codes::{Asc, SenseKey, Status};

use crate::alua::AccessState;
use crate::sense::Sense;
use crate::{DataOutBuffer, Response};

/// What the owner answered a forwarded command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardReply {
    pub status: Status,
    /// Sense data as the owner encoded it.
    pub sense: Bytes,
    /// The command's own transfer length as the owner counted it (the
    /// transport works out this port's residual from it).
    pub transfer_length: u32,
}

impl ForwardReply {
    /// The response this port gives.
    pub fn into_response(self) -> Response {
        Response {
            status: self.status,
            sense: self.sense,
            data: Payload::default(),
            transfer_length: self.transfer_length,
            abort_nexuses: Vec::new(),
            counted: None,
        }
    }
}

/// How a LU of a gateway group reaches its owner; set by the target
/// ([`crate::LogicalUnit::set_forwarder`]).
pub trait Forwarder: Send + Sync {
    /// Whether `initiator_port` (`<name>,i,0x<ISID>`) is another
    /// gateway's peer session: its commands were checked by that gateway
    /// (unit attentions, reservations) and are never forwarded again.
    fn is_peer(&self, initiator_port: &str) -> bool;

    /// Runs `cdb` with `data_out` on the owner of the LU and returns its
    /// answer; blocks until then. `None`: no owner is known or it could
    /// not be reached.
    fn forward(&self, cdb: &[u8], data_out: &DataOutBuffer) -> Option<ForwardReply>;

    /// A LOGICAL UNIT RESET from an initiator was done here: the other
    /// gateways do it too, so that every nexus of the LU gets the reset's
    /// unit attention and loses its SPC-2 reservation (SAM-5 §6.3.3).
    /// Waits a bounded time for them.
    fn reset(&self) {}
}

/// The media writes a non-owner forwards (SBC-4 §5): those the store
/// refuses at a gateway that does not hold the image's lock.
pub fn forwarded_opcode(opcode: u8) -> bool {
    matches!(
        opcode,
        WRITE_6
            | WRITE_10
            | WRITE_12
            | WRITE_16
            | WRITE_AND_VERIFY_10
            | WRITE_AND_VERIFY_12
            | WRITE_AND_VERIFY_16
            | WRITE_SAME_10
            | WRITE_SAME_16
            | UNMAP
            | COMPARE_AND_WRITE
            | ORWRITE_16
            | WRITE_ATOMIC_16
    )
}

/// Whether a command with `opcode` is forwarded, from a nexus that is
/// (`peer`) or is not a peer gateway's, at a port in `state`.
pub fn forwards(state: AccessState, peer: bool, opcode: u8) -> bool {
    state == AccessState::ActiveNonOptimized && !peer && forwarded_opcode(opcode)
}

/// The owner could not be asked (none known, or its session failed):
/// NOT READY, LOGICAL UNIT NOT ACCESSIBLE, ASYMMETRIC ACCESS STATE
/// TRANSITION (SPC-5 §5.16.2.6): initiators retry it.
pub fn owner_unreachable() -> Sense {
    Sense::new(
        SenseKey::NOT_READY,
        Asc::LU_NOT_ACCESSIBLE_ASYMMETRIC_ACCESS_STATE_TRANSITION,
    )
}

/// Data-Out as one buffer to send on: the segment itself when it came in
/// one, else a copy.
pub fn data_bytes(data_out: &DataOutBuffer) -> Bytes {
    match data_out.segments() {
        [one] => one.clone(),
        _ => Bytes::copy_from_slice(data_out.contiguous()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    use ironlun_backend::testing::FaultyBackend;
    use ironlun_backend::RamBackend;
    use ironlun_scsi_codes::opcode::{
        self, PERSISTENT_RESERVE_OUT, READ_10, READ_16, SYNCHRONIZE_CACHE_10, TEST_UNIT_READY,
    };

    use crate::alua::{AluaConfig, AluaMode, PortGroup};
    use crate::test_util::{cfg, id, read10, sense_of, write10};
    use crate::{LogicalUnit, LuConfig, LunMap, NexusId};

    #[test]
    fn media_writes_are_forwarded_only_from_a_client_at_a_non_optimized_port() {
        let writes = [
            WRITE_6,
            WRITE_10,
            WRITE_12,
            WRITE_16,
            WRITE_AND_VERIFY_10,
            WRITE_AND_VERIFY_12,
            WRITE_AND_VERIFY_16,
            WRITE_SAME_10,
            WRITE_SAME_16,
            UNMAP,
            COMPARE_AND_WRITE,
            ORWRITE_16,
            WRITE_ATOMIC_16,
        ];
        let others = [
            READ_10,
            READ_16,
            SYNCHRONIZE_CACHE_10,
            TEST_UNIT_READY,
            PERSISTENT_RESERVE_OUT,
        ];
        use AccessState::*;
        for op in writes {
            assert!(forwards(ActiveNonOptimized, false, op), "{op:#04x}");
            assert!(!forwards(ActiveNonOptimized, true, op), "peer {op:#04x}");
            for s in [ActiveOptimized, Standby, Unavailable, Transitioning] {
                assert!(!forwards(s, false, op), "{s:?} {op:#04x}");
            }
        }
        for op in others {
            assert!(!forwards(ActiveNonOptimized, false, op), "{op:#04x}");
        }
    }

    #[test]
    fn the_owners_answer_is_this_ports() {
        let sense = Bytes::from_static(&[0x70, 0, 0x06, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x29, 0]);
        let r = ForwardReply {
            status: Status::CHECK_CONDITION,
            sense: sense.clone(),
            transfer_length: 4096,
        }
        .into_response();
        assert_eq!(r.status, Status::CHECK_CONDITION);
        assert_eq!(r.sense, sense);
        assert_eq!(r.transfer_length, 4096);
        assert!(r.data.is_empty());
        let s = owner_unreachable();
        assert_eq!(s.code.key, SenseKey::NOT_READY);
        assert_eq!((s.code.asc, s.code.ascq), (0x04, 0x0a));
    }

    /// A forwarder that answers GOOD for the owner and records what it
    /// was handed; peers are the names with `.gateway.` in them.
    #[derive(Default)]
    struct Owner {
        got: Mutex<Vec<(Vec<u8>, Vec<u8>)>>,
        down: std::sync::atomic::AtomicBool,
        resets: std::sync::atomic::AtomicUsize,
    }

    impl Forwarder for Owner {
        fn is_peer(&self, initiator_port: &str) -> bool {
            initiator_port.contains(".gateway.")
        }
        fn forward(&self, cdb: &[u8], data_out: &DataOutBuffer) -> Option<ForwardReply> {
            if self.down.load(std::sync::atomic::Ordering::Relaxed) {
                return None;
            }
            let data = data_bytes(data_out).to_vec();
            self.got.lock().unwrap().push((cdb.to_vec(), data));
            Some(ForwardReply {
                status: Status::GOOD,
                sense: Bytes::new(),
                transfer_length: 512,
            })
        }
        fn reset(&self) {
            self.resets
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    const CLIENT: NexusId = NexusId(1);
    const PEER: NexusId = NexusId(2);
    const OTHER: NexusId = NexusId(3);

    /// A LU at an active/non-optimized port with a forwarder; CLIENT and
    /// OTHER are initiators, PEER another gateway's session; the
    /// initiators' power-on unit attentions are left pending.
    fn grouped() -> (LunMap, Arc<LogicalUnit>, Arc<Owner>) {
        let group = |id: u16, state| PortGroup {
            id,
            ports: vec![id],
            state,
            preferred: false,
        };
        let alua = AluaConfig {
            mode: AluaMode::Implicit,
            local_group: 1,
            transition_time: 0,
            groups: vec![
                group(1, AccessState::ActiveNonOptimized),
                group(2, AccessState::ActiveOptimized),
            ],
        };
        let c = LuConfig { alua, ..cfg(512) };
        let store = Arc::new(FaultyBackend::blocking(RamBackend::new(1 << 20)));
        let mut lu = LogicalUnit::new(c.clone(), store).unwrap();
        let owner = Arc::new(Owner::default());
        lu.set_forwarder(owner.clone()).unwrap();
        // Forwarded writes wait: a store that never blocks (its commands
        // run on the network thread) takes no forwarder.
        let mut ram = LogicalUnit::new(c, Arc::new(RamBackend::new(1 << 20))).unwrap();
        assert!(ram.set_forwarder(owner.clone()).is_err());
        let lu = Arc::new(lu);
        let m = LunMap::new(vec![(0, lu.clone())]);
        m.attach_nexus(CLIENT, &id("init"), false);
        m.attach_nexus(PEER, &id("t.gateway.gw2"), false);
        m.attach_nexus(OTHER, &id("other"), false);
        (m, lu, owner)
    }

    fn on(m: &LunMap, nexus: NexusId, cdb: &[u8], data: &[u8]) -> Response {
        m.execute(Some(0), nexus, cdb, &DataOutBuffer::copy_from_slice(data))
    }

    #[test]
    fn a_clients_write_goes_to_the_owner_a_peers_stays() {
        let (m, lu, owner) = grouped();
        while lu.take_ua(CLIENT).is_some() {}
        let block = [0x5a; 512];
        let r = on(&m, CLIENT, &write10(0, 1, 0), &block);
        assert_eq!((r.status, r.transfer_length), (Status::GOOD, 512));
        let got = owner.got.lock().unwrap().clone();
        assert_eq!(got, vec![(write10(0, 1, 0).to_vec(), block.to_vec())]);
        // Not written here: the owner writes.
        let r = on(&m, CLIENT, &read10(0, 1), &[]);
        assert_eq!(r.status, Status::GOOD);
        assert_eq!(r.data.to_bytes().unwrap()[..], [0; 512]);
        // The peer's write is not forwarded again: it runs here (a RAM
        // store takes it; librbd at a non-owner refuses it).
        let r = on(&m, PEER, &write10(1, 1, 0), &block);
        assert_eq!(r.status, Status::GOOD);
        assert_eq!(owner.got.lock().unwrap().len(), 1);
        // At the owner's own state nothing is forwarded.
        lu.set_alua_state(1, AccessState::ActiveOptimized).unwrap();
        while lu.take_ua(CLIENT).is_some() {}
        let r = on(&m, CLIENT, &write10(2, 1, 0), &block);
        assert_eq!(r.status, Status::GOOD);
        assert_eq!(owner.got.lock().unwrap().len(), 1);
    }

    #[test]
    fn an_unreachable_owner_is_a_transition_the_initiator_retries() {
        let (m, lu, owner) = grouped();
        while lu.take_ua(CLIENT).is_some() {}
        owner.down.store(true, std::sync::atomic::Ordering::Relaxed);
        let r = on(&m, CLIENT, &write10(0, 1, 0), &[0; 512]);
        assert_eq!(sense_of(&r), (SenseKey::NOT_READY, 0x04, 0x0a));
    }

    /// PERSISTENT RESERVE OUT `sa` (type `kind`) with key `key` and
    /// service action key `sa_key`.
    fn prout(m: &LunMap, n: NexusId, sa: u8, kind: u8, key: u64, sa_key: u64) -> Response {
        let mut p = [0u8; 24];
        p[..8].copy_from_slice(&key.to_be_bytes());
        p[8..16].copy_from_slice(&sa_key.to_be_bytes());
        let cdb = [PERSISTENT_RESERVE_OUT, sa, kind, 0, 0, 0, 0, 0, 24, 0];
        on(m, n, &cdb, &p)
    }

    #[test]
    fn a_peer_sees_no_unit_attention_and_no_persistent_reservation_conflict() {
        let (m, lu, owner) = grouped();
        // The initiator's power-on unit attention comes before anything
        // is forwarded; the peer has none.
        let r = on(&m, CLIENT, &write10(0, 1, 0), &[0; 512]);
        assert_eq!(sense_of(&r).0, SenseKey::UNIT_ATTENTION);
        assert!(owner.got.lock().unwrap().is_empty());
        let r = on(&m, PEER, &read10(0, 1), &[]);
        assert_eq!(r.status, Status::GOOD);
        while lu.take_ua(OTHER).is_some() {}
        while lu.take_ua(CLIENT).is_some() {}
        // OTHER registers and reserves Write Exclusive: the unregistered
        // CLIENT's write conflicts here, before it is forwarded; the
        // peer's (checked by the gateway that forwarded it) does not.
        assert_eq!(prout(&m, OTHER, 0x00, 0, 0, 7).status, Status::GOOD);
        assert_eq!(prout(&m, OTHER, 0x01, 0x01, 7, 0).status, Status::GOOD);
        let r = on(&m, CLIENT, &write10(0, 1, 0), &[0; 512]);
        assert_eq!(r.status, Status::RESERVATION_CONFLICT);
        assert!(owner.got.lock().unwrap().is_empty());
        let r = on(&m, PEER, &write10(0, 1, 0), &[0; 512]);
        assert_eq!(r.status, Status::GOOD);
    }

    #[test]
    fn an_spc2_reservation_here_stops_a_peers_command_too() {
        let (m, lu, _) = grouped();
        while lu.take_ua(CLIENT).is_some() {}
        let r = on(&m, CLIENT, &[opcode::RESERVE_6, 0, 0, 0, 0, 0], &[]);
        assert_eq!(r.status, Status::GOOD);
        let r = on(&m, PEER, &write10(0, 1, 0), &[0; 512]);
        assert_eq!(r.status, Status::RESERVATION_CONFLICT);
    }

    #[test]
    fn an_initiators_lu_reset_goes_to_the_other_gateways_a_peers_does_not() {
        let (m, lu, owner) = grouped();
        let resets = || owner.resets.load(std::sync::atomic::Ordering::Relaxed);
        for n in [CLIENT, OTHER] {
            while lu.take_ua(n).is_some() {}
        }
        assert!(m.reset_lu_from(0, CLIENT));
        assert_eq!(resets(), 1);
        // Done here too: every initiator's nexus has the reset's unit
        // attention.
        for n in [CLIENT, OTHER] {
            let s = lu.take_ua(n).unwrap();
            assert_eq!(
                (s.code.key, s.code.asc, s.code.ascq),
                (SenseKey::UNIT_ATTENTION, 0x29, 0x03)
            );
        }
        // A reset another gateway sent on is done here and goes no further.
        assert!(m.reset_lu_from(0, PEER));
        assert_eq!(resets(), 1);
        assert!(lu.take_ua(OTHER).is_some());
    }

    #[test]
    fn data_goes_on_whole() {
        let one = DataOutBuffer::copy_from_slice(b"abcd");
        assert_eq!(&data_bytes(&one)[..], b"abcd");
        let two =
            DataOutBuffer::from_segments([Bytes::from_static(b"ab"), Bytes::from_static(b"cd")]);
        assert_eq!(&data_bytes(&two)[..], b"abcd");
        assert!(data_bytes(&DataOutBuffer::new()).is_empty());
    }
}
