//! INQUIRY: standard data (SPC-4 §6.6.2) and the vital product data pages
//! (SPC-4 §7.8, SBC-3 §6.5).

use crate::cdb::Cdb;
use crate::lu::LogicalUnit;
use crate::sense::Sense;
use crate::{Request, Response};

/// T10 vendor identification (8 ASCII bytes).
pub const VENDOR: &str = "IRONLUN";

/// VPD pages in ascending order (SPC-4 §7.8.13 requires the list sorted).
const VPD_PAGES: [u8; 6] = [0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2];

/// Version descriptors claimed (SPC-4 §6.6.2, table 143).
const VERSION_DESCRIPTORS: [u16; 4] = [
    0x00a0, // SAM-5
    0x0960, // iSCSI
    0x0460, // SPC-4
    0x04c0, // SBC-3
];

pub fn inquiry(lu: &LogicalUnit, _req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    let evpd = cdb.bit(1, 0);
    let page = cdb.u8(2);
    // 16-bit allocation length since SPC-3.
    let alloc = u32::from(cdb.be16(3));
    if !evpd {
        if page != 0 {
            // SPC-4 §6.6.1: PAGE CODE must be zero without EVPD.
            return Err(Sense::invalid_field(2, None));
        }
        return Ok(Response::data(standard(lu), alloc));
    }
    let data = match page {
        0x00 => vpd(0x00, VPD_PAGES.to_vec()),
        0x80 => vpd(0x80, padded(&lu.cfg.serial, lu.cfg.serial.len().max(1))),
        0x83 => vpd(0x83, device_identification(lu)),
        0xb0 => vpd(0xb0, block_limits(lu)),
        0xb1 => vpd(0xb1, block_device_characteristics(lu)),
        0xb2 => vpd(0xb2, logical_block_provisioning(lu)),
        _ => return Err(Sense::invalid_field(2, None)),
    };
    Ok(Response::data(data, alloc))
}

/// ASCII field padded with spaces (SPC-4 §4.4.1).
fn padded(s: &str, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = s
        .bytes()
        .map(|b| if (0x20..=0x7e).contains(&b) { b } else { b' ' })
        .take(len)
        .collect();
    v.resize(len, b' ');
    v
}

fn vpd(page: u8, body: Vec<u8>) -> Vec<u8> {
    let mut v = Vec::with_capacity(body.len().saturating_add(4));
    v.push(0x00); // peripheral qualifier 0, direct access block device
    v.push(page);
    v.extend_from_slice(&(body.len() as u16).to_be_bytes());
    v.extend_from_slice(&body);
    v
}

/// Standard INQUIRY data, 96 bytes (SPC-4 §6.6.2).
pub fn standard(lu: &LogicalUnit) -> Vec<u8> {
    let mut v = vec![
        0x00, // peripheral qualifier 000b, device type 00h (SBC)
        0x00, // RMB = 0: not removable
        0x06, // VERSION: SPC-4
        0x12, // HISUP = 1, RESPONSE DATA FORMAT = 2
        0x00, // ADDITIONAL LENGTH, set below
        // SCCS, ACC, TPGS (bits 5..4: the ALUA mode), 3PC = 1
        // (EXTENDED COPY), PROTECT
        0x08 | lu.alua.mode().tpgs() << 4,
        0x00, // ENCSERV, MULTIP
        0x02, // CMDQUE
    ];
    v.extend_from_slice(&padded(VENDOR, 8));
    v.extend_from_slice(&padded(&lu.cfg.product, 16));
    v.extend_from_slice(&padded(&lu.cfg.revision, 4));
    v.resize(58, 0);
    for d in VERSION_DESCRIPTORS {
        v.extend_from_slice(&d.to_be_bytes());
    }
    v.resize(96, 0);
    if let Some(b) = v.get_mut(4) {
        *b = 96 - 5;
    }
    v
}

/// Standard INQUIRY data for a LUN with no logical unit behind it:
/// peripheral qualifier 011b, device type 1Fh (SPC-4 §6.6.2).
pub fn standard_no_lu() -> Vec<u8> {
    let mut v = vec![0x7f, 0x00, 0x06, 0x12, 31, 0, 0, 0x02];
    v.extend_from_slice(&padded(VENDOR, 8));
    v.extend_from_slice(&padded("", 16));
    v.extend_from_slice(&padded("", 4));
    v
}

/// The LU's NAA 3h (locally assigned) designator: how the Device
/// Identification page and EXTENDED COPY's CSCD descriptors name it.
pub fn naa_designator(lu: &LogicalUnit) -> [u8; 8] {
    ((0x3u64 << 60) | (lu.cfg.naa_id & 0x0fff_ffff_ffff_ffff)).to_be_bytes()
}

