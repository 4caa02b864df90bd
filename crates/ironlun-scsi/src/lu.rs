//! A logical unit: identity, capacity, mode state, unit attentions per
//! I_T nexus, and the entry point that runs one command through the opcode
//! table.

use std::collections::{HashMap, VecDeque};
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ironlun_backend::Payload;
use ironlun_backend::{Backend, Rotation};

use crate::alua::state::AluaState;
use crate::alua::AluaConfig;
use crate::cdb::Cdb;
use crate::copy::HeldCopies;
use crate::durability::{Durability, Durable};
use crate::forward::{self, Forwarder};
use crate::gate::{AccessGate, ExclusiveGuard, HasGate, SharedGuard, WriteGuard};
use crate::offline::Offline;
use crate::ops::{self, OpInfo};
use crate::provisioning::threshold::ThresholdState;
use crate::reservations::shared::Release;
use crate::reservations::{
    self, Access, ItNexus, NameRule, PrState, PrStore, ReservationState, SharedPr,
};
use crate::sanitize::SanitizeState;
use crate::sense::Sense;
use crate::stats::{Failure, IoKind, IoSnapshot, IoStats, LatencySnapshot};
use crate::{NexusId, Request, Response};
use ironlun_scsi_codes::{Asc, SenseKey, Status};

/// Largest number of unit attention conditions queued per nexus; older
/// ones are dropped first (SPC-4 §5.14: a device may lose UAs it cannot
/// hold, reporting the most recent).
const MAX_UA_PER_NEXUS: usize = 8;

/// How a logical unit presents itself.
#[derive(Clone, Debug)]
pub struct LuConfig {
    /// Logical block size: 512 or 4096 bytes.
    pub block_size: u32,
    /// Physical block size reported by READ CAPACITY(16) (LOGICAL BLOCKS
    /// PER PHYSICAL BLOCK EXPONENT) and the Block Limits page, as
    /// configured (`pbs=`); `None`: what the backend reports of its store
    /// ([`crate::geometry::physical_block`]).
    pub physical_block_size: Option<u32>,
    pub read_only: bool,
    /// PRODUCT IDENTIFICATION (16 ASCII bytes, padded).
    pub product: String,
    /// PRODUCT REVISION LEVEL (4 ASCII bytes).
    pub revision: String,
    /// Unit serial number (VPD page 0x80).
    pub serial: String,
    /// 60 bits for the locally assigned NAA designator (VPD page 0x83).
    pub naa_id: u64,
    /// Name of the target this LU belongs to (target port designator).
    pub target_name: String,
    /// The target portal group tag of the port it is reached through
    /// (the target port's name, `<iqn>,t,0x<tag>`, RFC 7143 §4.4).
    pub portal_group_tag: u16,
    /// RELATIVE TARGET PORT IDENTIFIER of the port it is reached through.
    pub relative_port: u16,
    /// Target port groups and their states (SPC-5 §5.16); off by
    /// default.
    pub alua: AluaConfig,
    /// MAXIMUM TRANSFER LENGTH in bytes (VPD page 0xB0).
    pub max_transfer_bytes: u32,
    /// Thin provisioning: UNMAP, WRITE SAME with UNMAP and GET LBA STATUS,
    /// LBPME/LBPRZ set (SBC-3 §4.7).
    pub thin: bool,
    /// SANITIZE is offered (SBC-4 §4.11): OVERWRITE and EXIT FAILURE MODE,
    /// and BLOCK ERASE when thin.
    pub sanitize: bool,
    /// MEDIUM ROTATION RATE to report instead of what the backend says
    /// (VPD page B1h, SBC-4 §6.6.2).
    pub rotation: Option<Rotation>,
}

impl LuConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.block_size != 512 && self.block_size != 4096 {
            return Err(format!(
                "block size {} (must be 512 or 4096)",
                self.block_size
            ));
        }
        if let Some(p) = self.physical_block_size {
            crate::geometry::check(self.block_size, p)?;
        }
        if self.max_transfer_bytes < self.block_size {
            return Err("maximum transfer length is below one block".into());
        }
        self.alua.validate(self.relative_port)
    }
}

/// What the LU knows of one I_T nexus.
#[derive(Debug)]
struct NexusState {
    identity: ItNexus,
    ua: VecDeque<Sense>,
    /// Reached through a read-only mapping: writes are refused to this
    /// nexus alone (a per-initiator LUN map, like LIO's write-protected
    /// mapped LUNs).
    read_only: bool,
    /// Another gateway's peer session ([`crate::forward`]): sees no unit
    /// attention and no reservation conflict (the gateway that forwarded
    /// its commands checked them), and its writes are never forwarded.
    peer: bool,
}

