//! The connection bounds of the management API, on in-memory streams
//! with tokio's clock paused: the deadlines are the real ones, and time
//! moves only when every task waits, to the next timer, so the moments
//! asserted below are exact and no test waits in real time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::conn::{BODY_TIMEOUT, CONNECTION_LIFETIME, FINISH_WITHIN, HEAD_TIMEOUT};
use super::*;
use crate::test_support::test_registry;
use ironlun_target_config::Config;

const ONE: &str =
    "[[target]]\nname = \"iqn.2026-11.test:t\"\n[[target.lun]]\nspec = \"ram:1MiB\"\n";
const TOKEN: &str = "admin-test-token-0123456789";
const SECOND: Duration = Duration::from_secs(1);

/// Runs a test, failing it if the API leaves it waiting for a day of
/// virtual time: without a deadline nothing would ever happen, and with
/// the clock paused time would run on for ever.
async fn bounded(test: impl std::future::Future<Output = ()>) {
    tokio::time::timeout(Duration::from_secs(86_400), test)
        .await
        .expect("the API let a connection wait a day: a deadline is missing");
}

/// The bounds are the ones chosen, for the reasons their comments give.
#[test]
fn the_bounds_let_a_slow_honest_client_through_and_no_other() {
    // A whole 4 MiB configuration at 70 kB/s.
    assert!(conn::MAX_BODY as u64 / BODY_TIMEOUT.as_secs() <= 70_000);
    // A connection serves at least a slow request and its operation
    // (`ironlun admin` waits 120 s)...
    assert!(CONNECTION_LIFETIME >= HEAD_TIMEOUT + BODY_TIMEOUT + Duration::from_secs(120));
    assert!(FINISH_WITHIN >= BODY_TIMEOUT + Duration::from_secs(120));
    // ...and a client that sends nothing, or not in time, lets go soon.
    assert!(HEAD_TIMEOUT <= Duration::from_secs(30));
    assert!(BODY_TIMEOUT <= Duration::from_secs(120));
    assert!(CONNECTION_LIFETIME + FINISH_WITHIN <= Duration::from_secs(600));
}

/// The API's accept loop, fed in-memory connections.
struct Api {
    tx: mpsc::Sender<DuplexStream>,
    task: tokio::task::JoinHandle<()>,
}

impl Api {
    fn start() -> Api {
        let cfg = Config::from_toml(ONE, None).unwrap();
        let live = Arc::new(Live::fixed(test_registry(&cfg), cfg, Vec::new()));
        let (tx, rx) = mpsc::channel(128);
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let accept = move || {
            let rx = rx.clone();
            async move {
                let next = rx.lock().await.recv().await;
                next.ok_or_else(|| io::Error::other("the test ended"))
            }
        };
        let token = Arc::new(Token::parse(TOKEN.as_bytes()));
        let task = tokio::spawn(accept_loop(accept, live, Some(token)));
        Api { tx, task }
    }

    /// A new connection whose buffer each way holds `capacity` bytes.
    async fn connect_with(&self, capacity: usize) -> DuplexStream {
        let (client, server) = tokio::io::duplex(capacity);
        self.tx.send(server).await.unwrap();
        client
    }

    async fn connect(&self) -> DuplexStream {
        self.connect_with(1 << 20).await
    }

