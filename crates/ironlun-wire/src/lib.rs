//! # ironlun-wire: the iSCSI wire codec
//!
//! **Owns:** the byte layout of every RFC 7143 PDU (the 48-byte BHS, AHS,
//! data segment and padding; [`pdu`] declares each PDU once), opcodes
//! and the codes PDU fields carry (reject reasons, asynchronous events,
//! task management functions and responses, the service response, login
//! status, logout reasons and results, SNACK types: [`codes`]) as open
//! newtypes, CRC32C header and data
//! digests, text `key=value` segments with their continuation across
//! PDUs, and the queue of encoded PDUs waiting for one vectored write
//! ([`Outbox`]; the socket is the caller's [`Sink`]). The SCSI status a
//! response carries is ironlun-scsi-codes' `Status`; sense data stays
//! bytes here: it belongs to the layers that know SCSI.
//!
//! **Must not know:** sockets, sessions, negotiation rules, sequence-number
//! windows, or anything about SCSI beyond the fact that a CDB is 16 bytes in
//! the BHS. Everything here is a pure function of bytes; nothing panics on
//! input from the network (malformed input is a [`WireError`]).
//!
//! Layout references: RFC 7143 §11 (PDU formats), §6.1 (text format),
//! §13.1 and Appendix B.4 (digests).

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

pub mod bhs;
pub mod codes;
pub mod digest;
pub mod frame;
pub mod outbox;
pub mod pdu;
pub mod text;

pub use bhs::{Bhs, Opcode, BHS_LEN};
pub use codes::{
    AsyncEvent, LoginStatus, LogoutReason, LogoutResult, RejectReason, ServiceResponse, SnackType,
    TmfFunction, TmfResponse,
};
pub use frame::{encode_frame, encode_header, pad_len, Digests, Frame, FrameDecoder};
pub use ironlun_payload::{FileRange, Payload};
pub use outbox::{Outbox, Sink};
pub use pdu::*;

/// A violation of the wire format. Each variant says which rule was broken;
/// the protocol layer decides whether it costs a Reject, a login failure or
/// the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("unknown opcode {0}")]
    UnknownOpcode(Opcode),
    #[error("invalid field: {0}")]
    InvalidField(&'static str),
    #[error("header digest mismatch (received 0x{received:08x}, computed 0x{computed:08x})")]
    HeaderDigest { received: u32, computed: u32 },
    #[error("data digest mismatch (received 0x{received:08x}, computed 0x{computed:08x})")]
    DataDigest {
        received: u32,
        computed: u32,
        bhs: Box<Bhs>,
    },
    #[error("data segment of {len} bytes exceeds MaxRecvDataSegmentLength {max}")]
    DataSegmentTooLong { len: u32, max: u32, bhs: Box<Bhs> },
    #[error("malformed text: {0}")]
    Text(&'static str),
    #[error("text exceeds the {limit}-byte limit")]
    TextTooLong { limit: usize },
}