/// Mode page state that commands consult (SPC-4 §7.5, SBC-4 §6.5).
#[derive(Debug, Default)]
pub struct ModeState {
    /// Caching page WCE: writes may complete before reaching stable storage.
    pub wce: AtomicBool,
    /// Control page D_SENSE: report descriptor-format sense.
    pub d_sense: AtomicBool,
    /// Control page SWP: software write protect.
    pub swp: AtomicBool,
    /// Control page TAS: tasks another I_T nexus aborts end with TASK
    /// ABORTED status instead of silently (SPC-5 §7.5.8).
    pub tas: AtomicBool,
}

pub struct LogicalUnit {
    pub(crate) cfg: LuConfig,
    pub(crate) backend: Arc<dyn Backend>,
    num_blocks: AtomicU64,
    /// `cfg.block_size` as a divisor ([`LuConfig::validate`] allows 512
    /// or 4096 only).
    block: NonZeroU32,
    block_len: NonZeroUsize,
    /// The physical block size reported ([`crate::geometry`]).
    physical_block: u32,
    pub(crate) mode: ModeState,
    /// The I_T nexuses that know the LU: identity and pending unit
    /// attentions.
    nexuses: Mutex<HashMap<NexusId, NexusState>>,
    /// Nexuses with at least one pending UA: lets the hot path skip the lock.
    ua_pending: AtomicUsize,
    /// Nexuses attached read-only: lets the hot path skip the lock.
    ro_nexuses: AtomicUsize,
    /// Writes refused to everyone: the LUN's `ro` flag, as configured or
    /// as set by the operator since.
    read_only: AtomicBool,
    reservations: Mutex<ReservationState>,
    /// Any reservation or registration exists: lets the hot path skip the
    /// reservation check.
    reserved: AtomicBool,
    pr_store: Option<Arc<dyn PrStore>>,
    /// Persistent reservations shared with other targets
    /// ([`crate::reservations::shared`]).
    pub(crate) pr_shared: Option<Arc<dyn SharedPr>>,
    /// The transport's rule for initiator names that arrive in a
    /// command's data (REGISTER AND MOVE's TransportID).
    name_rule: Option<NameRule>,
    /// Shared by ordinary reads and writes, exclusive for the commands
    /// that must appear atomic (COMPARE AND WRITE, ORWRITE, WRITE ATOMIC).
    access: AccessGate,
    /// EXTENDED COPY commands running now (bounded).
    pub(crate) copies_running: AtomicUsize,
    /// Statuses of finished copies kept for RECEIVE COPY STATUS.
    held_copies: Mutex<HeldCopies>,
    pub(crate) sanitize: SanitizeState,
    /// Held offline: its saved state could not be read
    /// ([`crate::offline`]).
    pub(crate) offline: Offline,
    /// Flushes and durable writes refused for a while after one failed
    /// ([`crate::durability`]).
    pub(crate) durability: Durability,
    /// Target port groups and their states ([`crate::alua`]).
    pub(crate) alua: AluaState,
    io: IoStats,
    /// Writes are being refused for want of space (SPACE ALLOCATION
    /// FAILED WRITE PROTECT) and no write has succeeded since.
    no_space: AtomicBool,
    /// The soft threshold on the space left, if one is set
    /// ([`crate::provisioning::threshold`]).
    pub(crate) threshold: Option<ThresholdState>,
    /// The backend hands out files for asynchronous access
    /// ([`Backend::file_for`]): reads, writes and flushes can be staged.
    files: bool,
    /// The backend runs requests asynchronously by itself (RBD).
    async_medium: bool,
    /// How writes reach the owner of a LU served by a gateway group
    /// ([`crate::forward`]); `None` for every other LU.
    forwarder: Option<Arc<dyn Forwarder>>,
}

impl HasGate for LogicalUnit {
    fn gate(&self) -> &AccessGate {
        &self.access
    }
}

/// Transfers from this size up run off the network thread (see
/// [`LogicalUnit::may_block`]); a thread hop costs ~15 µs of CPU here,
/// small next to copying 128 KiB.
pub const OFFLOAD_TRANSFER: u32 = 128 << 10;

