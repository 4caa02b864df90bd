//! Asymmetric logical unit access (ALUA, SPC-5 §5.16): how a LU reached
//! through several target ports (one per gateway of a group) tells the
//! initiator which ports to use.
//!
//! Target ports are grouped into target port groups; each group has an
//! asymmetric access state for the LU (active/optimized,
//! active/non-optimized, standby, unavailable, transitioning) that
//! decides which commands it serves (`state`'s table, SPC-5
//! §5.16.2.4–6) and what the others get (NOT READY, LOGICAL UNIT NOT
//! ACCESSIBLE, with the state). Initiators find the layout in the TPGS
//! field of standard INQUIRY data and the relative target port and target
//! port group designators of VPD page 83h, read every group's state with
//! REPORT TARGET PORT GROUPS and, in explicit mode, set states with SET
//! TARGET PORT GROUPS (`commands`). Every change of state is a unit
//! attention, ASYMMETRIC ACCESS STATE CHANGED, on every I_T nexus of the
//! LU (SPC-5 §5.16.2.7).
//!
//! This module owns the layout ([`AluaConfig`]: which groups exist, their
//! ports, the group of the port commands arrive through) and the states
//! per LU. Who decides a state (the configuration, the operator, a
//! gateway group taking over an image) is the caller's business: it sets
//! them through [`crate::LogicalUnit::set_alua_state`] and its siblings.
//! With [`AluaMode::Off`] (the default) none of this shows: TPGS is 00b
//! and the commands are not offered.

use std::fmt;
use std::str::FromStr;

pub(crate) mod commands;
pub(crate) mod state;

pub use state::{AluaEvent, AluaNotify};

/// The most target port groups a LU reports (a gateway group has a few).
pub const MAX_GROUPS: usize = 16;
/// The most target ports in one group (TARGET PORT COUNT is one byte).
pub const MAX_PORTS_PER_GROUP: usize = 16;

/// Which kinds of ALUA the LU offers: the TPGS field of standard INQUIRY
/// data (SPC-5 §6.7.2, table 148).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AluaMode {
    /// No ALUA (TPGS 00b): REPORT and SET TARGET PORT GROUPS are not
    /// offered, VPD 83h has no target port group designator.
    #[default]
    Off,
    /// The target alone changes states (TPGS 01b).
    Implicit,
    /// Initiators change states with SET TARGET PORT GROUPS (TPGS 10b).
    Explicit,
    /// Both (TPGS 11b).
    Both,
}

impl AluaMode {
    /// The TPGS field's value.
    pub fn tpgs(self) -> u8 {
        match self {
            AluaMode::Off => 0b00,
            AluaMode::Implicit => 0b01,
            AluaMode::Explicit => 0b10,
            AluaMode::Both => 0b11,
        }
    }

    /// Whether SET TARGET PORT GROUPS is offered.
    pub fn explicit(self) -> bool {
        matches!(self, AluaMode::Explicit | AluaMode::Both)
    }

    pub fn name(self) -> &'static str {
        match self {
            AluaMode::Off => "off",
            AluaMode::Implicit => "implicit",
            AluaMode::Explicit => "explicit",
            AluaMode::Both => "both",
        }
    }
}

impl FromStr for AluaMode {
    type Err = String;

    fn from_str(s: &str) -> Result<AluaMode, String> {
        [
            AluaMode::Off,
            AluaMode::Implicit,
            AluaMode::Explicit,
            AluaMode::Both,
        ]
        .into_iter()
        .find(|m| m.name() == s)
        .ok_or_else(|| format!("ALUA mode {s:?}: expected off, implicit, explicit or both"))
    }
}

impl fmt::Display for AluaMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A target port group's asymmetric access state (SPC-5 §5.16.2.4,
/// the ASYMMETRIC ACCESS STATE field of SPC-5 §6.36.2, table 254).
/// LBA dependent and offline are not offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessState {
    ActiveOptimized,
    ActiveNonOptimized,
    Standby,
    Unavailable,
    /// Between two of the others (SPC-5 §5.16.2.6); set by the target
    /// only, never by SET TARGET PORT GROUPS.
    Transitioning,
}

impl AccessState {
    pub const ALL: [AccessState; 5] = [
        AccessState::ActiveOptimized,
        AccessState::ActiveNonOptimized,
        AccessState::Standby,
        AccessState::Unavailable,
        AccessState::Transitioning,
    ];

