//! LOG SENSE (SPC-4 §6.8; Seagate's SCSI Commands Reference Manual rev. J
//! §3.8 and §5.2 give SPC-5's text) over the Supported Log Pages page
//! (00h), the Supported Log Pages and Subpages page (00h/FFh) and, on an
//! LU with a soft threshold, the Logical Block Provisioning page (0Ch,
//! SBC-4; rev. J §5.2.13).
//!
//! Nothing is saved: SP = 1 is INVALID FIELD IN CDB. PPC is outside the
//! CDB usage data, so the opcode table refuses it. Every PC value is
//! accepted and gives the same data: PC chooses among threshold and
//! cumulative values of data counter parameters, and these pages hold
//! none (the Logical Block Provisioning parameters are binary format
//! lists, the supported pages pages are lists of page codes).

use crate::cdb::Cdb;
use crate::lu::LogicalUnit;
use crate::provisioning::threshold;
use crate::sense::Sense;
use crate::{Request, Response};

/// A page's log parameters: (PARAMETER CODE, the parameter's bytes), in
/// ascending order of code.
pub(crate) type Parameters = Vec<(u16, Vec<u8>)>;

/// One log page a LOG SENSE can ask for.
struct LogPage {
    code: u8,
    subpage: u8,
    /// Its log parameters. A supported pages page is one list, counted as
    /// parameter 0000h for the PARAMETER POINTER.
    parameters: fn(&LogicalUnit) -> Parameters,
    /// Whether this LU has the page.
    offered: fn(&LogicalUnit) -> bool,
}

/// In ascending order of page code, then subpage code.
static PAGES: &[LogPage] = &[
    LogPage {
        code: 0x00,
        subpage: 0x00,
        parameters: supported_pages,
        offered: always,
    },
    LogPage {
        code: 0x00,
        subpage: 0xff,
        parameters: supported_pages_and_subpages,
        offered: always,
    },
    LogPage {
        code: 0x0c,
        subpage: 0x00,
        parameters: threshold::log_parameters,
        offered: has_soft_threshold,
    },
];

fn always(_lu: &LogicalUnit) -> bool {
    true
}

fn has_soft_threshold(lu: &LogicalUnit) -> bool {
    lu.soft_threshold().is_some()
}

fn offered(lu: &LogicalUnit) -> impl Iterator<Item = &'static LogPage> + '_ {
    PAGES.iter().filter(move |p| (p.offered)(lu))
}

/// Supported Log Pages (00h): the page codes of the page_0 pages.
fn supported_pages(lu: &LogicalUnit) -> Parameters {
    let codes = offered(lu)
        .filter(|p| p.subpage == 0)
        .map(|p| p.code)
        .collect();
    vec![(0, codes)]
}

/// Supported Log Pages and Subpages (00h/FFh): every page code and
/// subpage code pair.
fn supported_pages_and_subpages(lu: &LogicalUnit) -> Parameters {
    let pairs = offered(lu).flat_map(|p| [p.code, p.subpage]).collect();
    vec![(0, pairs)]
}

/// LOG SENSE: the page the PAGE CODE and SUBPAGE CODE name, from the
/// parameter the PARAMETER POINTER names on, cut to the ALLOCATION
/// LENGTH. A page this LU does not have, or a pointer past its largest
/// parameter code, is INVALID FIELD IN CDB.
pub fn log_sense(lu: &LogicalUnit, _req: &Request<'_>, cdb: &Cdb<'_>) -> Result<Response, Sense> {
    if cdb.bit(1, 0) {
        // SP: saving log parameters is not supported.
        return Err(Sense::invalid_field(1, Some(0)));
    }
    let code = cdb.u8(2) & 0x3f;
    let subpage = cdb.u8(3);
    let pointer = cdb.be16(5);
    let alloc = u32::from(cdb.be16(7));
    let Some(page) = offered(lu).find(|p| p.code == code && p.subpage == subpage) else {
        let known = offered(lu).any(|p| p.code == code);
        return Err(if known {
            Sense::invalid_field(3, None)
        } else {
            Sense::invalid_field(2, Some(5))
        });
    };
    let parameters = (page.parameters)(lu);
    let largest = parameters.last().map_or(0, |(c, _)| *c);
    if pointer > largest {
        return Err(Sense::invalid_field(5, None));
    }
    let body: Vec<u8> = parameters
        .into_iter()
        .filter(|(c, _)| *c >= pointer)
        .flat_map(|(_, bytes)| bytes)
        .collect();
    Ok(Response::data(frame(page, &body), alloc))
}

/// The log page header (SPC-4 §7.3): DS = 1 (its parameters are not
/// saved), SPF with a subpage, PAGE CODE, SUBPAGE CODE, PAGE LENGTH.
fn frame(page: &LogPage, body: &[u8]) -> Vec<u8> {
    let spf = if page.subpage != 0 { 0x40 } else { 0 };
    let len = u16::try_from(body.len()).unwrap_or(u16::MAX);
    let mut out = Vec::with_capacity(body.len().saturating_add(4));
    out.push(0x80 | spf | page.code);
    out.push(page.subpage);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests;
