//! Reservations: RESERVE/RELEASE(6/10) (SPC-2 §7.21, §7.13) and
//! persistent reservations, PERSISTENT RESERVE IN/OUT (SPC-4 §5.13,
//! §6.15, §6.16).
//!
//! Persistent registrations belong to an I_T nexus identified by its
//! initiator port name (`iqn…,i,0x<ISID>`, SPC-4 §7.6.4.6) and relative
//! target port, so they outlive the session that made them; an SPC-2
//! reservation belongs to the session's nexus and ends with it. Which
//! commands a reservation blocks is the `access` column of the opcode
//! table. Where several targets share the reservations ([`shared`]),
//! the SPC-2 holder is named by its identity too (another target's
//! session has no [`NexusId`] here), and still ends with its nexus.

use std::fmt::Write as _;

use crate::cdb::Cdb;
use crate::lu::LogicalUnit;
use crate::sense::Sense;
use crate::{NexusId, Request, Response};
use ironlun_scsi_codes::{opcode, service_action, Asc, SenseKey, Status};

mod persist;
pub mod shared;

pub use shared::{SharedPr, SharedState};

pub use persist::{
    port_name, strict_port_name, MAX_ISCSI_NAME_BYTES, MAX_PORT_NAME_BYTES, MAX_REGISTRATIONS,
    MAX_STATE_BYTES,
};

/// The identity of an I_T nexus, stable across sessions.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ItNexus {
    /// SCSI initiator port name: `<iSCSI name>,i,0x<ISID>`, the form of
    /// an iSCSI TransportID with ISID (SPC-4 §7.6.4.6).
    pub initiator_port: String,
    /// RELATIVE TARGET PORT IDENTIFIER of the target port.
    pub relative_port: u16,
}

impl ItNexus {
    pub fn new(initiator_name: &str, isid: [u8; 6], relative_port: u16) -> ItNexus {
        let mut port = format!("{},i,0x", initiator_name.to_ascii_lowercase());
        for b in isid {
            let _ = write!(port, "{b:02x}");
        }
        ItNexus {
            initiator_port: port,
            relative_port,
        }
    }

    /// The initiator device name (the part before `,i,0x`).
    pub fn initiator_name(&self) -> &str {
        self.initiator_port.split(",i,0x").next().unwrap_or("")
    }
}

/// How a command meets reservations (the `access` column of the opcode
/// table): SPC-4 §5.13.1 tables 63/64 and SBC-3 table 13, SPC-2 §5.5.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Never blocked: INQUIRY, REPORT LUNS, REQUEST SENSE, REPORT
    /// SUPPORTED OPERATION CODES / TASK MANAGEMENT FUNCTIONS.
    Exempt,
    /// Allowed under persistent reservations, blocked by another
    /// initiator's SPC-2 reservation (TEST UNIT READY, READ CAPACITY...).
    Other,
    /// Reads from the medium: blocked for non-holders of Exclusive Access
    /// types.
    Read,
    /// Writes to the medium or its state: blocked for non-holders of every
    /// type.
    Write,
    /// The reservation commands themselves, which apply their own rules.
    Reservation,
}

/// Persistent reservation types (SPC-4 §6.16.3, table 177).
pub mod pr_type {
    pub const WRITE_EXCLUSIVE: u8 = 1;
    pub const EXCLUSIVE_ACCESS: u8 = 3;
    pub const WRITE_EXCLUSIVE_REGISTRANTS_ONLY: u8 = 5;
    pub const EXCLUSIVE_ACCESS_REGISTRANTS_ONLY: u8 = 6;
    pub const WRITE_EXCLUSIVE_ALL_REGISTRANTS: u8 = 7;
    pub const EXCLUSIVE_ACCESS_ALL_REGISTRANTS: u8 = 8;

    pub fn valid(t: u8) -> bool {
        matches!(t, 1 | 3 | 5 | 6 | 7 | 8)
    }

    /// Registrants-only and all-registrants types: registered nexuses
    /// keep access.
    pub fn registrants(t: u8) -> bool {
        matches!(t, 5..=8)
    }

    /// All-registrants types: every registrant holds the reservation.
    pub fn all_registrants(t: u8) -> bool {
        matches!(t, 7 | 8)
    }

    /// Exclusive access types block reads too.
    pub fn exclusive_access(t: u8) -> bool {
        matches!(t, 3 | 6 | 8)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    pub nexus: ItNexus,
    pub key: u64,
    pub all_tg_pt: bool,
}

impl Registration {
    fn covers(&self, n: &ItNexus) -> bool {
        self.nexus.initiator_port == n.initiator_port
            && (self.all_tg_pt || self.nexus.relative_port == n.relative_port)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// The holder (for all-registrants types, the registrant that made
    /// it; every registrant holds it).
    pub holder: ItNexus,
    pub pr_type: u8,
}

/// All persistent reservation state of one LU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrState {
    pub generation: u32,
    pub registrations: Vec<Registration>,
    pub reservation: Option<Reservation>,
    /// Activate Persist Through Power Loss, as last set by a REGISTER.
    pub aptpl: bool,
}

impl PrState {
    fn registration(&self, n: &ItNexus) -> Option<&Registration> {
        self.registrations.iter().find(|r| r.covers(n))
    }

