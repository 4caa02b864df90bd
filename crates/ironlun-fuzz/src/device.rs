//! The SCSI device: CDB decoding and every command's handler, on RAM
//! logical units (`ironlun-scsi`).
//!
//! Input: one byte of settings (thin provisioning, write protection,
//! SANITIZE, ALUA), then records (see [`crate::input`]). A record's tag picks the
//! LUN (0, 1, or one without a logical unit) and the I_T nexus (two
//! initiators share the LUs, so reservations and unit attentions between
//! them are reachable); its payload is a CDB length byte, the CDB, and the
//! Data-Out bytes. Tags from 0xe0 up are events instead: LU reset, I_T
//! nexus reset, nexus loss and return.
//!
//! Checked beyond "does not panic": every response is a SAM-5 status;
//! CHECK CONDITION carries well-formed sense (fixed or descriptor format,
//! a sense key other than NO SENSE) and no other status carries sense; no
//! command returns more data than its own transfer length, nor more than
//! the LU holds.

use std::sync::Arc;

use bytes::Bytes;
use ironlun_backend::RamBackend;
use ironlun_scsi::{
    AccessState, AluaConfig, AluaMode, DataOutBuffer, ItNexus, LogicalUnit, LuConfig, LunMap,
    NexusId, PortGroup, Response,
};
use ironlun_scsi_codes::{SenseCode, SenseData, SenseKey, Status};

use crate::input::Records;

/// What one input exercised.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CdbRun {
    pub commands: usize,
    pub good: usize,
    pub check_condition: usize,
    pub data_in_bytes: u64,
}

/// The two initiators.
pub(crate) const NEXUSES: [NexusId; 2] = [NexusId(1), NexusId(2)];
/// Bytes per LU: 2048 blocks of 512, 256 blocks of 4096.
pub(crate) const LU_BYTES: u64 = 1 << 20;
/// The LUN numbers the harnesses address; the third has no LU.
pub(crate) const LUNS: [u16; 3] = [0, 1, 5];

/// Two target port groups, the local one (port 1) active/optimized and
/// another on standby, with explicit and implicit ALUA: SET TARGET PORT
/// GROUPS in the input moves them, and the states' refusals follow.
fn alua() -> AluaConfig {
    let group = |id: u16, state| PortGroup {
        id,
        ports: vec![id],
        state,
        preferred: false,
    };
    AluaConfig {
        mode: AluaMode::Both,
        local_group: 1,
        transition_time: 0,
        groups: vec![
            group(1, AccessState::ActiveOptimized),
            group(2, AccessState::Standby),
        ],
    }
}

fn lu_config(block_size: u32, thin: bool, read_only: bool, settings: u8) -> LuConfig {
    LuConfig {
        block_size,
        physical_block_size: None,
        read_only,
        product: "fuzz".into(),
        revision: "0.1".into(),
        serial: format!("fuzz{block_size}"),
        naa_id: 0x0f0f_0000 + u64::from(block_size),
        target_name: "iqn.2026-11.test:fuzz".into(),
        portal_group_tag: 1,
        relative_port: 1,
        alua: if settings & 8 != 0 {
            alua()
        } else {
            AluaConfig::default()
        },
        max_transfer_bytes: 1 << 20,
        thin,
        sanitize: settings & 4 != 0,
        rotation: None,
    }
}

/// LUN 0: 512-byte blocks; LUN 1: 4096-byte blocks. `settings` bits:
/// 1 = LUN 0 thin, 2 = LUN 1 write-protected, 4 = SANITIZE offered,
/// 8 = ALUA ([`alua`]).
pub(crate) fn lun_map(settings: u8) -> LunMap {
    let make = |bs: u32, thin: bool, ro: bool| -> Option<Arc<LogicalUnit>> {
        let cfg = lu_config(bs, thin, ro, settings);
        LogicalUnit::new(cfg, Arc::new(RamBackend::new(LU_BYTES)))
            .ok()
            .map(Arc::new)
    };
    let luns = [
        (0, make(512, settings & 1 != 0, false)),
        (1, make(4096, false, settings & 2 != 0)),
    ];
    let map = LunMap::new(
        luns.into_iter()
            .filter_map(|(n, lu)| Some((n, lu?)))
            .collect(),
    );
    assert_eq!(map.numbers(), &[0, 1], "the fuzz LUs could not be built");
    map
}