    /// An authenticated `GET /v1/state` on a new connection: its status,
    /// or `None` when the connection was closed without an answer (no
    /// place for it).
    async fn try_state(&self) -> Option<u16> {
        let mut c = self.connect().await;
        c.write_all(get(true).as_bytes()).await.ok()?;
        read_answer(&mut c).await.map(|(status, _)| status)
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn get(auth: bool) -> String {
    let auth = if auth {
        format!("Authorization: Bearer {TOKEN}\r\n")
    } else {
        String::new()
    };
    format!("GET /v1/state HTTP/1.1\r\nHost: ironlun\r\n{auth}\r\n")
}

/// An authenticated `POST /v1/ops` head announcing `len` bytes of body.
fn post_head(len: usize) -> String {
    format!(
        "POST /v1/ops HTTP/1.1\r\nHost: ironlun\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
    )
}

/// One answer: its status and its head, lower-cased; `None` at the end
/// of the stream.
async fn read_answer(c: &mut DuplexStream) -> Option<(u16, String)> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.push(c.read_u8().await.ok()?);
    }
    let head = String::from_utf8(head).unwrap().to_ascii_lowercase();
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    let mut body = vec![0; len];
    c.read_exact(&mut body).await.ok()?;
    Some((status, head))
}

/// Whether the API closed the connection: the next read finds its end.
async fn closed(c: &mut DuplexStream) -> bool {
    let mut b = [0u8; 1];
    matches!(c.read(&mut b).await, Ok(0))
}