    fn holds(&self, n: &ItNexus) -> bool {
        match &self.reservation {
            Some(r) if pr_type::all_registrants(r.pr_type) => self.registration(n).is_some(),
            Some(r) => r.holder == *n,
            None => false,
        }
    }

    /// Whether a command of class `access` from nexus `n` conflicts with
    /// the persistent reservation (SPC-4 §5.13.1).
    pub fn conflicts(&self, n: &ItNexus, access: Access) -> bool {
        let Some(r) = &self.reservation else {
            return false;
        };
        let blocked = match access {
            Access::Write => true,
            Access::Read => pr_type::exclusive_access(r.pr_type),
            _ => false,
        };
        if !blocked || self.holds(n) {
            return false;
        }
        !(pr_type::registrants(r.pr_type) && self.registration(n).is_some())
    }

    /// What a power on leaves of saved state: the registrations, the
    /// reservation and APTPL as saved, and PRgeneration zero ("Regardless
    /// of the APTPL bit value the PRgeneration value shall be set to zero
    /// by a power on", SPC-5 §6.16.2).
    pub fn after_power_on(self) -> PrState {
        PrState {
            generation: 0,
            ..self
        }
    }
}

/// The transport's rule for an initiator name (RFC 7143 §4.2.7 for
/// iSCSI, which this crate does not know): its normal form, as logins
/// are compared and stored, or `None` when it is not a name. The target
/// gives it to each LU ([`LogicalUnit::set_name_rule`]); names that
/// arrive in a command's data (REGISTER AND MOVE) go through it too.
pub type NameRule = fn(&str) -> Option<String>;

/// Where APTPL state is kept (SPC-4 §5.13.5): the daemon supplies it.
pub trait PrStore: Send + Sync {
    fn save(&self, text: &str) -> std::io::Result<()>;
    /// Removes saved state (APTPL cleared).
    fn clear(&self) -> std::io::Result<()>;
}

/// All reservation state of an LU, under one lock.
#[derive(Debug, Default)]
pub struct ReservationState {
    pub pr: PrState,
    /// Holder of an SPC-2 RESERVE(6/10) on a LU whose reservations are
    /// its own.
    pub spc2: Option<NexusId>,
    /// Holder of an SPC-2 RESERVE(6/10) on a LU whose reservations are
    /// shared ([`shared`]; `spc2` is then always `None`): by identity,
    /// since it may be another target's I_T nexus.
    pub spc2_holder: Option<ItNexus>,
    /// The shared store's version `pr` was read at ([`shared`]; 0 when
    /// the state is this LU's alone).
    pub version: u64,
}

impl ReservationState {
    /// Whether an SPC-2 reservation is held by an I_T nexus other than
    /// `nexus`, whose identity is `id` (SPC-2 §5.5.1).
    fn spc2_held_by_other(&self, nexus: NexusId, id: Option<&ItNexus>) -> bool {
        self.spc2.is_some_and(|h| h != nexus)
            || self.spc2_holder.as_ref().is_some_and(|h| Some(h) != id)
    }
}

fn conflict() -> Response {
    Response {
        status: Status::RESERVATION_CONFLICT,
        ..Response::default()
    }
}

/// RESERVE(6/10) (SPC-2 §7.21): the LU for this I_T nexus. A persistent
/// registration makes it a conflict (SPC-4 §5.13.3, CRH = 1 behaviour).
pub fn reserve(lu: &LogicalUnit, req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    // RESERVE(10) 3RDPTY and LONGID, and the obsolete extent bits, are
    // not supported.
    if cdb.opcode() == opcode::RESERVE_10 && cdb.u8(1) & 0x13 != 0 {
        return Err(Sense::invalid_field(1, None));
    }
    if let Some(store) = lu.shared_pr() {
        return shared_spc2(lu, &**store, req, Spc2::Reserve);
    }
    let mut st = lu.reservations();
    if !st.pr.registrations.is_empty() {
        return Ok(conflict());
    }
    match st.spc2 {
        Some(holder) if holder != req.nexus => Ok(conflict()),
        _ => {
            st.spc2 = Some(req.nexus);
            lu.note_reservation_state(&st);
            Ok(Response::good())
        }
    }
}

/// RELEASE(6/10) (SPC-2 §7.13): only the holder releases; from anyone
/// else it is a no-op.
pub fn release(lu: &LogicalUnit, req: &Request<'_>, _cdb: &Cdb<'_>) -> Result<Response, Sense> {
    if let Some(store) = lu.shared_pr() {
        return shared_spc2(lu, &**store, req, Spc2::Release);
    }
    let mut st = lu.reservations();
    if st.spc2 == Some(req.nexus) {
        st.spc2 = None;
        lu.note_reservation_state(&st);
    }
    Ok(Response::good())
}

/// RESERVE or RELEASE.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Spc2 {
    Reserve,
    Release,
}

