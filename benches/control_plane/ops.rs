//! The series of operations a window with operations makes, each timed
//! from its request's first byte to its answer's last, and spread over
//! the window.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::daemon::target_name;
use ironlun_admin_client::Client as AdminClient;

pub const KINDS: [&str; 4] = ["add-target", "add-lun", "remove-lun", "remove-target"];

/// Times in milliseconds, by kind of operation.
pub type OpTimes = BTreeMap<&'static str, Vec<f64>>;

/// Where the operations go: `cycles` rounds of add-target (a new target,
/// not one with sessions), add-lun and remove-lun (LUN 1 of a target with
/// a session, round-robin over `with_sessions` of them), remove-target
/// (the new one).
pub struct Series {
    pub cycles: usize,
    pub with_sessions: usize,
    /// Names of the new targets carry this, so that repetitions differ.
    pub tag: String,
    /// Instead of each operation, a request the API answers at once (a
    /// 404): what the exchange alone does to the bench.
    pub control: bool,
}

/// The kind a control request's times are kept under.
pub const CONTROL: &str = "404";

impl Series {
    fn ops(&self, k: usize) -> [serde_json::Value; 4] {
        let extra = format!("iqn.2026-11.io.ironlun.cp:extra-{}-{k}", self.tag);
        // Target 0 is the bench's; targets 1..=with_sessions have sessions.
        let busy = target_name(1 + k % self.with_sessions.max(1));
        [
            json!({"op": "add-target", "name": extra, "luns": ["null:1GiB"]}),
            json!({"op": "add-lun", "target": busy, "spec": "null:1GiB", "lun": 1}),
            json!({"op": "remove-lun", "target": busy, "lun": 1}),
            json!({"op": "remove-target", "name": extra}),
        ]
    }

    /// Runs the series, one operation every `spacing` (or at once after
    /// the one before, when that took longer). Every operation must
    /// succeed and change something.
    pub fn run(&self, api: &mut AdminClient, spacing: Duration) -> Result<OpTimes, String> {
        let mut times = OpTimes::new();
        let mut next = Instant::now();
        for k in 0..self.cycles {
            for (kind, op) in KINDS.iter().zip(self.ops(k)) {
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                }
                let t0 = Instant::now();
                if self.control {
                    let status = api.call("GET", "/v1/control", None)?.status;
                    if status != 404 {
                        return Err(format!("GET /v1/control: HTTP {status}, not 404"));
                    }
                    times.entry(CONTROL).or_default().push(ms_since(t0));
                } else {
                    let answer = api.op(&op)?;
                    let changed = answer
                        .get("changes")
                        .and_then(serde_json::Value::as_array)
                        .is_some_and(|c| !c.is_empty());
                    if !changed {
                        return Err(format!("{op}: changed nothing: {answer}"));
                    }
                    times.entry(kind).or_default().push(ms_since(t0));
                }
                next = t0 + spacing;
            }
        }
        Ok(times)
    }
}

fn ms_since(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1e3
}

/// The value at quantile `q` (nearest rank) of `v`; 0 when empty.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return 0.0;
    }
    let rank = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s.get(rank - 1).copied().unwrap_or(0.0)
}