    /// The field's code.
    pub fn code(self) -> u8 {
        match self {
            AccessState::ActiveOptimized => 0x0,
            AccessState::ActiveNonOptimized => 0x1,
            AccessState::Standby => 0x2,
            AccessState::Unavailable => 0x3,
            AccessState::Transitioning => 0xf,
        }
    }

    /// The state of a code this LU offers.
    pub fn from_code(code: u8) -> Option<AccessState> {
        AccessState::ALL.into_iter().find(|s| s.code() == code)
    }

    /// The name configurations and the management API use.
    pub fn name(self) -> &'static str {
        match self {
            AccessState::ActiveOptimized => "active/optimized",
            AccessState::ActiveNonOptimized => "active/non-optimized",
            AccessState::Standby => "standby",
            AccessState::Unavailable => "unavailable",
            AccessState::Transitioning => "transitioning",
        }
    }

    /// Whether the group serves every command (the active states).
    pub fn active(self) -> bool {
        matches!(
            self,
            AccessState::ActiveOptimized | AccessState::ActiveNonOptimized
        )
    }
}

impl FromStr for AccessState {
    type Err = String;

    fn from_str(s: &str) -> Result<AccessState, String> {
        AccessState::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                format!(
                    "ALUA state {s:?}: expected active/optimized, active/non-optimized, standby, unavailable or transitioning"
                )
            })
    }
}

impl fmt::Display for AccessState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One target port group as the LU reports it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PortGroup {
    /// TARGET PORT GROUP.
    pub id: u16,
    /// RELATIVE TARGET PORT IDENTIFIERs of its ports (one per gateway).
    pub ports: Vec<u16>,
    pub state: AccessState,
    /// The PREF bit: the group is preferred for I/O (SPC-5 §5.16.2.5).
    pub preferred: bool,
}

/// How a LU presents ALUA: the target's group layout with every group's
/// state, and which group the local port is in.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct AluaConfig {
    pub mode: AluaMode,
    /// The group of the target port commands arrive through: the one VPD
    /// 83h names and whose state decides what is served.
    pub local_group: u16,
    /// IMPLICIT TRANSITION TIME in seconds, reported in REPORT TARGET
    /// PORT GROUPS' extended header (0: not specified).
    pub transition_time: u8,
    pub groups: Vec<PortGroup>,
}

impl AluaConfig {
    /// The rules a layout must keep: within [`MAX_GROUPS`] groups of 1 to
    /// [`MAX_PORTS_PER_GROUP`] ports, group identifiers and relative port
    /// identifiers unique, no port 0 (reserved, SPC-5 §7.7.6.5), and the
    /// local group present with `relative_port` (the port commands
    /// arrive through) among its ports. Off needs nothing.
    pub fn validate(&self, relative_port: u16) -> Result<(), String> {
        if self.mode == AluaMode::Off {
            return Ok(());
        }
        if self.groups.is_empty() || self.groups.len() > MAX_GROUPS {
            return Err(format!(
                "{} target port groups (1 to {MAX_GROUPS})",
                self.groups.len()
            ));
        }
        let mut ids = Vec::new();
        let mut ports = Vec::new();
        for g in &self.groups {
            if ids.contains(&g.id) {
                return Err(format!("target port group {} is listed twice", g.id));
            }
            ids.push(g.id);
            if g.ports.is_empty() || g.ports.len() > MAX_PORTS_PER_GROUP {
                return Err(format!(
                    "target port group {} has {} ports (1 to {MAX_PORTS_PER_GROUP})",
                    g.id,
                    g.ports.len()
                ));
            }
            for &p in &g.ports {
                if p == 0 {
                    return Err(format!(
                        "target port group {}: relative port 0 is reserved",
                        g.id
                    ));
                }
                if ports.contains(&p) {
                    return Err(format!("relative port {p} is in two target port groups"));
                }
                ports.push(p);
            }
        }
        let local = self
            .group(self.local_group)
            .ok_or_else(|| format!("the local group {} is not listed", self.local_group))?;
        if !local.ports.contains(&relative_port) {
            return Err(format!(
                "the local group {} does not hold this port (relative port {relative_port})",
                self.local_group
            ));
        }
        Ok(())
    }

    pub fn group(&self, id: u16) -> Option<&PortGroup> {
        self.groups.iter().find(|g| g.id == id)
    }
}

#[cfg(test)]
mod tests;
