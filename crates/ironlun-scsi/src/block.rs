//! Block commands (SBC-3 §5): READ, WRITE, WRITE AND VERIFY, VERIFY,
//! ORWRITE, COMPARE AND WRITE, WRITE ATOMIC, PRE-FETCH, SYNCHRONIZE CACHE,
//! READ CAPACITY and READ DEFECT DATA.
//!
//! Ordering: ordinary reads and writes share the LU's access lock; the
//! commands that must look atomic to other commands hold it exclusively:
//! COMPARE AND WRITE (SBC-4 §5.2), ORWRITE (§5.9) and WRITE ATOMIC
//! (§5.48).

use std::sync::atomic::Ordering;

use bytes::Bytes;

use ironlun_backend::CompareWrite;

use crate::cdb::Cdb;
pub(crate) use crate::failure::{flush_error, read_error, write_error};
use crate::gate::WriteGuard;
use crate::lu::LogicalUnit;
use crate::sense::Sense;
use crate::{Request, Response};
use ironlun_scsi_codes::{opcode, Asc, SenseKey};

/// Where a block command keeps its LBA and transfer length: (offset,
/// bytes) of each field.
struct Layout {
    lba: (usize, usize),
    len: (usize, usize),
}

fn layout(op: u8) -> Layout {
    match op {
        // WRITE ATOMIC(16): 2-byte transfer length at 12 (SBC-4 §5.48).
        opcode::WRITE_ATOMIC_16 => Layout {
            lba: (2, 8),
            len: (12, 2),
        },
        // COMPARE AND WRITE: NUMBER OF LOGICAL BLOCKS is byte 13.
        opcode::COMPARE_AND_WRITE => Layout {
            lba: (2, 8),
            len: (13, 1),
        },
        op if op >> 5 == 1 || op >> 5 == 2 => Layout {
            lba: (2, 4),
            len: (7, 2),
        },
        op if op >> 5 == 5 => Layout {
            lba: (2, 4),
            len: (6, 4),
        },
        _ => Layout {
            lba: (2, 8),
            len: (10, 4),
        },
    }
}

fn field(cdb: &Cdb<'_>, (off, n): (usize, usize)) -> u64 {
    match n {
        1 => u64::from(cdb.u8(off)),
        2 => u64::from(cdb.be16(off)),
        4 => u64::from(cdb.be32(off)),
        _ => cdb.be64(off),
    }
}

/// LBA and number of blocks of a block command.
fn lba_len(cdb: &Cdb<'_>) -> (u64, u64) {
    match cdb.opcode() {
        // READ(6)/WRITE(6): 21-bit LBA; a length of 0 means 256 blocks
        // (SBC-3 §5.7).
        op if six_byte(op) => {
            let blocks = match cdb.u8(4) {
                0 => 256,
                n => u64::from(n),
            };
            (u64::from(cdb.be24(1) & 0x1f_ffff), blocks)
        }
        op => {
            let l = layout(op);
            (field(cdb, l.lba), field(cdb, l.len))
        }
    }
}

/// Byte of the CDB holding the transfer length, for field pointers.
fn length_byte(op: u8) -> u16 {
    match op {
        op if six_byte(op) => 4,
        op => layout(op).len.0 as u16,
    }
}

/// READ(6) and WRITE(6): 21-bit LBA, one-byte length, no FUA bit.
fn six_byte(op: u8) -> bool {
    matches!(op, opcode::READ_6 | opcode::WRITE_6)
}

/// READ(6/10/12/16) (SBC-4 §5.11–§5.14): data from the medium.
pub(crate) fn is_read(op: u8) -> bool {
    matches!(
        op,
        opcode::READ_6 | opcode::READ_10 | opcode::READ_12 | opcode::READ_16
    )
}

/// WRITE(6/10/12/16) and WRITE AND VERIFY(10/12/16): Data-Out to the
/// medium as it arrived.
fn is_write(op: u8) -> bool {
    matches!(
        op,
        opcode::WRITE_6 | opcode::WRITE_10 | opcode::WRITE_12 | opcode::WRITE_16
    ) || is_write_and_verify(op)
}

