//! # ironlun-target-admin: the target's control plane
//!
//! **Owns:** the management API (its Unix socket and its endpoint over
//! HTTP with a bearer token, the connections and their deadlines, the
//! operations and the views they answer with, where `config save` may
//! write, snapshot operations), starting it and the snapshot schedules
//! beside the data path ([`Control`]), and `ironlun target --check`
//! ([`check`]: a configuration checked without serving).
//!
//! **Must not know:** how a document is checked (ironlun-target-config),
//! how a change is planned and carried out on the running target, the
//! schedules' decisions, sessions, connections or the statistics
//! endpoint (ironlun-target), or what `ironlun admin` prints
//! (the CLI, over ironlun-admin-client).
//!
//! The management API: HTTP/1.1 with JSON bodies on a Unix socket that
//! only its owner may use (mode 0600), and optionally on a loopback TCP
//! address where every request must carry a bearer token
//! (`admin_http`, `admin_token_file`). `ironlun admin` is its client;
//! docs/admin.md lists the operations.
//!
//! - `GET /v1/state`: targets, their LUNs and initiator entries, portals
//! - `GET /v1/sessions`: every session with its counters
//! - `GET /v1/config`: the running configuration as TOML, secrets hidden
//! - `GET /v1/snapshots`: every LUN's snapshots, or why it has none
//! - `POST /v1/ops`: one [`ops::Request`]; answers [`ops::Answer`] or
//!   `{"error": …}` with 400, 403, 404, 408, 409, 413 or 422
//!
//! Operations run one at a time (the running configuration's lock) and off
//! the async threads (opening a backend can block). At most
//! `MAX_CONNECTIONS` (32) clients are served at once; `conn` bounds how
//! long each may hold its place (the head, the body, the connection's
//! lifetime; a 401 closes it). `socket` makes the Unix socket,
//! `views` hides the configuration's secrets, and `save` decides where
//! `config save` may write.
//!
//! The API has a thread of its own ([`AdminThread`]): its runtime, and
//! that runtime's blocking pool where operations run, are not the ones
//! the connections run on, and its threads are scheduled `SCHED_IDLE`
//! (sched(7)): a connection's thread that wakes takes the CPU from them,
//! never the reverse. A change therefore never waits in a connection's
//! queue nor makes a connection wait in its own, and takes CPU from the
//! data path only when the data path leaves some; on a machine whose
//! every CPU is busy it is slow instead (docs/admin.md, "Control-plane
//! speed", has both measured).

// This crate keeps unsafe code (SCHED_IDLE): every block must say why it
// is sound.
#![deny(clippy::undocumented_unsafe_blocks)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tracing::{debug, info, warn};

pub use control::Control;
use ironlun_target::live::Live;
pub(crate) use socket::old_socket;
pub use socket::{bind, Socket};
pub use token::Token;

pub mod check;
mod conn;
mod control;
pub mod ops;
mod save;
pub mod snapshots;
mod socket;
mod token;
pub(crate) mod views;

/// Connections served at once. A connection that does not send its
/// request in time, or that failed authentication, gives its place back
/// (the deadlines in [`conn`]).
const MAX_CONNECTIONS: usize = 32;

/// Where the API listens: its Unix socket (removed when it stops), HTTP
/// on loopback with the token requests must carry, or both.
pub struct Endpoints {
    pub unix: Option<Socket>,
    pub http: Option<(TcpListener, Token)>,
}

impl Endpoints {
    /// Serves them from the API's own thread; `None` when there is
    /// neither.
    pub fn start(self, live: Arc<Live>) -> std::io::Result<Option<AdminThread>> {
        let Endpoints { unix, http } = self;
        if unix.is_none() && http.is_none() {
            return Ok(None);
        }
        let http = match http {
            Some((l, token)) => Some((l.into_std()?, token)),
            None => None,
        };
        if let Some(s) = &unix {
            info!("management API on {}", s.path().display());
        }
        if let Some(a) = http.as_ref().and_then(|(l, _)| l.local_addr().ok()) {
            info!("management API on http://{a} (bearer token)");
        }
        AdminThread::start(unix, http, live).map(Some)
    }
}

