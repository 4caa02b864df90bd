//! TEST UNIT READY, REQUEST SENSE, START STOP UNIT, REPORT LUNS and
//! REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS.

use crate::cdb::Cdb;
use crate::failure::{store_error, Access};
use crate::lu::LogicalUnit;
use crate::sense::Sense;
use crate::{Request, Response};
use ironlun_scsi_codes::{Asc, SenseKey};

/// TEST UNIT READY (SPC-4 §6.47): the medium is always present; ready
/// unless its store says it cannot take commands until an operator acts
/// (an RBD LU fenced by the cluster: NOT READY, MANUAL INTERVENTION
/// REQUIRED). A store that is only unreachable answers GOOD here: the
/// commands that reach it say so, and it may come back by itself.
pub fn test_unit_ready(
    lu: &LogicalUnit,
    _req: &Request<'_>,
    _cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    lu.backend()
        .ready()
        .map_err(|e| store_error(Access::Ready, None, &e))?;
    Ok(Response::good())
}

/// REQUEST SENSE (SPC-4 §6.29): reports the LU being offline or a
/// sanitize under way, or reports and clears a pending unit attention
/// (one that an ALUA state change raised comes before the state, as it
/// does for other commands), or the local port's group not serving the
/// LU (standby, unavailable, transitioning: SPC-5 §5.16.2), or NO SENSE.
pub fn request_sense(
    lu: &LogicalUnit,
    req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    let desc = cdb.bit(1, 0);
    let alloc = u32::from(cdb.u8(4));
    let sense = lu
        .offline
        .pending_sense()
        .or_else(|| lu.sanitize.pending_sense())
        .or_else(|| lu.take_ua(req.nexus))
        .or_else(|| lu.alua.pending_sense())
        .unwrap_or(Sense::new(SenseKey::NO_SENSE, Asc::NO_ADDITIONAL_SENSE));
    Ok(Response::data(sense.encode(desc).to_vec(), alloc))
}

/// START STOP UNIT (SBC-3 §5.25). A virtual disk has nothing to spin
/// down and is not removable: the unit stays ready (LOEJ is ignored for
/// non-removable media), and a stop flushes unless NO_FLUSH is set.
pub fn start_stop_unit(
    lu: &LogicalUnit,
    _req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    let power_condition = cdb.u8(4) >> 4;
    let no_flush = cdb.bit(4, 2);
    let start = cdb.bit(4, 0);
    if power_condition == 0 && !start && !no_flush {
        lu.flush().map_err(|e| crate::block::flush_error(&e))?;
    }
    Ok(Response::good())
}

/// REPORT LUNS (SPC-4 §6.33).
pub fn report_luns(_lu: &LogicalUnit, req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    report_luns_for(req.map.numbers(), cdb)
}

/// REPORT LUNS for a target's LUN list, whether or not the addressed LUN
/// exists (SPC-4 §6.33: the command works through any LUN).
pub fn report_luns_for(luns: &[u16], cdb: &Cdb<'_>) -> Result<Response, Sense> {
    let alloc = cdb.be32(6);
    if alloc < 16 {
        return Err(Sense::invalid_field(6, None));
    }
    let list: &[u16] = match cdb.u8(2) {
        // All logical units, with or without well-known LUs (none here).
        0x00 | 0x02 => luns,
        // Well-known logical units only: none.
        0x01 => &[],
        _ => return Err(Sense::invalid_field(2, None)),
    };
    // LUN LIST LENGTH: 8 bytes a LUN (a LUN map holds few).
    let list_len = list.len().saturating_mul(8);
    let mut out = Vec::with_capacity(list_len.saturating_add(8));
    out.extend_from_slice(&u32::try_from(list_len).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    for &n in list {
        out.extend_from_slice(&lun_bytes(n));
    }
    Ok(Response::data(out, alloc))
}

/// Single-level LUN: peripheral device addressing below 256, flat space
/// above (SAM-5 §4.7.7).
pub fn lun_bytes(n: u16) -> [u8; 8] {
    let mut b = [0u8; 8];
    if n < 256 {
        b[1] = n as u8;
    } else {
        b[0] = 0x40 | ((n >> 8) as u8 & 0x3f);
        b[1] = (n & 0xff) as u8;
    }
    b
}

/// REPORT SUPPORTED TASK MANAGEMENT FUNCTIONS (SPC-4 §6.40).
pub fn report_supported_tmfs(
    _lu: &LogicalUnit,
    _req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    let repd = cdb.bit(2, 7);
    let alloc = cdb.be32(6);
    if alloc < 4 {
        return Err(Sense::invalid_field(6, None));
    }
    // What the iSCSI transport answers: ABORT TASK, ABORT TASK SET, CLEAR
    // TASK SET, LOGICAL UNIT RESET, QUERY TASK and TARGET RESET; QUERY
    // TASK SET and I_T NEXUS RESET. Not CLEAR ACA (no ACA) nor QUERY
    // ASYNCHRONOUS EVENT.
    let mut d = [0u8; 16];
    d[0] = 0x80 | 0x40 | 0x10 | 0x08 | 0x04 | 0x02;
    d[1] = 0x02 | 0x01;
    let len = if repd {
        // Extended format (SPC-4 §6.40.3): additional data length 0Ch.
        d[3] = 0x0c;
        16
    } else {
        4
    };
    let mut d = d.to_vec();
    d.truncate(len);
    Ok(Response::data(d, alloc))
}

/// PREVENT ALLOW MEDIUM REMOVAL (SBC-3 §5.11). The medium is not
/// removable, so there is nothing to prevent; the command is accepted.
pub fn prevent_allow(
    _lu: &LogicalUnit,
    _req: &Request<'_>,
    _cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    Ok(Response::good())
}

#[cfg(test)]
mod tests;
