//! A LUN's snapshot schedule in the file (docs/snapshots.md,
//! "Schedules"): `snapshot_every`, `snapshot_keep` and
//! `snapshot_prefix` on a `[[target.lun]]`, checked into a
//! [`SnapshotSchedule`]. What the schedule does at run time is
//! `crate::schedule`'s.

use std::fmt;
use std::time::Duration;

use ironlun_backend::snapshot::{unsupported, MAX_NAME, MAX_SNAPSHOTS};
use ironlun_backend::SnapshotName;

use super::{BackendSpec, ConfigError};

/// Shortest interval: a snapshot a second (its name has the second).
pub const MIN_EVERY: Duration = Duration::from_secs(1);
/// Longest interval: a year (366 days).
pub const MAX_EVERY: Duration = Duration::from_secs(366 * 24 * 3600);
/// The prefix of scheduled snapshots' names unless the file says.
pub const DEFAULT_PREFIX: &str = "auto";
/// What a scheduled snapshot's name adds to the prefix:
/// `-YYYYMMDDTHHMMSSZ`.
pub const STAMP_LEN: usize = 17;

/// Snapshots of one LUN taken every `every`, the `keep` newest of them
/// kept; named `PREFIX-YYYYMMDDTHHMMSSZ` (UTC), which is how the schedule
/// knows its own from an operator's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotSchedule {
    pub every: Duration,
    pub keep: u32,
    pub prefix: String,
}

impl fmt::Display for SnapshotSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "every {}, keep {}, prefix {}",
            every_text(self.every),
            self.keep,
            self.prefix
        )
    }
}

/// An interval as the file writes it, in the largest unit that holds it
/// whole (`1h`, `90s`, `1500ms`), so that it reads back the same.
pub fn every_text(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 != 0 {
        return format!("{ms}ms");
    }
    let s = ms / 1000;
    match s {
        _ if s % 3600 == 0 => format!("{}h", s / 3600),
        _ if s % 60 == 0 => format!("{}m", s / 60),
        _ => format!("{s}s"),
    }
}

/// The schedule keys of one `[[target.lun]]` as read.
#[derive(Default)]
pub(super) struct FileSchedule<'a> {
    pub every: Option<&'a str>,
    pub keep: Option<i64>,
    pub prefix: Option<&'a str>,
}

/// Checks the keys of LUN `what` (`target T LUN N`) of a LUN served by
/// `backend`: none, or `snapshot_every` with `snapshot_keep` (and
/// optionally `snapshot_prefix`) on a kind that keeps snapshots.
pub(super) fn check(
    what: &str,
    backend: &BackendSpec,
    f: &FileSchedule<'_>,
) -> Result<Option<SnapshotSchedule>, ConfigError> {
    let bad = |key: &str, problem: String| ConfigError::invalid(format!("{what}: {key}"), problem);
    let Some(every) = f.every else {
        if f.keep.is_some() || f.prefix.is_some() {
            let key = if f.keep.is_some() {
                "snapshot_keep"
            } else {
                "snapshot_prefix"
            };
            return Err(bad(
                key,
                "only with snapshot_every (the interval of the schedule)".into(),
            ));
        }
        return Ok(None);
    };
    let every = ironlun_units::parse_duration(every).map_err(|e| bad("snapshot_every", e))?;
    if !(MIN_EVERY..=MAX_EVERY).contains(&every) {
        return Err(bad(
            "snapshot_every",
            format!(
                "{} is out of range: 1s to {}",
                every_text(every),
                every_text(MAX_EVERY)
            ),
        ));
    }
    let keep = f.keep.ok_or_else(|| {
        bad(
            "snapshot_every",
            "needs snapshot_keep (how many scheduled snapshots to keep)".into(),
        )
    })?;
    if !(1..=MAX_SNAPSHOTS as i64).contains(&keep) {
        return Err(bad(
            "snapshot_keep",
            format!("{keep} is out of range: 1 to {MAX_SNAPSHOTS} (a LUN's most snapshots)"),
        ));
    }
    let prefix = f.prefix.unwrap_or(DEFAULT_PREFIX);
    check_prefix(prefix).map_err(|e| bad("snapshot_prefix", e))?;
    if let Some(kind) = cannot_snapshot(backend) {
        return Err(bad("snapshot_every", unsupported(kind)));
    }
    Ok(Some(SnapshotSchedule {
        every,
        keep: keep as u32,
        prefix: prefix.to_owned(),
    }))
}

