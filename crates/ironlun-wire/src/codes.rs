//! Codes that PDU fields carry (RFC 7143 §11): reject reasons,
//! asynchronous events, task management functions and their responses,
//! the service response of a SCSI Response, login status, logout reasons
//! and results, SNACK types.
//!
//! Open newtypes like [`Opcode`](crate::Opcode): any byte survives
//! decoding (a peer may send a code this side does not know), the
//! constants are the defined ones, and `Display` gives the RFC's name for
//! logs (or the number, for a code without one).

use std::fmt;

/// A code carried in (part of) one byte of a header: any byte is a value,
/// so decoding never fails and an unknown code round-trips.
pub(crate) trait ByteCode: Copy {
    fn from_byte(b: u8) -> Self;
    fn to_byte(self) -> u8;
}

impl ByteCode for u8 {
    #[inline]
    fn from_byte(b: u8) -> Self {
        b
    }

    #[inline]
    fn to_byte(self) -> u8 {
        self
    }
}

/// SCSI status (SAM-5 §5.3.1), named by ironlun-scsi-codes.
impl ByteCode for ironlun_scsi_codes::Status {
    #[inline]
    fn from_byte(b: u8) -> Self {
        ironlun_scsi_codes::Status(b)
    }

    #[inline]
    fn to_byte(self) -> u8 {
        self.0
    }
}

/// Defines the named constants of a code newtype, its `name`, and
/// `Display`/`Debug` that show the name, from one list.
macro_rules! codes {
    ($(#[$meta:meta])* $ty:ident { $($(#[$doc:meta])* $name:ident = $value:expr, $text:literal;)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $ty(pub u8);

        impl $ty {
            $($(#[$doc])* pub const $name: $ty = $ty($value);)*

            /// The RFC's name of a defined code.
            pub fn name(self) -> Option<&'static str> {
                match self {
                    $(Self::$name => Some($text),)*
                    _ => None,
                }
            }
        }

        impl ByteCode for $ty {
            #[inline]
            fn from_byte(b: u8) -> Self {
                $ty(b)
            }

            #[inline]
            fn to_byte(self) -> u8 {
                self.0
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "0x{:02x}", self.0),
                }
            }
        }

        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => write!(f, "{}({n})", stringify!($ty)),
                    None => write!(f, "{}(0x{:02x})", stringify!($ty), self.0),
                }
            }
        }
    };
}

codes!(
    /// Why a target rejected a PDU: the Reason of a Reject
    /// (RFC 7143 §11.17.1).
    RejectReason {
        DATA_DIGEST_ERROR = 0x02, "Data (payload) digest error";
        SNACK_REJECT = 0x03, "SNACK Reject";
        PROTOCOL_ERROR = 0x04, "Protocol Error";
        COMMAND_NOT_SUPPORTED = 0x05, "Command not supported";
        /// Too many immediate commands.
        IMMEDIATE_COMMAND_REJECT = 0x06, "Immediate command reject";
        TASK_IN_PROGRESS = 0x07, "Task in progress";
        INVALID_DATA_ACK = 0x08, "Invalid data ack";
        INVALID_PDU_FIELD = 0x09, "Invalid PDU field";
        /// Cannot generate a Target Transfer Tag: out of resources.
        LONG_OPERATION_REJECT = 0x0a, "Long op reject";
        WAITING_FOR_LOGOUT = 0x0c, "Waiting for Logout";
    }
);

codes!(
    /// What an Asynchronous Message announces: its AsyncEvent
    /// (RFC 7143 §11.9.1).
    AsyncEvent {
        /// SCSI sense data in the data segment (a SCSI asynchronous
        /// event).
        SCSI_ASYNC_EVENT = 0, "SCSI Async Event";
        /// Log out within Parameter3 seconds.
        LOGOUT_REQUEST = 1, "Logout Request";
        /// The target will drop the connection (CID in Parameter1).
        CONNECTION_DROP = 2, "Connection Drop";
        /// The target will drop every connection of the session.
        SESSION_DROP = 3, "Session Drop";
        /// Renegotiate parameters with a Text Request.
        NEGOTIATION_REQUEST = 4, "Negotiation Request";
        /// Vendor-specific; the event is in AsyncVCode.
        VENDOR_SPECIFIC = 255, "Vendor Specific";
    }
);