/// RESERVE or RELEASE on a shared state ([`shared`]): the same rules as
/// [`reserve`] and [`release`], applied to the stored state by
/// compare-and-swap (a RESERVE conflicts with a holder or a registration
/// another target made), put in place here and announced to the other
/// targets before GOOD. A store that fails is NOT READY, as for
/// PERSISTENT RESERVE OUT ([`shared_reserve_out`]).
fn shared_spc2(
    lu: &LogicalUnit,
    store: &dyn SharedPr,
    req: &Request<'_>,
    what: Spc2,
) -> Result<Response, Sense> {
    let Some(me) = lu.identity(req.nexus) else {
        // A nexus the transport never introduced holds nothing.
        return Ok(match what {
            Spc2::Reserve => conflict(),
            Spc2::Release => Response::good(),
        });
    };
    let outcome = shared::update(store, |mut st| {
        match what {
            Spc2::Reserve if !st.pr.registrations.is_empty() => return Err(()),
            Spc2::Reserve => match &st.spc2 {
                Some(holder) if *holder != me => return Err(()),
                _ => st.spc2 = Some(me.clone()),
            },
            Spc2::Release if st.spc2.as_ref() == Some(&me) => st.spc2 = None,
            Spc2::Release => {}
        }
        Ok((st, ()))
    });
    match outcome {
        Ok(shared::Updated::Done {
            state,
            version,
            written,
            ..
        }) => {
            lu.put_shared(state, version);
            if written {
                store.announce();
            }
            Ok(Response::good())
        }
        Ok(shared::Updated::Refused(())) => Ok(conflict()),
        Err(shared::UpdateError::Store(e)) => Err(crate::failure::shared_store_error(&e)),
        Err(shared::UpdateError::Contended) => Err(shared_unavailable()),
    }
}

/// PERSISTENT RESERVE IN (SPC-4 §6.15).
pub fn persistent_reserve_in(
    lu: &LogicalUnit,
    req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    let sa = cdb.u8(1) & 0x1f;
    let alloc = u32::from(cdb.be16(7));
    if let Some(store) = lu.shared_pr() {
        // The state as stored now, not as last announced.
        let stored = store
            .load()
            .map_err(|e| crate::failure::shared_store_error(&e))?;
        lu.put_shared(stored.state, stored.version);
    }
    let st = lu.reservations();
    if st.spc2_held_by_other(req.nexus, lu.identity(req.nexus).as_ref()) {
        return Ok(conflict());
    }
    let pr = &st.pr;
    let mut out = Vec::new();
    match sa {
        service_action::READ_KEYS => {
            out.extend_from_slice(&pr.generation.to_be_bytes());
            // ADDITIONAL LENGTH: 8 bytes a key (registrations are bounded).
            let keys = pr.registrations.len().saturating_mul(8);
            out.extend_from_slice(&u32::try_from(keys).unwrap_or(u32::MAX).to_be_bytes());
            for r in &pr.registrations {
                out.extend_from_slice(&r.key.to_be_bytes());
            }
        }
        service_action::READ_RESERVATION => {
            out.extend_from_slice(&pr.generation.to_be_bytes());
            match &pr.reservation {
                None => out.extend_from_slice(&0u32.to_be_bytes()),
                Some(r) => {
                    out.extend_from_slice(&16u32.to_be_bytes());
                    // All-registrants reservations report key 0
                    // (SPC-4 §6.15.3.3).
                    let k = if pr_type::all_registrants(r.pr_type) {
                        0
                    } else {
                        pr.registration(&r.holder).map_or(0, |g| g.key)
                    };
                    out.extend_from_slice(&k.to_be_bytes());
                    out.extend_from_slice(&[0; 4]);
                    out.push(0);
                    out.push(r.pr_type & 0x0f); // scope LU_SCOPE (0)
                    out.extend_from_slice(&[0; 2]);
                }
            }
        }
        // SPC-4 §6.15.4.
        service_action::REPORT_CAPABILITIES => {
            out.extend_from_slice(&8u16.to_be_bytes());
            // CRH (SPC-2 reservation handling), ATP_C (ALL_TG_PT), PTPL_C
            // when a store exists.
            out.push(0x10 | 0x04 | u8::from(lu.pr_store_available()));
            // TMV, ALLOW COMMANDS 000b, PTPL_A.
            out.push(0x80 | u8::from(pr.aptpl));
            // Type mask: WR_EX_AR, EX_AC_RO, WR_EX_RO, EX_AC, WR_EX;
            // EX_AC_AR.
            out.push(0x80 | 0x40 | 0x20 | 0x08 | 0x02);
            out.push(0x01);
            out.extend_from_slice(&[0; 2]);
        }
        // SPC-4 §6.15.5.
        service_action::READ_FULL_STATUS => {
            out.extend_from_slice(&pr.generation.to_be_bytes());
            out.extend_from_slice(&[0; 4]);
            for r in &pr.registrations {
                let holder = pr.holds(&r.nexus)
                    && pr.reservation.as_ref().is_some_and(|res| {
                        pr_type::all_registrants(res.pr_type) || res.holder == r.nexus
                    });
                out.extend_from_slice(&r.key.to_be_bytes());
                out.extend_from_slice(&[0; 4]);
                out.push(u8::from(r.all_tg_pt) << 1 | u8::from(holder));
                out.push(if holder {
                    pr.reservation.as_ref().map_or(0, |res| res.pr_type)
                } else {
                    0
                });
                out.extend_from_slice(&[0; 4]);
                out.extend_from_slice(&r.nexus.relative_port.to_be_bytes());
                let tid = transport_id(&r.nexus);
                out.extend_from_slice(&(tid.len() as u32).to_be_bytes());
                out.extend_from_slice(&tid);
            }
            // The 8-byte header is not counted.
            let len = u32::try_from(out.len().saturating_sub(8)).unwrap_or(u32::MAX);
            if let Some(b) = out.get_mut(4..8) {
                b.copy_from_slice(&len.to_be_bytes());
            }
        }
        _ => return Err(Sense::invalid_field(1, Some(4))),
    }
    Ok(Response::data(out, alloc))
}

