//! Login Request and Login Response (RFC 7143 §11.12, §11.13), each
//! declared once. The two share byte 1 (T, C, CSG, NSG), the version
//! bytes, the ISID and the TSIH.

use super::fields::{
    Bits, Byte, Codec, Flag, Half, Octets, CMD_SN, EXP_CMD_SN, EXP_STAT_SN, FLAGS, IMMEDIATE, ITT,
    MAX_CMD_SN, STAT_SN,
};
use crate::bhs::Bhs;
use crate::codes::LoginStatus;
use crate::WireError;

/// Byte 1: T (transit) and C (continue) bits (§11.12.1, §11.12.2).
const TRANSIT: Flag = Flag(FLAGS, 0x80);
const CONTINUE: Flag = Flag(FLAGS, 0x40);
/// Byte 1: CSG in bits 2..3, NSG in bits 0..1 (§11.12.3).
const CSG: Bits = Bits {
    at: FLAGS,
    mask: 0x03,
    shift: 2,
};
const NSG: Bits = Bits {
    at: FLAGS,
    mask: 0x03,
    shift: 0,
};
/// Version-max (§11.12.4); Version-min of a request (§11.12.5),
/// Version-active of a response (§11.13.2).
const VERSION_MAX: Byte = Byte(2);
const VERSION_OTHER: Byte = Byte(3);
/// ISID (§11.12.6) and TSIH (§11.12.7).
const ISID: Octets = Octets(8);
const TSIH: Half = Half(14);
/// CID of a request (§11.12.8).
const CID: Half = Half(20);
/// Status-Class and Status-Detail of a response, one 16-bit word
/// (§11.13.5).
const STATUS: Half = Half(36);

impl Codec<LoginStatus> for Half {
    #[inline]
    fn get(&self, b: &Bhs) -> Result<LoginStatus, WireError> {
        Ok(LoginStatus(b.be16(self.0)))
    }

    #[inline]
    fn put(&self, b: &mut Bhs, v: &LoginStatus) {
        b.set_be16(self.0, v.0);
    }
}

pdu! {
    /// Login Request (RFC 7143 §11.12).
    pub struct LoginRequest {
        pub transit: bool = TRANSIT,
        pub cont: bool = CONTINUE,
        pub csg: u8 = CSG,
        pub nsg: u8 = NSG,
        pub version_max: u8 = VERSION_MAX,
        pub version_min: u8 = VERSION_OTHER,
        pub isid: [u8; 6] = ISID,
        pub tsih: u16 = TSIH,
        pub itt: u32 = ITT,
        pub cid: u16 = CID,
        pub cmd_sn: u32 = CMD_SN,
        pub exp_stat_sn: u32 = EXP_STAT_SN,
    }
    // Login requests always carry the I bit (RFC 7143 §11.12).
    always { IMMEDIATE => true, }
}

pdu! {
    /// Login Response (RFC 7143 §11.13).
    pub struct LoginResponse {
        pub transit: bool = TRANSIT,
        pub cont: bool = CONTINUE,
        pub csg: u8 = CSG,
        pub nsg: u8 = NSG,
        pub version_max: u8 = VERSION_MAX,
        pub version_active: u8 = VERSION_OTHER,
        pub isid: [u8; 6] = ISID,
        pub tsih: u16 = TSIH,
        pub itt: u32 = ITT,
        pub stat_sn: u32 = STAT_SN,
        pub exp_cmd_sn: u32 = EXP_CMD_SN,
        pub max_cmd_sn: u32 = MAX_CMD_SN,
        /// Status-Class and Status-Detail (§11.13.5).
        pub status: LoginStatus = STATUS,
    }
}
