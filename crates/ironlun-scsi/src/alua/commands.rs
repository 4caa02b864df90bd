//! REPORT TARGET PORT GROUPS (SPC-5 §6.36) and SET TARGET PORT GROUPS
//! (SPC-5 §6.44), and the target port group designator of VPD page 83h
//! (SPC-5 §7.7.6.6).

use ironlun_scsi_codes::{Asc, SenseKey};

use super::state::Group;
use super::AccessState;
use crate::cdb::Cdb;
use crate::lu::LogicalUnit;
use crate::sense::Sense;
use crate::{Request, Response};

/// The states every group supports, the byte after the state in a
/// target port group descriptor: T_SUP, U_SUP, S_SUP, AN_SUP and AO_SUP
/// (not O_SUP, LBD_SUP: offline and LBA dependent are not offered).
pub(crate) const SUPPORTED_STATES: u8 = 0x80 | 0x08 | 0x04 | 0x02 | 0x01;

/// FORMAT TYPE of the extended header (SPC-5 §6.36.2, table 253: 001b in
/// bits 6..4 of byte 4).
const EXTENDED_FORMAT: u8 = 0x10;

/// REPORT TARGET PORT GROUPS: every group with its state, in the
/// length-only format (PARAMETER DATA FORMAT 000b: RETURN DATA LENGTH,
/// then the descriptors) or the extended one (001b: also the IMPLICIT
/// TRANSITION TIME, SPC-5 §6.36.2). RETURN DATA LENGTH counts every byte
/// after it (n - 3), the extended header's included, as Linux's
/// scsi_dh_alua reads it.
pub(crate) fn report_target_port_groups(
    lu: &LogicalUnit,
    _req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    let extended = match cdb.u8(1) >> 5 {
        0 => false,
        1 => true,
        _ => return Err(Sense::invalid_field(1, Some(7))),
    };
    let alloc = cdb.be32(6);
    let mut out = vec![0u8; 4];
    if extended {
        out.extend_from_slice(&[EXTENDED_FORMAT, lu.alua.transition_time(), 0, 0]);
    }
    for g in lu.alua.lock().iter() {
        descriptor(&mut out, g);
    }
    // The header's own 4 bytes are not counted.
    let len = u32::try_from(out.len().saturating_sub(4)).unwrap_or(u32::MAX);
    out.splice(0..4, len.to_be_bytes());
    Ok(Response::data(out, alloc))
}

/// One target port group descriptor (SPC-5 §6.36.2, table 254) and its
/// target port descriptors (table 257).
fn descriptor(out: &mut Vec<u8>, g: &Group) {
    let pref = if g.cfg.preferred { 0x80 } else { 0 };
    out.push(pref | g.cfg.state.code());
    out.push(SUPPORTED_STATES);
    out.extend_from_slice(&g.cfg.id.to_be_bytes());
    out.push(0);
    out.push(g.status as u8);
    out.push(0); // vendor specific
                 // At most MAX_PORTS_PER_GROUP (checked by AluaConfig::validate).
    out.push(u8::try_from(g.cfg.ports.len()).unwrap_or(u8::MAX));
    for p in &g.cfg.ports {
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&p.to_be_bytes());
    }
}

/// SET TARGET PORT GROUPS: sets the states of the groups the parameter
/// list names (four-byte header, then one four-byte descriptor per group:
/// state, reserved, TARGET PORT GROUP; SPC-5 §6.44). All or nothing: a
/// state that cannot be set (transitioning, offline, LBA dependent, an
/// unknown code), an unknown group or a group named twice is INVALID
/// FIELD IN PARAMETER LIST and changes nothing. A list that is not a
/// header and whole descriptors is PARAMETER LIST LENGTH ERROR. A length
/// of zero changes nothing. Other I_T nexuses are told.
pub(crate) fn set_target_port_groups(
    lu: &LogicalUnit,
    req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    let len = cdb.be32(6) as usize;
    if len == 0 {
        return Ok(Response::good());
    }
    let data = req.parameter_list(len);
    // A 4-byte header and whole 4-byte descriptors.
    if len < 4 || len % 4 != 0 || data.len() < len {
        return Err(Sense::new(
            SenseKey::ILLEGAL_REQUEST,
            Asc::PARAMETER_LIST_LENGTH_ERROR,
        ));
    }
    let descriptors = data.get(4..len).unwrap_or(&[]);
    let mut states: Vec<(u16, AccessState)> = Vec::new();
    for (i, d) in descriptors.chunks_exact(4).enumerate() {
        // A field pointer past 65535 (a list over 16383 descriptors, of
        // which all but the groups' few are refused) points at the end.
        let at = u16::try_from(i.saturating_mul(4).saturating_add(4)).unwrap_or(u16::MAX);
        let (state, group) = parse_descriptor(Cdb(d), at)?;
        if !lu.alua.has_group(group) || states.iter().any(|(g, _)| *g == group) {
            return Err(Sense::invalid_param(at.saturating_add(2), None));
        }
        states.push((group, state));
    }
    lu.set_alua_explicitly(req.nexus, &states);
    Ok(Response::written(len as u32))
}

/// One set target port group descriptor at byte `at` of the list: the
/// state (one a SET may ask for) and the group.
fn parse_descriptor(d: Cdb<'_>, at: u16) -> Result<(AccessState, u16), Sense> {
    if d.u8(0) & 0xf0 != 0 {
        // The highest bit set (the byte is not zero).
        let bit = (d.u8(0) & 0xf0).ilog2() as u8;
        return Err(Sense::invalid_param(at, Some(bit)));
    }
    if d.u8(1) != 0 {
        let bit = d.u8(1).ilog2() as u8;
        return Err(Sense::invalid_param(at.saturating_add(1), Some(bit)));
    }
    match AccessState::from_code(d.u8(0) & 0x0f) {
        Some(s) if s != AccessState::Transitioning => Ok((s, d.be16(2))),
        _ => Err(Sense::invalid_param(at, Some(3))),
    }
}

/// The group the target port group designator of VPD page 83h names
/// (SPC-5 §7.7.6.6): the local port's; `None` without ALUA.
pub(crate) fn designated_group(lu: &LogicalUnit) -> Option<u16> {
    (lu.alua.mode() != super::AluaMode::Off).then(|| lu.alua.local_group())
}
