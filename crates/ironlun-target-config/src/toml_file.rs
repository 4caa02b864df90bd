//! The TOML file form: the top level, `[[target]]` and `[[target.lun]]`
//! as serde reads them, and [`Config::from_toml`], which checks them
//! section by section.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::chap::{refuse_world_readable, FileAuth};
use super::initiators::{self, FileInitiator};
use super::limits::{FileLimits, FileTcp};
use super::params::FileParams;
use super::{
    default_listen, default_target_name, lun_spec, names, parse_listen, AdminHttp, BackendSpec,
    Config, ConfigError, IoEngine, LunConfig, TargetConfig, LUN_NUMBER_LIMIT,
};
use crate::access::Acl;

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
    admin_socket: Option<PathBuf>,
    admin_http: Option<String>,
    admin_token_file: Option<PathBuf>,
    #[serde(default)]
    save_on_change: bool,
    admin_save_dir: Option<PathBuf>,
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
    /// What initiators without an entry see: "all" or "none".
    default_map: Option<String>,
    /// Initiators with a LUN map or CHAP of their own.
    #[serde(default, rename = "initiator")]
    initiators: Vec<FileInitiator>,
    /// Target port groups (ALUA): `[target.alua]`.
    alua: Option<super::alua::FileAlua>,
    /// The gateway group serving the target: `[target.group]`.
    group: Option<super::group::FileGroup>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLun {
    number: Option<u16>,
    spec: String,
    /// A snapshot schedule (`config::schedule`).
    snapshot_every: Option<String>,
    snapshot_keep: Option<i64>,
    snapshot_prefix: Option<String>,
}

impl Config {
    /// Parses the TOML form. Errors name the file (when `path` is given)
    /// and the key.
    pub fn from_toml(text: &str, path: Option<&Path>) -> Result<Config, ConfigError> {
        check_file(text, path).map_err(|e| e.in_file(path))
    }
}

/// Every section in the order the checks have always run, so that of two
/// mistakes the same one is reported.
fn check_file(text: &str, path: Option<&Path>) -> Result<Config, ConfigError> {
    let f = parse(text)?;
    let listen = f.listen()?;
    let limits = f.limits.check()?;
    if f.targets.is_empty() {
        return Err(ConfigError::NoTargets);
    }
    let literal_secrets = f.discovery.has_literal_secret()
        || f.targets.iter().any(|t| {
            t.auth.has_literal_secret() || t.initiators.iter().any(|i| i.has_literal_secret())
        });
    if let (true, Some(p)) = (literal_secrets, path) {
        refuse_world_readable(p)?;
    }
    let discovery_chap = f.discovery.policy("discovery")?;
    let targets = f.check_targets()?;
    // A grouped target's gateway listens on its portal unless the file
    // says where (the same document serves every gateway).
    let listen = match targets.iter().find_map(|t| t.group.as_ref()) {
        Some(g) if f.listen.is_empty() => vec![g.local().portal],
        _ => listen,
    };
    let stats = f
        .stats
        .as_deref()
        .map(|s| parse_listen("stats", s))
        .transpose()?;
    let tcp = f.tcp.check()?;
    let io_engine = f
        .io_engine
        .as_deref()
        .map(|e| IoEngine::parse_at("io_engine", e))
        .transpose()?
        .unwrap_or_default();
    Ok(Config {
        listen,
        targets,
        limits,
        log: f.log,
        source: path.map(Path::to_owned),
        state_dir: f.state_dir.or_else(|| state_dir_beside(path?)),
        stats,
        tcp,
        discovery_chap,
        io_engine,
        admin_http: AdminHttp::check(f.admin_http.as_deref(), f.admin_token_file.as_deref())?,
        admin_socket: f.admin_socket,
        save_on_change: f.save_on_change,
        admin_save_dir: f.admin_save_dir,
    })
}

/// TOML syntax, types and unknown keys, with the line of the mistake.
fn parse(text: &str) -> Result<FileConfig, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Syntax {
        line: error_line(text, e.span(), &e.to_string()),
        message: e.message().trim().replace('\n', "; "),
    })
}

