//! `ironlun readcap`: a LUN's capacity and block sizes (READ CAPACITY).

use crate::args::UrlArgs;
use crate::runtime::Failure;

#[derive(clap::Args)]
pub struct ReadcapArgs {
    #[command(flatten)]
    pub lun: UrlArgs,
    /// Print one JSON object instead of the table:
    /// {"url", "lun", "logical_blocks", "block_size",
    /// "physical_block_size", "bytes", "thin_provisioned"}
    /// (docs/cli.md).
    #[arg(long)]
    pub json: bool,
}

pub async fn run(a: ReadcapArgs) -> Result<(), Failure> {
    let (url, s) = a.lun.open().await?;
    let c = s.read_capacity(url.lun).await.map_err(|e| e.to_string())?;
    let _ = s.logout().await;
    if a.json {
        let v = serde_json::json!({
            "url": url.to_string(),
            "lun": url.lun,
            "logical_blocks": c.blocks,
            "block_size": c.block_size,
            "physical_block_size": c.physical_block_size(),
            "bytes": c.bytes(),
            "thin_provisioned": c.thin,
        });
        outln!("{v}");
        return Ok(());
    }
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
    Ok(())
}
