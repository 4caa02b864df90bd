//! The saved form of a LU's persistent reservation state (APTPL,
//! SPC-5 §5.14.5): what [`PrState::encode`] writes and
//! [`PrState::decode`] reads back when the target starts again.
//!
//! Version 2, one record a line, its fields one space apart:
//!
//! ```text
//! ironlun-pr 2
//! generation <PRgeneration, decimal>
//! register <key, 16 hex digits> <ALL_TG_PT, 0 or 1> <relative port> <initiator port>
//! reserve <type> <relative port> <initiator port>
//! end
//! ```
//!
//! An initiator port name is escaped (`crate::saved::escape`): every byte outside
//! `!`..`~`, and `%` itself, is `%xx`. No field can hold a space, a line
//! end or a control character, so whatever an initiator calls itself, its
//! name is one field of its own record and never ends it or starts
//! another.
//!
//! The reader is strict, because the file outlives the process and anyone
//! who could write it could otherwise hand a LU a reservation no
//! initiator made: records in that order (registrations, then at most one
//! reservation), each field in its one canonical spelling, a known
//! reservation type (SPC-5 §6.17.3), non-zero keys, no two registrations
//! of one I_T nexus, a reservation whose holder is registered (or, for
//! the all-registrants types, with registrants left), initiator port
//! names of the `name,i,0x<ISID>` form [`ItNexus`] gives them, at most
//! [`MAX_REGISTRATIONS`] records and [`MAX_STATE_BYTES`] bytes, nothing
//! after `end`.
//!
//! Version 1 wrote names raw, one record a line: a name holding a line
//! end could add records. Its files are still read, for the upgrade,
//! only when every name in them is a plain initiator port name
//! ([`strict_port_name`]); anything else is refused like any file that
//! does not parse. The next save writes version 2.

use std::fmt::Write as _;

use super::{pr_type, ItNexus, PrState, Registration, Reservation};
use crate::saved::{bad_line as bad, decimal, escape, hex64, lines, unescape};

const MAGIC_V1: &str = "ironlun-pr 1";
const MAGIC_V2: &str = "ironlun-pr 2";

/// Most registrations a LU keeps; a REGISTER past them is INSUFFICIENT
/// REGISTRATION RESOURCES (SPC-5 §5.14.7).
pub const MAX_REGISTRATIONS: usize = 1024;

/// Longest iSCSI name (RFC 7143 §4.2.7.1: 223 bytes).
pub const MAX_ISCSI_NAME_BYTES: usize = 223;

/// `,i,0x` and the ISID's 12 hex digits after the iSCSI name.
const PORT_SUFFIX_BYTES: usize = 17;

/// Longest initiator port name: an iSCSI name and its ISID.
pub const MAX_PORT_NAME_BYTES: usize = MAX_ISCSI_NAME_BYTES + PORT_SUFFIX_BYTES;

/// Longest saved state: the longest record (a registration whose name is
/// escaped byte by byte) for every registration and the reservation.
pub const MAX_STATE_BYTES: usize = 64 + (MAX_REGISTRATIONS + 1) * (48 + 3 * MAX_PORT_NAME_BYTES);

impl PrState {
    /// The saved form (version 2).
    pub fn encode(&self) -> String {
        let mut s = format!("{MAGIC_V2}\ngeneration {}\n", self.generation);
        for r in &self.registrations {
            let _ = writeln!(
                s,
                "register {:016x} {} {} {}",
                r.key,
                u8::from(r.all_tg_pt),
                r.nexus.relative_port,
                escape(&r.nexus.initiator_port)
            );
        }
        if let Some(r) = &self.reservation {
            let _ = writeln!(
                s,
                "reserve {} {} {}",
                r.pr_type,
                r.holder.relative_port,
                escape(&r.holder.initiator_port)
            );
        }
        s.push_str("end\n");
        s
    }

