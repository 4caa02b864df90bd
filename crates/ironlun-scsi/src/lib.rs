//! # ironlun-scsi: a SCSI block device
//!
//! **Owns:** CDB decoding, the opcode table (handlers, CDB usage data,
//! unit-attention exemptions), sense data in fixed and descriptor format,
//! INQUIRY and VPD pages, mode pages, log pages, unit attentions per I_T
//! nexus, READ CAPACITY, READ/WRITE and their error mapping, thin
//! provisioning with its soft threshold, reservations (SPC-2 and
//! persistent, with the saved-state format and its strict reader) and
//! the copy manager for EXTENDED COPY between a target's LUs (SPC-4,
//! SBC-3); asymmetric logical unit access (ALUA, SPC-5 §5.16: target
//! port groups, their states and what each serves); SANITIZE (SBC-4) with its saved record; a LU held offline
//! (NOT READY) while its saved state cannot be read; commands stopped at their medium access for
//! a transport that runs the access itself ([`LogicalUnit::start`]); and
//! per-LU I/O counters and latency histograms ([`stats`]; the transport
//! measures the latency, [`LogicalUnit::record_latency`]).
//!
//! The codes themselves (opcodes, status, sense keys, ASC/ASCQ) are
//! named in ironlun-scsi-codes, which the initiator shares; this crate
//! gives them meaning.
//!
//! **Must not know:** iSCSI (PDUs, sessions, residual flags: it reports
//! the command's own transfer length and the transport computes residuals),
//! sockets, or how a backend stores blocks.
//!
//! Entry point: [`LunMap::execute`] for a target's LUNs, or
//! [`LogicalUnit::execute`] for one LU. Both are synchronous; a backend
//! that blocks is the caller's reason to run them on a blocking thread.

#![forbid(unsafe_code)]
// CDBs and parameter lists come from the network and sizes from the
// backend: every sum, difference and product says how it treats overflow
// (checked for LBAs, lengths and offsets, saturating for counters and
// bounded values, wrapping only where the comment proves it cannot wrap).
#![warn(clippy::arithmetic_side_effects)]
#![cfg_attr(
    test,
    allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::arithmetic_side_effects
    )
)]

pub mod alua;
mod block;
pub mod cdb;
mod copy;
mod durability;
mod failure;
pub mod forward;
mod gate;
pub mod geometry;
mod inquiry;
mod log_sense;
pub mod lu;
mod misc;
mod mode;
mod offline;
pub mod ops;
mod provisioning;
pub mod quiesce;
pub mod reservations;
mod sanitize;
pub mod saved;
pub mod sense;
mod shard;
mod stage;
pub mod stats;
#[cfg(test)]
mod test_util;

use std::sync::Arc;

use bytes::Bytes;
pub use ironlun_backend::Payload;
pub use ironlun_payload::DataOutBuffer;
use ironlun_scsi_codes::{opcode, Asc, Status};

pub use alua::{AccessState, AluaConfig, AluaEvent, AluaMode, AluaNotify, PortGroup};
pub use forward::{ForwardReply, Forwarder};
pub use lu::{LogicalUnit, LuConfig};
pub use offline::OnlineClaim;
pub use provisioning::{SoftThreshold, ThresholdEvent, ThresholdNotify};
pub use reservations::{ItNexus, NameRule, PrState};
pub use sanitize::{
    SanitizeRecord, SanitizeRestore, SanitizeStore, MAX_RECORD_BYTES as MAX_SANITIZE_RECORD_BYTES,
};
pub use sense::Sense;
pub use stage::{MediumIo, Start};
pub use stats::{Failure, IoKind, IoSnapshot, LatencySnapshot};

/// Identifies an I_T nexus (an initiator port talking to a target port,
/// SAM-5 §4.6): chosen by the transport, opaque here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NexusId(pub u64);

/// One command to run.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    pub nexus: NexusId,
    pub cdb: &'a [u8],
    /// Data the initiator sent (write commands), in the pieces it
    /// arrived in.
    pub data_out: &'a DataOutBuffer,
    /// The target's logical units: REPORT LUNS lists them, EXTENDED COPY
    /// copies between them.
    pub map: &'a LunMap,
}

