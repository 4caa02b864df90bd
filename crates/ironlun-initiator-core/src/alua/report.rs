//! What a target says about its ports' asymmetric access: the TPGS
//! field of standard INQUIRY (SPC-5 §6.7.2), the target port's relative
//! port and group in the Device Identification VPD page (SPC-5 §7.7.6),
//! and REPORT TARGET PORT GROUPS' parameter data in both formats (SPC-5
//! §6.36). Parsing only: the bytes come from the network, so every read
//! is checked and a short or inconsistent answer is an error.

use std::time::Duration;

use ironlun_scsi_codes::{opcode, service_action};

/// Target port groups accepted from one report; the data length bounds
/// the rest (at most 255 ports per group, SPC-5 §6.36.2).
pub const MAX_GROUPS: usize = 256;

/// Allocation length of the REPORT TARGET PORT GROUPS the initiator
/// sends: room for 64 groups of 16 ports.
pub const RTPG_ALLOCATION: u32 = 8 + 64 * (8 + 4 * 16);

/// An asymmetric access state (SPC-5 §5.16.2.4, the codes of §6.36.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessState {
    ActiveOptimized,
    ActiveNonOptimized,
    Standby,
    Unavailable,
    LbaDependent,
    Offline,
    Transitioning,
}

impl AccessState {
    /// The state of an ASYMMETRIC ACCESS STATE field; `None` for a
    /// reserved code.
    pub fn from_code(code: u8) -> Option<AccessState> {
        Some(match code & 0x0f {
            0x0 => AccessState::ActiveOptimized,
            0x1 => AccessState::ActiveNonOptimized,
            0x2 => AccessState::Standby,
            0x3 => AccessState::Unavailable,
            0x4 => AccessState::LbaDependent,
            0xe => AccessState::Offline,
            0xf => AccessState::Transitioning,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            AccessState::ActiveOptimized => "active/optimized",
            AccessState::ActiveNonOptimized => "active/non-optimized",
            AccessState::Standby => "standby",
            AccessState::Unavailable => "unavailable",
            AccessState::LbaDependent => "lba-dependent",
            AccessState::Offline => "offline",
            AccessState::Transitioning => "transitioning",
        }
    }
}

impl std::fmt::Display for AccessState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One target port group descriptor (SPC-5 §6.36.2, table 188).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortGroup {
    pub id: u16,
    pub state: AccessState,
    /// PREF: the group is a preferred path.
    pub preferred: bool,
    /// Relative target port identifiers of the group's ports.
    pub ports: Vec<u16>,
}

/// REPORT TARGET PORT GROUPS' answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub groups: Vec<PortGroup>,
    /// IMPLICIT TRANSITION TIME of the extended header (SPC-5 §6.36.2);
    /// `None` in the length-only format or when 0 (not specified).
    pub transition_time: Option<Duration>,
}

impl Report {
    /// The group `id`, or the group listing relative port `port`.
    pub fn group(&self, id: Option<u16>, port: Option<u16>) -> Option<&PortGroup> {
        let by_id = id.and_then(|id| self.groups.iter().find(|g| g.id == id));
        by_id.or_else(|| {
            let port = port?;
            self.groups.iter().find(|g| g.ports.contains(&port))
        })
    }
}

/// Why an answer could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    #[error("{what} is {got} bytes, shorter than it says ({want})")]
    Short {
        what: &'static str,
        got: usize,
        want: usize,
    },
    #[error("target port group {0} reports the reserved access state {1:#x}")]
    ReservedState(u16, u8),
    #[error("more than {MAX_GROUPS} target port groups")]
    TooManyGroups,
}

/// The REPORT TARGET PORT GROUPS CDB (SPC-5 §6.36.1): MAINTENANCE IN,
/// service action 0Ah, PARAMETER DATA FORMAT 001b (extended header,
/// which carries the implicit transition time) when `extended`.
pub fn rtpg_cdb(extended: bool, allocation: u32) -> [u8; 16] {
    let mut cdb = [0u8; 16];
    cdb[0] = opcode::MAINTENANCE_IN;
    cdb[1] = service_action::REPORT_TARGET_PORT_GROUPS | if extended { 0x20 } else { 0 };
    cdb[6..10].copy_from_slice(&allocation.to_be_bytes());
    cdb
}

fn short(what: &'static str, got: usize, want: usize) -> ReportError {
    ReportError::Short { what, got, want }
}

