//! MODE SENSE(6/10) and MODE SELECT(6/10) (SPC-4 §6.9–§6.12) over the
//! caching (SBC-3 §6.4.5), control (SPC-4 §7.5.8) and informational
//! exceptions control (SPC-4 §7.5.14) pages, and on an LU with a soft
//! threshold the Logical Block Provisioning subpage 1Ch/02h (SBC-4; see
//! [`crate::provisioning::threshold`]).
//!
//! Each page is one row of [`PAGES`]: how to build its current and
//! default values, which bits MODE SELECT may change, how a change is
//! applied, and whether the LU has it. Saved values are not implemented
//! (nothing is persisted), so PC = 11b and SP = 1 are refused as SPC-4
//! prescribes.

use std::sync::atomic::Ordering;

use crate::cdb::Cdb;
use crate::lu::LogicalUnit;
use crate::provisioning::threshold;
use crate::sense::Sense;
use crate::{Request, Response};
use ironlun_scsi_codes::{opcode, Asc, SenseKey};

const ALL_PAGES: u8 = 0x3f;

/// Page control (SPC-4 §6.11): which values to report.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PageControl {
    Current,
    Changeable,
    Default,
}

struct ModePage {
    code: u8,
    /// SUBPAGE CODE: 0 for a page_0 format page, else the subpage of a
    /// sub_page format page (SPF = 1, SPC-4 §7.5).
    subpage: u8,
    /// Current (true) or default (false) values, header included.
    build: fn(&LogicalUnit, bool) -> Vec<u8>,
    /// The changeable-values page (PC = 01b): page code and length, then
    /// a one for every bit MODE SELECT may change.
    changeable: &'static [u8],
    /// Applies a validated page from MODE SELECT.
    apply: fn(&LogicalUnit, &[u8]),
    /// Whether this LU has the page.
    offered: fn(&LogicalUnit) -> bool,
}

fn bit(page: &[u8], byte: usize, mask: u8) -> bool {
    page.get(byte).is_some_and(|b| b & mask != 0)
}

/// Caching (SBC-3 §6.4.5): WCE is changeable.
fn caching(lu: &LogicalUnit, current: bool) -> Vec<u8> {
    let mut p = [0u8; 20];
    p[0] = 0x08;
    p[1] = 0x12;
    let wce = !current || lu.mode.wce.load(Ordering::Relaxed);
    if wce {
        p[2] |= 0x04;
    }
    p.to_vec()
}

fn apply_caching(lu: &LogicalUnit, page: &[u8]) {
    lu.mode.wce.store(bit(page, 2, 0x04), Ordering::Relaxed);
}

/// Control (SPC-5 §7.5.8): D_SENSE, SWP and TAS are changeable. TAS is
/// 1 by default: a task another I_T nexus aborts (LOGICAL UNIT RESET,
/// CLEAR TASK SET, target reset, PREEMPT AND ABORT) ends with TASK
/// ABORTED status, so its initiator retries at once instead of waiting
/// for its command timeout.
fn control(lu: &LogicalUnit, current: bool) -> Vec<u8> {
    let mut p = [0u8; 12];
    p[0] = 0x0a;
    p[1] = 0x0a;
    if current && lu.mode.d_sense.load(Ordering::Relaxed) {
        p[2] |= 0x04;
    }
    // QUEUE ALGORITHM MODIFIER 1: unrestricted reordering of SIMPLE tasks,
    // which is what the target does.
    p[3] = 0x10;
    if current && lu.mode.swp.load(Ordering::Relaxed) {
        p[4] |= 0x08;
    }
    if !current || lu.mode.tas.load(Ordering::Relaxed) {
        p[5] |= 0x40;
    }
    // BUSY TIMEOUT PERIOD: unlimited.
    p[8] = 0xff;
    p[9] = 0xff;
    p.to_vec()
}

fn apply_control(lu: &LogicalUnit, page: &[u8]) {
    lu.mode.d_sense.store(bit(page, 2, 0x04), Ordering::Relaxed);
    lu.mode.swp.store(bit(page, 4, 0x08), Ordering::Relaxed);
    lu.mode.tas.store(bit(page, 5, 0x40), Ordering::Relaxed);
}

impl LogicalUnit {
    /// The control page's TAS bit: whether tasks another I_T nexus aborts
    /// end with TASK ABORTED status (SPC-5 §7.5.8, SAM-5 §5.6).
    pub fn tas(&self) -> bool {
        self.mode.tas.load(Ordering::Relaxed)
    }
}