impl<'a> Request<'a> {
    /// The parameter list of a command whose CDB gives its length: the
    /// first `len` bytes of Data-Out, or fewer if fewer arrived.
    pub fn parameter_list(&self, len: usize) -> &'a [u8] {
        let all = self.data();
        all.get(..len).unwrap_or(all)
    }

    /// All of Data-Out as one slice (joined once if it arrived in several
    /// pieces): for commands that parse or compare it. Writes take the
    /// pieces instead ([`DataOutBuffer::slices`]).
    pub fn data(&self) -> &'a [u8] {
        self.data_out.contiguous()
    }
}

/// What a command produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Response {
    pub status: Status,
    /// Sense data (CHECK CONDITION), empty otherwise.
    pub sense: Bytes,
    /// Data for the initiator: in memory, or (large reads from a file on
    /// a memory file system) a file range the transport sends unread.
    pub data: Payload,
    /// The command's own transfer length in bytes: data returned for reads
    /// and allocation-length commands, data expected for writes. The
    /// transport compares it with what the initiator expected.
    pub transfer_length: u32,
    /// Other I_T nexuses whose tasks on this LU the command aborted
    /// (PREEMPT AND ABORT, SPC-4 §5.13.12.2): the transport ends them.
    pub abort_nexuses: Vec<NexusId>,
    /// How the LU's counters counted the command ([`stats`]); `None` for a
    /// response no LU counted (no LU at that LUN, a command the
    /// transport ended): the transport's latency goes where the count
    /// went ([`LogicalUnit::record_latency`]).
    pub counted: Option<IoKind>,
}

impl Response {
    pub fn good() -> Response {
        Response::default()
    }

    /// Parameter data truncated to the allocation length (SPC-4 §4.2.5.6).
    pub fn data(mut data: Vec<u8>, alloc: u32) -> Response {
        data.truncate(alloc as usize);
        let transfer_length = data.len() as u32;
        Response {
            status: Status::GOOD,
            sense: Bytes::new(),
            data: Payload::from(data),
            transfer_length,
            abort_nexuses: Vec::new(),
            counted: None,
        }
    }

    /// Data read from the medium.
    pub fn read_data(data: Payload) -> Response {
        let transfer_length = data.len() as u32;
        Response {
            status: Status::GOOD,
            sense: Bytes::new(),
            data,
            transfer_length,
            abort_nexuses: Vec::new(),
            counted: None,
        }
    }

    /// A write that took `bytes` bytes.
    pub fn written(bytes: u32) -> Response {
        Response {
            transfer_length: bytes,
            ..Response::default()
        }
    }
}

/// A target's logical units by LUN number.
#[derive(Clone, Default)]
pub struct LunMap {
    luns: Vec<(u16, Arc<LogicalUnit>)>,
    numbers: Vec<u16>,
    /// Per entry: mapped read-only (writes through this map are refused,
    /// SBC-4 §4.11's write protection for this initiator alone).
    read_only: Vec<bool>,
}

impl LunMap {
    pub fn new(luns: Vec<(u16, Arc<LogicalUnit>)>) -> LunMap {
        LunMap::mapped(luns.into_iter().map(|(n, lu)| (n, lu, false)).collect())
    }

    /// One initiator's view: LUN number, logical unit, read-only.
    pub fn mapped(mut luns: Vec<(u16, Arc<LogicalUnit>, bool)>) -> LunMap {
        luns.sort_by_key(|(n, _, _)| *n);
        luns.dedup_by_key(|(n, _, _)| *n);
        let numbers = luns.iter().map(|(n, _, _)| *n).collect();
        let read_only = luns.iter().map(|(_, _, ro)| *ro).collect();
        let luns = luns.into_iter().map(|(n, lu, _)| (n, lu)).collect();
        LunMap {
            luns,
            numbers,
            read_only,
        }
    }

