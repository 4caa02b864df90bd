//! Typed SCSI helpers over a [`Session`]: CDB builders (SBC-4, SPC-5)
//! and parsers for what comes back. Opcodes, status and sense are the
//! named codes of ironlun-scsi-codes, which the target's device shares.

use bytes::Bytes;
use ironlun_proto::initiator::{ScsiReply, ScsiRequest, ATTR_SIMPLE};
use ironlun_scsi_codes::{opcode, service_action, SenseData, SenseKey, Status};
use ironlun_wire::{Lun, ServiceResponse};

use crate::error::{Error, Result};
use crate::multipath::Multipath;
use crate::session::Session;

/// Turns a reply into its data, or an error for anything but GOOD.
pub fn check(reply: ScsiReply) -> Result<Bytes> {
    if reply.response != ServiceResponse::COMMAND_COMPLETED {
        return Err(Error::Response(reply.response));
    }
    match reply.status {
        Status::GOOD => Ok(reply.data),
        Status::CHECK_CONDITION => Err(Error::Check(
            SenseData::parse(&reply.sense).unwrap_or_default(),
        )),
        Status::TASK_ABORTED => Err(Error::TaskAborted),
        s => Err(Error::Status(s)),
    }
}

pub(crate) fn request(lun: u16, cdb: &[u8], read_len: u32, write: Bytes) -> ScsiRequest {
    let mut c = [0u8; 16];
    for (d, s) in c.iter_mut().zip(cdb) {
        *d = *s;
    }
    ScsiRequest {
        lun: Lun::from_index(lun),
        cdb: c,
        read_len,
        write,
        attr: ATTR_SIMPLE,
        discard_data: false,
    }
}

/// READ(16) (SBC-4 §5.17).
#[must_use = "a request does nothing until a session runs it"]
pub fn read16(lun: u16, lba: u64, blocks: u32, block_size: u32) -> ScsiRequest {
    let mut cdb = [0u8; 16];
    cdb[0] = opcode::READ_16;
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
    request(lun, &cdb, blocks.saturating_mul(block_size), Bytes::new())
}

/// WRITE(16) (SBC-4 §5.41); `fua` forces the data to the medium.
#[must_use = "a request does nothing until a session runs it"]
pub fn write16(lun: u16, lba: u64, blocks: u32, data: Bytes, fua: bool) -> ScsiRequest {
    let mut cdb = [0u8; 16];
    cdb[0] = opcode::WRITE_16;
    cdb[1] = if fua { 0x08 } else { 0 };
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
    request(lun, &cdb, 0, data)
}

/// READ(10) (SBC-4 §5.13).
#[must_use = "a request does nothing until a session runs it"]
pub fn read10(lun: u16, lba: u32, blocks: u16, block_size: u32) -> ScsiRequest {
    let mut cdb = [0u8; 10];
    cdb[0] = opcode::READ_10;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
    request(
        lun,
        &cdb,
        u32::from(blocks).saturating_mul(block_size),
        Bytes::new(),
    )
}

/// WRITE(10) (SBC-4 §5.36).
#[must_use = "a request does nothing until a session runs it"]
pub fn write10(lun: u16, lba: u32, blocks: u16, data: Bytes) -> ScsiRequest {
    let mut cdb = [0u8; 10];
    cdb[0] = opcode::WRITE_10;
    cdb[2..6].copy_from_slice(&lba.to_be_bytes());
    cdb[7..9].copy_from_slice(&blocks.to_be_bytes());
    request(lun, &cdb, 0, data)
}

/// A READ or WRITE with the smallest CDB that can carry it.
#[must_use = "a request does nothing until a session runs it"]
pub fn read(lun: u16, lba: u64, blocks: u32, block_size: u32) -> ScsiRequest {
    match (u32::try_from(lba), u16::try_from(blocks)) {
        (Ok(l), Ok(b)) => read10(lun, l, b, block_size),
        _ => read16(lun, lba, blocks, block_size),
    }
}

/// See [`read`].
#[must_use = "a request does nothing until a session runs it"]
pub fn write(lun: u16, lba: u64, blocks: u32, data: Bytes) -> ScsiRequest {
    match (u32::try_from(lba), u16::try_from(blocks)) {
        (Ok(l), Ok(b)) => write10(lun, l, b, data),
        _ => write16(lun, lba, blocks, data, false),
    }
}

