//! MODE SENSE(6) and (10) (SPC-4 §6.11, §6.12) over the caching (SBC-3
//! §6.4.5), control (SPC-4 §7.5.8) and informational exceptions control
//! (SPC-4 §7.5.14) pages.

use std::sync::atomic::Ordering;

use crate::cdb::Cdb;
use crate::lu::LogicalUnit;
use crate::sense::{asc, key, Sense};
use crate::{Request, Response};

const PAGE_CACHING: u8 = 0x08;
const PAGE_CONTROL: u8 = 0x0a;
const PAGE_INFORMATIONAL_EXCEPTIONS: u8 = 0x1c;
const ALL_PAGES: u8 = 0x3f;

/// Page control (SPC-4 §6.11): which values to report.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PageControl {
    Current,
    Changeable,
    Default,
}

fn caching(lu: &LogicalUnit, pc: PageControl) -> Vec<u8> {
    let mut p = [0u8; 20];
    p[0] = PAGE_CACHING;
    p[1] = 0x12;
    let wce = match pc {
        PageControl::Current => lu.mode.wce.load(Ordering::Relaxed),
        PageControl::Default => true,
        // MODE SELECT is not implemented yet: nothing is changeable.
        PageControl::Changeable => false,
    };
    if wce {
        p[2] |= 0x04;
    }
    p.to_vec()
}

fn control(lu: &LogicalUnit, pc: PageControl) -> Vec<u8> {
    let mut p = [0u8; 12];
    p[0] = PAGE_CONTROL;
    p[1] = 0x0a;
    if pc == PageControl::Changeable {
        return p.to_vec();
    }
    let current = pc == PageControl::Current;
    if current && lu.mode.d_sense.load(Ordering::Relaxed) {
        p[2] |= 0x04;
    }
    // QUEUE ALGORITHM MODIFIER 1: unrestricted reordering of SIMPLE tasks,
    // which is what the target does.
    p[3] = 0x10;
    if current && lu.mode.swp.load(Ordering::Relaxed) {
        p[4] |= 0x08;
    }
    // BUSY TIMEOUT PERIOD: unlimited.
    p[8] = 0xff;
    p[9] = 0xff;
    p.to_vec()
}

fn informational_exceptions(_lu: &LogicalUnit, _pc: PageControl) -> Vec<u8> {
    let mut p = [0u8; 12];
    p[0] = PAGE_INFORMATIONAL_EXCEPTIONS;
    p[1] = 0x0a;
    p.to_vec()
}

pub fn mode_sense(lu: &LogicalUnit, _req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    let ten = cdb.opcode() == 0x5a;
    let dbd = cdb.bit(1, 3);
    let llbaa = ten && cdb.bit(1, 4);
    let pc = match cdb.u8(2) >> 6 {
        0 => PageControl::Current,
        1 => PageControl::Changeable,
        2 => PageControl::Default,
        // Saved values are not implemented (SPC-4 §6.11).
        _ => {
            return Err(Sense::new(
                key::ILLEGAL_REQUEST,
                asc::SAVING_PARAMETERS_NOT_SUPPORTED,
            ))
        }
    };
    let page = cdb.u8(2) & 0x3f;
    let subpage = cdb.u8(3);
    let alloc = if ten {
        u32::from(cdb.be16(7))
    } else {
        u32::from(cdb.u8(4))
    };
    // Subpage 0 or FFh (all subpages); none of our pages has subpages.
    if subpage != 0 && subpage != 0xff {
        return Err(Sense::invalid_field(3, None));
    }
    let mut pages = Vec::new();
    match page {
        PAGE_CACHING => pages.extend(caching(lu, pc)),
        PAGE_CONTROL => pages.extend(control(lu, pc)),
        PAGE_INFORMATIONAL_EXCEPTIONS => pages.extend(informational_exceptions(lu, pc)),
        ALL_PAGES => {
            pages.extend(caching(lu, pc));
            pages.extend(control(lu, pc));
            pages.extend(informational_exceptions(lu, pc));
        }
        _ => return Err(Sense::invalid_field(2, Some(5))),
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
    // Device-specific parameter (SBC-3 §6.4.1): WP and DPOFUA.
    let mut dsp = 0x10;
    if lu.write_protected() {
        dsp |= 0x80;
    }
    let mut out = Vec::new();
    if ten {
        let len = (6 + bd.len() + pages.len()) as u16;
        out.extend_from_slice(&len.to_be_bytes());
        out.push(0); // medium type
        out.push(dsp);
        out.push(u8::from(llbaa && !bd.is_empty()));
        out.push(0);
        out.extend_from_slice(&(bd.len() as u16).to_be_bytes());
    } else {
        let len = (3 + bd.len() + pages.len()).min(255) as u8;
        out.push(len);
        out.push(0);
        out.push(dsp);
        out.push(bd.len() as u8);
    }
    out.extend_from_slice(&bd);
    out.extend_from_slice(&pages);
    Ok(Response::data(out, alloc))
}
