//! The opcode table (SPC-4 §4.2, SBC-3 §5): one row per command with its
//! handler, CDB usage data and flags. Lookup, reserved-bit checking and
//! REPORT SUPPORTED OPERATION CODES all read this table. Its keys are the
//! opcodes and service actions named in ironlun-scsi-codes.

use crate::alua::commands as alua;
use crate::block;
use crate::cdb::Cdb;
use crate::copy;
use crate::inquiry;
use crate::log_sense;
use crate::lu::LogicalUnit;
use crate::misc;
use crate::mode;
use crate::provisioning;
use crate::reservations::{self, Access};
use crate::sanitize as sanitize_op;
use crate::sense::Sense;
use crate::{Request, Response};
use ironlun_scsi_codes::{opcode, service_action};

pub type Handler = fn(&LogicalUnit, &Request<'_>, &Cdb<'_>) -> Result<Response, Sense>;

/// One supported command.
pub struct OpInfo {
    pub opcode: u8,
    /// Service action, for opcodes that carry one in byte 1.
    pub service_action: Option<u8>,
    pub name: &'static str,
    /// CDB USAGE DATA (SPC-4 §6.35.3): byte 0 is the opcode, every other
    /// byte has a one for each bit the device server looks at. Its length
    /// is the CDB length. Bits outside it must be zero (checked by
    /// [`check_usage`]).
    pub usage: &'static [u8],
    pub handler: Handler,
    /// Allowed through a pending unit attention (SPC-4 §5.14: INQUIRY,
    /// REPORT LUNS, REQUEST SENSE).
    pub ua_exempt: bool,
    /// How reservations affect the command (SPC-4 §5.13.1).
    pub access: Access,
    /// Whether this LU offers the command (UNMAP only when thin, ...).
    pub available: fn(&LogicalUnit) -> bool,
}

/// Commands whose work is not bounded by their data transfer: EXTENDED
/// COPY, WRITE SAME(10/16), UNMAP, SANITIZE.
pub fn runs_long(cdb: &[u8]) -> bool {
    matches!(
        cdb.first().copied(),
        Some(
            opcode::THIRD_PARTY_COPY_OUT
                | opcode::WRITE_SAME_10
                | opcode::WRITE_SAME_16
                | opcode::UNMAP
                | opcode::SANITIZE
        )
    )
}

/// READ(6), READ(10), READ(12), READ(16): their data comes from
/// [`ironlun_backend::Backend::read_payload`] (SBC-4 §5.11–5.14).
pub fn reads_medium(cdb: &[u8]) -> bool {
    cdb.first().copied().is_some_and(block::is_read)
}

/// Opcodes whose byte 1 holds a service action (SPC-4 §4.2.5.3).
fn has_service_action(op: u8) -> bool {
    matches!(
        op,
        opcode::SANITIZE
            | opcode::THIRD_PARTY_COPY_OUT
            | opcode::THIRD_PARTY_COPY_IN
            | opcode::SERVICE_ACTION_IN_16
            | opcode::SERVICE_ACTION_OUT_16
            | opcode::MAINTENANCE_IN
            | opcode::MAINTENANCE_OUT
            | opcode::VARIABLE_LENGTH
    )
}

