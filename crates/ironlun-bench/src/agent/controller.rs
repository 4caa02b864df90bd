//! The controller: sends one bench spec to every agent, starts each
//! workload on all of them at one instant of its own clock (each agent is
//! told that instant on its clock, from the ping exchange's offset), and
//! merges their results ([`super::merge()`]). Any agent that fails or
//! leaves fails the run, and the error names it.

use std::time::Duration;

use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::timeout;

use super::clock::{estimate, unix_ns, Offset, Sample};
use super::frame;
use super::merge::merge;
use super::proto::{BenchSpec, ToAgent, ToController, MAX_AGENTS, MAX_TO_CONTROLLER, VERSION};
use super::token::Token;
use crate::result::{AgentShare, LunInfo, WorkloadResult};
use crate::spec::Workload;

/// Time to connect, authenticate and answer a ping or an open.
const STEP: Duration = Duration::from_secs(30);
/// Pings per clock measurement.
const PINGS: u32 = 8;
/// The shortest lead of the start instant over the last agent told.
const MIN_MARGIN: Duration = Duration::from_millis(300);
/// Time past a workload's ramp, run and drain a result may take.
const RESULT_SLACK: Duration = Duration::from_secs(60);

/// One agent's connection.
pub struct Conn {
    pub addr: String,
    pub host: String,
    rd: OwnedReadHalf,
    wr: OwnedWriteHalf,
    pub offset: Offset,
}

/// What the agents ran: the merged results (each with its per-agent
/// breakdown) and the LUNs as the first agent opened them.
pub struct AgentRun {
    pub results: Vec<WorkloadResult>,
    pub luns: Vec<LunInfo>,
}

/// Runs `spec` on every agent of `addrs` and merges the results.
pub async fn run(addrs: &[String], token: &Token, spec: &BenchSpec) -> Result<AgentRun, String> {
    spec.validate()?;
    let mut conns = Vec::new();
    let mut luns = Vec::new();
    let parts = if spec.verify { addrs.len() as u32 } else { 1 };
    if addrs.is_empty() || addrs.len() > MAX_AGENTS as usize {
        return Err(format!("give 1 to {MAX_AGENTS} agents"));
    }
    for (i, a) in addrs.iter().enumerate() {
        let part = if spec.verify { i as u32 } else { 0 };
        let mut c = Conn::connect(a, token).await.map_err(|e| named(a, e))?;
        let l = c.open(spec, part, parts).await.map_err(|e| named(a, e))?;
        if luns.is_empty() {
            luns = l;
        }
        conns.push(c);
    }
    let mut results = Vec::new();
    for (i, w) in spec.workloads.iter().enumerate() {
        let (back, r) = workload(conns, i as u32, w).await?;
        conns = back;
        results.push(r);
    }
    for c in &mut conns {
        let _ = frame::write(&mut c.wr, &ToAgent::Bye).await;
    }
    Ok(AgentRun { results, luns })
}

fn named(addr: &str, e: String) -> String {
    format!("agent {addr}: {e}")
}

/// Runs workload `i` on every connection from one instant; returns the
/// connections (in order) and the merged result.
async fn workload(
    mut conns: Vec<Conn>,
    i: u32,
    w: &Workload,
) -> Result<(Vec<Conn>, WorkloadResult), String> {
    let mut rtt = 0;
    for c in &mut conns {
        c.offset = c.clock().await.map_err(|e| named(&c.addr, e))?;
        rtt = rtt.max(c.offset.rtt_ns);
    }
    let margin = (MIN_MARGIN.as_nanos() as i64).max(4 * rtt * conns.len() as i64);
    let at = unix_ns() + margin;
    for c in &mut conns {
        let msg = ToAgent::Start {
            workload: i,
            at_unix_ns: at + c.offset.offset_ns,
        };
        frame::write(&mut c.wr, &msg)
            .await
            .map_err(|e| named(&c.addr, e))?;
    }
    let within = w.ramp() + w.run_time() + Duration::from_nanos(margin as u64) + RESULT_SLACK;
    let parts = collect(conns, within).await?;
    let (mut conns, mut results, mut shares) = (Vec::new(), Vec::new(), Vec::new());
    for (c, r, late) in parts {
        shares.push(share(&c, &r, late));
        results.push(r);
        conns.push(c);
    }
    let mut merged = merge(results)?;
    merged.agents = shares;
    Ok((conns, merged))
}

/// Every agent's result, in the agents' order; the first failure (an
/// error, a disconnection, no result in time) ends the others' runs.
async fn collect(
    conns: Vec<Conn>,
    within: Duration,
) -> Result<Vec<(Conn, WorkloadResult, f64)>, String> {
    let n = conns.len();
    let mut set = JoinSet::new();
    for (k, mut c) in conns.into_iter().enumerate() {
        set.spawn(async move {
            let r = match timeout(within, c.result()).await {
                Ok(r) => r,
                Err(_) => Err(format!("no result within {within:?}")),
            };
            (k, r.map_err(|e| named(&c.addr, e)), c)
        });
    }
    let mut got: Vec<Option<(Conn, WorkloadResult, f64)>> = (0..n).map(|_| None).collect();
    while let Some(j) = set.join_next().await {
        let (k, r, c) = j.map_err(|e| format!("an agent's task failed: {e}"))?;
        let (r, late) = r?;
        if let Some(slot) = got.get_mut(k) {
            *slot = Some((c, r, late));
        }
    }
    got.into_iter()
        .map(|x| x.ok_or_else(|| "an agent's result went missing".to_owned()))
        .collect()
}

