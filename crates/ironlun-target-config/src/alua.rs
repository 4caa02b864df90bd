//! A target's `[target.alua]` table: the layout of the gateway group's
//! target port groups (SPC-5 §5.16) as this gateway presents it, checked
//! into an [`AluaConfig`] and this gateway's relative port.
//!
//! Every gateway of a group can read the same `groups` list; what differs
//! between them is `local_group` (and, by default through
//! `portal_group_tag`, the relative port). Without the table, or with
//! `mode = "off"`, the target has no ALUA, as before; the table names its
//! mode, so that groups written without one are not silently off.

use ironlun_scsi::{AccessState, AluaConfig, AluaMode, PortGroup};
use serde::Deserialize;

use super::ConfigError;

/// `[target.alua]` as written.
#[derive(Deserialize, Clone, Debug, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct FileAlua {
    mode: Option<String>,
    local_group: Option<u16>,
    relative_port: Option<u16>,
    transition_time: Option<u8>,
    #[serde(default)]
    groups: Vec<FileGroup>,
}

/// One entry of `groups`.
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
struct FileGroup {
    id: u16,
    state: String,
    ports: Option<Vec<u16>>,
    #[serde(default)]
    preferred: bool,
}

/// The layout of target `target` whose portal group tag is `tag`, and
/// the relative port of this gateway's target port.
pub(super) fn check(
    target: &str,
    tag: u16,
    file: Option<&FileAlua>,
) -> Result<(AluaConfig, u16), ConfigError> {
    let key = |k: &str| format!("target {target} alua.{k}");
    let Some(f) = file else {
        return Ok((AluaConfig::default(), tag));
    };
    // Required in the table: groups written without a mode would
    // otherwise be silently off.
    let mode = f
        .mode
        .as_deref()
        .ok_or_else(|| {
            ConfigError::invalid(key("mode"), "missing: off, implicit, explicit or both")
        })?
        .parse::<AluaMode>()
        .map_err(|e| ConfigError::invalid(key("mode"), e))?;
    let relative_port = f.relative_port.unwrap_or(tag);
    if relative_port == 0 {
        return Err(ConfigError::invalid(
            key("relative_port"),
            "0 is reserved (SPC-5 §7.7.6.5); give 1..65535",
        ));
    }
    if mode == AluaMode::Off {
        return Ok((AluaConfig::default(), relative_port));
    }
    let local_group = f.local_group.ok_or_else(|| {
        ConfigError::invalid(
            key("local_group"),
            "missing: the target port group of this gateway's port",
        )
    })?;
    let groups = f
        .groups
        .iter()
        .enumerate()
        .map(|(i, g)| g.check(&key(&format!("groups[{i}]")), local_group, relative_port))
        .collect::<Result<Vec<_>, _>>()?;
    let cfg = AluaConfig {
        mode,
        local_group,
        transition_time: f.transition_time.unwrap_or(0),
        groups,
    };
    cfg.validate(relative_port)
        .map_err(|e| ConfigError::invalid(format!("target {target} alua"), e))?;
    Ok((cfg, relative_port))
}

impl FileGroup {
    /// The group; without `ports`, the local group holds this gateway's
    /// port and any other the port numbered as the group.
    fn check(&self, key: &str, local: u16, relative_port: u16) -> Result<PortGroup, ConfigError> {
        let state = self
            .state
            .parse::<AccessState>()
            .map_err(|e| ConfigError::invalid(format!("{key}.state"), e))?;
        let ports = match &self.ports {
            Some(p) => p.clone(),
            None if self.id == local => vec![relative_port],
            None => vec![self.id],
        };
        Ok(PortGroup {
            id: self.id,
            ports,
            state,
            preferred: self.preferred,
        })
    }
}
