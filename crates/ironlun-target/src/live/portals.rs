//! The listening portals: bound at start or by a change, each with the
//! task that accepts on it.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tracing::warn;

/// A connection a portal accepted, and its peer.
pub type Accepted = (TcpStream, SocketAddr);

struct Portal {
    /// As the configuration names it (port 0 stays 0).
    configured: SocketAddr,
    /// Where it listens.
    bound: SocketAddr,
    /// Until accepting starts.
    listener: Option<TcpListener>,
    task: Option<AbortHandle>,
}

pub(super) struct Portals {
    list: Vec<Portal>,
    /// Where accepted connections go, once accepting has started.
    tx: Option<mpsc::Sender<Accepted>>,
}

impl Portals {
    pub(super) fn new(bound: Vec<(SocketAddr, TcpListener)>) -> Portals {
        let mut p = Portals {
            list: Vec::new(),
            tx: None,
        };
        for (configured, l) in bound {
            p.add(configured, l);
        }
        p
    }

    /// Every bound address, in order.
    pub(super) fn bound(&self) -> Vec<SocketAddr> {
        self.list.iter().map(|p| p.bound).collect()
    }

    /// Adds a bound portal; it accepts at once if accepting has started.
    pub(super) fn add(&mut self, configured: SocketAddr, l: TcpListener) {
        let bound = l.local_addr().unwrap_or(configured);
        let mut p = Portal {
            configured,
            bound,
            listener: Some(l),
            task: None,
        };
        if let Some(tx) = &self.tx {
            p.task = accept(&mut p, tx.clone());
        }
        self.list.push(p);
    }

    /// Stops and closes the portal configured as `configured`; whether
    /// there was one. Connections it accepted go on.
    pub(super) fn remove(&mut self, configured: SocketAddr) -> bool {
        let before = self.list.len();
        self.list.retain(|p| {
            let keep = p.configured != configured;
            if !keep {
                if let Some(t) = &p.task {
                    t.abort();
                }
            }
            keep
        });
        self.list.len() != before
    }

    pub(super) fn start(&mut self, tx: mpsc::Sender<Accepted>) {
        for p in &mut self.list {
            p.task = accept(p, tx.clone());
        }
        self.tx = Some(tx);
    }

    pub(super) fn stop_all(&mut self) {
        for p in &mut self.list {
            if let Some(t) = p.task.take() {
                t.abort();
            }
        }
        self.tx = None;
    }
}

/// The task that accepts on `p` and hands connections to `tx`.
fn accept(p: &mut Portal, tx: mpsc::Sender<Accepted>) -> Option<AbortHandle> {
    let l = p.listener.take()?;
    let task = tokio::spawn(async move {
        loop {
            match l.accept().await {
                Ok(pair) => {
                    if tx.send(pair).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    });
    Some(task.abort_handle())
}
