//! # ironlun-target-config: the target's configuration
//!
//! **Owns:** the configuration model ([`Config`], [`TargetConfig`],
//! [`LunConfig`]), the TOML file and the command-line shorthand that
//! both produce it, every check of a value before any socket opens,
//! the errors that name the file, key or flag ([`ConfigError`]), the
//! configuration written back with its defaults (`--check`), iSCSI
//! names, access lists and where CHAP credentials come from
//! ([`access`]), and which gateway of a group this process is
//! ([`set_local_gateway`]).
//!
//! **Must not know:** sockets, tasks or an async runtime, the session
//! registry, the running target and its live changes (ironlun-target),
//! the management API (ironlun-target-admin), or what a LUN's store
//! does with its settings (ironlun-backend, ironlun-scsi).
//!
//! Target configuration: the TOML file and the command-line shorthand
//! (`--listen`, `--name`, `--lun SPEC`) both produce a [`Config`].
//!
//! Every value is checked here, before any socket opens; a bad value is a
//! [`ConfigError`] that names the file, the key or flag, and what is
//! wrong.
//!
//! - `flags`: [`Overrides`] and [`Config::load`] (flags, or a file and
//!   flags on top)
//! - `toml_file`: the file form and [`Config::from_toml`]
//! - `params`, `limits`, `chap`, `alua`: the file's sections with their
//!   checks
//! - `lun_spec`: [`LunSpec`], the `ram:1GiB` / `file:PATH,direct` shorthand,
//!   and its display in the same grammar
//! - `effective`: [`Config::effective_toml`], the configuration written
//!   back as TOML with every default filled in (`--check`)
//! - `names`: iSCSI names; `io_engine`: [`IoEngine`]; `error`:
//!   [`ConfigError`]; `access`: access lists and CHAP credentials

#![forbid(unsafe_code)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ironlun_proto::chap::ChapPolicy;
use ironlun_proto::params::Offers;

use crate::access::Acl;

pub mod access;
mod alua;
mod chap;
mod effective;
mod error;
mod flags;
mod group;
mod initiators;
mod io_engine;
mod limits;
mod lun_spec;
mod names;
mod params;
mod schedule;
mod toml_file;

pub use chap::{HIDDEN_SECRET, SECRET_KEYS};
pub use error::ConfigError;
pub use flags::Overrides;
pub use group::{
    local_gateway, set_local_gateway, GatewayConfig, GroupConfig, MAX_GATEWAYS, MAX_GROUP_LUNS,
};
pub use initiators::{DefaultMap, InitiatorEntry, MappedLun};
pub use io_engine::{IoEngine, UnknownIoEngine};
pub use limits::{Limits, TcpTuning, MAX_BUSY_POLL};
pub use lun_spec::{BackendSpec, LunSpec, LunSpecError, LunSpecProblem, RbdSpec};
pub use names::{default_target_name, normalize_iscsi_name, NameError, NameKey};
pub use schedule::{every_text, SnapshotSchedule, MAX_EVERY, MIN_EVERY};
pub use toml_file::{check_stores_unshared, error_line};

/// Default portal (RFC 7143 §13.8: 3260 is the well-known port).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:3260";

/// [`DEFAULT_LISTEN`] as an address.
fn default_listen() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 3260))
}

/// LUN numbers must fit SAM-5 flat addressing (14 bits).
pub const LUN_NUMBER_LIMIT: u16 = 16384;

/// Default queue depth (commands a session may have outstanding).
pub const DEFAULT_QUEUE_DEPTH: u32 = 128;
/// Upper bound on the configurable queue depth.
pub const MAX_QUEUE_DEPTH: u32 = 4096;

/// A validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub listen: Vec<SocketAddr>,
    /// Shared: a change copies the list, not the targets it leaves
    /// alone, and compares those by pointer first.
    pub targets: Vec<Arc<TargetConfig>>,
    pub limits: Limits,
    /// Log filter (tracing `EnvFilter` syntax), if set in the file.
    pub log: Option<String>,
    /// Where the file was read from (for messages).
    pub source: Option<PathBuf>,
    /// Where state that outlives the process is kept (persistent
    /// reservations with APTPL, sanitize operations under way or failed).
    /// Without it, APTPL is refused and a sanitize the target stops is
    /// lost.
    pub state_dir: Option<PathBuf>,
    /// Where to serve statistics (process CPU, sessions, I/O counters) as
    /// JSON over HTTP; off when `None`.
    pub stats: Option<SocketAddr>,
    pub tcp: TcpTuning,
    /// CHAP required of discovery sessions.
    pub discovery_chap: Option<ChapPolicy>,
    /// How commands on file and block LUNs reach the kernel.
    pub io_engine: IoEngine,
    /// Where the management API listens (a Unix socket): `admin_socket`
    /// or `--admin-socket`, else `admin.sock` in the state directory.
    pub admin_socket: Option<PathBuf>,
    /// The management API also over HTTP on a loopback address:
    /// `admin_http` and `admin_token_file`, or the flags of those names.
    pub admin_http: Option<AdminHttp>,
    /// Every change made through the management API is written to the
    /// configuration file at once (`save_on_change = true`), so that a
    /// SIGHUP or a restart keeps it; like targetcli's save on exit.
    pub save_on_change: bool,
    /// Where `config save PATH` may write besides the daemon's own file:
    /// `admin_save_dir` or `--admin-save-dir` (files `NAME.toml` directly
    /// in it).
    pub admin_save_dir: Option<PathBuf>,
}