impl LogicalUnit {
    pub fn new(cfg: LuConfig, backend: Arc<dyn Backend>) -> Result<LogicalUnit, String> {
        cfg.validate()?;
        let block = NonZeroU32::new(cfg.block_size).ok_or("block size 0")?;
        let block_len = NonZeroUsize::try_from(block).map_err(|e| e.to_string())?;
        let num_blocks = backend.size_bytes() / NonZeroU64::from(block);
        if cfg.thin && backend.provisioning_granularity() == 0 {
            return Err(format!(
                "a {} backend cannot be thin provisioned",
                backend.kind()
            ));
        }
        if num_blocks == 0 {
            return Err(format!(
                "backend of {} bytes holds no {}-byte block",
                backend.size_bytes(),
                cfg.block_size
            ));
        }
        let read_only = AtomicBool::new(cfg.read_only);
        let mode = ModeState::default();
        mode.wce.store(true, Ordering::Relaxed);
        mode.tas.store(true, Ordering::Relaxed);
        let alua = AluaState::new(&cfg.alua);
        let physical_block = crate::geometry::physical_block(
            cfg.block_size,
            cfg.physical_block_size,
            backend.physical_block_size(),
        );
        Ok(LogicalUnit {
            cfg,
            num_blocks: AtomicU64::new(num_blocks),
            block,
            block_len,
            physical_block,
            mode,
            nexuses: Mutex::new(HashMap::new()),
            ua_pending: AtomicUsize::new(0),
            ro_nexuses: AtomicUsize::new(0),
            read_only,
            reservations: Mutex::new(ReservationState::default()),
            reserved: AtomicBool::new(false),
            pr_store: None,
            pr_shared: None,
            name_rule: None,
            access: AccessGate::default(),
            copies_running: AtomicUsize::new(0),
            held_copies: Mutex::new(HeldCopies::default()),
            sanitize: SanitizeState::default(),
            offline: Offline::default(),
            durability: Durability::new(backend.reports_lost_writes()),
            alua,
            io: IoStats::default(),
            no_space: AtomicBool::new(false),
            threshold: None,
            files: backend.file_for(0, 0).is_some(),
            async_medium: backend.async_medium().is_some(),
            forwarder: None,
            backend,
        })
    }

    /// Writes this LU cannot do at an active/non-optimized port go to
    /// the owner through `f` ([`crate::forward`]). A forwarded write
    /// waits for the owner, so only a LU whose store may block takes one
    /// (its commands then run off the network thread,
    /// [`Self::may_block`]): which keeps the forwarding's cost to every
    /// other LU to one `Option` check per command.
    pub fn set_forwarder(&mut self, f: Arc<dyn Forwarder>) -> Result<(), String> {
        if !self.backend.may_block() {
            return Err(format!(
                "a {} store does not block: its commands run on the network thread and cannot \
                 wait for another gateway",
                self.backend.kind()
            ));
        }
        self.forwarder = Some(f);
        Ok(())
    }

    /// Whether `nexus` is another gateway's peer session.
    pub(crate) fn is_peer(&self, nexus: NexusId) -> bool {
        self.forwarder.is_some() && self.nexus_map().get(&nexus).is_some_and(|n| n.peer)
    }

    /// Whether a command with `opcode` goes to the owner now, whoever
    /// sends it (the peer check comes later, in [`Self::forwarded`]).
    #[inline]
    pub(crate) fn forwarding(&self, opcode: u8) -> bool {
        self.forwarder.is_some() && forward::forwards(self.alua.local_state(), false, opcode)
    }

    /// Runs `op` on the owner when this port forwards it for `req`'s
    /// nexus (a non-peer nexus allowed to write): the owner's answer.
    fn forwarded(&self, req: &Request<'_>, opcode: u8) -> Option<Response> {
        let f = self.forwarder.as_ref()?;
        let peer = self.is_peer(req.nexus);
        if !forward::forwards(self.alua.local_state(), peer, opcode)
            || self.write_protected_for(req.nexus)
        {
            return None;
        }
        Some(match f.forward(req.cdb, req.data_out) {
            Some(reply) => reply.into_response(),
            None => self.check_condition(forward::owner_unreachable(), 0),
        })
    }

