//! Where connections run: on the runtime that accepted them, or spread
//! over per-core runtimes ("shards").
//!
//! # Why per-core runtimes
//!
//! A connection is one task that reads, executes and writes (see
//! `conn.rs`); it never needs another core's help, so a work-stealing
//! scheduler buys it nothing and costs cross-core wake-ups. Measured on
//! the 2-core development VM with `ironlun bench` on the same machine,
//! 4 KiB random reads at QD 64 from a tmpfs file LUN, three alternating
//! repetitions (docs/performance.md):
//!
//! | runtime | 1 session | 8 sessions |
//! |---|---:|---:|
//! | tokio multi-thread, 2 workers | 138K IOPS | 153K IOPS |
//! | tokio multi-thread, 1 worker | 150K IOPS | 211K IOPS |
//! | tokio current-thread | 130K IOPS | 194K IOPS |
//!
//! One runtime per core keeps a connection, its timers and its socket
//! on one thread, like the single-worker rows, and still uses every core
//! once there are more connections than cores. Each shard is a tokio
//! current-thread runtime on its own thread with its own blocking pool;
//! new connections go to the shard with the fewest. io_uring was not
//! measured: the kernel's copy and TCP work dominates at these rates, not
//! the readiness system calls.
//!
//! [`Placement::Local`] (the accepting runtime) stays for embedded
//! targets that share a process with a client (the lab), and as the
//! baseline that the measurement above can be repeated against
//! (`IRONLUN_RUNTIME=multi-thread` or `current-thread` for the daemon).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::runtime::Runtime;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tracing::warn;

use crate::conn;
use crate::registry::{ConnectionGuard, Registry};

/// A connection to serve.
pub(crate) struct Job {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    pub registry: Arc<Registry>,
    pub shutdown: watch::Receiver<bool>,
    pub stat_sn: u32,
    pub guard: ConnectionGuard,
}

/// A connection moved to a shard: the socket leaves the accepting
/// runtime's reactor and joins the shard's.
struct ShardJob {
    stream: std::net::TcpStream,
    peer: SocketAddr,
    registry: Arc<Registry>,
    shutdown: watch::Receiver<bool>,
    stat_sn: u32,
    /// Tells the dispatcher the connection ended, whichever way it ends.
    _done: Done,
}

struct Done {
    shard: usize,
    tx: mpsc::UnboundedSender<usize>,
    _guard: ConnectionGuard,
}

impl Drop for Done {
    fn drop(&mut self) {
        let _ = self.tx.send(self.shard);
    }
}

/// How connections are run.
pub(crate) enum Placement {
    /// Tasks on the accepting runtime.
    Local(JoinSet<()>),
    Shards(Shards),
}

pub(crate) struct Shards {
    senders: Vec<mpsc::UnboundedSender<ShardJob>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// Open connections per shard.
    live: Vec<usize>,
    done_tx: mpsc::UnboundedSender<usize>,
    done_rx: mpsc::UnboundedReceiver<usize>,
}

