//! What the API reads: the running state and the sessions as JSON, and
//! the configuration with its secrets hidden.

use ironlun_scsi::{AluaMode, LogicalUnit};
use serde::Serialize;

pub use ironlun_target::live::redacted;
use ironlun_target::live::Live;
use ironlun_target::registry::Registry;
use ironlun_target_config::DefaultMap;

// Fields are only ever added to these views, never renamed or removed:
// tools read `ironlun admin --json` (docs/admin.md).

#[derive(Serialize)]
pub struct State {
    pub portals: Vec<String>,
    pub targets: Vec<TargetView>,
    /// CHAP is required of discovery sessions (never the secret).
    pub discovery_chap: bool,
}

#[derive(Serialize)]
pub struct TargetView {
    pub name: String,
    pub alias: Option<String>,
    pub luns: Vec<LunView>,
    pub default_map: &'static str,
    pub initiators: Vec<InitiatorView>,
    pub sessions: usize,
    /// The portal group every portal serves the target in.
    pub portal_group_tag: u16,
    /// The access list's entries (empty: everyone may log in).
    pub allow: Vec<String>,
    /// CHAP required to log in; `mutual_chap`: the target has its own
    /// credentials for initiators that ask. Never the secrets.
    pub chap: bool,
    pub mutual_chap: bool,
    /// The gateway group serving the target (docs/ha.md): this gateway,
    /// each gateway's health and each LUN's owner; absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<ironlun_target::group::GroupView>,
}

#[derive(Serialize)]
pub struct LunView {
    pub lun: u16,
    pub kind: &'static str,
    pub bytes: u64,
    pub block_size: u32,
    pub read_only: bool,
    /// The LUN's spec in the configuration's grammar
    /// (`file:/srv/a.img,size=10GiB,thin`).
    pub spec: String,
    /// Thin provisioned (UNMAP frees blocks).
    pub thin: bool,
    /// Why the LU is offline (its state files, `lu_state.rs`); absent
    /// while it serves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offline: Option<String>,
    /// Its target port groups and their states now (SPC-5 §5.16);
    /// absent without ALUA.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alua: Option<AluaView>,
    /// Its snapshot schedule and the last run's result (docs/snapshots.md,
    /// "Schedules"); absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_schedule: Option<ironlun_target::schedule::ScheduleView>,
}

/// A LU's ALUA layout as it serves now (states an initiator's SET TARGET
/// PORT GROUPS set included).
#[derive(Serialize)]
pub struct AluaView {
    pub mode: String,
    /// The group of this gateway's port, and its state.
    pub local_group: u16,
    pub local_state: String,
    pub groups: Vec<GroupView>,
}

#[derive(Serialize)]
pub struct GroupView {
    pub id: u16,
    pub state: String,
    pub ports: Vec<u16>,
    pub preferred: bool,
}

fn alua_view(lu: &LogicalUnit) -> Option<AluaView> {
    let c = lu.alua_config();
    if c.mode == AluaMode::Off {
        return None;
    }
    Some(AluaView {
        mode: c.mode.to_string(),
        local_group: c.local_group,
        local_state: lu.alua_local_state().to_string(),
        groups: c
            .groups
            .into_iter()
            .map(|g| GroupView {
                id: g.id,
                state: g.state.to_string(),
                ports: g.ports,
                preferred: g.preferred,
            })
            .collect(),
    })
}

#[derive(Serialize)]
pub struct InitiatorView {
    pub name: String,
    /// `[mapped, target LUN, read-only]`; absent: the target's LUNs.
    pub luns: Option<Vec<(u16, u16, bool)>>,
    pub chap: bool,
    pub mutual_chap: bool,
}

pub fn state(live: &Live) -> State {
    let sessions = live.registry.sessions();
    let targets = live
        .registry
        .targets()
        .iter()
        .map(|t| TargetView {
            name: t.cfg.name.clone(),
            alias: t.cfg.alias.clone(),
            luns: t
                .luns
                .iter()
                .map(|(n, lu)| {
                    let spec = t.cfg.luns.iter().find(|l| l.number == *n);
                    LunView {
                        lun: *n,
                        kind: lu.backend().kind(),
                        bytes: lu.num_blocks() * u64::from(lu.block_size()),
                        block_size: lu.block_size(),
                        read_only: lu.write_protected(),
                        spec: spec.map(|l| l.spec.to_string()).unwrap_or_default(),
                        thin: lu.config().thin,
                        offline: lu.offline_reason(),
                        alua: alua_view(lu),
                        snapshot_schedule: live.registry.schedules.view(&t.cfg.name, *n),
                    }
                })
                .collect(),
            default_map: match t.cfg.default_map {
                DefaultMap::All => "all",
                DefaultMap::None => "none",
            },
            initiators: t
                .cfg
                .initiators
                .iter()
                .map(|e| InitiatorView {
                    name: e.name.clone(),
                    luns: e.luns.as_ref().map(|m| {
                        m.iter()
                            .map(|x| (x.lun, x.target_lun, x.read_only))
                            .collect()
                    }),
                    chap: e.chap.is_some(),
                    mutual_chap: e.chap.as_ref().is_some_and(|p| p.target.is_some()),
                })
                .collect(),
            sessions: sessions
                .iter()
                .filter(|(_, s)| s.target.as_deref() == Some(t.cfg.name.as_str()))
                .count(),
            portal_group_tag: t.cfg.portal_group_tag,
            allow: t.cfg.acl.entries(),
            chap: t.cfg.chap.is_some(),
            mutual_chap: t.cfg.chap.as_ref().is_some_and(|p| p.target.is_some()),
            group: ironlun_target::group::view(&t.cfg.name),
        })
        .collect();
    State {
        discovery_chap: live.registry.discovery_chap.is_some(),
        portals: live
            .registry
            .portals()
            .iter()
            .map(ToString::to_string)
            .collect(),
        targets,
    }
}