/// iSCSI TransportID, format 01b (initiator port with ISID)
/// (SPC-4 §7.6.4.6).
fn transport_id(n: &ItNexus) -> Vec<u8> {
    let mut name = n.initiator_port.clone().into_bytes();
    name.push(0);
    while name.len() % 4 != 0 {
        name.push(0);
    }
    let mut v = vec![0x40 | 0x05, 0];
    v.extend_from_slice(&(name.len() as u16).to_be_bytes());
    v.extend_from_slice(&name);
    v
}

/// Parses an iSCSI TransportID (formats 00b and 01b).
fn parse_transport_id(data: &[u8]) -> Option<(String, bool)> {
    let c = Cdb(data);
    if c.u8(0) & 0x0f != 5 {
        return None;
    }
    let with_isid = c.u8(0) >> 6 == 1;
    let len = usize::from(c.be16(2));
    let name = data.get(4..4 + len)?;
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    let s = std::str::from_utf8(name.get(..end)?).ok()?;
    Some((s.to_ascii_lowercase(), with_isid))
}

/// Why a PERSISTENT RESERVE OUT is refused: RESERVATION CONFLICT status
/// or CHECK CONDITION.
enum Refusal {
    Conflict,
    Check(Sense),
}

impl From<Sense> for Refusal {
    fn from(s: Sense) -> Self {
        Refusal::Check(s)
    }
}

/// PERSISTENT RESERVE OUT (SPC-4 §6.16). The state changes only if the
/// whole service action succeeds (and, with APTPL, is saved).
pub fn persistent_reserve_out(
    lu: &LogicalUnit,
    req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    let sa = cdb.u8(1) & 0x1f;
    let len = cdb.be32(5) as usize;
    let Some(nexus) = lu.identity(req.nexus) else {
        // A nexus the transport never introduced cannot register.
        return Ok(conflict());
    };
    let data = req.parameter_list(len);
    if let Some(store) = lu.shared_pr() {
        return shared_reserve_out(lu, &**store, &nexus, (sa, cdb, data, len));
    }
    let mut st = lu.reservations();
    if st.spc2.is_some_and(|h| h != req.nexus) {
        return Ok(conflict());
    }
    let before = st.pr.clone();
    let mut effects = Effects::default();
    let outcome = apply_out(lu, &mut st, &nexus, (sa, cdb, data, len), &mut effects);
    match outcome {
        Ok(()) => {
            if let Err(r) = lu.persist(&st.pr) {
                st.pr = before;
                return Ok(r);
            }
            lu.note_reservation_state(&st);
            drop(st);
            Ok(carry_out(lu, effects, len))
        }
        Err(refusal) => {
            st.pr = before;
            refused(refusal)
        }
    }
}

/// A PERSISTENT RESERVE OUT: its service action, CDB, parameter list and
/// PARAMETER LIST LENGTH.
type OutCommand<'a> = (u8, &'a Cdb<'a>, &'a [u8], usize);

/// Applies the service action to `st` (the same rules whether the state
/// is this LU's alone or shared, [`shared`]).
fn apply_out(
    lu: &LogicalUnit,
    st: &mut ReservationState,
    nexus: &ItNexus,
    (sa, cdb, data, len): OutCommand<'_>,
    effects: &mut Effects,
) -> Result<(), Refusal> {
    match sa {
        service_action::REGISTER_AND_MOVE => register_and_move(lu, st, nexus, data, len),
        service_action::REGISTER..=service_action::REGISTER_AND_IGNORE_EXISTING_KEY => {
            pr_out_action(lu, st, nexus, sa, cdb, data, len, effects)
        }
        _ => Err(Refusal::Check(Sense::invalid_field(1, Some(4)))),
    }
}

