//! Copying between local files and LUNs, as `dd` does (`ironlun dd`):
//! fixed-size chunks, several in flight at once (chunks are disjoint, so
//! they complete in any order), a short tail padded with zeros to a whole
//! block on a LUN, and the destination made durable at the end
//! (SYNCHRONIZE CACHE, or `fsync`).
//!
//! Knows nothing of flags or of how progress is shown: the caller gives
//! a [`CopyPlan`] and a function that counts bytes.

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

use crate::lun::open_lun;
use crate::scsi;
use crate::session::{Session, SessionOptions};
use crate::url::IscsiUrl;

/// One side of a copy: a local file or a LUN, with the name errors use.
pub struct End {
    name: String,
    kind: Kind,
}

enum Kind {
    File(std::fs::File, u64),
    Lun {
        session: Session,
        lun: u16,
        block_size: u32,
        bytes: u64,
    },
}

impl End {
    /// A LUN: logs in ([`open_lun`]) and reads its capacity.
    pub async fn lun(url: &IscsiUrl, opts: &SessionOptions) -> Result<End, String> {
        let session = open_lun(&url.portal(), &url.target, url.lun, opts)
            .await
            .map_err(|e| e.to_string())?;
        let cap = session
            .read_capacity(url.lun)
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        Ok(End {
            name: url.to_string(),
            kind: Kind::Lun {
                session,
                lun: url.lun,
                block_size: cap.block_size,
                bytes: cap.bytes(),
            },
        })
    }

    /// A local file, for reading, or for writing (created when missing,
    /// never truncated).
    pub fn file(path: &str, write: bool) -> Result<End, String> {
        let f = if write {
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
        } else {
            std::fs::File::open(path)
        }
        .map_err(|e| format!("{path}: {e}"))?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(End {
            name: path.to_owned(),
            kind: Kind::File(f, len),
        })
    }

    /// Bytes in the file or on the LUN.
    pub fn len(&self) -> u64 {
        match &self.kind {
            Kind::File(_, l) => *l,
            Kind::Lun { bytes, .. } => *bytes,
        }
    }

    /// True when [`End::len`] is 0.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A LUN's logical block size; `None` for a file.
    pub fn block_size(&self) -> Option<u32> {
        match &self.kind {
            Kind::File(..) => None,
            Kind::Lun { block_size, .. } => Some(*block_size),
        }
    }

    async fn read(&self, off: u64, len: u64) -> Result<Bytes, String> {
        match &self.kind {
            Kind::File(f, _) => {
                let mut buf = vec![0u8; len as usize];
                f.read_exact_at(&mut buf, off).map_err(|e| e.to_string())?;
                Ok(Bytes::from(buf))
            }
            Kind::Lun {
                session,
                lun,
                block_size,
                ..
            } => {
                let bsz = u64::from(*block_size);
                let blocks = len.div_ceil(bsz) as u32;
                let mut d = session
                    .run(scsi::read(*lun, off / bsz, blocks, *block_size))
                    .await
                    .map_err(|e| e.to_string())?;
                d.truncate(len as usize);
                Ok(d)
            }
        }
    }

