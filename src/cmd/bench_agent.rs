//! `ironlun bench agent` (a load host serving controllers) and `ironlun
//! bench --agents` (the controller): the flags and the glue; the protocol,
//! the run and the merge are `ironlun_bench::agent`'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ironlun_bench::agent::{self, Agent, BenchSpec, Opener, Token};
use ironlun_bench::{luns, output, WorkloadResult};

use super::bench::{report, workloads, write_outputs, BenchArgs};
use crate::args::{parse_url, InitiatorArgs};

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
    let opener: Opener = Arc::new(move |spec| {
        let initiator = initiator.clone();
        Box::pin(async move { open(&initiator, &spec).await })
    });
    eprintln!("ironlun bench agent listening on {addr}");
    agent::serve(listener, Agent::new(token, opener)).await;
    Ok(())
}

/// The spec's LUNs, each URL's sessions with their own ISIDs (RFC 7143
/// §11.12.5) as `ironlun bench` opens them.
async fn open(
    initiator: &InitiatorArgs,
    spec: &BenchSpec,
) -> Result<Vec<ironlun_bench::LunTarget>, String> {
    let mut out = Vec::new();
    for u in &spec.urls {
        let u = parse_url(u)?;
        let o = initiator.options_for(&u)?;
        let (portal, first, label) = (u.portal(), out.len(), u.to_string());
        let opened =
            luns::open_sessions(&portal, &u.target, u.lun, &o, spec.sessions, first, &label).await;
        match opened {
            Ok(l) => out.extend(l),
            Err(e) => {
                luns::close(&out).await;
                return Err(e);
            }
        }
    }
    Ok(out)
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
