//! Why the target refuses a PDU with a Reject, and which Reason each
//! refusal carries: the one place reasons are chosen (RFC 7143 §11.17.1).
//! The rest of the connection names the rule a PDU broke
//! ([`Violation`]); [`Violation::reason`] maps it to the wire.

use ironlun_wire::{RejectReason, WireError};

/// A rule a received PDU broke, answered with a Reject that quotes its
/// header (RFC 7143 §11.17).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// The data segment's digest did not match (RFC 7143 §7.8).
    #[error("data digest mismatch (RFC 7143 §7.8)")]
    DataDigest,
    /// A data segment over our MaxRecvDataSegmentLength (§13.12).
    #[error("data segment over MaxRecvDataSegmentLength (RFC 7143 §13.12)")]
    SegmentTooLong,
    /// An opcode RFC 7143 does not define (§11.2.1.2).
    #[error("unknown opcode (RFC 7143 §11.2.1.2)")]
    UnknownOpcode,
    /// A header field that does not decode, such as both residual bits
    /// (§11.4.1), or an AHS that does not parse (§11.2.2).
    #[error("invalid PDU field (RFC 7143 §11.2)")]
    InvalidField,
    /// A SNACK, which needs ErrorRecoveryLevel 1 (§11.16, ours is 0).
    #[error("SNACK at ErrorRecoveryLevel 0 (RFC 7143 §11.16)")]
    Snack,
    /// A Login Request in full feature phase (§6.3), or a PDU only a
    /// target sends (§11.1.2).
    #[error("opcode not valid in full feature phase from an initiator (RFC 7143 §11.1)")]
    WrongOpcode,
    /// A new command while a logout is pending (§11.17.1).
    #[error("a command while waiting for logout (RFC 7143 §11.17.1)")]
    WaitingForLogout,
    /// More immediate commands at once than the target takes (§11.17.1).
    #[error("too many immediate commands (RFC 7143 §11.17.1)")]
    TooManyImmediate,
    /// A SCSI command in a discovery session (§4.3).
    #[error("SCSI command in a discovery session (RFC 7143 §4.3)")]
    CommandInDiscovery,
    /// An Initiator Task Tag in use, or the reserved one (§11.2.1.8).
    #[error("initiator task tag in use or reserved (RFC 7143 §11.2.1.8)")]
    TagInUse,
    /// A bidirectional command, which this target does not support.
    #[error("bidirectional command (not supported)")]
    Bidirectional,
    /// Immediate data the negotiated parameters or the command do not
    /// allow (§11.3.4, §13.11, §13.14).
    #[error("immediate data not allowed (RFC 7143 §13.11, §13.14)")]
    ImmediateData,
    /// A Text Request continuing an exchange the target does not hold,
    /// or text that does not parse or is too long (§11.10, §6.1).
    #[error("text request outside an exchange or malformed (RFC 7143 §11.10)")]
    Text,
    /// A NOP-Out with both a valid ITT and a TTT (§11.18.3).
    #[error("NOP-Out with both an ITT and a TTT (RFC 7143 §11.18.3)")]
    NopOutTtt,
    /// A Logout Request with an undefined reason code (§11.14.1).
    #[error("undefined logout reason (RFC 7143 §11.14.1)")]
    LogoutReason,
}

impl Violation {
    /// The Reject Reason that answers the violation (RFC 7143 §11.17.1).
    pub fn reason(self) -> RejectReason {
        use Violation::*;
        match self {
            DataDigest => RejectReason::DATA_DIGEST_ERROR,
            UnknownOpcode | Bidirectional => RejectReason::COMMAND_NOT_SUPPORTED,
            InvalidField | LogoutReason => RejectReason::INVALID_PDU_FIELD,
            WaitingForLogout => RejectReason::WAITING_FOR_LOGOUT,
            TooManyImmediate => RejectReason::IMMEDIATE_COMMAND_REJECT,
            TagInUse => RejectReason::TASK_IN_PROGRESS,
            SegmentTooLong | Snack | WrongOpcode | CommandInDiscovery | ImmediateData | Text
            | NopOutTtt => RejectReason::PROTOCOL_ERROR,
        }
    }

    /// The violation behind a frame or header that did not decode, if it
    /// is one a Reject answers (a header digest error is not: the header
    /// itself cannot be trusted).
    pub fn of_wire(e: &WireError) -> Option<Violation> {
        match e {
            WireError::DataDigest { .. } => Some(Violation::DataDigest),
            WireError::DataSegmentTooLong { .. } => Some(Violation::SegmentTooLong),
            WireError::UnknownOpcode(_) => Some(Violation::UnknownOpcode),
            WireError::InvalidField(_) => Some(Violation::InvalidField),
            WireError::HeaderDigest { .. } | WireError::Text(_) | WireError::TextTooLong { .. } => {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ironlun_wire::{Bhs, Opcode};

    #[test]
    fn wire_errors_become_the_violations_a_reject_answers() {
        let unknown = WireError::UnknownOpcode(Opcode(0x1e));
        assert_eq!(
            Violation::of_wire(&unknown).map(Violation::reason),
            Some(RejectReason::COMMAND_NOT_SUPPORTED)
        );
        let digest = WireError::DataDigest {
            received: 1,
            computed: 2,
            bhs: Box::new(Bhs::new(Opcode::DATA_OUT)),
        };
        assert_eq!(
            Violation::of_wire(&digest).map(Violation::reason),
            Some(RejectReason::DATA_DIGEST_ERROR)
        );
        // A bad header digest leaves no header to quote.
        let header = WireError::HeaderDigest {
            received: 1,
            computed: 2,
        };
        assert_eq!(Violation::of_wire(&header), None);
    }
}
