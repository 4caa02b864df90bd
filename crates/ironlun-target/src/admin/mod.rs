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

use std::convert::Infallible;
use std::path::{Path, PathBuf};
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
pub use token::Token;

pub mod ops;
mod token;
mod views;

/// Largest request body (a whole configuration for `apply`).
const MAX_BODY: usize = 4 << 20;
/// Connections served at once.
const MAX_CONNECTIONS: usize = 32;
/// Time a client gets to send its request head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds the API socket at `path` (a stale socket file is replaced),
/// owner-only.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let l = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}

/// Serves the API on `listener` until the task is dropped; removes the
/// socket file then.
pub async fn serve(listener: UnixListener, path: PathBuf, live: Arc<Live>) {
    struct Unlink(PathBuf);
    impl Drop for Unlink {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _unlink = Unlink(path);
    let accept = || async { listener.accept().await.map(|(s, _)| s) };
    accept_loop(accept, live, None).await;
}

/// Serves the API over HTTP on a loopback `listener` until the task is
/// dropped; a request without `token` is answered 401.
pub async fn serve_http(listener: TcpListener, token: Token, live: Arc<Live>) {
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
