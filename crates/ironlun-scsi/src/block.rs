//! Block commands: READ and WRITE (6/10/12/16), WRITE AND VERIFY,
//! SYNCHRONIZE CACHE and READ CAPACITY (SBC-3 §5).

use std::sync::atomic::Ordering;

use crate::cdb::Cdb;
use crate::lu::LogicalUnit;
use crate::sense::{asc, key, Sense};
use crate::{Request, Response};

/// LBA, block count and flags of a read or write CDB.
struct Rw {
    lba: u64,
    blocks: u64,
    fua: bool,
}

fn decode_rw(cdb: &Cdb<'_>) -> Rw {
    let fua = cdb.bit(1, 3);
    match cdb.opcode() {
        // READ(6)/WRITE(6): 21-bit LBA; a length of 0 means 256 blocks
        // (SBC-3 §5.7).
        0x08 | 0x0a => {
            let blocks = match cdb.u8(4) {
                0 => 256,
                n => u64::from(n),
            };
            Rw {
                lba: u64::from(cdb.be24(1) & 0x1f_ffff),
                blocks,
                fua: false,
            }
        }
        0x28 | 0x2a | 0x2e => Rw {
            lba: u64::from(cdb.be32(2)),
            blocks: u64::from(cdb.be16(7)),
            fua,
        },
        0xa8 | 0xaa | 0xae => Rw {
            lba: u64::from(cdb.be32(2)),
            blocks: u64::from(cdb.be32(6)),
            fua,
        },
        _ => Rw {
            lba: cdb.be64(2),
            blocks: u64::from(cdb.be32(10)),
            fua,
        },
    }
}

/// SBC-3 §4.5: the range must lie within the medium; even a zero-length
/// transfer must start at an existing LBA.
fn check_range(lu: &LogicalUnit, lba: u64, blocks: u64) -> Result<(), Sense> {
    let n = lu.num_blocks();
    if lba >= n || blocks > n - lba {
        return Err(Sense::lba_out_of_range());
    }
    Ok(())
}

fn check_transfer_length(lu: &LogicalUnit, blocks: u64, byte: u16) -> Result<u32, Sense> {
    let bytes = blocks * u64::from(lu.block_size());
    if bytes > u64::from(lu.cfg.max_transfer_bytes) {
        // SBC-3 §6.5.3: beyond MAXIMUM TRANSFER LENGTH.
        return Err(Sense::invalid_field(byte, None));
    }
    Ok(bytes as u32)
}

/// Byte of the CDB that holds the transfer length, for field pointers.
fn length_byte(opcode: u8) -> u16 {
    match opcode {
        0x08 | 0x0a => 4,
        0x28 | 0x2a | 0x2e => 7,
        0xa8 | 0xaa | 0xae => 6,
        _ => 10,
    }
}

pub fn read(lu: &LogicalUnit, _req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    let rw = decode_rw(cdb);
    check_range(lu, rw.lba, rw.blocks)?;
    let bytes = check_transfer_length(lu, rw.blocks, length_byte(cdb.opcode()))?;
    if bytes == 0 {
        return Ok(Response::good());
    }
    let offset = rw.lba * u64::from(lu.block_size());
    match lu.backend.read(offset, bytes as usize) {
        Ok(data) => Ok(Response::read_data(data)),
        Err(_) => Err(Sense::new(key::MEDIUM_ERROR, asc::UNRECOVERED_READ_ERROR).with_info(rw.lba)),
    }
}

pub fn write(lu: &LogicalUnit, req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    let rw = decode_rw(cdb);
    let verify = matches!(cdb.opcode(), 0x2e | 0xae | 0x8e);
    if verify {
        // BYTCHK (SBC-4 §5.42): 00b no compare, 01b compare; others are
        // not supported.
        let bytchk = (cdb.u8(1) >> 1) & 0x03;
        if bytchk > 1 {
            return Err(Sense::invalid_field(1, Some(2)));
        }
    }
    if lu.write_protected() {
        return Err(Sense::write_protected());
    }
    check_range(lu, rw.lba, rw.blocks)?;
    let bytes = check_transfer_length(lu, rw.blocks, length_byte(cdb.opcode()))?;
    if bytes == 0 {
        return Ok(Response::good());
    }
    // FCP-4 §9.4.2 option (a), which iSCSI residual handling follows
    // (RFC 7143 §11.4.5.1): when the initiator sends less than the CDB asks
    // for (Expected Data Transfer Length too small), process the command
    // with the data that arrived and report the rest as overflow. Extra
    // data beyond the CDB's length is ignored (underflow).
    let received = req.data_out.len().min(bytes as usize);
    let data = req.data_out.get(..received).unwrap_or(&[]);
    // FUA, a disabled write cache and WRITE AND VERIFY all need the data on
    // stable storage before status (SBC-4 §5.40, §6.5.3).
    let durable = rw.fua || verify || !lu.mode.wce.load(Ordering::Relaxed);
    let bs = lu.block_size() as usize;
    let offset = rw.lba * u64::from(lu.block_size());
    let whole = received / bs * bs;
    let write_err = |_| Sense::new(key::MEDIUM_ERROR, asc::WRITE_ERROR).with_info(rw.lba);
    if whole > 0 {
        lu.backend
            .write(offset, data.get(..whole).unwrap_or(&[]), durable)
            .map_err(write_err)?;
    }
    if received > whole {
        // A partial last block: merge it with what the medium holds.
        let at = offset + whole as u64;
        let old = lu.backend.read(at, bs).map_err(write_err)?;
        let mut block = old.to_vec();
        let tail = data.get(whole..).unwrap_or(&[]);
        if let Some(dst) = block.get_mut(..tail.len()) {
            dst.copy_from_slice(tail);
        }
        lu.backend.write(at, &block, durable).map_err(write_err)?;
    }
    Ok(Response::written(bytes))
}

pub fn synchronize_cache(
    lu: &LogicalUnit,
    _req: &Request<'_>,
    cdb: &Cdb<'_>,
) -> Result<Response, Sense> {
    let (lba, blocks) = if cdb.opcode() == 0x35 {
        (u64::from(cdb.be32(2)), u64::from(cdb.be16(7)))
    } else {
        (cdb.be64(2), u64::from(cdb.be32(10)))
    };
    // NUMBER OF LOGICAL BLOCKS 0 means "to the end" (SBC-3 §5.22).
    let n = lu.num_blocks();
    if lba >= n || (blocks != 0 && blocks > n - lba) {
        return Err(Sense::lba_out_of_range());
    }
    lu.flush()
        .map_err(|_| Sense::new(key::MEDIUM_ERROR, asc::WRITE_ERROR))?;
    Ok(Response::good())
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
    let last = lu.num_blocks() - 1;
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
    d[..8].copy_from_slice(&(lu.num_blocks() - 1).to_be_bytes());
    d[8..12].copy_from_slice(&lu.block_size().to_be_bytes());
    // Byte 12: no protection information. Byte 13: one logical block per
    // physical block. Bytes 14-15: no logical block provisioning
    // management (SBC-3 §5.16.2).
    Ok(Response::data(d.to_vec(), alloc))
}
