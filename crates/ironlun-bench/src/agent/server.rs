//! The agent: serves controllers that prove they know the token, one
//! run at a time, and runs nothing but the bench spec it is sent.
//!
//! Limits: [`MAX_CONNECTIONS`] connections at once (more are refused at
//! once), a controller must authenticate within [`HANDSHAKE`] in a frame
//! of at most [`MAX_AUTH_FRAME`] bytes, later frames are at most
//! [`MAX_TO_AGENT`] bytes, a connection idle for [`IDLE`] between
//! workloads is closed, and a start more than [`MAX_START_WAIT`] ahead is
//! refused. A controller that disconnects during a run ends it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedMutexGuard, Semaphore};
use tokio::time::timeout;

use super::clock::unix_ns;
use super::frame;
use super::proto::{BenchSpec, ToAgent, ToController, MAX_AUTH_FRAME, MAX_TO_AGENT, VERSION};
use super::token::Token;
use crate::{luns, LunTarget, RunOptions, Slice};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 8;
/// Time a controller has to authenticate.
pub const HANDSHAKE: Duration = Duration::from_secs(10);
/// Longest wait for a controller's next message between workloads.
pub const IDLE: Duration = Duration::from_secs(300);
/// Furthest ahead a start may be.
pub const MAX_START_WAIT: Duration = Duration::from_secs(60);

/// Opens the LUNs of a spec (the command line's options: initiator
/// name, CHAP, digests), driving the given part of each seek range
/// (each session its own slice of that part).
pub type Opener = Arc<
    dyn Fn(BenchSpec, Slice) -> Pin<Box<dyn Future<Output = Result<Vec<LunTarget>, String>> + Send>>
        + Send
        + Sync,
>;

/// An agent's state: its token, how it opens LUNs, its limits.
pub struct Agent {
    token: Token,
    opener: Opener,
    host: String,
    connections: Arc<Semaphore>,
    /// Held by the connection whose LUNs are open: one run at a time.
    running: Arc<tokio::sync::Mutex<()>>,
}

impl Agent {
    pub fn new(token: Token, opener: Opener) -> Arc<Agent> {
        Arc::new(Agent {
            token,
            opener,
            host: hostname(),
            connections: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            running: Arc::new(tokio::sync::Mutex::new(())),
        })
    }
}

/// Serves controllers on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, agent: Arc<Agent>) {
    loop {
        let (sock, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("bench agent: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = sock.set_nodelay(true);
        let Ok(permit) = agent.connections.clone().try_acquire_owned() else {
            tracing::warn!(%peer, "bench agent: refused a connection: {MAX_CONNECTIONS} already open");
            refuse(sock, "busy: too many connections").await;
            continue;
        };
        let a = agent.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match a.connection(sock).await {
                Ok(()) => tracing::info!(%peer, "bench agent: controller done"),
                Err(e) => tracing::warn!(%peer, "bench agent: {e}"),
            }
        });
    }
}

/// Tells a connection it is refused (bounded: its send buffer is empty).
async fn refuse(sock: TcpStream, reason: &str) {
    let (_, mut wr) = sock.into_split();
    let msg = ToController::Refused {
        reason: reason.into(),
    };
    let _ = timeout(Duration::from_millis(200), frame::write(&mut wr, &msg)).await;
}

/// One controller's connection, its LUNs open.
struct Session {
    spec: Option<BenchSpec>,
    luns: Vec<LunTarget>,
    _run: Option<OwnedMutexGuard<()>>,
}

impl Agent {
    async fn connection(&self, sock: TcpStream) -> Result<(), String> {
        let (mut rd, mut wr) = sock.into_split();
        self.authenticate(&mut rd, &mut wr).await?;
        let mut s = Session {
            spec: None,
            luns: Vec::new(),
            _run: None,
        };
        let r = self.session(&mut rd, &mut wr, &mut s).await;
        luns::close(&s.luns).await;
        if let Err(e) = &r {
            let msg = ToController::Failed { error: e.clone() };
            let _ = timeout(Duration::from_secs(1), frame::write(&mut wr, &msg)).await;
        }
        r
    }

