//! Bounds, timers and socket options shared by every target: [`Limits`]
//! and [`TcpTuning`], their `[limits]` and `[tcp]` sections in the file,
//! and the range checks on their values.

use std::time::Duration;

use ironlun_units::parse_size;
use serde::Deserialize;

use super::ConfigError;

/// Socket options for every portal's connections.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpTuning {
    /// SO_SNDBUF / SO_RCVBUF (the TCP window), set on the listening
    /// socket so the window scale matches; `None`: kernel autotuning.
    pub send_buffer: Option<u32>,
    pub recv_buffer: Option<u32>,
    /// TCP_NODELAY (default on: PDUs go out at once).
    pub nodelay: bool,
    /// Re-arm TCP_QUICKACK after every read: acknowledge at once instead
    /// of delaying ACKs (Linux).
    pub quickack: bool,
    /// Latency mode: how long a connection with nothing to send polls
    /// its socket and ring before it sleeps (`ironlun_target::busy_poll`);
    /// zero, the default, is off.
    pub busy_poll: Duration,
}

/// The largest busy-poll budget: a spin holds a runtime worker thread,
/// so it stays short against timers and other connections' work.
pub const MAX_BUSY_POLL: Duration = Duration::from_millis(1);

/// A busy-poll budget at `key` (`tcp.busy_poll`, `--busy-poll`): a
/// duration such as `50us`, at most [`MAX_BUSY_POLL`]; `0` is off.
pub(crate) fn busy_poll(key: &str, s: &str) -> Result<Duration, ConfigError> {
    let d = ironlun_units::parse_duration(s).map_err(|e| ConfigError::invalid(key, e))?;
    if d > MAX_BUSY_POLL {
        return Err(ConfigError::OutOfRange {
            key: key.to_owned(),
            value: s.to_owned(),
            allowed: "0 (off) ..= 1ms, e.g. 50us".to_owned(),
        });
    }
    Ok(d)
}

impl Default for TcpTuning {
    fn default() -> Self {
        TcpTuning {
            send_buffer: None,
            recv_buffer: None,
            nodelay: true,
            quickack: false,
            busy_poll: Duration::ZERO,
        }
    }
}

/// Bounds and timers shared by every target.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    pub max_sessions: usize,
    pub max_connections: usize,
    pub login_timeout: Duration,
    pub login_text_limit: usize,
    pub nop_interval: Option<Duration>,
    pub nop_timeout: Duration,
    /// How long initiators get to log out at shutdown.
    pub shutdown_grace: Duration,
    pub max_transfer_bytes: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_sessions: 256,
            max_connections: 1024,
            login_timeout: Duration::from_secs(15),
            login_text_limit: 64 << 10,
            nop_interval: Some(Duration::from_secs(30)),
            nop_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(3),
            max_transfer_bytes: 8 << 20,
        }
    }
}

/// A size at `key` within `range`; `allowed` says the range in words.
fn size_in(
    key: &str,
    s: &str,
    range: std::ops::RangeInclusive<u32>,
    allowed: &'static str,
) -> Result<u32, ConfigError> {
    let n = parse_size(s).map_err(|e| ConfigError::invalid(key, e))?;
    u32::try_from(n)
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| ConfigError::OutOfRange {
            key: key.to_owned(),
            value: s.to_owned(),
            allowed: allowed.to_owned(),
        })
}

/// A socket buffer size at `key` (`tcp.send_buffer`, `--tcp-window`):
/// 4 KiB .. 256 MiB.
pub(crate) fn buffer_size(key: &str, s: &str) -> Result<u32, ConfigError> {
    size_in(key, s, 4096..=(256 << 20), "4KiB..256MiB")
}

/// `[limits]` in the file; every key optional.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileLimits {
    max_sessions: Option<usize>,
    max_connections: Option<usize>,
    login_timeout_secs: Option<u64>,
    login_text_limit: Option<usize>,
    nop_interval_secs: Option<u64>,
    nop_timeout_secs: Option<u64>,
    shutdown_grace_secs: Option<u64>,
    max_transfer_length: Option<String>,
}

impl FileLimits {
    /// The limits, defaults filled in, each value checked.
    pub(super) fn check(&self) -> Result<Limits, ConfigError> {
        let d = Limits::default();
        let secs = Duration::from_secs;
        let limits = Limits {
            max_sessions: self.max_sessions.unwrap_or(d.max_sessions),
            max_connections: self.max_connections.unwrap_or(d.max_connections),
            login_timeout: self.login_timeout_secs.map_or(d.login_timeout, secs),
            login_text_limit: self.login_text_limit.unwrap_or(d.login_text_limit),
            nop_interval: match self.nop_interval_secs {
                Some(0) => None,
                Some(s) => Some(secs(s)),
                None => d.nop_interval,
            },
            nop_timeout: self.nop_timeout_secs.map_or(d.nop_timeout, secs),
            shutdown_grace: self.shutdown_grace_secs.map_or(d.shutdown_grace, secs),
            max_transfer_bytes: match &self.max_transfer_length {
                Some(s) => size_in(
                    "limits.max_transfer_length",
                    s,
                    4096..=(64 << 20),
                    "4KiB..=64MiB",
                )?,
                None => d.max_transfer_bytes,
            },
        };
        let at_least = |key: &str, value: usize, min: usize, allowed: &str| {
            if value < min {
                return Err(ConfigError::OutOfRange {
                    key: format!("limits.{key}"),
                    value: value.to_string(),
                    allowed: allowed.to_owned(),
                });
            }
            Ok(())
        };
        at_least("max_sessions", limits.max_sessions, 1, "at least 1")?;
        at_least("max_connections", limits.max_connections, 1, "at least 1")?;
        at_least(
            "login_text_limit",
            limits.login_text_limit,
            8192,
            "at least 8192 bytes",
        )?;
        Ok(limits)
    }
}

/// `[tcp]` in the file; every key optional.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileTcp {
    send_buffer: Option<String>,
    recv_buffer: Option<String>,
    nodelay: Option<bool>,
    quickack: Option<bool>,
    busy_poll: Option<String>,
}

impl FileTcp {
    /// The socket options, defaults filled in, buffer sizes checked.
    pub(super) fn check(&self) -> Result<TcpTuning, ConfigError> {
        let buffer =
            |key: &str, v: &Option<String>| v.as_deref().map(|v| buffer_size(key, v)).transpose();
        Ok(TcpTuning {
            send_buffer: buffer("tcp.send_buffer", &self.send_buffer)?,
            recv_buffer: buffer("tcp.recv_buffer", &self.recv_buffer)?,
            nodelay: self.nodelay.unwrap_or(true),
            quickack: self.quickack.unwrap_or(false),
            busy_poll: match &self.busy_poll {
                Some(s) => busy_poll("tcp.busy_poll", s)?,
                None => Duration::ZERO,
            },
        })
    }
}
