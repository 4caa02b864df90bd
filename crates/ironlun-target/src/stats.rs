//! The statistics endpoint: the daemon's CPU time, memory, sessions and
//! per-LUN I/O counters as JSON over HTTP (`GET /stats`), so a load
//! generator can report the target's CPU for exactly its own interval.
//! The format is documented in docs/stats.md; counters only grow, a
//! reader subtracts two samples. The same listener serves `GET /metrics`
//! for Prometheus (crate::metrics, docs/admin.md).
//!
//! Bounded like everything else facing a network: a few connections at
//! a time, small request heads, a read timeout and a lifetime per
//! connection.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{header, Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use ironlun_scsi::IoSnapshot;
use serde::Serialize;
use tokio::net::TcpListener;
use tracing::{debug, warn};

use crate::process::{self, CpuTime};
use crate::registry::Registry;

/// Statistics connections served at once; more are closed on accept.
const MAX_CONNECTIONS: usize = 16;
/// Largest request head accepted (hyper's minimum buffer).
const MAX_REQUEST_HEAD: usize = 8192;
/// Time a client gets to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a statistics connection stays open, keep-alive included.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(30);

/// The whole answer of `GET /stats`.
#[derive(Serialize, Debug)]
pub struct Stats {
    pub ironlun: &'static str,
    pub pid: u32,
    pub uptime_s: f64,
    pub cpu: CpuTime,
    /// Resident set size now, if /proc says.
    pub rss_bytes: Option<u64>,
    pub sessions: Sessions,
    pub connections: usize,
    /// Latency mode (`tcp.busy_poll`): its budget and its spins.
    pub busy_poll: BusyPoll,
    /// Sum over every LUN.
    pub io: Io,
    pub luns: Vec<LunStats>,
}

/// Latency mode's budget and what its spins did (crate::busy_poll).
#[derive(Serialize, Debug)]
pub struct BusyPoll {
    /// The budget per spin in microseconds; 0: off.
    pub budget_us: f64,
    /// Spins that found a PDU or a completion.
    pub found_work: u64,
    /// Spins that used their whole budget, then slept.
    pub timed_out: u64,
    /// Time spent spinning (part of `cpu`).
    pub spin_s: f64,
}

#[derive(Serialize, Debug)]
pub struct Sessions {
    pub normal: usize,
    pub discovery: usize,
}

/// One LUN's counters (see [`IoSnapshot`]).
#[derive(Serialize, Debug)]
pub struct LunStats {
    pub target: String,
    pub lun: u16,
    pub backend: &'static str,
    pub size_bytes: u64,
    pub io: Io,
}

#[derive(Serialize, Debug, Default)]
pub struct Io {
    pub commands: u64,
    pub read_commands: u64,
    pub write_commands: u64,
    pub other_commands: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub failed_commands: u64,
}

impl From<IoSnapshot> for Io {
    fn from(s: IoSnapshot) -> Io {
        Io {
            commands: s.commands(),
            read_commands: s.read_commands,
            write_commands: s.write_commands,
            other_commands: s.other_commands,
            read_bytes: s.read_bytes,
            write_bytes: s.write_bytes,
            failed_commands: s.failed_commands,
        }
    }
}

/// Samples everything now.
pub fn collect(registry: &Registry, started: Instant) -> Stats {
    let mut total = IoSnapshot::default();
    let mut luns = Vec::new();
    for t in registry.targets().iter() {
        for (n, lu) in t.luns.iter() {
            let io = lu.io_stats();
            total.add(&io);
            luns.push(LunStats {
                target: t.cfg.name.clone(),
                lun: *n,
                backend: lu.backend().kind(),
                size_bytes: lu.num_blocks() * u64::from(lu.block_size()),
                io: io.into(),
            });
        }
    }
    let (normal, discovery) = registry.session_counts();
    Stats {
        ironlun: env!("CARGO_PKG_VERSION"),
        pid: std::process::id(),
        uptime_s: started.elapsed().as_secs_f64(),
        cpu: process::cpu_time(),
        rss_bytes: process::memory().resident,
        sessions: Sessions { normal, discovery },
        connections: registry.open_connections(),
        busy_poll: BusyPoll {
            budget_us: registry.tcp.busy_poll.as_nanos() as f64 / 1000.0,
            found_work: registry.metrics.busy_poll.found.get(),
            timed_out: registry.metrics.busy_poll.timed_out.get(),
            spin_s: registry.metrics.busy_poll.seconds.get(),
        },
        io: total.into(),
        luns,
    }
}

fn reply(status: StatusCode, content_type: &str, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

fn answer(
    req: &Request<Incoming>,
    registry: &Arc<Registry>,
    started: Instant,
) -> Response<Full<Bytes>> {
    let text = |s: StatusCode, msg: &'static str| reply(s, "text/plain", Bytes::from(msg));
    let metrics = req.uri().path() == "/metrics";
    if !metrics && !matches!(req.uri().path(), "/stats" | "/") {
        return text(
            StatusCode::NOT_FOUND,
            "not found; try GET /stats or GET /metrics\n",
        );
    }
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
    }
    if metrics {
        return match crate::metrics::render(registry) {
            Ok(body) => reply(
                StatusCode::OK,
                crate::metrics::CONTENT_TYPE,
                Bytes::from(body),
            ),
            Err(e) => {
                warn!("metrics not encodable: {e}");
                text(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n")
            }
        };
    }
    match serde_json::to_vec(&collect(registry, started)) {
        Ok(json) => reply(StatusCode::OK, "application/json", Bytes::from(json)),
        Err(e) => {
            warn!("statistics not serialisable: {e}");
            text(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n")
        }
    }
}

/// Serves `GET /stats` on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, registry: Arc<Registry>, started: Instant) {
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(pair) => pair,
            Err(e) => {
                warn!("statistics accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if active.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
            debug!(%peer, "statistics connection refused: {MAX_CONNECTIONS} open");
            continue;
        }
        active.fetch_add(1, Ordering::Relaxed);
        let active = active.clone();
        let registry = registry.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let r = answer(&req, &registry, started);
                async move { Ok::<_, Infallible>(r) }
            });
            let mut http = hyper::server::conn::http1::Builder::new();
            http.max_buf_size(MAX_REQUEST_HEAD)
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT);
            let conn = http.serve_connection(TokioIo::new(stream), service);
            if let Ok(Err(e)) = tokio::time::timeout(CONNECTION_LIFETIME, conn).await {
                debug!(%peer, "statistics connection: {e}");
            }
            active.fetch_sub(1, Ordering::Relaxed);
        });
    }
}