codes!(
    /// A task management function: the Function of a Task Management
    /// Function Request (RFC 7143 §11.5.1; 9 to 12 from RFC 7144, SAM-4's
    /// additions).
    TmfFunction {
        ABORT_TASK = 1, "ABORT TASK";
        ABORT_TASK_SET = 2, "ABORT TASK SET";
        CLEAR_ACA = 3, "CLEAR ACA";
        CLEAR_TASK_SET = 4, "CLEAR TASK SET";
        LOGICAL_UNIT_RESET = 5, "LOGICAL UNIT RESET";
        TARGET_WARM_RESET = 6, "TARGET WARM RESET";
        TARGET_COLD_RESET = 7, "TARGET COLD RESET";
        TASK_REASSIGN = 8, "TASK REASSIGN";
        QUERY_TASK = 9, "QUERY TASK";
        QUERY_TASK_SET = 10, "QUERY TASK SET";
        I_T_NEXUS_RESET = 11, "I_T NEXUS RESET";
        QUERY_ASYNC_EVENT = 12, "QUERY ASYNCHRONOUS EVENT";
    }
);

codes!(
    /// The outcome of a task management function: the Response of a Task
    /// Management Function Response (RFC 7143 §11.6.1).
    TmfResponse {
        FUNCTION_COMPLETE = 0, "Function complete";
        TASK_DOES_NOT_EXIST = 1, "Task does not exist";
        LUN_DOES_NOT_EXIST = 2, "LUN does not exist";
        TASK_STILL_ALLEGIANT = 3, "Task still allegiant";
        REASSIGNMENT_NOT_SUPPORTED = 4, "Task allegiance reassignment not supported";
        NOT_SUPPORTED = 5, "Task management function not supported";
        AUTHORIZATION_FAILED = 6, "Function authorization failed";
        /// QUERY TASK / QUERY TASK SET found tasks (RFC 7144 §4.6, SAM-5
        /// FUNCTION SUCCEEDED).
        FUNCTION_SUCCEEDED = 7, "Function succeeded";
        REJECTED = 255, "Function rejected";
    }
);

codes!(
    /// The iSCSI service response of a SCSI Response: whether the target
    /// completed the command (RFC 7143 §11.4.3; 0x80 to 0xff are vendor
    /// specific).
    ServiceResponse {
        /// The command completed at the target; its SCSI status says how.
        COMMAND_COMPLETED = 0x00, "Command Completed at Target";
        TARGET_FAILURE = 0x01, "Target Failure";
    }
);

codes!(
    /// What a Logout Request closes: its Reason Code (RFC 7143 §11.14.1).
    LogoutReason {
        CLOSE_SESSION = 0, "close the session";
        CLOSE_CONNECTION = 1, "close the connection";
        /// Remove the connection for recovery (ERL 2).
        REMOVE_FOR_RECOVERY = 2, "remove the connection for recovery";
    }
);

codes!(
    /// The outcome of a logout: the Response of a Logout Response
    /// (RFC 7143 §11.15.1).
    LogoutResult {
        CLOSED = 0, "connection or session closed successfully";
        CID_NOT_FOUND = 1, "CID not found";
        RECOVERY_NOT_SUPPORTED = 2, "connection recovery is not supported";
        CLEANUP_FAILED = 3, "cleanup failed for various reasons";
    }
);

codes!(
    /// What a SNACK Request asks for again: its Type (RFC 7143 §11.16.1).
    SnackType {
        /// Data-In or R2T PDUs, by DataSN/R2TSN.
        DATA_R2T = 0, "Data/R2T SNACK";
        /// Responses, by StatSN.
        STATUS = 1, "Status SNACK";
        /// Acknowledges Data-In up to BegRun (DataACK).
        DATA_ACK = 2, "DataACK";
        /// Data-In again, resegmented (R-Data SNACK).
        R_DATA = 3, "R-Data SNACK";
    }
);

/// Login status class and detail (RFC 7143 §11.13.5).
///
/// Class in the high byte, detail in the low: 0 success, 1 redirection,
/// 2 initiator error, 3 target error. Any pair survives decoding; the
/// constants are the defined ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct LoginStatus(pub u16);

