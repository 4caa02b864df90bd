//! Persistent reservations shared by several targets that serve one
//! medium (the gateways of an RBD image, docs/ha.md "Shared
//! reservations"): the state lives in a store they all reach
//! ([`SharedPr`]), each PERSISTENT RESERVE OUT is applied to the stored
//! state and written back only if nobody wrote in between
//! ([`update`]: compare-and-swap on the store's version, retried), and
//! the other targets are told before the command's GOOD. Each LU keeps
//! its copy for the per-command conflict check (SPC-5 §5.14.1), replaced
//! by newer versions only ([`LogicalUnit::take_up_shared`]).
//!
//! The stored text ([`encode`], [`decode`]) is the saved form of
//! `persist` (version 2) after one line giving APTPL, which the saved
//! form leaves out (a file exists only with APTPL set).

use std::io;
use std::sync::Arc;

use ironlun_scsi_codes::Asc;

use super::{persist::MAX_STATE_BYTES, pr_type, Access, PrState};
use crate::lu::LogicalUnit;
use crate::sense::Sense;

/// The first line of the shared form.
const APTPL_LINE: &str = "aptpl ";

/// Most compare-and-swap attempts one PERSISTENT RESERVE OUT makes
/// before it gives up (NOT READY, retried by the initiator).
pub const MAX_UPDATE_TRIES: usize = 16;

/// The longest shared form: the saved form and the APTPL line.
pub const MAX_SHARED_BYTES: usize = MAX_STATE_BYTES + 16;

/// The state as the store holds it and the version it was read at (0:
/// the store holds nothing yet, which reads as the empty state).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stored {
    pub state: PrState,
    pub version: u64,
}

/// A store several targets share. Calls block (the LU runs PERSISTENT
/// RESERVE IN and OUT off the network threads when it has one,
/// [`LogicalUnit::may_block`]).
pub trait SharedPr: Send + Sync {
    /// The state as stored now.
    fn load(&self) -> io::Result<Stored>;
    /// Replaces the stored state with `state` if it is still at
    /// `version`: `Some(new version)`, or `None` when someone else wrote
    /// since (nothing written).
    fn store_if(&self, version: u64, state: &PrState) -> io::Result<Option<u64>>;
    /// Tells the other targets that the state changed, waiting (bounded)
    /// until they have taken it up. A target that does not answer is the
    /// store's to report; this never fails the command.
    fn announce(&self);
    /// Whether this LU's copy follows the store: false while the store
    /// cannot tell it of changes (watch lost), when media access is NOT
    /// READY rather than checked against a copy that may be stale.
    fn in_step(&self) -> bool;
}

/// The shared form of `st`.
pub fn encode(st: &PrState) -> String {
    format!("{APTPL_LINE}{}\n{}", u8::from(st.aptpl), st.encode())
}

/// Reads the shared form back (strictly, as `PrState::decode` reads a
/// saved file). PRgeneration is as stored: the group keeps counting.
pub fn decode(text: &str) -> Result<PrState, String> {
    if text.len() > MAX_SHARED_BYTES {
        return Err(format!("longer than {MAX_SHARED_BYTES} bytes"));
    }
    let (first, rest) = text.split_once('\n').ok_or("no aptpl line")?;
    let aptpl = match first.strip_prefix(APTPL_LINE) {
        Some("0") => false,
        Some("1") => true,
        _ => return Err(format!("line 1: {first:?}: not an aptpl line")),
    };
    let st = PrState::decode(rest)?;
    Ok(PrState { aptpl, ..st })
}

/// Why [`update`] did not change the state.
#[derive(Debug)]
pub enum UpdateError {
    /// The store failed.
    Store(io::Error),
    /// Others kept writing: [`MAX_UPDATE_TRIES`] attempts found the
    /// version moved.
    Contended,
}

/// What [`update`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Updated<T, R> {
    /// `apply` succeeded on the current state; it is stored at
    /// `version`, `written` by this call (else it did not change).
    Done {
        state: PrState,
        version: u64,
        written: bool,
        value: T,
    },
    /// `apply` refused on the current state: nothing written.
    Refused(R),
}