/// WRITE AND VERIFY(10/12/16) (SBC-4 §5.42–§5.44).
fn is_write_and_verify(op: u8) -> bool {
    matches!(
        op,
        opcode::WRITE_AND_VERIFY_10 | opcode::WRITE_AND_VERIFY_12 | opcode::WRITE_AND_VERIFY_16
    )
}

fn fua(cdb: &Cdb<'_>) -> bool {
    !six_byte(cdb.opcode()) && cdb.bit(1, 3)
}

/// SBC-3 §4.5: the range must lie within the medium; even a zero-length
/// transfer must start at an existing LBA.
pub(crate) fn check_range(lu: &LogicalUnit, lba: u64, blocks: u64) -> Result<(), Sense> {
    match lu.num_blocks().checked_sub(lba) {
        Some(room) if room > 0 && blocks <= room => Ok(()),
        _ => Err(Sense::lba_out_of_range()),
    }
}

/// The byte offset of block `lba` on the medium. An LBA that
/// [`check_range`] passed is below size / block size, so the product
/// fits; one past u64 is out of range all the more (SBC-3 §4.5).
pub(crate) fn byte_at(lu: &LogicalUnit, lba: u64) -> Result<u64, Sense> {
    lba.checked_mul(lu.block_bytes().get())
        .ok_or_else(Sense::lba_out_of_range)
}

/// The byte offset of a block [`check_range`] has passed: below the
/// number of blocks, so the product is below the medium's size in
/// bytes, a u64, and never saturates. Infallible, for the read and write
/// paths every command takes.
fn offset_in_range(lu: &LogicalUnit, lba: u64) -> u64 {
    lba.saturating_mul(lu.block_bytes().get())
}

fn check_transfer_length(lu: &LogicalUnit, blocks: u64, byte: u16) -> Result<u32, Sense> {
    // SBC-3 §6.5.3: beyond MAXIMUM TRANSFER LENGTH (a product that
    // saturates u64, or passes u32, is beyond it too).
    match u32::try_from(blocks.saturating_mul(u64::from(lu.block_size()))) {
        Ok(bytes) if bytes <= lu.cfg.max_transfer_bytes => Ok(bytes),
        _ => Err(Sense::invalid_field(byte, None)),
    }
}

/// Range and length checks shared by the data-moving commands.
fn checked(lu: &LogicalUnit, cdb: &Cdb<'_>) -> Result<(u64, u64, u32), Sense> {
    let (lba, blocks) = lba_len(cdb);
    check_range(lu, lba, blocks)?;
    let bytes = check_transfer_length(lu, blocks, length_byte(cdb.opcode()))?;
    Ok((lba, blocks, bytes))
}

/// MISCOMPARE DURING VERIFY OPERATION with the offset of the first byte
/// that differs (SBC-3 §5.2, §5.25).
fn miscompare(offset: u64) -> Sense {
    Sense::new(SenseKey::MISCOMPARE, Asc::MISCOMPARE_DURING_VERIFY).with_info(offset)
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b.iter()).position(|(x, y)| x != y)
}

/// Writes need the data on stable storage before status with FUA, with
/// the write cache disabled, or for the verifying writes
/// (SBC-3 §4.11, §5.40).
fn durable(lu: &LogicalUnit, cdb: &Cdb<'_>) -> bool {
    fua(cdb) || is_write_and_verify(cdb.opcode()) || !lu.mode.wce.load(Ordering::Relaxed)
}

fn read_blocks(lu: &LogicalUnit, lba: u64, bytes: usize) -> Result<Bytes, Sense> {
    lu.backend
        .read(byte_at(lu, lba)?, bytes)
        .map_err(|e| read_error(lba, &e))
}

fn write_blocks(lu: &LogicalUnit, lba: u64, data: &[u8], durable: bool) -> Result<(), Sense> {
    let offset = byte_at(lu, lba)?;
    lu.write_through(durable, |b| b.write(offset, data, durable))
        .map_err(|e| write_error(lba, &e))
}

