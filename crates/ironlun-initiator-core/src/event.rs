//! What the core tells its driver besides PDUs and completions.

use std::time::Duration;

use bytes::Bytes;
use ironlun_proto::initiator::{LoginError, LoginOutcome};
use ironlun_wire::{AsyncEvent, LogoutResult, Lun};

/// Where the session is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Between connections: the next is asked for when the back-off ends.
    Waiting,
    /// The driver was asked to open a connection ([`Event::Connect`]).
    Connecting,
    /// Login PDUs are exchanged (RFC 7143 §6.3).
    LoggingIn,
    /// Full feature phase: requests are taken.
    FullFeature,
    /// Over for good.
    Ended,
}

/// Why a login attempt failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoginFailure {
    /// The connection could not be opened or broke during the login, in
    /// the driver's words.
    #[error("{0}")]
    Connection(String),
    /// A Login Response did not frame.
    #[error("malformed login response: {0}")]
    Malformed(String),
    /// The target refused the login or broke a login rule.
    #[error(transparent)]
    Login(#[from] LoginError),
    #[error("the login did not finish within {} s", .0.as_secs())]
    Timeout(Duration),
}

/// Why the session ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// Our logout was answered (RFC 7143 §11.15).
    LoggedOut,
    /// The driver closed the session ([`InitiatorCore::handle_close`](crate::InitiatorCore::handle_close)):
    /// logged out, or there was no connection to log out of.
    Closed,
    /// The first login failed: a session that never began is not retried.
    LoginFailed(LoginFailure),
    /// The connection was lost and every reconnection attempt failed.
    GaveUp { why: String, attempts: u32 },
}

/// Something the driver acts on or reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Open a connection to the portal now; then call
    /// [`handle_connected`](crate::InitiatorCore::handle_connected), or
    /// [`handle_connection_lost`](crate::InitiatorCore::handle_connection_lost)
    /// if it cannot be opened. The login's deadline is
    /// [`poll_timeout`](crate::InitiatorCore::poll_timeout).
    Connect,
    /// The connection is over: close it. What it has not sent is dropped.
    Disconnect,
    /// Full feature phase begins on the connection. `reinstated`: a
    /// login after a lost connection, which ended the old session at the
    /// target (RFC 7143 §6.3.5); `reissued`: the commands taken back
    /// from it and sent again.
    LoggedIn {
        outcome: Box<LoginOutcome>,
        reinstated: bool,
        reissued: usize,
    },
    /// A reconnection attempt failed; another follows, or [`End::GaveUp`].
    LoginFailed(LoginFailure),
    /// The connection failed in full feature phase; `taken_back` SCSI
    /// commands wait for the next login (other tasks failed).
    ConnectionFailed { why: String, taken_back: usize },
    /// A Logout Response arrived; the connection closes. The session
    /// ends ([`Event::Ended`] follows) or, when the target asked for the
    /// logout, logs in again.
    LoggedOut { response: LogoutResult },
    /// An Asynchronous Message (RFC 7143 §11.9), as received. The core
    /// acts on events 1 to 3 (logout requested, connection or session
    /// dropped); the rest are for the driver to report.
    Async {
        event: AsyncEvent,
        parameters: [u16; 3],
        data: Bytes,
    },
    /// A command ended with UNIT ATTENTION and was sent again
    /// (`SessionLimits::unit_attention_retries`).
    UnitAttention { lun: Lun, sense: Bytes },
    /// The session is over; nothing else happens.
    Ended(End),
}