    /// Entries with their read-only flag.
    fn entries(&self) -> impl Iterator<Item = (u16, &Arc<LogicalUnit>, bool)> {
        self.luns
            .iter()
            .zip(&self.read_only)
            .map(|((n, lu), ro)| (*n, lu, *ro))
    }

    /// Whether `lu` is in this map (as the same logical unit), and how.
    fn find_lu(&self, lu: &Arc<LogicalUnit>) -> Option<(u16, bool)> {
        self.entries()
            .find(|(_, l, _)| Arc::ptr_eq(l, lu))
            .map(|(n, _, ro)| (n, ro))
    }

    /// A session's view changes from `self` to `new` (LUNs added,
    /// removed or remapped while it runs): `nexus` is attached to the LUs
    /// it gains, detached from those it loses, and, when what REPORT LUNS
    /// returns changed, told REPORTED LUNS DATA HAS CHANGED on every LU it
    /// keeps (SPC-5 §5.14, the unit attention conditions list). Whether
    /// the inventory changed.
    pub fn change_to(&self, new: &LunMap, nexus: NexusId, identity: &ItNexus) -> bool {
        let inventory_changed = self.numbers != new.numbers
            || self
                .luns
                .iter()
                .zip(&new.luns)
                .any(|((_, a), (_, b))| !Arc::ptr_eq(a, b));
        for (_, lu, ro) in new.entries() {
            let first = self.find_lu(lu);
            lu.attach_nexus_as(nexus, identity.clone(), None, ro);
            if inventory_changed && first.is_some() {
                lu.establish_ua_for(&[nexus], Asc::REPORTED_LUNS_DATA_HAS_CHANGED);
            }
        }
        for (_, lu, _) in self.entries() {
            if new.find_lu(lu).is_none() {
                lu.detach_nexus(nexus);
            }
        }
        inventory_changed
    }

    pub fn get(&self, lun: u16) -> Option<&Arc<LogicalUnit>> {
        self.luns
            .binary_search_by_key(&lun, |(n, _)| *n)
            .ok()
            .and_then(|i| self.luns.get(i))
            .map(|(_, lu)| lu)
    }

    pub fn iter(&self) -> impl Iterator<Item = &(u16, Arc<LogicalUnit>)> {
        self.luns.iter()
    }

    pub fn numbers(&self) -> &[u16] {
        &self.numbers
    }

    /// Runs a command addressed to `lun` (`None`: a LUN address this
    /// target does not use). Commands to a LUN without a logical unit get
    /// the answers SPC-4 prescribes for that case.
    pub fn execute(
        &self,
        lun: Option<u16>,
        nexus: NexusId,
        cdb: &[u8],
        data_out: &DataOutBuffer,
    ) -> Response {
        let req = Request {
            nexus,
            cdb,
            data_out,
            map: self,
        };
        if let Some(lu) = lun.and_then(|n| self.get(n)) {
            return lu.execute(&req);
        }
        self.execute_without_lu(&req)
    }

    /// SPC-4 §6.6.2, §6.29, §6.33: INQUIRY answers with peripheral
    /// qualifier 011b, REQUEST SENSE reports LOGICAL UNIT NOT SUPPORTED as
    /// data, REPORT LUNS works, anything else is CHECK CONDITION.
    fn execute_without_lu(&self, req: &Request<'_>) -> Response {
        let c = cdb::Cdb(req.cdb);
        let fixed = |s: Sense| Response {
            status: Status::CHECK_CONDITION,
            sense: s.encode(false),
            data: Payload::default(),
            transfer_length: 0,
            abort_nexuses: Vec::new(),
            counted: None,
        };
        match c.opcode() {
            opcode::INQUIRY if !c.bit(1, 0) => {
                Response::data(inquiry::standard_no_lu(), u32::from(c.be16(3)))
            }
            opcode::REQUEST_SENSE => Response::data(
                Sense::lu_not_supported().encode(c.bit(1, 0)).to_vec(),
                u32::from(c.u8(4)),
            ),
            opcode::REPORT_LUNS => match misc::report_luns_for(&self.numbers, &c) {
                Ok(r) => r,
                Err(s) => fixed(s),
            },
            _ => fixed(Sense::lu_not_supported()),
        }
    }