/// Writes whole blocks given in the pieces they arrived in: one piece as
/// it is, several in one vectored write (no join).
fn write_pieces<'a>(
    lu: &LogicalUnit,
    lba: u64,
    mut pieces: impl Iterator<Item = &'a [u8]>,
    durable: bool,
) -> Result<(), Sense> {
    let Some(first) = pieces.next() else {
        return Ok(());
    };
    let Some(second) = pieces.next() else {
        return write_blocks(lu, lba, first, durable);
    };
    let mut all = vec![first, second];
    all.extend(pieces);
    let offset = byte_at(lu, lba)?;
    lu.write_through(durable, |b| b.write_vectored(offset, &all, durable))
        .map_err(|e| write_error(lba, &e))
}

/// Where a data-moving command goes on the medium once its checks have
/// passed: what the synchronous handlers below carry out, and what a
/// transport that runs the access itself is handed ([`crate::stage`]).
pub(crate) enum Plan {
    /// Nothing to move (a zero-length transfer): this is the response.
    Done(Response),
    /// `offset`: the byte offset of `lba`.
    Read {
        lba: u64,
        offset: u64,
        bytes: u32,
    },
    /// `received` of the CDB's `bytes` arrived (FCP-4 §9.4.2 option (a):
    /// fewer is processed as it is, more is ignored).
    Write {
        lba: u64,
        offset: u64,
        bytes: u32,
        received: usize,
        durable: bool,
    },
    Flush,
}

pub(crate) type Planner = fn(&LogicalUnit, &Request<'_>, &Cdb<'_>) -> Result<Plan, Sense>;

/// The commands whose medium access a transport may run itself: READ,
/// WRITE, WRITE AND VERIFY (6/10/12/16 as they exist) and SYNCHRONIZE
/// CACHE.
pub(crate) fn planner(op: u8) -> Option<Planner> {
    match op {
        op if is_read(op) => Some(plan_read),
        op if is_write(op) => Some(plan_write),
        opcode::SYNCHRONIZE_CACHE_10 | opcode::SYNCHRONIZE_CACHE_16 => Some(plan_flush),
        _ => None,
    }
}

/// Whether a write command's medium access needs the LU alone
/// ([`LogicalUnit::write_access`]: an unaligned range of a `,direct` file):
/// then it runs the synchronous way, never staged. The range is the
/// blocks the Data-Out that arrives (`data_out` bytes) reaches.
pub(crate) fn write_needs_exclusive(lu: &LogicalUnit, cdb: &Cdb<'_>, data_out: usize) -> bool {
    if !is_write(cdb.opcode()) {
        return false;
    }
    let (lba, blocks) = lba_len(cdb);
    let bs = u64::from(lu.block_size());
    let len = blocks
        .saturating_mul(bs)
        .min((data_out as u64).div_ceil(bs).saturating_mul(bs));
    lu.backend
        .write_needs_exclusive(lba.saturating_mul(bs), len)
}

/// Whether a write's Data-Out ends on a block boundary (or covers the
/// CDB's whole transfer): then it needs no read-modify-write of a partial
/// last block, and a transport can run it as one request.
pub(crate) fn whole_blocks(lu: &LogicalUnit, cdb: &Cdb<'_>, data_out: usize) -> bool {
    let (_, blocks) = lba_len(cdb);
    data_out % lu.block_len() == 0
        || blocks.saturating_mul(lu.block_bytes().get()) <= data_out as u64
}

