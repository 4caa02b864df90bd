//! The schedule's decisions, without clocks, threads or stores: the
//! time is passed in (Unix milliseconds), so the tests can walk a
//! schedule through hours in a loop.
//!
//! - a scheduled snapshot is named `PREFIX-YYYYMMDDTHHMMSSZ` (UTC,
//!   [`stamp_name`]); a name of that form is the schedule's own
//!   ([`own_stamp`]), and the fixed width makes name order time order;
//! - retention deletes the oldest of its own beyond `keep`, never any
//!   other name ([`to_delete`]);
//! - the first snapshot of a schedule comes an interval after the newest
//!   of its own the LUN keeps (so a restart or a reload does not take
//!   one early), or at once when it keeps none ([`first_due`]);
//! - the next comes an interval after the one due, in a later second
//!   than the last name (no two runs can want one name), and a schedule
//!   that fell behind (a slow store, a suspended machine) skips what it
//!   missed rather than catching up in a burst ([`next_due`]). A run
//!   that failed is tried again at the next interval.

use crate::config::SnapshotSchedule;

/// Days from 1970-01-01 to the civil date `y-m-d` (proleptic
/// Gregorian; H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of `days` since 1970-01-01 (`civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `YYYYMMDDTHHMMSSZ` of Unix second `secs` (UTC).
pub fn stamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let s = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// The Unix second a stamp of [`stamp`]'s form stands for; `None` for
/// anything else.
pub fn parse_stamp(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 16 || b.get(8) != Some(&b'T') || b.get(15) != Some(&b'Z') {
        return None;
    }
    let num = |from: usize, to: usize| -> Option<u32> {
        let part = s.get(from..to)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (y, mo, d) = (num(0, 4)?, num(4, 6)?, num(6, 8)?);
    let (h, mi, sec) = (num(9, 11)?, num(11, 13)?, num(13, 15)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    let days = days_from_civil(i64::from(y), mo, d);
    let secs = days * 86_400 + i64::from(h * 3600 + mi * 60 + sec);
    u64::try_from(secs).ok()
}

/// The name of the schedule's snapshot taken at Unix second `secs`.
pub fn stamp_name(prefix: &str, secs: u64) -> String {
    format!("{prefix}-{}", stamp(secs))
}

/// The stamp of `name` when it is one of the schedule's own
/// (`PREFIX-` and a valid stamp), else `None`.
pub fn own_stamp<'a>(prefix: &str, name: &'a str) -> Option<&'a str> {
    let stamp = name.strip_prefix(prefix)?.strip_prefix('-')?;
    parse_stamp(stamp).map(|_| stamp)
}

/// The schedule's own snapshots among `names`, oldest first.
pub fn own<'a>(prefix: &str, names: &'a [String]) -> Vec<&'a str> {
    let mut mine: Vec<&str> = names
        .iter()
        .filter(|n| own_stamp(prefix, n).is_some())
        .map(String::as_str)
        .collect();
    // Same prefix, fixed-width stamps: name order is time order.
    mine.sort_unstable();
    mine
}

/// Which of `names` retention deletes: the oldest of the schedule's own
/// beyond the `keep` newest; never a name of another form.
pub fn to_delete(prefix: &str, keep: u32, names: &[String]) -> Vec<String> {
    let mine = own(prefix, names);
    let extra = mine.len().saturating_sub(keep as usize);
    mine.into_iter().take(extra).map(str::to_owned).collect()
}

/// When the first snapshot of `s` is due, at `now_ms`, for a LUN that
/// keeps `names`: an interval after the newest of its own, or now.
pub fn first_due(s: &SnapshotSchedule, names: &[String], now_ms: u64) -> u64 {
    let newest = own(&s.prefix, names)
        .last()
        .and_then(|n| own_stamp(&s.prefix, n))
        .and_then(parse_stamp);
    match newest {
        Some(secs) => secs
            .saturating_mul(1000)
            .saturating_add(every_ms(s))
            .min(now_ms.saturating_add(every_ms(s))),
        None => now_ms,
    }
}

/// When the run after the one `due` (begun at `now_ms`, its name
/// stamped with second `stamped`) is due.
pub fn next_due(s: &SnapshotSchedule, due: u64, now_ms: u64, stamped: u64) -> u64 {
    let every = every_ms(s);
    let mut next = due.saturating_add(every);
    if next <= now_ms {
        // Behind: the missed runs are skipped.
        next = now_ms.saturating_add(every);
    }
    next.max(stamped.saturating_add(1).saturating_mul(1000))
}

fn every_ms(s: &SnapshotSchedule) -> u64 {
    u64::try_from(s.every.as_millis()).unwrap_or(u64::MAX)
}