/// Informational Exceptions Control (SPC-4 §7.5.14): no exceptions are
/// reported, nothing changes.
fn informational_exceptions(_lu: &LogicalUnit, _current: bool) -> Vec<u8> {
    let mut p = [0u8; 12];
    p[0] = 0x1c;
    p[1] = 0x0a;
    p.to_vec()
}

fn apply_nothing(_lu: &LogicalUnit, _page: &[u8]) {}

fn always(_lu: &LogicalUnit) -> bool {
    true
}

fn has_soft_threshold(lu: &LogicalUnit) -> bool {
    lu.soft_threshold().is_some()
}

/// In ascending order of page code, then subpage code, as MODE SENSE
/// returns them.
static PAGES: &[ModePage] = &[
    ModePage {
        code: 0x08,
        build: caching,
        changeable: &[
            0x08, 0x12, 0x04, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ],
        apply: apply_caching,
        subpage: 0,
        offered: always,
    },
    ModePage {
        code: 0x0a,
        build: control,
        changeable: &[0x0a, 0x0a, 0x04, 0, 0x08, 0x40, 0, 0, 0, 0, 0, 0],
        apply: apply_control,
        subpage: 0,
        offered: always,
    },
    ModePage {
        code: 0x1c,
        build: informational_exceptions,
        changeable: &[0x1c, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        apply: apply_nothing,
        subpage: 0,
        offered: always,
    },
    // Logical Block Provisioning (1Ch/02h): nothing changeable.
    ModePage {
        code: 0x1c,
        build: threshold::mode_page,
        changeable: &threshold::MODE_PAGE_CHANGEABLE,
        apply: apply_nothing,
        subpage: 0x02,
        offered: has_soft_threshold,
    },
];

/// The pages a MODE SENSE's PAGE CODE and SUBPAGE CODE select (SPC-4
/// §6.11): page 3Fh is every page_0 format page (subpage 00h)
/// or every page and subpage (FFh); another page code with subpage FFh is
/// that page and all its subpages. A page or subpage this LU does not
/// have is INVALID FIELD IN CDB, pointing at the page code if the LU has
/// no page of that code, else at the subpage code.
fn selected(lu: &LogicalUnit, code: u8, subpage: u8) -> Result<Vec<&'static ModePage>, Sense> {
    let offered = || PAGES.iter().filter(|p| (p.offered)(lu));
    let pages: Vec<_> = match (code, subpage) {
        (ALL_PAGES, 0x00) => offered().filter(|p| p.subpage == 0).collect(),
        (ALL_PAGES, 0xff) => offered().collect(),
        (_, 0xff) => offered().filter(|p| p.code == code).collect(),
        (ALL_PAGES, _) => Vec::new(),
        _ => offered()
            .filter(|p| p.code == code && p.subpage == subpage)
            .collect(),
    };
    if pages.is_empty() {
        let known = code == ALL_PAGES || offered().any(|p| p.code == code);
        return Err(if known {
            Sense::invalid_field(3, None)
        } else {
            Sense::invalid_field(2, Some(5))
        });
    }
    Ok(pages)
}

fn page_bytes(lu: &LogicalUnit, p: &ModePage, pc: PageControl) -> Vec<u8> {
    match pc {
        PageControl::Current => (p.build)(lu, true),
        PageControl::Default => (p.build)(lu, false),
        PageControl::Changeable => p.changeable.to_vec(),
    }
}

/// Device-specific parameter (SBC-3 §6.4.1): WP and DPOFUA.
fn device_specific(lu: &LogicalUnit, nexus: crate::NexusId) -> u8 {
    let mut dsp = 0x10;
    if lu.write_protected_for(nexus) {
        dsp |= 0x80;
    }
    dsp
}