    pub fn config(&self) -> &LuConfig {
        &self.cfg
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Whether the backend runs its requests through files a transport
    /// may drive asynchronously (see `crate::stage`).
    #[inline]
    pub fn has_files(&self) -> bool {
        self.files
    }

    /// Whether the backend runs staged requests asynchronously by itself
    /// (see `crate::stage` and `ironlun_backend::aio`).
    #[inline]
    pub fn has_async_medium(&self) -> bool {
        self.async_medium
    }

    /// Whether to run `cdb`, moving `transfer` bytes, off the transport's
    /// network thread: the backend can block; or the command does a lot
    /// of work for its size (copies, WRITE SAME, UNMAP); or it copies at
    /// least [`OFFLOAD_TRANSFER`] bytes through a backend that copies
    /// data, where running the copy on another core lets it overlap with
    /// the connection's socket copies (measured on 512 KiB reads from a
    /// tmpfs file: inline, one core did both copies and ironlun trailed
    /// tgt, whose worker threads overlap them; docs/performance.md). A
    /// read the backend hands out in place (a file range sent with
    /// `sendfile`) copies nothing here and stays inline. A command that
    /// may save the LU's state to a file goes off too, whatever the
    /// backend: PERSISTENT RESERVE OUT with a store for APTPL writes and
    /// fsyncs a file and its directory under the reservation lock.
    pub fn may_block(&self, cdb: &[u8], transfer: u32) -> bool {
        let copies = if ops::reads_medium(cdb) {
            !self.backend.reads_in_place(transfer as usize)
        } else {
            self.backend.copies_data()
        };
        self.backend.may_block()
            || ops::runs_long(cdb)
            || self.saves_state(cdb)
            || (transfer >= OFFLOAD_TRANSFER && copies)
    }

    /// Whether `cdb` may write the LU's saved state (a file, fsynced):
    /// PERSISTENT RESERVE OUT when APTPL has a store (SPC-5 §5.14.5).
    /// SANITIZE saves its record too, and always runs off
    /// ([`ops::runs_long`]).
    fn saves_state(&self, cdb: &[u8]) -> bool {
        use ironlun_scsi_codes::opcode::{
            PERSISTENT_RESERVE_IN, PERSISTENT_RESERVE_OUT, RELEASE_10, RELEASE_6, RESERVE_10,
            RESERVE_6,
        };
        match cdb.first() {
            Some(&PERSISTENT_RESERVE_OUT) => self.pr_store.is_some() || self.pr_shared.is_some(),
            // Reads the shared store first; RESERVE and RELEASE write it
            // too.
            Some(&(PERSISTENT_RESERVE_IN | RESERVE_6 | RESERVE_10 | RELEASE_6 | RELEASE_10)) => {
                self.pr_shared.is_some()
            }
            _ => false,
        }
    }

    pub fn block_size(&self) -> u32 {
        self.cfg.block_size
    }

    /// The block size as a divisor of byte counts.
    pub(crate) fn block_bytes(&self) -> NonZeroU64 {
        NonZeroU64::from(self.block)
    }

    /// The block size as a divisor of buffer lengths.
    pub(crate) fn block_len(&self) -> NonZeroUsize {
        self.block_len
    }

    /// The physical block size reported to initiators
    /// ([`crate::geometry::physical_block`]).
    pub fn physical_block_size(&self) -> u32 {
        self.physical_block
    }

    pub fn thin(&self) -> bool {
        self.cfg.thin
    }

    /// MAXIMUM COMPARE AND WRITE LENGTH in blocks (SBC-4 §6.6.4): what
    /// is atomic for every client of the store. A store only this target
    /// writes takes any length under the LU's exclusion; a shared one
    /// (RBD) only what its own compare-and-write covers, which may be
    /// less than a block (0: COMPARE AND WRITE not supported).
    pub fn max_compare_and_write_blocks(&self) -> u8 {
        let most = crate::inquiry::MAX_COMPARE_AND_WRITE_BLOCKS;
        match self.backend.compare_and_write_limit() {
            None => most,
            Some(bytes) => {
                let blocks = bytes / self.block_bytes();
                u8::try_from(blocks).unwrap_or(u8::MAX).min(most)
            }
        }
    }

    /// SANITIZE is offered on this LU.
    pub fn sanitize_allowed(&self) -> bool {
        self.cfg.sanitize
    }

    /// Access shared with other ordinary commands.
    pub(crate) fn shared_access(&self) -> SharedGuard<'_> {
        self.access.shared()
    }

