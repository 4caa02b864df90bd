//! Errors of the initiator, each saying which layer failed.

use std::io;

use ironlun_proto::initiator::{LoginError, SubmitError, TaskError};
use ironlun_scsi_codes::{SenseData, Status};
use ironlun_wire::ServiceResponse;

use crate::url::UrlError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Url(#[from] UrlError),
    #[error("login to {portal}: {source}")]
    Login {
        portal: String,
        #[source]
        source: LoginError,
    },
    #[error("login to {portal} did not finish within {secs} s")]
    LoginTimeout { portal: String, secs: u64 },
    #[error(transparent)]
    Task(#[from] TaskError),
    #[error(transparent)]
    Submit(#[from] SubmitError),
    /// CHECK CONDITION with decoded sense (SPC-5 §4.4).
    #[error("CHECK CONDITION: {0}")]
    Check(SenseData),
    /// TASK ABORTED (SAM-5 §5.3.1): another initiator's task management
    /// (LOGICAL UNIT RESET, CLEAR TASK SET, target reset, PREEMPT AND
    /// ABORT) ended the command on an LU whose control page has TAS=1.
    /// The command may or may not have taken effect; it can be sent again.
    #[error("TASK ABORTED: another initiator's task management ended the command (SAM-5 §5.6)")]
    TaskAborted,
    /// Any other non-GOOD status (SAM-5 §5.3.1).
    #[error("SCSI status 0x{code:02x} ({name})", code = .0.0, name = .0.name().unwrap_or("unknown"))]
    Status(Status),
    /// The iSCSI response code was not "command completed at target".
    #[error("iSCSI response {0} (RFC 7143 §11.4.3)")]
    Response(ServiceResponse),
    #[error("the target's reply was malformed: {0}")]
    Malformed(String),
    #[error("the session is closed")]
    Closed,
    #[error("no path is usable: {0}")]
    NoPath(String),
}

impl Error {
    #[must_use]
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