impl Placement {
    /// `n` shards (0: run connections locally).
    pub fn new(n: usize) -> Result<Placement, String> {
        if n == 0 {
            return Ok(Placement::Local(JoinSet::new()));
        }
        let (done_tx, done_rx) = mpsc::unbounded_channel();
        let mut senders = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n);
        for i in 0..n {
            // Built here, so that a failure is the caller's error and not
            // a shard that silently drops its connections.
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("shard runtime {i}: {e}"))?;
            let (tx, rx) = mpsc::unbounded_channel();
            let thread = std::thread::Builder::new()
                .name(format!("ironlun-shard-{i}"))
                .spawn(move || run_shard(rt, rx))
                .map_err(|e| format!("shard thread {i}: {e}"))?;
            senders.push(tx);
            threads.push(thread);
        }
        Ok(Placement::Shards(Shards {
            senders,
            threads,
            live: vec![0; n],
            done_tx,
            done_rx,
        }))
    }

    /// Open connections.
    pub fn len(&self) -> usize {
        match self {
            Placement::Local(set) => set.len(),
            Placement::Shards(s) => s.live.iter().sum(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn spawn(&mut self, job: Job) {
        match self {
            Placement::Local(set) => {
                set.spawn(async move {
                    conn::serve(
                        job.stream,
                        job.peer,
                        job.registry,
                        job.shutdown,
                        job.stat_sn,
                    )
                    .await;
                    drop(job.guard);
                });
            }
            Placement::Shards(s) => s.spawn(job),
        }
    }

    /// Waits until a connection ends (never, with none open).
    pub async fn next_done(&mut self) {
        match self {
            Placement::Local(set) => {
                if set.join_next().await.is_none() {
                    std::future::pending::<()>().await;
                }
            }
            Placement::Shards(s) => match s.done_rx.recv().await {
                Some(i) => s.finished(i),
                None => std::future::pending::<()>().await,
            },
        }
    }

    /// Forgets connections that ended, without waiting.
    pub fn reap(&mut self) {
        match self {
            Placement::Local(set) => while set.try_join_next().is_some() {},
            Placement::Shards(s) => {
                while let Ok(i) = s.done_rx.try_recv() {
                    s.finished(i);
                }
            }
        }
    }

    /// Waits up to `wait` for every connection to end; then ends the rest
    /// (their tasks are dropped) and, for shards, stops the threads.
    /// Returns how many had to be dropped.
    pub async fn drain(mut self, wait: Duration) -> usize {
        let drained = tokio::time::timeout(wait, async {
            while !self.is_empty() {
                self.next_done().await;
            }
        })
        .await;
        let left = if drained.is_err() { self.len() } else { 0 };
        match self {
            Placement::Local(mut set) => set.abort_all(),
            Placement::Shards(s) => {
                // Closing the queues ends each shard's loop; dropping its
                // runtime drops the connections still on it.
                drop(s.senders);
                let threads = s.threads;
                let _ = tokio::task::spawn_blocking(move || {
                    for t in threads {
                        let _ = t.join();
                    }
                })
                .await;
            }
        }
        left
    }
}

impl Shards {
    fn spawn(&mut self, job: Job) {
        // The shard with the fewest connections.
        let Some((i, _)) = self.live.iter().enumerate().min_by_key(|(_, n)| **n) else {
            return;
        };
        let stream = match job.stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                warn!(peer = %job.peer, "cannot hand the connection to a shard: {e}");
                return;
            }
        };
        let shard_job = ShardJob {
            stream,
            peer: job.peer,
            registry: job.registry,
            shutdown: job.shutdown,
            stat_sn: job.stat_sn,
            _done: Done {
                shard: i,
                tx: self.done_tx.clone(),
                _guard: job.guard,
            },
        };
        if let Some(live) = self.live.get_mut(i) {
            *live += 1;
        }
        if let Some(tx) = self.senders.get(i) {
            // A send fails only once the shard has stopped; the job (and
            // with it the connection) is dropped, and Done reports it.
            let _ = tx.send(shard_job);
        }
    }

    fn finished(&mut self, shard: usize) {
        if let Some(live) = self.live.get_mut(shard) {
            *live = live.saturating_sub(1);
        }
    }
}

fn run_shard(rt: Runtime, mut jobs: mpsc::UnboundedReceiver<ShardJob>) {
    rt.block_on(async move {
        while let Some(job) = jobs.recv().await {
            tokio::spawn(async move {
                match TcpStream::from_std(job.stream) {
                    Ok(stream) => {
                        conn::serve(stream, job.peer, job.registry, job.shutdown, job.stat_sn).await
                    }
                    Err(e) => warn!(peer = %job.peer, "cannot serve the connection: {e}"),
                }
                drop(job._done);
            });
        }
    });
    // Commands still on this shard's blocking pool get a moment to finish.
    rt.shutdown_timeout(Duration::from_secs(1));
}