/// The management API over HTTP on a loopback address, for a client that
/// cannot reach the Unix socket (a sidecar in another mount namespace).
/// Every request must carry the token in `token_file` as
/// `Authorization: Bearer TOKEN`.
#[derive(Clone, Debug, PartialEq)]
pub struct AdminHttp {
    pub addr: SocketAddr,
    pub token_file: PathBuf,
}

impl AdminHttp {
    /// Both keys or neither; the address on loopback only, since the API
    /// changes what the target serves.
    pub fn check(
        addr: Option<&str>,
        token_file: Option<&Path>,
    ) -> Result<Option<AdminHttp>, ConfigError> {
        let invalid = |key: &str, problem: &str| ConfigError::Invalid {
            key: key.to_owned(),
            problem: problem.to_owned(),
        };
        let (addr, token_file) = match (addr, token_file) {
            (None, None) => return Ok(None),
            (Some(_), None) => {
                return Err(invalid(
                    "admin_http",
                    "needs admin_token_file (the bearer token clients must send)",
                ))
            }
            (None, Some(_)) => return Err(invalid("admin_token_file", "only with admin_http")),
            (Some(a), Some(t)) => (parse_listen("admin_http", a)?, t.to_owned()),
        };
        if !addr.ip().to_canonical().is_loopback() {
            return Err(invalid(
                "admin_http",
                "must be a loopback address (127.0.0.0/8 or [::1]); from elsewhere use the Unix socket through a tunnel",
            ));
        }
        Ok(Some(AdminHttp { addr, token_file }))
    }
}

impl Config {
    /// The management socket: as configured, else in the state directory.
    pub fn admin_socket(&self) -> Option<PathBuf> {
        self.admin_socket
            .clone()
            .or_else(|| Some(self.state_dir.as_ref()?.join("admin.sock")))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct TargetConfig {
    pub name: String,
    pub alias: Option<String>,
    pub portal_group_tag: u16,
    /// RELATIVE TARGET PORT IDENTIFIER of this gateway's target port:
    /// `alua.relative_port`, else the portal group tag.
    pub relative_port: u16,
    /// Target port groups and their states (`[target.alua]`; off
    /// without it).
    pub alua: ironlun_scsi::AluaConfig,
    /// The gateway group serving this target with others (`[target.group]`):
    /// it sets the portal group tag, the relative port and `alua`.
    pub group: Option<GroupConfig>,
    pub queue_depth: u32,
    pub offers: Offers,
    pub luns: Vec<LunConfig>,
    /// CHAP required to log in (RFC 7143 §12.1.3).
    pub chap: Option<ChapPolicy>,
    /// Who may log in and see the target in SendTargets.
    pub acl: Acl,
    /// Initiators with a LUN map or CHAP credentials of their own.
    pub initiators: Vec<InitiatorEntry>,
    /// What initiators without an entry see.
    pub default_map: DefaultMap,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LunConfig {
    pub number: u16,
    pub spec: LunSpec,
    /// Snapshots taken on a schedule (`snapshot_every`, docs/snapshots.md).
    pub schedule: Option<SnapshotSchedule>,
}

/// A portal or endpoint address given at `key` (`listen`, `--stats`):
/// an IP address and a port; `HOST:PORT` with a host name is refused as
/// such.
fn parse_listen(key: &str, s: &str) -> Result<SocketAddr, ConfigError> {
    s.parse::<SocketAddr>().map_err(|_| {
        let (key, value) = (key.to_owned(), s.to_owned());
        let host_name = s.rsplit_once(':').is_some_and(|(host, port)| {
            port.parse::<u16>().is_ok()
                && host.starts_with(|c: char| c.is_ascii_alphabetic())
                && !host.contains([':', '[', ']'])
        });
        if host_name {
            ConfigError::HostName { key, value }
        } else {
            ConfigError::Address { key, value }
        }
    })
}

/// A queue depth given at `key`: 1..=[`MAX_QUEUE_DEPTH`].
fn check_queue_depth(key: &str, qd: u32) -> Result<(), ConfigError> {
    if qd == 0 || qd > MAX_QUEUE_DEPTH {
        return Err(ConfigError::OutOfRange {
            key: key.to_owned(),
            value: qd.to_string(),
            allowed: format!("1..={MAX_QUEUE_DEPTH}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
