//! Typed SCSI helpers over a [`Session`]: CDB builders (SBC-4, SPC-5),
//! parsers for what comes back, and sense decoding.

use std::fmt;

use bytes::Bytes;
use ironlun_proto::initiator::{ScsiReply, ScsiRequest, ATTR_SIMPLE};
use ironlun_wire::Lun;

use crate::error::{Error, Result};
use crate::session::Session;

/// Decoded sense data (SPC-5 §4.4.2 descriptor, §4.4.3 fixed format).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SenseInfo {
    pub key: u8,
    pub asc: u8,
    pub ascq: u8,
    /// INFORMATION field, when valid (e.g. the first bad LBA).
    pub information: Option<u64>,
}

impl SenseInfo {
    pub fn parse(sense: &[u8]) -> Option<SenseInfo> {
        let code = sense.first()? & 0x7f;
        match code {
            0x70 | 0x71 => {
                let valid = sense.first()? & 0x80 != 0;
                let info = sense.get(3..7).and_then(|b| <[u8; 4]>::try_from(b).ok());
                Some(SenseInfo {
                    key: sense.get(2)? & 0x0f,
                    asc: sense.get(12).copied().unwrap_or(0),
                    ascq: sense.get(13).copied().unwrap_or(0),
                    information: if valid {
                        info.map(|b| u64::from(u32::from_be_bytes(b)))
                    } else {
                        None
                    },
                })
            }
            0x72 | 0x73 => {
                let mut information = None;
                let mut descs = sense.get(8..).unwrap_or(&[]);
                while let (Some(&t), Some(&l)) = (descs.first(), descs.get(1)) {
                    let body = descs.get(2..2 + usize::from(l)).unwrap_or(&[]);
                    if t == 0 {
                        information = body
                            .get(2..10)
                            .and_then(|b| <[u8; 8]>::try_from(b).ok())
                            .map(u64::from_be_bytes);
                    }
                    descs = descs.get(2 + usize::from(l)..).unwrap_or(&[]);
                }
                Some(SenseInfo {
                    key: sense.get(1)? & 0x0f,
                    asc: sense.get(2).copied().unwrap_or(0),
                    ascq: sense.get(3).copied().unwrap_or(0),
                    information,
                })
            }
            _ => None,
        }
    }

    pub fn key_name(&self) -> &'static str {
        const NAMES: [&str; 16] = [
            "NO SENSE",
            "RECOVERED ERROR",
            "NOT READY",
            "MEDIUM ERROR",
            "HARDWARE ERROR",
            "ILLEGAL REQUEST",
            "UNIT ATTENTION",
            "DATA PROTECT",
            "BLANK CHECK",
            "VENDOR SPECIFIC",
            "COPY ABORTED",
            "ABORTED COMMAND",
            "RESERVED",
            "VOLUME OVERFLOW",
            "MISCOMPARE",
            "COMPLETED",
        ];
        NAMES
            .get(usize::from(self.key & 0x0f))
            .copied()
            .unwrap_or("?")
    }
}

impl fmt::Display for SenseInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (key 0x{:x}), ASC/ASCQ 0x{:02x}/0x{:02x}",
            self.key_name(),
            self.key,
            self.asc,
            self.ascq
        )
    }
}

/// Turns a reply into its data, or an error for anything but GOOD.
pub fn check(reply: ScsiReply) -> Result<Bytes> {
    if reply.response != 0 {
        return Err(Error::Response(reply.response));
    }
    match reply.status {
        0x00 => Ok(reply.data),
        0x02 => Err(Error::Check(
            SenseInfo::parse(&reply.sense).unwrap_or_default(),
        )),
        s => Err(Error::Status(s)),
    }
}

fn request(lun: u16, cdb: &[u8], read_len: u32, write: Bytes) -> ScsiRequest {
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
    cdb[0] = 0x88;
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
    request(lun, &cdb, blocks.saturating_mul(block_size), Bytes::new())
}

/// WRITE(16) (SBC-4 §5.41); `fua` forces the data to the medium.
#[must_use = "a request does nothing until a session runs it"]
pub fn write16(lun: u16, lba: u64, blocks: u32, data: Bytes, fua: bool) -> ScsiRequest {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x8a;
    cdb[1] = if fua { 0x08 } else { 0 };
    cdb[2..10].copy_from_slice(&lba.to_be_bytes());
    cdb[10..14].copy_from_slice(&blocks.to_be_bytes());
    request(lun, &cdb, 0, data)
}

/// READ(10) (SBC-4 §5.13).
#[must_use = "a request does nothing until a session runs it"]
pub fn read10(lun: u16, lba: u32, blocks: u16, block_size: u32) -> ScsiRequest {
    let mut cdb = [0u8; 10];
    cdb[0] = 0x28;
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
    cdb[0] = 0x2a;
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
    request(lun, &[0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0, Bytes::new())
}

/// TEST UNIT READY (SPC-5 §6.47).
#[must_use = "a request does nothing until a session runs it"]
pub fn test_unit_ready(lun: u16) -> ScsiRequest {
    request(lun, &[0; 6], 0, Bytes::new())
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
        &[0x12, evpd, page, a[0], a[1], 0],
        u32::from(alloc),
        Bytes::new(),
    )
}

/// READ CAPACITY(16) (SBC-4 §5.20).
#[must_use = "a request does nothing until a session runs it"]
pub fn read_capacity16(lun: u16) -> ScsiRequest {
    let mut cdb = [0u8; 16];
    cdb[0] = 0x9e;
    cdb[1] = 0x10;
    cdb[13] = 32;
    request(lun, &cdb, 32, Bytes::new())
}

/// READ CAPACITY(10) (SBC-4 §5.19).
#[must_use = "a request does nothing until a session runs it"]
pub fn read_capacity10(lun: u16) -> ScsiRequest {
    request(lun, &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0], 8, Bytes::new())
}

/// REPORT LUNS (SPC-5 §6.35).
#[must_use = "a request does nothing until a session runs it"]
pub fn report_luns(alloc: u32) -> ScsiRequest {
    let a = alloc.to_be_bytes();
    request(
        0,
        &[0xa0, 0, 0, 0, 0, 0, a[0], a[1], a[2], a[3], 0, 0],
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
        &[0x42, 0, 0, 0, 0, 0, 0, len[0], len[1], 0],
        0,
        Bytes::from(p),
    )
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
        match self.run(read_capacity16(lun)).await {
            Ok(d) => Capacity::parse16(&d),
            Err(Error::Check(s)) if s.key == 0x05 => {
                Capacity::parse10(&self.run(read_capacity10(lun)).await?)
            }
            Err(e) => Err(e),
        }
    }

    /// Waits out unit attentions (a new session starts with one, SAM-5
    /// §5.14) with a few TEST UNIT READY.
    pub async fn clear_unit_attention(&self, lun: u16) -> Result<()> {
        let mut last = Ok(Bytes::new());
        for _ in 0..4 {
            last = self.run(test_unit_ready(lun)).await;
            match &last {
                Err(Error::Check(s)) if s.key == 0x06 => continue,
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
