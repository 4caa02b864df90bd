//! What the API reads: the running state and the sessions as JSON, and
//! the configuration with its secrets hidden.

use serde::Serialize;
use toml_edit::{DocumentMut, Item, Table};

use crate::config::DefaultMap;
use crate::live::Live;
use crate::registry::Registry;

#[derive(Serialize)]
pub struct State {
    pub portals: Vec<String>,
    pub targets: Vec<TargetView>,
}

#[derive(Serialize)]
pub struct TargetView {
    pub name: String,
    pub alias: Option<String>,
    pub luns: Vec<LunView>,
    pub default_map: &'static str,
    pub initiators: Vec<InitiatorView>,
    pub sessions: usize,
}

#[derive(Serialize)]
pub struct LunView {
    pub lun: u16,
    pub kind: &'static str,
    pub bytes: u64,
    pub block_size: u32,
    pub read_only: bool,
    /// Why the LU is offline (its state files, `lu_state.rs`); absent
    /// while it serves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offline: Option<String>,
}

#[derive(Serialize)]
pub struct InitiatorView {
    pub name: String,
    /// `[mapped, target LUN, read-only]`; absent: the target's LUNs.
    pub luns: Option<Vec<(u16, u16, bool)>>,
    pub chap: bool,
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
                .map(|(n, lu)| LunView {
                    lun: *n,
                    kind: lu.backend().kind(),
                    bytes: lu.num_blocks() * u64::from(lu.block_size()),
                    block_size: lu.block_size(),
                    read_only: lu.write_protected(),
                    offline: lu.offline_reason(),
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
                })
                .collect(),
            sessions: sessions
                .iter()
                .filter(|(_, s)| s.target.as_deref() == Some(t.cfg.name.as_str()))
                .count(),
        })
        .collect();
    State {
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

/// Keys whose values are secrets.
const SECRET_KEYS: [&str; 2] = ["chap", "mutual_chap"];

/// The document with every literal CHAP secret replaced.
pub fn redacted(text: &str) -> String {
    let Ok(mut doc) = text.parse::<DocumentMut>() else {
        return String::new();
    };
    hide(doc.as_table_mut());
    doc.to_string()
}

fn hide(t: &mut Table) {
    for (k, item) in t.iter_mut() {
        if SECRET_KEYS.contains(&k.get()) && item.is_str() {
            let user = item
                .as_str()
                .and_then(|s| s.split_once(':'))
                .map_or("", |(u, _)| u)
                .to_owned();
            *item = toml_edit::value(format!("{user}:<hidden>"));
            continue;
        }
        match item {
            Item::Table(sub) => hide(sub),
            Item::ArrayOfTables(a) => a.iter_mut().for_each(hide),
            _ => {}
        }
    }
}
