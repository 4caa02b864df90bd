//! Thin provisioning (SBC-3 §4.7): UNMAP, GET LBA STATUS, and the
//! deallocation that WRITE SAME with UNMAP shares.
//!
//! Mapped state is the backend's own: RAM chunks that are allocated, file
//! blocks that are not holes. Deallocated blocks read as zeros (LBPRZ = 1).
//! Anchored state is not supported (ANC_SUP = 0). With the write cache
//! off a deallocation is on stable storage before GOOD, as a write is
//! ([`settle`]). A soft threshold on the space left is in [`threshold`].

pub(crate) mod threshold;

pub use threshold::{SoftThreshold, ThresholdEvent, ThresholdNotify};

use std::sync::atomic::Ordering;

use crate::block::{check_range, write_error};
use crate::cdb::Cdb;
use crate::lu::LogicalUnit;
use crate::sense::Sense;
use crate::{Request, Response};
use ironlun_scsi_codes::{Asc, SenseKey};

/// MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT (VPD B0).
pub const MAX_UNMAP_DESCRIPTORS: u32 = 256;
/// MAXIMUM UNMAP LBA COUNT (VPD B0): no limit below the capacity.
pub const MAX_UNMAP_LBA_COUNT: u32 = 0xffff_ffff;
/// GET LBA STATUS asks the backend about this many blocks at a time.
const LBA_STATUS_WINDOW_BLOCKS: u64 = 1 << 20;
/// GET LBA STATUS looks at most this many bytes ahead per command (the
/// work a command may cost); the descriptors then end before the LU does
/// and the application client asks again from there (SBC-4 §5.8).
const LBA_STATUS_SCAN_BYTES: u64 = 64 << 30;

/// With the write cache off (WCE = 0, SBC-3 §6.4.5), makes the
/// deallocations just done durable before the command's GOOD, as a
/// write's data would be: the blocks must read back as zeros (LBPRZ)
/// after a crash too, and an initiator sends no SYNCHRONIZE CACHE to a
/// write-through LU. With the cache on, SYNCHRONIZE CACHE does it.
pub(crate) fn settle(lu: &LogicalUnit) -> Result<(), Sense> {
    if lu.mode.wce.load(Ordering::Relaxed) {
        return Ok(());
    }
    lu.flush().map_err(|e| crate::block::flush_error(&e))
}

/// Deallocates `blocks` blocks at `lba`.
pub(crate) fn deallocate(lu: &LogicalUnit, lba: u64, blocks: u64) -> Result<(), Sense> {
    // The callers checked the range: it lies within the medium, whose
    // size in bytes is a u64 (and one past it is out of range, SBC-3 §4.5).
    let offset = crate::block::byte_at(lu, lba)?;
    let len = blocks
        .checked_mul(lu.block_bytes().get())
        .ok_or_else(Sense::lba_out_of_range)?;
    // Partial blocks of a `,direct` file are zeroed by read-modify-write.
    let _access = lu.write_access(offset, len);
    lu.backend
        .deallocate(offset, len)
        .map_err(|e| write_error(lba, &e))
}

/// UNMAP (SBC-3 §5.28).
pub fn unmap(lu: &LogicalUnit, req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    if cdb.bit(1, 0) {
        // ANCHOR without anchored-state support.
        return Err(Sense::invalid_field(1, Some(0)));
    }
    let param_len = usize::from(cdb.be16(7));
    if param_len == 0 {
        return Ok(Response::good());
    }
    if lu.write_protected_for(req.nexus) {
        return Err(Sense::write_protected());
    }
    let data = req.parameter_list(param_len);
    if param_len < 8 || data.len() < 8 {
        return Err(Sense::new(
            SenseKey::ILLEGAL_REQUEST,
            Asc::PARAMETER_LIST_LENGTH_ERROR,
        ));
    }
    let c = Cdb(data);
    let descriptors = data.get(8..).unwrap_or(&[]);
    // UNMAP BLOCK DESCRIPTOR DATA LENGTH: whole 16-byte descriptors that
    // fit in the parameter data (SBC-3 §5.28.2).
    let bd_len = usize::from(c.be16(2)).min(descriptors.len());
    let count = bd_len / 16;
    if count as u32 > MAX_UNMAP_DESCRIPTORS {
        return Err(Sense::invalid_param(2, None));
    }
    let mut ranges = Vec::with_capacity(count);
    for d in descriptors.chunks_exact(16).take(count) {
        let d = Cdb(d);
        let (lba, n) = (d.be64(0), u64::from(d.be32(8)));
        // Every descriptor is checked before any block is deallocated.
        check_range(lu, lba, n).or_else(|e| {
            // A zero-length descriptor at the end of the medium is fine.
            if n == 0 && lba <= lu.num_blocks() {
                Ok(())
            } else {
                Err(e)
            }
        })?;
        ranges.push((lba, n));
    }
    for (lba, n) in ranges {
        if n > 0 {
            deallocate(lu, lba, n)?;
        }
    }
    settle(lu)?;
    Ok(Response::written(param_len as u32))
}

