//! The asymmetric access states of one LU: what each state serves (the
//! one table of it, [`serves`]), the sense of what it refuses, and how
//! states change, each change told to every I_T nexus of the LU as a
//! unit attention (SPC-5 §5.16.2.7).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};

use ironlun_scsi_codes::{opcode, service_action, Asc, SenseKey};

use super::{AccessState, AluaConfig, AluaMode, PortGroup};
use crate::lu::LogicalUnit;
use crate::ops::OpInfo;
use crate::sense::Sense;
use crate::NexusId;

/// STATUS CODE of a target port group descriptor (SPC-5 §6.36.2,
/// table 256): what last changed the group's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StatusCode {
    /// Nothing since the LU started.
    None = 0,
    /// An initiator's SET TARGET PORT GROUPS.
    Explicit = 1,
    /// The target (its configuration, the operator, a gateway taking
    /// over).
    Implicit = 2,
}

/// A group and what last changed its state.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    pub(crate) cfg: PortGroup,
    pub(crate) status: StatusCode,
}

/// What changed states inside the device, for whoever runs it (the
/// target logs it; a gateway group passes it on to the other gateways).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AluaEvent {
    /// An initiator's SET TARGET PORT GROUPS, applied: each group with
    /// its state before and after.
    SetByInitiator {
        /// The SCSI initiator port name of the I_T nexus that sent it.
        initiator: String,
        changes: Vec<(u16, AccessState, AccessState)>,
    },
}

/// Called after each [`AluaEvent`], on the thread that ran the command.
pub type AluaNotify = Box<dyn Fn(&AluaEvent) + Send + Sync>;

/// One LU's ALUA layout and states.
pub(crate) struct AluaState {
    mode: AluaMode,
    local_group: u16,
    transition_time: AtomicU8,
    /// The local group's state code (active/optimized while ALUA is off):
    /// every command reads it without the lock.
    local: AtomicU8,
    groups: Mutex<Vec<Group>>,
    notify: Option<AluaNotify>,
}

impl AluaState {
    pub(crate) fn new(cfg: &AluaConfig) -> AluaState {
        let groups: Vec<Group> = cfg
            .groups
            .iter()
            .map(|g| Group {
                cfg: g.clone(),
                status: StatusCode::None,
            })
            .collect();
        let st = AluaState {
            mode: cfg.mode,
            local_group: cfg.local_group,
            transition_time: AtomicU8::new(cfg.transition_time),
            local: AtomicU8::new(AccessState::ActiveOptimized.code()),
            groups: Mutex::new(groups),
            notify: None,
        };
        st.note_local(&st.lock());
        st
    }

    pub(crate) fn mode(&self) -> AluaMode {
        self.mode
    }

    pub(crate) fn local_group(&self) -> u16 {
        self.local_group
    }

