//! The messages between a controller and an agent, and the bench spec
//! an agent accepts: nothing else is ever run.
//!
//! A connection goes: the agent sends a [`ToController::Challenge`]; the
//! controller answers [`ToAgent::Auth`] (the HMAC of the challenge with
//! the shared token) with a challenge of its own; the agent says
//! [`ToController::Welcome`] with its answer (so each side knows the
//! other has the token) or [`ToController::Refused`] and closes. Then the controller measures the
//! clocks ([`ToAgent::Ping`]), has the agent open the LUNs
//! ([`ToAgent::Open`]), and for each workload sends the instant to start
//! it on the agent's clock ([`ToAgent::Start`]) and waits for its result
//! ([`ToController::Done`]).

use serde::{Deserialize, Serialize};

use crate::result::{LunInfo, WorkloadResult};
use crate::spec::{Workload, MAX_WORKERS};
use crate::Slice;

/// The protocol's version: an agent refuses a controller of another.
pub const VERSION: u32 = 1;
/// Largest frame an agent reads before the controller is authenticated.
pub const MAX_AUTH_FRAME: usize = 4 << 10;
/// Largest frame an agent reads from an authenticated controller (a
/// bench spec).
pub const MAX_TO_AGENT: usize = 1 << 20;
/// Largest frame a controller reads (a result: histograms and a
/// per-second series).
pub const MAX_TO_CONTROLLER: usize = 64 << 20;
/// Most URLs and workloads a spec may hold.
pub const MAX_URLS: usize = 64;
pub const MAX_WORKLOADS: usize = 256;

/// What every agent runs: the LUNs, the workloads (as the command line
/// builds them), the sessions per URL and whether to verify.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchSpec {
    pub urls: Vec<String>,
    pub workloads: Vec<Workload>,
    pub sessions: u32,
    pub verify: bool,
}

impl BenchSpec {
    pub fn validate(&self) -> Result<(), String> {
        if self.urls.is_empty() || self.urls.len() > MAX_URLS {
            return Err(format!("a spec needs 1 to {MAX_URLS} URLs"));
        }
        if self.workloads.is_empty() || self.workloads.len() > MAX_WORKLOADS {
            return Err(format!("a spec needs 1 to {MAX_WORKLOADS} workloads"));
        }
        if self.sessions == 0 || self.sessions > MAX_WORKERS {
            return Err(format!("sessions outside 1..={MAX_WORKERS}"));
        }
        self.workloads.iter().try_for_each(Workload::validate)
    }
}

/// The part of the seek range an agent drives ([`ToAgent::Open`]).
pub fn part(part: u32, parts: u32) -> Result<Slice, String> {
    if parts == 0 || parts > MAX_AGENTS || part >= parts {
        return Err(format!("part {part} of {parts}: outside 0..{MAX_AGENTS}"));
    }
    Ok(Slice {
        index: part,
        count: parts,
    })
}

/// Most agents one controller drives.
pub const MAX_AGENTS: u32 = 256;

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToAgent {
    /// The answer to the agent's challenge, and the controller's own
    /// challenge for the agent.
    Auth {
        version: u32,
        proof: String,
        challenge: String,
    },
    Ping {
        seq: u32,
    },
    /// Open the spec's LUNs; with verification, the agent drives part
    /// `part` of `parts` of the seek range (its own, so that no agent
    /// reads another's writes), else `parts` is 1.
    Open {
        spec: BenchSpec,
        part: u32,
        parts: u32,
    },
    /// Start workload `workload` of the spec at this instant of the
    /// agent's clock (nanoseconds since the Unix epoch).
    Start {
        workload: u32,
        at_unix_ns: i64,
    },
    Bye,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToController {
    Challenge {
        version: u32,
        challenge: String,
    },
    /// Admitted; `proof` answers the controller's challenge.
    Welcome {
        host: String,
        proof: String,
    },
    Refused {
        reason: String,
    },
    Pong {
        seq: u32,
        unix_ns: i64,
    },
    Opened {
        luns: Vec<LunInfo>,
    },
    Done {
        result: Box<WorkloadResult>,
        start_late_ms: f64,
    },
    Failed {
        error: String,
    },
}
