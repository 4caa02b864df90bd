//! `ironlun readcap`: a LUN's capacity and block sizes (READ CAPACITY).

use crate::args::UrlArgs;

pub async fn run(a: UrlArgs) -> Result<(), String> {
    let (url, s) = a.open().await?;
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
