//! `ironlun inquiry`: a LUN's standard INQUIRY data and serial number.

use crate::args::UrlArgs;
use crate::runtime::Failure;

#[derive(clap::Args)]
pub struct InquiryArgs {
    #[command(flatten)]
    pub lun: UrlArgs,
    /// Print one JSON object instead of the table:
    /// {"url", "lun", "peripheral_device_type", "version", "vendor",
    /// "product", "revision", "unit_serial_number" (null when the LUN has
    /// none)} (docs/cli.md).
    #[arg(long)]
    pub json: bool,
}

pub async fn run(a: InquiryArgs) -> Result<(), Failure> {
    let (url, s) = a.lun.open().await?;
    let inq = s.inquiry(url.lun).await.map_err(|e| e.to_string())?;
    let serial = s.unit_serial_number(url.lun).await.ok();
    let _ = s.logout().await;
    if a.json {
        let v = serde_json::json!({
            "url": url.to_string(),
            "lun": url.lun,
            "peripheral_device_type": inq.peripheral_type,
            "version": inq.version,
            "vendor": inq.vendor,
            "product": inq.product,
            "revision": inq.revision,
            "unit_serial_number": serial,
        });
        outln!("{v}");
        return Ok(());
    }
    outln!("Peripheral device type: 0x{:02x}", inq.peripheral_type);
    outln!("Version:                0x{:02x}", inq.version);
    outln!("Vendor:                 {}", inq.vendor);
    outln!("Product:                {}", inq.product);
    outln!("Revision:               {}", inq.revision);
    if let Some(serial) = serial {
        outln!("Unit serial number:     {serial}");
    }
    Ok(())
}