/// Applies `apply` to the stored state and writes the result back if
/// nobody wrote meanwhile, again on the newer state until it holds
/// (at most [`MAX_UPDATE_TRIES`] times); an unchanged state is not
/// written. The caller puts a written state in place and then
/// announces it ([`SharedPr::announce`]).
pub fn update<T, R>(
    store: &dyn SharedPr,
    mut apply: impl FnMut(PrState) -> Result<(PrState, T), R>,
) -> Result<Updated<T, R>, UpdateError> {
    for _ in 0..MAX_UPDATE_TRIES {
        let stored = store.load().map_err(UpdateError::Store)?;
        let (state, value) = match apply(stored.state.clone()) {
            Ok(done) => done,
            Err(refusal) => return Ok(Updated::Refused(refusal)),
        };
        if state == stored.state {
            let version = stored.version;
            return Ok(Updated::Done {
                state,
                version,
                written: false,
                value,
            });
        }
        if let Some(version) = store
            .store_if(stored.version, &state)
            .map_err(UpdateError::Store)?
        {
            return Ok(Updated::Done {
                state,
                version,
                written: true,
                value,
            });
        }
    }
    Err(UpdateError::Contended)
}

impl LogicalUnit {
    /// Keeps persistent reservations in `store`, shared with the other
    /// targets of the medium, instead of this LU alone (and instead of an
    /// APTPL file: the store keeps the state whatever APTPL says). The
    /// LU starts from the state stored now.
    pub fn set_shared_pr(&mut self, store: Arc<dyn SharedPr>, now: Stored) {
        self.pr_shared = Some(store);
        self.put_shared(now.state, now.version);
    }

    /// The shared store, if the LU has one.
    pub(crate) fn shared_pr(&self) -> Option<&Arc<dyn SharedPr>> {
        self.pr_shared.as_ref()
    }

    /// Puts a state read from (or written to) the shared store in place,
    /// unless a newer one is already. Returns the state replaced, if it
    /// was.
    pub(crate) fn put_shared(&self, state: PrState, version: u64) -> Option<PrState> {
        let mut st = self.reservations();
        if version < st.version || (version == st.version && version != 0) {
            return None;
        }
        st.version = version;
        let old = std::mem::replace(&mut st.pr, state);
        self.note_reservation_state(&st);
        Some(old)
    }

    /// Takes up a state another target stored (its announcement, or a
    /// reload after the store's notifications were lost): put in place
    /// if newer, and the nexuses of this LU it changes things for get
    /// the unit attentions the target that changed it gave its own:
    /// REGISTRATIONS PREEMPTED for a registration gone, RESERVATIONS
    /// RELEASED when a registrants reservation ended or changed type
    /// (SPC-5 §5.14.11.2). Returns whether it was newer.
    pub fn take_up_shared(&self, stored: Stored) -> bool {
        let new = stored.state.clone();
        let Some(old) = self.put_shared(stored.state, stored.version) else {
            return false;
        };
        let preempted = self
            .sessions_matching(|n| old.registration(n).is_some() && new.registration(n).is_none());
        self.establish_ua_for(&preempted, Asc::REGISTRATIONS_PREEMPTED);
        let released = match (&old.reservation, &new.reservation) {
            (Some(o), None) => pr_type::registrants(o.pr_type),
            (Some(o), Some(n)) => pr_type::registrants(o.pr_type) && o.pr_type != n.pr_type,
            _ => false,
        };
        if released {
            let still = self.sessions_matching(|n| new.registration(n).is_some());
            self.establish_ua_for(&still, Asc::RESERVATIONS_RELEASED);
        }
        true
    }

    /// NOT READY for media access while the shared store cannot tell
    /// this LU of changes: its copy may hold a reservation another
    /// target already ended, or miss one it made.
    #[inline]
    pub(crate) fn shared_pr_gate(&self, access: Access) -> Option<Sense> {
        let store = self.pr_shared.as_ref()?;
        (matches!(access, Access::Read | Access::Write) && !store.in_step())
            .then(super::shared_unavailable)
    }
}

#[cfg(test)]
mod tests;