fn plan_read(lu: &LogicalUnit, _req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Plan, Sense> {
    let (lba, _, bytes) = checked(lu, cdb)?;
    if bytes == 0 {
        return Ok(Plan::Done(Response::good()));
    }
    Ok(Plan::Read {
        lba,
        offset: offset_in_range(lu, lba),
        bytes,
    })
}

/// READ (6/10/12/16): the checks of [`plan_read`], then the medium,
/// without building a [`Plan`] (every read runs this).
pub fn read(lu: &LogicalUnit, _req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    let (lba, _, bytes) = checked(lu, cdb)?;
    if bytes == 0 {
        return Ok(Response::good());
    }
    let _shared = lu.shared_access();
    let data = lu
        .backend
        .read_payload(offset_in_range(lu, lba), bytes as usize)
        .map_err(|e| read_error(lba, &e))?;
    Ok(Response::read_data(data))
}

fn plan_write(lu: &LogicalUnit, req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Plan, Sense> {
    if is_write_and_verify(cdb.opcode()) {
        // WRITE AND VERIFY BYTCHK (SBC-4 §5.42): 00b no compare, 01b
        // compare; the other values are not supported.
        if (cdb.u8(1) >> 1) & 0x03 > 1 {
            return Err(Sense::invalid_field(1, Some(2)));
        }
    }
    if lu.write_protected_for(req.nexus) {
        return Err(Sense::write_protected());
    }
    let (lba, _, bytes) = checked(lu, cdb)?;
    if bytes == 0 {
        return Ok(Plan::Done(Response::good()));
    }
    // FCP-4 §9.4.2 option (a), which iSCSI residual handling follows
    // (RFC 7143 §11.4.5.1): when the initiator sends less than the CDB asks
    // for (Expected Data Transfer Length too small), process the command
    // with the data that arrived and report the rest as overflow. Extra
    // data beyond the CDB's length is ignored (underflow).
    Ok(Plan::Write {
        lba,
        offset: offset_in_range(lu, lba),
        bytes,
        received: req.data_out.len().min(bytes as usize),
        durable: durable(lu, cdb),
    })
}

pub fn write(lu: &LogicalUnit, req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    let (lba, offset, bytes, received, durable) = match plan_write(lu, req, cdb)? {
        Plan::Write {
            lba,
            offset,
            bytes,
            received,
            durable,
        } => (lba, offset, bytes, received, durable),
        Plan::Done(r) => return Ok(r),
        _ => return Ok(Response::good()),
    };
    let bs = lu.block_len();
    // The whole blocks that arrived, and the blocks the Data-Out reaches
    // (`received` is at most the CDB's u32 transfer length).
    let whole = received.saturating_sub(received % bs);
    let span = (received as u64).div_ceil(lu.block_bytes().get());
    let _access = if received > whole {
        // Merging a partial last block is a read-modify-write of that
        // block: a write to the rest of it between the read and the
        // write back would be undone, so no other data command runs
        // meanwhile (only a short Data-Out, FCP-4 §9.4.2, gets here).
        WriteGuard::Exclusive(lu.exclusive_access())
    } else {
        lu.write_access(offset, span.saturating_mul(lu.block_bytes().get()))
    };
    if whole > 0 {
        write_pieces(lu, lba, req.data_out.slices(0..whole), durable)?;
    }
    if received > whole {
        // A partial last block: merge it with what the medium holds.
        // Within the range check_range passed.
        let last = lba.saturating_add((whole / bs) as u64);
        let mut block = read_blocks(lu, last, bs.get())
            .map_err(|_| Sense::new(SenseKey::MEDIUM_ERROR, Asc::WRITE_ERROR).with_info(last))?
            .to_vec();
        let mut at: usize = 0;
        for piece in req.data_out.slices(whole..received) {
            // The pieces add up to less than a block.
            let end = at.saturating_add(piece.len());
            if let Some(dst) = block.get_mut(at..end) {
                dst.copy_from_slice(piece);
            }
            at = end;
        }
        write_blocks(lu, last, &block, durable)?;
    }
    Ok(Response::written(bytes))
}

/// VERIFY(10/12/16) (SBC-4 §5.32): BYTCHK 00b checks the medium only,
/// 01b compares the Data-Out buffer with the blocks, 11b compares one
/// block of Data-Out with every block in the range.
pub fn verify(lu: &LogicalUnit, req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    let bytchk = (cdb.u8(1) >> 1) & 0x03;
    if bytchk == 0b10 {
        return Err(Sense::invalid_field(1, Some(2)));
    }
    let (lba, blocks) = lba_len(cdb);
    check_range(lu, lba, blocks)?;
    // Without BYTCHK nothing is transferred: the range may be as long as
    // the medium; verifying the medium reads it.
    let bs = lu.block_len().get();
    let expected = match bytchk {
        0 => 0,
        0b01 => check_transfer_length(lu, blocks, length_byte(cdb.opcode()))? as usize,
        _ => bs,
    };
    if blocks == 0 {
        return Ok(Response::written(0));
    }
    let _shared = lu.shared_access();
    if bytchk == 0 {
        // Read the range to find unreadable blocks, in bounded pieces.
        scan(lu, lba, blocks, |_, _| None)?;
        return Ok(Response::written(0));
    }
    let data = req.data();
    if data.len() < expected {
        return Ok(lu.check_condition(
            Sense::new(
                SenseKey::ILLEGAL_REQUEST,
                Asc::INVALID_FIELD_IN_COMMAND_INFORMATION_UNIT,
            ),
            expected as u32,
        ));
    }
    let mismatch = if bytchk == 0b01 {
        // `expected` is the whole range, within MAXIMUM TRANSFER LENGTH.
        let medium = read_blocks(lu, lba, expected)?;
        first_difference(data.get(..expected).unwrap_or(&[]), &medium).map(|o| o as u64)
    } else {
        // BYTCHK 11b transfers one block whatever the range: the range
        // is read in pieces, as for BYTCHK 00b.
        let pattern = data.get(..bs).unwrap_or(&[]);
        scan(lu, lba, blocks, |at, medium| {
            let here = span_bytes(at, lu);
            medium.chunks(bs).enumerate().find_map(|(i, b)| {
                let o = first_difference(pattern, b)?;
                // Within the range, which is within the medium.
                Some(
                    here.saturating_add(span_bytes(i as u64, lu))
                        .saturating_add(o as u64),
                )
            })
        })?
    };
    match mismatch {
        Some(off) => Ok(lu.check_condition(miscompare(off), expected as u32)),
        None => Ok(Response::written(expected as u32)),
    }
}

/// Reads `blocks` blocks from `lba` in pieces of at most MAXIMUM
/// TRANSFER LENGTH, handing each to `f` with the index of its first block
/// in the range, until `f` finds something.
fn scan(
    lu: &LogicalUnit,
    lba: u64,
    blocks: u64,
    mut f: impl FnMut(u64, &[u8]) -> Option<u64>,
) -> Result<Option<u64>, Sense> {
    let step = (u64::from(lu.cfg.max_transfer_bytes) / lu.block_bytes()).max(1);
    let mut done: u64 = 0;
    while done < blocks {
        // `done` < `blocks`, and `lba + blocks` is within the medium
        // (check_range): neither saturates. A piece is at most MAXIMUM
        // TRANSFER LENGTH or one block, a u32.
        let n = step.min(blocks.saturating_sub(done));
        let at = lba.saturating_add(done);
        let medium = read_blocks(lu, at, span_bytes(n, lu) as usize)?;
        if let Some(found) = f(done, &medium) {
            return Ok(Some(found));
        }
        done = done.saturating_add(n);
    }
    Ok(None)
}

/// The bytes in `blocks` blocks, for a count within the medium (whose
/// size in bytes is a u64).
fn span_bytes(blocks: u64, lu: &LogicalUnit) -> u64 {
    blocks.saturating_mul(lu.block_bytes().get())
}

/// Checks a fixed-size Data-Out buffer: commands whose data length the CDB
/// fixes (COMPARE AND WRITE, WRITE SAME) fail when the transfer disagrees
/// (FCP-4 §9.4.2 option (b)).
fn exact_data<'a>(
    lu: &LogicalUnit,
    req: &Request<'a>,
    expected: usize,
) -> Result<&'a [u8], Response> {
    if req.data_out.len() == expected {
        Ok(req.data())
    } else {
        Err(lu.check_condition(
            Sense::new(
                SenseKey::ILLEGAL_REQUEST,
                Asc::INVALID_FIELD_IN_COMMAND_INFORMATION_UNIT,
            ),
            expected as u32,
        ))
    }
}