/// GOOD for a service action whose state is in place: its unit
/// attentions and aborts follow.
fn carry_out(lu: &LogicalUnit, effects: Effects, len: usize) -> Response {
    for (who, cond) in effects.notices {
        lu.establish_ua_for(&who, cond);
    }
    let mut r = Response::written(len as u32);
    r.abort_nexuses = effects.abort;
    r
}

fn refused(refusal: Refusal) -> Result<Response, Sense> {
    match refusal {
        Refusal::Conflict => Ok(conflict()),
        Refusal::Check(s) => Err(s),
    }
}

/// PERSISTENT RESERVE OUT on a shared state ([`shared`]): applied to
/// the stored state, written back by compare-and-swap, put in place here
/// and announced to the other targets before GOOD. A store that fails
/// (or stays contended) is NOT READY, LOGICAL UNIT IS IN PROCESS OF
/// BECOMING READY, as an unreachable store is for media access, and
/// MANUAL INTERVENTION REQUIRED once the gateway is fenced
/// (`failure.rs`): never GOOD, and nothing changed here.
fn shared_reserve_out(
    lu: &LogicalUnit,
    store: &dyn SharedPr,
    nexus: &ItNexus,
    command: OutCommand<'_>,
) -> Result<Response, Sense> {
    let outcome = shared::update(store, |shared| {
        // SPC-2 §5.5.1: another's RESERVE blocks it, wherever it was made.
        if shared.spc2.as_ref().is_some_and(|h| h != nexus) {
            return Err(Refusal::Conflict);
        }
        let mut st = ReservationState {
            pr: shared.pr,
            ..ReservationState::default()
        };
        let mut effects = Effects::default();
        apply_out(lu, &mut st, nexus, command, &mut effects).map(|()| {
            let state = SharedState {
                pr: st.pr,
                spc2: shared.spc2,
            };
            (state, effects)
        })
    });
    match outcome {
        Ok(shared::Updated::Done {
            state,
            version,
            written,
            value: effects,
        }) => {
            lu.put_shared(state, version);
            if written {
                store.announce();
            }
            Ok(carry_out(lu, effects, command.3))
        }
        Ok(shared::Updated::Refused(refusal)) => refused(refusal),
        Err(shared::UpdateError::Store(e)) => Err(crate::failure::shared_store_error(&e)),
        Err(shared::UpdateError::Contended) => Err(shared_unavailable()),
    }
}

/// The sense of a command that needed the shared store and could not
/// reach it (retried by initiators, like an unreachable medium).
pub(crate) fn shared_unavailable() -> Sense {
    Sense::new(SenseKey::NOT_READY, Asc::LU_NOT_READY_BECOMING_READY)
}

/// What a service action does beyond the state change, carried out only
/// once the new state is in place (and saved).
#[derive(Default)]
struct Effects {
    /// Unit attentions for these nexuses.
    notices: Vec<(Vec<NexusId>, Asc)>,
    /// Nexuses whose tasks are aborted (PREEMPT AND ABORT).
    abort: Vec<NexusId>,
}

impl Effects {
    fn notify(&mut self, who: Vec<NexusId>, cond: Asc) {
        self.notices.push((who, cond));
    }
}