/// SYNCHRONIZE CACHE(10) of the whole LU (SBC-4 §5.24).
#[must_use = "a request does nothing until a session runs it"]
pub fn sync_cache(lun: u16) -> ScsiRequest {
    request(
        lun,
        &[opcode::SYNCHRONIZE_CACHE_10, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        0,
        Bytes::new(),
    )
}

/// TEST UNIT READY (SPC-5 §6.47).
#[must_use = "a request does nothing until a session runs it"]
pub fn test_unit_ready(lun: u16) -> ScsiRequest {
    request(
        lun,
        &[opcode::TEST_UNIT_READY, 0, 0, 0, 0, 0],
        0,
        Bytes::new(),
    )
}

/// INQUIRY (SPC-5 §6.7), standard data or a VPD page.
#[must_use = "a request does nothing until a session runs it"]
pub fn inquiry(lun: u16, vpd_page: Option<u8>, alloc: u16) -> ScsiRequest {
    let a = alloc.to_be_bytes();
    let (evpd, page) = match vpd_page {
        Some(p) => (1, p),
        None => (0, 0),
    };
    request(
        lun,
        &[opcode::INQUIRY, evpd, page, a[0], a[1], 0],
        u32::from(alloc),
        Bytes::new(),
    )
}

/// READ CAPACITY(16) (SBC-4 §5.20).
#[must_use = "a request does nothing until a session runs it"]
pub fn read_capacity16(lun: u16) -> ScsiRequest {
    let mut cdb = [0u8; 16];
    cdb[0] = opcode::SERVICE_ACTION_IN_16;
    cdb[1] = service_action::READ_CAPACITY_16;
    cdb[13] = 32;
    request(lun, &cdb, 32, Bytes::new())
}

/// READ CAPACITY(10) (SBC-4 §5.19).
#[must_use = "a request does nothing until a session runs it"]
pub fn read_capacity10(lun: u16) -> ScsiRequest {
    request(
        lun,
        &[opcode::READ_CAPACITY_10, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        8,
        Bytes::new(),
    )
}

/// REPORT LUNS (SPC-5 §6.35).
#[must_use = "a request does nothing until a session runs it"]
pub fn report_luns(alloc: u32) -> ScsiRequest {
    let a = alloc.to_be_bytes();
    request(
        0,
        &[
            opcode::REPORT_LUNS,
            0,
            0,
            0,
            0,
            0,
            a[0],
            a[1],
            a[2],
            a[3],
            0,
            0,
        ],
        alloc,
        Bytes::new(),
    )
}

/// UNMAP of LBA ranges (SBC-4 §5.30).
#[must_use = "a request does nothing until a session runs it"]
pub fn unmap(lun: u16, ranges: &[(u64, u32)]) -> ScsiRequest {
    let desc_len = (ranges.len() * 16) as u16;
    let mut p = Vec::with_capacity(8 + usize::from(desc_len));
    p.extend_from_slice(&(desc_len + 6).to_be_bytes());
    p.extend_from_slice(&desc_len.to_be_bytes());
    p.extend_from_slice(&[0; 4]);
    for (lba, n) in ranges {
        p.extend_from_slice(&lba.to_be_bytes());
        p.extend_from_slice(&n.to_be_bytes());
        p.extend_from_slice(&[0; 4]);
    }
    let len = (p.len() as u16).to_be_bytes();
    request(
        lun,
        &[opcode::UNMAP, 0, 0, 0, 0, 0, 0, len[0], len[1], 0],
        0,
        Bytes::from(p),
    )
}

/// WRITE SAME(16) (SBC-4 §5.50): `block` (one logical block) written
/// to `blocks` blocks from `lba`; with `unmap`, the device may unmap
/// them instead (UNMAP bit, SBC-4 §4.7.3.5).
#[must_use = "a request does nothing until a session runs it"]
pub fn write_same16(lun: u16, lba: u64, blocks: u32, block: Bytes, unmap: bool) -> ScsiRequest {
    let mut cdb = [0u8; 16];
    cdb[0] = opcode::WRITE_SAME_16;
    cdb[1] = if unmap { 0x08 } else { 0 };
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
    request(lun, &cdb, 0, block)
}

/// COMPARE AND WRITE (SBC-4 §5.3): `data` is the verify instance then
/// the write instance, `blocks` blocks each.
#[must_use = "a request does nothing until a session runs it"]
pub fn compare_and_write(lun: u16, lba: u64, blocks: u8, data: Bytes) -> ScsiRequest {
    let mut cdb = [0u8; 16];
    cdb[0] = opcode::COMPARE_AND_WRITE;
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[13] = blocks;
    request(lun, &cdb, 0, data)
}

/// Standard INQUIRY data, the parts people read (SPC-5 §6.7.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inquiry {
    pub peripheral_type: u8,
    pub vendor: String,
    pub product: String,
    pub revision: String,
    pub version: u8,
}

fn ascii(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim_end().to_owned()
}

impl Inquiry {
    pub fn parse(d: &[u8]) -> Result<Inquiry> {
        if d.len() < 36 {
            return Err(Error::Malformed(format!(
                "standard INQUIRY data of {} bytes (at least 36 expected)",
                d.len()
            )));
        }
        Ok(Inquiry {
            peripheral_type: d.first().copied().unwrap_or(0) & 0x1f,
            version: d.get(2).copied().unwrap_or(0),
            vendor: ascii(d.get(8..16).unwrap_or(&[])),
            product: ascii(d.get(16..32).unwrap_or(&[])),
            revision: ascii(d.get(32..36).unwrap_or(&[])),
        })
    }
}

/// READ CAPACITY(16) data (SBC-4 §5.20.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Number of logical blocks (last LBA + 1).
    pub blocks: u64,
    pub block_size: u32,
    /// Logical blocks per physical block exponent.
    pub lbppbe: u8,
    /// Thin provisioning enabled (LBPME).
    pub thin: bool,
}

