//! Operation codes: byte 0 of a CDB (SPC-4 §4.2.5.1), listed in numeric
//! order in SPC-4 Annex D.3; the block commands are SBC-4's (§5). Plain
//! `u8`s, because a CDB is bytes: `[opcode::READ_10, 0, ...]`.
//!
//! An opcode whose byte 1 holds a service action (SPC-4 §4.2.5.3) is
//! named by its group (`SERVICE_ACTION_IN_16`, `MAINTENANCE_IN`, ...);
//! the commands inside it are in [`crate::service_action`].

// SPC-4 and SBC-4, 6-byte CDBs (group 0).
pub const TEST_UNIT_READY: u8 = 0x00;
pub const REQUEST_SENSE: u8 = 0x03;
pub const READ_6: u8 = 0x08;
pub const WRITE_6: u8 = 0x0a;
pub const INQUIRY: u8 = 0x12;
pub const MODE_SELECT_6: u8 = 0x15;
pub const RESERVE_6: u8 = 0x16;
pub const RELEASE_6: u8 = 0x17;
pub const MODE_SENSE_6: u8 = 0x1a;
pub const START_STOP_UNIT: u8 = 0x1b;
pub const PREVENT_ALLOW_MEDIUM_REMOVAL: u8 = 0x1e;

// 10-byte CDBs (groups 1 and 2).
pub const READ_CAPACITY_10: u8 = 0x25;
pub const READ_10: u8 = 0x28;
pub const WRITE_10: u8 = 0x2a;
pub const WRITE_AND_VERIFY_10: u8 = 0x2e;
pub const VERIFY_10: u8 = 0x2f;
pub const PRE_FETCH_10: u8 = 0x34;
pub const SYNCHRONIZE_CACHE_10: u8 = 0x35;
pub const READ_DEFECT_DATA_10: u8 = 0x37;
pub const WRITE_SAME_10: u8 = 0x41;
pub const UNMAP: u8 = 0x42;
/// SANITIZE (SBC-4): the operation is its service action.
pub const SANITIZE: u8 = 0x48;
pub const LOG_SENSE: u8 = 0x4d;
pub const MODE_SELECT_10: u8 = 0x55;
pub const RESERVE_10: u8 = 0x56;
pub const RELEASE_10: u8 = 0x57;
pub const MODE_SENSE_10: u8 = 0x5a;
pub const PERSISTENT_RESERVE_IN: u8 = 0x5e;
pub const PERSISTENT_RESERVE_OUT: u8 = 0x5f;

/// A variable length CDB (SPC-4 §4.2.3): the service action is in bytes
/// 8 and 9.
pub const VARIABLE_LENGTH: u8 = 0x7f;

// 16-byte CDBs (group 4).
/// Third-party copy OUT: EXTENDED COPY and its kin (SPC-4 §6.4).
pub const THIRD_PARTY_COPY_OUT: u8 = 0x83;
/// Third-party copy IN: RECEIVE COPY STATUS and its kin (SPC-4 §6.4).
pub const THIRD_PARTY_COPY_IN: u8 = 0x84;
pub const READ_16: u8 = 0x88;
pub const COMPARE_AND_WRITE: u8 = 0x89;
pub const WRITE_16: u8 = 0x8a;
pub const ORWRITE_16: u8 = 0x8b;
pub const WRITE_AND_VERIFY_16: u8 = 0x8e;
pub const VERIFY_16: u8 = 0x8f;
pub const PRE_FETCH_16: u8 = 0x90;
pub const SYNCHRONIZE_CACHE_16: u8 = 0x91;
pub const WRITE_SAME_16: u8 = 0x93;
pub const WRITE_ATOMIC_16: u8 = 0x9c;
/// SERVICE ACTION IN(16): READ CAPACITY(16), GET LBA STATUS, ...
pub const SERVICE_ACTION_IN_16: u8 = 0x9e;
pub const SERVICE_ACTION_OUT_16: u8 = 0x9f;

// 12-byte CDBs (group 5).
pub const REPORT_LUNS: u8 = 0xa0;
/// MAINTENANCE IN: REPORT SUPPORTED OPERATION CODES, ...
pub const MAINTENANCE_IN: u8 = 0xa3;
pub const MAINTENANCE_OUT: u8 = 0xa4;
pub const READ_12: u8 = 0xa8;
pub const WRITE_12: u8 = 0xaa;
pub const WRITE_AND_VERIFY_12: u8 = 0xae;
pub const VERIFY_12: u8 = 0xaf;
pub const READ_DEFECT_DATA_12: u8 = 0xb7;