/// A prefix is a snapshot name short enough for the stamp after it.
fn check_prefix(prefix: &str) -> Result<(), String> {
    SnapshotName::new(prefix)?;
    let most = MAX_NAME - STAMP_LEN;
    if prefix.len() > most {
        return Err(format!(
            "{prefix:?}: {} bytes, longer than {most} (a snapshot name is at most {MAX_NAME}, with -YYYYMMDDTHHMMSSZ after the prefix)",
            prefix.len()
        ));
    }
    Ok(())
}

/// The kind of a LUN that keeps no snapshots, whatever its store (file
/// LUNs are asked at run time: it depends on their file system).
fn cannot_snapshot(b: &BackendSpec) -> Option<&'static str> {
    match b {
        BackendSpec::Ram { .. } => Some("ram"),
        BackendSpec::Null { .. } => Some("null"),
        BackendSpec::Block { .. } => Some("block"),
        BackendSpec::File { .. } | BackendSpec::Rbd(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> BackendSpec {
        super::super::lun_spec::parse_at("x".into(), "file:/srv/a.img,size=1MiB")
            .unwrap()
            .backend
    }

    fn keys<'a>(every: Option<&'a str>, keep: Option<i64>) -> FileSchedule<'a> {
        FileSchedule {
            every,
            keep,
            prefix: None,
        }
    }

    #[test]
    fn a_schedule_reads_with_its_default_prefix() {
        let s = check("target t LUN 0", &file(), &keys(Some("1h"), Some(24)))
            .unwrap()
            .unwrap();
        assert_eq!(s.every, Duration::from_secs(3600));
        assert_eq!((s.keep, s.prefix.as_str()), (24, "auto"));
        assert_eq!(s.to_string(), "every 1h, keep 24, prefix auto");
        assert_eq!(check("x", &file(), &keys(None, None)).unwrap(), None);
    }

    #[test]
    fn intervals_are_written_back_as_they_read() {
        for (d, text) in [
            (Duration::from_secs(3600), "1h"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(120), "2m"),
            (Duration::from_millis(1500), "1500ms"),
        ] {
            assert_eq!(every_text(d), text);
            assert_eq!(ironlun_units::parse_duration(text).unwrap(), d);
        }
    }

    #[test]
    fn each_mistake_names_the_lun_and_the_key() {
        let ram = super::super::lun_spec::parse_at("x".into(), "ram:1MiB")
            .unwrap()
            .backend;
        let cases: Vec<(BackendSpec, FileSchedule<'_>, &str)> = vec![
            (
                file(),
                keys(Some("0.5s"), Some(2)),
                "snapshot_every: 500ms is out of range: 1s to 8784h",
            ),
            (
                file(),
                keys(Some("soon"), Some(2)),
                "snapshot_every: 'soon' is not a duration",
            ),
            (
                file(),
                keys(Some("1h"), None),
                "snapshot_every: needs snapshot_keep",
            ),
            (
                file(),
                keys(Some("1h"), Some(0)),
                "snapshot_keep: 0 is out of range: 1 to 256",
            ),
            (
                file(),
                keys(Some("1h"), Some(257)),
                "snapshot_keep: 257 is out of range",
            ),
            (
                file(),
                keys(None, Some(3)),
                "snapshot_keep: only with snapshot_every",
            ),
            (
                ram,
                keys(Some("1h"), Some(3)),
                "snapshot_every: a ram LUN has no snapshots",
            ),
        ];
        for (backend, f, want) in cases {
            let e = check("target iqn.2026-11.test:t LUN 2", &backend, &f)
                .unwrap_err()
                .to_string();
            assert!(e.contains("target iqn.2026-11.test:t LUN 2: "), "{e}");
            assert!(e.contains(want), "{want}: {e}");
        }
        for (prefix, want) in [
            ("../x", "'/' is not allowed"),
            (&"p".repeat(48), "longer than 47"),
        ] {
            let f = FileSchedule {
                prefix: Some(prefix),
                ..keys(Some("1h"), Some(2))
            };
            let e = check("L", &file(), &f).unwrap_err().to_string();
            assert!(e.contains("snapshot_prefix") && e.contains(want), "{e}");
        }
    }
}