/// COMPARE AND WRITE (SBC-4 §5.2): compares the first half of the
/// Data-Out buffer with the blocks and, if they match, writes the second
/// half, with no other command able to change the blocks in between: the
/// store's own compare-and-write where it has one, else compare and write
/// here under the LU's exclusion.
pub fn compare_and_write(
    lu: &LogicalUnit,
    req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    let (lba, blocks) = lba_len(cdb);
    // Over MAXIMUM COMPARE AND WRITE LENGTH: INVALID FIELD IN CDB (SBC-4
    // §5.3). On a shared store (RBD) that is what the store does
    // atomically, so no longer one is compared and written here under a
    // lock other clients of the store do not take.
    let Some(n) = u8::try_from(blocks)
        .ok()
        .filter(|&n| n <= lu.max_compare_and_write_blocks())
    else {
        return Err(Sense::invalid_field(13, None));
    };
    if lu.write_protected_for(req.nexus) {
        return Err(Sense::write_protected());
    }
    check_range(lu, lba, blocks)?;
    if blocks == 0 {
        // Zero blocks transfer nothing (SBC-4 §5.2); Data-Out for them
        // contradicts the CDB.
        if !req.data_out.is_empty() {
            return Err(Sense::invalid_field(13, None));
        }
        return Ok(Response::good());
    }
    // At most 255 blocks of 4096 bytes, twice: nothing saturates.
    let half = usize::from(n).saturating_mul(lu.block_len().get());
    let both = half.saturating_mul(2);
    let data = match exact_data(lu, req, both) {
        Ok(d) => d,
        Err(r) => return Ok(r),
    };
    let (verify, new) = data.split_at(half);
    let _exclusive = lu.exclusive_access();
    let offset = byte_at(lu, lba)?;
    let durable = durable(lu, cdb);
    match lu.write_through(durable, |b| {
        b.compare_and_write(offset, verify, new, durable)
    }) {
        Ok(CompareWrite::Written) => return Ok(Response::written(both as u32)),
        Ok(CompareWrite::Mismatch(off)) => {
            return Ok(lu.check_condition(miscompare(off), both as u32))
        }
        Ok(CompareWrite::Unsupported) => {}
        Err(e) => return Err(write_error(lba, &e)),
    }
    let current = read_blocks(lu, lba, half)?;
    if let Some(off) = first_difference(verify, &current) {
        return Ok(lu.check_condition(miscompare(off as u64), both as u32));
    }
    write_blocks(lu, lba, new, durable)?;
    Ok(Response::written(both as u32))
}

