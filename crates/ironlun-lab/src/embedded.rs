//! A target in this process, on its own runtime threads, for experiments
//! that need no setup: it offers everything an experiment may ask for
//! (unsolicited and immediate data, bursts up to 16 MiB, deep queues), so
//! the initiator's offer decides each cell's negotiation.

use std::net::SocketAddr;

use ironlun_target::{Config, Server};

/// Name prefix of the embedded target's runtime threads (their CPU can be
/// told apart from the load generator's).
pub const TARGET_THREADS: &str = "ironlun-tgt";

/// How long stopping waits for closes still running on the target's
/// blocking pool.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The target name every embedded target uses.
pub const TARGET_NAME: &str = "iqn.2026-11.org.ironlun:lab";

/// A running embedded target; stopped (initiators asked to log out, LUNs
/// flushed) on drop.
pub struct EmbeddedTarget {
    pub portal: SocketAddr,
    pub name: String,
    pub luns: Vec<String>,
    rt: Option<tokio::runtime::Runtime>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<Result<(), String>>>,
}

/// MaxRecvDataSegmentLength an embedded target declares unless told.
pub const MAX_RECV_DSL: u32 = 262_144;

/// TOML for a loopback target with these LUN specs (`ram:1GiB`,
/// `null:10GiB`, `file:/path,size=...`), declaring `max_recv_dsl`.
fn config_text(luns: &[String], max_recv_dsl: u32) -> String {
    let mut t = format!(
        "listen = [\"127.0.0.1:0\"]\n\
         [limits]\nshutdown_grace_secs = 1\nnop_interval_secs = 0\n\
         [defaults]\nqueue_depth = 256\ninitial_r2t = false\nimmediate_data = true\n\
         max_recv_data_segment_length = {max_recv_dsl}\nmax_burst_length = 16776192\n\
         first_burst_length = 16776192\nmax_outstanding_r2t = 8\n",
    );
    t.push_str(&format!("[[target]]\nname = \"{TARGET_NAME}\"\n"));
    for l in luns {
        t.push_str(&format!(
            "[[target.lun]]\nspec = \"{}\"\n",
            l.replace('"', "")
        ));
    }
    t
}

impl EmbeddedTarget {
    pub fn start(luns: &[String]) -> Result<EmbeddedTarget, String> {
        EmbeddedTarget::start_with(luns, None)
    }

    /// [`EmbeddedTarget::start`] declaring `max_recv_dsl` (`None`:
    /// [`MAX_RECV_DSL`]) as its MaxRecvDataSegmentLength (RFC 7143
    /// §13.12).
    pub fn start_with(
        luns: &[String],
        max_recv_dsl: Option<u32>,
    ) -> Result<EmbeddedTarget, String> {
        let text = config_text(luns, max_recv_dsl.unwrap_or(MAX_RECV_DSL));
        let cfg = Config::from_toml(&text, None).map_err(|e| e.to_string())?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(TARGET_THREADS)
            .enable_all()
            .build()
            .map_err(|e| format!("target runtime: {e}"))?;
        let server = rt.block_on(Server::bind(&cfg)).map_err(|e| e.to_string())?;
        let portal = server
            .local_addrs()
            .first()
            .copied()
            .ok_or("the embedded target did not listen")?;
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let served = rt.spawn(server.run(async {
            let _ = stop_rx.await;
        }));
        Ok(EmbeddedTarget {
            portal,
            name: TARGET_NAME.to_owned(),
            luns: luns.to_vec(),
            rt: Some(rt),
            stop: Some(stop_tx),
            served: Some(served),
        })
    }

    /// The target's CPU seconds so far (its runtime threads).
    pub fn cpu_seconds() -> Option<f64> {
        ironlun_bench::cpu::threads_cpu_seconds(TARGET_THREADS)
    }
}

impl Drop for EmbeddedTarget {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let (Some(rt), Some(h)) = (self.rt.as_ref(), self.served.take()) {
            let _ = rt.block_on(h);
        }
        if let Some(rt) = self.rt.take() {
            // Closes that run on the blocking pool (an RBD image's, which
            // releases its watch and lock) get their time.
            rt.shutdown_timeout(CLOSE_WAIT);
        }
    }
}
