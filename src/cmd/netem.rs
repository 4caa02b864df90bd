//! `ironlun netem`: a standalone link-emulating relay.

use std::time::Duration;

use ironlun_units::parse_duration;

use crate::args::LinkArgs;

#[derive(clap::Args)]
pub struct NetemArgs {
    /// Where initiators connect, ADDR:PORT.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: String,
    /// The portal to relay to, HOST:PORT.
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: String,
    /// Link rate per direction (same as --link-rate).
    #[arg(long, value_name = "RATE")]
    pub rate: Option<String>,
    #[command(flatten)]
    pub link: LinkArgs,
    /// Stop after this long (default: until SIGINT/SIGTERM).
    #[arg(long, value_name = "DURATION")]
    pub time: Option<String>,
}

pub async fn run(a: NetemArgs) -> Result<(), String> {
    if a.rate.is_some() && a.link.link_rate.is_some() {
        return Err("--rate and --link-rate: give one".into());
    }
    let spec = a.link.spec(a.rate.as_deref(), None)?.unwrap_or_default();
    let listen = a
        .listen
        .parse()
        .map_err(|_| format!("--listen '{}' is not ADDR:PORT", a.listen))?;
    let upstream = std::net::ToSocketAddrs::to_socket_addrs(&a.connect)
        .map_err(|e| format!("--connect {}: {e}", a.connect))?
        .next()
        .ok_or_else(|| format!("--connect {}: no address", a.connect))?;
    let stop = crate::runtime::shutdown_signal();
    let relay = ironlun_netem::Relay::start(listen, upstream, spec.clone())
        .map_err(|e| format!("--listen {}: {e}", a.listen))?;
    outln!(
        "relaying {} -> {upstream}: {}",
        relay.addr(),
        spec.describe()
    );
    let limit = a.time.as_deref().map(parse_duration).transpose()?;
    match limit {
        Some(t) => {
            let _ = tokio::time::timeout(t, stop).await;
        }
        None => stop.await,
    }
    let s = relay.stats();
    outln!(
        "{} connection(s); {} bytes up, {} bytes down",
        s.connections,
        s.bytes_up,
        s.bytes_down
    );
    // Let the relay's threads see the stop.
    drop(relay);
    tokio::time::sleep(Duration::from_millis(10)).await;
    Ok(())
}
