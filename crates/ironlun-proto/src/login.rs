//! What both roles of the login phase share: the status codes, the stage
//! numbers and the text limit of login PDUs (RFC 7143 §6.3, §11.12,
//! §11.13). The target's state machine is [`crate::target::login`], the
//! initiator's [`crate::initiator::login`].

pub use ironlun_wire::LoginStatus;

/// Login stage numbers as carried in CSG/NSG (RFC 7143 §11.12.3).
pub(crate) const CSG_SECURITY: u8 = 0;
pub(crate) const CSG_OPERATIONAL: u8 = 1;
pub(crate) const CSG_FULL_FEATURE: u8 = 3;

/// Login PDUs carry at most 8192 bytes of text per PDU (the default
/// MaxRecvDataSegmentLength, in effect until full feature phase).
pub const LOGIN_SEGMENT_MAX: usize = 8192;
