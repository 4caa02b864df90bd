//! `ironlun admin`: the management API's client. It finds the daemon's
//! socket from `--socket`, else from the configuration (`--config`, else
//! /etc/ironlun/ironlun.toml): `admin_socket`, or admin.sock in the state
//! directory; or it speaks HTTP to `--url` with `--token-file`. Output is
//! the state as a tree, the sessions as a table (`admin_show`) or the
//! diff lines; `--json` prints what the API answered.

// Indexing a serde_json::Value by key yields Null for a missing key: it
// cannot panic, which is what the lint guards against.
#![allow(clippy::indexing_slicing)]

use std::path::{Path, PathBuf};

use clap::Subcommand;
use ironlun_admin_client::{Client, Endpoint};
use ironlun_target::live::edit::Mapping;
use ironlun_target_admin::ops::{Op, Request};
use serde_json::Value;

use crate::runtime::{usage, Failure};

/// Where the packaged service keeps its configuration.
const DEFAULT_CONFIG: &str = "/etc/ironlun/ironlun.toml";

#[derive(clap::Args)]
pub struct AdminArgs {
    /// The daemon's management socket.
    #[arg(long, value_name = "PATH", global = true)]
    socket: Option<PathBuf>,
    /// The management API over HTTP (`admin_http`), as
    /// http://ADDR:PORT, instead of the socket.
    #[arg(long, value_name = "URL", global = true, conflicts_with = "socket")]
    url: Option<String>,
    /// The bearer token for --url (`admin_token_file`; the rules of
    /// every token file: yours, mode 0600 or stricter, not a link).
    #[arg(long, value_name = "FILE", global = true, requires = "url")]
    token_file: Option<PathBuf>,
    /// Find the socket from this configuration file.
    #[arg(long, value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    /// Print the API's JSON answer.
    #[arg(long, global = true)]
    json: bool,
    /// `--diff` before the command (`admin --diff apply FILE`): as after it.
    #[arg(long, visible_alias = "dry-run", hide = true)]
    diff: bool,
    /// `--force` before the command: as after it.
    #[arg(long, hide = true)]
    force: bool,
    #[command(subcommand)]
    what: What,
}

/// The flags of every command that changes the daemon.
#[derive(clap::Args, Clone, Copy, Default)]
struct Change {
    /// Show what would change, change nothing.
    #[arg(long, visible_alias = "dry-run")]
    diff: bool,
    /// Let a removal log out the sessions it concerns, and a resize
    /// shrink a LUN (its last blocks are discarded).
    #[arg(long)]
    force: bool,
}

#[derive(Subcommand)]
enum What {
    /// Targets, LUNs, initiator entries and portals.
    State,
    /// Sessions with their negotiated keys and I/O counters.
    Sessions,
    /// Ask a session's initiator to log out (by TSIH).
    Logout {
        /// The session's TSIH (`admin sessions` lists them).
        tsih: u16,
        #[command(flatten)]
        change: Change,
    },
    /// Apply a whole configuration file: print the difference and apply
    /// it (`--diff`: print only).
    Apply {
        /// The TOML configuration to make the running one
        /// (docs/config.md).
        file: PathBuf,
        #[command(flatten)]
        change: Change,
    },
    /// The running configuration: show it, or save it to a file.
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Add, remove or set a target (name, alias, access list, CHAP).
    #[command(subcommand)]
    Target(TargetCmd),
    /// Add, remove, resize a LUN, or make it read-only.
    #[command(subcommand)]
    Lun(LunCmd),
    /// Set or remove an initiator's own LUN map and CHAP on a target.
    #[command(subcommand)]
    Initiator(InitiatorCmd),
    /// Add or remove a portal (an address the daemon listens on).
    #[command(subcommand)]
    Portal(PortalCmd),
    /// Set the ALUA state of a target port group (docs/ha.md).
    #[command(subcommand)]
    Alua(AluaCmd),
    /// The gateway group (docs/ha.md): bring a fenced gateway back.
    #[command(subcommand)]
    Group(GroupCmd),
    /// Snapshots of file: (reflink) and rbd: LUNs: take, list, delete,
    /// roll back, clone (docs/snapshots.md).
    #[command(subcommand)]
    Snapshot(SnapshotCmd),
}

