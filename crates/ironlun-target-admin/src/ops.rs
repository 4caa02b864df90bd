//! The management API's operations: what each does to the running
//! configuration document, and what the API reads (state, sessions).

use std::net::SocketAddr;
use std::path::PathBuf;

use ironlun_scsi::AccessState;
use serde::{Deserialize, Serialize};
use toml_edit::value;
use tracing::info;

use ironlun_target::live::edit::{self, EditError, Mapping};
use ironlun_target::live::{ApplyError, Live, Outcome};
use ironlun_target::registry::SessionSignal;
use ironlun_target_config::normalize_iscsi_name;

use super::snapshots;

/// A request: one operation, with `dry_run` (plan only) and `force`
/// (a removal may log sessions out). Its `Debug` hides secrets, as
/// [`Op`]'s does.
#[derive(Debug, Deserialize, Serialize)]
pub struct Request {
    #[serde(flatten)]
    pub op: Op,
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub force: bool,
}

/// Every operation that changes the daemon. Some carry secrets (`chap`
/// of `set-target` and `set-initiator`, the whole file of `apply`): its
/// `Debug` hides them, and logs name an operation by [`Op::kind`].
#[derive(Deserialize, Serialize)]
#[serde(tag = "op", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Op {
    AddTarget {
        name: String,
        #[serde(default)]
        luns: Vec<String>,
    },
    RemoveTarget {
        name: String,
    },
    /// Sets what is given: `alias`, `allow`, `chap` (an empty string
    /// removes alias and CHAP), `default_map` ("all" or "none").
    SetTarget {
        name: String,
        alias: Option<String>,
        allow: Option<Vec<String>>,
        chap: Option<String>,
        default_map: Option<String>,
    },
    AddLun {
        target: String,
        spec: String,
        lun: Option<u16>,
    },
    RemoveLun {
        target: String,
        lun: u16,
    },
    ResizeLun {
        target: String,
        lun: u16,
        size: String,
    },
    SetReadOnly {
        target: String,
        lun: u16,
        read_only: bool,
    },
    /// Reads the state files of a LUN they took offline again
    /// (`lu_state.rs`): it serves again if they parse now.
    OnlineLun {
        target: String,
        lun: u16,
    },
    SetInitiator {
        target: String,
        name: String,
        luns: Option<Vec<Mapping>>,
        chap: Option<String>,
    },
    RemoveInitiator {
        target: String,
        name: String,
    },
    AddPortal {
        addr: SocketAddr,
    },
    RemovePortal {
        addr: SocketAddr,
    },
    /// The whole configuration as TOML: the difference is applied.
    Apply {
        toml: String,
    },
    /// Asks a session's initiator to log out (Async Message, then the
    /// connection is dropped after Time2Wait).
    LogoutSession {
        tsih: u16,
    },
    /// Writes the running configuration to `path`: the file the daemon
    /// was started with (the default), or `NAME.toml` directly in
    /// `admin_save_dir`; nowhere else (`save`).
    SaveConfig {
        path: Option<PathBuf>,
    },
    /// Reads the configuration file again and applies it, as SIGHUP does
    /// (`dry_run`: what SIGHUP would change, undoing unsaved live changes).
    ReloadConfig {},
    /// Sets the asymmetric access state of one of a target's ALUA groups
    /// (`[target.alua]`), on every LU of the target (SPC-5 §5.16).
    SetAlua {
        target: String,
        group: u16,
        state: String,
    },
    /// Brings a fenced gateway back into its target's group: each fenced
    /// LUN opens the image with a fresh client and waits as a standby
    /// (docs/ha.md, "Fencing and rejoining").
    RejoinGroup {
        target: String,
    },
    /// Takes snapshot `name` of each of `luns` at one instant, the LUs
    /// held still meanwhile (docs/snapshots.md).
    CreateSnapshot {
        target: String,
        luns: Vec<u16>,
        name: String,
    },
    DeleteSnapshot {
        target: String,
        lun: u16,
        name: String,
    },
    /// Puts the LUN's data back to the snapshot's (`force`: even while
    /// sessions have it open).
    RollbackSnapshot {
        target: String,
        lun: u16,
        name: String,
    },
    /// A new writable store `clone` from the snapshot, beside the LUN's.
    CloneSnapshot {
        target: String,
        lun: u16,
        name: String,
        clone: String,
    },
}