#[derive(Serialize)]
pub struct SessionView {
    pub tsih: u16,
    pub initiator: String,
    pub isid: String,
    pub target: Option<String>,
    pub peer: String,
    /// Seconds since the Unix epoch.
    pub started: u64,
    pub negotiated: String,
    pub commands: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

pub fn sessions(registry: &Registry) -> Vec<SessionView> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut out: Vec<SessionView> = registry
        .sessions()
        .into_iter()
        .map(|(tsih, s)| SessionView {
            tsih,
            initiator: s.initiator.clone(),
            isid: s.isid.iter().map(|b| format!("{b:02x}")).collect(),
            target: s.target.clone(),
            peer: s.peer.to_string(),
            started: s
                .started
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            negotiated: s.negotiated.get().cloned().unwrap_or_default(),
            commands: s.commands.load(Relaxed),
            read_bytes: s.read_bytes.load(Relaxed),
            write_bytes: s.write_bytes.load(Relaxed),
        })
        .collect();
    out.sort_by_key(|s| s.tsih);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use ironlun_target_config::{Config, HIDDEN_SECRET};

    /// Every secret below has this in it, and nothing else has.
    const MARK: &str = "S3CRET";

    /// Documents the configuration grammar takes, with secrets in every
    /// place it allows them: `[discovery]` (a table, an inline table,
    /// dotted keys), `[[target]]` and `[[target.initiator]]` (tables,
    /// an array of inline tables, a target itself inline), one-way and
    /// mutual. Each with the number of secrets in it.
    fn documents() -> Vec<(&'static str, usize)> {
        vec![
            (
                r#"
[discovery]
chap = "disc:disc-S3CRET-0001"   # kept comment
mutual_chap = "dtgt:disc-S3CRET-0002"

[[target]]
name = "iqn.2026-11.test:t"
chap = "alice:tgt-S3CRET-0003"
mutual_chap = "tgt:tgt-S3CRET-0004"
allow = ["iqn.2026-11.test:init", "iqn.2026-11.test:other"]
[[target.lun]]
spec = "ram:1MiB"
[[target.initiator]]
name = "iqn.2026-11.test:init"
chap = "bob:ini-S3CRET-0005"
mutual_chap = "tgt2:ini-S3CRET-0006"
[[target.initiator]]
name = "iqn.2026-11.test:other"
luns = [{ lun = 0, target_lun = 0, read_only = true }]
"#,
                6,
            ),
            (
                r#"
discovery = { chap = "disc:disc-S3CRET-0007", mutual_chap = "d:disc-S3CRET-0008" }

[[target]]
name = "iqn.2026-11.test:t"
lun = [{ spec = "ram:1MiB" }]
allow = ["iqn.2026-11.test:init", "iqn.2026-11.test:b"]
initiator = [
  { name = "iqn.2026-11.test:init", chap = "carol:ini-S3CRET-0009" },
  { name = "iqn.2026-11.test:b", chap = "dave:ini-S3CRET-0010", mutual_chap = "t:ini-S3CRET-0011" },
]
"#,
                5,
            ),
            (
                r#"
discovery.chap = "disc:disc-S3CRET-0012"
target = [
  { name = "iqn.2026-11.test:t", chap = "erin:tgt-S3CRET-0013", lun = [{ spec = "ram:1MiB" }], allow = ["iqn.2026-11.test:init"], initiator = [{ name = "iqn.2026-11.test:init", mutual_chap = "t:ini-S3CRET-0014", chap = "frank:ini-S3CRET-0015" }] },
]
"#,
                4,
            ),
        ]
    }

    #[test]
    fn every_secret_is_hidden_wherever_the_grammar_puts_it() {
        for (doc, secrets) in documents() {
            Config::from_toml(doc, None).unwrap_or_else(|e| panic!("{e}:\n{doc}"));
            assert_eq!(doc.matches(MARK).count(), secrets);
            let shown = redacted(doc);
            assert!(!shown.contains(MARK), "{shown}");
            assert_eq!(
                shown.matches(HIDDEN_SECRET).count(),
                secrets,
                "every secret, and nothing else, hidden:\n{shown}"
            );
            // Users and names stay; the rest of the document is as it was.
            assert!(shown.contains("disc:<hidden>"), "{shown}");
            assert!(shown.contains("iqn.2026-11.test:init"), "{shown}");
        }
    }

    #[test]
    fn the_layout_and_comments_around_a_secret_stay() {
        let (doc, _) = &documents()[0];
        let shown = redacted(doc);
        assert!(
            shown.contains("chap = \"disc:<hidden>\"   # kept comment\n"),
            "{shown}"
        );
    }

    #[test]
    fn a_shown_configuration_cannot_be_applied_with_its_placeholders() {
        for (doc, _) in documents() {
            let e = Config::from_toml(&redacted(doc), None)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("config show"), "{e}");
        }
    }

    #[test]
    fn env_references_are_shown_as_they_are() {
        let doc = r#"
discovery = { chap_env = "DISC_CHAP" }
[[target]]
name = "iqn.2026-11.test:t"
chap_env = "TGT_CHAP"
mutual_chap_env = "TGT_MUTUAL"
lun = [{ spec = "ram:1MiB" }]
initiator = [{ name = "iqn.2026-11.test:init", chap_env = "INI_CHAP" }]
"#;
        assert_eq!(redacted(doc), doc);
    }
}