/// ORWRITE(16) (SBC-4 §5.9): ORs the Data-Out buffer into the blocks.
pub fn orwrite(lu: &LogicalUnit, req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    exclusive_write(lu, req, cdb, true)
}

/// WRITE ATOMIC(16) (SBC-4 §5.48): all of the data or none of it, and no
/// other command sees a mix of old and new blocks.
pub fn write_atomic(lu: &LogicalUnit, req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    exclusive_write(lu, req, cdb, false)
}

/// A write of exactly the CDB's length while no other command touches the
/// LU; with `or`, the data is ORed into the blocks rather than replacing
/// them.
fn exclusive_write(
    lu: &LogicalUnit,
    req: &Request<'_>,
    cdb: &Cdb<'_>,
    or: bool,
) -> Result<Response, Sense> {
    if lu.write_protected_for(req.nexus) {
        return Err(Sense::write_protected());
    }
    let (lba, _, bytes) = checked(lu, cdb)?;
    if bytes == 0 {
        return Ok(Response::good());
    }
    let data = match exact_data(lu, req, bytes as usize) {
        Ok(d) => d,
        Err(r) => return Ok(r),
    };
    let _exclusive = lu.exclusive_access();
    if or {
        let mut blocks = read_blocks(lu, lba, bytes as usize)?.to_vec();
        for (b, d) in blocks.iter_mut().zip(data) {
            *b |= d;
        }
        write_blocks(lu, lba, &blocks, durable(lu, cdb))?;
    } else {
        write_blocks(lu, lba, data, durable(lu, cdb))?;
    }
    Ok(Response::written(bytes))
}

/// PRE-FETCH(10/16) (SBC-3 §5.9): a hint; the blocks are as close to the
/// initiator as they will get. The range is still checked.
pub fn prefetch(lu: &LogicalUnit, _req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    let (lba, blocks) = lba_len(cdb);
    check_range(lu, lba, blocks)?;
    Ok(Response::good())
}