pub fn mode_sense(lu: &LogicalUnit, req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    let ten = cdb.opcode() == opcode::MODE_SENSE_10;
    let dbd = cdb.bit(1, 3);
    let llbaa = ten && cdb.bit(1, 4);
    let pc = match cdb.u8(2) >> 6 {
        0 => PageControl::Current,
        1 => PageControl::Changeable,
        2 => PageControl::Default,
        // Saved values are not implemented (SPC-4 §6.11).
        _ => {
            return Err(Sense::new(
                SenseKey::ILLEGAL_REQUEST,
                Asc::SAVING_PARAMETERS_NOT_SUPPORTED,
            ))
        }
    };
    let code = cdb.u8(2) & 0x3f;
    let subpage = cdb.u8(3);
    let alloc = if ten {
        u32::from(cdb.be16(7))
    } else {
        u32::from(cdb.u8(4))
    };
    let mut pages = Vec::new();
    for p in selected(lu, code, subpage)? {
        pages.extend(page_bytes(lu, p, pc));
    }

    // Block descriptor (SPC-4 §7.5.5, SBC-3 §6.4.2): 8 bytes, or 16 with
    // LLBAA in MODE SENSE(10).
    let mut bd = Vec::new();
    if !dbd {
        let blocks = lu.num_blocks();
        if llbaa {
            bd.extend_from_slice(&blocks.to_be_bytes());
            bd.extend_from_slice(&[0, 0, 0, 0]);
            bd.extend_from_slice(&lu.block_size().to_be_bytes());
        } else {
            bd.extend_from_slice(&u32::try_from(blocks).unwrap_or(u32::MAX).to_be_bytes());
            bd.push(0);
            bd.extend_from_slice(&lu.block_size().to_be_bytes()[1..]);
        }
    }
    let dsp = device_specific(lu, req.nexus);
    let mut out = Vec::new();
    // MODE DATA LENGTH: the bytes after it (a few hundred at most).
    let rest = bd.len().saturating_add(pages.len());
    if ten {
        let len = u16::try_from(rest.saturating_add(6)).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.push(0); // medium type
        out.push(dsp);
        out.push(u8::from(llbaa && !bd.is_empty()));
        out.push(0);
        out.extend_from_slice(&(bd.len() as u16).to_be_bytes());
    } else {
        let len = u8::try_from(rest.saturating_add(3)).unwrap_or(u8::MAX);
        out.push(len);
        out.push(0);
        out.push(dsp);
        out.push(bd.len() as u8);
    }
    out.extend_from_slice(&bd);
    out.extend_from_slice(&pages);
    Ok(Response::data(out, alloc))
}

/// MODE SELECT(6/10) (SPC-4 §6.9, §6.10): the parameter list is checked
/// whole (header, block descriptor, every page against its changeable
/// mask) before anything is applied; a change raises MODE PARAMETERS
/// CHANGED for the other I_T nexuses (SPC-4 §5.14).
pub fn mode_select(lu: &LogicalUnit, req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    let ten = cdb.opcode() == opcode::MODE_SELECT_10;
    if !cdb.bit(1, 4) {
        // PF = 0: vendor-specific page format, not supported.
        return Err(Sense::invalid_field(1, Some(4)));
    }
    if cdb.bit(1, 0) {
        // SP = 1: saving pages is not supported.
        return Err(Sense::invalid_field(1, Some(0)));
    }
    let len = if ten {
        usize::from(cdb.be16(7))
    } else {
        usize::from(cdb.u8(4))
    };
    if len == 0 {
        return Ok(Response::good());
    }
    let data = req.parameter_list(len);
    let header = if ten { 8 } else { 4 };
    let length_error = || Sense::new(SenseKey::ILLEGAL_REQUEST, Asc::PARAMETER_LIST_LENGTH_ERROR);
    if data.len() < header || data.len() < len {
        return Err(length_error());
    }
    let p = Cdb(data);
    // MODE DATA LENGTH is reserved in MODE SELECT; the medium type must be
    // 0; the device-specific parameter is ignored for direct access
    // devices (SBC-3 §6.4.1).
    let (mode_len_zero, medium, bd_len) = if ten {
        (p.be16(0) == 0, p.u8(2), usize::from(p.be16(6)))
    } else {
        (p.u8(0) == 0, p.u8(1), usize::from(p.u8(3)))
    };
    if !mode_len_zero {
        return Err(Sense::invalid_param(0, None));
    }
    if medium != 0 {
        return Err(Sense::invalid_param(if ten { 2 } else { 1 }, None));
    }
    let long = ten && p.bit(4, 0);
    let (bd_size, whole) = if long {
        (16, bd_len % 16 == 0)
    } else {
        (8, bd_len % 8 == 0)
    };
    let bd_end = header
        .checked_add(bd_len)
        .filter(|&end| whole && end <= data.len())
        .ok_or_else(length_error)?;
    // A block descriptor may only restate the block length; resizing or
    // reformatting is not supported.
    for at in (header..bd_end).step_by(bd_size) {
        let d = Cdb(data.get(at..).unwrap_or(&[]));
        let (blocks, block_len, len_at) = if long {
            (d.be64(0), d.be32(12), 12)
        } else {
            (u64::from(d.be32(0)), d.be24(5), 5)
        };
        if block_len != lu.block_size() {
            return Err(Sense::invalid_param(field_ptr(at, len_at), None));
        }
        // NUMBER OF BLOCKS may be 0 (unchanged), the capacity, or in a
        // short descriptor FFFFFFFFh for a capacity beyond 32 bits.
        let restated = blocks == 0 || blocks == lu.num_blocks() || (!long && blocks == 0xffff_ffff);
        if !restated {
            return Err(Sense::invalid_param(field_ptr(at, 0), None));
        }
    }
    let mut at = bd_end;
    let mut accepted: Vec<(&ModePage, &[u8])> = Vec::new();
    while at < data.len() {
        let (page, given) = selected_page(lu, data, at)?;
        accepted.push((page, given));
        // The page lies within the parameter list.
        at = at.saturating_add(given.len());
    }
    let current = |lu: &LogicalUnit| -> Vec<Vec<u8>> {
        PAGES
            .iter()
            .filter(|pg| (pg.offered)(lu))
            .map(|pg| (pg.build)(lu, true))
            .collect()
    };
    let before = current(lu);
    for (page, given) in accepted {
        (page.apply)(lu, given);
    }
    if before != current(lu) {
        lu.establish_ua(Asc::MODE_PARAMETERS_CHANGED, Some(req.nexus));
    }
    Ok(Response::written(len as u32))
}