/// The fields of an operation whose values may hold a secret: a CHAP
/// `USER:SECRET`, or a whole configuration with its secrets.
const SECRET_FIELDS: [&str; 2] = ["chap", "toml"];

impl Op {
    /// The operation's name as the API spells it (`set-target`): what a
    /// log line says of it, never its values.
    pub fn kind(&self) -> &'static str {
        match self {
            Op::AddTarget { .. } => "add-target",
            Op::RemoveTarget { .. } => "remove-target",
            Op::SetTarget { .. } => "set-target",
            Op::AddLun { .. } => "add-lun",
            Op::RemoveLun { .. } => "remove-lun",
            Op::ResizeLun { .. } => "resize-lun",
            Op::SetReadOnly { .. } => "set-read-only",
            Op::OnlineLun { .. } => "online-lun",
            Op::SetInitiator { .. } => "set-initiator",
            Op::RemoveInitiator { .. } => "remove-initiator",
            Op::AddPortal { .. } => "add-portal",
            Op::RemovePortal { .. } => "remove-portal",
            Op::Apply { .. } => "apply",
            Op::LogoutSession { .. } => "logout-session",
            Op::SaveConfig { .. } => "save-config",
            Op::ReloadConfig { .. } => "reload-config",
            Op::SetAlua { .. } => "set-alua",
            Op::RejoinGroup { .. } => "rejoin-group",
            Op::CreateSnapshot { .. } => "create-snapshot",
            Op::DeleteSnapshot { .. } => "delete-snapshot",
            Op::RollbackSnapshot { .. } => "rollback-snapshot",
            Op::CloneSnapshot { .. } => "clone-snapshot",
        }
    }
}

/// The operation as its JSON, with every value of `SECRET_FIELDS`
/// shown as `<hidden>`.
impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut v = serde_json::to_value(self).map_err(|_| std::fmt::Error)?;
        if let Some(fields) = v.as_object_mut() {
            for key in SECRET_FIELDS {
                if let Some(x) = fields.get_mut(key).filter(|x| !x.is_null()) {
                    *x = serde_json::Value::from(ironlun_target_config::HIDDEN_SECRET);
                }
            }
        }
        write!(f, "{v}")
    }
}

/// What went wrong, and the HTTP status it maps to.
#[derive(Debug)]
pub struct OpError {
    pub status: u16,
    pub message: String,
}

impl OpError {
    pub(super) fn new(status: u16, message: impl Into<String>) -> OpError {
        OpError {
            status,
            message: message.into(),
        }
    }
}

/// The one place API errors get their HTTP status.
impl From<ApplyError> for OpError {
    fn from(e: ApplyError) -> OpError {
        let status = match &e {
            ApplyError::Edit(EditError::NotFound(_)) => 404,
            ApplyError::Edit(EditError::Conflict(_))
            | ApplyError::InUse { .. }
            | ApplyError::Shrink { .. } => 409,
            ApplyError::Refused(_) => 409,
            ApplyError::Config(_) | ApplyError::Edit(EditError::Shape(_)) => 422,
            ApplyError::Bind(_) | ApplyError::Resize { .. } => 500,
        };
        OpError::new(status, e.to_string())
    }
}

/// What an operation answers.
#[derive(Debug, Serialize)]
pub struct Answer {
    /// The changes made (or planned, with `dry_run`), as diff lines.
    pub changes: Vec<String>,
    pub dry_run: bool,
    /// A note on what happened besides (a saved file, a session told).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl From<Outcome> for Answer {
    fn from(o: Outcome) -> Answer {
        Answer {
            changes: o.changes.iter().map(ToString::to_string).collect(),
            dry_run: o.dry_run,
            note: None,
        }
    }
}

