//! One file of the state directory per LU and kind of state, replaced
//! atomically (a new file, fsync, rename, fsync of the directory) so that a
//! crash leaves the old text or the new one, read with a bound on its
//! size, and kept aside for a person when it does not parse
//! ([`StateFile::keep_aside`]).
//!
//! The daemon runs as root and the directory may be one others can write
//! to (a misconfigured mode, a shared path): nothing here follows a link
//! someone planted. The new file has a random name and is created
//! exclusively (`O_CREAT|O_EXCL`, which refuses an existing name and a
//! link alike), owner only; the rename replaces whatever is at the path,
//! a link included, without following it. A read opens without
//! following a link (`O_NOFOLLOW`) and without waiting for a writer
//! (`O_NONBLOCK`: a FIFO would block the start for ever), and reads only
//! a regular file, checked on the open descriptor. The persistent reservation store
//! (prstore.rs) and the sanitize store (sanitize_store.rs) keep their
//! records in such files; `lu_state.rs` reads them when a LU opens;
//! `state_name.rs` names them.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::state_name;

/// Names tried for a file kept aside within one second.
const MAX_ASIDE_TRIES: u32 = 100;

pub struct StateFile {
    path: PathBuf,
}

impl StateFile {
    /// `DIR/KIND-STEM-lunN.txt`, STEM a one-to-one encoding of the
    /// target's name (`state_name.rs`).
    pub fn for_lu(dir: &Path, kind: &str, target: &str, lun: u16) -> StateFile {
        StateFile {
            path: dir.join(state_name::file_name(kind, target, lun)),
        }
    }

    /// The file at `path` (the configuration file `config save` writes).
    pub fn at(path: &Path) -> StateFile {
        StateFile {
            path: path.to_owned(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the file's text: a new file of a random name beside it
    /// (`.NAME.XXXXXX.tmp`, created exclusively, owner only: a
    /// configuration may hold CHAP secrets), written and fsynced, renamed
    /// over the path, and the directory fsynced. The directory is made on
    /// the first write, so state that is never saved leaves nothing
    /// behind.
    pub fn replace(&self, text: &str) -> io::Result<()> {
        let dir = self.dir();
        fs::create_dir_all(dir)?;
        let prefix = format!(".{}.", self.name());
        let mut tmp = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".tmp")
            .permissions(fs::Permissions::from_mode(0o600))
            .tempfile_in(dir)?;
        tmp.write_all(text.as_bytes())?;
        tmp.as_file().sync_all()?;
        // rename(2): a link at the path is replaced, not followed. On an
        // error the new file is removed.
        tmp.persist(&self.path).map_err(|e| e.error)?;
        self.sync_dir()
    }

    /// The file's text, `None` when there is none. A file longer than
    /// `max` bytes, or not UTF-8, is [`io::ErrorKind::InvalidData`]: only
    /// `max + 1` bytes are read. A link, a FIFO or anything else that is
    /// not a regular file is an error of its own kind, read from nothing.
    pub fn read_bounded(&self, max: usize) -> io::Result<Option<String>> {
        let f = match open_plain(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        f.take(max as u64 + 1).read_to_end(&mut bytes)?;
        if bytes.len() > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("longer than {max} bytes"),
            ));
        }
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
    }

    /// The file's name, for the names of files beside it.
    fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Whether the file exists (a link that leads nowhere counts).
    pub fn exists(&self) -> bool {
        fs::symlink_metadata(&self.path).is_ok()
    }

    /// Renames the file to `to` (another file of the same directory).
    pub fn rename_to(&self, to: &StateFile) -> io::Result<()> {
        fs::rename(&self.path, &to.path)?;
        self.sync_dir()
    }

    /// Keeps the file aside for a person: a hard link
    /// `NAME.corrupt-<unix time>` (`-2`, `-3`, ... after it if that
    /// exists; a link never replaces a file), then `marker` atomically in
    /// its place, so that a crash leaves the file where it was or both.
    /// Returns where it was kept.
    pub fn keep_aside(&self, marker: impl Fn(&str) -> String) -> io::Result<PathBuf> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let name = self.name();
        for n in 1..=MAX_ASIDE_TRIES {
            let aside = match n {
                1 => format!("{name}.corrupt-{now}"),
                n => format!("{name}.corrupt-{now}-{n}"),
            };
            let to = self.dir().join(&aside);
            match fs::hard_link(&self.path, &to) {
                Ok(()) => {
                    self.replace(&marker(&aside))?;
                    return Ok(to);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "every name to keep it aside under is taken",
        ))
    }