/// One row of [`OPS`]: the opcode, its service action, the name, the
/// usage data of CDB bytes 1.. (`[...]`, or a layout helper given the
/// flags byte: `cdb10(0x18)`), the handler, the unit attention exemption,
/// the reservation access and, optionally, when the LU offers it. Byte 0
/// of the usage data is the opcode, written once.
macro_rules! op {
    (@row $opcode:expr, $sa:expr, $name:expr, $usage:expr, $handler:expr, $exempt:expr, $access:ident) => {
        op!(@row $opcode, $sa, $name, $usage, $handler, $exempt, $access, always)
    };
    (@row $opcode:expr, $sa:expr, $name:expr, $usage:expr, $handler:expr, $exempt:expr, $access:ident, $avail:expr) => {
        OpInfo {
            opcode: $opcode,
            service_action: $sa,
            name: $name,
            usage: $usage,
            handler: $handler,
            ua_exempt: $exempt,
            access: Access::$access,
            available: $avail,
        }
    };
    ($opcode:expr, $sa:expr, $name:expr, [$($mask:expr),* $(,)?], $($rest:tt)*) => {
        op!(@row $opcode, $sa, $name, &[$opcode, $($mask),*], $($rest)*)
    };
    ($opcode:expr, $sa:expr, $name:expr, $layout:ident($flags:expr), $($rest:tt)*) => {
        op!(@row $opcode, $sa, $name, &$layout($opcode, $flags), $($rest)*)
    };
}

fn always(_: &LogicalUnit) -> bool {
    true
}

fn thin(lu: &LogicalUnit) -> bool {
    lu.thin()
}

fn sanitize(lu: &LogicalUnit) -> bool {
    lu.sanitize_allowed()
}

fn sanitize_thin(lu: &LogicalUnit) -> bool {
    lu.sanitize_allowed() && lu.thin()
}

/// REPORT TARGET PORT GROUPS: with ALUA (SPC-5 §5.16).
fn alua_on(lu: &LogicalUnit) -> bool {
    lu.alua.mode() != crate::alua::AluaMode::Off
}

/// SET TARGET PORT GROUPS: with explicit ALUA.
fn alua_explicit(lu: &LogicalUnit) -> bool {
    lu.alua.mode().explicit()
}

// CDB usage bytes shared by many rows.
const L4: [u8; 4] = [0xff; 4];

