//! The command line: [`Overrides`] as the CLI fills them in, and
//! [`Config::load`], which builds a configuration from flags alone or
//! from a file with flags on top.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ironlun_proto::params::Offers;

use super::chap::flags_policy;
use super::limits::{buffer_size, busy_poll};
use super::{
    check_queue_depth, check_stores_unshared, default_listen, default_target_name, lun_spec, names,
    parse_listen, AdminHttp, Config, ConfigError, DefaultMap, IoEngine, Limits, LunConfig,
    TargetConfig, TcpTuning, DEFAULT_QUEUE_DEPTH,
};
use crate::access::Acl;

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
    /// Latency mode's busy-poll budget (`tcp.busy_poll`).
    pub busy_poll: Option<String>,
    /// `USER:SECRET` initiators must authenticate with (every target and
    /// discovery).
    pub chap: Option<String>,
    /// `USER:SECRET` of the target for mutual CHAP.
    pub mutual_chap: Option<String>,
    /// Initiator names and networks allowed on every target.
    pub allow: Vec<String>,
    /// `uring` or `pool` (see [`IoEngine`]).
    pub io_engine: Option<String>,
    /// The management API's Unix socket.
    pub admin_socket: Option<PathBuf>,
    /// The management API also over HTTP on this loopback address.
    pub admin_http: Option<String>,
    /// The bearer token the HTTP management API requires.
    pub admin_token_file: Option<PathBuf>,
    /// Where `config save PATH` may write besides the daemon's file.
    pub admin_save_dir: Option<PathBuf>,
}

impl Config {
    /// Builds the configuration from a file and/or flags.
    pub fn load(o: &Overrides) -> Result<Config, ConfigError> {
        let mut cfg = match &o.config {
            Some(path) => {
                if o.name.is_some() || !o.luns.is_empty() {
                    return Err(ConfigError::FlagsWithFile);
                }
                Config::read(path)?
            }
            None => Config::from_flags(o)?,
        };
        o.apply_network(&mut cfg)?;
        o.apply_access(&mut cfg)?;
        Ok(cfg)
    }

    /// Reads and checks the file at `path`.
    fn read(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::from_toml(&text, Some(path))
    }

    /// One target from `--name` and `--lun`, everything else default.
    fn from_flags(o: &Overrides) -> Result<Config, ConfigError> {
        let name = o.name.clone().unwrap_or_else(default_target_name);
        let name = names::check_name("--name", &name)?;
        let mut luns = Vec::new();
        for (i, s) in o.luns.iter().enumerate() {
            luns.push(LunConfig {
                number: i as u16,
                spec: lun_spec::parse_at("--lun".to_owned(), s)?,
                schedule: None,
            });
        }
        if luns.is_empty() {
            return Err(ConfigError::NoLuns);
        }
        let cfg = Config {
            listen: vec![default_listen()],
            targets: vec![Arc::new(TargetConfig {
                name,
                alias: None,
                portal_group_tag: 1,
                relative_port: 1,
                alua: Default::default(),
                group: None,
                queue_depth: DEFAULT_QUEUE_DEPTH,
                offers: Offers::default(),
                luns,
                chap: None,
                acl: Acl::default(),
                initiators: Vec::new(),
                default_map: DefaultMap::All,
            })],
            limits: Limits::default(),
            log: None,
            source: None,
            state_dir: None,
            stats: None,
            tcp: TcpTuning::default(),
            discovery_chap: None,
            io_engine: IoEngine::default(),
            admin_socket: None,
            admin_http: None,
            save_on_change: false,
            admin_save_dir: None,
        };
        check_stores_unshared(&cfg.targets)?;
        Ok(cfg)
    }
}

impl Overrides {
    /// The flags that stay on top of a file when it is read again
    /// (`--config`, `--name` and `--lun` are the file's business).
    pub fn on_top_of_file(&self) -> Overrides {
        Overrides {
            config: None,
            name: None,
            luns: Vec::new(),
            ..self.clone()
        }
    }

    /// Applies these flags to a configuration read from a file.
    pub fn apply_on_top(&self, cfg: &mut Config) -> Result<(), ConfigError> {
        self.apply_network(cfg)?;
        self.apply_access(cfg)
    }

