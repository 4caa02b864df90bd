//! Initiator tools: `discover`, `inquiry`, `readcap`, `dd`.

use std::sync::Arc;
use std::time::Instant;

use ironlun_initiator::copy::{copy, CopyPlan, End};
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
    if let Ok(serial) = s.unit_serial_number(url.lun).await {
        outln!("Unit serial number:     {serial}");
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
    outln!("Physical block size: {} bytes", c.physical_block_size());
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

/// A copy's end: an iscsi:// URL or a local file.
async fn end(spec: &str, write: bool, a: &InitiatorArgs) -> Result<End, String> {
    if spec.starts_with("iscsi://") {
        let url = parse_url(spec)?;
        End::lun(&url, &a.options_for(&url)?).await
    } else {
        End::file(spec, write)
    }
}

pub async fn run_dd(a: DdArgs) -> Result<(), String> {
    let bs = parse_size(&a.bs)?;
    if bs == 0 || bs > 16 << 20 {
        return Err("--bs must be between 1 byte and 16 MiB".into());
    }
    let plan = CopyPlan {
        bs,
        count: a.count,
        skip: a.skip,
        seek: a.seek,
        qd: a.qd.clamp(1, 256),
    };
    let src = Arc::new(end(&a.input, false, &a.initiator).await?);
    let dst = Arc::new(end(&a.output, true, &a.initiator).await?);
    let total = plan.total(&src, &dst)?;
    let progress = Arc::new(crate::progress::Progress::new(total, a.quiet));
    let began = Instant::now();
    let counter = progress.clone();
    copy(
        src.clone(),
        dst.clone(),
        &plan,
        total,
        Arc::new(move |n| counter.add(n)),
    )
    .await?;
    progress.finish();
    let secs = began.elapsed().as_secs_f64().max(1e-9);
    eprintln!(
        "{total} bytes copied in {secs:.3} s: {:.1} MB/s ({:.1} MiB/s)",
        total as f64 / secs / 1e6,
        total as f64 / secs / (1u64 << 20) as f64
    );
    src.close().await;
    dst.close().await;
    Ok(())
}
