//! Reading an ironlun target's statistics endpoint (`ironlun target
//! --stats ADDR:PORT`, format in docs/stats.md): the fields the load
//! generator uses, fetched with one short HTTP/1.1 request (ironlun-admin-client, which
//! also limits the answer's size).

use std::net::SocketAddr;
use std::time::Duration;

use ironlun_admin_client::{Connection, Endpoint};
use serde::Deserialize;

use crate::engine::TargetCpuProbe;

/// Time one sample may take, connect to last byte.
const FETCH_TIMEOUT: Duration = Duration::from_secs(3);

/// What the load generator reads from `GET /stats`.
#[derive(Deserialize, Debug, Clone)]
pub struct TargetStats {
    pub pid: u32,
    pub cpu: CpuTime,
    pub io: Io,
    pub rss_bytes: Option<u64>,
}

#[derive(Deserialize, Debug, Clone, Copy)]
pub struct CpuTime {
    pub total_s: f64,
}

#[derive(Deserialize, Debug, Clone, Copy)]
pub struct Io {
    pub commands: u64,
    pub read_commands: u64,
    pub write_commands: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

async fn fetch_inner(addr: SocketAddr) -> Result<TargetStats, String> {
    let endpoint = Endpoint::Http { addr, token: None };
    let answer = Connection::open(&endpoint)
        .await?
        .call("GET", "/stats", None)
        .await?;
    if answer.status != 200 {
        return Err(format!("HTTP {}", answer.status));
    }
    serde_json::from_str(&answer.body).map_err(|e| format!("not ironlun statistics: {e}"))
}

/// One sample of the target's statistics at `addr`.
pub async fn fetch(addr: SocketAddr) -> Result<TargetStats, String> {
    match tokio::time::timeout(FETCH_TIMEOUT, fetch_inner(addr)).await {
        Ok(r) => r.map_err(|e| format!("statistics at http://{addr}/stats: {e}")),
        Err(_) => Err(format!(
            "statistics at http://{addr}/stats: no answer within {FETCH_TIMEOUT:?}"
        )),
    }
}

/// A CPU probe reading the endpoint; a failed sample gives no target CPU
/// for that workload (and is logged), it does not stop the run.
pub fn probe(addr: SocketAddr) -> TargetCpuProbe {
    std::sync::Arc::new(move || {
        Box::pin(async move {
            match fetch(addr).await {
                Ok(s) => Some(s.cpu.total_s),
                Err(e) => {
                    tracing::warn!("{e}");
                    None
                }
            }
        })
    })
}