/// The API's thread, serving until [`AdminThread::stop`] (or drop).
pub struct AdminThread {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AdminThread {
    fn start(
        unix: Option<Socket>,
        http: Option<(std::net::TcpListener, Token)>,
        live: Arc<Live>,
    ) -> std::io::Result<AdminThread> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("ironlun-admin")
            .on_thread_start(lower_priority)
            .build()?;
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("ironlun-admin".into())
            .spawn(move || {
                lower_priority();
                rt.block_on(async move {
                    tokio::select! {
                        () = serve_all(unix, http, live) => {}
                        _ = stopped => {}
                    }
                });
                // An operation under way finishes (its blocking thread is
                // not interrupted); the wait for it is bounded.
                rt.shutdown_timeout(STOP_WITHIN);
            })?;
        Ok(AdminThread {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops serving (the socket file is removed) and waits for the
    /// thread.
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for AdminThread {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// How long stopping waits for an operation under way.
const STOP_WITHIN: Duration = Duration::from_secs(5);

/// Schedules the calling thread `SCHED_IDLE` (Linux: pid 0 is the
/// thread itself; lowering a thread's priority needs no privilege, and
/// dist/ironlun.service allows the call). Where it is refused the API
/// works at the ordinary priority; that is said once.
fn lower_priority() {
    static SAID: std::sync::Once = std::sync::Once::new();
    // libc: rustix (1.1) has no sched_setscheduler.
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid, initialised sched_param that outlives
    // the call, which only reads it; pid 0 names the calling thread, and
    // SCHED_IDLE requires priority 0. No other memory is involved.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        SAID.call_once(|| {
            info!("management API: SCHED_IDLE refused ({e}): its changes run at the ordinary priority");
        });
    }
}

/// Serves the endpoints there are, on the API's runtime, until the
/// thread is stopped.
async fn serve_all(
    unix: Option<Socket>,
    http: Option<(std::net::TcpListener, Token)>,
    live: Arc<Live>,
) {
    let unix = async {
        let unix = unix.map(Socket::into_parts);
        match unix.map(|(l, u)| UnixListener::from_std(l).map(|l| (l, u))) {
            Some(Ok((l, unlink))) => serve(l, unlink, live.clone()).await,
            Some(Err(e)) => warn!("management API socket: {e}"),
            None => {}
        }
    };
    let http = async {
        match http.map(|(l, t)| TcpListener::from_std(l).map(|l| (l, t))) {
            Some(Ok((l, token))) => serve_http(l, token, live.clone()).await,
            Some(Err(e)) => warn!("management API over HTTP: {e}"),
            None => {}
        }
    };
    tokio::join!(unix, http);
}

/// Serves the API on `listener` until the task is dropped; removes the
/// socket file then (`unlink`).
async fn serve(listener: UnixListener, unlink: socket::Unlink, live: Arc<Live>) {
    let _unlink = unlink;
    let accept = || async { listener.accept().await.map(|(s, _)| s) };
    accept_loop(accept, live, None).await;
}

/// Serves the API over HTTP on a loopback `listener` until the task is
/// dropped; a request without `token` is answered 401.
async fn serve_http(listener: TcpListener, token: Token, live: Arc<Live>) {
    let accept = || async { listener.accept().await.map(|(s, _)| s) };
    accept_loop(accept, live, Some(Arc::new(token))).await;
}

/// Accepts connections and serves each, at most [`MAX_CONNECTIONS`] at
/// once.
async fn accept_loop<S, F, A>(accept: A, live: Arc<Live>, token: Option<Arc<Token>>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    F: std::future::Future<Output = std::io::Result<S>>,
    A: Fn() -> F,
{
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = match accept().await {
            Ok(s) => s,
            Err(e) => {
                warn!("management API: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            debug!("management API: connection refused, {MAX_CONNECTIONS} open");
            continue;
        };
        tokio::spawn(conn::connection(
            stream,
            live.clone(),
            token.clone(),
            permit,
        ));
    }
}

// The data path's log capture, one file for both crates' tests.
#[cfg(test)]
#[path = "../../ironlun-target/src/test_log.rs"]
mod test_log;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
