//! What can be wrong with a configuration: [`ConfigError`], each variant
//! carrying where the mistake is (the file, the key or flag, the target
//! and LUN) and the value given.

use std::io;
use std::path::PathBuf;

use ironlun_proto::chap::ChapError;

use super::io_engine::UnknownIoEngine;
use super::lun_spec::LunSpecError;
use super::names::NameError;

/// A configuration the daemon refuses. `key` fields name the place as the
/// user wrote it: a flag (`--listen`), a key in the file
/// (`tcp.send_buffer`, `target[0].name`) or a target and key
/// (`target iqn.… allow`); errors found inside a file come wrapped in
/// [`ConfigError::InFile`], which names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The `--config` file could not be read.
    #[error("{}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    /// A mistake in the file at `path`.
    #[error("{}: {source}", path.display())]
    InFile {
        path: PathBuf,
        source: Box<ConfigError>,
    },
    /// A mistake in the configuration a management API change would
    /// leave: the running document edited, not a file anyone wrote.
    #[error("the configuration this change leaves: {source}")]
    AfterChange { source: Box<ConfigError> },
    /// TOML syntax, a value of the wrong type or an unknown key, at a line
    /// when the parser knows one.
    #[error("{}{message}", line_prefix(*.line))]
    Syntax {
        line: Option<usize>,
        message: String,
    },
    /// `--name` or `--lun` together with `--config`.
    #[error("--name and --lun cannot be combined with --config (put them in the file)")]
    FlagsWithFile,
    /// Neither `--lun` nor `--config`.
    #[error("no LUN given: add --lun SPEC (for example --lun ram:1GiB) or --config FILE")]
    NoLuns,
    /// A file without `[[target]]`.
    #[error("no [[target]] defined")]
    NoTargets,
    /// A portal or statistics address that is not `ADDR:PORT`.
    #[error("{key}: listen address '{value}' is not ADDR:PORT (IPv6 as [::1]:3260)")]
    Address { key: String, value: String },
    /// `HOST:PORT` with a host name where an address is needed: a portal
    /// is bound to one address, which a name need not stay.
    #[error("{key}: '{value}': host names are not accepted, only IP addresses (ADDR:PORT, such as 192.0.2.10:3260 or [::1]:3260)")]
    HostName { key: String, value: String },
    /// A number outside the range the key allows.
    #[error("{key} {value}: must be {allowed}")]
    OutOfRange {
        key: String,
        value: String,
        allowed: String,
    },
    /// A value the layer below refused (a size, a digest list, an access
    /// entry, negotiation offers, a CHAP variable); `problem` says why.
    #[error("{key}: {problem}")]
    Invalid { key: String, problem: String },
    /// `io_engine` or `--io-engine` names no engine.
    #[error("{key}: {source}")]
    IoEngine {
        key: String,
        source: UnknownIoEngine,
    },
    /// `--name` or `target[N].name` is not an iSCSI name.
    #[error("{key}: {source}")]
    Name { key: String, source: NameError },
    /// Two targets with the same name (names compare case-insensitively).
    #[error("target name {name} is defined twice")]
    DuplicateTarget { name: String },
    /// A LUN spec (`--lun` or `spec = …` of `target NAME lun[N]`) that
    /// does not parse.
    #[error("{key}: {source}")]
    Lun { key: String, source: LunSpecError },
    /// A LUN number of 16384 or more (SAM-5 flat addressing).
    #[error("target {target}: LUN number {number} (must be below 16384)")]
    LunNumber { target: String, number: u16 },
    /// Two LUNs of one target with the same number.
    #[error("target {target}: LUN {number} defined twice")]
    DuplicateLun { target: String, number: u16 },
    /// A target without `[[target.lun]]`.
    #[error("target {target} has no [[target.lun]]")]
    NoTargetLuns { target: String },
    /// Negotiation offers or queue depth of one target (`[defaults]`
    /// merged with its `[target.params]`).
    #[error("target {target} params: {source}")]
    Params {
        target: String,
        source: Box<ConfigError>,
    },
    /// Negotiation offers RFC 7143 does not allow (a value outside a
    /// key's range, FirstBurstLength above MaxBurstLength); the message
    /// names the key.
    #[error("{problem}")]
    Offers { problem: String },
    /// `USER:SECRET` that does not parse. The secret is never quoted.
    #[error("{key}: {source}")]
    Chap { key: String, source: ChapError },
    /// Both the literal and the `_env` form of a CHAP key.
    #[error("{scope}: give {key} or {key}_env, not both")]
    ChapTwice { scope: String, key: &'static str },
    /// CHAP credentials that do not make a policy (mutual without
    /// one-way, one secret for both); the message, from
    /// [`crate::access::chap_policy`], starts with `scope`.
    #[error("{problem}")]
    ChapPolicy { scope: String, problem: String },
    /// A file holding CHAP secrets that every user may read.
    #[error("holds CHAP secrets but is world-readable (mode {mode:o}); run chmod o-r on it or use chap_env")]
    WorldReadable { mode: u32 },
    /// The permissions of a file holding CHAP secrets could not be read.
    #[error("cannot check its permissions: {source}")]
    Permissions { source: io::Error },
}

fn line_prefix(line: Option<usize>) -> String {
    line.map(|l| format!("line {l}: ")).unwrap_or_default()
}

impl ConfigError {
    /// A value refused by the layer below, at `key`.
    pub(crate) fn invalid(key: impl Into<String>, problem: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            key: key.into(),
            problem: problem.into(),
        }
    }

    /// The same error, said to be in the file at `path`.
    pub fn in_file(self, path: Option<&std::path::Path>) -> ConfigError {
        match path {
            Some(p) => ConfigError::InFile {
                path: p.to_owned(),
                source: Box::new(self),
            },
            None => self,
        }
    }
}