pub(crate) fn identity(nexus: NexusId) -> ItNexus {
    ItNexus::new(
        &format!("iqn.2026-11.test:initiator{}", nexus.0),
        [0x80, 0, 0, 0, 0, nexus.0 as u8],
        1,
    )
}

pub fn cdb(data: &[u8]) -> CdbRun {
    let (settings, rest) = data.split_first().unwrap_or((&0, &[]));
    let map = lun_map(*settings);
    for n in NEXUSES {
        map.attach_nexus(n, &identity(n), false);
    }
    let mut run = CdbRun::default();
    for (tag, payload) in Records::new(rest) {
        let lun = LUNS.get(usize::from(tag & 3) % LUNS.len()).copied();
        let nexus = NexusId(u64::from((tag >> 2) & 1) + 1);
        match tag {
            0xe0..=0xe7 => {
                if let Some(lu) = lun.and_then(|n| map.get(n)) {
                    lu.reset();
                }
            }
            0xe8..=0xef => {
                if let Some(lu) = lun.and_then(|n| map.get(n)) {
                    lu.nexus_reset(nexus);
                }
            }
            0xf0..=0xff => {
                map.detach_nexus(nexus);
                map.attach_nexus(nexus, &identity(nexus), true);
            }
            _ => {
                let (len, rest) = payload.split_first().unwrap_or((&0, &[]));
                let (cdb, data_out) = rest.split_at(usize::from(*len).min(rest.len()));
                // Data-Out in the pieces PDUs would carry, cut where the
                // tag says, so writes also take the vectored path.
                let cut = usize::from(tag).min(data_out.len());
                let (a, b) = data_out.split_at(cut);
                let data_out = DataOutBuffer::from_segments([
                    Bytes::copy_from_slice(a),
                    Bytes::copy_from_slice(b),
                ]);
                let r = map.execute(lun, nexus, cdb, &data_out);
                check_response(&r);
                run.commands += 1;
                run.data_in_bytes += r.data.len() as u64;
                match r.status {
                    Status::GOOD => run.good += 1,
                    Status::CHECK_CONDITION => run.check_condition += 1,
                    _ => {}
                }
            }
        }
    }
    run
}

pub(crate) fn check_response(r: &Response) {
    let known = [
        Status::GOOD,
        // PRE-FETCH when the range fits the cache.
        Status::CONDITION_MET,
        Status::CHECK_CONDITION,
        Status::BUSY,
        Status::RESERVATION_CONFLICT,
        Status::TASK_SET_FULL,
        Status::TASK_ABORTED,
    ];
    assert!(known.contains(&r.status), "status {:?}", r.status);
    if r.status == Status::CHECK_CONDITION {
        // Fixed or descriptor format (SPC-4 §4.5).
        let format = r.sense.first().map(|b| b & 0x7f);
        assert!(
            format.is_some_and(SenseData::is_response_code),
            "sense response code {format:?}"
        );
        match SenseCode::parse(&r.sense) {
            Some(c) => assert_ne!(c.key, SenseKey::NO_SENSE, "CHECK CONDITION with NO SENSE"),
            None => panic!("sense data too short: {:?}", r.sense),
        }
    } else {
        assert!(r.sense.is_empty(), "status {:?} with sense", r.status);
    }
    assert!(
        r.data.len() as u64 <= u64::from(r.transfer_length),
        "{} bytes of data for a transfer length of {}",
        r.data.len(),
        r.transfer_length
    );
    assert!(
        r.data.len() as u64 <= LU_BYTES,
        "more data than the LU holds"
    );
}