    pub(crate) fn transition_time(&self) -> u8 {
        self.transition_time.load(Ordering::Relaxed)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<Group>> {
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the lock-free copy of the local group's state in step.
    fn note_local(&self, groups: &[Group]) {
        let state = match self.mode {
            AluaMode::Off => AccessState::ActiveOptimized,
            _ => groups
                .iter()
                .find(|g| g.cfg.id == self.local_group)
                .map_or(AccessState::ActiveOptimized, |g| g.cfg.state),
        };
        self.local.store(state.code(), Ordering::Release);
    }

    /// The local group's state.
    pub(crate) fn local_state(&self) -> AccessState {
        AccessState::from_code(self.local.load(Ordering::Acquire))
            .unwrap_or(AccessState::ActiveOptimized)
    }

    /// The refusal of a command through the local port in its group's
    /// state; `None` lets it through. Inlined: it runs for every command.
    #[inline]
    pub(crate) fn gate(&self, op: &OpInfo) -> Option<Sense> {
        let code = self.local.load(Ordering::Acquire);
        if code <= AccessState::ActiveNonOptimized.code() {
            return None;
        }
        let state = AccessState::from_code(code)?;
        (!serves(state, op.opcode, op.service_action)).then(|| not_accessible(state))
    }

    /// What REQUEST SENSE reports while the local group serves only a
    /// few commands (SPC-5 §6.39: the condition that would refuse the
    /// next command).
    pub(crate) fn pending_sense(&self) -> Option<Sense> {
        let state = self.local_state();
        (!state.active()).then(|| not_accessible(state))
    }

    pub(crate) fn has_group(&self, id: u16) -> bool {
        self.lock().iter().any(|g| g.cfg.id == id)
    }
}

/// Whether a group in `state` serves the command `opcode` (with its
/// `service_action`) for the LU. The active states serve everything. The
/// others serve what SPC-5 requires of them: in every state INQUIRY,
/// REPORT LUNS, REPORT TARGET PORT GROUPS and REQUEST SENSE (§5.16.2.4.5,
/// §5.16.2.6); in standby and unavailable SET TARGET PORT GROUPS; in
/// standby also LOG SENSE, MODE SENSE, MODE SELECT and PERSISTENT RESERVE
/// IN and OUT (§5.16.2.4.4), and READ CAPACITY(10) and (16), which
/// Linux sizes a standby path's disk with (LIO serves them in standby
/// too).
/// SPC-5 lets a device serve more: REPORT SUPPORTED OPERATION CODES and
/// TASK MANAGEMENT FUNCTIONS, which touch nothing, are served in every
/// state. (READ/WRITE BUFFER, LOG SELECT and the diagnostics the lists
/// also name are not commands of this device.)
pub(crate) fn serves(state: AccessState, op: u8, sa: Option<u8>) -> bool {
    use service_action as sa_;
    let maintenance_in = |want: u8| op == opcode::MAINTENANCE_IN && sa == Some(want);
    let every = matches!(
        op,
        opcode::INQUIRY | opcode::REPORT_LUNS | opcode::REQUEST_SENSE
    ) || maintenance_in(sa_::REPORT_TARGET_PORT_GROUPS)
        || maintenance_in(sa_::REPORT_SUPPORTED_OPERATION_CODES)
        || maintenance_in(sa_::REPORT_SUPPORTED_TASK_MANAGEMENT_FUNCTIONS);
    let set_tpg = op == opcode::MAINTENANCE_OUT && sa == Some(sa_::SET_TARGET_PORT_GROUPS);
    let standby = matches!(
        op,
        opcode::LOG_SENSE
            | opcode::MODE_SENSE_6
            | opcode::MODE_SENSE_10
            | opcode::MODE_SELECT_6
            | opcode::MODE_SELECT_10
            | opcode::PERSISTENT_RESERVE_IN
            | opcode::PERSISTENT_RESERVE_OUT
            | opcode::READ_CAPACITY_10
    ) || (op == opcode::SERVICE_ACTION_IN_16 && sa == Some(sa_::READ_CAPACITY_16));
    match state {
        AccessState::ActiveOptimized | AccessState::ActiveNonOptimized => true,
        AccessState::Standby => every || set_tpg || standby,
        AccessState::Unavailable => every || set_tpg,
        AccessState::Transitioning => every,
    }
}

/// NOT READY, LOGICAL UNIT NOT ACCESSIBLE with the state's qualifier
/// (SPC-5 §5.16.2.4.4, §5.16.2.4.5, §5.16.2.6).
pub(crate) fn not_accessible(state: AccessState) -> Sense {
    let asc = match state {
        AccessState::Standby => Asc::LU_NOT_ACCESSIBLE_TARGET_PORT_IN_STANDBY_STATE,
        AccessState::Unavailable => Asc::LU_NOT_ACCESSIBLE_TARGET_PORT_IN_UNAVAILABLE_STATE,
        _ => Asc::LU_NOT_ACCESSIBLE_ASYMMETRIC_ACCESS_STATE_TRANSITION,
    };
    Sense::new(SenseKey::NOT_READY, asc)
}

/// Changing states (the target's side, and SET TARGET PORT GROUPS').
impl LogicalUnit {
    /// The layout with every group's state now.
    pub fn alua_config(&self) -> AluaConfig {
        AluaConfig {
            mode: self.alua.mode(),
            local_group: self.alua.local_group(),
            transition_time: self.alua.transition_time(),
            groups: self.alua.lock().iter().map(|g| g.cfg.clone()).collect(),
        }
    }

    /// The state of the local port's group (active/optimized without
    /// ALUA).
    pub fn alua_local_state(&self) -> AccessState {
        self.alua.local_state()
    }

    /// Calls `notify` after each state change made inside the device.
    pub fn set_alua_notify(&mut self, notify: AluaNotify) {
        self.alua.notify = Some(notify);
    }

    /// The target changes `group`'s state (an implicit change: the
    /// operator, the configuration, a gateway taking over). Every I_T
    /// nexus is told ASYMMETRIC ACCESS STATE CHANGED. Whether the state
    /// changed.
    pub fn set_alua_state(&self, group: u16, state: AccessState) -> Result<bool, String> {
        self.change_groups(
            |groups| set_state(groups, group, state, StatusCode::Implicit),
            Asc::ASYMMETRIC_ACCESS_STATE_CHANGED,
            None,
        )
    }

    /// An implicit change the target started did not complete: `group`
    /// is put in `state` (where it stays), and every I_T nexus is told
    /// IMPLICIT ASYMMETRIC ACCESS STATE TRANSITION FAILED (SPC-5
    /// §5.16.2.7) instead of ASYMMETRIC ACCESS STATE CHANGED.
    pub fn alua_transition_failed(&self, group: u16, state: AccessState) -> Result<(), String> {
        self.change_groups(
            |groups| set_state(groups, group, state, StatusCode::Implicit).map(|_| true),
            Asc::IMPLICIT_ASYMMETRIC_ACCESS_STATE_TRANSITION_FAILED,
            None,
        )
        .map(drop)
    }

    /// The target's layout changed while it runs (a gateway added or
    /// removed, a state or preference changed in the configuration): the
    /// groups become `groups`, and if anything REPORT TARGET PORT GROUPS
    /// shows of them changed every I_T nexus is told ASYMMETRIC ACCESS
    /// STATE CHANGED. The mode and the local group (what INQUIRY and VPD
    /// 83h show, which initiators read once) stay. Whether the groups
    /// changed.
    pub fn set_alua_groups(
        &self,
        groups: &[PortGroup],
        transition_time: u8,
    ) -> Result<bool, String> {
        let cfg = AluaConfig {
            mode: self.alua.mode(),
            local_group: self.alua.local_group(),
            transition_time,
            groups: groups.to_vec(),
        };
        cfg.validate(self.cfg.relative_port)?;
        self.alua
            .transition_time
            .store(transition_time, Ordering::Relaxed);
        self.change_groups(
            |now| {
                let same =
                    now.len() == groups.len() && now.iter().zip(groups).all(|(a, b)| &a.cfg == b);
                if same {
                    return Ok(false);
                }
                let status = |g: &PortGroup| {
                    now.iter()
                        .find(|o| o.cfg.id == g.id && o.cfg.state == g.state)
                        .map_or(StatusCode::Implicit, |o| o.status)
                };
                *now = groups
                    .iter()
                    .map(|g| Group {
                        cfg: g.clone(),
                        status: status(g),
                    })
                    .collect();
                Ok(true)
            },
            Asc::ASYMMETRIC_ACCESS_STATE_CHANGED,
            None,
        )
    }

    /// SET TARGET PORT GROUPS from `nexus` sets these states (checked by
    /// the command): every other I_T nexus is told ASYMMETRIC ACCESS
    /// STATE CHANGED (SPC-5 §5.16.2.7), and the notify hook hears of it.
    pub(crate) fn set_alua_explicitly(&self, nexus: NexusId, states: &[(u16, AccessState)]) {
        let mut changes = Vec::new();
        let r = self.change_groups(
            |groups| {
                for &(id, state) in states {
                    let before = groups.iter().find(|g| g.cfg.id == id).map(|g| g.cfg.state);
                    set_state(groups, id, state, StatusCode::Explicit)?;
                    if let Some(b) = before.filter(|b| *b != state) {
                        changes.push((id, b, state));
                    }
                }
                Ok(!changes.is_empty())
            },
            Asc::ASYMMETRIC_ACCESS_STATE_CHANGED,
            Some(nexus),
        );
        if let (Ok(true), Some(notify)) = (r, &self.alua.notify) {
            let initiator = self
                .identity(nexus)
                .map(|i| i.initiator_port)
                .unwrap_or_default();
            notify(&AluaEvent::SetByInitiator { initiator, changes });
        }
    }

    /// Runs `f` on the groups under their lock; if it changed something,
    /// every nexus but `except` gets `cond`.
    fn change_groups(
        &self,
        f: impl FnOnce(&mut Vec<Group>) -> Result<bool, String>,
        cond: Asc,
        except: Option<NexusId>,
    ) -> Result<bool, String> {
        if self.alua.mode() == AluaMode::Off {
            return Err("ALUA is off for this LU".into());
        }
        let mut groups = self.alua.lock();
        let changed = f(&mut groups)?;
        self.alua.note_local(&groups);
        drop(groups);
        if changed {
            self.establish_ua(cond, except);
        }
        Ok(changed)
    }
}

/// Sets one group's state and status; whether the state changed.
fn set_state(
    groups: &mut [Group],
    id: u16,
    state: AccessState,
    status: StatusCode,
) -> Result<bool, String> {
    let g = groups
        .iter_mut()
        .find(|g| g.cfg.id == id)
        .ok_or_else(|| format!("no target port group {id}"))?;
    let changed = g.cfg.state != state;
    g.cfg.state = state;
    g.status = status;
    Ok(changed)
}