    /// Access no other data command can interleave with.
    pub(crate) fn exclusive_access(&self) -> ExclusiveGuard<'_> {
        self.access.exclusive()
    }

    /// Access for a write of `len` bytes at byte `offset` (a write, WRITE
    /// SAME, a deallocation's zeroing, an XCOPY segment): shared with other
    /// ordinary commands, or the LU alone where the store writes that range
    /// as a read-modify-write no other request may race
    /// ([`Backend::write_needs_exclusive`]: an unaligned range of a
    /// `,direct` file or device). Such a write is never staged
    /// ([`LogicalUnit::stageable`]).
    pub(crate) fn write_access(&self, offset: u64, len: u64) -> WriteGuard<'_> {
        if self.backend.write_needs_exclusive(offset, len) {
            WriteGuard::Exclusive(self.exclusive_access())
        } else {
            WriteGuard::Shared(self.shared_access())
        }
    }

    pub fn num_blocks(&self) -> u64 {
        self.num_blocks.load(Ordering::Relaxed)
    }

    /// Whether writes are refused: a read-only LUN or software write
    /// protect (SPC-4 §7.5.8, SWP).
    pub fn write_protected(&self) -> bool {
        self.read_only.load(Ordering::Relaxed) || self.mode.swp.load(Ordering::Relaxed)
    }

    /// Whether writes from `nexus` are refused: the LU's own protection,
    /// or a read-only mapping of this nexus.
    #[inline]
    pub fn write_protected_for(&self, nexus: NexusId) -> bool {
        self.write_protected()
            || (self.ro_nexuses.load(Ordering::Acquire) > 0
                && self.nexus_map().get(&nexus).is_some_and(|n| n.read_only))
    }

    /// Sets or clears the LUN's write protection for every initiator (an
    /// operator's change; the backend must be writable to clear it).
    pub fn set_read_only(&self, on: bool) {
        self.read_only.store(on, Ordering::Relaxed);
    }

    /// Runs one command (SAM-5 §5.1). Errors become CHECK CONDITION here
    /// and nowhere else.
    pub fn execute(&self, req: &Request<'_>) -> Response {
        // The access comes back beside the response, not in a tuple with
        // it, so the response is built where the caller wants it and not
        // moved twice on the way (callgrind: ~35 instructions a command).
        let mut access = None;
        let mut r = self.dispatch(req, &mut access);
        self.record(access, req.data_out.len(), &mut r);
        r
    }

    /// Counts a finished command, and notes in the response how.
    /// Inlined: it runs for every command.
    #[inline]
    pub(crate) fn record(&self, access: Option<Access>, data_out: usize, r: &mut Response) {
        let failure = Failure::of(r.status, &r.sense);
        let good = failure.is_none();
        r.counted = Some(self.io.record(access, data_out, r.data.len(), failure));
        if good && access == Some(Access::Write) && self.no_space.load(Ordering::Relaxed) {
            self.no_space.store(false, Ordering::Relaxed);
        }
        if let (Some(t), Some(Access::Write)) = (&self.threshold, access) {
            t.note_write(self, data_out as u64, Instant::now());
        }
    }

    /// A write was refused for want of space (SBC-4 §4.7.3.6): whether
    /// this starts an episode (the first refusal since a write last
    /// succeeded), so that the condition is logged once per episode.
    pub fn space_refused(&self) -> bool {
        !self.no_space.swap(true, Ordering::Relaxed)
    }

    /// Commands and bytes served so far.
    pub fn io_stats(&self) -> IoSnapshot {
        self.io.snapshot()
    }

    /// Counts the time a command took, from its arrival to its status
    /// leaving, under the kind [`Response::counted`] says (the transport
    /// measures it: only it sees both ends).
    pub fn record_latency(&self, kind: IoKind, took: Duration) {
        self.io.record_latency(kind, took);
    }

    /// The latency histogram of one kind of command so far.
    pub fn latency(&self, kind: IoKind) -> LatencySnapshot {
        self.io.latency(kind)
    }

    /// Runs one command; also says in `access` how it touches the medium,
    /// for the counters (left `None`: not a command this LU knows).
    fn dispatch(&self, req: &Request<'_>, access: &mut Option<Access>) -> Response {
        let cdb = Cdb(req.cdb);
        let op = match self.admit(req, &cdb) {
            Ok(op) => op,
            Err((refused_access, r)) => {
                *access = refused_access;
                return r;
            }
        };
        *access = Some(op.access);
        if self.forwarder.is_some() {
            if let Some(r) = self.forwarded(req, op.opcode) {
                return r;
            }
        }
        match (op.handler)(self, req, &cdb) {
            Ok(r) => r,
            Err(s) => self.check_condition(s, 0),
        }
    }

    /// What comes before a command's own handler, in this order: the
    /// opcode table, reserved bits, a pending unit attention, the LU
    /// being offline, the local port's ALUA state, a sanitize under way
    /// (or failed), reservations. Refused: the response (and
    /// how the command would have touched the medium, for the counters).
    /// Inlined: it runs for every command.
    #[inline(always)]
    pub(crate) fn admit(
        &self,
        req: &Request<'_>,
        cdb: &Cdb<'_>,
    ) -> Result<&'static OpInfo, (Option<Access>, Response)> {
        let op = ops::lookup(self, cdb).map_err(|s| (None, self.check_condition(s, 0)))?;
        let refuse = |s: Sense| (Some(op.access), self.check_condition(s, 0));
        ops::check_usage(op, cdb).map_err(refuse)?;
        // SPC-4 §5.14: a pending unit attention is reported instead of
        // running the command, except for the commands allowed through;
        // it comes first, as on disks becoming ready after a reset (an
        // initiator's reconnection clears it before it sees NOT READY).
        if !op.ua_exempt {
            if let Some(s) = self.take_ua(req.nexus) {
                return Err(refuse(s));
            }
        }
        // A LU whose saved state could not be read serves nothing but
        // the exempt commands (crate::offline).
        if let Some(s) = self.offline.gate(op.access, op.opcode) {
            return Err(refuse(s));
        }
        // Media access waits while the shared reservations may be stale
        // (crate::reservations::shared).
        if let Some(s) = self.shared_pr_gate(op.access) {
            return Err(refuse(s));
        }
        // A port whose group is in standby, unavailable or transitioning
        // serves only some commands (SPC-5 §5.16.2.4).
        if let Some(s) = self.alua.gate(op) {
            return Err(refuse(s));
        }
        // A sanitize under way (or failed) holds off media access
        // (SBC-4 §4.11).
        if let Some(s) = self.sanitize.gate(op.access, op.opcode) {
            return Err(refuse(s));
        }
        if let Some(conflict) = reservations::check(self, req.nexus, op.access) {
            return Err((Some(op.access), conflict));
        }
        Ok(op)
    }

    /// CHECK CONDITION with sense in the format the control page selects.
    /// `transfer_length` is the command's own length for residuals.
    pub fn check_condition(&self, sense: Sense, transfer_length: u32) -> Response {
        Response {
            status: Status::CHECK_CONDITION,
            sense: sense.encode(self.mode.d_sense.load(Ordering::Relaxed)),
            data: Payload::default(),
            transfer_length,
            abort_nexuses: Vec::new(),
            counted: None,
        }
    }

    /// A new I_T nexus sees the LU for the first time: it gets a POWER ON,
    /// RESET, OR BUS DEVICE RESET OCCURRED unit attention (SAM-5 §6.3.1),
    /// or I_T NEXUS LOSS OCCURRED when it replaces a lost one.
    pub fn attach_nexus(&self, nexus: NexusId, identity: ItNexus, replaced: bool) {
        let cond = if replaced {
            Asc::I_T_NEXUS_LOSS_OCCURRED
        } else {
            Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET
        };
        self.attach_nexus_as(nexus, identity, Some(cond), false);
    }

    /// Registers `nexus` with `first` as its first unit attention (none:
    /// an LU added while the session runs, which learns of it through
    /// REPORTED LUNS DATA HAS CHANGED on its other LUs), read-only or
    /// not. Attaching a known nexus again only updates its mapping.
    pub fn attach_nexus_as(
        &self,
        nexus: NexusId,
        identity: ItNexus,
        first: Option<Asc>,
        read_only: bool,
    ) {
        let peer = self
            .forwarder
            .as_ref()
            .is_some_and(|f| f.is_peer(&identity.initiator_port));
        let mut map = self.nexus_map();
        let st = map.entry(nexus).or_insert_with(|| NexusState {
            peer,
            identity,
            ua: first
                .map(|c| Sense::new(SenseKey::UNIT_ATTENTION, c))
                .into_iter()
                .collect(),
            read_only: false,
        });
        st.read_only = read_only;
        self.recount(&map);
    }

    /// The nexus is gone: forget it, and release its SPC-2 reservation
    /// (SPC-2 §5.5.1: I_T nexus loss releases it). Persistent
    /// registrations stay.
    pub fn detach_nexus(&self, nexus: NexusId) {
        drop(self.detach(nexus));
    }

    /// [`Self::detach_nexus`]; the thread that clears its SPC-2
    /// reservation in a shared store, if it held one.
    pub(crate) fn detach(&self, nexus: NexusId) -> Option<Release> {
        let mut map = self.nexus_map();
        let gone = map.remove(&nexus);
        self.recount(&map);
        drop(map);
        // Its SANITIZE stops waiting; the operation goes on.
        self.sanitize.release(Some(nexus));
        self.held_copies().forget(nexus);
        self.release_spc2_of(nexus, gone.map(|n| n.identity).as_ref())
    }

    /// Drops the SPC-2 reservation if `nexus` (whose identity is `id`)
    /// holds it. A shared one is cleared in this LU's copy now and in
    /// the store on a thread of its own (this runs on network threads):
    /// the thread is returned.
    fn release_spc2_of(&self, nexus: NexusId, id: Option<&ItNexus>) -> Option<Release> {
        let mut st = self.reservations();
        if st.spc2 == Some(nexus) {
            st.spc2 = None;
            self.note_reservation_state(&st);
        }
        let holder = st.spc2_holder.take_if(|h| Some(&*h) == id)?;
        self.note_reservation_state(&st);
        drop(st);
        let store = self.pr_shared.clone()?;
        reservations::shared::release_spc2_later(store, holder)
    }

    fn nexus_map(&self) -> std::sync::MutexGuard<'_, HashMap<NexusId, NexusState>> {
        self.nexuses.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The stable identity of a live nexus.
    pub fn identity(&self, nexus: NexusId) -> Option<ItNexus> {
        self.nexus_map().get(&nexus).map(|n| n.identity.clone())
    }

    /// Live sessions whose identity satisfies `pred`.
    pub(crate) fn sessions_matching(&self, pred: impl Fn(&ItNexus) -> bool) -> Vec<NexusId> {
        self.nexus_map()
            .iter()
            .filter(|(_, n)| pred(&n.identity))
            .map(|(id, _)| *id)
            .collect()
    }

    fn push_ua(q: &mut VecDeque<Sense>, cond: Asc) {
        let s = Sense::new(SenseKey::UNIT_ATTENTION, cond);
        if !q.contains(&s) {
            if q.len() >= MAX_UA_PER_NEXUS {
                q.pop_front();
            }
            q.push_back(s);
        }
    }

    /// Establishes a unit attention for every nexus except `except`
    /// (SPC-4 §5.14).
    pub fn establish_ua(&self, cond: Asc, except: Option<NexusId>) {
        let mut map = self.nexus_map();
        for (n, st) in map.iter_mut() {
            if Some(*n) != except {
                Self::push_ua(&mut st.ua, cond);
            }
        }
        self.recount(&map);
    }

    /// Establishes a unit attention for the given nexuses.
    pub(crate) fn establish_ua_for(&self, nexuses: &[NexusId], cond: Asc) {
        let mut map = self.nexus_map();
        for n in nexuses {
            if let Some(st) = map.get_mut(n) {
                Self::push_ua(&mut st.ua, cond);
            }
        }
        self.recount(&map);
    }

    /// A reset (LOGICAL UNIT RESET, target reset): every nexus gets a
    /// reset unit attention (SAM-5 §6.3.3) and an SPC-2 reservation ends
    /// (SPC-2 §5.5.1); persistent reservations are unaffected. A sanitize
    /// operation goes on (SBC-4 §4.11.2); a SANITIZE command waiting for
    /// it stops waiting.
    /// A shared SPC-2 reservation ends in the store too, whoever holds
    /// it and through whichever target (a reset through any gateway ends
    /// it, though the others may not have been reset), off the network
    /// thread.
    pub fn reset(&self) {
        drop(self.reset_here());
    }

    /// [`Self::reset`]; the thread that clears the SPC-2 reservation in
    /// a shared store, if this LU's copy had one.
    pub(crate) fn reset_here(&self) -> Option<Release> {
        self.establish_ua(Asc::BUS_DEVICE_RESET_FUNCTION_OCCURRED, None);
        self.sanitize.release(None);
        self.held_copies().clear();
        let mut st = self.reservations();
        st.spc2 = None;
        let holder = st.spc2_holder.take();
        self.note_reservation_state(&st);
        drop(st);
        reservations::shared::release_spc2_later(self.pr_shared.clone()?, holder?)
    }

    /// A LOGICAL UNIT RESET `nexus` asked for: [`Self::reset`], then,
    /// on a LU of a gateway group and from an initiator (not another
    /// gateway's peer session), the same on the other gateways.
    pub fn reset_from(&self, nexus: NexusId) {
        self.reset();
        if let Some(f) = &self.forwarder {
            if !self.is_peer(nexus) {
                f.reset();
            }
        }
    }

    /// I_T NEXUS RESET (SAM-5 §7.7): the nexus loses its SPC-2
    /// reservation and is told I_T NEXUS LOSS OCCURRED; persistent
    /// registrations stay.
    pub fn nexus_reset(&self, nexus: NexusId) {
        drop(self.reset_nexus(nexus));
    }

    /// [`Self::nexus_reset`]; the thread that clears its SPC-2
    /// reservation in a shared store, if it held one.
    pub(crate) fn reset_nexus(&self, nexus: NexusId) -> Option<Release> {
        self.establish_ua_for(&[nexus], Asc::I_T_NEXUS_LOSS_OCCURRED);
        self.release_spc2_of(nexus, self.identity(nexus).as_ref())
    }

    /// Tasks of `nexus` were aborted by another I_T nexus's CLEAR TASK SET;
    /// with TAS=0 it learns so from COMMANDS CLEARED BY ANOTHER INITIATOR
    /// (SPC-4 §7.5.8, Control mode page TAS).
    pub fn commands_cleared(&self, nexus: NexusId) {
        self.establish_ua_for(&[nexus], Asc::COMMANDS_CLEARED_BY_ANOTHER_INITIATOR);
    }

    /// Changes the capacity (backend grown or shrunk) and tells every
    /// nexus: CAPACITY DATA HAS CHANGED (SBC-4 §4.10).
    pub fn set_num_blocks(&self, n: u64) {
        self.num_blocks.store(n, Ordering::Relaxed);
        self.establish_ua(Asc::CAPACITY_DATA_HAS_CHANGED, None);
    }

    fn recount(&self, map: &HashMap<NexusId, NexusState>) {
        // A peer's unit attentions are never reported (`take_ua`): they
        // must not keep every command on the slow path.
        let n = map.values().filter(|s| !s.peer && !s.ua.is_empty()).count();
        self.ua_pending.store(n, Ordering::Release);
        let ro = map.values().filter(|s| s.read_only).count();
        self.ro_nexuses.store(ro, Ordering::Release);
    }

    /// Takes the oldest pending unit attention of a nexus.
    pub fn take_ua(&self, nexus: NexusId) -> Option<Sense> {
        if self.ua_pending.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut map = self.nexus_map();
        // A peer gateway's session sees none: the gateway that forwarded
        // the command reported its own nexus's.
        let s = map
            .get_mut(&nexus)
            .filter(|n| !n.peer)
            .and_then(|n| n.ua.pop_front());
        if s.is_some() {
            self.recount(&map);
        }
        s
    }

    pub(crate) fn held_copies(&self) -> std::sync::MutexGuard<'_, HeldCopies> {
        self.held_copies.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn reservations(&self) -> std::sync::MutexGuard<'_, ReservationState> {
        self.reservations.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the fast-path flag in step with the reservation state.
    pub(crate) fn note_reservation_state(&self, st: &ReservationState) {
        let any = st.spc2.is_some() || st.spc2_holder.is_some() || !st.pr.registrations.is_empty();
        self.reserved.store(any, Ordering::Release);
    }

    pub(crate) fn any_reservation_state(&self) -> bool {
        self.reserved.load(Ordering::Acquire)
    }

    /// Where APTPL state goes; `restored` is what was saved before
    /// (SPC-4 §5.13.5).
    pub fn set_pr_store(&mut self, store: Arc<dyn PrStore>, restored: Option<PrState>) {
        self.pr_store = Some(store);
        if let Some(st) = restored {
            self.restore_pr(st);
        }
    }

    /// Puts saved persistent reservation state in place. A LU whose
    /// reservations are shared ([`LogicalUnit::set_shared_pr`]) keeps
    /// the shared state: a file of this target's does not replace it.
    pub fn restore_pr(&self, st: PrState) {
        if self.pr_shared.is_some() {
            return;
        }
        let mut r = self.reservations();
        r.pr = st;
        self.note_reservation_state(&r);
    }

    /// Whether the LU is reached through the target port with this
    /// RELATIVE TARGET PORT IDENTIFIER (SPC-5 §4.3.5): the one question
    /// about ports the reservation rules ask (REGISTER AND MOVE names a
    /// destination port). One port per LU today; port groups (ALUA)
    /// answer it here.
    pub fn has_target_port(&self, relative_port: u16) -> bool {
        relative_port == self.cfg.relative_port
    }

    /// Initiator names in a command's data (REGISTER AND MOVE) go through
    /// `rule`, the one the transport applies at login, so that they name
    /// the nexus a login of that initiator makes.
    pub fn set_name_rule(&mut self, rule: NameRule) {
        self.name_rule = Some(rule);
    }

    /// An initiator name from a command's data in its normal form, by the
    /// transport's rule (as it is without one); `None`: not a name.
    pub(crate) fn normal_initiator_name(&self, name: &str) -> Option<String> {
        match self.name_rule {
            Some(rule) => rule(name),
            None => Some(name.to_owned()),
        }
    }

    pub(crate) fn pr_store_available(&self) -> bool {
        self.pr_store.is_some() || self.pr_shared.is_some()
    }

    /// A snapshot of the persistent reservation state.
    pub fn pr_state(&self) -> PrState {
        self.reservations().pr.clone()
    }

    /// Saves the state when APTPL is set, forgets it otherwise. A failure
    /// is INTERNAL TARGET FAILURE and the change does not happen.
    pub(crate) fn persist(&self, st: &PrState) -> Result<(), Response> {
        let Some(store) = &self.pr_store else {
            return Ok(());
        };
        let r = if st.aptpl {
            store.save(&st.encode())
        } else {
            store.clear()
        };
        r.map_err(|_| {
            self.check_condition(
                Sense::new(SenseKey::HARDWARE_ERROR, Asc::INTERNAL_TARGET_FAILURE),
                0,
            )
        })
    }

    /// Re-reads the backend's size; if the number of blocks changed, every
    /// nexus gets CAPACITY DATA HAS CHANGED. Returns (old, new) blocks on
    /// a change.
    pub fn rescan(&self) -> std::io::Result<Option<(u64, u64)>> {
        let bytes = self.backend.refresh_size()?;
        let new = bytes / self.block_bytes();
        let old = self.num_blocks();
        if new == old || new == 0 {
            return Ok(None);
        }
        self.set_num_blocks(new);
        Ok(Some((old, new)))
    }

    /// Changes the medium's size to `bytes` (an operator's resize: the
    /// backend grows or shrinks its store) and takes the new capacity,
    /// which raises CAPACITY DATA HAS CHANGED (SBC-4 §4.6.3.2). Returns the
    /// old and new block counts when they differ.
    pub fn resize(&self, bytes: u64) -> std::io::Result<Option<(u64, u64)>> {
        if bytes < u64::from(self.cfg.block_size) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a LUN must hold at least one block",
            ));
        }
        self.backend.resize(bytes)?;
        self.rescan()
    }

    /// Flushes the backend (SYNCHRONIZE CACHE, shutdown); refused while
    /// an earlier flush's failure is reported (`crate::durability`).
    pub fn flush(&self) -> std::io::Result<()> {
        self.durability.run(Durable::Flush, || self.backend.flush())
    }

    /// Runs a write on the backend; a `durable` one (on stable storage
    /// before GOOD) is refused while a failed flush or durable write is
    /// reported, and its failure starts such a report
    /// ([`crate::durability`]).
    pub(crate) fn write_through<T>(
        &self,
        durable: bool,
        write: impl FnOnce(&dyn Backend) -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        if durable {
            self.durability
                .run(Durable::Write, || write(&*self.backend))
        } else {
            write(&*self.backend)
        }
    }
}

#[cfg(test)]
mod tests;
