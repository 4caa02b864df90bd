//! How a command runs: logging, the tokio runtime an initiator tool
//! gets, exit statuses, signals and the clock for results files.

use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

/// The current time as RFC 3339 (UTC, seconds).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Exit status for bad flags or configuration.
pub const EXIT_USAGE: u8 = 2;

/// Logs to stderr at the flag's level or filter, else the config file's,
/// else info.
pub fn init_logging(flag: Option<&str>, config: Option<&str>) {
    let filter = flag.or(config).unwrap_or("info");
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colours())
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// Colours only on a terminal, and not with NO_COLOR set (no-color.org):
/// escape codes in a file or the journal (a service's stderr) make
/// journalctl show the lines as blobs.
fn colours() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").map_or(true, |v| v.is_empty())
}

/// Reports bad flags or configuration: exit status 2.
pub fn usage_error(msg: &str) -> ExitCode {
    eprintln!("ironlun: {msg}");
    ExitCode::from(EXIT_USAGE)
}

/// Exit status 0, or 1 with the error on stderr.
pub fn finish(r: Result<(), String>) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ironlun: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs an initiator tool on a single-threaded runtime: one core drives
/// the protocol, the other is left to the target when both share a host.
pub fn run_tool<F>(log: Option<&str>, fut: F) -> ExitCode
where
    F: std::future::Future<Output = Result<(), String>>,
{
    init_logging(Some(log.unwrap_or("warn")), None);
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ironlun: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    finish(rt.block_on(fut))
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed by this
/// call, not when the future is first polled: a caller that announces
/// itself (a test waits for "listening on") after calling it can never be
/// killed by a signal's default action in between. Must be called within
/// the runtime.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    async move {
        match (term, int) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        tracing::info!("signal received");
    }
}