    /// The configuration these flags give, written as a file: what the
    /// operator's changes edit and `config save` writes when the daemon
    /// started without a file.
    pub fn as_document(&self) -> toml_edit::DocumentMut {
        use toml_edit::{value, ArrayOfTables, Item, Table};
        let mut doc = toml_edit::DocumentMut::new();
        let list = |l: &[String]| {
            let mut a = toml_edit::Array::new();
            for s in l {
                a.push(s.as_str());
            }
            value(a)
        };
        if !self.listen.is_empty() {
            doc.insert("listen", list(&self.listen));
        }
        let path = |p: &Path| value(p.to_string_lossy().as_ref());
        if let Some(d) = &self.state_dir {
            doc.insert("state_dir", path(d));
        }
        if let Some(s) = &self.stats {
            doc.insert("stats", value(s.as_str()));
        }
        if let Some(e) = &self.io_engine {
            doc.insert("io_engine", value(e.as_str()));
        }
        if let Some(p) = &self.admin_socket {
            doc.insert("admin_socket", path(p));
        }
        if let Some(a) = &self.admin_http {
            doc.insert("admin_http", value(a.as_str()));
        }
        if let Some(p) = &self.admin_token_file {
            doc.insert("admin_token_file", path(p));
        }
        if let Some(p) = &self.admin_save_dir {
            doc.insert("admin_save_dir", path(p));
        }
        let mut tcp = Table::new();
        if let Some(w) = &self.tcp_window {
            tcp.insert("send_buffer", value(w.as_str()));
            tcp.insert("recv_buffer", value(w.as_str()));
        }
        if self.tcp_nagle {
            tcp.insert("nodelay", value(false));
        }
        if self.tcp_quickack {
            tcp.insert("quickack", value(true));
        }
        if let Some(b) = &self.busy_poll {
            tcp.insert("busy_poll", value(b.as_str()));
        }
        if !tcp.is_empty() {
            doc.insert("tcp", Item::Table(tcp));
        }
        let mut t = Table::new();
        t.insert(
            "name",
            value(self.name.clone().unwrap_or_else(default_target_name)),
        );
        if !self.allow.is_empty() {
            t.insert("allow", list(&self.allow));
        }
        for (key, v) in [("chap", &self.chap), ("mutual_chap", &self.mutual_chap)] {
            if let Some(v) = v {
                t.insert(key, value(v.as_str()));
                let mut d = doc
                    .get("discovery")
                    .and_then(Item::as_table)
                    .cloned()
                    .unwrap_or_default();
                d.insert(key, value(v.as_str()));
                doc.insert("discovery", Item::Table(d));
            }
        }
        if let Some(qd) = self.queue_depth {
            let mut p = Table::new();
            p.insert("queue_depth", value(i64::from(qd)));
            t.insert("params", Item::Table(p));
        }
        let mut luns = ArrayOfTables::new();
        for s in &self.luns {
            let mut l = Table::new();
            l.insert("spec", value(s.as_str()));
            luns.push(l);
        }
        t.insert("lun", Item::ArrayOfTables(luns));
        let mut targets = ArrayOfTables::new();
        targets.push(t);
        doc.insert("target", Item::ArrayOfTables(targets));
        doc
    }

    /// Portals, state, statistics, socket options and the I/O engine.
    fn apply_network(&self, cfg: &mut Config) -> Result<(), ConfigError> {
        if !self.listen.is_empty() {
            cfg.listen = self
                .listen
                .iter()
                .map(|s| parse_listen("--listen", s))
                .collect::<Result<_, _>>()?;
        }
        if let Some(dir) = &self.state_dir {
            cfg.state_dir = Some(dir.clone());
        }
        if let Some(s) = &self.stats {
            cfg.stats = Some(parse_listen("--stats", s)?);
        }
        if let Some(w) = &self.tcp_window {
            let n = buffer_size("--tcp-window", w)?;
            cfg.tcp.send_buffer = Some(n);
            cfg.tcp.recv_buffer = Some(n);
        }
        if self.tcp_nagle {
            cfg.tcp.nodelay = false;
        }
        if self.tcp_quickack {
            cfg.tcp.quickack = true;
        }
        if let Some(b) = &self.busy_poll {
            cfg.tcp.busy_poll = busy_poll("--busy-poll", b)?;
        }
        if let Some(e) = &self.io_engine {
            cfg.io_engine = IoEngine::parse_at("--io-engine", e)?;
        }
        if let Some(p) = &self.admin_socket {
            cfg.admin_socket = Some(p.clone());
        }
        if let Some(p) = &self.admin_save_dir {
            cfg.admin_save_dir = Some(p.clone());
        }
        if self.admin_http.is_some() || self.admin_token_file.is_some() {
            let file = cfg.admin_http.take();
            let addr = self
                .admin_http
                .clone()
                .or_else(|| file.as_ref().map(|h| h.addr.to_string()));
            let token = self
                .admin_token_file
                .clone()
                .or_else(|| file.map(|h| h.token_file));
            cfg.admin_http = AdminHttp::check(addr.as_deref(), token.as_deref())?;
        }
        Ok(())
    }

    /// CHAP, access lists and queue depth: flags override the file for
    /// every target (and CHAP for discovery too).
    fn apply_access(&self, cfg: &mut Config) -> Result<(), ConfigError> {
        if self.chap.is_some() || self.mutual_chap.is_some() {
            let policy = flags_policy(self.chap.as_deref(), self.mutual_chap.as_deref())?;
            for t in &mut cfg.targets {
                Arc::make_mut(t).chap = policy.clone();
            }
            cfg.discovery_chap = policy;
        }
        if !self.allow.is_empty() {
            let mut acl = Acl::default();
            for a in &self.allow {
                acl.allow(a)
                    .map_err(|e| ConfigError::invalid("--allow", e))?;
            }
            for t in &mut cfg.targets {
                Arc::make_mut(t).acl = acl.clone();
            }
        }
        if let Some(qd) = self.queue_depth {
            check_queue_depth("--queue-depth", qd)?;
            for t in &mut cfg.targets {
                Arc::make_mut(t).queue_depth = qd;
            }
        }
        Ok(())
    }
}
