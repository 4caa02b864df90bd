//! `ironlun inquiry`: a LUN's standard INQUIRY data and serial number.

use crate::args::UrlArgs;

pub async fn run(a: UrlArgs) -> Result<(), String> {
    let (url, s) = a.open().await?;
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
