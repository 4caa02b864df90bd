//! # ironlun-proto: the iSCSI protocol, sans I/O
//!
//! **Owns:** login and parameter negotiation (the RFC 7143 §13 key table
//! and its result functions, usable by either role), the login stage
//! machine, and the target's full feature phase: the CmdSN window,
//! StatSN, R2T generation and Data-Out tracking, Data-In sequences with
//! phase collapse and residuals, NOP-In/Out, text (SendTargets), logout,
//! task management bookkeeping and Reject; and the initiator's login and
//! full feature phase (tags, the MaxCmdSN window, Data-Out generation,
//! Data-In reassembly); the target's session table (TSIH assignment and
//! session reinstatement, [`sessions`]).
//!
//! **Must not know:** sockets, tasks or runtimes, clocks (time is passed in
//! as `Instant`), storage, or SCSI semantics. A CDB is opaque bytes here;
//! the device layer gives back status, sense and data. Status and sense
//! codes are carried as the named types of ironlun-scsi-codes, not
//! interpreted, with one exception: the initiator recognises UNIT
//! ATTENTION to send a command again. The iSCSI codes of PDU fields
//! (reject reasons, asynchronous events, task management functions and
//! responses) are ironlun-wire's.
//!
//! The interface follows the sans-IO pattern: feed inputs
//! (`handle_frame`, `complete`, `handle_timeout`) and poll outputs
//! (`poll_transmit`, `poll_event`, `poll_timeout`). Every rule is therefore
//! testable deterministically, without sockets (see `tests/`).
//!
//! The initiator side ([`initiator`]) reuses [`keys`], [`negotiate`] and
//! [`window`]: its login and full feature phase follow the same contract.
//!
//! Layout: one folder per role, [`target`] (`login`, then full feature
//! phase: `command`, `session` for NOP and logout, `text`, `tmf`) and
//! [`initiator`] (the same: `login`, then `command`, `session`, `text`,
//! `tmf`); what both share beside them:
//! negotiation ([`keys`], the one table of offered keys [`offers`],
//! [`negotiate`], [`params`]; `negotiate` depends on the others, never
//! the reverse), [`chap`], the
//! command window ([`window`]), Data-Out tracking ([`dataout`]), login
//! status and stage codes ([`login`]), timers ([`timer`]) and the
//! target's session table ([`sessions`]). Both roles take what arrives
//! the same way, as whole frames: `handle_frame` in the login phase and
//! in full feature phase alike.

#![forbid(unsafe_code)]
// Input from the network: every sum, difference and product says how it
// treats overflow (checked for lengths, wrapping for sequence numbers,
// saturating for counters and bounded values).
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

pub mod chap;
pub mod dataout;
pub mod initiator;
pub mod keys;
pub mod login;
pub mod names;
pub mod negotiate;
pub mod offers;
pub mod params;
pub mod sessions;
pub mod target;
pub mod timer;
pub mod window;

use ironlun_wire::{Payload, Pdu};

/// A PDU to send: header fields and data segment. The driver encodes it
/// with the connection's digests; lengths come from the data itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutPdu {
    pub pdu: Pdu,
    pub data: Payload,
}

impl OutPdu {
    pub fn new(pdu: Pdu) -> Self {
        OutPdu {
            pdu,
            data: Payload::default(),
        }
    }
}