#[tokio::test(start_paused = true)]
async fn an_authenticated_connection_is_kept_alive() {
    bounded(async {
        let api = Api::start();
        let mut c = api.connect().await;
        for _ in 0..3 {
            c.write_all(get(true).as_bytes()).await.unwrap();
            let (status, head) = read_answer(&mut c).await.unwrap();
            assert_eq!(status, 200);
            assert!(!head.contains("connection: close"), "{head}");
        }
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_401_closes_the_connection() {
    bounded(async {
        let api = Api::start();
        let mut c = api.connect().await;
        let t0 = Instant::now();
        c.write_all(get(false).as_bytes()).await.unwrap();
        let (status, head) = read_answer(&mut c).await.unwrap();
        assert_eq!(status, 401);
        assert!(head.contains("connection: close"), "{head}");
        assert!(closed(&mut c).await);
        // Closed after the answer, not after waiting for another head.
        assert!(t0.elapsed() < HEAD_TIMEOUT, "{:?}", t0.elapsed());
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_body_that_never_comes_is_cut_off() {
    bounded(async {
        let api = Api::start();
        let mut c = api.connect().await;
        let t0 = Instant::now();
        c.write_all(post_head(100).as_bytes()).await.unwrap();
        let (status, head) = read_answer(&mut c).await.unwrap();
        assert_eq!(status, 408);
        assert!(head.contains("connection: close"), "{head}");
        assert!(closed(&mut c).await);
        assert_eq!(t0.elapsed().as_secs(), BODY_TIMEOUT.as_secs());
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_trickled_body_is_cut_off() {
    bounded(async {
        let api = Api::start();
        let c = api.connect().await;
        let (mut rd, mut wr) = tokio::io::split(c);
        let t0 = Instant::now();
        wr.write_all(post_head(1 << 20).as_bytes()).await.unwrap();
        // A byte a second, for ever: always something new, never the body.
        let trickle = tokio::spawn(async move {
            while wr.write_all(b" ").await.is_ok() {
                tokio::time::sleep(SECOND).await;
            }
        });
        let mut answer = Vec::new();
        rd.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8(answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert_eq!(t0.elapsed().as_secs(), BODY_TIMEOUT.as_secs());
        trickle.abort();
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn idle_connections_give_their_places_back_after_the_head_deadline() {
    bounded(async {
        let api = Api::start();
        let t0 = Instant::now();
        let mut idle = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            idle.push(api.connect().await);
        }
        assert_eq!(api.try_state().await, None, "every place is taken");
        let served = loop {
            if let Some(status) = api.try_state().await {
                break status;
            }
            assert!(t0.elapsed() <= HEAD_TIMEOUT + SECOND, "still locked out");
            tokio::time::sleep(SECOND).await;
        };
        assert_eq!(served, 200);
        assert!(t0.elapsed() >= HEAD_TIMEOUT, "{:?}", t0.elapsed());
        for c in &mut idle {
            assert!(closed(c).await);
        }
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn unauthenticated_requests_cannot_hold_the_places() {
    bounded(async {
        let api = Api::start();
        let t0 = Instant::now();
        let mut rejected = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            let mut c = api.connect().await;
            c.write_all(get(false).as_bytes()).await.unwrap();
            rejected.push(c);
        }
        for c in &mut rejected {
            assert_eq!(read_answer(c).await.unwrap().0, 401);
            assert!(closed(c).await);
        }
        assert_eq!(api.try_state().await, Some(200));
        // At once: not after the head deadline of connections kept
        // open.
        assert!(t0.elapsed() < HEAD_TIMEOUT, "{:?}", t0.elapsed());
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_kept_alive_connection_ends_after_its_lifetime() {
    bounded(async {
        let api = Api::start();
        let mut c = api.connect().await;
        let t0 = Instant::now();
        // Within the head deadline, and no divisor of the lifetime: no
        // request falls on the moment it ends.
        let every = Duration::from_secs(7);
        assert!(every < HEAD_TIMEOUT && CONNECTION_LIFETIME.as_secs() % 7 != 0);
        let mut answered = 0u32;
        loop {
            if c.write_all(get(true).as_bytes()).await.is_err() {
                break;
            }
            match read_answer(&mut c).await {
                Some((200, _)) => answered += 1,
                Some(other) => panic!("{other:?}"),
                None => break,
            }
            tokio::time::sleep(every).await;
        }
        let lived = t0.elapsed();
        assert!(lived >= CONNECTION_LIFETIME, "{lived:?}");
        assert!(lived <= CONNECTION_LIFETIME + every, "{lived:?}");
        let asked_within = CONNECTION_LIFETIME.as_secs().div_ceil(every.as_secs());
        assert_eq!(u64::from(answered), asked_within);
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn no_connection_outlives_its_lifetime_and_the_last_answer() {
    bounded(async {
        let api = Api::start();
        let t0 = Instant::now();
        // Clients that ask and never read: the answers do not fit in their
        // 16-byte buffers, so every place is held by an answer being
        // written.
        let mut stuck = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            let mut c = api.connect_with(16).await;
            c.write_all(get(true).as_bytes()).await.unwrap();
            stuck.push(c);
        }
        let bound = CONNECTION_LIFETIME + FINISH_WITHIN;
        tokio::time::sleep_until(t0 + bound - SECOND).await;
        assert_eq!(api.try_state().await, None, "still held before the bound");
        tokio::time::sleep_until(t0 + bound + SECOND).await;
        assert_eq!(api.try_state().await, Some(200), "free after it");
    })
    .await;
}

/// An operation the API refuses is logged by its name: a CHAP secret or
/// a configuration in it never reaches the log.
#[tokio::test]
async fn a_refused_operation_logs_no_secret() {
    crate::test_log::capture();
    let secret = "chap-secret-in-the-log-0123456789";
    let ops = [
        format!(r#"{{"op":"set-target","name":"iqn.2026-11.test:absent","chap":"user:{secret}"}}"#),
        format!(
            r#"{{"op":"set-initiator","target":"iqn.2026-11.test:absent","name":"iqn.2026-11.test:init","chap":"user:{secret}"}}"#
        ),
        format!(
            r#"{{"op":"apply","toml":"[[target]]\nname = \"iqn.2026-11.test:t\"\nchap = \"user:{secret}\"\n"}}"#
        ),
    ];
    let api = Api::start();
    for (body, kind) in ops.iter().zip(["set-target", "set-initiator", "apply"]) {
        let mut c = api.connect().await;
        c.write_all(post_head(body.len()).as_bytes()).await.unwrap();
        c.write_all(body.as_bytes()).await.unwrap();
        let (status, _) = read_answer(&mut c).await.unwrap();
        assert!((400..500).contains(&status), "{kind}: {status}");
        let text = crate::test_log::text();
        assert!(!text.contains(secret), "{text}");
        assert!(text.contains(&format!("refused {kind}")), "{text}");
    }
}
