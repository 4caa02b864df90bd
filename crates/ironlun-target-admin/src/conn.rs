//! One client connection of the management API, from its first byte to
//! its close: the deadlines that keep a slow or unauthenticated client
//! from holding one of the API's places, the bearer token, and the
//! routes.
//!
//! Bounds, each chosen so that an honest client on a slow path still
//! gets through, and a client that sends nothing, or too slowly, is cut
//! off and its place freed:
//!
//! - the request head within [`HEAD_TIMEOUT`] (also the wait for the
//!   next request on a kept-alive connection);
//! - the request body within [`BODY_TIMEOUT`] of its head, else 408 and
//!   the connection closes;
//! - a connection takes no new request after [`CONNECTION_LIFETIME`],
//!   and the one under way then gets [`FINISH_WITHIN`] to end: no
//!   connection lasts longer than the two together;
//! - a request without the token is answered 401 and the connection
//!   closes (`Connection: close`), so a client without the token cannot
//!   stay connected by sending request after request.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{header, Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::{debug, info};

use super::{ops, views, Token};
use ironlun_target::live::Live;

/// Largest request body (a whole configuration for `apply`).
pub(super) const MAX_BODY: usize = 4 << 20;
/// Time a client gets to send a request head, from the connection's
/// start or the end of the answer before: a head is a few hundred bytes.
pub(super) const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a client gets to send a request body once its head is in: a
/// whole configuration of [`MAX_BODY`] (4 MiB, `apply`) at 70 kB/s, far
/// below what a Unix socket or loopback carries.
pub(super) const BODY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a connection takes new requests: a client that keeps one
/// open (benches/control-plane keeps one per 10 s window) connects again
/// after it.
pub(super) const CONNECTION_LIFETIME: Duration = Duration::from_secs(300);
/// What the request under way when [`CONNECTION_LIFETIME`] ends still
/// gets: the rest of its body ([`BODY_TIMEOUT`]) and its operation
/// (opening a backend; `ironlun admin` waits 120 s for an answer).
pub(super) const FINISH_WITHIN: Duration = Duration::from_secs(180);

/// Serves one client connection until it ends or its time is up; its
/// place (`permit`) is given back then.
pub(super) async fn connection<S>(
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
    let conn = http.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let ended = tokio::select! {
        r = conn.as_mut() => r,
        () = tokio::time::sleep(CONNECTION_LIFETIME) => {
            // No new request; the one under way, if any, may finish.
            conn.as_mut().graceful_shutdown();
            match tokio::time::timeout(FINISH_WITHIN, conn).await {
                Ok(r) => r,
                Err(_) => {
                    debug!("management API connection: cut {FINISH_WITHIN:?} after its lifetime");
                    Ok(())
                }
            }
        }
    };
    if let Err(e) = ended {
        debug!("management API connection: {e}");
    }
    drop(permit);
}

/// 401 with the scheme to use (RFC 6750 §3); the connection closes.
fn unauthorized() -> Response<Full<Bytes>> {
    let mut r = closing(error(
        StatusCode::UNAUTHORIZED,
        "missing or wrong bearer token (admin_token_file)",
    ));
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer realm=\"ironlun\""),
    );
    r
}

/// `r` with `Connection: close` (RFC 9112 §9.6): hyper closes the
/// connection once it is sent.
fn closing(mut r: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
    r.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
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
        (Method::GET, "/v1/snapshots") => {
            // Asks every store: off the async thread.
            match tokio::task::spawn_blocking(move || super::snapshots::list(&live)).await {
                Ok(v) => json(StatusCode::OK, &v),
                Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
            }
        }
        (Method::POST, "/v1/ops") => op(req, live).await,
        (_, "/v1/state" | "/v1/sessions" | "/v1/config" | "/v1/ops" | "/v1/snapshots") => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "wrong method; see docs/admin.md",
        ),
        _ => error(StatusCode::NOT_FOUND, "no such resource; see docs/admin.md"),
    }
}

/// The request's body, within [`BODY_TIMEOUT`] and [`MAX_BODY`]; else
/// the answer that closes the connection.
async fn body(req: Request<Incoming>) -> Result<Bytes, Response<Full<Bytes>>> {
    let read = Limited::new(req.into_body(), MAX_BODY).collect();
    match tokio::time::timeout(BODY_TIMEOUT, read).await {
        Ok(Ok(b)) => Ok(b.to_bytes()),
        Ok(Err(e)) => Err(closing(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("request body: {e}"),
        ))),
        Err(_) => Err(closing(error(
            StatusCode::REQUEST_TIMEOUT,
            &format!(
                "request body not received within {} s",
                BODY_TIMEOUT.as_secs()
            ),
        ))),
    }
}

async fn op(req: Request<Incoming>, live: Arc<Live>) -> Response<Full<Bytes>> {
    let body = match body(req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let request: ops::Request = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return error(StatusCode::BAD_REQUEST, &format!("request: {e}")),
    };
    // Its name only: its values may be secrets (ops::Op::kind).
    let what = request.op.kind();
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