/// WRITE SAME(10/16) without UNMAP (SBC-4 §5.45, §5.46): one block of
/// Data-Out written to every block of the range, by the store's own
/// write-same where it has one
/// ([`ironlun_backend::Backend::write_same`]). A NUMBER OF LOGICAL
/// BLOCKS of zero means "to the end of the medium" (WSNZ = 0).
pub fn write_same(lu: &LogicalUnit, req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    let sixteen = cdb.opcode() == opcode::WRITE_SAME_16;
    let anchor = cdb.bit(1, 4);
    let unmap = cdb.bit(1, 3);
    let ndob = sixteen && cdb.bit(1, 0);
    // A write-protected LU refuses the command as a write whatever its
    // flags ask for (SBC-4 write protection; SWP, SPC-5 §7.5.8): libiscsi's ReadOnly test expects DATA
    // PROTECT for WRITE SAME with UNMAP on a fully provisioned LU too.
    if lu.write_protected_for(req.nexus) {
        return Err(Sense::write_protected());
    }
    if anchor {
        // ANCHOR needs UNMAP, and anchored state is not supported
        // (ANC_SUP = 0 in the Logical Block Provisioning VPD page).
        return Err(Sense::invalid_field(1, Some(4)));
    }
    if unmap && !lu.thin() {
        // LBPWS/LBPWS10 are zero on a fully provisioned LU.
        return Err(Sense::invalid_field(1, Some(3)));
    }
    let (lba, count) = lba_len(cdb);
    let Some(room) = lu.num_blocks().checked_sub(lba).filter(|&r| r > 0) else {
        return Err(Sense::lba_out_of_range());
    };
    let blocks = if count == 0 { room } else { count };
    if blocks > crate::inquiry::MAX_WRITE_SAME_BLOCKS {
        return Err(Sense::invalid_field(length_byte(cdb.opcode()), None));
    }
    check_range(lu, lba, blocks)?;
    let bs = lu.block_size() as usize;
    let pattern = if ndob {
        if !req.data_out.is_empty() {
            return Ok(lu.check_condition(
                Sense::new(
                    SenseKey::ILLEGAL_REQUEST,
                    Asc::INVALID_FIELD_IN_COMMAND_INFORMATION_UNIT,
                ),
                0,
            ));
        }
        vec![0u8; bs]
    } else {
        match exact_data(lu, req, bs) {
            Ok(d) => d.to_vec(),
            Err(r) => return Ok(r),
        }
    };
    if unmap {
        // SBC-4 §5.50 leaves it to the device server whether to unmap;
        // ironlun always does, whatever the Data-Out holds, and the blocks
        // then read as zeros (LBPRZ = 1), as libiscsi's suite and Linux's
        // LIO expect.
        crate::provisioning::deallocate(lu, lba, blocks)?;
        crate::provisioning::settle(lu)?;
        return Ok(Response::written(if ndob { 0 } else { bs as u32 }));
    }
    write_pattern(lu, lba, blocks, &pattern)?;
    Ok(Response::written(if ndob { 0 } else { bs as u32 }))
}

/// WRITE SAME without UNMAP: the store's own write-same where it has one
/// (RBD: librbd repeats the block next to the data), else the copies
/// written here.
fn write_pattern(lu: &LogicalUnit, lba: u64, blocks: u64, pattern: &[u8]) -> Result<(), Sense> {
    let durable = !lu.mode.wce.load(Ordering::Relaxed);
    let (offset, len) = (byte_at(lu, lba)?, span_bytes(blocks, lu));
    let _access = lu.write_access(offset, len);
    match lu.write_through(durable, |b| b.write_same(offset, len, pattern, durable)) {
        Ok(true) => Ok(()),
        Ok(false) => fill(lu, lba, blocks, pattern, durable),
        Err(e) => Err(write_error(lba, &e)),
    }
}

