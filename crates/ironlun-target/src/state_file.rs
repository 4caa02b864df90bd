//! One file of the state directory per LU and kind of state, replaced
//! atomically (a new file, fsync, rename, fsync of the directory) so that a
//! crash leaves the old text or the new one, read with a bound on its
//! size, and kept aside for a person when it does not parse
//! ([`StateFile::keep_aside`]). The persistent reservation store
//! (prstore.rs) and the sanitize store (sanitize_store.rs) keep their
//! records in such files; `lu_state.rs` reads them when a LU opens;
//! `state_name.rs` names them.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
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

    /// Replaces the file's text. The directory is made on the first
    /// write, so state that is never saved leaves nothing behind.
    pub fn replace(&self, text: &str) -> io::Result<()> {
        fs::create_dir_all(self.dir())?;
        let tmp = self.path.with_extension("tmp");
        // Owner only: a configuration may hold CHAP secrets.
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &self.path)?;
        self.sync_dir()
    }

    /// The file's text, `None` when there is none. A file longer than
    /// `max` bytes, or not UTF-8, is [`io::ErrorKind::InvalidData`]: only
    /// `max + 1` bytes are read.
    pub fn read_bounded(&self, max: usize) -> io::Result<Option<String>> {
        let f = match File::open(&self.path) {
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
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
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
}