/// Runs one operation. Blocking (backends open, files are written): run
/// it off the async threads.
pub fn run(live: &Live, req: Request) -> Result<Answer, OpError> {
    let (dry, force) = (req.dry_run, req.force);
    match req.op {
        Op::AddPortal { addr } => edit_op(live, &|d| edit::add_portal(d, addr), dry, force),
        Op::RemovePortal { addr } => edit_op(live, &|d| edit::remove_portal(d, addr), dry, force),
        Op::Apply { toml } => live
            .apply_text(&toml, dry, force)
            .map(Answer::from)
            .map_err(OpError::from),
        Op::OnlineLun { target, lun } => online(live, &iscsi_name(&target)?, lun, dry),
        Op::SetAlua {
            target,
            group,
            state,
        } => set_alua(live, &iscsi_name(&target)?, group, &state, dry, force),
        Op::RejoinGroup { target } => rejoin(&iscsi_name(&target)?, dry),
        Op::CreateSnapshot { target, luns, name } => {
            snapshots::create(live, &iscsi_name(&target)?, &luns, &name, dry)
        }
        Op::DeleteSnapshot { target, lun, name } => {
            snapshots::delete(live, &iscsi_name(&target)?, lun, &name, dry)
        }
        Op::RollbackSnapshot { target, lun, name } => {
            snapshots::rollback(live, &iscsi_name(&target)?, lun, &name, dry, force)
        }
        Op::CloneSnapshot {
            target,
            lun,
            name,
            clone,
        } => snapshots::clone(live, &iscsi_name(&target)?, lun, &name, &clone, dry),
        Op::LogoutSession { tsih } => logout(live, tsih, dry),
        Op::SaveConfig { path } => super::save::save(live, path, dry),
        Op::ReloadConfig {} => {
            let r = live.reload_file(dry, force);
            if !dry {
                // As SIGHUP: LUs their state files took offline try again.
                live.bring_back_all();
            }
            r.map(Answer::from).map_err(OpError::from)
        }
        op => run_target_edit(live, op, dry, force),
    }
}

/// An edit of the configuration document, checked as a whole.
type Edit<'a> = &'a dyn Fn(&mut toml_edit::DocumentMut) -> Result<(), EditError>;

fn edit_op(live: &Live, f: Edit, dry: bool, force: bool) -> Result<Answer, OpError> {
    live.apply_edit(f, dry, force)
        .map(Answer::from)
        .map_err(OpError::from)
}

/// The operations that edit one target in the document: checked alone
/// (live::scoped).
fn run_target_edit(live: &Live, op: Op, dry: bool, force: bool) -> Result<Answer, OpError> {
    let target_op = |name: &str, f: Edit| {
        live.apply_target_edit(name, f, dry, force)
            .map(Answer::from)
            .map_err(OpError::from)
    };
    match op {
        Op::AddTarget { name, luns } => {
            let name = iscsi_name(&name)?;
            target_op(&name, &|d| edit::add_target(d, &name, &luns))
        }
        Op::RemoveTarget { name } => {
            let name = iscsi_name(&name)?;
            target_op(&name, &|d| edit::remove_target(d, &name))
        }
        Op::SetTarget {
            name,
            alias,
            allow,
            chap,
            default_map,
        } => {
            let name = iscsi_name(&name)?;
            target_op(&name, &|d| {
                let text = |v: &Option<String>| {
                    v.as_ref()
                        .map(|s| (!s.is_empty()).then(|| value(s.as_str())))
                };
                if let Some(v) = text(&alias) {
                    edit::set_target_key(d, &name, "alias", v)?;
                }
                if let Some(v) = text(&chap) {
                    edit::set_target_key(d, &name, "chap", v)?;
                }
                if let Some(v) = text(&default_map) {
                    edit::set_target_key(d, &name, "default_map", v)?;
                }
                if let Some(a) = &allow {
                    edit::set_target_key(d, &name, "allow", Some(edit::strings(a)))?;
                }
                Ok(())
            })
        }
        Op::AddLun { target, spec, lun } => {
            let target = iscsi_name(&target)?;
            target_op(&target, &|d| {
                edit::add_lun(d, &target, lun, &spec).map(drop)
            })
        }
        Op::RemoveLun { target, lun } => {
            let target = iscsi_name(&target)?;
            target_op(&target, &|d| edit::remove_lun(d, &target, lun))
        }
        Op::ResizeLun { target, lun, size } => {
            let target = iscsi_name(&target)?;
            target_op(&target, &|d| {
                edit::edit_lun_spec(d, &target, lun, |s| edit::spec_with_size(s, &size))
            })
        }
        Op::SetReadOnly {
            target,
            lun,
            read_only,
        } => {
            let target = iscsi_name(&target)?;
            target_op(&target, &|d| {
                edit::edit_lun_spec(d, &target, lun, |s| {
                    Ok(edit::spec_with_read_only(s, read_only))
                })
            })
        }
        Op::SetInitiator {
            target,
            name,
            luns,
            chap,
        } => {
            let (target, name) = (iscsi_name(&target)?, iscsi_name(&name)?);
            target_op(&target, &|d| {
                edit::set_initiator(d, &target, &name, luns.as_deref(), chap.as_deref())
            })
        }
        Op::RemoveInitiator { target, name } => {
            let (target, name) = (iscsi_name(&target)?, iscsi_name(&name)?);
            target_op(&target, &|d| edit::remove_initiator(d, &target, &name))
        }
        // run() handles every other operation itself.
        _ => Err(OpError::new(500, "internal: not an edit of one target")),
    }
}