impl Capacity {
    pub fn bytes(&self) -> u64 {
        self.blocks.saturating_mul(u64::from(self.block_size))
    }

    /// Bytes per physical block: 2^LBPPBE logical blocks.
    pub fn physical_block_size(&self) -> u64 {
        u64::from(self.block_size) << self.lbppbe
    }

    pub fn parse16(d: &[u8]) -> Result<Capacity> {
        let last = d
            .get(0..8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_be_bytes);
        let bs = d
            .get(8..12)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_be_bytes);
        match (last, bs) {
            (Some(last), Some(block_size)) if block_size > 0 => Ok(Capacity {
                blocks: last.saturating_add(1),
                block_size,
                lbppbe: d.get(13).copied().unwrap_or(0) & 0x0f,
                thin: d.get(14).copied().unwrap_or(0) & 0x80 != 0,
            }),
            _ => Err(Error::Malformed("READ CAPACITY(16) data".into())),
        }
    }

    pub fn parse10(d: &[u8]) -> Result<Capacity> {
        let word = |r: std::ops::Range<usize>| {
            d.get(r)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .map(u32::from_be_bytes)
        };
        match (word(0..4), word(4..8)) {
            (Some(last), Some(block_size)) if block_size > 0 => Ok(Capacity {
                blocks: u64::from(last) + 1,
                block_size,
                lbppbe: 0,
                thin: false,
            }),
            _ => Err(Error::Malformed("READ CAPACITY(10) data".into())),
        }
    }
}

/// Capacity through `run`, from READ CAPACITY(16) or, where that is
/// refused, (10).
async fn read_capacity_by<F, Fut>(lun: u16, run: F) -> Result<Capacity>
where
    F: Fn(ScsiRequest) -> Fut,
    Fut: std::future::Future<Output = Result<Bytes>>,
{
    match run(read_capacity16(lun)).await {
        Ok(d) => Capacity::parse16(&d),
        Err(Error::Check(s)) if s.code.key == SenseKey::ILLEGAL_REQUEST => {
            Capacity::parse10(&run(read_capacity10(lun)).await?)
        }
        Err(e) => Err(e),
    }
}

/// Convenience calls on a LUN through whichever path takes them (with
/// ALUA, one whose state serves the command, waiting for one if none
/// does yet).
impl Multipath {
    /// Runs a command and returns its data, failing on any non-GOOD status.
    pub async fn run(&self, req: ScsiRequest) -> Result<Bytes> {
        check(self.execute(req).await?)
    }

    /// Capacity, as [`Session::read_capacity`].
    pub async fn read_capacity(&self, lun: u16) -> Result<Capacity> {
        read_capacity_by(lun, |r| self.run(r)).await
    }
}

/// Convenience calls on one LUN of a session.
impl Session {
    /// Runs a command and returns its data, failing on any non-GOOD status.
    pub async fn run(&self, req: ScsiRequest) -> Result<Bytes> {
        check(self.execute(req).await?)
    }

    pub async fn inquiry(&self, lun: u16) -> Result<Inquiry> {
        Inquiry::parse(&self.run(inquiry(lun, None, 255)).await?)
    }

    /// The unit serial number (VPD page 0x80, SPC-5), trimmed.
    pub async fn unit_serial_number(&self, lun: u16) -> Result<String> {
        let d = self.run(inquiry(lun, Some(0x80), 255)).await?;
        let serial = String::from_utf8_lossy(d.get(4..).unwrap_or(&[]));
        Ok(serial.trim().to_owned())
    }

