//! How a command runs: logging, the tokio runtime an initiator tool
//! gets, exit statuses, signals and the clock for results files.

use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

/// The current time as RFC 3339 (UTC, seconds).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Exit status for bad flags or configuration (and for a request the
/// management API refuses as asked: docs/admin.md, "Exit status").
pub const EXIT_USAGE: u8 = 2;

/// Why a command failed; the kind decides the exit status. Nothing
/// exits 101: a panic is a defect, never an answer.
#[derive(Debug)]
pub enum Failure {
    /// What the user typed or configured is wrong: status 2.
    Usage(String),
    /// The operation was tried and did not succeed: status 1.
    Failed(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Failure {
        Failure::Failed(e)
    }
}

impl From<&str> for Failure {
    fn from(e: &str) -> Failure {
        Failure::Failed(e.to_owned())
    }
}

/// A usage error from any message (`.map_err(usage)?`).
pub fn usage(e: impl std::fmt::Display) -> Failure {
    Failure::Usage(e.to_string())
}

/// The levels a log filter may name (tracing's `LevelFilter`).
const LEVELS: &str = "off, error, warn, info, debug, trace";

/// Checks a log level or filter (`--log`, `IRONLUN_LOG`, the file's
/// `log`) strictly: tracing-subscriber's `EnvFilter` takes a bare word it
/// does not know as a target name, so `infoo` would silence every log
/// line. Every directive must end in a level: `info`, or
/// `TARGET[SPAN]=LEVEL` (`ironlun_target=debug,info`).
pub fn log_filter(filter: &str) -> Result<EnvFilter, String> {
    use tracing_subscriber::filter::LevelFilter;
    let bad = |why: String| {
        format!(
            "log filter '{filter}': {why} (a level: {LEVELS}; or directives such as ironlun_target=debug,info)"
        )
    };
    for directive in filter.split(',').map(str::trim) {
        if directive.is_empty() {
            continue;
        }
        let level = match directive.rsplit_once('=') {
            // A span filter without a level (`[conn{peer=…}]`) names
            // every level.
            _ if directive.ends_with(']') => continue,
            Some((_, level)) => level,
            None => directive,
        };
        // LevelFilter takes "" for OFF; EnvFilter takes `target=` for
        // every level: neither is what a user meant.
        if level.is_empty() || level.parse::<LevelFilter>().is_err() {
            return Err(bad(format!("'{level}' is not a level")));
        }
    }
    EnvFilter::try_new(filter).map_err(|e| bad(e.to_string()))
}

/// Logs to stderr at the flag's level or filter, else the config file's,
/// else info. The filter was checked ([`log_filter`]) before.
pub fn init_logging(flag: Option<&str>, config: Option<&str>) {
    let filter = flag.or(config).unwrap_or("info");
    let filter = log_filter(filter).unwrap_or_else(|_| EnvFilter::new("info"));
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
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Reports bad flags or configuration: exit status 2.
pub fn usage_error(msg: &str) -> ExitCode {
    eprintln!("ironlun: {msg}");
    ExitCode::from(EXIT_USAGE)
}

/// Exit status 0; 2 with a usage error on stderr; 1 with another.
pub fn finish(r: Result<(), impl Into<Failure>>) -> ExitCode {
    match r.map_err(Into::into) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => usage_error(&e),
        Err(Failure::Failed(e)) => {
            eprintln!("ironlun: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs an initiator tool on a single-threaded runtime: one core drives
/// the protocol, the other is left to the target when both share a host.
pub fn run_tool<F, E>(log: Option<&str>, fut: F) -> ExitCode
where
    F: std::future::Future<Output = Result<(), E>>,
    E: Into<Failure>,
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A bare word that is not a level would be taken by EnvFilter as a
    /// target name and silence everything else: refused, naming it and
    /// the levels.
    #[test]
    fn log_filters_must_name_levels() {
        for good in [
            "info",
            "WARN",
            "off",
            "ironlun_target=debug,info",
            "ironlun_target::conn=trace, warn",
            "[conn{peer=10.0.0.1}]=debug",
            "[conn]",
        ] {
            assert!(log_filter(good).is_ok(), "{good}");
        }
        for (bad, level) in [
            ("infoo", "infoo"),
            ("ironlun_target", "ironlun_target"),
            ("ironlun_target=debgu,info", "debgu"),
            ("info,ironlun_target=", ""),
        ] {
            let e = log_filter(bad).unwrap_err();
            assert!(
                e.contains(&format!("'{level}' is not a level")),
                "{bad}: {e}"
            );
            assert!(e.contains("off, error, warn, info, debug, trace"), "{e}");
        }
    }

    #[test]
    fn failures_give_their_exit_status() {
        assert_eq!(finish(Ok::<(), String>(())), ExitCode::SUCCESS);
        assert_eq!(finish(Err("it failed".to_owned())), ExitCode::FAILURE);
        assert_eq!(finish(Err(usage("bad flag"))), ExitCode::from(EXIT_USAGE));
    }
}
