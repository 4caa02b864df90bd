//! Point-in-time copies of a store: what a snapshot name may be, what
//! a store that keeps snapshots offers ([`Snapshots`]), and why the
//! others keep none ([`unsupported`]).
//!
//! A snapshot is taken while the LU above holds every command back and
//! has flushed the store (the LU's quiesce), so it is crash-consistent;
//! this module only makes the copy. `file` LUNs clone the file's blocks
//! with the file system's reflink (`FICLONE`: XFS with reflink=1,
//! btrfs; [`reflink`]); `rbd` LUNs use librbd's snapshots and clones
//! (`rbd::snap`).

use std::io;

pub mod reflink;

/// Longest snapshot (and clone) name, in bytes.
pub const MAX_NAME: usize = 64;

/// Most snapshots one LUN keeps: a new one past it is refused.
pub const MAX_SNAPSHOTS: usize = 256;

/// A snapshot or clone name that is safe as a file name beside the
/// LUN's file and as an RBD snapshot or image name: 1 to [`MAX_NAME`]
/// ASCII letters, digits, `.`, `_` and `-`, starting with a letter or
/// digit (so never `.`, `..`, an option, nor a path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotName(String);

impl SnapshotName {
    /// Checks `name` against the rule; the error says what is wrong.
    pub fn new(name: &str) -> Result<SnapshotName, String> {
        let bad = |why: &str| Err(format!("snapshot name {name:?}: {why}"));
        if name.is_empty() {
            return bad("empty");
        }
        if name.len() > MAX_NAME {
            return bad(&format!("{} bytes, longer than {MAX_NAME}", name.len()));
        }
        if let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return bad(&format!(
                "{c:?} is not allowed (letters, digits, '.', '_' and '-' only)"
            ));
        }
        if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            return bad("must start with a letter or a digit");
        }
        Ok(SnapshotName(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for SnapshotName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One snapshot as a listing shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub name: String,
    /// The store's size when it was taken, in bytes.
    pub bytes: u64,
    /// When it was taken, seconds since the Unix epoch, where known.
    pub taken: Option<i64>,
}

/// What a store that keeps snapshots does. Every call blocks (a file
/// system's reflink, the cluster); the LU quiesces around `create` and
/// `rollback`.
pub trait Snapshots: Send + Sync {
    /// Takes snapshot `name` of the store as it is now: only what must
    /// happen while the LU is held still.
    fn create(&self, name: &SnapshotName) -> io::Result<()>;
    /// Makes a snapshot just created durable (a file system's metadata
    /// synced), after the LU goes again; nothing by default.
    fn persist(&self, name: &SnapshotName) -> io::Result<()> {
        let _ = name;
        Ok(())
    }
    /// The store's snapshots, oldest first where the store knows.
    fn list(&self) -> io::Result<Vec<SnapshotInfo>>;
    /// Removes a snapshot.
    fn delete(&self, name: &SnapshotName) -> io::Result<()>;
    /// Puts the store's data (and size) back to the snapshot's.
    fn rollback(&self, name: &SnapshotName) -> io::Result<()>;
    /// Makes `clone`, a new writable store sharing the snapshot's data
    /// until written; answers the LUN spec that serves it.
    fn clone_to(&self, name: &SnapshotName, clone: &SnapshotName) -> io::Result<String>;
    /// The LUN spec that serves snapshot `name` read-only.
    fn export_spec(&self, name: &SnapshotName) -> String;
}

/// Why a store of this kind keeps no snapshots, and what would.
pub fn unsupported(kind: &str) -> String {
    let why = match kind {
        "ram" => "its blocks live in the daemon's memory and go with it; there is no store to copy on write (copy it with `ironlun dd` instead)",
        "null" => "it stores nothing",
        "block" => "ironlun does not manage the device's volumes: take the snapshot with what made the device (LVM `lvcreate --snapshot`, ZFS `zfs snapshot`) and export it as `block:PATH,ro`",
        _ => "its store has no copy-on-write snapshots",
    };
    format!("a {kind} LUN has no snapshots: {why}; file: LUNs on XFS or btrfs and rbd: LUNs do")
}

/// A refusal as an I/O error of kind `Unsupported`.
pub fn refusal(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_safe_everywhere_pass() {
        for ok in [
            "a",
            "daily-2026-11-28",
            "v1.2_final",
            "0",
            &"x".repeat(MAX_NAME),
        ] {
            assert_eq!(SnapshotName::new(ok).unwrap().as_str(), ok);
        }
    }

    #[test]
    fn names_that_could_escape_or_confuse_are_refused_with_the_reason() {
        let cases: [(&str, &str); 10] = [
            ("", "empty"),
            ("a/b", "'/' is not allowed"),
            ("../x", "'/' is not allowed"),
            ("..", "must start with a letter or a digit"),
            (".hidden", "must start with a letter or a digit"),
            ("-f", "must start with a letter or a digit"),
            ("img@snap", "'@' is not allowed"),
            ("a b", "' ' is not allowed"),
            ("é", "'é' is not allowed"),
            ("a\0b", "'\\0' is not allowed"),
        ];
        for (name, why) in cases {
            let e = SnapshotName::new(name).unwrap_err();
            assert!(e.contains(why), "{name:?}: {e}");
        }
        let long = "x".repeat(MAX_NAME + 1);
        let e = SnapshotName::new(&long).unwrap_err();
        assert!(e.contains("65 bytes, longer than 64"), "{e}");
    }

    #[test]
    fn stores_without_snapshots_say_why_and_what_would_do() {
        for kind in ["ram", "null", "block"] {
            let m = unsupported(kind);
            assert!(
                m.starts_with(&format!("a {kind} LUN has no snapshots: ")),
                "{m}"
            );
            assert!(
                m.contains("file: LUNs on XFS or btrfs and rbd: LUNs do"),
                "{m}"
            );
        }
        assert!(unsupported("block").contains("lvcreate --snapshot"));
    }
}
