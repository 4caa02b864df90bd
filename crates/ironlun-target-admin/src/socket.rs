//! The management API's Unix socket: owner-only from the moment it
//! exists, and put in place without replacing anything but an old
//! socket.
//!
//! The socket is bound inside a fresh directory of mode 0700 next to its
//! path, made 0600 there, and renamed into place with `RENAME_NOREPLACE`
//! (renameat2(2)): no other user can reach it before its mode is set, as
//! they could between bind(2) and chmod(2) at the path itself, and
//! without touching the process's umask, which every thread shares. What
//! is at the path before is removed only if it is a socket nothing
//! listens on (a daemon's that stopped without removing it); a socket a
//! process answers on (a second daemon started with the same
//! `admin_socket` would take the first one's API away), a regular file,
//! a directory or a link there is refused, naming the path. When the API stops, the path
//! is removed only if it is still this socket.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

/// The bound socket, at its path.
pub struct Socket {
    pub(super) listener: UnixListener,
    path: PathBuf,
    id: FileId,
}

/// Device and inode: which file a path names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct FileId(u64, u64);

impl FileId {
    fn of(m: &fs::Metadata) -> FileId {
        FileId(m.dev(), m.ino())
    }
}

impl Socket {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The listener, and what removes the socket file when dropped.
    pub(super) fn into_parts(self) -> (UnixListener, Unlink) {
        let unlink = Unlink {
            path: self.path,
            id: self.id,
        };
        (self.listener, unlink)
    }
}

/// Removes the socket file when dropped, if the path still names it.
pub(super) struct Unlink {
    path: PathBuf,
    id: FileId,
}

impl Drop for Unlink {
    fn drop(&mut self) {
        let ours = fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.file_type().is_socket() && FileId::of(&m) == self.id);
        if ours {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Binds the API socket at `path`, mode 0600 from the start. An old
/// socket there is replaced; anything else is refused.
pub fn bind(path: &Path) -> io::Result<Socket> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir)?;
    remove_old_socket(path)?;
    let private = PrivateDir::new(dir)?;
    let inner = private.0.join("s");
    let listener = UnixListener::bind(&inner)?;
    fs::set_permissions(&inner, fs::Permissions::from_mode(0o600))?;
    rename_noreplace(&inner, path)?;
    let id = FileId::of(&fs::symlink_metadata(path)?);
    listener.set_nonblocking(true)?;
    Ok(Socket {
        listener,
        path: path.to_owned(),
        id,
    })
}

/// Removes a socket left at `path`; refuses anything else there.
fn remove_old_socket(path: &Path) -> io::Result<()> {
    if old_socket(path)? {
        return fs::remove_file(path);
    }
    Ok(())
}

/// Whether a socket is at `path` (one a start replaces); nothing there
/// is `false`, and anything else the refusal `bind` gives.
pub(crate) fn old_socket(path: &Path) -> io::Result<bool> {
    let m = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let ft = m.file_type();
    if ft.is_socket() {
        if listened_on(path)? {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "{} is the socket of a running process (another ironlun daemon?): left alone; stop it, or set admin_socket to another path",
                    path.display()
                ),
            ));
        }
        return Ok(true);
    }
    let kind = if ft.is_file() {
        "a regular file"
    } else if ft.is_dir() {
        "a directory"
    } else if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a socket"
    };
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{} is {kind}: only an old socket there is replaced; move it away or set admin_socket to another path",
            path.display()
        ),
    ))
}

/// Whether a process listens on the socket at `path`: a connection to it
/// is taken, or would be once its backlog has room (EAGAIN). Without
/// waiting: the connection is made without blocking and dropped at once.
/// ECONNREFUSED: nothing listens (the socket of a process that ended).
fn listened_on(path: &Path) -> io::Result<bool> {
    use socket2::{Domain, SockAddr, Socket, Type};
    let s = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    s.set_nonblocking(true)?;
    match s.connect(&SockAddr::unix(path)?) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => Ok(false),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!(
                "{}: a socket; whether a process listens on it is unknown ({e}): left alone",
                path.display()
            ),
        )),
    }
}

/// Renames `from` to `to` unless something is at `to` by then.
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::EXIST) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} appeared while the socket was being made: left alone",
                to.display()
            ),
        )),
        Err(e) => Err(e.into()),
    }
}

/// A directory of mode 0700 beside the socket's path, removed (with what
/// is left in it) when dropped.
struct PrivateDir(PathBuf);