#[derive(Subcommand)]
enum SnapshotCmd {
    /// Take a snapshot: the LUN's I/O waits while it is taken (the
    /// pause is printed). LUN may list several, 0,1,2: one consistency
    /// group, taken at one instant.
    Create {
        /// The target's iSCSI name.
        target: String,
        /// The LUN number, or several joined by commas.
        #[arg(value_name = "LUN[,LUN…]")]
        luns: String,
        /// The snapshot's name: letters, digits, '.', '_' and '-', at
        /// most 64, starting with a letter or digit.
        name: String,
        #[command(flatten)]
        change: Change,
    },
    /// Every LUN's snapshots, with sizes and times.
    List,
    /// Delete a snapshot.
    Delete {
        /// The target's iSCSI name.
        target: String,
        /// The LUN number.
        lun: u16,
        /// The snapshot's name.
        name: String,
        #[command(flatten)]
        change: Change,
    },
    /// Put the LUN's data back to the snapshot's; with sessions on the
    /// LUN only with --force (they are told the medium changed).
    Rollback {
        /// The target's iSCSI name.
        target: String,
        /// The LUN number.
        lun: u16,
        /// The snapshot's name.
        name: String,
        #[command(flatten)]
        change: Change,
    },
    /// Make a new writable store from a snapshot, beside the LUN's (a
    /// file in its directory, an image in its pool).
    Clone {
        /// The target's iSCSI name.
        target: String,
        /// The LUN number.
        lun: u16,
        /// The snapshot's name.
        name: String,
        /// The clone's name (the same rule as a snapshot's).
        clone: String,
        #[command(flatten)]
        change: Change,
    },
}

#[derive(Subcommand)]
enum GroupCmd {
    /// After a fence (another gateway took this one's LUNs and the
    /// cluster blocklisted its client), open the images with a fresh
    /// client and rejoin the group as a standby.
    Rejoin {
        /// The target's iSCSI name.
        target: String,
        #[command(flatten)]
        change: Change,
    },
}

#[derive(Subcommand)]
enum AluaCmd {
    /// Set the asymmetric access state of one of a target's port groups
    /// (`[target.alua]`) on every LU of the target; its initiators are
    /// told ASYMMETRIC ACCESS STATE CHANGED.
    Set {
        /// The target's iSCSI name.
        target: String,
        /// The target port group's id (`groups` in `[target.alua]`).
        group: u16,
        /// The state to set.
        #[arg(value_parser = [
            "active/optimized",
            "active/non-optimized",
            "standby",
            "unavailable",
            "transitioning",
        ])]
        state: String,
        #[command(flatten)]
        change: Change,
    },
}

#[derive(Subcommand)]
enum ConfigCmd {
    /// The running configuration as TOML (secrets hidden).
    Show,
    /// Write the running configuration: the daemon's file (the
    /// default), or PATH = NAME.toml in the daemon's admin_save_dir.
    Save {
        /// Where to write it (default: the file the daemon started with).
        path: Option<PathBuf>,
        #[command(flatten)]
        change: Change,
    },
    /// Read the daemon's file again and apply it, as SIGHUP does
    /// (`--diff`: what SIGHUP would change, unsaved live changes undone).
    Reload {
        #[command(flatten)]
        change: Change,
    },
}

/// A LUN spec's help, for `target add --lun` and `lun add`.
const SPEC_HELP: &str = "A LUN spec: ram:SIZE, null:SIZE, file:PATH[,size=SIZE], block:PATH or rbd:POOL/IMAGE, with options such as ,ro ,bs=4096 ,thin (docs/config.md)";