    /// Removes the file; one that is not there is already removed.
    pub fn remove(&self) -> io::Result<()> {
        match fs::remove_file(&self.path) {
            Ok(()) => self.sync_dir(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(self.dir())?.sync_all()
    }

    /// The directory holding the file: `.` for a bare file name, whose
    /// parent is the empty path.
    fn dir(&self) -> &Path {
        match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        }
    }
}

/// Opens `path` for reading if it is a regular file: not through a link
/// at its end (`O_NOFOLLOW`), and without waiting for a writer if it is
/// a FIFO (`O_NONBLOCK`); the type is checked on the open descriptor
/// (fstat), the file that will be read. Errors say what is there.
fn open_plain(path: &Path) -> io::Result<File> {
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    let f = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(rustix::io::Errno::LOOP) => return Err(not_plain("a symbolic link")),
        Err(e) => return Err(e.into()),
    };
    let ft = f.metadata()?.file_type();
    if ft.is_file() {
        return Ok(f);
    }
    Err(not_plain(if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_block_device() || ft.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    }))
}

/// What is at a state file's path instead of a regular file: an error
/// of its own kind (not [`io::ErrorKind::InvalidData`], so it is not
/// kept aside: a person looks at what was put there).
fn not_plain(what: &str) -> io::Error {
    io::Error::other(format!(
        "{what}, not a regular file: a state file is read only from a regular file of the state directory"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_file_name_lives_in_the_working_directory() {
        assert_eq!(
            StateFile::at(Path::new("ironlun.toml")).dir(),
            Path::new(".")
        );
        assert_eq!(
            StateFile::at(Path::new("etc/a.toml")).dir(),
            Path::new("etc")
        );
        assert_eq!(StateFile::at(Path::new("/a.toml")).dir(), Path::new("/"));
    }

    /// What the state directory holds besides `victim`.
    fn others(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// A link planted where the old code put its temporary file, or at
    /// the file's own path, is never followed: the file it leads to keeps
    /// its text, and the state file ends up a regular file of its own.
    #[test]
    fn a_planted_link_is_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, outside) = (tmp.path().join("state"), tmp.path().join("victim"));
        fs::create_dir(&dir).unwrap();
        fs::write(&outside, "precious").unwrap();
        let f = StateFile::for_lu(&dir, "pr", "iqn.2026-11.test:t", 0);
        std::os::unix::fs::symlink(&outside, f.path().with_extension("tmp")).unwrap();
        std::os::unix::fs::symlink(&outside, f.path()).unwrap();
        f.replace("new state\n").unwrap();
        assert_eq!(fs::read_to_string(&outside).unwrap(), "precious");
        let meta = fs::symlink_metadata(f.path()).unwrap();
        assert!(meta.file_type().is_file(), "{meta:?}");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(f.read_bounded(100).unwrap().as_deref(), Some("new state\n"));
        // Nothing of the write is left beside it (the planted link stays).
        assert_eq!(others(&dir).len(), 2, "{:?}", others(&dir));
    }

    /// A file whose own name ends in `.tmp` (a configuration saved as
    /// `x.tmp`) is replaced by a rename too, never rewritten in place: a
    /// reader of the old file keeps the old text whole.
    #[test]
    fn a_file_named_tmp_is_replaced_atomically() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("ironlun.tmp");
        fs::write(&path, "old text").unwrap();
        let mut old = File::open(&path).unwrap();
        StateFile::at(&path).replace("new text").unwrap();
        let mut seen = String::new();
        old.read_to_string(&mut seen).unwrap();
        assert_eq!(seen, "old text", "written in place");
        assert_eq!(fs::read_to_string(&path).unwrap(), "new text");
    }

    /// A link or a FIFO at a state file's path is refused at once, read
    /// from nothing: a FIFO would block the daemon's start for ever.
    #[test]
    fn only_a_regular_file_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        fs::write(d.join("target"), "ironlun-pr 2\n").unwrap();
        std::os::unix::fs::symlink(d.join("target"), d.join("link")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            d.join("fifo"),
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        fs::create_dir(d.join("dir")).unwrap();
        for (name, what) in [
            ("link", "a symbolic link"),
            ("fifo", "a FIFO"),
            ("dir", "a directory"),
        ] {
            let e = StateFile::at(&d.join(name)).read_bounded(100).unwrap_err();
            assert_ne!(e.kind(), io::ErrorKind::InvalidData, "{name}: {e}");
            assert!(e.to_string().starts_with(what), "{name}: {e}");
        }
        assert_eq!(
            StateFile::at(&d.join("target")).read_bounded(100).unwrap(),
            Some("ironlun-pr 2\n".into())
        );
    }
}
