//! The advisory lock on a file or block device a LUN serves: one holder
//! at a time, another daemon or another LUN of this one refused when it
//! opens the store, with a message naming the file and, where
//! `/proc/locks` says, the process that holds it.
//!
//! The lock is `flock(2)` `LOCK_EX | LOCK_NB` on the backend's buffered
//! descriptor, chosen over POSIX and OFD record locks (`fcntl`
//! `F_OFD_SETLK`) because:
//! - it is whole-file and belongs to the open file description, so it
//!   lives exactly as long as the descriptor (and every `Arc` of it that
//!   in-flight I/O holds) and the kernel drops it when the daemon dies;
//!   a POSIX lock would go with the first `close` of any descriptor of
//!   the file in the process;
//! - it needs no write access: a read-only LUN's descriptor is opened
//!   `O_RDONLY`, where an `F_WRLCK` record lock fails with `EBADF`;
//! - it is the lock block device tools already take (systemd's "Locking
//!   Block Device Access", util-linux `fdisk`/`wipefs`/`mkfs --lock`,
//!   `flock(1)`), so they refuse a device while ironlun serves it, and an
//!   operator can test a file with `flock -n FILE true`.
//!
//! It is exclusive for read-only LUNs too: a reader beside a writer of
//! the same file sees torn data, and two read-only daemons on one image
//! are rare enough to be served from a copy. The lock is on the inode:
//! a link or another spelling of the path meets it, a second device node
//! made with `mknod` for the same disk does not. It is advisory: a
//! program that does not ask (`dd`, `qemu-img` with its own OFD locks)
//! is not stopped. On NFS, Linux emulates it with a whole-file record
//! lock, which other clients see.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::FlockOperation;
use rustix::io::Errno;

/// How long an open waits for a holder that is going away: a daemon
/// killed with io_uring or pool I/O in flight lets its descriptor go when
/// that I/O ends, a little after the process is gone; and a LUN removed
/// while a session still runs a command on it lets go when the command
/// is done.
pub const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Between two tries while waiting.
const RETRY: Duration = Duration::from_millis(50);

/// The most of `/proc/locks` read to name a holder (about 16 000 locks);
/// past it the holder is not named.
const PROC_LOCKS_LIMIT: u64 = 1 << 20;

/// Takes the exclusive lock on `file` (opened from `path`), waiting up
/// to `wait` for a holder to let go; then refuses, naming the holder.
pub(crate) fn lock_exclusive(file: &File, path: &Path, wait: Duration) -> io::Result<()> {
    let deadline = Instant::now() + wait;
    loop {
        match rustix::fs::flock(file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(()),
            Err(Errno::INTR) => continue,
            Err(Errno::WOULDBLOCK) if Instant::now() < deadline => std::thread::sleep(RETRY),
            Err(Errno::WOULDBLOCK) => return Err(held(file, path)),
            Err(e) => {
                return Err(io::Error::new(
                    io::Error::from(e).kind(),
                    format!(
                        "{}: cannot lock it (flock: {e}); a store is served only under its lock",
                        path.display()
                    ),
                ))
            }
        }
    }
}

/// The error for a store another holder has locked.
fn held(file: &File, path: &Path) -> io::Error {
    let who = match holder(file) {
        Some(pid) if pid == std::process::id() => "this daemon already serves it as another LUN (maybe under another path to the same file, or one a change is removing in the same step: remove it first)".to_owned(),
        Some(pid) => match process_name(pid) {
            Some(name) => format!("process {pid} ({name}) holds its lock"),
            None => format!("process {pid} holds its lock"),
        },
        None => "another process holds its lock".to_owned(),
    };
    io::Error::other(format!(
        "{}: in use: {who}; a file or device is served by one LUN of one daemon at a time (flock(2))",
        path.display()
    ))
}

/// The process holding the flock on `file`, from `/proc/locks`.
fn holder(file: &File) -> Option<u32> {
    holder_of(&file.metadata().ok()?)
}