#[derive(Subcommand)]
enum TargetCmd {
    /// Add a target with its LUNs.
    Add {
        /// The target's iSCSI name (iqn.…, eui.… or naa.…).
        name: String,
        /// LUN spec (repeatable), numbered from 0: ram:SIZE, null:SIZE,
        /// file:PATH[,size=SIZE], block:PATH or rbd:POOL/IMAGE, with
        /// options such as ,ro ,bs=4096 ,thin (docs/config.md).
        #[arg(long, value_name = "SPEC")]
        lun: Vec<String>,
        #[command(flatten)]
        change: Change,
    },
    /// Remove a target (with sessions: only with --force, which logs
    /// them out).
    Remove {
        /// The target's iSCSI name.
        name: String,
        #[command(flatten)]
        change: Change,
    },
    /// Set a target's alias, access list, CHAP or default map; what is
    /// not given stays.
    Set {
        /// The target's iSCSI name.
        name: String,
        /// The target's alias ("" removes it).
        #[arg(long)]
        alias: Option<String>,
        /// Access list entries (replace the list; repeatable): initiator
        /// names, networks (CIDR) or addresses.
        #[arg(long, value_name = "IQN|CIDR")]
        allow: Option<Vec<String>>,
        /// USER:SECRET ("" removes).
        #[arg(long, value_name = "USER:SECRET")]
        chap: Option<String>,
        /// What initiators without an entry see: all or none.
        #[arg(long, value_name = "all|none")]
        default_map: Option<String>,
        #[command(flatten)]
        change: Change,
    },
}

