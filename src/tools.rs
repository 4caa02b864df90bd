//! Initiator tools: `discover`, `inquiry`, `readcap`, `dd`.

use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use ironlun_initiator::scsi;
use ironlun_initiator::{discover, open_lun, IscsiUrl, Session};

use crate::initiator_args::InitiatorArgs;
use ironlun_units::parse_size;

#[derive(clap::Args)]
pub struct DiscoverArgs {
    /// Portal to ask, HOST[:PORT] (IPv6 as [::1]:3260).
    pub portal: String,
    #[command(flatten)]
    pub initiator: InitiatorArgs,
}

#[derive(clap::Args)]
pub struct UrlArgs {
    /// iscsi://[user[%password]@]host[:port]/target-iqn/lun
    pub url: String,
    #[command(flatten)]
    pub initiator: InitiatorArgs,
}

#[derive(clap::Args)]
pub struct DdArgs {
    /// Source: a local file or an iscsi:// URL.
    #[arg(long = "if", value_name = "FILE|URL")]
    pub input: String,
    /// Destination: a local file or an iscsi:// URL.
    #[arg(long = "of", value_name = "FILE|URL")]
    pub output: String,
    /// Transfer size per command.
    #[arg(long, default_value = "512KiB", value_name = "SIZE")]
    pub bs: String,
    /// Blocks of --bs to copy (default: up to the end of the source).
    #[arg(long)]
    pub count: Option<u64>,
    /// Blocks of --bs to skip at the start of the source.
    #[arg(long, default_value_t = 0)]
    pub skip: u64,
    /// Blocks of --bs to skip at the start of the destination.
    #[arg(long, default_value_t = 0)]
    pub seek: u64,
    /// Commands in flight at once.
    #[arg(long, default_value_t = 8)]
    pub qd: usize,
    /// No progress line.
    #[arg(long)]
    pub quiet: bool,
    #[command(flatten)]
    pub initiator: InitiatorArgs,
}

pub async fn run_discover(a: DiscoverArgs) -> Result<(), String> {
    let portal = match ironlun_initiator::url::parse_portal(&a.portal) {
        Some((h, p)) => ironlun_initiator::url::format_portal(&h, p),
        None => return Err(format!("bad portal '{}' (HOST[:PORT])", a.portal)),
    };
    let targets = discover(&portal, &a.initiator.options()?)
        .await
        .map_err(|e| e.to_string())?;
    for t in targets {
        outln!("{}", t.name);
        for addr in t.addresses {
            outln!("  {addr}");
        }
    }
    Ok(())
}

async fn open(url: &IscsiUrl, a: &InitiatorArgs) -> Result<Session, String> {
    let opts = a.options_for(url)?;
    open_lun(&url.portal(), &url.target, url.lun, &opts)
        .await
        .map_err(|e| e.to_string())
}

fn parse_url(s: &str) -> Result<IscsiUrl, String> {
    s.parse()
        .map_err(|e: ironlun_initiator::url::UrlError| e.to_string())
}

pub async fn run_inquiry(a: UrlArgs) -> Result<(), String> {
    let url = parse_url(&a.url)?;
    let s = open(&url, &a.initiator).await?;
    let inq = s.inquiry(url.lun).await.map_err(|e| e.to_string())?;
    outln!("Peripheral device type: 0x{:02x}", inq.peripheral_type);
    outln!("Version:                0x{:02x}", inq.version);
    outln!("Vendor:                 {}", inq.vendor);
    outln!("Product:                {}", inq.product);
    outln!("Revision:               {}", inq.revision);
    if let Ok(d) = s.run(scsi::inquiry(url.lun, Some(0x80), 255)).await {
        let serial = String::from_utf8_lossy(d.get(4..).unwrap_or(&[]));
        outln!("Unit serial number:     {}", serial.trim());
    }
    let _ = s.logout().await;
    Ok(())
}

pub async fn run_readcap(a: UrlArgs) -> Result<(), String> {
    let url = parse_url(&a.url)?;
    let s = open(&url, &a.initiator).await?;
    let c = s.read_capacity(url.lun).await.map_err(|e| e.to_string())?;
    outln!("Logical blocks:      {}", c.blocks);
    outln!("Block size:          {} bytes", c.block_size);
    outln!(
        "Physical block size: {} bytes",
        u64::from(c.block_size) << c.lbppbe
    );
    outln!(
        "Capacity:            {} bytes ({:.2} GB, {:.2} GiB)",
        c.bytes(),
        c.bytes() as f64 / 1e9,
        c.bytes() as f64 / (1u64 << 30) as f64
    );
    outln!("Thin provisioned:    {}", if c.thin { "yes" } else { "no" });
    let _ = s.logout().await;
    Ok(())
}