    /// Reads a saved state (version 2, or a version 1 file whose names
    /// are all plain); APTPL is set, since it was saved. The error says
    /// which line and why.
    pub fn decode(text: &str) -> Result<PrState, String> {
        if text.len() > MAX_STATE_BYTES {
            return Err(format!("longer than {MAX_STATE_BYTES} bytes"));
        }
        let mut lines = lines(text)?;
        let version = match lines.next() {
            Some((MAGIC_V2, _)) => Version::Two,
            Some((MAGIC_V1, _)) => Version::One,
            _ => return Err("not an ironlun persistent reservation file".into()),
        };
        let mut st = PrState {
            aptpl: true,
            ..PrState::default()
        };
        let (line, n) = lines.next().ok_or("no generation line")?;
        st.generation = generation(line).ok_or_else(|| bad(n, line, "not a generation"))?;
        let mut ended = false;
        for (line, n) in lines {
            if ended {
                return Err(bad(n, line, "after the end"));
            }
            record(&mut st, line, version, &mut ended).map_err(|why| bad(n, line, why))?;
        }
        if version == Version::Two && !ended {
            return Err("no end line".into());
        }
        check_reservation(&st)?;
        Ok(st)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Version {
    One,
    Two,
}

/// Takes one record after the generation: registrations, then at most
/// one reservation, then `end` (version 2).
fn record(st: &mut PrState, line: &str, v: Version, ended: &mut bool) -> Result<(), &'static str> {
    match line.split_once(' ').unwrap_or((line, "")) {
        ("register", rest) if st.reservation.is_none() => {
            let r = registration(rest, v).ok_or("not a registration")?;
            add(st, r)
        }
        ("reserve", rest) if st.reservation.is_none() => {
            st.reservation = Some(reservation(rest, v).ok_or("not a reservation")?);
            Ok(())
        }
        ("end", "") if v == Version::Two => {
            *ended = true;
            Ok(())
        }
        _ => Err("not a record here"),
    }
}

fn generation(line: &str) -> Option<u32> {
    decimal(line.strip_prefix("generation ")?)
}

/// `register KEY ALL_TG_PT PORT NAME`.
fn registration(rest: &str, v: Version) -> Option<Registration> {
    let mut w = rest.split(' ');
    let key = key(w.next()?)?;
    let all_tg_pt = match w.next()? {
        "0" => false,
        "1" => true,
        _ => return None,
    };
    let nexus = nexus(w.next()?, w.next()?, v)?;
    w.next().is_none().then_some(Registration {
        nexus,
        key,
        all_tg_pt,
    })
}

/// `reserve TYPE PORT NAME`.
fn reservation(rest: &str, v: Version) -> Option<Reservation> {
    let mut w = rest.split(' ');
    let pr_type = decimal(w.next()?).filter(|t| pr_type::valid(*t))?;
    let holder = nexus(w.next()?, w.next()?, v)?;
    w.next()
        .is_none()
        .then_some(Reservation { holder, pr_type })
}

/// An I_T nexus as a record writes it: `PORT NAME` (the relative port in
/// decimal, the initiator port name escaped), two fields.
pub(super) fn encode_nexus(n: &ItNexus) -> String {
    format!("{} {}", n.relative_port, escape(&n.initiator_port))
}

/// Reads `PORT NAME` as [`encode_nexus`] writes it (as version 2 reads
/// it: every field in its one spelling, a port name [`port_name`]
/// accepts); `None` for anything else.
pub(super) fn decode_nexus(fields: &str) -> Option<ItNexus> {
    let mut w = fields.split(' ');
    let n = nexus(w.next()?, w.next()?, Version::Two)?;
    w.next().is_none().then_some(n)
}

fn nexus(port: &str, name: &str, v: Version) -> Option<ItNexus> {
    let initiator_port = match v {
        Version::Two => unescape(name).filter(|n| port_name(n))?,
        Version::One => Some(name.to_owned()).filter(|n| strict_port_name(n))?,
    };
    Some(ItNexus {
        initiator_port,
        relative_port: decimal(port)?,
    })
}

/// A registration key as written: 16 lower-case hex digits, not zero
/// (zero is no registration, SPC-5 §5.14.7).
fn key(s: &str) -> Option<u64> {
    hex64(s).filter(|k| *k != 0)
}

/// Adds a registration read from the file: within the limit, and not a
/// second one of a nexus already registered (one covering the other).
fn add(st: &mut PrState, r: Registration) -> Result<(), &'static str> {
    if st.registrations.len() >= MAX_REGISTRATIONS {
        return Err("more registrations than a LU keeps");
    }
    if st
        .registrations
        .iter()
        .any(|g| g.covers(&r.nexus) || r.covers(&g.nexus))
    {
        return Err("a second registration of one I_T nexus");
    }
    st.registrations.push(r);
    Ok(())
}

/// A reservation is held by a registrant (SPC-5 §5.14.11.2.1): its
/// holder's registration, or for the all-registrants types any.
fn check_reservation(st: &PrState) -> Result<(), String> {
    let Some(r) = &st.reservation else {
        return Ok(());
    };
    let held = if pr_type::all_registrants(r.pr_type) {
        !st.registrations.is_empty()
    } else {
        st.registration(&r.holder).is_some()
    };
    if held {
        Ok(())
    } else {
        Err("a reservation whose holder is not registered".into())
    }
}

/// An initiator port name as [`ItNexus`] makes them: an iSCSI name of
/// 1 to 223 bytes without NUL or upper-case ASCII (names compare without
/// case and are kept in lower case, RFC 7143 §4.2.7.1), `,i,0x`, and the
/// ISID in 12 lower-case hex digits (SPC-5 §7.6.4.6). What the saved
/// state of version 2 holds: any name an initiator could log in with.
pub fn port_name(s: &str) -> bool {
    let Some(split) = s.len().checked_sub(PORT_SUFFIX_BYTES) else {
        return false;
    };
    let (Some(name), Some(suffix)) = (s.get(..split), s.get(split..)) else {
        return false;
    };
    let isid = suffix.strip_prefix(",i,0x").unwrap_or("");
    (1..=MAX_ISCSI_NAME_BYTES).contains(&name.len())
        && !name.bytes().any(|b| b == 0 || b.is_ascii_uppercase())
        && isid.len() == 12
        && isid.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// [`port_name`], and no white space or control character in the name:
/// what a version 1 file may hold (its records end at a line end and its
/// fields at a space), and what REGISTER AND MOVE may name.
pub fn strict_port_name(s: &str) -> bool {
    port_name(s) && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

#[cfg(test)]
mod tests;