/// Every command this device server implements. Usage data has one mask
/// per CDB byte after the opcode; the last byte is CONTROL.
pub static OPS: &[OpInfo] = &[
    op!(
        opcode::TEST_UNIT_READY,
        None,
        "TEST UNIT READY",
        [0, 0, 0, 0, 0x00],
        misc::test_unit_ready,
        false,
        Other
    ),
    op!(
        opcode::REQUEST_SENSE,
        None,
        "REQUEST SENSE",
        [0x01, 0, 0, 0xff, 0x00],
        misc::request_sense,
        true,
        Exempt
    ),
    op!(
        opcode::READ_6,
        None,
        "READ(6)",
        [0x1f, 0xff, 0xff, 0xff, 0x00],
        block::read,
        false,
        Read
    ),
    op!(
        opcode::WRITE_6,
        None,
        "WRITE(6)",
        [0x1f, 0xff, 0xff, 0xff, 0x00],
        block::write,
        false,
        Write
    ),
    op!(
        opcode::INQUIRY,
        None,
        "INQUIRY",
        [0x01, 0xff, 0xff, 0xff, 0x00],
        inquiry::inquiry,
        true,
        Exempt
    ),
    op!(
        opcode::MODE_SELECT_6,
        None,
        "MODE SELECT(6)",
        [0x11, 0, 0, 0xff, 0x00],
        mode::mode_select,
        false,
        Write
    ),
    op!(
        opcode::RESERVE_6,
        None,
        "RESERVE(6)",
        [0, 0, 0, 0, 0x00],
        reservations::reserve,
        false,
        Reservation
    ),
    op!(
        opcode::RELEASE_6,
        None,
        "RELEASE(6)",
        [0, 0, 0, 0, 0x00],
        reservations::release,
        false,
        Reservation
    ),
    op!(
        opcode::MODE_SENSE_6,
        None,
        "MODE SENSE(6)",
        [0x08, 0xff, 0xff, 0xff, 0x00],
        mode::mode_sense,
        false,
        Read
    ),
    op!(
        opcode::START_STOP_UNIT,
        None,
        "START STOP UNIT",
        [0x01, 0x00, 0x0f, 0xf7, 0x00],
        misc::start_stop_unit,
        false,
        Other
    ),
    op!(
        opcode::PREVENT_ALLOW_MEDIUM_REMOVAL,
        None,
        "PREVENT ALLOW MEDIUM REMOVAL",
        [0, 0, 0, 0x03, 0x00],
        misc::prevent_allow,
        false,
        Other
    ),
    op!(
        opcode::READ_CAPACITY_10,
        None,
        "READ CAPACITY(10)",
        [0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x01, 0x00],
        block::read_capacity10,
        false,
        Other
    ),
    op!(
        opcode::READ_10,
        None,
        "READ(10)",
        cdb10(0x18),
        block::read,
        false,
        Read
    ),
    op!(
        opcode::WRITE_10,
        None,
        "WRITE(10)",
        cdb10(0x18),
        block::write,
        false,
        Write
    ),
    op!(
        opcode::WRITE_AND_VERIFY_10,
        None,
        "WRITE AND VERIFY(10)",
        cdb10(0x16),
        block::write,
        false,
        Write
    ),
    op!(
        opcode::VERIFY_10,
        None,
        "VERIFY(10)",
        cdb10(0x16),
        block::verify,
        false,
        Read
    ),
    op!(
        opcode::PRE_FETCH_10,
        None,
        "PRE-FETCH(10)",
        cdb10(0x02),
        block::prefetch,
        false,
        Read
    ),
    op!(
        opcode::SYNCHRONIZE_CACHE_10,
        None,
        "SYNCHRONIZE CACHE(10)",
        cdb10(0x02),
        block::synchronize_cache,
        false,
        Write
    ),
    op!(
        opcode::READ_DEFECT_DATA_10,
        None,
        "READ DEFECT DATA(10)",
        [0x00, 0x1f, 0, 0, 0, 0, 0xff, 0xff, 0x00],
        block::read_defect_data,
        false,
        Read
    ),
    op!(
        opcode::WRITE_SAME_10,
        None,
        "WRITE SAME(10)",
        cdb10(0x18),
        block::write_same,
        false,
        Write
    ),
    op!(
        opcode::UNMAP,
        None,
        "UNMAP",
        [0x01, 0, 0, 0, 0, 0x1f, 0xff, 0xff, 0x00],
        provisioning::unmap,
        false,
        Write,
        thin
    ),
    op!(
        opcode::LOG_SENSE,
        None,
        "LOG SENSE",
        [0x01, 0xff, 0xff, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00],
        log_sense::log_sense,
        false,
        Exempt
    ),
    op!(
        opcode::MODE_SELECT_10,
        None,
        "MODE SELECT(10)",
        [0x11, 0, 0, 0, 0, 0, 0xff, 0xff, 0x00],
        mode::mode_select,
        false,
        Write
    ),
    op!(
        opcode::RESERVE_10,
        None,
        "RESERVE(10)",
        [0, 0, 0, 0, 0, 0, 0, 0, 0x00],
        reservations::reserve,
        false,
        Reservation
    ),
    op!(
        opcode::RELEASE_10,
        None,
        "RELEASE(10)",
        [0, 0, 0, 0, 0, 0, 0, 0, 0x00],
        reservations::release,
        false,
        Reservation
    ),
    op!(
        opcode::MODE_SENSE_10,
        None,
        "MODE SENSE(10)",
        [0x18, 0xff, 0xff, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00],
        mode::mode_sense,
        false,
        Read
    ),
    op!(
        opcode::SANITIZE,
        Some(service_action::SANITIZE_OVERWRITE),
        "SANITIZE OVERWRITE",
        [0xbf, 0, 0, 0, 0, 0, 0xff, 0xff, 0x00],
        sanitize_op::sanitize,
        false,
        Write,
        sanitize
    ),
    op!(
        opcode::SANITIZE,
        Some(service_action::SANITIZE_BLOCK_ERASE),
        "SANITIZE BLOCK ERASE",
        [0xbf, 0, 0, 0, 0, 0, 0xff, 0xff, 0x00],
        sanitize_op::sanitize,
        false,
        Write,
        sanitize_thin
    ),
    op!(
        opcode::SANITIZE,
        Some(service_action::SANITIZE_EXIT_FAILURE_MODE),
        "SANITIZE EXIT FAILURE MODE",
        [0xbf, 0, 0, 0, 0, 0, 0xff, 0xff, 0x00],
        sanitize_op::sanitize,
        false,
        Write,
        sanitize
    ),
    op!(
        opcode::PERSISTENT_RESERVE_IN,
        None,
        "PERSISTENT RESERVE IN",
        [0x1f, 0, 0, 0, 0, 0, 0xff, 0xff, 0x00],
        reservations::persistent_reserve_in,
        false,
        Reservation
    ),
    op!(
        opcode::PERSISTENT_RESERVE_OUT,
        None,
        "PERSISTENT RESERVE OUT",
        [0x1f, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x00],
        reservations::persistent_reserve_out,
        false,
        Reservation
    ),
    op!(
        opcode::THIRD_PARTY_COPY_OUT,
        Some(service_action::EXTENDED_COPY_LID1),
        "EXTENDED COPY(LID1)",
        [0x1f, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00],
        copy::extended_copy,
        false,
        Write
    ),
    op!(
        opcode::THIRD_PARTY_COPY_IN,
        Some(service_action::RECEIVE_COPY_STATUS_LID1),
        "RECEIVE COPY STATUS(LID1)",
        [0x1f, 0xff, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00],
        copy::receive_copy_results,
        false,
        Read
    ),
    op!(
        opcode::THIRD_PARTY_COPY_IN,
        Some(service_action::RECEIVE_COPY_OPERATING_PARAMETERS),
        "RECEIVE COPY OPERATING PARAMETERS",
        [0x1f, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00],
        copy::receive_copy_results,
        false,
        Read
    ),
    op!(
        opcode::READ_16,
        None,
        "READ(16)",
        cdb16(0x18),
        block::read,
        false,
        Read
    ),
    op!(
        opcode::COMPARE_AND_WRITE,
        None,
        "COMPARE AND WRITE",
        [0x1a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0xff, 0x1f, 0x00],
        block::compare_and_write,
        false,
        Write
    ),
    op!(
        opcode::WRITE_16,
        None,
        "WRITE(16)",
        cdb16(0x18),
        block::write,
        false,
        Write
    ),
    op!(
        opcode::ORWRITE_16,
        None,
        "ORWRITE(16)",
        cdb16(0x1a),
        block::orwrite,
        false,
        Write
    ),
    op!(
        opcode::WRITE_AND_VERIFY_16,
        None,
        "WRITE AND VERIFY(16)",
        cdb16(0x16),
        block::write,
        false,
        Write
    ),
    op!(
        opcode::VERIFY_16,
        None,
        "VERIFY(16)",
        cdb16(0x16),
        block::verify,
        false,
        Read
    ),
    op!(
        opcode::PRE_FETCH_16,
        None,
        "PRE-FETCH(16)",
        cdb16(0x02),
        block::prefetch,
        false,
        Read
    ),
    op!(
        opcode::SYNCHRONIZE_CACHE_16,
        None,
        "SYNCHRONIZE CACHE(16)",
        cdb16(0x02),
        block::synchronize_cache,
        false,
        Write
    ),
    op!(
        opcode::WRITE_SAME_16,
        None,
        "WRITE SAME(16)",
        cdb16(0x19),
        block::write_same,
        false,
        Write
    ),
    op!(
        opcode::WRITE_ATOMIC_16,
        None,
        "WRITE ATOMIC(16)",
        [0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0xff, 0xff, 0x1f, 0x00],
        block::write_atomic,
        false,
        Write
    ),
    op!(
        opcode::SERVICE_ACTION_IN_16,
        Some(service_action::READ_CAPACITY_16),
        "READ CAPACITY(16)",
        [
            0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            0x00
        ],
        block::read_capacity16,
        false,
        Other
    ),
    op!(
        opcode::SERVICE_ACTION_IN_16,
        Some(service_action::GET_LBA_STATUS),
        "GET LBA STATUS",
        [
            0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00,
            0x00
        ],
        provisioning::get_lba_status,
        false,
        Read,
        always
    ),
    op!(
        opcode::REPORT_LUNS,
        None,
        "REPORT LUNS",
        [0x00, 0xff, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00],
        misc::report_luns,
        true,
        Exempt
    ),
    op!(
        opcode::MAINTENANCE_IN,
        Some(service_action::REPORT_TARGET_PORT_GROUPS),
        "REPORT TARGET PORT GROUPS",
        [0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00],
        alua::report_target_port_groups,
        false,
        Exempt,
        alua_on
    ),
    op!(
        opcode::MAINTENANCE_IN,
        Some(service_action::REPORT_SUPPORTED_OPERATION_CODES),
        "REPORT SUPPORTED OPERATION CODES",
        [0x1f, 0x87, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00],
        report_supported_opcodes,
        false,
        Exempt
    ),
    op!(
        opcode::MAINTENANCE_IN,
        Some(service_action::REPORT_SUPPORTED_TASK_MANAGEMENT_FUNCTIONS),
        "REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS",
        [0x1f, 0x80, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00],
        misc::report_supported_tmfs,
        false,
        Exempt
    ),
    op!(
        opcode::MAINTENANCE_OUT,
        Some(service_action::SET_TARGET_PORT_GROUPS),
        "SET TARGET PORT GROUPS",
        [0x1f, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00],
        alua::set_target_port_groups,
        false,
        Write,
        alua_explicit
    ),
    op!(
        opcode::READ_12,
        None,
        "READ(12)",
        cdb12(0x18),
        block::read,
        false,
        Read
    ),
    op!(
        opcode::WRITE_12,
        None,
        "WRITE(12)",
        cdb12(0x18),
        block::write,
        false,
        Write
    ),
    op!(
        opcode::WRITE_AND_VERIFY_12,
        None,
        "WRITE AND VERIFY(12)",
        cdb12(0x16),
        block::write,
        false,
        Write
    ),
    op!(
        opcode::VERIFY_12,
        None,
        "VERIFY(12)",
        cdb12(0x16),
        block::verify,
        false,
        Read
    ),
    op!(
        opcode::READ_DEFECT_DATA_12,
        None,
        "READ DEFECT DATA(12)",
        [0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00],
        block::read_defect_data,
        false,
        Read
    ),
];

