//! `ironlun bench agent` (a load host serving controllers) and `ironlun
//! bench --agents` (the controller): the flags and the glue; the protocol,
//! the run and the merge are `ironlun_bench::agent`'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ironlun_bench::agent::{self, Agent, BenchSpec, Opener, Token};
use ironlun_bench::luns::Route;
use ironlun_bench::plan::session_label;
use ironlun_bench::{luns, output, LunTarget, Slice, WorkloadResult};
use ironlun_initiator::isid_for;

use super::bench::{report, workloads, BenchArgs};
use crate::args::{parse_url, InitiatorArgs};
use ironlun_bench::runs::write_outputs;

#[derive(clap::Args, Clone)]
pub struct AgentArgs {
    /// Address to serve controllers on (host:port; port 0 picks one).
    #[arg(long, value_name = "ADDR")]
    pub listen: String,
    /// The shared token (16 to 4096 printable characters, in a file
    /// others cannot read); controllers must prove they know it.
    #[arg(long, value_name = "FILE")]
    pub token_file: PathBuf,
    /// How this agent logs in to the LUNs of the specs it is sent.
    #[command(flatten)]
    pub initiator: InitiatorArgs,
}

fn token(path: &Path) -> Result<Token, String> {
    Token::load(path).map_err(|e| format!("--token-file {}: {e}", path.display()))
}

/// Serves controllers until killed.
pub async fn serve(g: AgentArgs) -> Result<(), String> {
    let token = token(&g.token_file)?;
    let listener = tokio::net::TcpListener::bind(&g.listen)
        .await
        .map_err(|e| format!("--listen {}: {e}", g.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let initiator = g.initiator.clone();
    let opener: Opener = Arc::new(move |spec, part| {
        let initiator = initiator.clone();
        Box::pin(async move { open(&initiator, &spec, part).await })
    });
    eprintln!("ironlun bench agent listening on {addr}");
    agent::serve(listener, Agent::new(token, opener)).await;
    Ok(())
}

/// The spec's LUNs, each URL's sessions with their own ISIDs (RFC 7143
/// §11.12.5) as `ironlun bench` opens them, session `k` driving slice `k`
/// of this agent's `part` of the seek range.
async fn open(
    initiator: &InitiatorArgs,
    spec: &BenchSpec,
    part: Slice,
) -> Result<Vec<LunTarget>, String> {
    let mut out = Vec::new();
    let r = open_into(initiator, spec, part, &mut out).await;
    if r.is_err() {
        luns::close(&out).await;
    }
    r.map(|()| out)
}

async fn open_into(
    initiator: &InitiatorArgs,
    spec: &BenchSpec,
    part: Slice,
    out: &mut Vec<LunTarget>,
) -> Result<(), String> {
    let n = spec.sessions;
    for u in &spec.urls {
        let u = parse_url(u)?;
        let o = initiator.options_for(&u)?;
        for k in 0..n {
            let mut ok = o.clone();
            ok.isid = isid_for(o.isid, out.len());
            let label = session_label(&u.to_string(), k, n);
            let slice = part.part(k, n);
            let route = Route::Portal(&u.portal());
            out.push(luns::open(route, &u.target, u.lun, &ok, label, slice).await?);
        }
    }
    Ok(())
}

/// Runs the command line's workloads on every agent and reports the
/// merged results with each agent's part.
pub async fn control(a: &BenchArgs) -> Result<(), String> {
    let unsupported = [
        (a.multipath, "--multipath"),
        (a.link.spec(None, None)?.is_some(), "link emulation"),
        (a.target_pid.is_some(), "--target-pid"),
        (a.target_stats.is_some(), "--target-stats"),
        (a.repeat > 1, "--repeat"),
    ];
    if let Some((_, flag)) = unsupported.iter().find(|(on, _)| *on) {
        return Err(format!("{flag} is not available with --agents"));
    }
    let path = a
        .token_file
        .as_ref()
        .ok_or("--agents needs --token-file (the agents' shared token)")?;
    let token = token(path)?;
    for u in &a.urls {
        parse_url(u)?;
    }
    let spec = BenchSpec {
        urls: a.urls.clone(),
        workloads: workloads(a)?,
        sessions: a.sessions,
        verify: a.verify,
    };
    let run = agent::run(&a.agents, &token, &spec).await?;
    out!("{}", output::table(&run.results));
    let clean = run.results.iter().all(WorkloadResult::clean);
    let mut rep = report(run.results, a.urls.first().cloned());
    rep.luns = run.luns;
    write_outputs(&rep, a.json.as_ref(), a.csv.as_ref())?;
    if clean {
        Ok(())
    } else {
        Err("the run had I/O errors or verification mismatches (see above)".into())
    }
}