#[derive(Subcommand)]
enum LunCmd {
    /// Add a LUN to a target.
    Add {
        /// The target's iSCSI name.
        target: String,
        #[arg(help = SPEC_HELP)]
        spec: String,
        /// The LUN number (default: the lowest free one).
        #[arg(long, value_name = "N")]
        lun: Option<u16>,
        #[command(flatten)]
        change: Change,
    },
    /// Remove a LUN (its initiator mappings go with it).
    Remove {
        /// The target's iSCSI name.
        target: String,
        /// The LUN number.
        lun: u16,
        #[command(flatten)]
        change: Change,
    },
    /// Change a RAM, null or file LUN's size (initiators see CAPACITY
    /// DATA HAS CHANGED).
    Resize {
        /// The target's iSCSI name.
        target: String,
        /// The LUN number.
        lun: u16,
        /// The new size: 16GiB, 1.5GiB, 2G, 500GB.
        size: String,
        #[command(flatten)]
        change: Change,
    },
    /// Read-only on or off.
    ReadOnly {
        /// The target's iSCSI name.
        target: String,
        /// The LUN number.
        lun: u16,
        /// on: writes get DATA PROTECT; off: writable again.
        on: OnOff,
        #[command(flatten)]
        change: Change,
    },
    /// Reads the state files of a LUN they took offline again, after a
    /// person fixed or removed them (docs/admin.md).
    Online {
        /// The target's iSCSI name.
        target: String,
        /// The LUN number.
        lun: u16,
        #[command(flatten)]
        change: Change,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum OnOff {
    On,
    Off,
}

#[derive(Subcommand)]
enum InitiatorCmd {
    /// Gives an initiator its own LUN map and/or CHAP.
    Set {
        /// The target's iSCSI name.
        target: String,
        /// The initiator's iSCSI name.
        name: String,
        /// MAPPED=TARGET_LUN[:ro] (repeatable); none: the target's LUNs.
        #[arg(long = "map", value_name = "MAPPED=TARGET_LUN[:ro]")]
        maps: Vec<String>,
        /// The initiator's own CHAP credentials, USER:SECRET.
        #[arg(long, value_name = "USER:SECRET")]
        chap: Option<String>,
        #[command(flatten)]
        change: Change,
    },
    /// Remove an initiator's entry (it sees the target's default map).
    Remove {
        /// The target's iSCSI name.
        target: String,
        /// The initiator's iSCSI name.
        name: String,
        #[command(flatten)]
        change: Change,
    },
}

#[derive(Subcommand)]
enum PortalCmd {
    /// Listen on one more address.
    Add {
        /// IP address and port, ADDR:PORT (IPv6 as [::1]:3260).
        #[arg(value_name = "ADDR:PORT")]
        addr: std::net::SocketAddr,
        #[command(flatten)]
        change: Change,
    },
    /// Stop listening on an address (connections already accepted go
    /// on; the last portal stays).
    Remove {
        /// IP address and port, ADDR:PORT.
        #[arg(value_name = "ADDR:PORT")]
        addr: std::net::SocketAddr,
        #[command(flatten)]
        change: Change,
    },
}

pub fn run(a: AdminArgs) -> Result<(), Failure> {
    // No socket, a configuration that does not load, a bad --url or
    // token file: the command as typed cannot work.
    let socket = endpoint(&a).map_err(usage)?;
    let json = a.json;
    let before = Change {
        diff: a.diff,
        force: a.force,
    };
    let (op, change) = match a.what {
        What::State => return read_only(before, "state", || show_state(&socket, json)),
        What::Sessions => {
            return read_only(before, "sessions", || {
                show(&socket, "/v1/sessions", json, print_sessions)
            })
        }
        What::Config(ConfigCmd::Show) => {
            return read_only(before, "config show", || config_show(&socket, json))
        }
        What::Config(ConfigCmd::Save { path, change }) => (
            Op::SaveConfig {
                // The daemon's working directory is not the caller's.
                path: path
                    .map(|p| {
                        std::path::absolute(&p).map_err(|e| usage(format!("{}: {e}", p.display())))
                    })
                    .transpose()?,
            },
            change,
        ),
        What::Config(ConfigCmd::Reload { change }) => (Op::ReloadConfig {}, change),
        What::Logout { tsih, change } => (Op::LogoutSession { tsih }, change),
        What::Apply { file, change } => (
            Op::Apply {
                toml: std::fs::read_to_string(&file)
                    .map_err(|e| usage(format!("{}: {e}", file.display())))?,
            },
            change,
        ),
        What::Target(t) => target_op(t),
        What::Lun(l) => lun_op(l),
        What::Initiator(i) => initiator_op(i).map_err(usage)?,
        What::Portal(PortalCmd::Add { addr, change }) => (Op::AddPortal { addr }, change),
        What::Portal(PortalCmd::Remove { addr, change }) => (Op::RemovePortal { addr }, change),
        What::Group(GroupCmd::Rejoin { target, change }) => (Op::RejoinGroup { target }, change),
        What::Snapshot(SnapshotCmd::List) => {
            return read_only(before, "snapshot list", || {
                show(&socket, "/v1/snapshots", json, print_snapshots)
            })
        }
        What::Snapshot(s) => snapshot_op(s).map_err(usage)?,
        What::Alua(AluaCmd::Set {
            target,
            group,
            state,
            change,
        }) => (
            Op::SetAlua {
                target,
                group,
                state,
            },
            change,
        ),
    };
    let req = Request {
        op,
        dry_run: change.diff || before.diff,
        force: change.force || before.force,
    };
    let body = serde_json::to_string(&req).map_err(|e| e.to_string())?;
    let (status, answer) = call(&socket, "POST", "/v1/ops", Some(&body))?;
    let v: Value = serde_json::from_str(&answer).map_err(|e| format!("answer: {e}: {answer}"))?;
    if json {
        outln!("{answer}");
    }
    if !(200..300).contains(&status) {
        return Err(refused(status, v["error"].as_str().unwrap_or(&answer)));
    }
    if !json {
        print_changes(&v);
    }
    Ok(())
}

/// A command that changes nothing: `--diff` or `--force` given before it
/// would be ignored, so they are refused.
fn read_only(
    before: Change,
    what: &str,
    f: impl FnOnce() -> Result<(), Failure>,
) -> Result<(), Failure> {
    if before.diff || before.force {
        return Err(usage(format!(
            "admin {what} changes nothing: --diff and --force are for the commands that do"
        )));
    }
    f()
}

/// The API's refusal as a failure: 400, 401, 403, 413 and 422 say the
/// request itself cannot be right (a name, spec, size, path or token to
/// fix: status 2); 404 (not there), 409 (conflict, in use) and 5xx (the
/// daemon failed) are failures of the operation (status 1).
fn refused(status: u16, message: &str) -> Failure {
    match status {
        400 | 401 | 403 | 413 | 422 => Failure::Usage(message.to_owned()),
        _ => Failure::Failed(message.to_owned()),
    }
}

fn config_show(socket: &Endpoint, json: bool) -> Result<(), Failure> {
    let (status, body) = call(socket, "GET", "/v1/config", None)?;
    if status != 200 {
        return Err(refused(
            status,
            &format!("/v1/config: HTTP {status}: {body}"),
        ));
    }
    if json {
        // The TOML text as one JSON string: {"config": "..."}.
        outln!("{}", serde_json::json!({ "config": body }));
    } else {
        out!("{body}");
    }
    Ok(())
}

fn target_op(t: TargetCmd) -> (Op, Change) {
    match t {
        TargetCmd::Add { name, lun, change } => (Op::AddTarget { name, luns: lun }, change),
        TargetCmd::Remove { name, change } => (Op::RemoveTarget { name }, change),
        TargetCmd::Set {
            name,
            alias,
            allow,
            chap,
            default_map,
            change,
        } => (
            Op::SetTarget {
                name,
                alias,
                allow,
                chap,
                default_map,
            },
            change,
        ),
    }
}

fn lun_op(l: LunCmd) -> (Op, Change) {
    match l {
        LunCmd::Add {
            target,
            spec,
            lun,
            change,
        } => (Op::AddLun { target, spec, lun }, change),
        LunCmd::Remove {
            target,
            lun,
            change,
        } => (Op::RemoveLun { target, lun }, change),
        LunCmd::Resize {
            target,
            lun,
            size,
            change,
        } => (Op::ResizeLun { target, lun, size }, change),
        LunCmd::ReadOnly {
            target,
            lun,
            on,
            change,
        } => (
            Op::SetReadOnly {
                target,
                lun,
                read_only: matches!(on, OnOff::On),
            },
            change,
        ),
        LunCmd::Online {
            target,
            lun,
            change,
        } => (Op::OnlineLun { target, lun }, change),
    }
}

fn snapshot_op(s: SnapshotCmd) -> Result<(Op, Change), String> {
    Ok(match s {
        SnapshotCmd::Create {
            target,
            luns,
            name,
            change,
        } => {
            let luns = luns
                .split(',')
                .map(|n| n.trim().parse::<u16>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| {
                    format!("LUN {luns}: give a LUN number, or several joined by commas (0,1)")
                })?;
            (Op::CreateSnapshot { target, luns, name }, change)
        }
        SnapshotCmd::Delete {
            target,
            lun,
            name,
            change,
        } => (Op::DeleteSnapshot { target, lun, name }, change),
        SnapshotCmd::Rollback {
            target,
            lun,
            name,
            change,
        } => (Op::RollbackSnapshot { target, lun, name }, change),
        SnapshotCmd::Clone {
            target,
            lun,
            name,
            clone,
            change,
        } => (
            Op::CloneSnapshot {
                target,
                lun,
                name,
                clone,
            },
            change,
        ),
        SnapshotCmd::List => return Err("snapshot list changes nothing".into()),
    })
}

fn initiator_op(i: InitiatorCmd) -> Result<(Op, Change), String> {
    Ok(match i {
        InitiatorCmd::Set {
            target,
            name,
            maps,
            chap,
            change,
        } => (
            Op::SetInitiator {
                target,
                name,
                luns: if maps.is_empty() {
                    None
                } else {
                    Some(maps.iter().map(|m| mapping(m)).collect::<Result<_, _>>()?)
                },
                chap,
            },
            change,
        ),
        InitiatorCmd::Remove {
            target,
            name,
            change,
        } => (Op::RemoveInitiator { target, name }, change),
    })
}

/// `MAPPED=TARGET_LUN[:ro]`.
fn mapping(s: &str) -> Result<Mapping, String> {
    let bad = || format!("--map {s}: expected MAPPED=TARGET_LUN[:ro], e.g. 0=1:ro");
    let (l, rest) = s.split_once('=').ok_or_else(bad)?;
    let (t, ro) = match rest.split_once(':') {
        Some((t, "ro")) => (t, true),
        Some(_) => return Err(bad()),
        None => (rest, false),
    };
    Ok(Mapping {
        lun: l.trim().parse().map_err(|_| bad())?,
        target_lun: t.trim().parse().map_err(|_| bad())?,
        read_only: ro,
    })
}

/// Where the API is: `--url` with its token, else the socket.
fn endpoint(a: &AdminArgs) -> Result<Endpoint, String> {
    let Some(url) = &a.url else {
        return socket(a).map(Endpoint::Socket);
    };
    let addr = url
        .strip_prefix("http://")
        .map(|r| r.trim_end_matches('/'))
        .and_then(|r| r.parse().ok())
        .ok_or_else(|| format!("--url {url}: give http://ADDR:PORT"))?;
    let file = a.token_file.as_ref().ok_or("--url needs --token-file")?;
    let fail = |e: &dyn std::fmt::Display| format!("--token-file {}: {e}", file.display());
    let token = ironlun_token::load(file).map_err(|e| fail(&e))?;
    // Printable ASCII: ironlun_token::load checked it.
    let token = String::from_utf8(token).map_err(|e| fail(&e))?;
    Ok(Endpoint::Http {
        addr,
        token: Some(token),
    })
}

/// The socket: the flag, else the configuration's.
fn socket(a: &AdminArgs) -> Result<PathBuf, String> {
    if let Some(s) = &a.socket {
        return Ok(s.clone());
    }
    let config = a
        .config
        .clone()
        .or_else(|| {
            Path::new(DEFAULT_CONFIG)
                .exists()
                .then(|| DEFAULT_CONFIG.into())
        })
        .ok_or("no --socket, no --config, and no /etc/ironlun/ironlun.toml")?;
    let cfg = ironlun_target_config::Config::load(&ironlun_target_config::Overrides {
        config: Some(config.clone()),
        ..Default::default()
    })
    .map_err(|e| e.to_string())?;
    cfg.admin_socket().ok_or_else(|| {
        format!(
            "{}: no admin_socket and no state_dir: the daemon serves no management API",
            config.display()
        )
    })
}

/// One exchange with the API (ironlun-admin-client): status and body.
fn call(
    ep: &Endpoint,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<(u16, String), String> {
    let a = Client::new(ep.clone())?.call(method, path, body)?;
    Ok((a.status, a.body))
}

/// The body of `GET path`.
fn get(socket: &Endpoint, path: &str) -> Result<String, Failure> {
    let (status, body) = call(socket, "GET", path, None)?;
    if status != 200 {
        return Err(refused(status, &format!("{path}: HTTP {status}: {body}")));
    }
    Ok(body)
}

fn parse(body: &str) -> Result<Value, Failure> {
    serde_json::from_str(body).map_err(|e| Failure::from(e.to_string()))
}

fn show(socket: &Endpoint, path: &str, json: bool, table: fn(&Value)) -> Result<(), Failure> {
    let body = get(socket, path)?;
    if json {
        out!("{body}");
        return Ok(());
    }
    table(&parse(&body)?);
    Ok(())
}

/// The state as a tree, its sessions under their targets; `--json`: the
/// state as the API answered.
fn show_state(socket: &Endpoint, json: bool) -> Result<(), Failure> {
    let state = get(socket, "/v1/state")?;
    if json {
        out!("{state}");
        return Ok(());
    }
    let sessions = get(socket, "/v1/sessions")?;
    out!(
        "{}",
        super::admin_show::state(&parse(&state)?, &parse(&sessions)?)
    );
    Ok(())
}

fn print_changes(v: &Value) {
    let changes = v["changes"].as_array().cloned().unwrap_or_default();
    if changes.is_empty() {
        outln!("no change");
    }
    for c in &changes {
        outln!("{}", c.as_str().unwrap_or_default());
    }
    if v["dry_run"].as_bool() == Some(true) {
        outln!("(dry run: nothing applied)");
    }
    if let Some(n) = v["note"].as_str() {
        outln!("{n}");
    }
}

fn print_snapshots(v: &Value) {
    out!("{}", super::admin_show::snapshots(v));
}

fn print_sessions(v: &Value) {
    out!("{}", super::admin_show::sessions(v));
}
