//! Service actions (SPC-4 §4.2.5.3, Annex D.3.3): bits 4..0 of CDB
//! byte 1 of the opcodes that carry one, each meaningful only with its
//! opcode.

// SANITIZE (SBC-4).
pub const SANITIZE_OVERWRITE: u8 = 0x01;
pub const SANITIZE_BLOCK_ERASE: u8 = 0x02;
pub const SANITIZE_CRYPTOGRAPHIC_ERASE: u8 = 0x03;
pub const SANITIZE_EXIT_FAILURE_MODE: u8 = 0x1f;

// THIRD-PARTY COPY OUT (SPC-4 §6.4).
pub const EXTENDED_COPY_LID1: u8 = 0x00;

// THIRD-PARTY COPY IN (SPC-4 §6.4).
pub const RECEIVE_COPY_STATUS_LID1: u8 = 0x00;
pub const RECEIVE_COPY_OPERATING_PARAMETERS: u8 = 0x03;

// SERVICE ACTION IN(16) (SBC-4).
pub const READ_CAPACITY_16: u8 = 0x10;
pub const GET_LBA_STATUS: u8 = 0x12;

// MAINTENANCE IN (SPC-4).
/// REPORT TARGET PORT GROUPS (SPC-5 §6.36).
pub const REPORT_TARGET_PORT_GROUPS: u8 = 0x0a;
pub const REPORT_SUPPORTED_OPERATION_CODES: u8 = 0x0c;
pub const REPORT_SUPPORTED_TASK_MANAGEMENT_FUNCTIONS: u8 = 0x0d;

// MAINTENANCE OUT (SPC-5).
/// SET TARGET PORT GROUPS (SPC-5 §6.44).
pub const SET_TARGET_PORT_GROUPS: u8 = 0x0a;

// PERSISTENT RESERVE IN (SPC-4 §6.15.1).
pub const READ_KEYS: u8 = 0x00;
pub const READ_RESERVATION: u8 = 0x01;
pub const REPORT_CAPABILITIES: u8 = 0x02;
pub const READ_FULL_STATUS: u8 = 0x03;

// PERSISTENT RESERVE OUT (SPC-4 §6.16.2).
pub const REGISTER: u8 = 0x00;
pub const RESERVE: u8 = 0x01;
pub const RELEASE: u8 = 0x02;
pub const CLEAR: u8 = 0x03;
pub const PREEMPT: u8 = 0x04;
pub const PREEMPT_AND_ABORT: u8 = 0x05;
pub const REGISTER_AND_IGNORE_EXISTING_KEY: u8 = 0x06;
pub const REGISTER_AND_MOVE: u8 = 0x07;