/// Sets ALUA group `group` of `target` to `state`: in the document (so
/// that a save keeps it, and the change reaches every LU and raises
/// ASYMMETRIC ACCESS STATE CHANGED), and then on each LU whose state
/// differs still, which an initiator's SET TARGET PORT GROUPS moved while
/// the document stayed as it was.
fn set_alua(
    live: &Live,
    target: &str,
    group: u16,
    state: &str,
    dry_run: bool,
    force: bool,
) -> Result<Answer, OpError> {
    let state: AccessState = state.parse().map_err(|e: String| OpError::new(422, e))?;
    let mut answer: Answer = live
        .apply_target_edit(
            target,
            |d: &mut toml_edit::DocumentMut| edit::set_alua_state(d, target, group, state.name()),
            dry_run,
            force,
        )
        .map(Answer::from)
        .map_err(OpError::from)?;
    let Some(t) = live.registry.find(target) else {
        return Ok(answer);
    };
    for (n, lu) in t.luns.iter() {
        let now = lu.alua_config();
        let differs = now.groups.iter().any(|g| g.id == group && g.state != state);
        if !differs {
            continue;
        }
        if !dry_run {
            lu.set_alua_state(group, state)
                .map_err(|e| OpError::new(409, format!("target {target} LUN {n}: {e}")))?;
            info!("target {target} LUN {n}: ALUA group {group} set to {state}");
        }
        answer.changes.push(format!(
            "~ target {target} LUN {n}: ALUA group {group} {state}"
        ));
    }
    Ok(answer)
}

/// `group rejoin`: the fenced LUNs of `target` rejoin its group.
fn rejoin(target: &str, dry_run: bool) -> Result<Answer, OpError> {
    let view = ironlun_target::group::view(target)
        .ok_or_else(|| OpError::new(404, format!("target {target} has no gateway group here")))?;
    let fenced: Vec<u16> = view
        .luns
        .iter()
        .filter(|l| l.role == "fenced")
        .map(|l| l.lun)
        .collect();
    let luns = if dry_run {
        fenced
    } else {
        ironlun_target::group::rejoin(target).unwrap_or_default()
    };
    let note = if luns.is_empty() {
        "no LUN is fenced: nothing to do"
    } else {
        "each opens the image with a fresh client and comes back as a standby"
    };
    Ok(Answer {
        changes: luns
            .iter()
            .map(|n| format!("~ target {target} LUN {n}: rejoin group {}", view.group))
            .collect(),
        dry_run,
        note: Some(note.to_owned()),
    })
}

fn online(live: &Live, target: &str, lun: u16, dry_run: bool) -> Result<Answer, OpError> {
    let offline = live
        .registry
        .find(target)
        .and_then(|t| t.luns.get(lun).map(|lu| lu.offline_reason()))
        .ok_or_else(|| OpError::new(404, format!("target {target} has no LUN {lun}")))?;
    let answer = |changes: Vec<String>, note: &str| Answer {
        changes,
        dry_run,
        note: Some(note.to_owned()),
    };
    if offline.is_none() {
        return Ok(answer(Vec::new(), "not offline: nothing to do"));
    }
    let change = vec![format!("~ target {target} LUN {lun}: online")];
    if dry_run {
        return Ok(answer(change, "its state files would be read again"));
    }
    match live.bring_back(target, lun) {
        Ok(_) => Ok(answer(change, "its state files were read again")),
        Err(why) => Err(OpError::new(409, format!("still offline: {why}"))),
    }
}

/// A target or initiator name of a request in its normal form (the
/// configuration's and the login's rule, RFC 7143 §4.2.7); one that is
/// not an iSCSI name is refused before anything is looked up.
fn iscsi_name(raw: &str) -> Result<String, OpError> {
    normalize_iscsi_name(raw).map_err(|e| OpError::new(422, e.to_string()))
}

