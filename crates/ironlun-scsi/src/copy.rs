//! The copy manager: EXTENDED COPY (LID1) with block-to-block segment
//! descriptors between the LUs of one target, and the RECEIVE COPY
//! RESULTS service actions that report on it (SPC-4 §6.4, §6.18, §6.19
//! in SPC-3 numbering: RECEIVE COPY STATUS(LID1) and RECEIVE COPY
//! OPERATING PARAMETERS).
//!
//! Copy targets are named by identification descriptor CSCD descriptors
//! (type E4h) carrying an LU's NAA designator from its Device
//! Identification page; the copy manager reaches every LU of the target
//! the command came through. A copy runs to the end inside the command
//! (the command is long-running: the transport runs it off the network
//! thread), moving data through a bounded buffer.

use std::collections::VecDeque;
use std::num::NonZeroU64;
use std::sync::atomic::Ordering;

use crate::cdb::Cdb;
use crate::inquiry;
use crate::lu::LogicalUnit;
use crate::sense::Sense;
use crate::{NexusId, Request, Response};
use ironlun_scsi_codes::{service_action, Asc, SenseKey, Status};

/// Identification descriptor CSCD descriptor type code (SPC-4 §6.4.5.5).
const IDENTIFICATION_CSCD: u8 = 0xe4;
/// Block device to block device segment descriptor (SPC-4 §6.4.6.5).
const BLOCK_TO_BLOCK: u8 = 0x02;
/// Length of a CSCD descriptor of types E0h..E9h.
const CSCD_LEN: usize = 32;
/// Length of a block-to-block segment descriptor.
const B2B_LEN: usize = 28;
/// Parameter list header (SPC-4 §6.4.3).
const HEADER_LEN: usize = 16;

/// Limits reported by RECEIVE COPY OPERATING PARAMETERS and enforced.
pub const MAX_CSCD_DESCRIPTORS: usize = 8;
pub const MAX_SEGMENT_DESCRIPTORS: usize = 64;
pub const MAX_DESCRIPTOR_LIST_LENGTH: usize = 2048;
/// Longest segment in bytes: 65535 blocks (the 16-bit NUMBER OF BLOCKS) of
/// the largest block size.
pub const MAX_SEGMENT_LENGTH: u32 = 65535 * 4096;
/// EXTENDED COPY commands one LU runs at once; more get BUSY.
pub const MAX_CONCURRENT_COPIES: usize = 16;
/// Completed-copy statuses held per LU for RECEIVE COPY STATUS.
const MAX_HELD: usize = 64;
/// Bytes moved per read/write step.
const CHUNK: usize = 1 << 20;

/// COPY MANAGER STATUS values (SPC-4 §6.20.2 RECEIVE COPY STATUS(LID1)).
const COMPLETED_OK: u8 = 0x00;
const COMPLETED_WITH_ERRORS: u8 = 0x01;

/// The outcome of a finished EXTENDED COPY kept for RECEIVE COPY STATUS
/// (LIST ID USAGE 00b).
#[derive(Clone, Debug)]
pub(crate) struct HeldCopy {
    nexus: NexusId,
    list_id: u8,
    status: u8,
    segments: u16,
    bytes: u64,
}

/// Held statuses of one LU, oldest first, at most [`MAX_HELD`].
#[derive(Default)]
pub(crate) struct HeldCopies(VecDeque<HeldCopy>);

impl HeldCopies {
    fn put(&mut self, h: HeldCopy) {
        self.0
            .retain(|o| !(o.nexus == h.nexus && o.list_id == h.list_id));
        if self.0.len() >= MAX_HELD {
            self.0.pop_front();
        }
        self.0.push_back(h);
    }

    fn take(&mut self, nexus: NexusId, list_id: u8) -> Option<HeldCopy> {
        let i = self
            .0
            .iter()
            .position(|h| h.nexus == nexus && h.list_id == list_id)?;
        self.0.remove(i)
    }

