//! The management API: HTTP/1.1 with JSON bodies on a Unix socket that
//! only its owner may use (mode 0600), and optionally on a loopback TCP
//! address where every request must carry a bearer token
//! (`admin_http`, `admin_token_file`). `ironlun admin` is its client;
//! docs/admin.md lists the operations.
//!
//! - `GET /v1/state`: targets, their LUNs and initiator entries, portals
//! - `GET /v1/sessions`: every session with its counters
//! - `GET /v1/config`: the running configuration as TOML, secrets hidden
//! - `POST /v1/ops`: one [`ops::Request`]; answers [`ops::Answer`] or
//!   `{"error": …}` with 404, 409 or 422
//!
//! Operations run one at a time (the running configuration's lock) and off
//! the async threads (opening a backend can block).
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

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{header, Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tracing::{debug, info, warn};

use crate::live::Live;
pub use socket::{bind, Socket};
pub use token::Token;

pub mod ops;
mod socket;
mod token;
mod views;

/// Largest request body (a whole configuration for `apply`).
const MAX_BODY: usize = 4 << 20;
/// Connections served at once.
const MAX_CONNECTIONS: usize = 32;
/// Time a client gets to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

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
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param for the call's duration.
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
        tokio::spawn(connection(stream, live.clone(), token.clone(), permit));
    }
}

/// One client connection: requests answered in turn.
async fn connection<S>(
    stream: S,
    live: Arc<Live>,
    token: Option<Arc<Token>>,
    permit: tokio::sync::OwnedSemaphorePermit,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let live = live.clone();
        let token = token.clone();
        async move {
            if let Some(t) = token {
                let given = req.headers().get(header::AUTHORIZATION);
                if !t.admits(given.map(|v| v.as_bytes())) {
                    return Ok::<_, Infallible>(unauthorized());
                }
            }
            Ok(answer(req, live).await)
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT);
    if let Err(e) = http.serve_connection(TokioIo::new(stream), service).await {
        debug!("management API connection: {e}");
    }
    drop(permit);
}

/// 401 with the scheme to use (RFC 6750 §3).
fn unauthorized() -> Response<Full<Bytes>> {
    let mut r = error(
        StatusCode::UNAUTHORIZED,
        "missing or wrong bearer token (admin_token_file)",
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer realm=\"ironlun\""),
    );
    r
}

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

fn json(status: StatusCode, v: &impl serde::Serialize) -> Response<Full<Bytes>> {
    match serde_json::to_vec_pretty(v) {
        Ok(mut body) => {
            body.push(b'\n');
            reply(status, "application/json", body)
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    json(status, &serde_json::json!({ "error": message }))
}

async fn answer(req: Request<Incoming>, live: Arc<Live>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    match (req.method().clone(), path.as_str()) {
        (Method::GET, "/v1/state") => json(StatusCode::OK, &views::state(&live)),
        (Method::GET, "/v1/sessions") => json(StatusCode::OK, &views::sessions(&live.registry)),
        (Method::GET, "/v1/config") => reply(
            StatusCode::OK,
            "application/toml",
            views::redacted(&live.document()),
        ),
        (Method::POST, "/v1/ops") => op(req, live).await,
        (_, "/v1/state" | "/v1/sessions" | "/v1/config" | "/v1/ops") => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "wrong method; see docs/admin.md",
        ),
        _ => error(StatusCode::NOT_FOUND, "no such resource; see docs/admin.md"),
    }
}

async fn op(req: Request<Incoming>, live: Arc<Live>) -> Response<Full<Bytes>> {
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return error(StatusCode::PAYLOAD_TOO_LARGE, &format!("request body: {e}")),
    };
    let request: ops::Request = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("request: {e}")),
    };
    let what = format!("{:?}", request.op);
    let done = tokio::task::spawn_blocking(move || ops::run(&live, request)).await;
    match done {
        Ok(Ok(a)) => {
            if !a.dry_run && !a.changes.is_empty() {
                info!("management API: {}", a.changes.join("; "));
            }
            json(StatusCode::OK, &a)
        }
        Ok(Err(e)) => {
            info!("management API: refused {what}: {}", e.message);
            let status =
                StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            error(status, &e.message)
        }
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("operation failed: {e}"),
        ),
    }
}
