//! A target's `[target.group]` table: the gateways that serve the target
//! together on RBD images (issue 37; docs/ha.md, "The gateway group"),
//! checked into a [`GroupConfig`], and what it decides of the target for
//! this gateway: its portal group tag, relative port and ALUA layout.
//!
//! Every gateway reads the same document; which one this process is
//! comes from `--gateway NAME` ([`set_local_gateway`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use ironlun_scsi::{AccessState, AluaConfig, AluaMode, PortGroup};
use serde::Deserialize;

use super::{parse_listen, BackendSpec, ConfigError, LunConfig};

static LOCAL_GATEWAY: OnceLock<String> = OnceLock::new();

/// Says which gateway of its targets' groups this process is
/// (`--gateway NAME`); read when the configuration is checked, so that
/// every reload reads the same document as the same gateway. The first
/// call wins.
pub fn set_local_gateway(name: &str) {
    let _ = LOCAL_GATEWAY.set(name.to_owned());
}

/// The name given with `--gateway`, if any.
pub fn local_gateway() -> Option<String> {
    LOCAL_GATEWAY.get().cloned()
}

/// Gateways a group may list.
pub const MAX_GATEWAYS: usize = 16;
/// `rbd:` LUNs a grouped target may have (a heartbeat names each LUN it
/// owns and must fit one datagram).
pub const MAX_GROUP_LUNS: usize = 128;
/// Heartbeat interval bounds, milliseconds.
const INTERVAL_MS: (u64, u64) = (50, 10_000);
/// Longest silence before a peer is presumed dead, milliseconds.
const DEAD_MAX_MS: u64 = 600_000;

/// `[target.group]` as written.
#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct FileGroup {
    name: String,
    gateways: Vec<FileGateway>,
    preferred: Option<String>,
    others: Option<String>,
    heartbeat_interval_ms: Option<u64>,
    dead_after_ms: Option<u64>,
    failback: Option<bool>,
    key_file: Option<PathBuf>,
    transition_time: Option<u8>,
}

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
struct FileGateway {
    name: String,
    portal: String,
    tpg: u16,
    heartbeat: Option<String>,
}

/// One gateway of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayConfig {
    pub name: String,
    pub portal: SocketAddr,
    /// Its target port group id, portal group tag and relative port.
    pub tpg: u16,
    /// Where it takes heartbeats (UDP): as given, else the portal's
    /// address and port + 10.
    pub heartbeat: SocketAddr,
}

/// A checked `[target.group]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    pub name: String,
    pub gateways: Vec<GatewayConfig>,
    /// This process (index into `gateways`).
    pub local: usize,
    /// This process's gateway (`gateways[local]`).
    pub this: GatewayConfig,
    pub preferred: Option<usize>,
    /// What a gateway that does not own a LUN is: standby (default) or
    /// active/non-optimized.
    pub others: AccessState,
    pub interval: Duration,
    pub dead_after: Duration,
    /// The preferred gateway takes its LUNs back when it is up again.
    pub failback: bool,
    /// Heartbeats carry an HMAC-SHA256 with the key in this file.
    pub key_file: Option<PathBuf>,
    pub transition_time: u8,
}

impl GroupConfig {
    pub fn local(&self) -> &GatewayConfig {
        &self.this
    }

    /// The ALUA layout the group gives the target on this gateway: one
    /// group per gateway (id and port: its tpg), every one standby until
    /// the group decides who owns each LUN, implicit ALUA.
    pub fn alua(&self) -> AluaConfig {
        AluaConfig {
            mode: AluaMode::Implicit,
            local_group: self.local().tpg,
            transition_time: self.transition_time,
            groups: self
                .gateways
                .iter()
                .enumerate()
                .map(|(i, g)| PortGroup {
                    id: g.tpg,
                    ports: vec![g.tpg],
                    state: AccessState::Standby,
                    preferred: self.preferred == Some(i),
                })
                .collect(),
        }
    }
}