/// REGISTER, RESERVE, RELEASE, CLEAR, PREEMPT (AND ABORT) and REGISTER
/// AND IGNORE EXISTING KEY, with the 24-byte parameter list
/// (SPC-4 §6.16.3).
#[allow(clippy::too_many_arguments)]
fn pr_out_action(
    lu: &LogicalUnit,
    st: &mut ReservationState,
    nexus: &ItNexus,
    sa: u8,
    cdb: &Cdb<'_>,
    data: &[u8],
    len: usize,
    effects: &mut Effects,
) -> Result<(), Refusal> {
    let scope = cdb.u8(2) >> 4;
    let ty = cdb.u8(2) & 0x0f;
    if len != 24 || data.len() < 24 {
        return Err(Sense::new(SenseKey::ILLEGAL_REQUEST, Asc::PARAMETER_LIST_LENGTH_ERROR).into());
    }
    let p = Cdb(data);
    let res_key = p.be64(0);
    let sa_key = p.be64(8);
    let spec_i_pt = p.bit(20, 3);
    let all_tg_pt = p.bit(20, 2);
    let aptpl = p.bit(20, 0);
    if spec_i_pt {
        // Registering other initiator ports is not supported (SIP_C = 0).
        return Err(Sense::invalid_param(20, Some(3)).into());
    }
    if aptpl && !lu.pr_store_available() {
        return Err(Sense::invalid_param(20, Some(0)).into());
    }
    let registered = st.pr.registration(nexus).map(|r| r.key);
    let key_matches = || {
        if registered == Some(res_key) {
            Ok(())
        } else {
            Err(Refusal::Conflict)
        }
    };
    match sa {
        // REGISTER and REGISTER AND IGNORE EXISTING KEY (§5.13.7): a
        // registered nexus must present its key to REGISTER, an
        // unregistered one must present zero.
        service_action::REGISTER | service_action::REGISTER_AND_IGNORE_EXISTING_KEY => {
            if sa == service_action::REGISTER && registered.unwrap_or(0) != res_key {
                return Err(Refusal::Conflict);
            }
            if sa_key == 0 {
                if registered.is_some() {
                    unregister(lu, st, nexus, effects);
                }
            } else if let Some(r) = st.pr.registrations.iter_mut().find(|r| r.covers(nexus)) {
                r.key = sa_key;
            } else {
                register_new(&mut st.pr, nexus, sa_key, all_tg_pt)?;
            }
            st.pr.aptpl = aptpl;
            st.pr.generation = st.pr.generation.wrapping_add(1);
        }
        // RESERVE (§5.13.9): a second RESERVE of the same type by the
        // holder is fine; anything else over an existing reservation
        // conflicts.
        service_action::RESERVE => {
            check_scope_type(scope, ty)?;
            key_matches()?;
            match &st.pr.reservation {
                Some(r) if st.pr.holds(nexus) && r.pr_type == ty => {}
                Some(_) => return Err(Refusal::Conflict),
                None => {
                    st.pr.reservation = Some(Reservation {
                        holder: nexus.clone(),
                        pr_type: ty,
                    })
                }
            }
        }
        // RELEASE (SPC-4 §5.13.11.2.2).
        service_action::RELEASE => {
            check_scope_type(scope, ty)?;
            key_matches()?;
            if let Some(r) = st.pr.reservation.clone() {
                if st.pr.holds(nexus) {
                    if r.pr_type != ty {
                        return Err(Sense::new(
                            SenseKey::ILLEGAL_REQUEST,
                            Asc::INVALID_RELEASE_OF_PERSISTENT_RESERVATION,
                        )
                        .into());
                    }
                    st.pr.reservation = None;
                    if pr_type::registrants(r.pr_type) {
                        let others = other_registrants(lu, st, nexus);
                        effects.notify(others, Asc::RESERVATIONS_RELEASED);
                    }
                }
            }
        }
        // CLEAR (SPC-4 §5.13.11.2.7).
        service_action::CLEAR => {
            key_matches()?;
            let others = other_registrants(lu, st, nexus);
            st.pr.registrations.clear();
            st.pr.reservation = None;
            st.pr.generation = st.pr.generation.wrapping_add(1);
            effects.notify(others, Asc::RESERVATIONS_PREEMPTED);
        }
        // PREEMPT and PREEMPT AND ABORT (SPC-5 §5.14.11.2.4 to
        // §5.14.11.2.6); the latter also ends the preempted nexuses'
        // tasks on this LU.
        _ => {
            key_matches()?;
            let preempted = preempt(lu, st, nexus, sa_key, (scope, ty), effects)?;
            if sa == service_action::PREEMPT_AND_ABORT {
                effects.abort = preempted;
            }
        }
    }
    Ok(())
}

/// Registers `nexus`, not registered yet, with `key`. With ALL_TG_PT the
/// registration is the initiator port's on every target port (SPC-5
/// §5.14.7): it takes the place of the registrations that port already
/// has through other target ports, so that no I_T nexus is registered
/// twice (each would answer for it with its own key, and the saved state
/// is refused with two, `persist`). A reservation one of them held stays
/// with its holder, now registered through the new one.
/// (A refusal leaves the state as it was: the caller puts it back.)
fn register_new(
    pr: &mut PrState,
    nexus: &ItNexus,
    key: u64,
    all_tg_pt: bool,
) -> Result<(), Refusal> {
    if all_tg_pt {
        pr.registrations
            .retain(|g| g.nexus.initiator_port != nexus.initiator_port);
    }
    room_for_one_more(pr)?;
    pr.registrations.push(Registration {
        nexus: nexus.clone(),
        key,
        all_tg_pt,
    });
    Ok(())
}

/// A new registration fits: a LU keeps at most [`MAX_REGISTRATIONS`]
/// (SPC-5 §5.14.7: INSUFFICIENT REGISTRATION RESOURCES past them).
fn room_for_one_more(pr: &PrState) -> Result<(), Refusal> {
    if pr.registrations.len() >= MAX_REGISTRATIONS {
        return Err(Sense::new(
            SenseKey::ILLEGAL_REQUEST,
            Asc::INSUFFICIENT_REGISTRATION_RESOURCES,
        )
        .into());
    }
    Ok(())
}

fn check_scope_type(scope: u8, ty: u8) -> Result<(), Refusal> {
    if scope != 0 {
        return Err(Sense::invalid_field(2, Some(7)).into());
    }
    if !pr_type::valid(ty) {
        return Err(Sense::invalid_field(2, Some(3)).into());
    }
    Ok(())
}

/// Live sessions of registrants other than `me`.
fn other_registrants(lu: &LogicalUnit, st: &ReservationState, me: &ItNexus) -> Vec<NexusId> {
    lu.sessions_matching(|n| n != me && st.pr.registration(n).is_some())
}