fn logout(live: &Live, tsih: u16, dry_run: bool) -> Result<Answer, OpError> {
    let exists = live.registry.sessions().iter().any(|(t, _)| *t == tsih);
    if !exists {
        return Err(OpError::new(404, format!("no session with TSIH {tsih}")));
    }
    if !dry_run {
        live.registry
            .signal_session(tsih, SessionSignal::Logout("the operator logged it out"));
    }
    Ok(Answer {
        changes: vec![format!("- session {tsih}")],
        dry_run,
        note: Some("asked to log out; dropped after Time2Wait if it does not".into()),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use std::collections::BTreeMap;
    use std::path::Path;

    use super::*;
    use crate::test_support::test_registry;
    use ironlun_target_config::{Config, Overrides};

    const T: &str = "iqn.2026-11.test:t";

    /// Every operation, each one that would change something if it ran.
    /// The match makes a new operation a compile error here until it is
    /// added.
    fn every_op(dir: &Path, running: &str) -> Vec<Op> {
        let file = |name: &str| format!("file:{},size=1MiB", dir.join(name).display());
        let ops = vec![
            Op::AddTarget {
                name: "iqn.2026-11.test:new".into(),
                luns: vec![file("new-target.img")],
            },
            Op::RemoveTarget { name: T.into() },
            Op::SetTarget {
                name: T.into(),
                alias: Some("renamed".into()),
                allow: Some(vec!["iqn.2026-11.test:init".into()]),
                chap: Some("user:a-secret-0123456".into()),
                default_map: Some("none".into()),
            },
            Op::AddLun {
                target: T.into(),
                spec: file("new-lun.img"),
                lun: None,
            },
            Op::RemoveLun { target: T.into(), lun: 1 },
            Op::ResizeLun {
                target: T.into(),
                lun: 0,
                size: "2MiB".into(),
            },
            Op::SetReadOnly {
                target: T.into(),
                lun: 0,
                read_only: true,
            },
            Op::SetInitiator {
                target: T.into(),
                name: "iqn.2026-11.test:other".into(),
                luns: Some(vec![Mapping {
                    lun: 0,
                    target_lun: 0,
                    read_only: true,
                }]),
                chap: None,
            },
            Op::RemoveInitiator {
                target: T.into(),
                name: "iqn.2026-11.test:init".into(),
            },
            Op::AddPortal {
                addr: "127.0.0.1:3261".parse().unwrap(),
            },
            Op::RemovePortal {
                addr: "127.0.0.1:3262".parse().unwrap(),
            },
            Op::Apply {
                toml: format!(
                    "{running}[[target]]\nname = \"iqn.2026-11.test:applied\"\n[[target.lun]]\nspec = \"{}\"\n",
                    file("applied.img")
                ),
            },
            Op::LogoutSession { tsih: 1 },
            Op::SaveConfig { path: None },
            Op::SaveConfig {
                path: Some(dir.join("saved/copy.toml")),
            },
            Op::ReloadConfig {},
            Op::OnlineLun { target: T.into(), lun: 0 },
            Op::SetAlua {
                target: T.into(),
                group: 2,
                state: "active/optimized".into(),
            },
            Op::RejoinGroup { target: T.into() },
            Op::CreateSnapshot {
                target: T.into(),
                luns: vec![0],
                name: "s1".into(),
            },
            Op::DeleteSnapshot {
                target: T.into(),
                lun: 0,
                name: "s1".into(),
            },
            Op::RollbackSnapshot {
                target: T.into(),
                lun: 0,
                name: "s1".into(),
            },
            Op::CloneSnapshot {
                target: T.into(),
                lun: 0,
                name: "s1".into(),
                clone: "c1".into(),
            },
        ];
        for op in &ops {
            match op {
                Op::AddTarget { .. }
                | Op::RemoveTarget { .. }
                | Op::SetTarget { .. }
                | Op::AddLun { .. }
                | Op::RemoveLun { .. }
                | Op::ResizeLun { .. }
                | Op::SetReadOnly { .. }
                | Op::SetInitiator { .. }
                | Op::RemoveInitiator { .. }
                | Op::AddPortal { .. }
                | Op::RemovePortal { .. }
                | Op::Apply { .. }
                | Op::LogoutSession { .. }
                | Op::SaveConfig { .. }
                | Op::ReloadConfig { .. }
                | Op::OnlineLun { .. }
                | Op::SetAlua { .. }
                | Op::RejoinGroup { .. }
                | Op::CreateSnapshot { .. }
                | Op::DeleteSnapshot { .. }
                | Op::RollbackSnapshot { .. }
                | Op::CloneSnapshot { .. } => {}
            }
        }
        ops
    }

    #[test]
    fn an_operation_is_logged_by_its_name_and_shown_without_secrets() {
        let tmp = tempfile::tempdir().unwrap();
        let secret = "chap-secret-0123456789";
        let mut ops = every_op(tmp.path(), &format!("# chap = \"u:{secret}\"\n"));
        ops.push(Op::SetTarget {
            name: T.into(),
            alias: None,
            allow: None,
            chap: Some(format!("user:{secret}")),
            default_map: None,
        });
        ops.push(Op::SetInitiator {
            target: T.into(),
            name: "iqn.2026-11.test:init".into(),
            luns: None,
            chap: Some(format!("user:{secret}")),
        });
        for op in &ops {
            let json = serde_json::to_value(op).unwrap();
            assert_eq!(json["op"], op.kind(), "{op:?}");
            let shown = format!("{op:?}");
            assert!(!shown.contains(secret), "{shown}");
            assert!(shown.contains(op.kind()), "{shown}");
        }
    }

    /// Every file under `dir` with its length and modification time.
    fn snapshot(dir: &Path) -> BTreeMap<String, (u64, std::time::SystemTime)> {
        let mut out = BTreeMap::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                for (k, v) in snapshot(&e.path()) {
                    out.insert(format!("{}/{k}", e.file_name().to_string_lossy()), v);
                }
            } else {
                let key = e.file_name().to_string_lossy().into_owned();
                out.insert(key, (m.len(), m.modified().unwrap()));
            }
        }
        out
    }

    #[test]
    fn a_dry_run_of_any_operation_changes_and_writes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().canonicalize().unwrap();
        std::fs::create_dir(dir.join("saved")).unwrap();
        let cfg_path = dir.join("ironlun.toml");
        let text = format!(
            "listen = [\"127.0.0.1:3260\", \"127.0.0.1:3262\"]\nadmin_save_dir = \"{}\"\n[[target]]\nname = \"{T}\"\nallow = [\"iqn.2026-11.test:init\", \"iqn.2026-11.test:other\"]\nalua = {{ mode = \"both\", local_group = 1, groups = [{{ id = 1, state = \"active/optimized\" }}, {{ id = 2, state = \"standby\" }}] }}\n[[target.lun]]\nspec = \"file:{},size=1MiB\"\n[[target.lun]]\nspec = \"ram:1MiB\"\n[[target.initiator]]\nname = \"iqn.2026-11.test:init\"\n[[target]]\nname = \"iqn.2026-11.test:u\"\n[[target.lun]]\nspec = \"ram:1MiB\"\n",
            dir.join("saved").display(),
            dir.join("lun0.img").display()
        );
        std::fs::write(&cfg_path, &text).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cfg_path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let o = Overrides {
            config: Some(cfg_path.clone()),
            ..Overrides::default()
        };
        let cfg = Config::load(&o).unwrap();
        let live = Live::new(test_registry(&cfg), cfg, &o, Vec::new()).unwrap();
        let files = snapshot(&dir);
        let state = serde_json::to_string(&super::super::views::state(&live)).unwrap();
        for op in every_op(&dir, &text) {
            let what = op.kind();
            let r = run(
                &live,
                Request {
                    op,
                    dry_run: true,
                    force: true,
                },
            );
            match r {
                Ok(a) => assert!(a.dry_run, "{what}: {a:?}"),
                // Only the logout of a session there is not, and the
                // rejoin of a gateway group there is not.
                Err(e) => assert!(
                    matches!(what, "logout-session" | "rejoin-group"),
                    "{what}: {e:?}"
                ),
            }
            assert_eq!(live.document(), text, "{what}");
            assert_eq!(snapshot(&dir), files, "{what} wrote");
            let now = serde_json::to_string(&super::super::views::state(&live)).unwrap();
            assert_eq!(now, state, "{what} changed the state");
        }
    }

    /// The running configuration read from `text`, written to a file in
    /// `dir`.
    fn from_file(dir: &Path, text: &str) -> Live {
        let path = dir.join("ironlun.toml");
        std::fs::write(&path, text).unwrap();
        let o = Overrides {
            config: Some(path),
            ..Overrides::default()
        };
        let cfg = Config::load(&o).unwrap();
        Live::new(test_registry(&cfg), cfg, &o, Vec::new()).unwrap()
    }

    /// A state changed in the configuration reaches every LU of the target
    /// and its initiators (ASYMMETRIC ACCESS STATE CHANGED); `alua set`
    /// changes the document, and brings back in line a LU whose state moved
    /// while the document stayed (an initiator's SET TARGET PORT GROUPS).
    #[test]
    fn alua_states_change_live_on_every_lu() {
        use ironlun_scsi::reservations::ItNexus;
        use ironlun_scsi::{AccessState, NexusId};
        let t = "iqn.2026-11.test:a";
        let text = |g1: &str| {
            format!(
                "[[target]]\nname = \"{t}\"\n[target.alua]\nmode = \"both\"\nlocal_group = 1\ngroups = [{{ id = 1, state = \"{g1}\" }}, {{ id = 2, state = \"standby\" }}]\n[[target.lun]]\nspec = \"ram:1MiB\"\n[[target.lun]]\nspec = \"null:1MiB\"\n"
            )
        };
        let dir = tempfile::tempdir().unwrap();
        let live = from_file(dir.path(), &text("active/optimized"));
        let luns = || live.registry.find(t).unwrap().luns.clone();
        let nexus = NexusId(9);
        luns().attach_nexus(nexus, &ItNexus::new("iqn.2026-11.test:i", [0; 6], 1), false);
        for (_, lu) in luns().iter() {
            lu.take_ua(nexus);
            assert_eq!(lu.alua_local_state(), AccessState::ActiveOptimized);
        }
        let out = live.apply_text(&text("standby"), false, false).unwrap();
        assert_eq!(
            out.changes
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            [format!(
                "~ target {t}: ALUA group 1 active/optimized -> standby"
            )]
        );
        for (_, lu) in luns().iter() {
            assert_eq!(lu.alua_local_state(), AccessState::Standby);
            let ua = lu.take_ua(nexus).unwrap();
            assert_eq!((ua.code.asc, ua.code.ascq), (0x2a, 0x06));
        }
        // The operator's `alua set`: into the document, onto every LU.
        let set = |state: &str, dry_run: bool| {
            run(
                &live,
                Request {
                    op: Op::SetAlua {
                        target: t.into(),
                        group: 1,
                        state: state.into(),
                    },
                    dry_run,
                    force: false,
                },
            )
        };
        let a = set("active/non-optimized", false).unwrap();
        assert_eq!(a.changes.len(), 1, "{a:?}");
        assert!(live.document().contains("state = \"active/non-optimized\""));
        for (_, lu) in luns().iter() {
            assert_eq!(lu.alua_local_state(), AccessState::ActiveNonOptimized);
        }
        // LU 1 moved alone (as SET TARGET PORT GROUPS moves one LU): the
        // document already says active/non-optimized, and `alua set` brings
        // it back all the same, saying so; a dry run only says so.
        let lu1 = luns().get(1).unwrap().clone();
        lu1.set_alua_state(1, AccessState::Standby).unwrap();
        let a = set("active/non-optimized", true).unwrap();
        assert_eq!(
            a.changes,
            [format!(
                "~ target {t} LUN 1: ALUA group 1 active/non-optimized"
            )]
        );
        assert_eq!(lu1.alua_local_state(), AccessState::Standby);
        set("active/non-optimized", false).unwrap();
        assert_eq!(lu1.alua_local_state(), AccessState::ActiveNonOptimized);
        let e = set("optimized", false).unwrap_err();
        assert_eq!(e.status, 422, "{}", e.message);
        let e = run(
            &live,
            Request {
                op: Op::SetAlua {
                    target: t.into(),
                    group: 7,
                    state: "standby".into(),
                },
                dry_run: false,
                force: false,
            },
        )
        .unwrap_err();
        assert_eq!(
            (e.status, e.message.as_str()),
            (404, "target iqn.2026-11.test:a has no ALUA group 7")
        );
    }
}
