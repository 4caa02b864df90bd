//! Typed views of every RFC 7143 PDU header (RFC 7143 §11.3–§11.19).
//!
//! **Owns:** the BHS layout of each PDU, one module per PDU family. Each
//! PDU is declared once (`pdu!`): its fields, each with the codec that
//! places it in the header, and the bits it always sets; the struct, its
//! decode and its encode (`Layout`) all come from that one list, over
//! offsets named once in the family's module (`fields` names the ones
//! most PDUs share and the codecs). [`Pdu`], the header of any opcode,
//! lists its variants once (`pdus!`).
//!
//! Each type decodes from and encodes to a [`Bhs`]. The data segment and the
//! AHS travel beside the header in a [`crate::Frame`]; lengths are filled in
//! by the frame encoder, so these types never disagree with the bytes sent.

use crate::bhs::{Bhs, Opcode};
use crate::WireError;

/// Declares one PDU from one list: the struct with its fields, and its
/// [`Layout`] (decode and encode), each field read and written by the
/// codec named beside it (`fields::Codec`). `always` lists bits and values
/// every such header carries whatever the fields hold (set before the
/// fields are written).
macro_rules! pdu {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$fmeta:meta])* pub $field:ident: $ty:ty = $codec:expr,)*
        }
        $(always { $($fixed:expr => $value:expr,)* })?
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Default)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl $crate::pdu::Layout for $name {
            #[inline]
            fn read(b: &$crate::bhs::Bhs) -> Result<Self, $crate::WireError> {
                use $crate::pdu::fields::Codec;
                Ok($name {
                    $($field: Codec::<$ty>::get(&$codec, b)?,)*
                })
            }

            #[inline]
            fn write(&self, b: &mut $crate::bhs::Bhs) {
                use $crate::pdu::fields::Codec;
                $($(Codec::put(&$fixed, b, &$value);)*)?
                $(Codec::<$ty>::put(&$codec, b, &self.$field);)*
            }
        }
    };
}

mod async_msg;
mod data;
mod fields;
mod login;
mod logout;
mod nop;
mod reject;
mod scsi;
mod snack;
mod task_mgmt;
mod text;

pub use async_msg::AsyncMessage;
pub use data::{DataIn, DataOut, R2t};
pub use fields::{Lun, Residual, RESERVED_TAG};
pub use login::{LoginRequest, LoginResponse};
pub use logout::{LogoutRequest, LogoutResponse};
pub use nop::{NopIn, NopOut};
pub use reject::Reject;
pub use scsi::{ScsiCommand, ScsiResponse};
pub use snack::SnackRequest;
pub use task_mgmt::{TaskMgmtRequest, TaskMgmtResponse};
pub use text::{TextRequest, TextResponse};

/// One PDU's header layout, implemented once per PDU in its family's
/// module: `read` and `write` side by side, over the same named offsets.
trait Layout: Sized {
    /// The opcode-specific fields of a BHS whose opcode is this PDU's.
    fn read(b: &Bhs) -> Result<Self, WireError>;
    /// Writes the fields into a BHS that [`Bhs::new`] made for this PDU's
    /// opcode (every other byte zero).
    fn write(&self, b: &mut Bhs);
}

/// Defines [`Pdu`] and its opcode dispatch from one list of
/// `Variant = OPCODE` (the variant's type has the variant's name).
macro_rules! pdus {
    ($($(#[$doc:meta])* $variant:ident = $opcode:ident,)*) => {
        /// Any PDU header, decoded by opcode.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum Pdu {
            $($(#[$doc])* $variant($variant),)*
        }

        impl Pdu {
            /// Decodes the opcode-specific fields of a BHS. Unknown opcodes
            /// are an error that carries the opcode, so the caller can
            /// Reject it.
            #[inline]
            pub fn decode(b: &Bhs) -> Result<Pdu, WireError> {
                Ok(match b.opcode() {
                    $(Opcode::$opcode => Pdu::$variant($variant::read(b)?),)*
                    other => return Err(WireError::UnknownOpcode(other)),
                })
            }

            /// Encodes the header. TotalAHSLength and DataSegmentLength are
            /// left 0: the frame encoder sets them from the segments it
            /// actually writes.
            #[inline]
            pub fn encode(&self) -> Bhs {
                let mut b = Bhs::new(self.opcode());
                match self {
                    $(Pdu::$variant(p) => p.write(&mut b),)*
                }
                b
            }

            pub fn opcode(&self) -> Opcode {
                match self {
                    $(Pdu::$variant(_) => Opcode::$opcode,)*
                }
            }
        }
    };
}

pdus! {
    // Initiator PDUs (RFC 7143 §11.1.1).
    NopOut = NOP_OUT,
    ScsiCommand = SCSI_COMMAND,
    TaskMgmtRequest = TASK_MGMT_REQUEST,
    LoginRequest = LOGIN_REQUEST,
    TextRequest = TEXT_REQUEST,
    DataOut = DATA_OUT,
    LogoutRequest = LOGOUT_REQUEST,
    SnackRequest = SNACK_REQUEST,
    // Target PDUs (RFC 7143 §11.1.2).
    NopIn = NOP_IN,
    ScsiResponse = SCSI_RESPONSE,
    TaskMgmtResponse = TASK_MGMT_RESPONSE,
    LoginResponse = LOGIN_RESPONSE,
    TextResponse = TEXT_RESPONSE,
    DataIn = DATA_IN,
    LogoutResponse = LOGOUT_RESPONSE,
    R2t = R2T,
    AsyncMessage = ASYNC_MESSAGE,
    Reject = REJECT,
}

impl Pdu {
    /// ExpStatSN of an initiator PDU (every one carries it, RFC 7143
    /// §11.1.1, in the same place); `None` for a target PDU.
    pub fn exp_stat_sn(&self) -> Option<u32> {
        Some(match self {
            Pdu::NopOut(p) => p.exp_stat_sn,
            Pdu::ScsiCommand(p) => p.exp_stat_sn,
            Pdu::TaskMgmtRequest(p) => p.exp_stat_sn,
            Pdu::LoginRequest(p) => p.exp_stat_sn,
            Pdu::TextRequest(p) => p.exp_stat_sn,
            Pdu::DataOut(p) => p.exp_stat_sn,
            Pdu::LogoutRequest(p) => p.exp_stat_sn,
            Pdu::SnackRequest(p) => p.exp_stat_sn,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests;
