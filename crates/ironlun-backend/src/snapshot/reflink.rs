//! Snapshots of a `file:` LUN: each one a file in `PATH.snapshots/`
//! beside the LUN's file, made with `FICLONE` (ioctl_ficlone(2)), which
//! shares the file's blocks with the copy until either is written: no
//! data is copied, whatever the file's size. Only file systems with
//! reflink can: XFS made with `reflink=1` and btrfs (and a few others);
//! on the rest the call fails and the refusal names the file system.
//!
//! A snapshot's file is made read-only (mode 0400); rollback clones it
//! back over the LUN's file; a clone is a new file beside the LUN's.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::{refusal, SnapshotInfo, SnapshotName, MAX_SNAPSHOTS};

/// The directory that holds `file`'s snapshots: `FILE.snapshots`.
pub fn snapshot_dir(file: &Path) -> PathBuf {
    let mut s = file.as_os_str().to_owned();
    s.push(".snapshots");
    PathBuf::from(s)
}

/// Makes `dst`'s contents `src`'s by sharing its blocks.
fn ficlone(dst: &File, src: &File) -> io::Result<()> {
    rustix::fs::ioctl_ficlone(dst, src).map_err(io::Error::from)
}

/// The file system `path` is on, by name where known (statfs(2)'s
/// f_type).
pub fn fs_name(path: &Path) -> String {
    let Ok(st) = rustix::fs::statfs(path) else {
        return "an unknown file system".into();
    };
    #[allow(clippy::unnecessary_cast)]
    let magic = st.f_type as i64 as u32;
    match magic {
        0x5846_5342 => "xfs",
        0x9123_683e => "btrfs",
        0x0000_ef53 => "ext2/3/4",
        0x0102_1994 => "tmpfs",
        0x794c_7630 => "overlayfs",
        0x0000_6969 => "nfs",
        0x2fc1_2fc1 => "zfs",
        0xf2f5_2010 => "f2fs",
        0x6573_5546 => "fuse",
        _ => return format!("a file system of type {magic:#x}"),
    }
    .into()
}

/// Why `FICLONE` failed on `path`, as a refusal that says what would
/// work; other errors pass through.
fn explain(path: &Path, e: io::Error) -> io::Error {
    let no_reflink = matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP | libc::EINVAL | libc::EXDEV | libc::ENOTTY)
    );
    if !no_reflink {
        return e;
    }
    let fs = fs_name(path);
    let which = if fs == "xfs" {
        "xfs made without reflink (mkfs.xfs -m reflink=1 makes one with it, the default since xfsprogs 5.1)".to_owned()
    } else {
        fs
    };
    refusal(format!(
        "{} is on {which}, which cannot share a file's blocks with a copy (FICLONE: {e}): snapshots of a file: LUN need a file system with reflink, XFS with reflink=1 or btrfs; or serve the data from an rbd: LUN",
        path.display()
    ))
}

/// Creates `path` (which must not exist) as the clone of `src`, with
/// `mode`; removes it again if the clone fails. Not synced: see
/// [`sync_new`].
fn clone_new(src: &File, src_path: &Path, path: &Path, mode: u32) -> io::Result<()> {
    let dst = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| named(path, e))?;
    if let Err(e) = ficlone(&dst, src) {
        let _ = std::fs::remove_file(path);
        return Err(explain(src_path, e));
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// Makes the new file at `path` and its name in its directory durable.
fn sync_new(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()?;
    File::open(path.parent().unwrap_or(Path::new("/")))?.sync_all()
}

fn named(path: &Path, e: io::Error) -> io::Error {
    let kind = e.kind();
    let what = match kind {
        io::ErrorKind::AlreadyExists => "already exists".to_owned(),
        io::ErrorKind::NotFound => "no such snapshot".to_owned(),
        _ => e.to_string(),
    };
    io::Error::new(kind, format!("{}: {what}", path.display()))
}

/// The snapshots of the file LUN at `path`, served through its open
/// descriptor `file` (writable unless `read_only`).
pub struct FileSnapshots<'a> {
    pub path: &'a Path,
    pub file: &'a File,
    pub read_only: bool,
}

