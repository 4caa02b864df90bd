//! Per-initiator LUN maps: `[[target.initiator]]` entries, each naming an
//! initiator and, optionally, its own LUN map (mapped LUN number → the
//! target's LUN, read-only per mapping, like LIO's mapped LUNs) and its
//! own CHAP credentials; and `default_map`, what an initiator without an
//! entry sees.
//!
//! ```toml
//! [[target]]
//! default_map = "none"          # "all" (the default): the target's LUNs
//! [[target.initiator]]
//! name = "iqn.2026-11.host:b"
//! luns = [{ lun = 0, target_lun = 1, read_only = true }]
//! chap_env = "HOST_B_CHAP"
//! ```
//!
//! Who may log in is still the target's `allow` list: an entry for a name
//! that list refuses is a mistake, reported as such.

use ironlun_proto::chap::ChapPolicy;
use serde::Deserialize;

use super::chap::FileAuth;
use super::{names, ConfigError, LunConfig};
use crate::access::Acl;

/// Mapped LUNs per initiator: a bound on configuration size.
pub const MAX_MAPPED_LUNS: usize = 1024;
/// Initiator entries per target.
pub const MAX_INITIATORS: usize = 4096;

/// What an initiator without an entry of its own sees.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DefaultMap {
    /// The target's LUNs, numbered as the target numbers them.
    #[default]
    All,
    /// No LUN at all (REPORT LUNS is empty; the target is not listed in
    /// SendTargets for it).
    None,
}

/// One initiator's entry, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct InitiatorEntry {
    /// Lower case: iSCSI names compare without regard to case
    /// (RFC 7143 §4.2.7.1).
    pub name: String,
    /// Its own map; `None`: the target's LUNs as numbered.
    pub luns: Option<Vec<MappedLun>>,
    /// CHAP it must use instead of the target's.
    pub chap: Option<ChapPolicy>,
}

/// One mapping of an initiator's map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MappedLun {
    /// The number the initiator sees.
    pub lun: u16,
    /// The target's LUN behind it.
    pub target_lun: u16,
    /// Writes through this mapping are refused (DATA PROTECT / WRITE
    /// PROTECTED) and MODE SENSE shows WP.
    pub read_only: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileInitiator {
    name: String,
    luns: Option<Vec<FileMapped>>,
    #[serde(flatten)]
    auth: FileAuth,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMapped {
    lun: u16,
    target_lun: u16,
    #[serde(default)]
    read_only: bool,
}

impl FileInitiator {
    pub(super) fn has_literal_secret(&self) -> bool {
        self.auth.has_literal_secret()
    }
}

/// `default_map` as written.
pub(super) fn default_map(target: &str, v: Option<&str>) -> Result<DefaultMap, ConfigError> {
    match v {
        None | Some("all") => Ok(DefaultMap::All),
        Some("none") => Ok(DefaultMap::None),
        Some(other) => Err(ConfigError::invalid(
            format!("target {target} default_map"),
            format!("'{other}' is neither \"all\" nor \"none\""),
        )),
    }
}

/// The entries of target `target`, checked against its LUNs and access
/// list.
pub(super) fn check(
    target: &str,
    entries: &[FileInitiator],
    luns: &[LunConfig],
    acl: &Acl,
) -> Result<Vec<InitiatorEntry>, ConfigError> {
    if entries.len() > MAX_INITIATORS {
        return Err(ConfigError::invalid(
            format!("target {target} initiator"),
            format!("more than {MAX_INITIATORS} entries"),
        ));
    }
    let mut out: Vec<InitiatorEntry> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let key = format!("target {target} initiator[{i}]");
        let name = names::check_name(&format!("{key}.name"), &e.name)?;
        if out.iter().any(|o| o.name == name) {
            return Err(ConfigError::invalid(key, format!("{name} has two entries")));
        }
        if !acl.admits_name(&name) {
            return Err(ConfigError::invalid(
                key,
                format!("{name} has an entry but the target's allow list refuses it: add it there"),
            ));
        }
        let maps = e
            .luns
            .as_deref()
            .map(|m| check_map(&key, m, luns))
            .transpose()?;
        let chap = e.auth.policy(&key)?;
        out.push(InitiatorEntry {
            name,
            luns: maps,
            chap,
        });
    }
    Ok(out)
}

fn check_map(
    key: &str,
    m: &[FileMapped],
    luns: &[LunConfig],
) -> Result<Vec<MappedLun>, ConfigError> {
    if m.len() > MAX_MAPPED_LUNS {
        return Err(ConfigError::invalid(
            format!("{key}.luns"),
            format!("more than {MAX_MAPPED_LUNS} mappings"),
        ));
    }
    let mut out: Vec<MappedLun> = Vec::new();
    for f in m {
        let bad = |why: String| ConfigError::invalid(format!("{key}.luns"), why);
        if f.lun >= super::LUN_NUMBER_LIMIT {
            return Err(bad(format!(
                "LUN {} is beyond SAM-5 flat addressing (< {})",
                f.lun,
                super::LUN_NUMBER_LIMIT
            )));
        }
        if !luns.iter().any(|l| l.number == f.target_lun) {
            return Err(bad(format!(
                "target_lun {} is not a LUN of the target",
                f.target_lun
            )));
        }
        if out.iter().any(|o| o.lun == f.lun) {
            return Err(bad(format!("LUN {} is mapped twice", f.lun)));
        }
        out.push(MappedLun {
            lun: f.lun,
            target_lun: f.target_lun,
            read_only: f.read_only,
        });
    }
    Ok(out)
}
