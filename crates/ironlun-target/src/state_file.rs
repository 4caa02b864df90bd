//! One file of the state directory per LU and kind of state, replaced
//! atomically (a new file, fsync, rename, fsync of the directory) so that a
//! crash leaves the old text or the new one. The persistent reservation
//! store (prstore.rs) and the sanitize store (sanitize_store.rs) keep their
//! records in such files.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub struct StateFile {
    path: PathBuf,
}

impl StateFile {
    /// `DIR/KIND-TARGET-lunN.txt`, the target name with every character
    /// but letters, digits, '.' and '-' made '_'.
    pub fn for_lu(dir: &Path, kind: &str, target: &str, lun: u16) -> StateFile {
        let safe: String = target
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        StateFile {
            path: dir.join(format!("{kind}-{safe}-lun{lun}.txt")),
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
