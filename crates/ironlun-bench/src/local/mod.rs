//! Local targets: a file or block device driven directly, without iSCSI,
//! so that the same workload measures the device the network path is
//! compared with. Two engines: io_uring (`uring`, `O_DIRECT` unless
//! buffered I/O is asked for) and pread/pwrite on threads (`psync`,
//! one thread per I/O that may be in flight). Completions reach the
//! engine's loop as the initiator's do: a GOOD reply with the data read,
//! or an error, tagged with the I/O's slot, so metering and verification
//! are the same for both kinds of target.

mod buf;
mod psync;
mod uring;

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path as FsPath, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use bytes::Bytes;
use ironlun_initiator::{Capacity, ScsiReply};
use tokio::sync::mpsc::UnboundedSender;

use crate::engine::{LunTarget, Path, Slice};

/// A completion as the engine takes it (see the engine's issuer).
pub(crate) type Completion = (u64, Result<ScsiReply, ironlun_initiator::Error>);

/// How a local target is driven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// io_uring: the run's thread submits and reaps, no thread per I/O.
    Uring,
    /// pread/pwrite, each I/O slot on a thread of its own.
    Psync,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Uring => "io_uring",
            Engine::Psync => "psync",
        }
    }
}

impl FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> Result<Engine, String> {
        match s {
            "io_uring" | "uring" => Ok(Engine::Uring),
            "psync" => Ok(Engine::Psync),
            _ => Err(format!("unknown engine {s:?} (io_uring or psync)")),
        }
    }
}

/// An open local file or block device.
#[derive(Debug)]
pub struct LocalDev {
    pub path: PathBuf,
    pub file: File,
    pub engine: Engine,
    /// Opened with `O_DIRECT`.
    pub direct: bool,
}

/// Block size of a regular file: a page, which `O_DIRECT` accepts on
/// every file system.
const FILE_BLOCK: u32 = 4096;

/// Opens `path` (a file or a block device) as a target named `label`
/// driven by `engine`, with `O_DIRECT` unless `buffered`.
pub fn open(
    path: &FsPath,
    engine: Engine,
    buffered: bool,
    label: String,
    slice: Slice,
) -> Result<LunTarget, String> {
    let fail = |e: io::Error| format!("{}: {e}", path.display());
    let mut o = OpenOptions::new();
    o.read(true).write(true);
    if !buffered {
        o.custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32);
    }
    let mut file = o.open(path).map_err(fail)?;
    let meta = file.metadata().map_err(fail)?;
    let (size, block_size) = if meta.file_type().is_block_device() {
        let size = file.seek(SeekFrom::End(0)).map_err(fail)?;
        (size, logical_block_size(meta.rdev()))
    } else if meta.is_file() {
        (meta.len(), FILE_BLOCK)
    } else {
        return Err(format!("{}: not a file or block device", path.display()));
    };
    let capacity = Capacity {
        blocks: size / u64::from(block_size),
        block_size,
        lbppbe: 0,
        thin: false,
    };
    let dev = LocalDev {
        path: path.to_owned(),
        file,
        engine,
        direct: !buffered,
    };
    Ok(LunTarget {
        label,
        path: Path::Local(Arc::new(dev)),
        lun: 0,
        capacity,
        slice,
    })
}

/// A block device's logical block size, from sysfs (512 when unknown).
fn logical_block_size(rdev: u64) -> u32 {
    let major = ((rdev >> 32) & 0xffff_f000) | ((rdev >> 8) & 0xfff);
    let minor = ((rdev >> 12) & 0xffff_ff00) | (rdev & 0xff);
    let p = format!("/sys/dev/block/{major}:{minor}/queue/logical_block_size");
    std::fs::read_to_string(p)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(512)
}

/// One I/O on a local target.
pub(crate) struct LocalIo {
    /// The I/O's slot: its completion's tag.
    pub(crate) tag: u64,
    pub(crate) dev: Arc<LocalDev>,
    pub(crate) offset: u64,
    pub(crate) len: usize,
    /// Writes: the data (`None`: the slot's own pre-filled buffer).
    /// Reads: `None`.
    pub(crate) write: Option<Option<Bytes>>,
    /// Reads: hand the data back (verification needs it).
    pub(crate) keep: bool,
}

/// The run's local engine.
pub(crate) enum Driver {
    /// Boxed: the ring is large beside psync's channels.
    Uring(Box<uring::Uring>),
    Psync(psync::Psync),
}

impl Driver {
    /// An engine for `slots` I/Os in flight of up to `max_len` bytes,
    /// writes from `payload` unless given data; completions the engine
    /// cannot hand back itself go to `tx`.
    pub(crate) fn new(
        engine: Engine,
        slots: usize,
        max_len: usize,
        payload: &Bytes,
        tx: &UnboundedSender<Completion>,
    ) -> Result<Driver, String> {
        Ok(match engine {
            Engine::Uring => Driver::Uring(Box::new(
                uring::Uring::new(slots, max_len, payload).map_err(|e| format!("io_uring: {e}"))?,
            )),
            Engine::Psync => Driver::Psync(psync::Psync::new(slots, max_len, payload, tx)?),
        })
    }

    pub(crate) fn submit(&mut self, io: LocalIo) -> Result<(), String> {
        match self {
            Driver::Uring(u) => u.push(io).map_err(|e| format!("io_uring: {e}")),
            Driver::Psync(p) => p.submit(io),
        }
    }

    /// Hands what was queued to the kernel.
    pub(crate) fn flush(&mut self) -> Result<(), String> {
        match self {
            Driver::Uring(u) => u.submit().map_err(|e| format!("io_uring: {e}")),
            Driver::Psync(_) => Ok(()),
        }
    }

    /// Moves finished I/Os to `out` (psync's arrive through the channel).
    pub(crate) fn reap(&mut self, out: &mut VecDeque<Completion>) {
        if let Driver::Uring(u) = self {
            u.reap(out);
        }
    }

    /// Resolves when [`Driver::reap`] may find something (never for
    /// psync, whose completions come through the channel).
    pub(crate) async fn ready(&mut self) -> io::Result<()> {
        match self {
            Driver::Uring(u) => u.ready().await,
            Driver::Psync(_) => std::future::pending().await,
        }
    }
}

/// A local I/O's failure as the engine reports errors.
fn io_error(what: &str, io: &LocalIo, e: io::Error) -> ironlun_initiator::Error {
    ironlun_initiator::Error::Io {
        context: format!(
            "{} {what} of {} bytes at {}",
            io.dev.path.display(),
            io.len,
            io.offset
        ),
        source: e,
    }
}

/// A successful local I/O's reply.
fn good(data: Bytes) -> ScsiReply {
    ScsiReply {
        data,
        ..ScsiReply::default()
    }
}
