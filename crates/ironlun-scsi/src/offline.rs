//! A LU held offline: its saved state (persistent reservations, a
//! sanitize under way) could not be read, so serving its medium could
//! break a promise made before the restart (a reservation another
//! initiator holds, blocks a sanitize was to destroy). Until a person
//! looks and the daemon brings it back, every command that is not exempt
//! from reservations (INQUIRY, REPORT LUNS, REQUEST SENSE, REPORT
//! SUPPORTED OPERATION CODES / TASK MANAGEMENT FUNCTIONS) gets NOT READY,
//! LOGICAL UNIT NOT READY, MANUAL INTERVENTION REQUIRED (SPC-5 §4.4.2,
//! Annex D: ASC/ASCQ 04h/03h), and REQUEST SENSE reports the same
//! (SPC-5 §6.39). Why it is offline is kept for the operator.
//!
//! Bringing it back is one caller's at a time ([`LogicalUnit::claim_offline`]:
//! SIGHUP and `ironlun admin lun online` may try at once), and atomic
//! for the initiators: what was saved is put in place (the reservations,
//! a sanitize resumed or failed) while the LU still refuses commands, and
//! only then does it serve ([`OnlineClaim::online`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::lu::LogicalUnit;
use crate::reservations::{Access, PrState};
use crate::sense::Sense;
use ironlun_scsi_codes::{opcode, Asc, SenseKey};

/// Whether a LU is offline, and why.
#[derive(Debug, Default)]
pub(crate) struct Offline {
    /// Lets the hot path skip the lock.
    on: AtomicBool,
    /// A caller is bringing it back ([`OnlineClaim`]).
    claimed: AtomicBool,
    why: Mutex<Option<String>>,
}

impl Offline {
    fn why(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.why.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The refusal for a command while the LU is offline; `None` lets it
    /// through.
    #[inline]
    pub(crate) fn gate(&self, access: Access, op: u8) -> Option<Sense> {
        if !self.on.load(Ordering::Acquire)
            || access == Access::Exempt
            || op == opcode::REQUEST_SENSE
        {
            return None;
        }
        Some(not_ready())
    }

    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// What REQUEST SENSE reports while the LU is offline.
    pub(crate) fn pending_sense(&self) -> Option<Sense> {
        self.on.load(Ordering::Acquire).then(not_ready)
    }
}

fn not_ready() -> Sense {
    Sense::new(
        SenseKey::NOT_READY,
        Asc::LU_NOT_READY_MANUAL_INTERVENTION_REQUIRED,
    )
}

/// Taking a LU offline and bringing it back (the target's side).
impl LogicalUnit {
    /// Takes the LU offline for `why` (the file and what is wrong with
    /// it, for the operator).
    pub fn set_offline(&self, why: String) {
        *self.offline.why() = Some(why);
        self.offline.on.store(true, Ordering::Release);
    }

    /// Why the LU is offline; `None` while it serves.
    pub fn offline_reason(&self) -> Option<String> {
        self.offline.why().clone()
    }

    /// The right to bring the offline LU back, for one caller: `None`
    /// when it is not offline, or another caller holds the right now.
    pub fn claim_offline(&self) -> Option<OnlineClaim<'_>> {
        if !self.offline.is_on() {
            return None;
        }
        let free =
            self.offline
                .claimed
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire);
        if free.is_err() {
            return None;
        }
        // Online meanwhile (the last holder finished): nothing to do.
        if !self.offline.is_on() {
            self.offline.claimed.store(false, Ordering::Release);
            return None;
        }
        Some(OnlineClaim { lu: self })
    }
}

/// One caller's right to bring an offline LU back; given up when
/// dropped (the LU stays offline, for another try).
#[must_use]
pub struct OnlineClaim<'a> {
    lu: &'a LogicalUnit,
}

impl OnlineClaim<'_> {
    /// Brings the LU back with the persistent reservation state read
    /// again (`restored`: what was saved, or nothing), and `then` done
    /// while it still refuses every command (the sanitize record taken
    /// up: resumed, or failure mode). Every nexus that knows the LU is
    /// told, as after a power on (SAM-5 §6.3.1): its reservations may
    /// differ from what it saw before.
    pub fn online(self, restored: Option<PrState>, then: impl FnOnce()) {
        let lu = self.lu;
        lu.restore_pr(restored.unwrap_or_default());
        then();
        *lu.offline.why() = None;
        lu.offline.on.store(false, Ordering::Release);
        lu.establish_ua(Asc::POWER_ON_RESET_OR_BUS_DEVICE_RESET, None);
    }

    /// The LU stays offline, now for `why`.
    pub fn stay_offline(self, why: String) {
        self.lu.set_offline(why);
    }
}

impl Drop for OnlineClaim<'_> {
    fn drop(&mut self) {
        self.lu.offline.claimed.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests;