/// A gateway or group name: 1..=64 of `A-Za-z0-9._-`.
fn check_name(key: &str, s: &str) -> Result<(), ConfigError> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            key,
            format!("{s:?}: 1 to 64 of A-Z, a-z, 0-9, '.', '_' and '-'"),
        ))
    }
}

/// Checks target `target`'s group as gateway `local` (`--gateway`).
/// `pgt` and `alua`: whether the target also sets `portal_group_tag` or
/// `[target.alua]`, which the group decides.
pub(super) fn check(
    target: &str,
    f: &FileGroup,
    local: Option<&str>,
    pgt: bool,
    alua: bool,
    luns: &[LunConfig],
) -> Result<GroupConfig, ConfigError> {
    let key = |k: &str| format!("target {target} group.{k}");
    check_name(&key("name"), &f.name)?;
    if pgt || alua {
        return Err(ConfigError::invalid(
            key("name"),
            "a grouped target takes its portal group tag and ALUA groups from the gateways: \
             remove portal_group_tag and [target.alua]",
        ));
    }
    let gateways = check_gateways(&key("gateways"), &f.gateways)?;
    let index = |k: &str, name: &str| {
        gateways.iter().position(|g| g.name == name).ok_or_else(|| {
            ConfigError::invalid(key(k), format!("{name:?} is not one of the gateways"))
        })
    };
    let local = match local {
        Some(n) => index("gateways", n).map_err(|_| {
            ConfigError::invalid(
                key("gateways"),
                format!("--gateway {n:?} is not one of the gateways"),
            )
        })?,
        None => {
            return Err(ConfigError::invalid(
                key("gateways"),
                "which gateway this is: start it with --gateway NAME",
            ))
        }
    };
    let preferred = f
        .preferred
        .as_deref()
        .map(|p| index("preferred", p))
        .transpose()?;
    let others = match f.others.as_deref().unwrap_or("standby") {
        "standby" => AccessState::Standby,
        "active/non-optimized" => AccessState::ActiveNonOptimized,
        other => {
            return Err(ConfigError::invalid(
                key("others"),
                format!("{other:?}: standby or active/non-optimized"),
            ))
        }
    };
    if others == AccessState::ActiveNonOptimized && f.key_file.is_none() {
        // An active/non-optimized gateway forwards the writes it cannot
        // do to the owner, over a session CHAP derived from the key
        // authenticates (docs/ha.md, "Forwarding").
        return Err(ConfigError::invalid(
            key("others"),
            "active/non-optimized forwards writes to the owner over sessions authenticated              with the group key: give key_file",
        ));
    }
    let (interval, dead_after) = check_timing(&key, f)?;
    check_luns(target, luns)?;
    let this = gateways
        .get(local)
        .cloned()
        .ok_or_else(|| ConfigError::invalid(key("gateways"), "no such gateway"))?;
    Ok(GroupConfig {
        name: f.name.clone(),
        gateways,
        local,
        this,
        preferred,
        others,
        interval,
        dead_after,
        failback: f.failback.unwrap_or(true),
        key_file: f.key_file.clone(),
        transition_time: f.transition_time.unwrap_or(10),
    })
}