/// The line of a TOML error: from its span, else from its text ("TOML
/// parse error at line N, column M", which the parsers print when they
/// keep no span).
pub fn error_line(text: &str, span: Option<std::ops::Range<usize>>, shown: &str) -> Option<usize> {
    if let Some(span) = span {
        return Some(
            text.get(..span.start)
                .map_or(0, |p| p.lines().count().max(1)),
        );
    }
    let rest = shown.split("at line ").nth(1)?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// State lives next to the configuration unless the file says otherwise:
/// `<dir>/<file stem>.state/`.
fn state_dir_beside(path: &Path) -> Option<PathBuf> {
    let stem = path.file_stem()?.to_string_lossy().into_owned();
    Some(
        path.parent()
            .unwrap_or(Path::new("."))
            .join(format!("{stem}.state")),
    )
}

impl FileConfig {
    fn listen(&self) -> Result<Vec<std::net::SocketAddr>, ConfigError> {
        if self.listen.is_empty() {
            return Ok(vec![default_listen()]);
        }
        self.listen
            .iter()
            .map(|s| parse_listen("listen", s))
            .collect()
    }

    fn check_targets(&self) -> Result<Vec<Arc<TargetConfig>>, ConfigError> {
        let mut targets = Vec::with_capacity(self.targets.len());
        // Lower-case names seen: a set, so that a thousand targets are
        // checked in linear time (SIGHUP and `admin apply` check the
        // whole file).
        let mut seen = HashSet::with_capacity(self.targets.len());
        for (ti, t) in self.targets.iter().enumerate() {
            let name = t.name.clone().unwrap_or_else(default_target_name);
            let name = names::check_name(&format!("target[{ti}].name"), &name)?;
            if !seen.insert(name.clone()) {
                return Err(ConfigError::DuplicateTarget { name });
            }
            let target = t.check(name, &self.defaults)?;
            targets.push(Arc::new(target));
        }
        check_stores_unshared(&targets)?;
        Ok(targets)
    }
}

impl FileTarget {
    /// This target, called `name`, with `defaults` under its params.
    fn check(&self, name: String, defaults: &FileParams) -> Result<TargetConfig, ConfigError> {
        let (offers, queue_depth) =
            defaults
                .merged(&self.params)
                .offers()
                .map_err(|e| ConfigError::Params {
                    target: name.clone(),
                    source: Box::new(e),
                })?;
        let luns = self.check_luns(&name)?;
        let mut acl = Acl::default();
        for a in &self.allow {
            acl.allow(a)
                .map_err(|e| ConfigError::invalid(format!("target {name} allow"), e))?;
        }
        let chap = self.auth.policy(&format!("target {name}"))?;
        let initiators = initiators::check(&name, &self.initiators, &luns, &acl)?;
        let default_map = initiators::default_map(&name, self.default_map.as_deref())?;
        let group = self
            .group
            .as_ref()
            .map(|g| {
                let local = super::group::local_gateway();
                let (pgt, alua) = (self.portal_group_tag.is_some(), self.alua.is_some());
                super::group::check(&name, g, local.as_deref(), pgt, alua, &luns)
            })
            .transpose()?;
        let (portal_group_tag, alua, relative_port) = match &group {
            Some(g) => (g.local().tpg, g.alua(), g.local().tpg),
            None => {
                let tag = self.portal_group_tag.unwrap_or(1);
                let (alua, port) = super::alua::check(&name, tag, self.alua.as_ref())?;
                (tag, alua, port)
            }
        };
        Ok(TargetConfig {
            group,
            name,
            alias: self.alias.clone(),
            portal_group_tag,
            relative_port,
            alua,
            queue_depth,
            offers,
            luns,
            chap,
            acl,
            initiators,
            default_map,
        })
    }

    /// The LUNs of target `name`, numbered from 0 in file order unless
    /// they say otherwise.
    fn check_luns(&self, name: &str) -> Result<Vec<LunConfig>, ConfigError> {
        let mut luns: Vec<LunConfig> = Vec::new();
        for (li, l) in self.luns.iter().enumerate() {
            let spec = lun_spec::parse_at(format!("target {name} lun[{li}]"), &l.spec)?;
            let number = l.number.unwrap_or(li as u16);
            let target = || name.to_owned();
            if number >= LUN_NUMBER_LIMIT {
                return Err(ConfigError::LunNumber {
                    target: target(),
                    number,
                });
            }
            if luns.iter().any(|x| x.number == number) {
                return Err(ConfigError::DuplicateLun {
                    target: target(),
                    number,
                });
            }
            let keys = super::schedule::FileSchedule {
                every: l.snapshot_every.as_deref(),
                keep: l.snapshot_keep,
                prefix: l.snapshot_prefix.as_deref(),
            };
            let what = format!("target {name} LUN {number}");
            let schedule = super::schedule::check(&what, &spec.backend, &keys)?;
            luns.push(LunConfig {
                number,
                spec,
                schedule,
            });
        }
        if luns.is_empty() {
            return Err(ConfigError::NoTargetLuns {
                target: name.to_owned(),
            });
        }
        Ok(luns)
    }
}

/// Two LUNs on one file, device or RBD image would write over each other:
/// each keeps state of its own about the store (the LU's exclusion for
/// COMPARE AND WRITE and WRITE ATOMIC, reservations, the size it last
/// saw), so a second LUN would break what the first promises. An RBD
/// image is one store whatever `conf=`, `id=` or `keyring=` reach it
/// with (docs/rbd.md, "One gateway per image", is the cluster-wide half).
pub fn check_stores_unshared(targets: &[Arc<TargetConfig>]) -> Result<(), ConfigError> {
    let mut seen: HashMap<StoreKey<'_>, (&str, u16)> = HashMap::new();
    for t in targets {
        for l in &t.luns {
            let Some(key) = StoreKey::of(&l.spec.backend) else {
                continue;
            };
            if let Some((target, lun)) = seen.get(&key) {
                return Err(ConfigError::invalid(
                    format!("target {} LUN {}", t.name, l.number),
                    format!("{key} is already the store of target {target} LUN {lun}"),
                ));
            }
            seen.insert(key, (&t.name, l.number));
        }
    }
    Ok(())
}

/// What makes two LUNs' stores the same one.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum StoreKey<'a> {
    Path(&'a Path),
    /// Pool and image: Ceph's names are case-sensitive.
    Rbd {
        pool: &'a str,
        image: &'a str,
    },
}

impl<'a> StoreKey<'a> {
    /// `None` for stores of the LUN's own (RAM, null).
    fn of(spec: &'a BackendSpec) -> Option<StoreKey<'a>> {
        match spec {
            BackendSpec::File { path, .. } | BackendSpec::Block { path, .. } => {
                Some(StoreKey::Path(path))
            }
            BackendSpec::Rbd(r) => Some(StoreKey::Rbd {
                pool: &r.pool,
                image: &r.image,
            }),
            BackendSpec::Null { .. } | BackendSpec::Ram { .. } => None,
        }
    }
}

impl std::fmt::Display for StoreKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreKey::Path(p) => write!(f, "{}", p.display()),
            StoreKey::Rbd { pool, image } => write!(f, "RBD image {pool}/{image}"),
        }
    }
}
