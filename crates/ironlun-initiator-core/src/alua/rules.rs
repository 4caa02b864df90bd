//! The initiator's ALUA rules, each in one place: which commands a path
//! in each asymmetric access state may be sent (SPC-5 §5.16.2.4), in
//! what order of preference, which sense data says the states changed
//! (SPC-5 §5.16.2.5, §5.16.2.6) and what the initiator does then, and how
//! long a command waits for a path that can take it.

use std::time::Duration;

use ironlun_scsi_codes::{opcode, service_action, Asc, SenseCode, SenseKey};

use super::report::AccessState;

/// How long a command no path can take now waits for one when the target
/// gives no IMPLICIT TRANSITION TIME (Linux's `scsi_dh_alua` waits 60 s
/// for a transitioning group; a caller's own timeout usually ends it
/// sooner).
pub const DEFAULT_HOLD: Duration = Duration::from_secs(30);

/// How often a held command is tried again.
pub const HOLD_RETRY: Duration = Duration::from_millis(20);

/// How often REPORT TARGET PORT GROUPS is read again on every path while
/// commands are held: a path no command goes to reports no unit
/// attention, so a transitioning or standby group that became active is
/// learnt only by asking (Linux's `scsi_dh_alua` polls a transitioning
/// group likewise).
pub const HOLD_REREAD: Duration = Duration::from_millis(250);

/// Commands SPC-5 requires a target port to serve in every state,
/// transitioning and unavailable included (§5.16.2.4.5, §5.16.2.6):
/// INQUIRY, REPORT LUNS, REQUEST SENSE and REPORT TARGET PORT GROUPS (and
/// REPORT SUPPORTED OPERATION CODES, which touches nothing). The
/// initiator sends anything else, media access first of all, only to an
/// active path: standby paths serve a few more (§5.16.2.4.4), but none
/// that moves data.
pub fn served_in_every_state(cdb: &[u8]) -> bool {
    let op = cdb.first().copied().unwrap_or(0);
    let sa = cdb.get(1).map_or(0, |b| b & 0x1f);
    match op {
        opcode::INQUIRY | opcode::REPORT_LUNS | opcode::REQUEST_SENSE => true,
        opcode::MAINTENANCE_IN => matches!(
            sa,
            service_action::REPORT_TARGET_PORT_GROUPS
                | service_action::REPORT_SUPPORTED_OPERATION_CODES
        ),
        _ => false,
    }
}

/// Where a path in `state` stands for the command `cdb`: its rank (0
/// first) among the paths that may take it, or `None` when it may not.
/// Active/optimized first, then active/non-optimized (SPC-5 §5.16.2.4.2,
/// §5.16.2.4.3) and LBA dependent (whose refused blocks come back with
/// sense, §5.16.2.4.7); standby, unavailable and transitioning paths only
/// for the commands every state serves. An unknown state (a LU without
/// asymmetric access, TPGS 00b, or a path not read yet) is symmetric
/// access: every port as good as an optimized one (SPC-5 §5.16.1).
pub fn rank(state: Option<AccessState>, cdb: &[u8]) -> Option<u8> {
    use AccessState::*;
    let any = served_in_every_state(cdb);
    match state {
        None | Some(ActiveOptimized) => Some(0),
        Some(ActiveNonOptimized | LbaDependent) => Some(1),
        Some(Standby | Unavailable | Transitioning) if any => Some(2),
        Some(Offline) if any => Some(3),
        Some(Standby | Unavailable | Transitioning | Offline) => None,
    }
}

/// What sense data says about asymmetric access (SPC-5 §5.16.2.5,
/// §5.16.2.6, the ASC/ASCQ of Annex D). Each means the states are no
/// longer what the initiator last read: REPORT TARGET PORT GROUPS is read
/// again on every path (the unit attention is set on every I_T nexus,
/// §5.16.2.5, but only a path that carries commands ever sees it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AluaSignal {
    /// UNIT ATTENTION, ASYMMETRIC ACCESS STATE CHANGED (2Ah/06h).
    StateChanged,
    /// UNIT ATTENTION, IMPLICIT ASYMMETRIC ACCESS STATE TRANSITION FAILED
    /// (2Ah/07h).
    TransitionFailed,
    /// NOT READY, LOGICAL UNIT NOT ACCESSIBLE, ASYMMETRIC ACCESS STATE
    /// TRANSITION (04h/0Ah).
    Transitioning,
    /// NOT READY, ... TARGET PORT IN STANDBY STATE (04h/0Bh).
    Standby,
    /// NOT READY, ... TARGET PORT IN UNAVAILABLE STATE (04h/0Ch).
    Unavailable,
}

impl AluaSignal {
    /// The signal in `sense`, if it is one.
    pub fn of(sense: &[u8]) -> Option<AluaSignal> {
        let c = SenseCode::parse(sense)?;
        let asc = c.asc_ascq();
        Some(match c.key {
            SenseKey::UNIT_ATTENTION if asc == Asc::ASYMMETRIC_ACCESS_STATE_CHANGED => {
                AluaSignal::StateChanged
            }
            SenseKey::UNIT_ATTENTION
                if asc == Asc::IMPLICIT_ASYMMETRIC_ACCESS_STATE_TRANSITION_FAILED =>
            {
                AluaSignal::TransitionFailed
            }
            SenseKey::NOT_READY => match asc {
                Asc::LU_NOT_ACCESSIBLE_ASYMMETRIC_ACCESS_STATE_TRANSITION => {
                    AluaSignal::Transitioning
                }
                Asc::LU_NOT_ACCESSIBLE_TARGET_PORT_IN_STANDBY_STATE => AluaSignal::Standby,
                Asc::LU_NOT_ACCESSIBLE_TARGET_PORT_IN_UNAVAILABLE_STATE => AluaSignal::Unavailable,
                _ => return None,
            },
            _ => return None,
        })
    }

    /// The state the path that answered is in now, when the sense says.
    pub fn state(self) -> Option<AccessState> {
        match self {
            AluaSignal::Transitioning => Some(AccessState::Transitioning),
            AluaSignal::Standby => Some(AccessState::Standby),
            AluaSignal::Unavailable => Some(AccessState::Unavailable),
            AluaSignal::StateChanged | AluaSignal::TransitionFailed => None,
        }
    }

    /// The command was not run (NOT READY: the port refused it for its
    /// state), so it may be sent again on a path that can take it. A unit
    /// attention's command is sent again on its own path by the session
    /// (`SessionLimits::unit_attention_retries`).
    pub fn reissue(self) -> bool {
        self.state().is_some()
    }
}

/// How long a command no path can take may wait for one: the target's
/// IMPLICIT TRANSITION TIME if it gave one, else [`DEFAULT_HOLD`].
pub fn hold_limit(transition_time: Option<Duration>) -> Duration {
    transition_time.unwrap_or(DEFAULT_HOLD)
}