fn check_gateways(key: &str, list: &[FileGateway]) -> Result<Vec<GatewayConfig>, ConfigError> {
    if list.len() < 2 || list.len() > MAX_GATEWAYS {
        return Err(ConfigError::invalid(
            key,
            format!("{} listed: a group has 2 to {MAX_GATEWAYS}", list.len()),
        ));
    }
    let mut out: Vec<GatewayConfig> = Vec::with_capacity(list.len());
    for (i, g) in list.iter().enumerate() {
        let k = |f: &str| format!("{key}[{i}].{f}");
        check_name(&k("name"), &g.name)?;
        if g.tpg == 0 {
            return Err(ConfigError::invalid(
                k("tpg"),
                "0 is reserved (SPC-5 §7.7.6.5); give 1..65535",
            ));
        }
        let portal = parse_listen(&k("portal"), &g.portal)?;
        let heartbeat = match &g.heartbeat {
            Some(h) => parse_listen(&k("heartbeat"), h)?,
            None => {
                let port = portal.port().checked_add(10).ok_or_else(|| {
                    ConfigError::invalid(k("heartbeat"), "portal port + 10 is over 65535: give one")
                })?;
                SocketAddr::new(portal.ip(), port)
            }
        };
        let dup = out.iter().find(|o| {
            o.name == g.name || o.tpg == g.tpg || o.portal == portal || o.heartbeat == heartbeat
        });
        if let Some(o) = dup {
            return Err(ConfigError::invalid(
                k("name"),
                format!(
                    "{} and {} share a name, tpg, portal or heartbeat address: each must be the \
                     gateway's own",
                    o.name, g.name
                ),
            ));
        }
        out.push(GatewayConfig {
            name: g.name.clone(),
            portal,
            tpg: g.tpg,
            heartbeat,
        });
    }
    Ok(out)
}

fn check_timing(
    key: &dyn Fn(&str) -> String,
    f: &FileGroup,
) -> Result<(Duration, Duration), ConfigError> {
    let interval = f.heartbeat_interval_ms.unwrap_or(500);
    if !(INTERVAL_MS.0..=INTERVAL_MS.1).contains(&interval) {
        return Err(ConfigError::OutOfRange {
            key: key("heartbeat_interval_ms"),
            value: interval.to_string(),
            allowed: format!("{}..={}", INTERVAL_MS.0, INTERVAL_MS.1),
        });
    }
    let dead = f.dead_after_ms.unwrap_or(interval * 6);
    if dead < interval * 2 || dead > DEAD_MAX_MS {
        return Err(ConfigError::OutOfRange {
            key: key("dead_after_ms"),
            value: dead.to_string(),
            allowed: format!("{}..={DEAD_MAX_MS} (at least two intervals)", interval * 2),
        });
    }
    Ok((Duration::from_millis(interval), Duration::from_millis(dead)))
}

