//! Codes that PDU fields carry (RFC 7143 §11): reject reasons,
//! asynchronous events, task management functions and their responses.
//!
//! Open newtypes like [`Opcode`](crate::Opcode): any byte survives
//! decoding (a peer may send a code this side does not know), the
//! constants are the defined ones, and `Display` gives the RFC's name for
//! logs (or the number, for a code without one).

use std::fmt;

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
    }
}
