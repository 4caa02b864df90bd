//! Login Request and Login Response (RFC 7143 §11.12, §11.13), each
//! header's fields decoded beside their encoding. The two share byte 1
//! (T, C, CSG, NSG), the version bytes, the ISID and the TSIH.

use super::fields::{flag, CMD_SN, EXP_CMD_SN, EXP_STAT_SN, FLAGS, MAX_CMD_SN, STAT_SN, TTT};
use super::Layout;
use crate::bhs::Bhs;
use crate::codes::LoginStatus;
use crate::WireError;

/// Byte 1: T (transit) bit (§11.12.1).
const T_BIT: u8 = 0x80;
/// Byte 1: C (continue) bit (§11.12.2).
const C_BIT: u8 = 0x40;
/// Version-max (§11.12.4).
const VERSION_MAX: usize = 2;
/// Version-min of a request (§11.12.5), Version-active of a response
/// (§11.13.2).
const VERSION_OTHER: usize = 3;
/// ISID (§11.12.6).
const ISID: usize = 8;
const ISID_LEN: usize = 6;
/// TSIH (§11.12.7).
const TSIH: usize = 14;
/// CID of a request (§11.12.8), where other requests carry the TTT.
const CID: usize = TTT;
/// Status-Class and Status-Detail of a response, one 16-bit word
/// (§11.13.5).
const STATUS: usize = 36;

/// The stage bits of byte 1: T, C, CSG and NSG (§11.12.1–§11.12.3).
struct Stages {
    transit: bool,
    cont: bool,
    csg: u8,
    nsg: u8,
}

impl Stages {
    fn read(b: &Bhs) -> Stages {
        let b1 = b.byte(FLAGS);
        Stages {
            transit: b1 & T_BIT != 0,
            cont: b1 & C_BIT != 0,
            csg: (b1 >> 2) & 0x03,
            nsg: b1 & 0x03,
        }
    }
}

/// Byte 1 from the stage bits.
fn set_stages(b: &mut Bhs, transit: bool, cont: bool, csg: u8, nsg: u8) {
    b.set_byte(
        FLAGS,
        flag(transit, T_BIT) | flag(cont, C_BIT) | ((csg & 0x03) << 2) | (nsg & 0x03),
    );
}

fn isid_of(b: &Bhs) -> [u8; 6] {
    let mut isid = [0u8; ISID_LEN];
    isid.copy_from_slice(b.bytes(ISID, ISID_LEN));
    isid
}

/// Login Request (RFC 7143 §11.12).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LoginRequest {
    pub transit: bool,
    pub cont: bool,
    pub csg: u8,
    pub nsg: u8,
    pub version_max: u8,
    pub version_min: u8,
    pub isid: [u8; 6],
    pub tsih: u16,
    pub itt: u32,
    pub cid: u16,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
}

impl Layout for LoginRequest {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        let Stages {
            transit,
            cont,
            csg,
            nsg,
        } = Stages::read(b);
        Ok(LoginRequest {
            transit,
            cont,
            csg,
            nsg,
            version_max: b.byte(VERSION_MAX),
            version_min: b.byte(VERSION_OTHER),
            isid: isid_of(b),
            tsih: b.be16(TSIH),
            itt: b.itt(),
            cid: b.be16(CID),
            cmd_sn: b.be32(CMD_SN),
            exp_stat_sn: b.be32(EXP_STAT_SN),
        })
    }

    fn write(&self, b: &mut Bhs) {
        // Login requests always carry the I bit (RFC 7143 §11.12).
        b.set_immediate(true);
        set_stages(b, self.transit, self.cont, self.csg, self.nsg);
        b.set_byte(VERSION_MAX, self.version_max);
        b.set_byte(VERSION_OTHER, self.version_min);
        b.bytes_mut(ISID, ISID_LEN).copy_from_slice(&self.isid);
        b.set_be16(TSIH, self.tsih);
        b.set_itt(self.itt);
        b.set_be16(CID, self.cid);
        b.set_be32(CMD_SN, self.cmd_sn);
        b.set_be32(EXP_STAT_SN, self.exp_stat_sn);
    }
}

/// Login Response (RFC 7143 §11.13).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LoginResponse {
    pub transit: bool,
    pub cont: bool,
    pub csg: u8,
    pub nsg: u8,
    pub version_max: u8,
    pub version_active: u8,
    pub isid: [u8; 6],
    pub tsih: u16,
    pub itt: u32,
    pub stat_sn: u32,
    pub exp_cmd_sn: u32,
    pub max_cmd_sn: u32,
    /// Status-Class and Status-Detail (§11.13.5).
    pub status: LoginStatus,
}

impl Layout for LoginResponse {
    fn read(b: &Bhs) -> Result<Self, WireError> {
        let Stages {
            transit,
            cont,
            csg,
            nsg,
        } = Stages::read(b);
        Ok(LoginResponse {
            transit,
            cont,
            csg,
            nsg,
            version_max: b.byte(VERSION_MAX),
            version_active: b.byte(VERSION_OTHER),
            isid: isid_of(b),
            tsih: b.be16(TSIH),
            itt: b.itt(),
            stat_sn: b.be32(STAT_SN),
            exp_cmd_sn: b.be32(EXP_CMD_SN),
            max_cmd_sn: b.be32(MAX_CMD_SN),
            status: LoginStatus(b.be16(STATUS)),
        })
    }

    fn write(&self, b: &mut Bhs) {
        set_stages(b, self.transit, self.cont, self.csg, self.nsg);
        b.set_byte(VERSION_MAX, self.version_max);
        b.set_byte(VERSION_OTHER, self.version_active);
        b.bytes_mut(ISID, ISID_LEN).copy_from_slice(&self.isid);
        b.set_be16(TSIH, self.tsih);
        b.set_itt(self.itt);
        b.set_be32(STAT_SN, self.stat_sn);
        b.set_be32(EXP_CMD_SN, self.exp_cmd_sn);
        b.set_be32(MAX_CMD_SN, self.max_cmd_sn);
        b.set_be16(STATUS, self.status.0);
    }
}