/// Removes the registration of `nexus`. The reservation ends with its
/// holder's registration, or for all-registrants types with the last
/// registrant (SPC-4 §5.13.11.2.3, §5.13.10). The holder may be another
/// I_T nexus of the same initiator port, registered through the same
/// ALL_TG_PT registration, which goes with it.
fn unregister(lu: &LogicalUnit, st: &mut ReservationState, nexus: &ItNexus, effects: &mut Effects) {
    st.pr.registrations.retain(|r| !r.covers(nexus));
    let Some(r) = st.pr.reservation.clone() else {
        return;
    };
    let ends = if pr_type::all_registrants(r.pr_type) {
        st.pr.registrations.is_empty()
    } else {
        st.pr.registration(&r.holder).is_none()
    };
    if ends {
        st.pr.reservation = None;
        if pr_type::registrants(r.pr_type) {
            let others = other_registrants(lu, st, nexus);
            effects.notify(others, Asc::RESERVATIONS_RELEASED);
        }
    }
}

/// PREEMPT (SPC-5 §5.14.11.2.4, table 72). When SERVICE ACTION
/// RESERVATION KEY is the holder's key (or zero under an all-registrants
/// reservation) the preempting nexus takes the reservation with the new
/// scope and type and the registrations holding that key (all others,
/// for zero) are removed, its own excepted (§5.14.11.2.4.3). Otherwise
/// only the registrations holding the key are removed, its own included
/// when it names its own key, and SCOPE and TYPE are ignored
/// (§5.14.11.2.5): fence_scsi relies on that to clear a stale
/// registration of its key. Returns the live sessions of the other
/// nexuses that lost their registration.
fn preempt(
    lu: &LogicalUnit,
    st: &mut ReservationState,
    me: &ItNexus,
    sa_key: u64,
    (scope, ty): (u8, u8),
    effects: &mut Effects,
) -> Result<Vec<NexusId>, Refusal> {
    let old_type = st.pr.reservation.as_ref().map(|r| r.pr_type);
    let take_over = match &st.pr.reservation {
        Some(r) if pr_type::all_registrants(r.pr_type) => sa_key == 0,
        Some(r) => st.pr.registration(&r.holder).map(|g| g.key) == Some(sa_key),
        None => false,
    };
    if sa_key == 0 && !take_over {
        return Err(Sense::invalid_param(8, None).into());
    }
    if take_over {
        check_scope_type(scope, ty)?;
    }
    let removed: Vec<Registration> = st
        .pr
        .registrations
        .iter()
        .filter(|g| {
            if take_over {
                !g.covers(me) && (sa_key == 0 || g.key == sa_key)
            } else {
                g.key == sa_key
            }
        })
        .cloned()
        .collect();
    if removed.is_empty() && !take_over {
        // No registration holds that key: RESERVATION CONFLICT
        // (§5.14.11.2.5).
        return Err(Refusal::Conflict);
    }
    st.pr.registrations.retain(|g| !removed.contains(g));
    if take_over {
        st.pr.reservation = Some(Reservation {
            holder: me.clone(),
            pr_type: ty,
        });
    } else {
        end_orphaned_reservation(st);
    }
    st.pr.generation = st.pr.generation.wrapping_add(1);
    // REGISTRATIONS PREEMPTED for the nexuses that lost their
    // registration, not for the one that asked (§5.14.11.2.4.3 e,
    // §5.14.11.2.5 d).
    let lost = lu.sessions_matching(|n| n != me && removed.iter().any(|g| g.covers(n)));
    effects.notify(lost.clone(), Asc::REGISTRATIONS_PREEMPTED);
    // A new type: RESERVATIONS RELEASED for every other registrant that
    // remains (§5.14.11.2.4.3 f; the scope is always LU_SCOPE here).
    if take_over && old_type != Some(ty) {
        let others = other_registrants(lu, st, me);
        effects.notify(others, Asc::RESERVATIONS_RELEASED);
    }
    Ok(lost)
}

/// Ends a reservation whose holder is no longer registered, or, for an
/// all-registrants type, that has no registrant left (SPC-5 §5.14.11.2.1
/// table 71).
fn end_orphaned_reservation(st: &mut ReservationState) {
    let orphaned = match &st.pr.reservation {
        Some(r) if pr_type::all_registrants(r.pr_type) => st.pr.registrations.is_empty(),
        Some(r) => st.pr.registration(&r.holder).is_none(),
        None => false,
    };
    if orphaned {
        st.pr.reservation = None;
    }
}