/// Usage data of a 10-byte LBA(4)/group/length(2) CDB (SBC-3 §5).
const fn cdb10(op: u8, flags: u8) -> [u8; 10] {
    [
        op, flags, L4[0], L4[1], L4[2], L4[3], 0x1f, 0xff, 0xff, 0x00,
    ]
}

/// Usage data of a 12-byte LBA(4)/length(4)/group CDB.
const fn cdb12(op: u8, flags: u8) -> [u8; 12] {
    [
        op, flags, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f, 0x00,
    ]
}

/// Usage data of a 16-byte LBA(8)/length(4)/group CDB.
const fn cdb16(op: u8, flags: u8) -> [u8; 16] {
    [
        op, flags, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x1f,
        0x00,
    ]
}

impl std::fmt::Debug for OpInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Finds the row for a CDB: INVALID COMMAND OPERATION CODE for an unknown
/// opcode, INVALID FIELD IN CDB for an unknown service action
/// (SPC-4 §4.2.5.3).
pub fn lookup(lu: &LogicalUnit, cdb: &Cdb<'_>) -> Result<&'static OpInfo, Sense> {
    let opcode = cdb.opcode();
    let offered = OPS
        .iter()
        .filter(|o| o.opcode == opcode && (o.available)(lu));
    if has_service_action(opcode) {
        let sa = cdb.u8(1) & 0x1f;
        let mut any = false;
        for op in offered {
            any = true;
            if op.service_action == Some(sa) {
                return Ok(op);
            }
        }
        return Err(if any {
            Sense::invalid_field(1, Some(4))
        } else {
            Sense::invalid_opcode()
        });
    }
    offered.into_iter().next().ok_or_else(Sense::invalid_opcode)
}

/// Reserved bits must be zero (SPC-4 §4.2.1): any bit set outside the
/// usage data is INVALID FIELD IN CDB, pointing at the highest such bit.
/// The control byte's vendor-specific bits (7..6) are ignored; its NACA
/// bit is refused because ACA is not supported (SAM-5 §5.9).
pub fn check_usage(op: &OpInfo, cdb: &Cdb<'_>) -> Result<(), Sense> {
    let last = op.usage.len().saturating_sub(1);
    for (i, &mask) in op.usage.iter().enumerate().skip(1) {
        let allowed = if i == last { mask | 0xc0 } else { mask };
        let extra = cdb.u8(i) & !allowed;
        if extra != 0 {
            // The highest bit set (`extra` is not zero).
            let bit = extra.ilog2() as u8;
            return Err(Sense::invalid_field(i as u16, Some(bit)));
        }
    }
    Ok(())
}

/// REPORT SUPPORTED OPERATION CODES (SPC-4 §6.35).
fn report_supported_opcodes(
    lu: &LogicalUnit,
    _req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    let rctd = cdb.bit(2, 7);
    let options = cdb.u8(2) & 0x07;
    let req_op = cdb.u8(3);
    let req_sa = cdb.be16(4);
    let alloc = cdb.be32(6);
    // Command timeouts descriptor (SPC-4 §6.35.4): no nominal or
    // recommended timeout is specified (zero).
    let timeouts = [0u8, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let mut out = Vec::new();
    match options {
        0 => {
            out.extend_from_slice(&[0; 4]);
            for op in OPS.iter().filter(|o| (o.available)(lu)) {
                out.push(op.opcode);
                out.push(0);
                out.extend_from_slice(&u16::from(op.service_action.unwrap_or(0)).to_be_bytes());
                out.push(0);
                out.push(u8::from(rctd) << 1 | u8::from(op.service_action.is_some()));
                out.extend_from_slice(&(op.usage.len() as u16).to_be_bytes());
                if rctd {
                    out.extend_from_slice(&timeouts);
                }
            }
            // The 4-byte header is not counted.
            let len = u32::try_from(out.len().saturating_sub(4)).unwrap_or(u32::MAX);
            out.splice(0..4, len.to_be_bytes());
        }
        1..=3 => {
            let sa_based = has_service_action(req_op);
            // 001b: opcode without service action; 010b: with one;
            // 011b: either (SPC-4 table 389).
            if (options == 1 && sa_based) || (options == 2 && !sa_based) {
                return Err(Sense::invalid_field(2, Some(2)));
            }
            let found = OPS.iter().find(|o| {
                o.opcode == req_op
                    && (o.available)(lu)
                    && (!sa_based || o.service_action == Some(req_sa as u8))
            });
            match found {
                Some(op) => {
                    out.push(0);
                    out.push(u8::from(rctd) << 7 | 0x03); // SUPPORT = 011b
                    out.extend_from_slice(&(op.usage.len() as u16).to_be_bytes());
                    out.extend_from_slice(op.usage);
                    if rctd {
                        out.extend_from_slice(&timeouts);
                    }
                }
                None => {
                    // SUPPORT = 001b: not supported.
                    out.extend_from_slice(&[0, 0x01, 0, 0]);
                }
            }
        }
        _ => return Err(Sense::invalid_field(2, Some(2))),
    }
    Ok(Response::data(out, alloc))
}

#[cfg(test)]
mod tests;