    /// Held data goes with its I_T nexus (SPC-4 §6.4.1).
    pub(crate) fn forget(&mut self, nexus: NexusId) {
        self.0.retain(|h| h.nexus != nexus);
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
}

/// One parsed block-to-block segment.
struct Segment {
    src: usize,
    dst: usize,
    /// DC = 1: NUMBER OF BLOCKS counts destination blocks.
    dest_count: bool,
    blocks: u64,
    src_lba: u64,
    dst_lba: u64,
}

fn param_len_error() -> Sense {
    Sense::new(SenseKey::ILLEGAL_REQUEST, Asc::PARAMETER_LIST_LENGTH_ERROR)
}

fn copy_aborted(code: Asc) -> Sense {
    Sense::new(SenseKey::COPY_ABORTED, code)
}

/// EXTENDED COPY (LID1) (SPC-4 §6.4).
pub fn extended_copy(
    lu: &LogicalUnit,
    req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    let len = cdb.be32(10) as usize;
    if len == 0 {
        // No parameter list: nothing to do (SPC-4 §6.4.1).
        return Ok(Response::good());
    }
    let data = req.parameter_list(len);
    if data.len() < HEADER_LEN {
        return Err(param_len_error());
    }
    let p = Cdb(data);
    let list_id = p.u8(0);
    let usage = (p.u8(1) >> 3) & 0x03;
    let cscd_len = usize::from(p.be16(2));
    let seg_len = p.be32(8) as usize;
    let inline_len = p.be32(12) as usize;
    // Each list within the parameter list, and the descriptor lists within
    // their limit (checked before the counts, SPC-4 §6.4.3).
    if cscd_len.saturating_add(seg_len) > MAX_DESCRIPTOR_LIST_LENGTH {
        return Err(param_len_error());
    }
    let lists_end = HEADER_LEN
        .checked_add(cscd_len)
        .and_then(|n| n.checked_add(seg_len));
    if lists_end
        .and_then(|n| n.checked_add(inline_len))
        .is_none_or(|end| end > data.len())
    {
        return Err(param_len_error());
    }
    // Both lists end within the parameter list (just checked).
    let cscds_end = HEADER_LEN.saturating_add(cscd_len);
    let segs_end = cscds_end.saturating_add(seg_len);
    if usage == 0b01 {
        return Err(Sense::invalid_param(1, Some(4)));
    }
    if usage == 0b11 && list_id != 0 {
        return Err(Sense::invalid_param(0, None));
    }
    if inline_len != 0 {
        // No segment descriptor type that uses inline data is supported.
        return Err(Sense::invalid_param(12, None));
    }
    let cscds = data.get(HEADER_LEN..cscds_end).unwrap_or(&[]);
    let segs = data.get(cscds_end..segs_end).unwrap_or(&[]);
    let targets = parse_cscds(cscds)?;
    let segments = parse_segments(segs, cscds_end)?;

    let Some(_slot) = CopySlot::take(lu) else {
        return Ok(Response {
            status: Status::BUSY,
            ..Response::default()
        });
    };
    let mut bytes = 0u64;
    let mut done = 0u16;
    let mut outcome = Ok(());
    for s in &segments {
        match copy_segment(req, &targets, s) {
            Ok(n) => {
                // At most MAX_SEGMENT_DESCRIPTORS segments of
                // MAX_SEGMENT_LENGTH bytes.
                bytes = bytes.saturating_add(n);
                done = done.saturating_add(1);
            }
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    if usage == 0b00 {
        lu.held_copies().put(HeldCopy {
            nexus: req.nexus,
            list_id,
            status: if outcome.is_ok() {
                COMPLETED_OK
            } else {
                COMPLETED_WITH_ERRORS
            },
            segments: done,
            bytes,
        });
    }
    outcome.map(|()| Response::written(len as u32))
}

/// A place among the LU's concurrent copies, given back on drop.
struct CopySlot<'a>(&'a LogicalUnit);

impl<'a> CopySlot<'a> {
    fn take(lu: &'a LogicalUnit) -> Option<CopySlot<'a>> {
        let n = lu.copies_running.fetch_add(1, Ordering::AcqRel);
        if n >= MAX_CONCURRENT_COPIES {
            lu.copies_running.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(CopySlot(lu))
    }
}

impl Drop for CopySlot<'_> {
    fn drop(&mut self) {
        self.0.copies_running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A CSCD descriptor: the NAA designator it names, or why it cannot be
/// used (reported only if a segment refers to it).
enum Cscd {
    Naa([u8; 8]),
    Unusable(Asc),
}

/// CSCD descriptors (SPC-4 §6.4.5). Only identification descriptors are
/// supported; anything else is UNSUPPORTED TARGET DESCRIPTOR TYPE CODE.
fn parse_cscds(list: &[u8]) -> Result<Vec<Cscd>, Sense> {
    if list.len() % CSCD_LEN != 0 {
        return Err(Sense::invalid_param(2, None));
    }
    if list.len() / CSCD_LEN > MAX_CSCD_DESCRIPTORS {
        return Err(Sense::new(
            SenseKey::ILLEGAL_REQUEST,
            Asc::TOO_MANY_TARGET_DESCRIPTORS,
        ));
    }
    let mut out = Vec::with_capacity(list.len() / CSCD_LEN);
    for d in list.chunks_exact(CSCD_LEN) {
        let d = Cdb(d);
        if d.u8(0) != IDENTIFICATION_CSCD {
            return Err(Sense::new(
                SenseKey::ILLEGAL_REQUEST,
                Asc::UNSUPPORTED_TARGET_DESCRIPTOR_TYPE_CODE,
            ));
        }
        // Byte 1: LU ID TYPE and NUL are ignored (SPC-4 makes NUL
        // obsolete); the peripheral device type must be block (00h).
        if d.u8(1) & 0x1f != 0 {
            out.push(Cscd::Unusable(Asc::INCORRECT_COPY_TARGET_DEVICE_TYPE));
            continue;
        }
        // Designation descriptor in bytes 4..27: NAA (type 3h), binary,
        // eight bytes.
        let naa_type = d.u8(5) & 0x0f == 0x03 && d.u8(4) & 0x0f == 0x01 && d.u8(7) == 8;
        let mut naa = [0u8; 8];
        for (b, i) in naa.iter_mut().zip(8..) {
            *b = d.u8(i);
        }
        out.push(if naa_type {
            Cscd::Naa(naa)
        } else {
            Cscd::Unusable(Asc::UNREACHABLE_COPY_TARGET)
        });
    }
    Ok(out)
}

/// Segment descriptors (SPC-4 §6.4.6); `base` is the list's offset in the
/// parameter list, for field pointers.
fn parse_segments(list: &[u8], base: usize) -> Result<Vec<Segment>, Sense> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < list.len() {
        if out.len() >= MAX_SEGMENT_DESCRIPTORS {
            return Err(Sense::new(
                SenseKey::ILLEGAL_REQUEST,
                Asc::TOO_MANY_SEGMENT_DESCRIPTORS,
            ));
        }
        let rest = list.get(off..).unwrap_or(&[]);
        if rest.len() < 4 {
            return Err(param_len_error());
        }
        let d = Cdb(rest);
        if d.u8(0) != BLOCK_TO_BLOCK {
            return Err(Sense::new(
                SenseKey::ILLEGAL_REQUEST,
                Asc::UNSUPPORTED_SEGMENT_DESCRIPTOR_TYPE_CODE,
            ));
        }
        if usize::from(d.be16(2)) != B2B_LEN - 4 {
            return Err(Sense::invalid_param(param_byte(base, off, 2), None));
        }
        if rest.len() < B2B_LEN {
            return Err(param_len_error());
        }
        if d.bit(1, 0) {
            // CAT = 1 (residue handling) is not supported.
            return Err(Sense::invalid_param(param_byte(base, off, 1), Some(0)));
        }
        out.push(Segment {
            src: usize::from(d.be16(4)),
            dst: usize::from(d.be16(6)),
            dest_count: d.bit(1, 1),
            blocks: u64::from(d.be16(10)),
            src_lba: d.be64(12),
            dst_lba: d.be64(20),
        });
        // `off` < `list.len()`: a slice's length plus 28 fits a usize.
        off = off.saturating_add(B2B_LEN);
    }
    Ok(out)
}

/// The parameter list byte `k` of the descriptor at `off` in the list at
/// `base`, for a field pointer: within HEADER_LEN +
/// MAX_DESCRIPTOR_LIST_LENGTH, which a u16 holds.
fn param_byte(base: usize, off: usize, k: usize) -> u16 {
    u16::try_from(base.saturating_add(off).saturating_add(k)).unwrap_or(u16::MAX)
}

/// The LU a CSCD descriptor names, among those of the target.
fn resolve<'a>(
    req: &Request<'a>,
    targets: &[Cscd],
    index: usize,
) -> Result<&'a LogicalUnit, Sense> {
    match targets.get(index) {
        None => Err(copy_aborted(Asc::UNREACHABLE_COPY_TARGET)),
        Some(Cscd::Unusable(code)) => Err(copy_aborted(*code)),
        Some(Cscd::Naa(naa)) => req
            .map
            .iter()
            .map(|(_, lu)| lu.as_ref())
            .find(|lu| inquiry::naa_designator(lu) == *naa)
            // An offline LU (crate::offline) is not reached either.
            .filter(|lu| !lu.offline.is_on())
            .ok_or_else(|| copy_aborted(Asc::UNREACHABLE_COPY_TARGET)),
    }
}

/// Copies one segment; returns the bytes moved. Errors are COPY ABORTED:
/// the copy stops at this segment (SPC-4 §6.4.4).
fn copy_segment(req: &Request<'_>, targets: &[Cscd], s: &Segment) -> Result<u64, Sense> {
    let src = resolve(req, targets, s.src)?;
    let dst = resolve(req, targets, s.dst)?;
    let (sbs, dbs) = (src.block_bytes(), dst.block_bytes());
    // At most 65535 blocks (a 16-bit count) of 4096 bytes.
    let bytes = s
        .blocks
        .saturating_mul(if s.dest_count { dbs } else { sbs }.get());
    if bytes % sbs != 0 || bytes % dbs != 0 {
        return Err(copy_aborted(Asc::INCORRECT_COPY_TARGET_DEVICE_TYPE));
    }
    let in_range = |lu: &LogicalUnit, lba: u64, bs: NonZeroU64| {
        lba.checked_add(bytes / bs)
            .is_some_and(|end| end <= lu.num_blocks())
    };
    if !in_range(src, s.src_lba, sbs) || !in_range(dst, s.dst_lba, dbs) {
        // The copy target would refuse the LBA: the copy is aborted
        // (SPC-4 §6.4.4) with no more specific code the suite allows.
        return Err(copy_aborted(Asc::NO_ADDITIONAL_SENSE));
    }
    if dst.write_protected_for(req.nexus) {
        return Err(Sense::write_protected());
    }
    let durable = !dst.mode.wce.load(Ordering::Relaxed);
    // Within one LU a destination that overlaps the source further on is
    // copied from the end backwards, so every block is read before it is
    // overwritten (as memmove does).
    // Both ranges lie within their medium, whose size in bytes is a
    // u64: no offset below saturates.
    let (from, to) = (
        s.src_lba.saturating_mul(sbs.get()),
        s.dst_lba.saturating_mul(dbs.get()),
    );
    let backwards = std::ptr::eq(src, dst) && to > from && to < from.saturating_add(bytes);
    let chunk_at = |k: u64| -> Result<(), Sense> {
        // `k` < `bytes.div_ceil(CHUNK)`: `done` < `bytes`.
        let done = k.saturating_mul(CHUNK as u64);
        let n = bytes.saturating_sub(done).min(CHUNK as u64);
        let chunk = {
            let _shared = src.shared_access();
            src.backend
                .read(from.saturating_add(done), n as usize)
                .map_err(|_| {
                    copy_aborted(Asc::NO_ADDITIONAL_SENSE)
                        .with_info(s.src_lba.saturating_add(done / sbs))
                })?
        };
        let at = to.saturating_add(done);
        let _access = dst.write_access(at, n);
        let written = dst.write_through(durable, |b| b.write(at, &chunk, durable));
        written.map_err(|_| {
            copy_aborted(Asc::NO_ADDITIONAL_SENSE).with_info(s.dst_lba.saturating_add(done / dbs))
        })
    };
    let mut chunks = 0..bytes.div_ceil(CHUNK as u64);
    if backwards {
        chunks.rev().try_for_each(chunk_at)?;
    } else {
        chunks.try_for_each(chunk_at)?;
    }
    Ok(bytes)
}

/// RECEIVE COPY RESULTS (SPC-3 §6.17; SPC-4 RECEIVE COPY STATUS(LID1) and
/// RECEIVE COPY OPERATING PARAMETERS).
pub fn receive_copy_results(
    lu: &LogicalUnit,
    req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    let alloc = cdb.be32(10);
    let data = match cdb.u8(1) & 0x1f {
        service_action::RECEIVE_COPY_STATUS_LID1 => copy_status(lu, req.nexus, cdb.u8(2))?,
        service_action::RECEIVE_COPY_OPERATING_PARAMETERS => operating_parameters(),
        _ => return Err(Sense::invalid_field(1, Some(4))),
    };
    Ok(Response::data(data, alloc))
}

/// COPY STATUS for a held list identifier of this nexus; reported once.
fn copy_status(lu: &LogicalUnit, nexus: NexusId, list_id: u8) -> Result<Vec<u8>, Sense> {
    let Some(h) = lu.held_copies().take(nexus, list_id) else {
        return Err(Sense::invalid_field(2, None));
    };
    let (units, count) = if h.bytes <= u64::from(u32::MAX) {
        (0x00, h.bytes)
    } else {
        // Kibibytes (TRANSFER COUNT UNITS 01h).
        (0x01, h.bytes >> 10)
    };
    let mut d = Vec::with_capacity(12);
    d.extend_from_slice(&8u32.to_be_bytes());
    d.push(h.status & 0x7f);
    d.extend_from_slice(&h.segments.to_be_bytes());
    d.push(units);
    d.extend_from_slice(&(count.min(u64::from(u32::MAX)) as u32).to_be_bytes());
    Ok(d)
}

/// OPERATING PARAMETERS: the limits above and the descriptor types.
fn operating_parameters() -> Vec<u8> {
    const TYPES_LEN: u32 = 2;
    let types: [u8; TYPES_LEN as usize] = [BLOCK_TO_BLOCK, IDENTIFICATION_CSCD];
    // AVAILABLE DATA: the 40 bytes after it up to the list of types,
    // and the types (a constant list).
    let mut d = Vec::with_capacity(46);
    d.extend_from_slice(&(40 + TYPES_LEN).to_be_bytes());
    // Byte 4 SNLID: copies without a list identifier (usage 11b) work.
    d.extend_from_slice(&[0x01, 0, 0, 0]);
    d.extend_from_slice(&(MAX_CSCD_DESCRIPTORS as u16).to_be_bytes());
    d.extend_from_slice(&(MAX_SEGMENT_DESCRIPTORS as u16).to_be_bytes());
    d.extend_from_slice(&(MAX_DESCRIPTOR_LIST_LENGTH as u32).to_be_bytes());
    d.extend_from_slice(&MAX_SEGMENT_LENGTH.to_be_bytes());
    // MAXIMUM INLINE DATA LENGTH, HELD DATA LIMIT, MAXIMUM STREAM DEVICE
    // TRANSFER SIZE: zero (no inline data, no held data, no streams);
    // two reserved bytes.
    d.extend_from_slice(&[0; 14]);
    d.extend_from_slice(&(MAX_CONCURRENT_COPIES as u16).to_be_bytes());
    d.push(MAX_CONCURRENT_COPIES as u8);
    // DATA SEGMENT GRANULARITY 2^9: whole 512-byte blocks at least; inline
    // and held data granularity unused.
    d.extend_from_slice(&[9, 0, 0]);
    d.extend_from_slice(&[0, 0, 0, types.len() as u8]);
    d.extend_from_slice(&types);
    d
}

#[cfg(test)]
mod tests;