/// One side of a copy. Chunks are disjoint, so copies of different chunks
/// run concurrently, in any order.
enum End {
    File(std::fs::File, u64),
    Lun {
        session: Session,
        lun: u16,
        block_size: u32,
        bytes: u64,
    },
}

impl End {
    async fn open(spec: &str, write: bool, a: &InitiatorArgs) -> Result<End, String> {
        if spec.starts_with("iscsi://") {
            let url = parse_url(spec)?;
            let session = open(&url, a).await?;
            let cap = session
                .read_capacity(url.lun)
                .await
                .map_err(|e| format!("{url}: {e}"))?;
            return Ok(End::Lun {
                session,
                lun: url.lun,
                block_size: cap.block_size,
                bytes: cap.bytes(),
            });
        }
        let f = if write {
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(spec)
        } else {
            std::fs::File::open(spec)
        }
        .map_err(|e| format!("{spec}: {e}"))?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(End::File(f, len))
    }

    fn len(&self) -> u64 {
        match self {
            End::File(_, l) => *l,
            End::Lun { bytes, .. } => *bytes,
        }
    }

    async fn read(&self, off: u64, len: u64) -> Result<Bytes, String> {
        match self {
            End::File(f, _) => {
                let mut buf = vec![0u8; len as usize];
                f.read_exact_at(&mut buf, off).map_err(|e| e.to_string())?;
                Ok(Bytes::from(buf))
            }
            End::Lun {
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
        match self {
            End::File(f, _) => f.write_all_at(&data, off).map_err(|e| e.to_string()),
            End::Lun {
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
}

pub async fn run_dd(a: DdArgs) -> Result<(), String> {
    let bs = parse_size(&a.bs)?;
    if bs == 0 || bs > 16 << 20 {
        return Err("--bs must be between 1 byte and 16 MiB".into());
    }
    let qd = a.qd.clamp(1, 256);
    let src = Arc::new(End::open(&a.input, false, &a.initiator).await?);
    let dst = Arc::new(End::open(&a.output, true, &a.initiator).await?);
    for end in [&src, &dst] {
        if let End::Lun { block_size, .. } = end.as_ref() {
            if bs % u64::from(*block_size) != 0 {
                return Err(format!(
                    "--bs {bs} is not a multiple of the LUN's {block_size}-byte blocks"
                ));
            }
        }
    }
    let start = a.skip.saturating_mul(bs);
    let dst_start = a.seek.saturating_mul(bs);
    let avail = src.len().saturating_sub(start);
    let mut total = match a.count {
        Some(c) => c.saturating_mul(bs).min(avail),
        None => avail,
    };
    if let End::Lun { bytes, .. } = dst.as_ref() {
        total = total.min(bytes.saturating_sub(dst_start));
    }
    let progress = Arc::new(crate::progress::Progress::new(total, a.quiet));
    let began = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let mut off = 0u64;
    let mut result = Ok(());
    while off < total || !tasks.is_empty() {
        while off < total && tasks.len() < qd && result.is_ok() {
            let len = bs.min(total - off);
            let (src, dst, progress) = (src.clone(), dst.clone(), progress.clone());
            let (input, output) = (a.input.clone(), a.output.clone());
            tasks.spawn(async move {
                let data = src
                    .read(start + off, len)
                    .await
                    .map_err(|e| format!("reading {input} at byte {}: {e}", start + off))?;
                dst.write(dst_start + off, data)
                    .await
                    .map_err(|e| format!("writing {output} at byte {}: {e}", dst_start + off))?;
                progress.add(len);
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
    match dst.as_ref() {
        End::Lun { session, lun, .. } => {
            session
                .run(scsi::sync_cache(*lun))
                .await
                .map_err(|e| format!("SYNCHRONIZE CACHE: {e}"))?;
        }
        End::File(f, _) => f.sync_all().map_err(|e| format!("{}: {e}", a.output))?,
    }
    progress.finish();
    let secs = began.elapsed().as_secs_f64().max(1e-9);
    eprintln!(
        "{total} bytes copied in {secs:.3} s: {:.1} MB/s ({:.1} MiB/s)",
        total as f64 / secs / 1e6,
        total as f64 / secs / (1u64 << 20) as f64
    );
    for end in [src, dst] {
        if let End::Lun { session, .. } = end.as_ref() {
            let _ = session.logout().await;
        }
    }
    Ok(())
}