/// Appends blocks `[first, last)` with a status. Only allocated runs
/// reach into partly allocated blocks, so a block already claimed by the
/// previous run stays with it.
fn push_run(runs: &mut Vec<(u64, u64, bool)>, first: u64, last: u64, mapped: bool) {
    let mut first = first;
    if let Some((start, len, m)) = runs.last_mut() {
        // A run ends within the medium, whose size in bytes is a u64.
        let end = start.saturating_add(*len);
        first = first.max(end);
        if first >= last {
            return;
        }
        if *m == mapped && end == first {
            // `last` > `first` >= `end` >= `start`.
            *len = last.saturating_sub(*start);
            return;
        }
    }
    if let Some(len) = last.checked_sub(first).filter(|&n| n > 0) {
        runs.push((first, len, mapped));
    }
}

/// GET LBA STATUS (SBC-4 §5.8), offered on every LU: descriptors of mapped and deallocated
/// runs starting at the requested LBA.
pub fn get_lba_status(
    lu: &LogicalUnit,
    _req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    let lba = cdb.be64(2);
    let alloc = cdb.be32(10);
    let n = lu.num_blocks();
    if lba >= n {
        return Err(Sense::lba_out_of_range());
    }
    let max_descriptors = (alloc.saturating_sub(8) / 16).max(1) as usize;
    let runs = lba_runs(lu, lba, max_descriptors)?;
    // At most (ALLOCATION LENGTH - 8) / 16 descriptors: the lengths fit.
    let descriptors = runs.len().saturating_mul(16);
    let mut out = Vec::with_capacity(descriptors.saturating_add(8));
    let available = u32::try_from(descriptors.saturating_add(4)).unwrap_or(u32::MAX);
    out.extend_from_slice(&available.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    for (start, len, mapped) in runs {
        out.extend_from_slice(&start.to_be_bytes());
        out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
        // PROVISIONING STATUS: 0 mapped, 1 deallocated (SBC-4 table 63).
        out.push(u8::from(!mapped));
        out.extend_from_slice(&[0; 3]);
    }
    Ok(Response::data(out, alloc))
}

/// The mapped and deallocated runs from `lba` on, as (first block, blocks,
/// mapped): at most `max` of them, each shorter than 2^32 blocks, covering
/// the LU to its end unless `max` or the scan limit stops them first. The
/// backend is asked one window at a time, so an LU with few runs is
/// described whole in one command (libiscsi's Sanitize.BlockErase expects
/// that of a 1 GiB LU).
fn lba_runs(lu: &LogicalUnit, lba: u64, max: usize) -> Result<Vec<(u64, u64, bool)>, Sense> {
    let bs = lu.block_bytes();
    let limit = (LBA_STATUS_SCAN_BYTES / bs).min(u64::from(u32::MAX));
    let end = lu.num_blocks().min(lba.saturating_add(limit));
    if !lu.thin() {
        // Fully provisioned: every LBA is mapped (SBC-4 §5.8.2.2). The
        // caller checked `lba` < the number of blocks, so `end` > `lba`.
        return Ok(vec![(lba, end.saturating_sub(lba), true)]);
    }
    let mut runs: Vec<(u64, u64, bool)> = Vec::new();
    let mut window = lba;
    while window < end && runs.len() <= max {
        // `window` < `end` <= the number of blocks: the byte offsets are
        // within the medium and nothing here saturates.
        let span = end.saturating_sub(window).min(LBA_STATUS_WINDOW_BLOCKS);
        let from = window.saturating_mul(bs.get());
        let extents = {
            let _shared = lu.shared_access();
            lu.backend
                .allocation(from, span.saturating_mul(bs.get()))
                .map_err(|e| crate::block::read_error(window, &e))?
        };
        // Byte runs to block runs: a block with any allocated byte is
        // mapped. The extents' lengths come from the store: a sum past
        // u64 stops at its end.
        let mut at = from;
        for e in extents {
            let (start, stop) = (at, at.saturating_add(e.len));
            at = stop;
            let (first, last) = if e.allocated {
                (start / bs, stop.div_ceil(bs.get()))
            } else {
                (start.div_ceil(bs.get()), stop / bs)
            };
            push_run(&mut runs, first, last, e.allocated);
            if runs.len() > max {
                break;
            }
        }
        window = window.saturating_add(span);
    }
    runs.truncate(max);
    Ok(runs)
}

#[cfg(test)]
mod tests;