    /// Challenge and answer; refuses (and closes) on a wrong answer.
    async fn authenticate(
        &self,
        rd: &mut OwnedReadHalf,
        wr: &mut OwnedWriteHalf,
    ) -> Result<(), String> {
        let challenge = super::controller::challenge_now()?;
        let hello = ToController::Challenge {
            version: VERSION,
            challenge: challenge.clone(),
        };
        frame::write(wr, &hello).await?;
        let answer = timeout(HANDSHAKE, frame::read::<_, ToAgent>(rd, MAX_AUTH_FRAME))
            .await
            .map_err(|_| "refused a controller: no answer to the challenge".to_owned())?;
        let reason = match answer {
            Ok(Some(ToAgent::Auth {
                version,
                proof,
                challenge: theirs,
            })) => {
                if version != VERSION {
                    format!("protocol version {version}, this agent speaks {VERSION}")
                } else if self.token.admits(&challenge, &proof) {
                    let welcome = ToController::Welcome {
                        host: self.host.clone(),
                        proof: self.token.prove(&theirs),
                    };
                    return frame::write(wr, &welcome).await;
                } else {
                    "wrong token".to_owned()
                }
            }
            Ok(Some(_)) => "a message before authenticating".to_owned(),
            Ok(None) => "closed before authenticating".to_owned(),
            Err(e) => e,
        };
        let msg = ToController::Refused {
            reason: reason.clone(),
        };
        let _ = frame::write(wr, &msg).await;
        Err(format!("refused a controller: {reason}"))
    }

    /// Serves an authenticated controller until it says goodbye.
    async fn session(
        &self,
        rd: &mut OwnedReadHalf,
        wr: &mut OwnedWriteHalf,
        s: &mut Session,
    ) -> Result<(), String> {
        loop {
            let msg = timeout(IDLE, frame::read::<_, ToAgent>(rd, MAX_TO_AGENT))
                .await
                .map_err(|_| format!("the controller was idle for {IDLE:?}"))??;
            let reply = match msg {
                None | Some(ToAgent::Bye) => return Ok(()),
                Some(ToAgent::Ping { seq }) => ToController::Pong {
                    seq,
                    unix_ns: unix_ns(),
                },
                Some(ToAgent::Open { spec, part, parts }) => {
                    self.open(spec, super::proto::part(part, parts)?, s).await?
                }
                Some(ToAgent::Start {
                    workload,
                    at_unix_ns,
                }) => start(rd, s, workload, at_unix_ns).await?,
                Some(ToAgent::Auth { .. }) => return Err("authenticated twice".into()),
            };
            frame::write(wr, &reply).await?;
        }
    }

    async fn open(
        &self,
        spec: BenchSpec,
        part: Slice,
        s: &mut Session,
    ) -> Result<ToController, String> {
        if s.spec.is_some() {
            return Err("the LUNs are open already".into());
        }
        spec.validate()?;
        let guard = self
            .running
            .clone()
            .try_lock_owned()
            .map_err(|_| "busy: running another controller's spec".to_owned())?;
        s._run = Some(guard);
        s.luns = (self.opener)(spec.clone(), part).await?;
        s.spec = Some(spec);
        Ok(ToController::Opened {
            luns: luns::info(&s.luns),
        })
    }
}

/// Runs workload `i` of the open spec from the agreed instant; a
/// controller that leaves meanwhile ends the run.
async fn start(
    rd: &mut OwnedReadHalf,
    s: &Session,
    i: u32,
    at_unix_ns: i64,
) -> Result<ToController, String> {
    let spec = s.spec.as_ref().ok_or("start before open")?;
    let w = spec
        .workloads
        .get(i as usize)
        .ok_or_else(|| format!("no workload {i} in the spec"))?;
    let ahead = at_unix_ns.saturating_sub(unix_ns());
    if ahead > MAX_START_WAIT.as_nanos() as i64 {
        return Err(format!("a start {} s ahead", ahead / 1_000_000_000));
    }
    if ahead > 0 {
        tokio::time::sleep(Duration::from_nanos(ahead as u64)).await;
    }
    let start_late_ms = (unix_ns().saturating_sub(at_unix_ns)).max(0) as f64 / 1e6;
    tracing::info!(
        "bench agent: starting workload {i} ({}), {start_late_ms:.3} ms late",
        w.name
    );
    let opts = RunOptions {
        verify: spec.verify,
        ..RunOptions::default()
    };
    // The controller sends nothing during a run: whatever it sends (or
    // its leaving) ends the run.
    tokio::select! {
        r = crate::run(w, &s.luns, &opts) => Ok(ToController::Done {
            result: Box::new(r?),
            start_late_ms,
        }),
        _ = frame::read::<_, ToAgent>(rd, MAX_TO_AGENT) => {
            Err("the controller left during the run".into())
        }
    }
}

/// This host's name, as the kernel has it.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}
