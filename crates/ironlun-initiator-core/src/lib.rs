//! # ironlun-initiator-core: an initiator session's logic, without IO
//!
//! **Owns:** what an initiator session does across its connections,
//! above the protocol state machines of one connection
//! (`ironlun_proto::initiator`'s `InitiatorLogin` and
//! `InitiatorSession`): asking for a connection and logging in on it,
//! the login's deadline, taking requests (and refusing them, each still
//! answered), acting on the target's Asynchronous Messages (a logout it
//! asks for is sent, RFC 7143 §11.9.1; a dropped connection or session
//! ends the connection), logouts and what follows them, unit attention
//! retries reported, taking a lost connection's unfinished SCSI commands
//! back and sending them again after reconnecting with back-off (the
//! same ISID reinstates the session, RFC 7143 §6.3.5), and, when the
//! attempts run out, failing those commands or handing them back for
//! another path (failover). A target reached by several paths is
//! several cores, one session each with its own ISID; [`ChoosePath`]
//! (`path.rs`) is the hook that picks the path for a command, and a
//! command moves between paths as an orphan
//! ([`poll_orphan`](InitiatorCore::poll_orphan),
//! [`hand_back_held`](InitiatorCore::hand_back_held)).
//!
//! [`InitiatorCore`] is synchronous. The tokio driver
//! (`ironlun-initiator`'s `session.rs`) drives it over a socket, and the
//! `initiator` fuzz target (`ironlun-fuzz`) drives the same code with
//! bytes and a clock it moves itself.
//!
//! # Contract (sans-IO)
//! Inputs, each with the time where time matters:
//! [`handle_connected`](InitiatorCore::handle_connected),
//! [`handle_frame`](InitiatorCore::handle_frame) (login and full feature
//! phase alike, framed with [`decoder`](InitiatorCore::decoder)),
//! [`handle_frame_error`](InitiatorCore::handle_frame_error),
//! [`handle_connection_lost`](InitiatorCore::handle_connection_lost),
//! [`handle_timeout`](InitiatorCore::handle_timeout),
//! [`handle_request`](InitiatorCore::handle_request) (while
//! [`accepts_requests`](InitiatorCore::accepts_requests)),
//! [`handle_close`](InitiatorCore::handle_close).
//! Outputs: [`poll_transmit`](InitiatorCore::poll_transmit) (PDUs to write
//! with [`digests`](InitiatorCore::digests), in order),
//! [`poll_completion`](InitiatorCore::poll_completion),
//! [`poll_orphan`](InitiatorCore::poll_orphan),
//! [`poll_event`](InitiatorCore::poll_event) ([`Event`]: connect,
//! disconnect, logged in, failures, the end; every error is an event),
//! [`poll_timeout`](InitiatorCore::poll_timeout).
//! For a multipath caller: [`path_view`](InitiatorCore::path_view) and
//! [`hand_back_held`](InitiatorCore::hand_back_held).
//!
//! **Must not know:** sockets, name resolution, timers, tasks, channels or
//! async runtimes, where randomness comes from (the driver passes the
//! login's nonce), PDU layouts and encoding (ironlun-wire), negotiation
//! and the rules of one connection's exchanges (ironlun-proto), what
//! callers do with replies (SCSI helpers, multipath's choice of path).

#![forbid(unsafe_code)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

mod config;
mod core;
mod event;
mod link;
mod logout;
mod path;
mod request;

pub use config::{CoreConfig, ReconnectPolicy, LOGOUT_WAIT};
pub use core::InitiatorCore;
pub use event::{End, Event, LoginFailure, Phase};
pub use path::{best_state, ChoosePath, LeastQueueDepth, PathState, PathView, RoundRobin};
pub use request::Request;

#[cfg(test)]
mod tests;
