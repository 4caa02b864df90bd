//! EXTENDED COPY (LID1) requests (SPC-4 §6.4) and the LU designator
//! their copy target descriptors name (Device Identification VPD,
//! SPC-4 §7.8.6).
//!
//! A copy is described by one identification descriptor CSCD (type E4h,
//! SPC-4 §6.4.5.5) per LU, holding its NAA designator, and block device
//! to block device segment descriptors (type 02h, SPC-4 §6.4.6.5). The
//! list has no list identifier (LIST ID USAGE 11b), so copies may run at
//! once without choosing identifiers apart.

use bytes::Bytes;
use ironlun_proto::initiator::ScsiRequest;
use ironlun_scsi_codes::{opcode, service_action};

use crate::error::{Error, Result};
use crate::scsi::{inquiry, request};
use crate::session::Session;

/// Segments one request may carry (the copy manager's limit may be lower).
pub const MAX_SEGMENTS: usize = 64;

/// One block-to-block segment: `blocks` blocks from `src_lba` of the
/// source LU to `dst_lba` of the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub src_lba: u64,
    pub dst_lba: u64,
    pub blocks: u16,
}

/// EXTENDED COPY(LID1) on `lun` of `segments` from the LU named by
/// `src` to the one named by `dst` (NAA designators; the same for a copy
/// within one LU), whose blocks are `block_len` bytes.
pub fn extended_copy(
    lun: u16,
    src: [u8; 8],
    dst: [u8; 8],
    block_len: u32,
    segments: &[Segment],
) -> Result<ScsiRequest> {
    if segments.is_empty() || segments.len() > MAX_SEGMENTS {
        return Err(Error::Malformed(format!(
            "EXTENDED COPY: {} segments (1..={MAX_SEGMENTS})",
            segments.len()
        )));
    }
    let cscds = if src == dst {
        vec![src]
    } else {
        vec![src, dst]
    };
    let dst_index = (cscds.len() - 1) as u16;
    let mut p = Vec::with_capacity(16 + 32 * cscds.len() + 28 * segments.len());
    p.push(0); // LIST IDENTIFIER
    p.push(0b11 << 3); // LIST ID USAGE 11b, PRIORITY 0
    p.extend_from_slice(&((32 * cscds.len()) as u16).to_be_bytes());
    p.extend_from_slice(&[0; 4]);
    p.extend_from_slice(&((28 * segments.len()) as u32).to_be_bytes());
    p.extend_from_slice(&[0; 4]); // INLINE DATA LENGTH
    for naa in &cscds {
        p.extend_from_slice(&cscd(naa, block_len));
    }
    for s in segments {
        p.extend_from_slice(&[0x02, 0, 0, 0x18, 0, 0]);
        p.extend_from_slice(&dst_index.to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.extend_from_slice(&s.blocks.to_be_bytes());
        p.extend_from_slice(&s.src_lba.to_be_bytes());
        p.extend_from_slice(&s.dst_lba.to_be_bytes());
    }
    let len = (p.len() as u32).to_be_bytes();
    let cdb = [
        opcode::THIRD_PARTY_COPY_OUT,
        service_action::EXTENDED_COPY_LID1,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        len[0],
        len[1],
        len[2],
        len[3],
        0,
        0,
    ];
    Ok(request(lun, &cdb, 0, Bytes::from(p)))
}

/// An identification descriptor CSCD of a block device (SPC-4 §6.4.5.5).
fn cscd(naa: &[u8; 8], block_len: u32) -> [u8; 32] {
    let mut d = [0u8; 32];
    d[0] = 0xe4;
    // Designation descriptor: binary, LU association, NAA, 8 bytes.
    d[4] = 0x01;
    d[5] = 0x03;
    d[7] = 8;
    d[8..16].copy_from_slice(naa);
    // Block device parameters: DISK BLOCK LENGTH in bytes 29..31.
    d[29..32].copy_from_slice(&block_len.to_be_bytes()[1..]);
    d
}

/// The NAA designator (eight bytes, LU association) in Device
/// Identification VPD data, if there is one.
pub fn naa_designator(page: &[u8]) -> Option<[u8; 8]> {
    let len = usize::from(u16::from_be_bytes([*page.get(2)?, *page.get(3)?]));
    let mut rest = page.get(4..(4 + len).min(page.len()))?;
    while rest.len() >= 4 {
        let dlen = usize::from(*rest.get(3)?);
        let body = rest.get(4..4 + dlen)?;
        let (code_set, kind) = (rest.first()? & 0x0f, rest.get(1)? & 0x3f);
        // Association 00b (the LU), type 3h (NAA), binary.
        if kind == 0x03 && code_set == 0x01 && dlen == 8 {
            return <[u8; 8]>::try_from(body).ok();
        }
        rest = rest.get(4 + dlen..)?;
    }
    None
}

impl Session {
    /// The NAA designator of `lun` (Device Identification VPD page 83h).
    pub async fn naa_designator(&self, lun: u16) -> Result<[u8; 8]> {
        let d = self.run(inquiry(lun, Some(0x83), 1024)).await?;
        naa_designator(&d)
            .ok_or_else(|| Error::Malformed("Device Identification page: no NAA designator".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_list_layout() {
        let naa = [0x30, 1, 2, 3, 4, 5, 6, 7];
        let seg = Segment {
            src_lba: 0x10,
            dst_lba: 0x20,
            blocks: 8,
        };
        let r = extended_copy(3, naa, naa, 512, &[seg]).unwrap();
        assert_eq!(r.cdb[0..2], [0x83, 0x00]);
        assert_eq!(r.cdb[10..14], [0, 0, 0, 16 + 32 + 28]);
        let p = &r.write[..];
        assert_eq!(p[1], 0x18);
        assert_eq!(p[2..4], [0, 32]);
        assert_eq!(p[8..12], [0, 0, 0, 28]);
        let c = &p[16..48];
        assert_eq!(c[0], 0xe4);
        assert_eq!(c[4..8], [1, 3, 0, 8]);
        assert_eq!(c[8..16], naa);
        assert_eq!(c[29..32], [0, 2, 0]);
        let s = &p[48..76];
        assert_eq!(s[0..4], [0x02, 0, 0, 0x18]);
        assert_eq!(s[4..8], [0, 0, 0, 0], "source and destination are CSCD 0");
        assert_eq!(s[10..12], [0, 8]);
        assert_eq!(s[19], 0x10);
        assert_eq!(s[27], 0x20);
        assert!(extended_copy(3, naa, naa, 512, &[]).is_err());
    }

    #[test]
    fn naa_found_among_designators() {
        // A T10 vendor ID designator first, then the NAA.
        let mut page = vec![0, 0x83, 0, 0];
        page.extend_from_slice(&[0x02, 0x01, 0, 4, b'a', b'b', b'c', b'd']);
        page.extend_from_slice(&[0x01, 0x03, 0, 8, 0x30, 1, 2, 3, 4, 5, 6, 7]);
        page[3] = (page.len() - 4) as u8;
        assert_eq!(naa_designator(&page), Some([0x30, 1, 2, 3, 4, 5, 6, 7]));
        // Truncated: no panic, no designator.
        assert_eq!(naa_designator(&page[..10]), None);
        assert_eq!(naa_designator(&[]), None);
    }
}