impl FileSnapshots<'_> {
    fn dir(&self) -> PathBuf {
        snapshot_dir(self.path)
    }

    fn snapshot(&self, name: &SnapshotName) -> PathBuf {
        self.dir().join(name.as_str())
    }

    fn sync_dir(dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

impl super::Snapshots for FileSnapshots<'_> {
    fn create(&self, name: &SnapshotName) -> io::Result<()> {
        let dir = self.dir();
        match std::fs::create_dir(&dir) {
            Ok(()) => std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(named(&dir, e)),
        }
        if self.list()?.len() >= MAX_SNAPSHOTS {
            return Err(refusal(format!(
                "{} keeps {MAX_SNAPSHOTS} snapshots, the most a LUN may: delete one first",
                self.path.display()
            )));
        }
        clone_new(self.file, self.path, &self.snapshot(name), 0o400)
    }

    fn persist(&self, name: &SnapshotName) -> io::Result<()> {
        sync_new(&self.snapshot(name))
    }

    fn list(&self) -> io::Result<Vec<SnapshotInfo>> {
        let entries = match std::fs::read_dir(self.dir()) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for e in entries.take(MAX_SNAPSHOTS * 4) {
            let e = e?;
            let Some(name) = e.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let meta = e.metadata()?;
            if !meta.is_file() || SnapshotName::new(&name).is_err() {
                continue;
            }
            let taken = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .and_then(|d| i64::try_from(d.as_secs()).ok());
            out.push(SnapshotInfo {
                name,
                bytes: meta.len(),
                taken,
            });
        }
        out.sort_by(|a, b| (a.taken, &a.name).cmp(&(b.taken, &b.name)));
        Ok(out)
    }

    fn delete(&self, name: &SnapshotName) -> io::Result<()> {
        let path = self.snapshot(name);
        std::fs::remove_file(&path).map_err(|e| named(&path, e))?;
        Self::sync_dir(&self.dir())
    }

    fn rollback(&self, name: &SnapshotName) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} is served read-only: nothing to roll back",
                    self.path.display()
                ),
            ));
        }
        let path = self.snapshot(name);
        let snap = File::open(&path).map_err(|e| named(&path, e))?;
        let len = snap.metadata()?.len();
        // The clone first: when it fails the LUN's file is unchanged.
        ficlone(self.file, &snap).map_err(|e| explain(self.path, e))?;
        if self.file.metadata()?.len() != len {
            self.file.set_len(len)?;
        }
        self.file.sync_all()
    }

    fn clone_to(&self, name: &SnapshotName, clone: &SnapshotName) -> io::Result<String> {
        let path = self.snapshot(name);
        let snap = File::open(&path).map_err(|e| named(&path, e))?;
        let parent = self.path.parent().unwrap_or(Path::new("/"));
        let dest = parent.join(clone.as_str());
        clone_new(&snap, self.path, &dest, 0o600)?;
        sync_new(&dest)?;
        Ok(format!("file:{}", dest.display()))
    }

    fn export_spec(&self, name: &SnapshotName) -> String {
        format!("file:{},ro", self.snapshot(name).display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Snapshots;

    fn name(s: &str) -> SnapshotName {
        SnapshotName::new(s).unwrap()
    }

    /// Where the file system has no reflink (tmpfs, ext4: what test
    /// machines mostly have), every operation that clones is refused
    /// with the file system's name and leaves no file behind; where it
    /// has, the round trip works. Either way the test checks something.
    #[test]
    fn snapshots_of_a_file_round_trip_or_are_refused_by_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lun.img");
        std::fs::write(&path, vec![b'A'; 8192]).unwrap();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let s = FileSnapshots {
            path: &path,
            file: &file,
            read_only: false,
        };
        match s.create(&name("one")) {
            Err(e) => {
                assert_eq!(e.kind(), io::ErrorKind::Unsupported, "{e}");
                let m = e.to_string();
                assert!(m.contains(&format!("is on {}", fs_name(&path))), "{m}");
                assert!(m.contains("XFS with reflink=1 or btrfs"), "{m}");
                assert!(
                    s.list().unwrap().is_empty(),
                    "a failed snapshot left a file"
                );
            }
            Ok(()) => {
                std::fs::write(&path, vec![b'B'; 8192]).unwrap();
                let l = s.list().unwrap();
                assert_eq!((l.len(), l[0].bytes), (1, 8192));
                s.rollback(&name("one")).unwrap();
                assert_eq!(std::fs::read(&path).unwrap(), vec![b'A'; 8192]);
                let spec = s.clone_to(&name("one"), &name("copy")).unwrap();
                assert_eq!(spec, format!("file:{}", dir.path().join("copy").display()));
                s.delete(&name("one")).unwrap();
                assert!(s.list().unwrap().is_empty());
                assert_eq!(
                    std::fs::read(dir.path().join("copy")).unwrap(),
                    vec![b'A'; 8192]
                );
            }
        }
        let e = s.delete(&name("missing")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    }
}
