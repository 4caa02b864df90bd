//! # ironlun-admin-client: the management API's client
//!
//! **Owns:** reaching the daemon's management API (docs/admin.md): over
//! its Unix socket, or over HTTP with a bearer token; one HTTP/1.1
//! connection kept alive for many requests; the limits on an answer
//! (its size and how long it may take). `ironlun admin`, the
//! control-plane bench and the tests all use it, as one async
//! [`Connection`] or the blocking [`Client`] over it.
//!
//! **Must not know:** what the requests mean (the operations, their JSON
//! and what to print are the caller's), how the daemon serves them, or
//! where the socket's path comes from (a flag, the configuration).

#![forbid(unsafe_code)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper::{header, Method, Request};
use hyper_util::rt::TokioIo;

/// The longest answer body taken from the daemon.
pub const MAX_BODY: usize = 16 << 20;
/// How long one exchange (connect, request, whole answer) may take.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(120);

/// Where the management API is.
#[derive(Clone, Debug)]
pub enum Endpoint {
    /// The daemon's Unix socket (`admin_socket`, `state_dir/admin.sock`).
    Socket(PathBuf),
    /// `admin_listen` over TCP; the token is sent as `Authorization:
    /// Bearer` when given.
    Http {
        addr: SocketAddr,
        token: Option<String>,
    },
}

impl Endpoint {
    /// The endpoint as messages name it.
    pub fn name(&self) -> String {
        match self {
            Endpoint::Socket(p) => p.display().to_string(),
            Endpoint::Http { addr, .. } => format!("http://{addr}"),
        }
    }
}

/// One answer: the HTTP status and the body as text (lossy UTF-8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

/// One kept-alive HTTP/1.1 connection to the API.
pub struct Connection {
    endpoint: Endpoint,
    send: SendRequest<Full<Bytes>>,
    driver: tokio::task::JoinHandle<()>,
}

impl Connection {
    /// Connects and starts the connection's driver task.
    pub async fn open(endpoint: &Endpoint) -> Result<Connection, String> {
        let fail = |e: &dyn std::fmt::Display| format!("{}: {e}", endpoint.name());
        let (send, driver) = match endpoint {
            Endpoint::Socket(p) => {
                let s = tokio::net::UnixStream::connect(p)
                    .await
                    .map_err(|e| fail(&e))?;
                handshake(s).await.map_err(|e| fail(&e))?
            }
            Endpoint::Http { addr, .. } => {
                let s = tokio::net::TcpStream::connect(addr)
                    .await
                    .map_err(|e| fail(&e))?;
                let _ = s.set_nodelay(true);
                handshake(s).await.map_err(|e| fail(&e))?
            }
        };
        Ok(Connection {
            endpoint: endpoint.clone(),
            send,
            driver,
        })
    }

    /// One exchange: `method path` with a JSON body when given.
    pub async fn call(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Result<Answer, String> {
        let name = self.endpoint.name();
        match tokio::time::timeout(ANSWER_WITHIN, self.exchange(method, path, body)).await {
            Ok(r) => r.map_err(|e| format!("{name}: {method} {path}: {e}")),
            Err(_) => Err(format!(
                "{name}: {method} {path}: no answer within {} s",
                ANSWER_WITHIN.as_secs()
            )),
        }
    }

    async fn exchange(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Result<Answer, String> {
        let method = Method::from_bytes(method.as_bytes()).map_err(|e| e.to_string())?;
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "ironlun");
        if let Endpoint::Http { token: Some(t), .. } = &self.endpoint {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        if body.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/json");
        }
        let body = Full::new(Bytes::from(body.unwrap_or("").to_owned()));
        let req = req.body(body).map_err(|e| e.to_string())?;
        self.send.ready().await.map_err(|e| e.to_string())?;
        let resp = self
            .send
            .send_request(req)
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        // A declared length over the limit fails before any of it is read.
        if hyper::body::Body::size_hint(resp.body()).lower() > MAX_BODY as u64 {
            return Err(format!(
                "the answer is over the limit (at most {MAX_BODY} bytes)"
            ));
        }
        let bytes = Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| format!("reading the answer (at most {MAX_BODY} bytes): {e}"))?
            .to_bytes();
        Ok(Answer {
            status,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

async fn handshake<S>(
    s: S,
) -> Result<(SendRequest<Full<Bytes>>, tokio::task::JoinHandle<()>), String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(async move {
        // The connection's end (the daemon closed it, or an error) is
        // seen by the next request, which then fails with its reason.
        let _ = conn.await;
    });
    Ok((send, driver))
}

/// A blocking client: its own current-thread runtime and one connection,
/// opened on first use and opened again after a failed exchange.
pub struct Client {
    endpoint: Endpoint,
    rt: tokio::runtime::Runtime,
    conn: Option<Connection>,
}

impl Client {
    pub fn new(endpoint: Endpoint) -> Result<Client, String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("runtime: {e}"))?;
        Ok(Client {
            endpoint,
            rt,
            conn: None,
        })
    }

    /// A client whose connection is open now (so a wrong path or a
    /// daemon not running fails here).
    pub fn connect(endpoint: Endpoint) -> Result<Client, String> {
        let mut c = Client::new(endpoint)?;
        let conn = c.rt.block_on(Connection::open(&c.endpoint))?;
        c.conn = Some(conn);
        Ok(c)
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// One exchange; see [`Connection::call`].
    pub fn call(&mut self, method: &str, path: &str, body: Option<&str>) -> Result<Answer, String> {
        let Client { endpoint, rt, conn } = self;
        let r = rt.block_on(async {
            let c = match conn {
                Some(c) => c,
                None => conn.insert(Connection::open(endpoint).await?),
            };
            c.call(method, path, body).await
        });
        if r.is_err() {
            *conn = None;
        }
        r
    }

    /// `POST /v1/ops` with `op`: the answer's JSON, or why it failed
    /// (the status and the daemon's message when not 200).
    pub fn op(&mut self, op: &serde_json::Value) -> Result<serde_json::Value, String> {
        let a = self.call("POST", "/v1/ops", Some(&op.to_string()))?;
        if a.status != 200 {
            return Err(format!("{op}: HTTP {}: {}", a.status, a.body.trim()));
        }
        serde_json::from_str(&a.body).map_err(|e| format!("{op}: answer: {e}"))
    }
}

#[cfg(test)]
mod tests;