/// The process holding the flock on the file `meta` describes, from
/// `/proc/locks`: found without taking the lock (`ironlun target
/// --check` asks beside the daemon that holds it).
pub(crate) fn holder_of(meta: &std::fs::Metadata) -> Option<u32> {
    let mut text = String::new();
    File::open("/proc/locks")
        .ok()?
        .take(PROC_LOCKS_LIMIT)
        .read_to_string(&mut text)
        .ok()?;
    let dev = meta.dev();
    let inode = Inode {
        major: rustix::fs::major(dev),
        minor: rustix::fs::minor(dev),
        ino: meta.ino(),
    };
    flock_holder(&text, inode)
}

/// A file's identity as `/proc/locks` writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Inode {
    major: u32,
    minor: u32,
    ino: u64,
}

/// The pid of the granted `FLOCK` on `inode` in `/proc/locks` text
/// (`1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF`: major and minor
/// in hex, the inode in decimal; a waiter's line has `->` after the
/// number). `None` when there is none, or its pid is 0 (a holder in
/// another pid namespace).
fn flock_holder(text: &str, inode: Inode) -> Option<u32> {
    text.lines().find_map(|line| {
        let mut f = line.split_whitespace().skip(1);
        if f.next()? != "FLOCK" {
            return None;
        }
        let pid: u32 = f.nth(2)?.parse().ok()?;
        let mut id = f.next()?.splitn(3, ':');
        let major = u32::from_str_radix(id.next()?, 16).ok()?;
        let minor = u32::from_str_radix(id.next()?, 16).ok()?;
        let ino: u64 = id.next()?.parse().ok()?;
        (Inode { major, minor, ino } == inode && pid != 0).then_some(pid)
    })
}

/// A process's command name (`/proc/PID/comm`), if it can be read.
pub(crate) fn process_name(pid: u32) -> Option<String> {
    let mut name = String::new();
    File::open(format!("/proc/{pid}/comm"))
        .ok()?
        .take(64)
        .read_to_string(&mut name)
        .ok()?;
    let name = name.trim();
    (!name.is_empty()).then(|| name.escape_debug().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCKS: &str = "\
1: POSIX  ADVISORY  WRITE 700 fd:01:5678 0 EOF
2: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF
2: -> FLOCK  ADVISORY  WRITE 99 fd:01:5678 0 EOF
3: FLOCK  ADVISORY  READ 555 08:10:42 0 EOF
4: OFDLCK ADVISORY  READ -1 00:2c:7 0 EOF
5: FLOCK  ADVISORY  WRITE 0 00:2c:8 0 EOF
";

    fn inode(major: u32, minor: u32, ino: u64) -> Inode {
        Inode { major, minor, ino }
    }

    #[test]
    fn proc_locks_names_the_granted_flock_of_the_inode() {
        // fd:01 is 253:1 (device mapper); a POSIX lock on it and a
        // waiter are not the holder.
        assert_eq!(flock_holder(LOCKS, inode(253, 1, 5678)), Some(1234));
        assert_eq!(flock_holder(LOCKS, inode(8, 16, 42)), Some(555));
        // Another inode, an OFD lock, a pid from another namespace,
        // and lines that do not parse: nobody.
        assert_eq!(flock_holder(LOCKS, inode(253, 1, 5679)), None);
        assert_eq!(flock_holder(LOCKS, inode(0, 0x2c, 7)), None);
        assert_eq!(flock_holder(LOCKS, inode(0, 0x2c, 8)), None);
        let junk = "x\n1: FLOCK\n2: FLOCK ADVISORY WRITE p fd:01:5678\n3: FLOCK A W 9 zz:1:2\n";
        assert_eq!(flock_holder(junk, inode(253, 1, 5678)), None);
    }

    #[test]
    fn a_second_lock_on_the_file_is_refused_naming_this_process() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, [0u8; 512]).unwrap();
        let first = File::open(&path).unwrap();
        lock_exclusive(&first, &path, Duration::ZERO).unwrap();
        // Another open file description, even read-only and through a
        // link, meets the lock.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let second = File::open(&link).unwrap();
        let e = lock_exclusive(&second, &link, Duration::ZERO)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("{}: in use: ", link.display())),
            "{e}"
        );
        // /proc/locks names this process where the kernel has it.
        if std::path::Path::new("/proc/locks").exists() {
            assert!(e.contains("this daemon already serves it"), "{e}");
        }
        drop(first);
        lock_exclusive(&second, &link, Duration::ZERO).unwrap();
    }
}