impl LoginStatus {
    pub const SUCCESS: LoginStatus = LoginStatus(0x0000);
    pub const TARGET_MOVED_TEMPORARILY: LoginStatus = LoginStatus(0x0101);
    pub const TARGET_MOVED_PERMANENTLY: LoginStatus = LoginStatus(0x0102);
    pub const INITIATOR_ERROR: LoginStatus = LoginStatus(0x0200);
    pub const AUTHENTICATION_FAILURE: LoginStatus = LoginStatus(0x0201);
    pub const AUTHORIZATION_FAILURE: LoginStatus = LoginStatus(0x0202);
    pub const NOT_FOUND: LoginStatus = LoginStatus(0x0203);
    pub const TARGET_REMOVED: LoginStatus = LoginStatus(0x0204);
    pub const UNSUPPORTED_VERSION: LoginStatus = LoginStatus(0x0205);
    pub const TOO_MANY_CONNECTIONS: LoginStatus = LoginStatus(0x0206);
    pub const MISSING_PARAMETER: LoginStatus = LoginStatus(0x0207);
    pub const CANT_INCLUDE_IN_SESSION: LoginStatus = LoginStatus(0x0208);
    pub const SESSION_TYPE_NOT_SUPPORTED: LoginStatus = LoginStatus(0x0209);
    pub const SESSION_DOES_NOT_EXIST: LoginStatus = LoginStatus(0x020a);
    pub const INVALID_DURING_LOGIN: LoginStatus = LoginStatus(0x020b);
    pub const TARGET_ERROR: LoginStatus = LoginStatus(0x0300);
    pub const SERVICE_UNAVAILABLE: LoginStatus = LoginStatus(0x0301);
    pub const OUT_OF_RESOURCES: LoginStatus = LoginStatus(0x0302);

    /// Status-Class: 0 success, 1 redirection, 2 initiator error, 3
    /// target error.
    pub fn class(self) -> u8 {
        (self.0 >> 8) as u8
    }

    /// Status-Detail, whose meaning depends on the class.
    pub fn detail(self) -> u8 {
        (self.0 & 0xff) as u8
    }

    /// Whether the login may go on (class 0).
    pub fn is_success(self) -> bool {
        self.class() == 0
    }

    /// The RFC's meaning of a defined status, for logs.
    pub fn describe(self) -> &'static str {
        match self {
            Self::SUCCESS => "success",
            Self::TARGET_MOVED_TEMPORARILY => "target moved temporarily",
            Self::TARGET_MOVED_PERMANENTLY => "target moved permanently",
            Self::INITIATOR_ERROR => "initiator error",
            Self::AUTHENTICATION_FAILURE => "authentication failure",
            Self::AUTHORIZATION_FAILURE => "authorization failure",
            Self::NOT_FOUND => "target not found",
            Self::TARGET_REMOVED => "target removed",
            Self::UNSUPPORTED_VERSION => "unsupported version",
            Self::TOO_MANY_CONNECTIONS => "too many connections",
            Self::MISSING_PARAMETER => "missing parameter",
            Self::CANT_INCLUDE_IN_SESSION => "can't include in session",
            Self::SESSION_TYPE_NOT_SUPPORTED => "session type not supported",
            Self::SESSION_DOES_NOT_EXIST => "session does not exist",
            Self::INVALID_DURING_LOGIN => "invalid request during login",
            Self::TARGET_ERROR => "target error",
            Self::SERVICE_UNAVAILABLE => "service unavailable",
            Self::OUT_OF_RESOURCES => "out of resources",
            _ => "unknown status",
        }
    }
}

impl fmt::Display for LoginStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:04x} ({})", self.0, self.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_numbers_and_unknowns() {
        assert_eq!(RejectReason::PROTOCOL_ERROR.0, 0x04);
        assert_eq!(RejectReason::PROTOCOL_ERROR.to_string(), "Protocol Error");
        assert_eq!(RejectReason(0x0b).to_string(), "0x0b");
        assert_eq!(
            format!("{:?}", TmfFunction::ABORT_TASK),
            "TmfFunction(ABORT TASK)"
        );
        assert_eq!(format!("{:?}", AsyncEvent(9)), "AsyncEvent(0x09)");
        assert_eq!(TmfResponse::default(), TmfResponse::FUNCTION_COMPLETE);
        assert_eq!(AsyncEvent::LOGOUT_REQUEST.name(), Some("Logout Request"));
        assert_eq!(SnackType(7).to_string(), "0x07");
        assert_eq!(LogoutReason::default(), LogoutReason::CLOSE_SESSION);
        assert_eq!(
            ServiceResponse::default(),
            ServiceResponse::COMMAND_COMPLETED
        );
    }

    #[test]
    fn login_status_class_and_detail() {
        let s = LoginStatus::SESSION_DOES_NOT_EXIST;
        assert_eq!((s.class(), s.detail()), (2, 0x0a));
        assert!(!s.is_success());
        assert!(LoginStatus::default().is_success());
        assert_eq!(LoginStatus(0x0310).to_string(), "0x0310 (unknown status)");
    }
}