/// Device Identification (SPC-4 §7.8.6): the LU's NAA and T10 vendor ID
/// designators, and for the target port its relative port number, its
/// target port group with ALUA (SPC-5 §7.7.6.6), and its SCSI name
/// string.
fn device_identification(lu: &LogicalUnit) -> Vec<u8> {
    let mut body = Vec::new();
    let mut desc = |proto_codeset: u8, piv_assoc_type: u8, id: &[u8]| {
        body.push(proto_codeset);
        body.push(piv_assoc_type);
        body.push(0);
        body.push(id.len() as u8);
        body.extend_from_slice(id);
    };
    // NAA 3h, locally assigned (SPC-4 §7.8.6.6.2): binary, LU.
    desc(0x01, 0x03, &naa_designator(lu));
    // T10 vendor ID: ASCII, LU; vendor + serial (SPC-4 §7.8.6.4).
    let mut t10 = padded(VENDOR, 8);
    t10.extend_from_slice(lu.cfg.serial.as_bytes());
    t10.truncate(252);
    desc(0x02, 0x01, &t10);
    // Relative target port: iSCSI (5) with PIV, target port association.
    let mut rtp = vec![0, 0];
    rtp.extend_from_slice(&lu.cfg.relative_port.to_be_bytes());
    desc(0x51, 0x94, &rtp);
    // Target port group: iSCSI with PIV, target port association, type 5h.
    if let Some(group) = crate::alua::commands::designated_group(lu) {
        let [hi, lo] = group.to_be_bytes();
        desc(0x51, 0x95, &[0, 0, hi, lo]);
    }
    // SCSI name string of the target port: UTF-8, NUL-terminated, padded
    // to a multiple of 4 (SPC-4 §7.8.6.11; RFC 7143 §4.4 target port
    // name form "<iqn>,t,0x<tpgt>").
    let mut name =
        format!("{},t,0x{:04x}", lu.cfg.target_name, lu.cfg.portal_group_tag).into_bytes();
    name.push(0);
    while name.len() % 4 != 0 {
        name.push(0);
    }
    name.truncate(252);
    desc(0x53, 0x98, &name);
    body
}

/// MAXIMUM COMPARE AND WRITE LENGTH in blocks (VPD B0 byte 5) of an LU
/// whose store is its own; a shared store's may be lower
/// ([`LogicalUnit::max_compare_and_write_blocks`]).
pub const MAX_COMPARE_AND_WRITE_BLOCKS: u8 = 255;

/// MAXIMUM WRITE SAME LENGTH in blocks (VPD B0).
pub const MAX_WRITE_SAME_BLOCKS: u64 = 0xffff;

/// Block Limits (SBC-3 §6.5.3, SBC-4 §6.6.4), page length 3Ch. Field
/// offsets below are page offsets minus the 4-byte header.
fn block_limits(lu: &LogicalUnit) -> Vec<u8> {
    let mut b = [0u8; 0x3c];
    let bs = lu.block_size();
    let blocks =
        |bytes: u32| u32::try_from(u64::from(bytes) / lu.block_bytes()).unwrap_or(u32::MAX);
    let max_blocks = blocks(lu.cfg.max_transfer_bytes);
    // WSNZ = 0: WRITE SAME with zero blocks means "to the end".
    b[1] = lu.max_compare_and_write_blocks();
    // OPTIMAL TRANSFER LENGTH GRANULARITY: the physical block.
    let granule = crate::geometry::granularity(bs, lu.physical_block_size());
    b[2..4].copy_from_slice(&granule.to_be_bytes());
    // MAXIMUM TRANSFER LENGTH and OPTIMAL TRANSFER LENGTH in blocks.
    b[4..8].copy_from_slice(&max_blocks.to_be_bytes());
    b[8..12].copy_from_slice(&max_blocks.min(blocks(1 << 20)).to_be_bytes());
    if lu.thin() {
        // UNMAP limits; zero (no UNMAP) on a fully provisioned LU.
        b[16..20].copy_from_slice(&crate::provisioning::MAX_UNMAP_LBA_COUNT.to_be_bytes());
        b[20..24].copy_from_slice(&crate::provisioning::MAX_UNMAP_DESCRIPTORS.to_be_bytes());
        let granule = (lu.backend.provisioning_granularity() / lu.block_bytes()).max(1);
        b[24..28].copy_from_slice(&u32::try_from(granule).unwrap_or(u32::MAX).to_be_bytes());
        // UGAVALID with an alignment of 0.
        b[28..32].copy_from_slice(&0x8000_0000u32.to_be_bytes());
    }
    b[32..40].copy_from_slice(&MAX_WRITE_SAME_BLOCKS.to_be_bytes());
    // MAXIMUM ATOMIC TRANSFER LENGTH (SBC-4): any transfer; no alignment or
    // granularity requirement.
    b[40..44].copy_from_slice(&max_blocks.to_be_bytes());
    b.to_vec()
}

/// Block Device Characteristics (SBC-3 §6.5.2): non-rotating medium.
fn block_device_characteristics(lu: &LogicalUnit) -> Vec<u8> {
    let mut b = [0u8; 0x3c];
    // MEDIUM ROTATION RATE: the configured value, else the backend's.
    let rotation = lu
        .config()
        .rotation
        .unwrap_or_else(|| lu.backend().rotation());
    b[0..2].copy_from_slice(&rotation.code().to_be_bytes());
    if lu.sanitize_allowed() && lu.thin() {
        // WABEREQ 01b: reads after a BLOCK ERASE succeed (zeros).
        b[3] = 0x40;
    }
    b.to_vec()
}

/// Logical Block Provisioning (SBC-3 §6.5.4; SBC-4's layout in Seagate's
/// SCSI Commands Reference Manual rev. J §5.4.13): LBPU, LBPWS, LBPWS10
/// and LBPRZ with provisioning type "thin" on a thin LU, and THRESHOLD
/// EXPONENT, non-zero when the LU has a soft threshold (zero: thresholds
/// not supported); nothing otherwise.
fn logical_block_provisioning(lu: &LogicalUnit) -> Vec<u8> {
    if lu.thin() {
        let exponent = crate::provisioning::threshold::exponent(lu);
        vec![exponent, 0x80 | 0x40 | 0x20 | 0x04, 0x02, 0]
    } else {
        vec![0u8; 4]
    }
}

#[cfg(test)]
mod tests;