/// The mode page at `at` of a MODE SELECT parameter list, checked: a
/// page this LU has, in its format (page_0, or sub_page with SPF = 1 and
/// a two-byte PAGE LENGTH), of its length, and with every bit outside its
/// changeable mask equal to the current value (SPC-4 §6.9). PS is
/// reserved in MODE SELECT.
fn selected_page<'a>(
    lu: &LogicalUnit,
    data: &'a [u8],
    at: usize,
) -> Result<(&'static ModePage, &'a [u8]), Sense> {
    let rest = data.get(at..).unwrap_or(&[]);
    let p = Cdb(rest);
    if p.bit(0, 7) {
        return Err(Sense::invalid_param(field_ptr(at, 0), Some(7)));
    }
    let code = p.u8(0) & 0x3f;
    let spf = p.bit(0, 6);
    // PAGE LENGTH counts the bytes after it: a u16 or u8 and a constant.
    let (subpage, length_at, page_len) = if spf {
        (p.u8(1), 2, usize::from(p.be16(2)).saturating_add(4))
    } else {
        (0, 1, usize::from(p.u8(1)).saturating_add(2))
    };
    let found = PAGES.iter().find(|pg| {
        pg.code == code && pg.subpage == subpage && (pg.subpage != 0) == spf && (pg.offered)(lu)
    });
    let Some(page) = found else {
        return Err(Sense::invalid_param(field_ptr(at, 0), None));
    };
    if page_len != page.changeable.len() {
        return Err(Sense::invalid_param(field_ptr(at, length_at), None));
    }
    let Some(given) = rest.get(..page_len) else {
        return Err(Sense::new(
            SenseKey::ILLEGAL_REQUEST,
            Asc::PARAMETER_LIST_LENGTH_ERROR,
        ));
    };
    let current = (page.build)(lu, true);
    let header = if spf { 4 } else { 2 };
    for (i, ((g, c), m)) in given
        .iter()
        .zip(&current)
        .zip(page.changeable)
        .enumerate()
        .skip(header)
    {
        if (g ^ c) & !m != 0 {
            return Err(Sense::invalid_param(field_ptr(at, i), None));
        }
    }
    Ok((page, given))
}

/// The field pointer to byte `k` of what starts at `at` in a MODE SELECT
/// parameter list, which is at most 65535 bytes long (PARAMETER LIST
/// LENGTH is 16 bits), so a u16 holds it.
fn field_ptr(at: usize, k: usize) -> u16 {
    u16::try_from(at.saturating_add(k)).unwrap_or(u16::MAX)
}

#[cfg(test)]
mod tests;
