//! The command line: [`Overrides`] as the CLI fills them in, and
//! [`Config::load`], which builds a configuration from flags alone or
//! from a file with flags on top.

use std::path::{Path, PathBuf};

use ironlun_proto::params::Offers;

use super::chap::flags_policy;
use super::limits::buffer_size;
use super::{
    check_queue_depth, default_listen, default_target_name, lun_spec, names, parse_listen, Config,
    ConfigError, IoEngine, Limits, LunConfig, TargetConfig, TcpTuning, DEFAULT_QUEUE_DEPTH,
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
        names::check_name("--name", &name)?;
        let mut luns = Vec::new();
        for (i, s) in o.luns.iter().enumerate() {
            luns.push(LunConfig {
                number: i as u16,
                spec: lun_spec::parse_at("--lun".to_owned(), s)?,
            });
        }
        if luns.is_empty() {
            return Err(ConfigError::NoLuns);
        }
        Ok(Config {
            listen: vec![default_listen()],
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
}

impl Overrides {
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
        if let Some(e) = &self.io_engine {
            cfg.io_engine = IoEngine::parse_at("--io-engine", e)?;
        }
        Ok(())
    }

    /// CHAP, access lists and queue depth: flags override the file for
    /// every target (and CHAP for discovery too).
    fn apply_access(&self, cfg: &mut Config) -> Result<(), ConfigError> {
        if self.chap.is_some() || self.mutual_chap.is_some() {
            let policy = flags_policy(self.chap.as_deref(), self.mutual_chap.as_deref())?;
            for t in &mut cfg.targets {
                t.chap = policy.clone();
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
                t.acl = acl.clone();
            }
        }
        if let Some(qd) = self.queue_depth {
            check_queue_depth("--queue-depth", qd)?;
            for t in &mut cfg.targets {
                t.queue_depth = qd;
            }
        }
        Ok(())
    }
}