    async fn write(&self, off: u64, data: Bytes) -> Result<(), String> {
        match &self.kind {
            Kind::File(f, _) => f.write_all_at(&data, off).map_err(|e| e.to_string()),
            Kind::Lun {
                session,
                lun,
                block_size,
                ..
            } => {
                let bsz = *block_size as usize;
                let data = if data.len() % bsz != 0 {
                    // A short tail is padded with zeros to a whole block.
                    let mut v = data.to_vec();
                    v.resize(data.len().div_ceil(bsz) * bsz, 0);
                    Bytes::from(v)
                } else {
                    data
                };
                let blocks = (data.len() / bsz) as u32;
                session
                    .run(scsi::write(*lun, off / bsz as u64, blocks, data))
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
        }
    }

    /// Makes what was written durable: SYNCHRONIZE CACHE on a LUN,
    /// `fsync` on a file.
    pub async fn flush(&self) -> Result<(), String> {
        match &self.kind {
            Kind::Lun { session, lun, .. } => session
                .run(scsi::sync_cache(*lun))
                .await
                .map(|_| ())
                .map_err(|e| format!("SYNCHRONIZE CACHE: {e}")),
            Kind::File(f, _) => f.sync_all().map_err(|e| format!("{}: {e}", self.name)),
        }
    }

    /// Logs out of a LUN's session (nothing for a file).
    pub async fn close(&self) {
        if let Kind::Lun { session, .. } = &self.kind {
            let _ = session.logout().await;
        }
    }
}

/// What to copy, in dd's terms: chunks of `bs` bytes, `skip` chunks into
/// the source, `seek` chunks into the destination, at most `count`
/// chunks (default: to the end of the source), `qd` chunks in flight.
#[derive(Clone, Copy, Debug)]
pub struct CopyPlan {
    pub bs: u64,
    pub count: Option<u64>,
    pub skip: u64,
    pub seek: u64,
    pub qd: usize,
}

impl CopyPlan {
    /// Bytes a copy from `src` to `dst` moves: from the skipped chunks to
    /// the end of the source or `count` chunks, and no further than the
    /// end of a LUN (a file grows). A chunk must be whole blocks of a
    /// LUN on either side.
    pub fn total(&self, src: &End, dst: &End) -> Result<u64, String> {
        let bs = self.bs;
        for end in [src, dst] {
            if let Some(block_size) = end.block_size() {
                if bs % u64::from(block_size) != 0 {
                    return Err(format!(
                        "--bs {bs} is not a multiple of the LUN's {block_size}-byte blocks"
                    ));
                }
            }
        }
        let avail = src.len().saturating_sub(self.skip.saturating_mul(bs));
        let mut total = match self.count {
            Some(c) => c.saturating_mul(bs).min(avail),
            None => avail,
        };
        if dst.block_size().is_some() {
            total = total.min(dst.len().saturating_sub(self.seek.saturating_mul(bs)));
        }
        Ok(total)
    }
}

/// Copies `total` bytes (see [`CopyPlan::total`]) from `src` to `dst`
/// with at most `plan.qd` chunks in flight, calling `progress` with each
/// chunk's length as it lands, then flushes `dst`. The first failure
/// stops new chunks; it is returned once those in flight have ended.
pub async fn copy(
    src: Arc<End>,
    dst: Arc<End>,
    plan: &CopyPlan,
    total: u64,
    progress: Arc<dyn Fn(u64) + Send + Sync>,
) -> Result<(), String> {
    let start = plan.skip.saturating_mul(plan.bs);
    let dst_start = plan.seek.saturating_mul(plan.bs);
    let qd = plan.qd.max(1);
    let mut tasks = tokio::task::JoinSet::new();
    let mut off = 0u64;
    let mut result = Ok(());
    while off < total || !tasks.is_empty() {
        while off < total && tasks.len() < qd && result.is_ok() {
            let len = plan.bs.min(total - off);
            let (src, dst, progress) = (src.clone(), dst.clone(), progress.clone());
            tasks.spawn(async move {
                let (from, to) = (start + off, dst_start + off);
                let data = src
                    .read(from, len)
                    .await
                    .map_err(|e| format!("reading {} at byte {from}: {e}", src.name))?;
                dst.write(to, data)
                    .await
                    .map_err(|e| format!("writing {} at byte {to}: {e}", dst.name))?;
                progress(len);
                Ok::<(), String>(())
            });
            off += len;
        }
        match tasks.join_next().await {
            Some(Ok(Ok(()))) => {}
            Some(Ok(Err(e))) => {
                result = Err(e);
                off = total;
            }
            Some(Err(e)) => {
                result = Err(format!("copy task failed: {e}"));
                off = total;
            }
            None => break,
        }
    }
    result?;
    dst.flush().await
}