fn be16(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*d.get(at)?, *d.get(at + 1)?]))
}

/// Parses REPORT TARGET PORT GROUPS parameter data in either format
/// (SPC-5 §6.36.2): the extended header is recognised by FORMAT TYPE
/// 001b in byte 4, as a target that ignores the requested format sends
/// the length-only one. Data cut short by the allocation length is an
/// error.
pub fn parse_rtpg(data: &[u8]) -> Result<Report, ReportError> {
    let head: [u8; 4] = data.get(..4).and_then(|h| h.try_into().ok()).ok_or(short(
        "REPORT TARGET PORT GROUPS data",
        data.len(),
        4,
    ))?;
    let len = u32::from_be_bytes(head) as usize;
    let want = len.saturating_add(4);
    let data = data
        .get(..want)
        .ok_or(short("REPORT TARGET PORT GROUPS data", data.len(), want))?;
    let extended = data.get(4).is_some_and(|b| (b >> 4) & 0x7 == 0b001);
    let (mut at, transition_time) = if extended {
        let secs = data.get(5).copied().unwrap_or(0);
        (8, (secs != 0).then(|| Duration::from_secs(u64::from(secs))))
    } else {
        (4, None)
    };
    let mut groups = Vec::new();
    while at < data.len() {
        if groups.len() == MAX_GROUPS {
            return Err(ReportError::TooManyGroups);
        }
        let (g, next) = descriptor(data, at)?;
        groups.push(g);
        at = next;
    }
    Ok(Report {
        groups,
        transition_time,
    })
}

/// The target port group descriptor at `at`, and where the next begins.
fn descriptor(data: &[u8], at: usize) -> Result<(PortGroup, usize), ReportError> {
    let d = data.get(at..).unwrap_or_default();
    let head: [u8; 8] = d.get(..8).and_then(|h| h.try_into().ok()).ok_or(short(
        "a target port group descriptor",
        d.len(),
        8,
    ))?;
    let id = u16::from_be_bytes([head[2], head[3]]);
    let state =
        AccessState::from_code(head[0]).ok_or(ReportError::ReservedState(id, head[0] & 0x0f))?;
    let count = usize::from(head[7]);
    let want = 8 + 4 * count;
    let list = d
        .get(8..want)
        .ok_or(short("a target port group descriptor", d.len(), want))?;
    let ports = list.chunks_exact(4).filter_map(|p| be16(p, 2)).collect();
    let g = PortGroup {
        id,
        state,
        preferred: head[0] & 0x80 != 0,
        ports,
    };
    Ok((g, at + want))
}

/// TPGS of standard INQUIRY data (SPC-5 §6.7.2, byte 5 bits 5:4): 00b no
/// asymmetric access, 01b implicit, 10b explicit, 11b both; 0 when the
/// data is too short to say.
pub fn tpgs(inquiry: &[u8]) -> u8 {
    inquiry.get(5).map_or(0, |b| (b >> 4) & 0x3)
}

/// The target port an answer came through, as VPD 83h names it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortIdentity {
    /// RELATIVE TARGET PORT IDENTIFIER (designator type 4h).
    pub relative_port: Option<u16>,
    /// TARGET PORT GROUP (designator type 5h).
    pub group: Option<u16>,
}

/// The relative port and target port group designators of the target
/// port (ASSOCIATION 01b) in a Device Identification VPD page (SPC-5
/// §7.7.6.1, §7.7.6.5, §7.7.6.6). A designator cut short ends the walk.
pub fn parse_vpd83(page: &[u8]) -> PortIdentity {
    let mut id = PortIdentity::default();
    let Some(len) = be16(page, 2) else {
        return id;
    };
    let end = (4 + usize::from(len)).min(page.len());
    let mut at = 4;
    while let Some(h) = page
        .get(at..at + 4)
        .filter(|_| at + 4 <= end)
        .and_then(|h| <[u8; 4]>::try_from(h).ok())
    {
        let n = usize::from(h[3]);
        let Some(body) = page.get(at + 4..at + 4 + n).filter(|_| at + 4 + n <= end) else {
            break;
        };
        let association = (h[1] >> 4) & 0x3;
        if association == 0b01 && n >= 4 {
            match h[1] & 0x0f {
                0x4 => id.relative_port = be16(body, 2),
                0x5 => id.group = be16(body, 2),
                _ => {}
            }
        }
        at += 4 + n;
    }
    id
}
