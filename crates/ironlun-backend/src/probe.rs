//! What opening a file or block device for a LUN would do, found out
//! without doing it: `ironlun target --check` asks, often beside the
//! daemon that serves the store, so nothing here creates, grows, writes
//! or locks anything. The refusals are [`FileBackend::open_file`]'s and
//! [`FileBackend::open_block`]'s own: the rules live once, in `file`.
//!
//! A store another process serves is not refused here: its lock holder
//! is named ([`Probe::holder`], from `/proc/locks`), and the caller says
//! whether that is a problem.
//!
//! [`FileBackend::open_file`]: crate::FileBackend::open_file
//! [`FileBackend::open_block`]: crate::FileBackend::open_block

use std::fmt;
use std::fs::{File, Metadata};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use rustix::fs::{Access, AtFlags, Mode, OFlags, CWD};
use rustix::io::Errno;

use crate::file::{device_size, file_size, not_a_device, not_a_file, refuse_missing};
use crate::lock::{holder_of, process_name};
use crate::FileOptions;

/// What opening the store would find and do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// The size the LUN would be served at, in bytes.
    pub size: u64,
    /// What the open would change.
    pub change: Option<Change>,
    /// The process that holds the store's lock now (a daemon serving
    /// it), where `/proc/locks` names one.
    pub holder: Option<Holder>,
}

/// What opening a file LUN changes on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The file is created at the size.
    Create,
    /// The file is empty and is given the size.
    Size,
    /// The file grows from this many bytes (`,grow`).
    Grow { from: u64 },
}

/// A process holding a store's lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// Its command name, where it can be read.
    pub name: Option<String>,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(n) => write!(f, "process {} ({n})", self.pid),
            None => write!(f, "process {}", self.pid),
        }
    }
}

/// What [`crate::FileBackend::open_file`] would do with `path` and
/// `opts`, or the error it would give.
pub fn probe_file(path: &Path, opts: &FileOptions) -> io::Result<Probe> {
    let Some(meta) = metadata(path)? else {
        refuse_missing(path, opts)?;
        creatable(path)?;
        return Ok(Probe {
            size: opts.size.unwrap_or(0),
            change: Some(Change::Create),
            holder: None,
        });
    };
    if !meta.file_type().is_file() {
        return Err(not_a_file(path));
    }
    permitted(path, opts.read_only)?;
    let current = meta.len();
    let size = file_size(path, current, opts)?;
    if opts.direct {
        read_only(path, true)?;
    }
    let change = match (current, size) {
        (c, s) if c == s => None,
        (0, _) => Some(Change::Size),
        (from, _) => Some(Change::Grow { from }),
    };
    Ok(Probe {
        size,
        change,
        holder: holder(&meta),
    })
}

/// What [`crate::FileBackend::open_block`] would do with `path` and
/// `opts`, or the error it would give. The device is opened read-only to
/// learn its size.
pub fn probe_block(path: &Path, opts: &FileOptions) -> io::Result<Probe> {
    let Some(meta) = metadata(path)? else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{}: no such device", path.display()),
        ));
    };
    if !meta.file_type().is_block_device() {
        return Err(not_a_device(path));
    }
    permitted(path, opts.read_only)?;
    let mut f = read_only(path, opts.direct)?;
    let size = f.seek(SeekFrom::End(0)).map_err(|e| at(path, e))?;
    device_size(path, size, opts)?;
    Ok(Probe {
        size,
        change: None,
        holder: holder(&meta),
    })
}

/// The metadata of `path`, `None` when nothing is there.
fn metadata(path: &Path) -> io::Result<Option<Metadata>> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(at(path, e)),
    }
}

fn at(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Whether this process may open `path` as the LUN would: reading, and
/// writing unless `read_only` (a read-only file system refuses that
/// too).
fn permitted(path: &Path, read_only: bool) -> io::Result<()> {
    let how = if read_only {
        Access::READ_OK
    } else {
        Access::READ_OK | Access::WRITE_OK
    };
    rustix::fs::accessat(CWD, path, how, AtFlags::EACCESS).map_err(|e| {
        let what = if read_only { "read" } else { "read and write" };
        io::Error::new(
            io::Error::from(e).kind(),
            format!("{}: cannot {what} it: {e}", path.display()),
        )
    })
}

/// Whether a file can be made at `path`: its directory is there and this
/// process may write in it.
fn creatable(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let refuse = |why: String| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{}: cannot create it: {why}", path.display()),
        )
    };
    match metadata(dir)? {
        None => return Err(refuse(format!("{} does not exist", dir.display()))),
        Some(m) if !m.is_dir() => {
            return Err(refuse(format!("{} is not a directory", dir.display())))
        }
        Some(_) => {}
    }
    rustix::fs::accessat(
        CWD,
        dir,
        Access::WRITE_OK | Access::EXEC_OK,
        AtFlags::EACCESS,
    )
    .map_err(|e| refuse(format!("{}: {e}", dir.display())))
}

/// `path` opened read-only (which takes no lock and, unlike a descriptor
/// opened for writing, makes udev look at nothing when it closes), with
/// `O_DIRECT` when `direct`: EINVAL is then the file system refusing it.
fn read_only(path: &Path, direct: bool) -> io::Result<File> {
    let mut flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY;
    if direct {
        flags |= OFlags::DIRECT;
    }
    match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => Ok(File::from(fd)),
        Err(Errno::INVAL) if direct => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: its file system refuses O_DIRECT: leave ,direct out",
                path.display()
            ),
        )),
        Err(e) => Err(at(path, e.into())),
    }
}

fn holder(meta: &Metadata) -> Option<Holder> {
    let pid = holder_of(meta)?;
    Some(Holder {
        pid,
        name: process_name(pid),
    })
}

#[cfg(test)]
mod tests;
