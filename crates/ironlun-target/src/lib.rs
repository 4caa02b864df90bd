//! # ironlun-target: the target daemon
//!
//! **Owns:** opening backends, the listening portals, the session
//! registry (the table of ironlun-proto behind a lock, I_T nexus
//! numbers, each session's signal inbox), one async task per connection
//! driving the connection's logic ([`ironlun_target_core::ConnCore`]:
//! protocol core and LUs joined, without IO) over a socket, with an
//! io_uring for file and block LUNs and the blocking pool for commands
//! that may block, delivering its signals to other sessions, timers, the
//! statistics endpoint (JSON over HTTP, and metrics for Prometheus), the
//! state directory's files (saved reservations and sanitize records, named
//! one-to-one; one that does not parse takes only its LU offline), the
//! gateway group's driver, live changes to the running configuration
//! ([`live`]: planned, then carried out on the registry and the portals),
//! the snapshot schedules' decisions and their thread ([`schedule`]), and
//! clean shutdown (stop accepting, stop the control plane, ask initiators
//! to log out, finish commands, flush).
//!
//! **Must not know:** PDU layouts beyond "give me the next frame"
//! (ironlun-wire), protocol rules (ironlun-proto), which command runs
//! where and what task management does (ironlun-target-core), SCSI
//! semantics (ironlun-scsi), how blocks are stored (ironlun-backend),
//! how a configuration is read and checked (ironlun-target-config), or
//! the management API that drives live changes (ironlun-target-admin,
//! run beside the data path through [`server::Control`]).

// This crate keeps unsafe code: every block must say why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

pub mod busy_poll;
mod conn;
pub mod group;
pub mod live;
mod lu_state;
pub mod metrics;
pub mod process;
mod prstore;
pub mod registry;
mod replay;
mod ring;
mod sanitize_store;
pub mod schedule;
pub mod server;
pub mod shared_pr;
mod state_file;
mod state_name;
pub mod stats;
mod store_io;
#[cfg(test)]
mod test_log;

// The configuration is ironlun-target-config's; `crate::config` names
// it here, and the types every caller of [`Server`] needs are
// re-exported.
use ironlun_target_config as config;
pub use ironlun_target_config::{AdminHttp, Config, ConfigError, Overrides};
pub use server::{BindError, Server};