/// Writes `pattern` (one block) to `blocks` blocks from `lba`: one buffer
/// of whole blocks, filled once and written repeatedly.
fn fill(
    lu: &LogicalUnit,
    lba: u64,
    blocks: u64,
    pattern: &[u8],
    durable: bool,
) -> Result<(), Sense> {
    let per = (u64::from(lu.cfg.max_transfer_bytes) / lu.block_bytes()).clamp(1, 2048);
    // At most 2048 blocks of 4096 bytes.
    let buf: Vec<u8> = pattern
        .iter()
        .copied()
        .cycle()
        .take(span_bytes(per.min(blocks), lu) as usize)
        .collect();
    let mut done: u64 = 0;
    while done < blocks {
        // As in `scan`: within the range, which check_range passed.
        let k = per.min(blocks.saturating_sub(done));
        let piece = buf.get(..span_bytes(k, lu) as usize).unwrap_or(&[]);
        write_blocks(lu, lba.saturating_add(done), piece, durable)?;
        done = done.saturating_add(k);
    }
    Ok(())
}

pub fn synchronize_cache(
    lu: &LogicalUnit,
    req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    plan_flush(lu, req, cdb)?;
    lu.flush().map_err(|e| flush_error(&e))?;
    Ok(Response::good())
}

fn plan_flush(lu: &LogicalUnit, _req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Plan, Sense> {
    let (lba, blocks) = lba_len(cdb);
    // NUMBER OF LOGICAL BLOCKS 0 means "to the end" (SBC-3 §5.22): the
    // range check then asks only for an existing LBA.
    check_range(lu, lba, blocks)?;
    Ok(Plan::Flush)
}

pub fn read_capacity10(
    lu: &LogicalUnit,
    _req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    // SBC-3 §5.15: with PMI zero the LOGICAL BLOCK ADDRESS must be zero.
    if !cdb.bit(8, 0) && cdb.be32(2) != 0 {
        return Err(Sense::invalid_field(2, None));
    }
    // A LU always holds a block: LogicalUnit::new, rescan and
    // medium_replaced refuse an empty medium.
    let last = lu.num_blocks().saturating_sub(1);
    let mut d = Vec::with_capacity(8);
    d.extend_from_slice(&u32::try_from(last).unwrap_or(u32::MAX).to_be_bytes());
    d.extend_from_slice(&lu.block_size().to_be_bytes());
    Ok(Response::data(d, 8))
}

pub fn read_capacity16(
    lu: &LogicalUnit,
    _req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    let alloc = cdb.be32(10);
    let mut d = [0u8; 32];
    // As in READ CAPACITY(10): never an empty medium.
    d[..8].copy_from_slice(&lu.num_blocks().saturating_sub(1).to_be_bytes());
    d[8..12].copy_from_slice(&lu.block_size().to_be_bytes());
    // Byte 12: no protection information. Byte 13: LOGICAL BLOCKS PER
    // PHYSICAL BLOCK EXPONENT (SBC-4 §5.20.2), LOWEST ALIGNED LOGICAL
    // BLOCK ADDRESS 0 in bytes 14-15. Byte 14: LBPME and LBPRZ for a thin
    // LU (SBC-3 §5.16.2).
    d[13] = crate::geometry::exponent(lu.block_size(), lu.physical_block_size());
    if lu.thin() {
        d[14] = 0x80 | 0x40;
    }
    Ok(Response::data(d.to_vec(), alloc))
}

/// READ DEFECT DATA(10/12) (SBC-3 §5.13, §5.14): a virtual medium has no
/// defects; both lists are valid and empty.
pub fn read_defect_data(
    _lu: &LogicalUnit,
    _req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    if cdb.opcode() == opcode::READ_DEFECT_DATA_10 {
        let flags = cdb.u8(2) & 0x1f;
        let alloc = u32::from(cdb.be16(7));
        Ok(Response::data(vec![0, flags, 0, 0], alloc))
    } else {
        let flags = cdb.u8(1) & 0x1f;
        let alloc = cdb.be32(6);
        Ok(Response::data(vec![0, flags, 0, 0, 0, 0, 0, 0], alloc))
    }
}

#[cfg(test)]
mod tests;