impl PrivateDir {
    fn new(beside: &Path) -> io::Result<PrivateDir> {
        let mut r = [0u8; 4];
        getrandom::fill(&mut r).map_err(|e| io::Error::other(e.to_string()))?;
        let name: String = r.iter().map(|b| format!("{b:02x}")).collect();
        let p = beside.join(format!(".bind.{name}"));
        fs::DirBuilder::new().mode(0o700).create(&p)?;
        Ok(PrivateDir(p))
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        let _ = fs::remove_file(self.0.join("s"));
        let _ = fs::remove_dir(&self.0);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    /// What is in `dir` besides `keep`.
    fn others(dir: &Path, keep: &str) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != keep)
            .collect()
    }

    #[test]
    fn the_socket_is_owner_only_and_nothing_is_left_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("admin.sock");
        let s = bind(&p).unwrap();
        assert!(fs::symlink_metadata(&p).unwrap().file_type().is_socket());
        assert_eq!(mode(&p), 0o600);
        assert!(others(dir.path(), "admin.sock").is_empty());
        assert!(std::os::unix::net::UnixStream::connect(&p).is_ok());
        let (_l, unlink) = s.into_parts();
        drop(unlink);
        assert!(!p.exists(), "removed when the API stops");
    }

    /// What inotify(7) saw happen in `dir` while `f` ran: names with
    /// their events.
    fn watched(dir: &Path, f: impl FnOnce()) -> Vec<(String, rustix::fs::inotify::ReadFlags)> {
        use rustix::fs::inotify::{self, CreateFlags, Reader, WatchFlags};
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).unwrap();
        inotify::add_watch(&fd, dir, WatchFlags::CREATE | WatchFlags::MOVED_TO).unwrap();
        f();
        let mut buf = [std::mem::MaybeUninit::uninit(); 4096];
        let mut r = Reader::new(&fd, &mut buf);
        let mut out = Vec::new();
        loop {
            match r.next() {
                Ok(e) => out.push((
                    e.file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    e.events(),
                )),
                Err(rustix::io::Errno::AGAIN) => return out,
                Err(e) => panic!("inotify: {e}"),
            }
        }
    }

    #[test]
    fn the_path_appears_only_as_a_socket_already_owner_only() {
        use rustix::fs::inotify::ReadFlags;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("admin.sock");
        let seen = watched(dir.path(), || {
            bind(&p).unwrap();
        });
        // bind(2) at the path itself would create it (IN_CREATE) with
        // the umask's mode, before any chmod; here it only arrives by a
        // rename of the socket made 0600 in a directory of mode 0700.
        let at_path: Vec<_> = seen.iter().filter(|(n, _)| n == "admin.sock").collect();
        assert_eq!(at_path.len(), 1, "{seen:?}");
        assert!(at_path[0].1.contains(ReadFlags::MOVED_TO), "{seen:?}");
        assert!(!at_path[0].1.contains(ReadFlags::CREATE), "{seen:?}");
        for (n, f) in &seen {
            assert!(
                n == "admin.sock" || (n.starts_with(".bind.") && f.contains(ReadFlags::ISDIR)),
                "{seen:?}"
            );
        }
        assert_eq!(mode(&p), 0o600);
    }

    #[test]
    fn an_old_socket_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("admin.sock");
        let old = UnixListener::bind(&p).unwrap();
        drop(old);
        let s = bind(&p).unwrap();
        assert_eq!(mode(&p), 0o600);
        // The old socket's path now leads to the new listener.
        let _c = std::os::unix::net::UnixStream::connect(&p).unwrap();
        s.listener.set_nonblocking(false).unwrap();
        assert!(s.listener.accept().is_ok());
    }

    /// A second daemon with the same socket path leaves the first one's
    /// socket alone: something answers on it.
    #[test]
    fn a_socket_a_process_listens_on_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("admin.sock");
        let first = bind(&p).unwrap();
        let e = bind(&p).err().expect("refused");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
        assert!(e.to_string().contains("running process"), "{e}");
        // The first daemon's socket still leads to it.
        let _c = std::os::unix::net::UnixStream::connect(&p).unwrap();
        first.listener.set_nonblocking(false).unwrap();
        assert!(first.listener.accept().is_ok());
        assert_eq!(others(dir.path(), "admin.sock"), Vec::<String>::new());
    }

    #[test]
    fn anything_but_a_socket_at_the_path_is_refused_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        fs::write(&file, "precious").unwrap();
        let sub = dir.path().join("sub");
        fs::create_dir(&sub).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        for (p, kind) in [
            (&file, "a regular file"),
            (&sub, "a directory"),
            (&link, "a symbolic link"),
        ] {
            let e = bind(p).err().unwrap();
            assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
            let e = e.to_string();
            assert!(e.contains(&p.display().to_string()), "names the path: {e}");
            assert!(e.contains(kind), "{e}");
        }
        assert_eq!(fs::read_to_string(&file).unwrap(), "precious");
        assert!(sub.is_dir());
        assert!(fs::symlink_metadata(&link).unwrap().is_symlink());
        let mut left = others(dir.path(), "");
        left.sort();
        assert_eq!(left, ["file", "link", "sub"], "no bind directory left");
    }

    #[test]
    fn stopping_leaves_a_file_that_replaced_the_socket() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("admin.sock");
        let (_l, unlink) = bind(&p).unwrap().into_parts();
        fs::remove_file(&p).unwrap();
        fs::write(&p, "someone else's").unwrap();
        drop(unlink);
        assert_eq!(fs::read_to_string(&p).unwrap(), "someone else's");
    }
}
