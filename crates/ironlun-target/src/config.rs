//! Target configuration: the TOML file and the command-line shorthand
//! (`--listen`, `--name`, `--lun SPEC`) both produce a [`Config`].
//!
//! Every value is checked here, before any socket opens; a bad value is an
//! error that names the file, the key or flag, and what is wrong.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ironlun_proto::chap::{ChapPolicy, Credentials};
use ironlun_proto::params::{DigestKind, Offers};
use ironlun_units::parse_size;
use serde::Deserialize;

use crate::access::{chap_policy, credentials_from_env, Acl};

/// Default portal (RFC 7143 §13.8: 3260 is the well-known port).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:3260";

/// A validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub listen: Vec<SocketAddr>,
    pub targets: Vec<TargetConfig>,
    pub limits: Limits,
    /// Log filter (tracing `EnvFilter` syntax), if set in the file.
    pub log: Option<String>,
    /// Where the file was read from (for messages).
    pub source: Option<PathBuf>,
    /// Where state that outlives the process is kept (persistent
    /// reservations with APTPL). Without it, APTPL is refused.
    pub state_dir: Option<PathBuf>,
    /// Where to serve statistics (process CPU, sessions, I/O counters) as
    /// JSON over HTTP; off when `None`.
    pub stats: Option<SocketAddr>,
    pub tcp: TcpTuning,
    /// CHAP required of discovery sessions.
    pub discovery_chap: Option<ChapPolicy>,
    /// How commands on file and block LUNs reach the kernel.
    pub io_engine: IoEngine,
}

/// How commands on file and block LUNs reach the kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoEngine {
    /// An io_uring per connection: reads, writes and cache flushes are
    /// submitted and completed on the connection's own thread. Where
    /// io_uring is unavailable the daemon says so and uses `pool`.
    #[default]
    Uring,
    /// tokio's blocking thread pool: one synchronous call per command on
    /// a pool thread (the engine before io_uring; kept to compare).
    Pool,
}

impl std::str::FromStr for IoEngine {
    type Err = String;
    fn from_str(s: &str) -> Result<IoEngine, String> {
        match s {
            "uring" | "io_uring" => Ok(IoEngine::Uring),
            "pool" => Ok(IoEngine::Pool),
            other => Err(format!("I/O engine '{other}' (must be uring or pool)")),
        }
    }
}

impl IoEngine {
    pub fn name(self) -> &'static str {
        match self {
            IoEngine::Uring => "io_uring",
            IoEngine::Pool => "thread pool",
        }
    }
}

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
}

