//! # ironlun-target-core: one target connection's logic, without IO
//!
//! **Owns:** what happens between the protocol core of one connection
//! ([`TargetConnection`](ironlun_proto::target::TargetConnection),
//! ironlun-proto) and the target's logical units
//! ([`LunMap`](ironlun_scsi::LunMap), ironlun-scsi): which commands run
//! at once and which are handed to the driver (staged for a ring, or run
//! where blocking is fine), the answer to a task the protocol failed,
//! task management carried out on the LUs and asked of other sessions,
//! commands of this session ended by another session's task management
//! (TASK ABORTED with TAS=1) and the task management response that waits
//! for them, and the mapping of a device response onto the protocol's result.
//! [`ConnCore`] is synchronous: the daemon (ironlun-target) drives it
//! over a socket with an io_uring and tokio's blocking pool, and the
//! `session` fuzz target (ironlun-fuzz) drives the same code with bytes
//! and a clock it moves itself.
//!
//! **Must not know:** sockets, timers, threads or async runtimes, the
//! session table (other sessions are reached only through
//! [`Action::Signal`], which the driver delivers), PDU encoding.

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

mod abort_wait;
mod action;
mod core;
mod tmf;

pub use abort_wait::{AbortHold, Wake};
pub use action::{Action, Command, Done, Recipients, SessionSignal, Staged};
pub use core::{ConnCore, Dispatch, Lus};
pub use tmf::OTHERS_WAIT_LIMIT;

#[cfg(test)]
mod tests;
