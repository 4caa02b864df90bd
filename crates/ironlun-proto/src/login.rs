//! What both roles of the login phase share: the status codes, the stage
//! numbers and the text limit of login PDUs (RFC 7143 §6.3, §11.12,
//! §11.13). The target's state machine is [`crate::target::login`], the
//! initiator's [`crate::initiator::login`].

/// Login status class and detail (RFC 7143 §11.13.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

    pub fn class(self) -> u8 {
        (self.0 >> 8) as u8
    }

    pub fn detail(self) -> u8 {
        (self.0 & 0xff) as u8
    }

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

impl std::fmt::Display for LoginStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "0x{:04x} ({})", self.0, self.describe())
    }
}

/// Login stage numbers as carried in CSG/NSG (RFC 7143 §11.12.3).
pub(crate) const CSG_SECURITY: u8 = 0;
pub(crate) const CSG_OPERATIONAL: u8 = 1;
pub(crate) const CSG_FULL_FEATURE: u8 = 3;

/// Login PDUs carry at most 8192 bytes of text per PDU (the default
/// MaxRecvDataSegmentLength, in effect until full feature phase).
pub const LOGIN_SEGMENT_MAX: usize = 8192;