impl Default for TcpTuning {
    fn default() -> Self {
        TcpTuning {
            send_buffer: None,
            recv_buffer: None,
            nodelay: true,
            quickack: false,
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

#[derive(Clone, Debug, PartialEq)]
pub struct TargetConfig {
    pub name: String,
    pub alias: Option<String>,
    pub portal_group_tag: u16,
    pub queue_depth: u32,
    pub offers: Offers,
    pub luns: Vec<LunConfig>,
    /// CHAP required to log in (RFC 7143 §12.1.3).
    pub chap: Option<ChapPolicy>,
    /// Who may log in and see the target in SendTargets.
    pub acl: Acl,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LunConfig {
    pub number: u16,
    pub spec: LunSpec,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendSpec {
    Null {
        size: u64,
    },
    Ram {
        size: u64,
    },
    File {
        path: PathBuf,
        size: Option<u64>,
        direct: bool,
        preallocate: bool,
    },
    Block {
        path: PathBuf,
        direct: bool,
    },
}

/// A parsed `--lun` spec: `ram:SIZE`, `null:SIZE`,
/// `file:PATH[,size=SIZE][,direct][,prealloc]` or `block:PATH[,direct]`,
/// each optionally followed by `,bs=512|4096`, `,pbs=4096`, `,ro`, (not
/// for block devices) `,thin` and `,sanitize`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LunSpec {
    pub backend: BackendSpec,
    pub block_size: u32,
    /// Physical block size reported to initiators (512e with bs=512).
    pub physical_block_size: u32,
    pub read_only: bool,
    /// Thin provisioning: UNMAP, WRITE SAME with UNMAP, GET LBA STATUS.
    pub thin: bool,
    /// SANITIZE is offered: it destroys every block, so only on request.
    pub sanitize: bool,
}

impl std::str::FromStr for LunSpec {
    type Err = String;

    fn from_str(spec: &str) -> Result<LunSpec, String> {
        let (kind, rest) = spec.split_once(':').ok_or_else(|| {
            format!("LUN '{spec}': expected KIND:ARG (ram:SIZE, null:SIZE, file:PATH, block:PATH)")
        })?;
        let mut parts = rest.split(',');
        let first = parts.next().unwrap_or("");
        if first.is_empty() {
            return Err(format!(
                "LUN '{spec}': missing {} after '{kind}:'",
                if matches!(kind, "ram" | "null") {
                    "size"
                } else {
                    "path"
                }
            ));
        }
        let mut size = None;
        let mut block_size = 512u32;
        let mut physical_block_size = None;
        let mut read_only = false;
        let mut direct = false;
        let mut preallocate = false;
        let mut thin = false;
        let mut sanitize = false;
        for opt in parts {
            let (k, v) = match opt.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (opt, None),
            };
            match (k, v) {
                ("size", Some(v)) => {
                    size = Some(parse_size(v).map_err(|e| format!("LUN '{spec}': {e}"))?)
                }
                ("bs", Some(v)) => {
                    block_size = match v {
                        "512" => 512,
                        "4096" | "4k" | "4K" | "4KiB" => 4096,
                        _ => return Err(format!("LUN '{spec}': bs={v} (must be 512 or 4096)")),
                    }
                }
                ("pbs", Some(v)) => {
                    physical_block_size = Some(match v {
                        "512" => 512,
                        "4096" | "4k" | "4K" | "4KiB" => 4096,
                        _ => return Err(format!("LUN '{spec}': pbs={v} (must be 512 or 4096)")),
                    })
                }
                ("ro", None) => read_only = true,
                ("thin", None) => thin = true,
                ("sanitize", None) => sanitize = true,
                ("direct", None) => direct = true,
                ("prealloc", None) | ("preallocate", None) => preallocate = true,
                ("sparse", None) => preallocate = false,
                _ => return Err(format!("LUN '{spec}': unknown option '{opt}'")),
            }
        }
        let backend = match kind {
            "ram" | "null" => {
                if size.is_some() || direct || preallocate {
                    return Err(format!(
                        "LUN '{spec}': {kind} takes only a size, bs=, ro, thin and sanitize"
                    ));
                }
                let size = parse_size(first).map_err(|e| format!("LUN '{spec}': {e}"))?;
                if kind == "ram" {
                    BackendSpec::Ram { size }
                } else {
                    BackendSpec::Null { size }
                }
            }
            "file" => BackendSpec::File {
                path: PathBuf::from(first),
                size,
                direct,
                preallocate,
            },
            "block" => {
                if size.is_some() || preallocate {
                    return Err(format!("LUN '{spec}': block devices take their own size"));
                }
                if thin {
                    return Err(format!(
                        "LUN '{spec}': thin provisioning needs ram, null or file (a discard on a device need not read back as zeros)"
                    ));
                }
                BackendSpec::Block {
                    path: PathBuf::from(first),
                    direct,
                }
            }
            other => {
                return Err(format!(
                    "LUN '{spec}': unknown backend '{other}' (use ram, null, file or block)"
                ))
            }
        };
        if let BackendSpec::Null { size } | BackendSpec::Ram { size } = &backend {
            if *size < u64::from(block_size) {
                return Err(format!(
                    "LUN '{spec}': size is smaller than one {block_size}-byte block"
                ));
            }
        }
        let physical_block_size = physical_block_size.unwrap_or(block_size);
        if physical_block_size < block_size {
            return Err(format!(
                "LUN '{spec}': pbs={physical_block_size} is smaller than bs={block_size}"
            ));
        }
        if thin && preallocate {
            return Err(format!(
                "LUN '{spec}': thin and prealloc contradict each other"
            ));
        }
        Ok(LunSpec {
            backend,
            block_size,
            physical_block_size,
            read_only,
            thin,
            sanitize,
        })
    }
}

/// An iSCSI name check (RFC 7143 §4.2.7): `iqn.`, `eui.` or `naa.` form,
/// at most 223 bytes, no spaces.
pub fn validate_iscsi_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 223 {
        return Err(format!("iSCSI name '{name}' must be 1 to 223 bytes"));
    }
    let lower = name.to_ascii_lowercase();
    if !(lower.starts_with("iqn.") || lower.starts_with("eui.") || lower.starts_with("naa.")) {
        return Err(format!(
            "iSCSI name '{name}' must start with iqn., eui. or naa."
        ));
    }
    if name
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == ',')
    {
        return Err(format!(
            "iSCSI name '{name}' contains a space, comma or control character"
        ));
    }
    Ok(())
}

/// The default target name: `iqn.2026-11.io.ironlun:<host name>`.
pub fn default_target_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host: String = host
        .trim()
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let host = if host.is_empty() {
        "localhost".to_owned()
    } else {
        host
    };
    format!("iqn.2026-11.io.ironlun:{host}")
}

