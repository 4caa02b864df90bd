//! `ironlun tcpbench`: the TCP baseline (iperf-like) over loopback, an
//! emulated link, or to a remote `ironlun tcpbench --server`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use ironlun_netem::tcpbench::{self, measure, Direction, LocalServer, TcpResult};
use ironlun_units::{parse_duration, parse_size};

use crate::args::{relay_to, LinkArgs};

#[derive(clap::Args)]
pub struct TcpbenchArgs {
    /// Run only a server on ADDR:PORT (until SIGINT/SIGTERM).
    #[arg(long, value_name = "ADDR:PORT", conflicts_with = "connect")]
    pub server: Option<String>,
    /// Measure against a remote `ironlun tcpbench --server` (default: a
    /// server in this process on loopback).
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: Option<String>,
    /// Parallel streams.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub streams: usize,
    /// Time per measurement.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub time: String,
    /// up (client → server), down, or both.
    #[arg(long, default_value = "both", value_name = "DIR")]
    pub direction: String,
    /// Socket send/receive buffers on both ends (the TCP window), and the
    /// window carried over an emulated link.
    #[arg(long, value_name = "SIZE")]
    pub window: Option<String>,
    /// Repetitions per direction; the median is reported.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub repeat: u32,
    /// Write results as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub link: LinkArgs,
}

fn window(a: &TcpbenchArgs) -> Result<Option<u32>, String> {
    a.window
        .as_deref()
        .map(|w| {
            let n = parse_size(w).map_err(|e| format!("--window: {e}"))?;
            u32::try_from(n)
                .ok()
                .filter(|n| (4096..=(256 << 20)).contains(n))
                .ok_or_else(|| format!("--window {w}: must be 4KiB..256MiB"))
        })
        .transpose()
}

fn directions(s: &str) -> Result<Vec<Direction>, String> {
    match s {
        "up" => Ok(vec![Direction::Up]),
        "down" => Ok(vec![Direction::Down]),
        "both" => Ok(vec![Direction::Up, Direction::Down]),
        _ => Err(format!("--direction {s}: up, down or both")),
    }
}

pub fn print_table(results: &[TcpResult]) {
    outln!(
        "{:<5} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "dir",
        "streams",
        "window",
        "MB/s",
        "MiB/s",
        "Mbit/s",
        "model MB/s"
    );
    for r in results {
        outln!(
            "{:<5} {:>7} {:>10} {:>10.1} {:>10.1} {:>10.1} {:>10}",
            r.direction,
            r.streams,
            r.window.map_or("default".into(), |w| w.to_string()),
            r.mb_per_s,
            r.mib_per_s,
            r.mbit_per_s,
            r.model_mb_per_s.map_or("-".into(), |m| format!("{m:.1}"))
        );
    }
    if let Some(l) = results.first().and_then(|r| r.link.as_ref()) {
        outln!("link: {l}");
    }
}

pub async fn run(a: TcpbenchArgs) -> Result<(), String> {
    let window = window(&a)?;
    if let Some(addr) = &a.server {
        let addr: SocketAddr = addr
            .parse()
            .map_err(|_| format!("--server '{addr}' is not ADDR:PORT"))?;
        let signal = crate::runtime::shutdown_signal();
        let l = tcpbench::listen(addr, window).map_err(|e| format!("--server {addr}: {e}"))?;
        outln!(
            "tcpbench server on {}",
            l.local_addr().map_err(|e| e.to_string())?
        );
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let server = std::thread::spawn(move || tcpbench::serve(l, s2));
        signal.await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        return server
            .join()
            .map_err(|_| "server thread panicked".to_owned())?
            .map_err(|e| e.to_string());
    }
    let dirs = directions(&a.direction)?;
    let time = parse_duration(&a.time)?;
    if time.is_zero() || time > tcpbench::MAX_DURATION {
        return Err("--time must be between 1 ms and 10 min".into());
    }
    let spec = a.link.spec(None, a.window.as_deref())?;
    // The server: remote, or here on loopback.
    let (server_addr, local_server) = match &a.connect {
        Some(c) => (
            std::net::ToSocketAddrs::to_socket_addrs(c)
                .map_err(|e| format!("--connect {c}: {e}"))?
                .next()
                .ok_or_else(|| format!("--connect {c}: no address"))?,
            None,
        ),
        None => {
            let server = LocalServer::start(window).map_err(|e| e.to_string())?;
            (server.addr(), Some(server))
        }
    };
    let relay = match &spec {
        Some(s) => Some(relay_to(&server_addr.to_string(), s)?),
        None => None,
    };
    let target = relay
        .as_ref()
        .map_or(server_addr, ironlun_netem::Relay::addr);
    let (streams, repeat) = (a.streams, a.repeat);
    let spec2 = spec.clone();
    let results = tokio::task::spawn_blocking(move || {
        measure(target, &dirs, streams, time, window, repeat, spec2.as_ref())
    })
    .await
    .map_err(|e| e.to_string())??;
    drop(relay);
    drop(local_server);
    print_table(&results);
    if let Some(p) = &a.json {
        let json = tcpbench::json(&results)?;
        std::fs::write(p, json).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}