    /// CHECK CONDITION with `sense`, in the sense format of the addressed
    /// LU (fixed format when there is none). For errors found outside the
    /// device, such as a broken data transfer.
    pub fn check_condition(&self, lun: Option<u16>, sense: Sense) -> Response {
        match lun.and_then(|n| self.get(n)) {
            Some(lu) => lu.check_condition(sense, 0),
            None => Response {
                status: Status::CHECK_CONDITION,
                sense: sense.encode(false),
                data: Payload::default(),
                transfer_length: 0,
                abort_nexuses: Vec::new(),
                counted: None,
            },
        }
    }

    /// Registers a new I_T nexus with every LU (unit attention on first
    /// use, SAM-5 §6.3.1).
    pub fn attach_nexus(&self, nexus: NexusId, identity: &ItNexus, replaced: bool) {
        let cond = if replaced {
            Asc::I_T_NEXUS_LOSS_OCCURRED
        } else {
            Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET
        };
        for (_, lu, ro) in self.entries() {
            lu.attach_nexus_as(nexus, identity.clone(), Some(cond), ro);
        }
    }

    pub fn detach_nexus(&self, nexus: NexusId) {
        drop(self.end_nexus(nexus));
    }

    /// [`LunMap::detach_nexus`], and the SPC-2 reservations it held on
    /// LUs whose reservations are shared, which are cleared in their
    /// stores on threads of their own: a caller that answers for the
    /// nexus's end (a logout) waits for them off its network thread
    /// (SPC-2 §5.5.1; RFC 7143 §11.14: the Logout Response says the
    /// cleanup is done).
    pub fn end_nexus(&self, nexus: NexusId) -> reservations::shared::Releases {
        let threads = self.luns.iter().filter_map(|(_, lu)| lu.detach(nexus));
        reservations::shared::Releases(threads.collect())
    }

    /// LOGICAL UNIT RESET of one LU (SAM-5 §6.3.3); whether it exists.
    pub fn reset_lu(&self, lun: u16) -> bool {
        self.get(lun).map(|lu| lu.reset()).is_some()
    }

    /// LOGICAL UNIT RESET of one LU that `nexus` asked for: as
    /// [`LunMap::reset_lu`], and sent on to the other gateways of a group
    /// unless `nexus` is one of theirs ([`crate::forward`]).
    pub fn reset_lu_from(&self, lun: u16, nexus: NexusId) -> bool {
        self.get(lun).map(|lu| lu.reset_from(nexus)).is_some()
    }

    /// TARGET WARM or COLD RESET: every LU is reset (SAM-5 §6.3.2,
    /// RFC 7143 §11.5.1).
    pub fn reset_all(&self) {
        for (_, lu) in &self.luns {
            lu.reset();
        }
    }

    /// I_T NEXUS RESET (SAM-5 §7.7) on every LU: `nexus` loses its SPC-2
    /// reservations and is told I_T NEXUS LOSS OCCURRED.
    pub fn nexus_reset(&self, nexus: NexusId) {
        for (_, lu) in &self.luns {
            lu.nexus_reset(nexus);
        }
    }

    /// Task management is aborting tasks of `nexus` (of every nexus with
    /// `None`) on `lun` (every LU with `None`): a SANITIZE command among
    /// them that waits for its operation stops waiting, and the operation
    /// goes on (SBC-4 §4.11.2), so the abort completes now.
    pub fn tasks_aborted(&self, lun: Option<u16>, nexus: Option<NexusId>) {
        for (n, lu) in &self.luns {
            if lun.is_none_or(|l| l == *n) {
                lu.sanitize.release(nexus);
            }
        }
    }

    /// Another initiator's CLEAR TASK SET ended `nexus`'s commands on
    /// `lun`: with TAS=0 it is told COMMANDS CLEARED BY ANOTHER INITIATOR
    /// (SPC-4 §7.5.8).
    pub fn commands_cleared(&self, lun: u16, nexus: NexusId) {
        if let Some(lu) = self.get(lun) {
            lu.commands_cleared(nexus);
        }
    }
}