/// REGISTER AND MOVE (SPC-5 §5.14.8, table 70): hands the reservation
/// to another I_T nexus named by a TransportID. A nexus that is not the
/// registered holder, or names another key, gets RESERVATION CONFLICT, as
/// does any move of an all-registrants reservation; with no reservation
/// to move the command is INVALID FIELD IN CDB.
fn register_and_move(
    lu: &LogicalUnit,
    st: &mut ReservationState,
    me: &ItNexus,
    data: &[u8],
    len: usize,
) -> Result<(), Refusal> {
    if len < 24 || data.len() < len {
        return Err(Sense::new(SenseKey::ILLEGAL_REQUEST, Asc::PARAMETER_LIST_LENGTH_ERROR).into());
    }
    let p = Cdb(data);
    let (res_key, sa_key) = (p.be64(0), p.be64(8));
    let (unreg, aptpl) = (p.bit(17, 1), p.bit(17, 0));
    if st.pr.registration(me).map(|g| g.key) != Some(res_key) {
        return Err(Refusal::Conflict);
    }
    let Some(r) = st.pr.reservation.clone() else {
        return Err(Sense::invalid_field(1, Some(4)).into());
    };
    if r.holder != *me || pr_type::all_registrants(r.pr_type) {
        return Err(Refusal::Conflict);
    }
    if sa_key == 0 {
        return Err(Sense::invalid_param(8, None).into());
    }
    if aptpl && !lu.pr_store_available() {
        return Err(Sense::invalid_param(17, Some(0)).into());
    }
    let dest = move_destination(lu, data, p.be16(18), p.be32(20), me)?;
    if st.pr.registration(&dest).is_some_and(|g| g.covers(me)) {
        // Registered through the sender's own registration (ALL_TG_PT):
        // a move to itself, which UNREG would leave unregistered.
        return Err(Sense::invalid_param(24, None).into());
    }
    if let Some(g) = st.pr.registrations.iter_mut().find(|g| g.covers(&dest)) {
        g.key = sa_key;
    } else {
        room_for_one_more(&st.pr)?;
        st.pr.registrations.push(Registration {
            nexus: dest.clone(),
            key: sa_key,
            all_tg_pt: false,
        });
    }
    st.pr.reservation = Some(Reservation {
        holder: dest,
        pr_type: r.pr_type,
    });
    if unreg {
        st.pr.registrations.retain(|g| !g.covers(me));
    }
    st.pr.aptpl = aptpl;
    st.pr.generation = st.pr.generation.wrapping_add(1);
    Ok(())
}

/// The I_T nexus a REGISTER AND MOVE names: one initiator port (an iSCSI
/// TransportID of format 01b) at RELATIVE TARGET PORT IDENTIFIER `port`,
/// a target port the LU has ([`LogicalUnit::has_target_port`]), not the
/// nexus that sent it (INVALID FIELD IN PARAMETER LIST, SPC-5 §5.14.8).
fn move_destination(
    lu: &LogicalUnit,
    data: &[u8],
    port: u16,
    tid_len: u32,
    me: &ItNexus,
) -> Result<ItNexus, Refusal> {
    if !lu.has_target_port(port) {
        // No I_T nexus through a port the LU lacks could use the
        // registration, and it would be saved (APTPL) as if one could.
        return Err(Sense::invalid_param(18, None).into());
    }
    let tid = usize::try_from(tid_len)
        .ok()
        .and_then(|n| data.get(24..24usize.checked_add(n)?));
    // The destination is saved with APTPL like any registration: only a
    // plain initiator port name (no white space or control character),
    // its iSCSI name in the normal form a login of it would have.
    let Some((name, true)) = tid
        .and_then(parse_transport_id)
        .and_then(|(port, isid)| Some((normal_port_name(lu, &port)?, isid)))
        .filter(|(name, _)| strict_port_name(name))
    else {
        return Err(Sense::invalid_param(24, None).into());
    };
    let dest = ItNexus {
        initiator_port: name,
        relative_port: port,
    };
    if dest == *me {
        return Err(Sense::invalid_param(24, None).into());
    }
    Ok(dest)
}

/// `NAME,i,0xISID` with NAME in the transport's normal form
/// ([`NameRule`]); `None` when NAME is not an initiator name.
fn normal_port_name(lu: &LogicalUnit, port: &str) -> Option<String> {
    let (name, isid) = port.rsplit_once(",i,0x")?;
    Some(format!("{},i,0x{isid}", lu.normal_initiator_name(name)?))
}

/// The reservation check made before a command runs.
pub fn check(lu: &LogicalUnit, nexus: NexusId, access: Access) -> Option<Response> {
    if matches!(access, Access::Exempt | Access::Reservation) || !lu.any_reservation_state() {
        return None;
    }
    let st = lu.reservations();
    if let Some(holder) = st.spc2 {
        // SPC-2 reservations block every other command from other
        // nexuses (SPC-2 §5.5.1), a peer gateway's too: on a LU whose
        // reservations are its own, another gateway knows nothing of
        // one held here, so it stops the writes that gateway forwards.
        if holder != nexus {
            return Some(conflict());
        }
        return None;
    }
    // A peer gateway's session: the gateway that forwarded the command
    // checked it against the same shared reservations, SPC-2's included
    // (docs/ha.md, "Forwarding").
    if lu.is_peer(nexus) {
        return None;
    }
    let id = lu.identity(nexus);
    if let Some(holder) = &st.spc2_holder {
        return (Some(holder) != id.as_ref()).then(conflict);
    }
    st.pr.conflicts(&id?, access).then(conflict)
}

#[cfg(test)]
mod reachable;
#[cfg(test)]
mod tests;