fn share(c: &Conn, r: &WorkloadResult, start_late_ms: f64) -> AgentShare {
    AgentShare {
        agent: c.addr.clone(),
        host: c.host.clone(),
        ios: r.ios,
        read_ios: r.read_ios,
        write_ios: r.write_ios,
        iops: r.iops,
        mb_per_s: r.mb_per_s,
        elapsed_s: r.elapsed_s,
        latency_us: r.latency_us.clone(),
        cpu: r.cpu.clone(),
        errors: r.errors,
        clock_offset_ms: c.offset.offset_ns as f64 / 1e6,
        rtt_ms: c.offset.rtt_ns as f64 / 1e6,
        start_late_ms,
        hdr: r.hdr.clone(),
    }
}

impl Conn {
    /// Connects and answers the agent's challenge.
    pub async fn connect(addr: &str, token: &Token) -> Result<Conn, String> {
        let sock = timeout(STEP, TcpStream::connect(addr))
            .await
            .map_err(|_| "connecting timed out".to_owned())?
            .map_err(|e| format!("connecting: {e}"))?;
        let _ = sock.set_nodelay(true);
        let (rd, wr) = sock.into_split();
        let mut c = Conn {
            addr: addr.to_owned(),
            host: String::new(),
            rd,
            wr,
            offset: Offset::default(),
        };
        let challenge = match c.recv().await? {
            ToController::Challenge { version, challenge } if version == VERSION => challenge,
            ToController::Challenge { version, .. } => {
                return Err(format!(
                    "protocol version {version}, this controller speaks {VERSION}"
                ))
            }
            other => return Err(unexpected(&other)),
        };
        let ours = challenge_now()?;
        c.send(&ToAgent::Auth {
            version: VERSION,
            proof: token.prove(&challenge),
            challenge: ours.clone(),
        })
        .await?;
        match c.recv().await? {
            ToController::Welcome { host, proof } if token.admits(&ours, &proof) => c.host = host,
            ToController::Welcome { .. } => {
                return Err("it does not know the token (a wrong answer to our challenge)".into())
            }
            other => return Err(unexpected(&other)),
        }
        Ok(c)
    }

    async fn send(&mut self, m: &ToAgent) -> Result<(), String> {
        frame::write(&mut self.wr, m).await
    }

    /// The next message, within [`STEP`].
    async fn recv(&mut self) -> Result<ToController, String> {
        timeout(STEP, self.recv_any())
            .await
            .map_err(|_| format!("no answer within {STEP:?}"))?
    }

    async fn recv_any(&mut self) -> Result<ToController, String> {
        frame::read(&mut self.rd, MAX_TO_CONTROLLER)
            .await?
            .ok_or_else(|| "the agent closed the connection".to_owned())
    }

    /// Its clock against ours ([`super::clock`]).
    pub async fn clock(&mut self) -> Result<Offset, String> {
        let mut samples = Vec::new();
        for seq in 0..PINGS {
            let sent = unix_ns();
            self.send(&ToAgent::Ping { seq }).await?;
            match self.recv().await? {
                ToController::Pong {
                    seq: s,
                    unix_ns: agent,
                } if s == seq => {
                    samples.push(Sample {
                        sent,
                        agent,
                        received: unix_ns(),
                    });
                }
                other => return Err(unexpected(&other)),
            }
        }
        estimate(&samples).ok_or_else(|| "the clock went backwards during the pings".into())
    }

    /// Has it open the spec's LUNs, driving part `part` of `parts`.
    pub async fn open(
        &mut self,
        spec: &BenchSpec,
        part: u32,
        parts: u32,
    ) -> Result<Vec<LunInfo>, String> {
        self.send(&ToAgent::Open {
            spec: spec.clone(),
            part,
            parts,
        })
        .await?;
        match self.recv().await? {
            ToController::Opened { luns } => Ok(luns),
            other => Err(unexpected(&other)),
        }
    }

    /// A started workload's result and how late it started (ms).
    async fn result(&mut self) -> Result<(WorkloadResult, f64), String> {
        match self.recv_any().await? {
            ToController::Done {
                result,
                start_late_ms,
            } => Ok((*result, start_late_ms)),
            other => Err(unexpected(&other)),
        }
    }
}

/// A fresh random challenge (32 bytes from the OS, hex).
pub(super) fn challenge_now() -> Result<String, String> {
    let mut nonce = [0u8; 32];
    getrandom::fill(&mut nonce).map_err(|e| format!("drawing a challenge: {e}"))?;
    Ok(super::token::hex(&nonce))
}

/// An agent's refusal or failure as an error; anything else out of turn.
fn unexpected(m: &ToController) -> String {
    match m {
        ToController::Refused { reason } => format!("refused: {reason}"),
        ToController::Failed { error } => error.clone(),
        other => format!("an unexpected message: {other:?}"),
    }
}
