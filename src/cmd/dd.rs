//! `ironlun dd`: copies between a local file and a LUN, or LUN to LUN,
//! with a progress line.

use std::sync::Arc;
use std::time::Instant;

use ironlun_initiator::copy::{copy, CopyPlan, End};
use ironlun_units::parse_size;

use crate::args::{parse_url, InitiatorArgs};
use crate::runtime::{usage, Failure};
use crate::ui::Progress;

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

/// A copy's end: an iscsi:// URL or a local file.
async fn end(spec: &str, write: bool, a: &InitiatorArgs) -> Result<End, Failure> {
    if spec.starts_with("iscsi://") {
        let url = parse_url(spec).map_err(usage)?;
        let options = a.options_for(&url).map_err(usage)?;
        Ok(End::lun(&url, &options).await?)
    } else {
        Ok(End::file(spec, write)?)
    }
}

pub async fn run(a: DdArgs) -> Result<(), Failure> {
    let bs = parse_size(&a.bs).map_err(|e| usage(format!("--bs: {e}")))?;
    if bs == 0 || bs > 16 << 20 {
        return Err(usage("--bs must be between 1 byte and 16 MiB"));
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
    let progress = Arc::new(Progress::new(total, a.quiet));
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