    /// Capacity, from READ CAPACITY(16) or, where that is refused, (10).
    pub async fn read_capacity(&self, lun: u16) -> Result<Capacity> {
        read_capacity_by(lun, |r| self.run(r)).await
    }

    /// Waits out unit attentions (a new session starts with one, SAM-5
    /// §5.14) with a few TEST UNIT READY.
    pub async fn clear_unit_attention(&self, lun: u16) -> Result<()> {
        let mut last = Ok(Bytes::new());
        for _ in 0..4 {
            last = self.run(test_unit_ready(lun)).await;
            match &last {
                Err(Error::Check(s)) if s.code.key == SenseKey::UNIT_ATTENTION => continue,
                _ => break,
            }
        }
        last.map(|_| ())
    }

    /// LUN numbers the target reports (single-level, SAM-5 §4.7).
    pub async fn report_luns(&self) -> Result<Vec<u16>> {
        let d = self.run(report_luns(16 + 8 * 256)).await?;
        let len = d
            .get(0..4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_be_bytes)
            .unwrap_or(0) as usize;
        let list = d.get(8..(8 + len).min(d.len())).unwrap_or(&[]);
        Ok(list
            .chunks_exact(8)
            .filter_map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                Lun(b).index()
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_tells_task_aborted_apart() {
        let reply = |status| ScsiReply {
            status,
            ..ScsiReply::default()
        };
        assert!(matches!(
            check(reply(Status::TASK_ABORTED)),
            Err(Error::TaskAborted)
        ));
        assert!(matches!(
            check(reply(Status::BUSY)),
            Err(Error::Status(Status::BUSY))
        ));
        assert!(check(reply(Status::GOOD)).is_ok());
    }

    /// The CDBs on the wire, byte for byte (SBC-4, SPC-5).
    #[test]
    fn cdb_bytes() {
        let cdb = |r: ScsiRequest| r.cdb;
        assert_eq!(
            cdb(read10(0, 0x0102_0304, 8, 512))[..10],
            [0x28, 0, 1, 2, 3, 4, 0, 0, 8, 0]
        );
        assert_eq!(
            cdb(write_same16(0, 0x0102, 9, Bytes::new(), true)),
            [0x93, 0x08, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 9, 0, 0]
        );
        assert_eq!(
            cdb(compare_and_write(0, 7, 1, Bytes::new())),
            [0x89, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 1, 0, 0]
        );
        assert_eq!(
            cdb(write16(0, 1 << 32, 2, Bytes::new(), true)),
            [0x8a, 0x08, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0]
        );
        assert_eq!(cdb(write(0, 5, 1, Bytes::new()))[..2], [0x2a, 0]);
        assert_eq!(cdb(read(0, 1 << 40, 1, 512))[0], 0x88);
        assert_eq!(cdb(sync_cache(0))[..10], [0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(cdb(test_unit_ready(0)), [0; 16]);
        assert_eq!(
            cdb(inquiry(0, Some(0x80), 255))[..6],
            [0x12, 1, 0x80, 0, 255, 0]
        );
        assert_eq!(
            cdb(read_capacity16(0)),
            [0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0]
        );
        assert_eq!(
            cdb(read_capacity10(0))[..10],
            [0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            cdb(report_luns(16))[..12],
            [0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0]
        );
        assert_eq!(
            cdb(unmap(0, &[(0, 8)]))[..10],
            [0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0]
        );
    }

    #[test]
    fn check_maps_status() {
        let reply = |status, sense: &'static [u8]| ScsiReply {
            status,
            sense: Bytes::from_static(sense),
            ..ScsiReply::default()
        };
        assert!(check(reply(Status::GOOD, &[])).is_ok());
        match check(reply(Status::CHECK_CONDITION, &[0x72, 0x06, 0x29, 0x00])) {
            Err(Error::Check(s)) => {
                assert_eq!(s.code.key, SenseKey::UNIT_ATTENTION);
                assert_eq!(
                    s.to_string(),
                    "UNIT ATTENTION (key 0x6), ASC/ASCQ 0x29/0x00"
                );
            }
            other => panic!("{other:?}"),
        }
        let e = check(reply(Status::BUSY, &[])).unwrap_err();
        assert_eq!(e.to_string(), "SCSI status 0x08 (BUSY)");
        let e = check(reply(Status(0x22), &[])).unwrap_err();
        assert_eq!(e.to_string(), "SCSI status 0x22 (unknown)");
    }
}
