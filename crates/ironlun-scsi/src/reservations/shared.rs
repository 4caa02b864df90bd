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
//! The store holds the SPC-2 reservation (RESERVE(6/10), SPC-2 §7.21)
//! too, by its holder's identity (initiator port name and relative
//! target port), so that a RESERVE through one target conflicts through
//! the others ([`SharedState`]); RESERVE and RELEASE go through
//! [`update`] like a PERSISTENT RESERVE OUT, and the end of its holder's
//! I_T nexus, or a reset, clears it off the network thread
//! (`release_spc2_later`).
//!
//! The stored text ([`encode`], [`decode`]) is the saved form of
//! `persist` (version 2) after one line giving APTPL, which the saved
//! form leaves out (a file exists only with APTPL set), and, while an
//! SPC-2 reservation is held, one line naming its holder:
//!
//! ```text
//! aptpl <0 or 1>
//! spc2 <relative port> <initiator port, escaped as in the saved form>
//! ironlun-pr 2
//! ...
//! ```
//!
//! A text without the `spc2` line (every object written before it
//! existed) reads as no SPC-2 reservation; a `spc2` line that is not
//! exactly that is refused, like any record of the saved form.

use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;

use ironlun_scsi_codes::Asc;

use super::persist::{decode_nexus, encode_nexus, MAX_PORT_NAME_BYTES, MAX_STATE_BYTES};
use super::{pr_type, Access, ItNexus, PrState};
use crate::lu::LogicalUnit;
use crate::sense::Sense;

/// The first line of the shared form.
const APTPL_LINE: &str = "aptpl ";

/// The line naming the SPC-2 reservation's holder, when one is held.
const SPC2_LINE: &str = "spc2 ";

/// Most compare-and-swap attempts one PERSISTENT RESERVE OUT makes
/// before it gives up (NOT READY, retried by the initiator).
pub const MAX_UPDATE_TRIES: usize = 16;

/// The longest shared form: the saved form, the APTPL line and the
/// SPC-2 line (its holder's name escaped byte by byte).
pub const MAX_SHARED_BYTES: usize = MAX_STATE_BYTES + 16 + 16 + 3 * MAX_PORT_NAME_BYTES;

/// What the targets share: the persistent reservations and the holder of
/// an SPC-2 reservation, if any. Neither is a target's alone: the holder
/// is named by its identity, not by a target's session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedState {
    pub pr: PrState,
    /// The I_T nexus holding a RESERVE(6/10) (SPC-2 §7.21).
    pub spc2: Option<ItNexus>,
}

/// The state as the store holds it and the version it was read at (0:
/// the store holds nothing yet, which reads as the empty state).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stored {
    pub state: SharedState,
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
    fn store_if(&self, version: u64, state: &SharedState) -> io::Result<Option<u64>>;
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
pub fn encode(st: &SharedState) -> String {
    let spc2 = st
        .spc2
        .as_ref()
        .map(|h| format!("{SPC2_LINE}{}\n", encode_nexus(h)))
        .unwrap_or_default();
    format!(
        "{APTPL_LINE}{}\n{spc2}{}",
        u8::from(st.pr.aptpl),
        st.pr.encode()
    )
}

/// Reads the shared form back (strictly, as `PrState::decode` reads a
/// saved file). PRgeneration is as stored: the group keeps counting.
pub fn decode(text: &str) -> Result<SharedState, String> {
    if text.len() > MAX_SHARED_BYTES {
        return Err(format!("longer than {MAX_SHARED_BYTES} bytes"));
    }
    let (first, mut rest) = text.split_once('\n').ok_or("no aptpl line")?;
    let aptpl = match first.strip_prefix(APTPL_LINE) {
        Some("0") => false,
        Some("1") => true,
        _ => return Err(format!("line 1: {first:?}: not an aptpl line")),
    };
    let mut spc2 = None;
    if let Some(fields) = rest.strip_prefix(SPC2_LINE) {
        let (line, after) = fields.split_once('\n').ok_or("line 2: no line end")?;
        let holder = decode_nexus(line)
            .ok_or_else(|| format!("line 2: {line:?}: not an SPC-2 reservation holder"))?;
        spc2 = Some(holder);
        rest = after;
    }
    let st = PrState::decode(rest)?;
    Ok(SharedState {
        pr: PrState { aptpl, ..st },
        spc2,
    })
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
        state: SharedState,
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
    mut apply: impl FnMut(SharedState) -> Result<(SharedState, T), R>,
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
    /// unless a newer one is already. Returns the persistent reservations
    /// replaced, if they were.
    pub(crate) fn put_shared(&self, state: SharedState, version: u64) -> Option<PrState> {
        let mut st = self.reservations();
        if version < st.version || (version == st.version && version != 0) {
            return None;
        }
        st.version = version;
        st.spc2_holder = state.spc2;
        let old = std::mem::replace(&mut st.pr, state.pr);
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
        let new = stored.state.pr.clone();
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

/// A thread clearing an SPC-2 reservation in the store
/// ([`release_spc2_later`]); it returns whether it wrote.
pub(crate) type Release = JoinHandle<Result<bool, UpdateError>>;

/// The SPC-2 reservations an ended I_T nexus held being cleared in
/// their shared stores ([`crate::LunMap::end_nexus`]), for a caller that
/// must not answer before they are (a logout's response).
#[derive(Debug, Default)]
#[must_use]
pub struct Releases(pub(crate) Vec<Release>);

impl Releases {
    /// Whether there is nothing to wait for (no reservation held, or
    /// none shared).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Blocks until every store has the release, or failed it (each
    /// store bounds its own calls): never on a network thread.
    pub fn wait(self) {
        for r in self.0 {
            let _ = r.join();
        }
    }
}

/// Ends the SPC-2 reservation of `holder` in the store, if it still
/// holds it there, and announces the change, on a thread of its own: the
/// ends of an I_T nexus and the resets that release it (SPC-2 §5.5.1,
/// SAM-5 §7.7) happen on network threads, which never wait for the
/// store. The caller has cleared its own copy already. `None` when no
/// thread could be started: the reservation then stays in the store
/// until a reset through any target ends it, as it does when the store
/// fails the write (the store reports its failures).
pub(crate) fn release_spc2_later(store: Arc<dyn SharedPr>, holder: ItNexus) -> Option<Release> {
    std::thread::Builder::new()
        .name("spc2-release".into())
        .spawn(move || {
            let out = update(&*store, |mut st| {
                if st.spc2.as_ref() == Some(&holder) {
                    st.spc2 = None;
                }
                Ok::<_, ()>((st, ()))
            })?;
            let written = matches!(out, Updated::Done { written: true, .. });
            if written {
                store.announce();
            }
            Ok(written)
        })
        .ok()
}

#[cfg(test)]
mod tests;