// --- TOML file form -------------------------------------------------------

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    listen: Vec<String>,
    log: Option<String>,
    state_dir: Option<PathBuf>,
    stats: Option<String>,
    #[serde(default)]
    tcp: FileTcp,
    #[serde(default)]
    limits: FileLimits,
    #[serde(default)]
    defaults: FileParams,
    #[serde(default, rename = "target")]
    targets: Vec<FileTarget>,
    #[serde(default)]
    discovery: FileAuth,
    io_engine: Option<String>,
}

/// CHAP credentials in the file: `USER:SECRET` literally (the file must
/// then not be world-readable) or the name of an environment variable
/// that holds it.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileAuth {
    chap: Option<String>,
    chap_env: Option<String>,
    mutual_chap: Option<String>,
    mutual_chap_env: Option<String>,
}

impl FileAuth {
    fn has_literal_secret(&self) -> bool {
        self.chap.is_some() || self.mutual_chap.is_some()
    }

    fn policy(&self, what: &str) -> Result<Option<ChapPolicy>, String> {
        let one = |lit: &Option<String>, env: &Option<String>, key: &str| {
            match (lit, env) {
                (Some(_), Some(_)) => Err(format!("{what}: give {key} or {key}_env, not both")),
                // The value is a secret: the error must not quote it.
                (Some(v), None) => Credentials::parse(v)
                    .map(Some)
                    .map_err(|e| format!("{what}.{key}: {e}")),
                (None, Some(var)) => credentials_from_env(var)
                    .map(Some)
                    .map_err(|e| format!("{what}.{key}_env: {e}")),
                (None, None) => Ok(None),
            }
        };
        chap_policy(
            one(&self.chap, &self.chap_env, "chap")?,
            one(&self.mutual_chap, &self.mutual_chap_env, "mutual_chap")?,
            what,
        )
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileLimits {
    max_sessions: Option<usize>,
    max_connections: Option<usize>,
    login_timeout_secs: Option<u64>,
    login_text_limit: Option<usize>,
    nop_interval_secs: Option<u64>,
    nop_timeout_secs: Option<u64>,
    shutdown_grace_secs: Option<u64>,
    max_transfer_length: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileTcp {
    send_buffer: Option<String>,
    recv_buffer: Option<String>,
    nodelay: Option<bool>,
    quickack: Option<bool>,
}

/// A socket buffer size: 4 KiB .. 256 MiB.
fn buffer_size(what: &str, s: &str) -> Result<u32, String> {
    let n = parse_size(s).map_err(|e| format!("{what}: {e}"))?;
    u32::try_from(n)
        .ok()
        .filter(|n| (4096..=(256 << 20)).contains(n))
        .ok_or_else(|| format!("{what} {s}: must be 4KiB..256MiB"))
}

/// Negotiation offers and queue depth; every key optional.
#[derive(Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
struct FileParams {
    queue_depth: Option<u32>,
    header_digest: Option<Vec<String>>,
    data_digest: Option<Vec<String>>,
    max_connections: Option<u16>,
    initial_r2t: Option<bool>,
    immediate_data: Option<bool>,
    max_recv_data_segment_length: Option<u32>,
    max_burst_length: Option<u32>,
    first_burst_length: Option<u32>,
    default_time2wait: Option<u16>,
    default_time2retain: Option<u16>,
    max_outstanding_r2t: Option<u16>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTarget {
    name: Option<String>,
    alias: Option<String>,
    portal_group_tag: Option<u16>,
    #[serde(default)]
    params: FileParams,
    #[serde(default, rename = "lun")]
    luns: Vec<FileLun>,
    /// Initiator names and networks allowed (empty: everyone).
    #[serde(default)]
    allow: Vec<String>,
    #[serde(flatten)]
    auth: FileAuth,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLun {
    number: Option<u16>,
    spec: String,
}

/// Default queue depth (commands a session may have outstanding).
pub const DEFAULT_QUEUE_DEPTH: u32 = 128;
/// Upper bound on the configurable queue depth.
pub const MAX_QUEUE_DEPTH: u32 = 4096;

impl FileParams {
    /// Later values (per target) override earlier ones (defaults).
    fn merged(&self, over: &FileParams) -> FileParams {
        FileParams {
            queue_depth: over.queue_depth.or(self.queue_depth),
            header_digest: over
                .header_digest
                .clone()
                .or_else(|| self.header_digest.clone()),
            data_digest: over
                .data_digest
                .clone()
                .or_else(|| self.data_digest.clone()),
            max_connections: over.max_connections.or(self.max_connections),
            initial_r2t: over.initial_r2t.or(self.initial_r2t),
            immediate_data: over.immediate_data.or(self.immediate_data),
            max_recv_data_segment_length: over
                .max_recv_data_segment_length
                .or(self.max_recv_data_segment_length),
            max_burst_length: over.max_burst_length.or(self.max_burst_length),
            first_burst_length: over.first_burst_length.or(self.first_burst_length),
            default_time2wait: over.default_time2wait.or(self.default_time2wait),
            default_time2retain: over.default_time2retain.or(self.default_time2retain),
            max_outstanding_r2t: over.max_outstanding_r2t.or(self.max_outstanding_r2t),
        }
    }

    fn offers(&self) -> Result<(Offers, u32), String> {
        let mut o = Offers::default();
        let digests = |l: &Vec<String>| -> Result<Vec<DigestKind>, String> {
            if l.is_empty() {
                return Err("digest list is empty".into());
            }
            l.iter().map(|s| s.parse()).collect()
        };
        if let Some(l) = &self.header_digest {
            o.header_digest = digests(l).map_err(|e| format!("header_digest: {e}"))?;
        }
        if let Some(l) = &self.data_digest {
            o.data_digest = digests(l).map_err(|e| format!("data_digest: {e}"))?;
        }
        if let Some(v) = self.max_connections {
            o.max_connections = v;
        }
        if let Some(v) = self.initial_r2t {
            o.initial_r2t = v;
        }
        if let Some(v) = self.immediate_data {
            o.immediate_data = v;
        }
        if let Some(v) = self.max_recv_data_segment_length {
            o.max_recv_data_segment_length = v;
        }
        if let Some(v) = self.max_burst_length {
            o.max_burst_length = v;
        }
        if let Some(v) = self.first_burst_length {
            o.first_burst_length = v;
        }
        if let Some(v) = self.default_time2wait {
            o.default_time2wait = v;
        }
        if let Some(v) = self.default_time2retain {
            o.default_time2retain = v;
        }
        if let Some(v) = self.max_outstanding_r2t {
            o.max_outstanding_r2t = v;
        }
        o.validate()?;
        let qd = self.queue_depth.unwrap_or(DEFAULT_QUEUE_DEPTH);
        if qd == 0 || qd > MAX_QUEUE_DEPTH {
            return Err(format!("queue_depth {qd} (must be 1..={MAX_QUEUE_DEPTH})"));
        }
        Ok((o, qd))
    }
}

/// What the command line says, before merging with a file.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub config: Option<PathBuf>,
    pub listen: Vec<String>,
    pub name: Option<String>,
    pub luns: Vec<String>,
    pub queue_depth: Option<u32>,
    pub state_dir: Option<PathBuf>,
    pub stats: Option<String>,
    /// Both socket buffers (the TCP window).
    pub tcp_window: Option<String>,
    /// Turn TCP_NODELAY off.
    pub tcp_nagle: bool,
    /// Re-arm TCP_QUICKACK after every read.
    pub tcp_quickack: bool,
    /// `USER:SECRET` initiators must authenticate with (every target and
    /// discovery).
    pub chap: Option<String>,
    /// `USER:SECRET` of the target for mutual CHAP.
    pub mutual_chap: Option<String>,
    /// Initiator names and networks allowed on every target.
    pub allow: Vec<String>,
    /// `uring` or `pool` (see [`IoEngine`]).
    pub io_engine: Option<String>,
}

fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    s.parse::<SocketAddr>()
        .map_err(|_| format!("listen address '{s}' is not ADDR:PORT (IPv6 as [::1]:3260)"))
}

impl Config {
    /// Builds the configuration from a file and/or flags.
    pub fn load(o: &Overrides) -> Result<Config, String> {
        let mut cfg = match &o.config {
            Some(path) => {
                if o.name.is_some() || !o.luns.is_empty() {
                    return Err(
                        "--name and --lun cannot be combined with --config (put them in the file)"
                            .into(),
                    );
                }
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                Config::from_toml(&text, Some(path))?
            }
            None => Config::from_flags(o)?,
        };
        if !o.listen.is_empty() {
            cfg.listen = o
                .listen
                .iter()
                .map(|s| parse_listen(s).map_err(|e| format!("--listen: {e}")))
                .collect::<Result<_, _>>()?;
        }
        if let Some(dir) = &o.state_dir {
            cfg.state_dir = Some(dir.clone());
        }
        if let Some(s) = &o.stats {
            cfg.stats = Some(parse_listen(s).map_err(|e| format!("--stats: {e}"))?);
        }
        if let Some(w) = &o.tcp_window {
            let n = buffer_size("--tcp-window", w)?;
            cfg.tcp.send_buffer = Some(n);
            cfg.tcp.recv_buffer = Some(n);
        }
        if o.tcp_nagle {
            cfg.tcp.nodelay = false;
        }
        if o.tcp_quickack {
            cfg.tcp.quickack = true;
        }
        if let Some(e) = &o.io_engine {
            cfg.io_engine = e.parse().map_err(|e| format!("--io-engine: {e}"))?;
        }
        if o.chap.is_some() || o.mutual_chap.is_some() {
            // Flags override the file for every target and for discovery.
            let parse = |v: &Option<String>, flag: &str| {
                v.as_deref()
                    .map(|s| Credentials::parse(s).map_err(|e| format!("{flag}: {e}")))
                    .transpose()
            };
            let policy = chap_policy(
                parse(&o.chap, "--chap")?,
                parse(&o.mutual_chap, "--mutual-chap")?,
                "--chap/--mutual-chap",
            )?;
            for t in &mut cfg.targets {
                t.chap = policy.clone();
            }
            cfg.discovery_chap = policy;
        }
        if !o.allow.is_empty() {
            let mut acl = Acl::default();
            for a in &o.allow {
                acl.allow(a).map_err(|e| format!("--allow: {e}"))?;
            }
            for t in &mut cfg.targets {
                t.acl = acl.clone();
            }
        }
        if let Some(qd) = o.queue_depth {
            if qd == 0 || qd > MAX_QUEUE_DEPTH {
                return Err(format!(
                    "--queue-depth {qd} (must be 1..={MAX_QUEUE_DEPTH})"
                ));
            }
            for t in &mut cfg.targets {
                t.queue_depth = qd;
            }
        }
        Ok(cfg)
    }

    fn from_flags(o: &Overrides) -> Result<Config, String> {
        let name = o.name.clone().unwrap_or_else(default_target_name);
        validate_iscsi_name(&name).map_err(|e| format!("--name: {e}"))?;
        let mut luns = Vec::new();
        for (i, s) in o.luns.iter().enumerate() {
            let spec = s.parse::<LunSpec>().map_err(|e| format!("--lun: {e}"))?;
            luns.push(LunConfig {
                number: i as u16,
                spec,
            });
        }
        if luns.is_empty() {
            return Err(
                "no LUN given: add --lun SPEC (for example --lun ram:1GiB) or --config FILE".into(),
            );
        }
        Ok(Config {
            listen: vec![parse_listen(DEFAULT_LISTEN)?],
            targets: vec![TargetConfig {
                name,
                alias: None,
                portal_group_tag: 1,
                queue_depth: DEFAULT_QUEUE_DEPTH,
                offers: Offers::default(),
                luns,
                chap: None,
                acl: Acl::default(),
            }],
            limits: Limits::default(),
            log: None,
            source: None,
            state_dir: None,
            stats: None,
            tcp: TcpTuning::default(),
            discovery_chap: None,
            io_engine: IoEngine::default(),
        })
    }

    /// Parses the TOML form. Errors name the file and the key.
    pub fn from_toml(text: &str, path: Option<&Path>) -> Result<Config, String> {
        let at = path
            .map(|p| format!("{}: ", p.display()))
            .unwrap_or_default();
        let f: FileConfig = toml::from_str(text).map_err(|e| {
            let msg = e.message().to_owned();
            match e.span() {
                Some(span) => {
                    let line = text
                        .get(..span.start)
                        .map_or(0, |p| p.lines().count().max(1));
                    format!("{at}line {line}: {msg}")
                }
                None => format!("{at}{msg}"),
            }
        })?;
        let listen = if f.listen.is_empty() {
            vec![parse_listen(DEFAULT_LISTEN)?]
        } else {
            f.listen
                .iter()
                .map(|s| parse_listen(s).map_err(|e| format!("{at}listen: {e}")))
                .collect::<Result<_, _>>()?
        };
        let d = Limits::default();
        let secs = Duration::from_secs;
        let limits = Limits {
            max_sessions: f.limits.max_sessions.unwrap_or(d.max_sessions),
            max_connections: f.limits.max_connections.unwrap_or(d.max_connections),
            login_timeout: f.limits.login_timeout_secs.map_or(d.login_timeout, secs),
            login_text_limit: f.limits.login_text_limit.unwrap_or(d.login_text_limit),
            nop_interval: match f.limits.nop_interval_secs {
                Some(0) => None,
                Some(s) => Some(secs(s)),
                None => d.nop_interval,
            },
            nop_timeout: f.limits.nop_timeout_secs.map_or(d.nop_timeout, secs),
            shutdown_grace: f.limits.shutdown_grace_secs.map_or(d.shutdown_grace, secs),
            max_transfer_bytes: match &f.limits.max_transfer_length {
                Some(s) => {
                    let n = parse_size(s)
                        .map_err(|e| format!("{at}limits.max_transfer_length: {e}"))?;
                    u32::try_from(n)
                        .ok()
                        .filter(|n| (4096..=(64 << 20)).contains(n))
                        .ok_or_else(|| {
                            format!("{at}limits.max_transfer_length: must be 4KiB..=64MiB")
                        })?
                }
                None => d.max_transfer_bytes,
            },
        };
        if limits.max_sessions == 0 || limits.max_connections == 0 {
            return Err(format!(
                "{at}limits: max_sessions and max_connections must be at least 1"
            ));
        }
        if limits.login_text_limit < 8192 {
            return Err(format!("{at}limits.login_text_limit: at least 8192 bytes"));
        }
        if f.targets.is_empty() {
            return Err(format!("{at}no [[target]] defined"));
        }
        let literal_secrets = f.discovery.has_literal_secret()
            || f.targets.iter().any(|t| t.auth.has_literal_secret());
        if literal_secrets {
            if let Some(p) = path {
                refuse_world_readable(p)?;
            }
        }
        let discovery_chap = f.discovery.policy(&format!("{at}discovery"))?;
        let mut targets: Vec<TargetConfig> = Vec::new();
        for (ti, t) in f.targets.iter().enumerate() {
            let name = t.name.clone().unwrap_or_else(default_target_name);
            validate_iscsi_name(&name).map_err(|e| format!("{at}target[{ti}].name: {e}"))?;
            if targets.iter().any(|o| o.name.eq_ignore_ascii_case(&name)) {
                return Err(format!("{at}target name {name} is defined twice"));
            }
            let (offers, queue_depth) = f
                .defaults
                .merged(&t.params)
                .offers()
                .map_err(|e| format!("{at}target {name} params: {e}"))?;
            let mut luns: Vec<LunConfig> = Vec::new();
            for (li, l) in t.luns.iter().enumerate() {
                let spec = l
                    .spec
                    .parse::<LunSpec>()
                    .map_err(|e| format!("{at}target {name} lun[{li}]: {e}"))?;
                let number = l.number.unwrap_or(li as u16);
                if number >= 16384 {
                    return Err(format!(
                        "{at}target {name}: LUN number {number} (must be below 16384)"
                    ));
                }
                if luns.iter().any(|x| x.number == number) {
                    return Err(format!("{at}target {name}: LUN {number} defined twice"));
                }
                luns.push(LunConfig { number, spec });
            }
            if luns.is_empty() {
                return Err(format!("{at}target {name} has no [[target.lun]]"));
            }
            let mut acl = Acl::default();
            for a in &t.allow {
                acl.allow(a)
                    .map_err(|e| format!("{at}target {name} allow: {e}"))?;
            }
            let chap = t.auth.policy(&format!("{at}target {name}"))?;
            targets.push(TargetConfig {
                name,
                alias: t.alias.clone(),
                portal_group_tag: t.portal_group_tag.unwrap_or(1),
                queue_depth,
                offers,
                luns,
                chap,
                acl,
            });
        }
        // State lives next to the configuration unless the file says
        // otherwise: <dir>/<file stem>.state/.
        let state_dir = f.state_dir.or_else(|| {
            let p = path?;
            let stem = p.file_stem()?.to_string_lossy().into_owned();
            Some(
                p.parent()
                    .unwrap_or(Path::new("."))
                    .join(format!("{stem}.state")),
            )
        });
        Ok(Config {
            listen,
            targets,
            limits,
            log: f.log,
            source: path.map(Path::to_owned),
            state_dir,
            stats: f
                .stats
                .as_deref()
                .map(|s| parse_listen(s).map_err(|e| format!("{at}stats: {e}")))
                .transpose()?,
            tcp: TcpTuning {
                send_buffer: f
                    .tcp
                    .send_buffer
                    .as_deref()
                    .map(|v| buffer_size(&format!("{at}tcp.send_buffer"), v))
                    .transpose()?,
                recv_buffer: f
                    .tcp
                    .recv_buffer
                    .as_deref()
                    .map(|v| buffer_size(&format!("{at}tcp.recv_buffer"), v))
                    .transpose()?,
                nodelay: f.tcp.nodelay.unwrap_or(true),
                quickack: f.tcp.quickack.unwrap_or(false),
            },
            discovery_chap,
            io_engine: f
                .io_engine
                .as_deref()
                .map(|e| e.parse().map_err(|e| format!("{at}io_engine: {e}")))
                .transpose()?
                .unwrap_or_default(),
        })
    }
}

/// A file holding CHAP secrets must not be readable by every user.
fn refuse_world_readable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .permissions()
        .mode();
    if mode & 0o004 != 0 {
        return Err(format!(
            "{}: holds CHAP secrets but is world-readable (mode {:o}); run chmod o-r on it or use chap_env",
            path.display(),
            mode & 0o777
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lun_specs() {
        let s: LunSpec = "ram:1GiB".parse().unwrap();
        assert_eq!(s.backend, BackendSpec::Ram { size: 1 << 30 });
        assert_eq!(s.block_size, 512);
        let s: LunSpec = "null:64M,bs=4096,ro".parse().unwrap();
        assert_eq!(s.backend, BackendSpec::Null { size: 64 << 20 });
        assert_eq!((s.block_size, s.read_only), (4096, true));
        let s: LunSpec = "file:/tmp/x.img,size=1G,direct,prealloc".parse().unwrap();
        assert_eq!(
            s.backend,
            BackendSpec::File {
                path: "/tmp/x.img".into(),
                size: Some(1 << 30),
                direct: true,
                preallocate: true
            }
        );
        let s: LunSpec = "block:/dev/loop0".parse().unwrap();
        assert!(matches!(s.backend, BackendSpec::Block { .. }));
        let s: LunSpec = "ram:1G,pbs=4096".parse().unwrap();
        assert_eq!((s.block_size, s.physical_block_size), (512, 4096));
        assert!("ram:1G,bs=4096,pbs=512".parse::<LunSpec>().is_err());
        let s: LunSpec = "ram:1G,thin".parse().unwrap();
        assert!(s.thin && !s.sanitize);
        let s: LunSpec = "file:/x,thin,sanitize".parse().unwrap();
        assert!(s.thin && s.sanitize);
        for bad in [
            "ram",
            "ram:",
            "disk:1G",
            "ram:1G,bs=1024",
            "file:/x,bogus",
            "ram:1G,direct",
            "block:/dev/x,size=1G",
            "ram:100",
            "block:/dev/x,thin",
            "file:/x,size=1G,thin,prealloc",
        ] {
            assert!(bad.parse::<LunSpec>().is_err(), "{bad} should fail");
        }
    }

    #[test]
    fn flags_give_one_target_with_numbered_luns() {
        let c = Config::load(&Overrides {
            name: Some("iqn.2026-11.test:a".into()),
            luns: vec!["ram:1M".into(), "null:1M".into()],
            listen: vec!["[::1]:3261".into()],
            ..Default::default()
        })
        .unwrap();
        assert_eq!(c.listen[0].to_string(), "[::1]:3261");
        assert_eq!(c.targets[0].luns[1].number, 1);
        assert!(Config::load(&Overrides::default())
            .unwrap_err()
            .contains("no LUN"));
        let e = Config::load(&Overrides {
            luns: vec!["ram:1M".into()],
            name: Some("bad name".into()),
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.starts_with("--name"));
        assert!(Config::load(&Overrides {
            luns: vec!["ram:1M".into()],
            listen: vec!["localhost".into()],
            ..Default::default()
        })
        .is_err());
    }

    #[test]
    fn default_name_is_a_valid_iqn() {
        validate_iscsi_name(&default_target_name()).unwrap();
    }

    #[test]
    fn toml_form() {
        let text = r#"
listen = ["127.0.0.1:3262"]
log = "debug"
stats = "127.0.0.1:9262"
[tcp]
send_buffer = "512KiB"
recv_buffer = "512KiB"
nodelay = false
quickack = true
[limits]
max_sessions = 8
nop_interval_secs = 0
[defaults]
queue_depth = 32
max_burst_length = 524288
[[target]]
name = "iqn.2026-11.test:one"
alias = "one"
[target.params]
first_burst_length = 262144
initial_r2t = true
header_digest = ["CRC32C", "None"]
[[target.lun]]
spec = "ram:16MiB"
[[target.lun]]
number = 5
spec = "null:1GiB,bs=4096"
"#;
        let c = Config::from_toml(text, None).unwrap();
        assert_eq!(c.limits.max_sessions, 8);
        assert_eq!(c.limits.nop_interval, None);
        let t = &c.targets[0];
        assert_eq!(t.queue_depth, 32);
        assert_eq!(t.offers.max_burst_length, 524288);
        assert_eq!(t.offers.first_burst_length, 262144);
        assert!(t.offers.initial_r2t);
        assert_eq!(t.offers.header_digest[0], DigestKind::Crc32c);
        assert_eq!(t.luns[1].number, 5);
        assert_eq!(c.stats, Some("127.0.0.1:9262".parse().unwrap()));
        assert_eq!(
            c.tcp,
            TcpTuning {
                send_buffer: Some(512 << 10),
                recv_buffer: Some(512 << 10),
                nodelay: false,
                quickack: true
            }
        );
        let e = Config::from_toml(&text.replace("512KiB", "1k"), None).unwrap_err();
        assert!(e.contains("tcp.send_buffer"), "{e}");
        let e = Config::from_toml(&text.replace("127.0.0.1:9262", "localhost"), None).unwrap_err();
        assert!(e.starts_with("stats:"), "{e}");
        // The I/O engine: io_uring unless told otherwise.
        assert_eq!(c.io_engine, IoEngine::Uring);
        let pool = format!("io_engine = \"pool\"\n{text}");
        assert_eq!(
            Config::from_toml(&pool, None).unwrap().io_engine,
            IoEngine::Pool
        );
        let bad = format!("io_engine = \"threads\"\n{text}");
        let e = Config::from_toml(&bad, None).unwrap_err();
        assert!(
            e.starts_with("io_engine:") && e.contains("uring or pool"),
            "{e}"
        );
    }

    #[test]
    fn io_engine_flag() {
        let o = |engine: &str| Overrides {
            luns: vec!["ram:1MiB".into()],
            io_engine: Some(engine.into()),
            ..Overrides::default()
        };
        assert_eq!(Config::load(&o("pool")).unwrap().io_engine, IoEngine::Pool);
        assert_eq!(
            Config::load(&o("uring")).unwrap().io_engine,
            IoEngine::Uring
        );
        let e = Config::load(&o("aio")).unwrap_err();
        assert!(e.starts_with("--io-engine:"), "{e}");
    }

    #[test]
    fn the_documented_example_parses() {
        let doc = include_str!("../../../docs/config.md");
        let start = doc.find("```toml\n").unwrap() + 8;
        let end = start + doc[start..].find("```").unwrap();
        let c = Config::from_toml(&doc[start..end], None).unwrap();
        assert_eq!(c.listen.len(), 2);
        assert_eq!(c.targets[0].offers.first_burst_length, 262144);
        assert_eq!(c.targets[0].luns[1].number, 5);
        let chap = c.targets[0].chap.as_ref().unwrap();
        assert_eq!(chap.initiator.user, "alice");
        assert_eq!(chap.target.as_ref().unwrap().user, "disk1");
        assert_eq!(c.discovery_chap.as_ref().unwrap().initiator.user, "finder");
        assert!(!c.targets[0].acl.is_open());
        assert_eq!(
            c.limits,
            Limits::default(),
            "the example shows the defaults"
        );
        assert_eq!(c.io_engine, IoEngine::default());
    }

    #[test]
    fn toml_errors_name_the_problem() {
        let e = Config::from_toml(
            "[[target]]\nname = \"iqn.x:y\"\nbogus = 1\n",
            Some(Path::new("t.toml")),
        )
        .unwrap_err();
        assert!(e.starts_with("t.toml: line "), "{e}");
        assert!(e.contains("bogus"), "{e}");
        let e = Config::from_toml(
            "[[target]]\nname = \"iqn.x:y\"\n[[target.lun]]\nspec = \"ram:1Q\"\n",
            None,
        )
        .unwrap_err();
        assert!(e.contains("lun[0]"), "{e}");
        let e = Config::from_toml(
            "[[target]]\nname = \"iqn.x:y\"\n[target.params]\nfirst_burst_length = 1048576\nmax_burst_length = 65536\n[[target.lun]]\nspec = \"ram:1M\"\n",
            None,
        )
        .unwrap_err();
        assert!(e.contains("FirstBurstLength"), "{e}");
        let e = Config::from_toml("[[target]]\nname = \"iqn.x:y\"\n[target.params]\nmax_burst_length = 100\n[[target.lun]]\nspec = \"ram:1M\"\n", None).unwrap_err();
        assert!(e.contains("MaxBurstLength"), "{e}");
        assert!(Config::from_toml("", None)
            .unwrap_err()
            .contains("no [[target]]"));
    }
}
