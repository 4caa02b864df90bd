//! The management API's operations: what each does to the running
//! configuration document, and what the API reads (state, sessions).

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use toml_edit::value;

use crate::config::normalize_iscsi_name;
use crate::live::edit::{self, EditError, Mapping};
use crate::live::{ApplyError, Live, Outcome};
use crate::registry::SessionSignal;

/// A request: one operation, with `dry_run` (plan only) and `force`
/// (a removal may log sessions out).
#[derive(Debug, Deserialize, Serialize)]
pub struct Request {
    #[serde(flatten)]
    pub op: Op,
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub force: bool,
}

/// Every operation that changes the daemon.
#[derive(Debug, Deserialize, Serialize)]
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
    /// Writes the running configuration to `path` (default: the file the
    /// daemon was started with).
    SaveConfig {
        path: Option<PathBuf>,
    },
}

/// What went wrong, and the HTTP status it maps to.
#[derive(Debug)]
pub struct OpError {
    pub status: u16,
    pub message: String,
}

impl OpError {
    fn new(status: u16, message: impl Into<String>) -> OpError {
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
    type Edit<'a> = &'a dyn Fn(&mut toml_edit::DocumentMut) -> Result<(), EditError>;
    let edit_op = |f: Edit| {
        live.apply_edit(f, dry, force)
            .map(Answer::from)
            .map_err(OpError::from)
    };
    // An operation on one target: checked alone (live::scoped).
    let target_op = |name: &str, f: Edit| {
        live.apply_target_edit(name, f, dry, force)
            .map(Answer::from)
            .map_err(OpError::from)
    };
    match req.op {
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
        Op::AddPortal { addr } => edit_op(&|d| edit::add_portal(d, addr)),
        Op::RemovePortal { addr } => edit_op(&|d| edit::remove_portal(d, addr)),
        Op::Apply { toml } => live
            .apply_text(&toml, dry, force)
            .map(Answer::from)
            .map_err(OpError::from),
        Op::LogoutSession { tsih } => logout(live, tsih, dry),
        Op::SaveConfig { path } => save(live, path),
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

fn save(live: &Live, path: Option<PathBuf>) -> Result<Answer, OpError> {
    let path = path.or_else(|| live.path()).ok_or_else(|| {
        OpError::new(
            422,
            "the daemon was started without a file: give a path to save to",
        )
    })?;
    crate::live::save(&path, &live.document())
        .map_err(|e| OpError::new(500, format!("{}: {e}", path.display())))?;
    Ok(Answer {
        changes: Vec::new(),
        dry_run: false,
        note: Some(format!("saved to {}", path.display())),
    })
}
