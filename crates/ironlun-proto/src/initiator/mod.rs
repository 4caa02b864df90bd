//! The initiator side of the protocol, sans I/O: [`login`] walks the
//! login stages and negotiates through the same key table as the target,
//! [`session`] runs the full feature phase of one connection.

pub mod login;
pub mod session;

pub use login::{
    default_isid, InitiatorLogin, LoginConfig, LoginError, LoginOutcome, LoginProgress,
};
pub use session::{
    Completed, InitiatorSession, Reply, ScsiReply, ScsiRequest, SessionEvent, SessionLimits,
    SubmitError, TaskError, ATTR_SIMPLE,
};