/// Every LUN of a grouped target is an `rbd:` image that does not
/// reconnect by itself after a fence.
fn check_luns(target: &str, luns: &[LunConfig]) -> Result<(), ConfigError> {
    if luns.len() > MAX_GROUP_LUNS {
        return Err(ConfigError::invalid(
            format!("target {target} lun"),
            format!(
                "{} LUNs: a grouped target has at most {MAX_GROUP_LUNS}",
                luns.len()
            ),
        ));
    }
    for l in luns {
        let key = format!("target {target} LUN {}", l.number);
        match &l.spec.backend {
            BackendSpec::Rbd(r) if r.reconnect => {
                return Err(ConfigError::invalid(
                    key,
                    "reconnect=on undoes the group's fence (a blocklisted gateway would write \
                     again): a grouped LUN rejoins only through `ironlun admin group rejoin`",
                ))
            }
            BackendSpec::Rbd(_) => {}
            _ => {
                return Err(ConfigError::invalid(
                    key,
                    "a grouped target serves rbd: images only (the lock that picks the owner \
                     lives in RADOS)",
                ))
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> FileGroup {
        toml::from_str(text).unwrap()
    }

    const TWO: &str = r#"
        name = "ha1"
        gateways = [
          { name = "gw1", portal = "10.99.0.1:3260", tpg = 1 },
          { name = "gw2", portal = "10.99.0.2:3260", tpg = 2, heartbeat = "10.99.0.2:4000" },
        ]
        preferred = "gw1"
    "#;

    fn checked(text: &str, local: Option<&str>) -> Result<GroupConfig, String> {
        check("t", &file(text), local, false, false, &[]).map_err(|e| e.to_string())
    }

    #[test]
    fn two_gateways_give_tags_heartbeats_and_alua() {
        let g = checked(TWO, Some("gw2")).unwrap();
        assert_eq!(g.local, 1);
        assert_eq!(g.preferred, Some(0));
        assert_eq!(g.gateways[0].heartbeat, "10.99.0.1:3270".parse().unwrap());
        assert_eq!(g.gateways[1].heartbeat, "10.99.0.2:4000".parse().unwrap());
        assert_eq!(g.interval, Duration::from_millis(500));
        assert_eq!(g.dead_after, Duration::from_secs(3));
        let a = g.alua();
        assert_eq!(a.local_group, 2);
        assert_eq!(a.mode, AluaMode::Implicit);
        assert!(a.groups[0].preferred && !a.groups[1].preferred);
        assert!(a.validate(2).is_ok());
    }

    #[test]
    fn bad_groups_are_refused_with_the_key() {
        let e = checked(TWO, None).unwrap_err();
        assert!(e.contains("--gateway NAME"), "{e}");
        let e = checked(TWO, Some("gw3")).unwrap_err();
        assert!(e.contains("--gateway \"gw3\""), "{e}");
        let e = checked(
            &TWO.replace("preferred = \"gw1\"", "preferred = \"x\""),
            Some("gw1"),
        )
        .unwrap_err();
        assert!(e.contains("group.preferred"), "{e}");
        let e = checked(&TWO.replace("tpg = 2", "tpg = 1"), Some("gw1")).unwrap_err();
        assert!(e.contains("gateways[1]"), "{e}");
        let e = checked(&TWO.replace("tpg = 2", "tpg = 0"), Some("gw1")).unwrap_err();
        assert!(e.contains("reserved"), "{e}");
        let e = checked(&TWO.replace("\"ha1\"", "\"h a\""), Some("gw1")).unwrap_err();
        assert!(e.contains("group.name"), "{e}");
        let e = checked(&format!("{TWO}\ndead_after_ms = 900"), Some("gw1")).unwrap_err();
        assert!(e.contains("dead_after_ms"), "{e}");
        let e = checked(&format!("{TWO}\nothers = \"unavailable\""), Some("gw1")).unwrap_err();
        assert!(e.contains("group.others"), "{e}");
        let ano = format!("{TWO}\nothers = \"active/non-optimized\"");
        let e = checked(&ano, Some("gw1")).unwrap_err();
        assert!(e.contains("group.others") && e.contains("key_file"), "{e}");
        let g = checked(&format!("{ano}\nkey_file = \"/k\""), Some("gw1")).unwrap();
        assert_eq!(g.others, AccessState::ActiveNonOptimized);
        let one = r#"name = "ha1"
            gateways = [{ name = "gw1", portal = "10.99.0.1:3260", tpg = 1 }]"#;
        let e = checked(one, Some("gw1")).unwrap_err();
        assert!(e.contains("2 to 16"), "{e}");
        let e = check("t", &file(TWO), Some("gw1"), true, false, &[]).unwrap_err();
        assert!(e.to_string().contains("portal_group_tag"), "{e}");
        assert!(toml::from_str::<FileGroup>(&format!("{TWO}\nbogus = 1")).is_err());
    }

    #[test]
    fn only_rbd_luns_without_reconnect_are_grouped() {
        let lun = |s: &str| LunConfig {
            number: 0,
            spec: super::super::lun_spec::parse_at("x".into(), s).unwrap(),
            schedule: None,
        };
        let ok = check(
            "t",
            &file(TWO),
            Some("gw1"),
            false,
            false,
            &[lun("rbd:rbd/a")],
        );
        assert!(ok.is_ok());
        let e = check(
            "t",
            &file(TWO),
            Some("gw1"),
            false,
            false,
            &[lun("ram:1MiB")],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("rbd: images only"), "{e}");
        let e = check(
            "t",
            &file(TWO),
            Some("gw1"),
            false,
            false,
            &[lun("rbd:rbd/a,reconnect=on")],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("reconnect=on"), "{e}");
    }
}
