//! A loop-mounted XFS made with `reflink=1`, the file system where
//! `file:` LUNs can take snapshots and clones (docs/snapshots.md): made
//! by the test on a sparse file in a temporary directory, unmounted on
//! drop. Used by tests/e2e/snapshot.rs and the kernel initiator's
//! `snapshot` case.
//!
//! It needs root, loop devices and xfsprogs; without them
//! [`Xfs::try_make`] says why, and [`Xfs::make`] skips by the rule of
//! `skip.rs`.

use std::path::{Path, PathBuf};

use super::{run, skip};

/// What [`Xfs::make`] skips for.
const WHAT: &str = "a reflink XFS on a loop device";

/// A loop-mounted XFS with reflink, unmounted on drop.
pub struct Xfs {
    _dir: tempfile::TempDir,
    pub mnt: PathBuf,
}

impl Xfs {
    /// `None` (and a loud skip) without root, loop devices or xfsprogs.
    pub fn make() -> Option<Xfs> {
        match Xfs::try_make() {
            Ok(x) => Some(x),
            Err(why) => {
                skip::skip(WHAT, &why);
                None
            }
        }
    }

    /// The file system, or why it cannot be made here.
    pub fn try_make() -> Result<Xfs, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root".to_owned());
        }
        if !Path::new("/dev/loop-control").exists() {
            return Err("no /dev/loop-control".to_owned());
        }
        let mkfs = ["/usr/sbin/mkfs.xfs", "/sbin/mkfs.xfs"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .ok_or("mkfs.xfs is not installed (apt install xfsprogs)")?;
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("xfs.img");
        // Sparse: mkfs.xfs wants 300 MiB at least.
        std::fs::File::create(&img)
            .unwrap()
            .set_len(320 << 20)
            .unwrap();
        let (rc, out) = run(mkfs, &["-q", "-m", "reflink=1", img.to_str().unwrap()]);
        assert_eq!(rc, 0, "mkfs.xfs: {out}");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let (rc, out) = run(
            "mount",
            &["-o", "loop", img.to_str().unwrap(), mnt.to_str().unwrap()],
        );
        if rc != 0 {
            return Err(format!("mount -o loop: {out}"));
        }
        Ok(Xfs { _dir: dir, mnt })
    }

    pub fn free_bytes(&self) -> u64 {
        let _ = run("sync", &["-f", self.mnt.to_str().unwrap()]);
        let c = std::ffi::CString::new(self.mnt.to_str().unwrap()).unwrap();
        // SAFETY: zeroed statvfs is valid; `c` NUL-terminated.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: as above; `st` a valid out-pointer.
        assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
        st.f_bavail * st.f_frsize
    }
}

impl Drop for Xfs {
    fn drop(&mut self) {
        let (rc, out) = run("umount", &[self.mnt.to_str().unwrap()]);
        if rc != 0 {
            let _ = run("umount", &["-l", self.mnt.to_str().unwrap()]);
            eprintln!("umount {}: {out}", self.mnt.display());
        }
    }
}
