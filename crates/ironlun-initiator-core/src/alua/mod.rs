//! Asymmetric logical unit access (ALUA, SPC-5 §5.16) on the initiator's
//! side, without IO: reading what the target reports of its ports
//! (`report.rs`: INQUIRY's TPGS, VPD 83h's relative port and target port
//! group, REPORT TARGET PORT GROUPS, SPC-5 §6.36), the rules (`rules.rs`:
//! which state takes which command and in what order, what sense means
//! the states changed and whether its command may go elsewhere, how
//! long a command waits for a path), and what is known of each path and
//! the choice made from it (`paths.rs`: [`AluaPaths::decide`]).
//!
//! The driver (ironlun-initiator's multipath) sends the commands that
//! read the states, feeds their answers and the sense of failed commands
//! in, and acts on the decision; it owns no ALUA rule.

mod paths;
mod report;
mod rules;

pub use paths::{AluaPaths, Decision, PathAlua};
pub use report::{
    parse_rtpg, parse_vpd83, rtpg_cdb, tpgs, AccessState, PortGroup, PortIdentity, Report,
    ReportError, MAX_GROUPS, RTPG_ALLOCATION,
};
pub use rules::{
    hold_limit, rank, served_in_every_state, AluaSignal, DEFAULT_HOLD, HOLD_REREAD, HOLD_RETRY,
};

#[cfg(test)]
mod tests;
