//! `ironlun admin`: the management API's client. It finds the daemon's
//! socket from `--socket`, else from the configuration (`--config`, else
//! /etc/ironlun/ironlun.toml): `admin_socket`, or admin.sock in the state
//! directory; or it speaks HTTP to `--url` with `--token-file`. Output is
//! the state as a tree, the sessions as a table (`admin_show`) or the
//! diff lines; `--json` prints what the API answered.

// Indexing a serde_json::Value by key yields Null for a missing key: it
// cannot panic, which is what the lint guards against.
#![allow(clippy::indexing_slicing)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Subcommand;
use ironlun_target::admin::ops::{Op, Request};
use ironlun_target::live::edit::Mapping;
use serde_json::Value;

/// Where the packaged service keeps its configuration.
const DEFAULT_CONFIG: &str = "/etc/ironlun/ironlun.toml";
/// How long an operation may take (opening a backend, a resize).
const ANSWER_WITHIN: Duration = Duration::from_secs(120);

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
    /// Show what would change, change nothing.
    #[arg(long, visible_alias = "dry-run", global = true)]
    diff: bool,
    /// Let a removal log out the sessions it concerns, and a resize
    /// shrink a LUN (its last blocks are discarded).
    #[arg(long, global = true)]
    force: bool,
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// Targets, LUNs, initiator entries and portals.
    State,
    /// Sessions with their negotiated keys and I/O counters.
    Sessions,
    /// Ask a session's initiator to log out (by TSIH).
    Logout { tsih: u16 },
    /// Apply a whole configuration file: print the difference and apply
    /// it (`--diff`: print only).
    Apply { file: PathBuf },
    #[command(subcommand)]
    Config(ConfigCmd),
    #[command(subcommand)]
    Target(TargetCmd),
    #[command(subcommand)]
    Lun(LunCmd),
    #[command(subcommand)]
    Initiator(InitiatorCmd),
    #[command(subcommand)]
    Portal(PortalCmd),
}

#[derive(Subcommand)]
enum ConfigCmd {
    /// The running configuration as TOML (secrets hidden).
    Show,
    /// Write the running configuration: the daemon's file (the
    /// default), or PATH = NAME.toml in the daemon's admin_save_dir.
    Save { path: Option<PathBuf> },
    /// Read the daemon's file again and apply it, as SIGHUP does
    /// (`--diff`: what SIGHUP would change, unsaved live changes undone).
    Reload,
}

#[derive(Subcommand)]
enum TargetCmd {
    Add {
        name: String,
        /// LUN spec (repeatable), numbered from 0.
        #[arg(long)]
        lun: Vec<String>,
    },
    Remove {
        name: String,
    },
    Set {
        name: String,
        #[arg(long)]
        alias: Option<String>,
        /// Access list entries (replace the list; repeatable).
        #[arg(long)]
        allow: Option<Vec<String>>,
        /// USER:SECRET ("" removes).
        #[arg(long)]
        chap: Option<String>,
        /// What initiators without an entry see: all or none.
        #[arg(long)]
        default_map: Option<String>,
    },
}

#[derive(Subcommand)]
enum LunCmd {
    Add {
        target: String,
        spec: String,
        #[arg(long)]
        lun: Option<u16>,
    },
    Remove {
        target: String,
        lun: u16,
    },
    Resize {
        target: String,
        lun: u16,
        size: String,
    },
    /// Read-only on or off.
    ReadOnly {
        target: String,
        lun: u16,
        on: OnOff,
    },
    /// Reads the state files of a LUN they took offline again, after a
    /// person fixed or removed them (docs/admin.md).
    Online {
        target: String,
        lun: u16,
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
        target: String,
        name: String,
        /// MAPPED=TARGET_LUN[:ro] (repeatable); none: the target's LUNs.
        #[arg(long = "map")]
        maps: Vec<String>,
        #[arg(long)]
        chap: Option<String>,
    },
    Remove {
        target: String,
        name: String,
    },
}

#[derive(Subcommand)]
enum PortalCmd {
    Add { addr: std::net::SocketAddr },
    Remove { addr: std::net::SocketAddr },
}

pub fn run(a: AdminArgs) -> Result<(), String> {
    let socket = endpoint(&a)?;
    let (dry_run, force, json) = (a.diff, a.force, a.json);
    let op = match a.what {
        What::State => return show_state(&socket, json),
        What::Sessions => return show(&socket, "/v1/sessions", json, print_sessions),
        What::Config(ConfigCmd::Show) => {
            let (status, body) = call(&socket, "GET", "/v1/config", None)?;
            if status != 200 {
                return Err(format!("/v1/config: HTTP {status}: {body}"));
            }
            print!("{body}");
            return Ok(());
        }
        What::Config(ConfigCmd::Save { path }) => Op::SaveConfig {
            // The daemon's working directory is not the caller's.
            path: path
                .map(|p| std::path::absolute(&p).map_err(|e| format!("{}: {e}", p.display())))
                .transpose()?,
        },
        What::Config(ConfigCmd::Reload) => Op::ReloadConfig {},
        What::Logout { tsih } => Op::LogoutSession { tsih },
        What::Apply { file } => Op::Apply {
            toml: std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?,
        },
        What::Target(t) => target_op(t),
        What::Lun(l) => lun_op(l),
        What::Initiator(i) => initiator_op(i)?,
        What::Portal(PortalCmd::Add { addr }) => Op::AddPortal { addr },
        What::Portal(PortalCmd::Remove { addr }) => Op::RemovePortal { addr },
    };
    let req = Request { op, dry_run, force };
    let body = serde_json::to_string(&req).map_err(|e| e.to_string())?;
    let (status, answer) = call(&socket, "POST", "/v1/ops", Some(&body))?;
    let v: Value = serde_json::from_str(&answer).map_err(|e| format!("answer: {e}: {answer}"))?;
    if json {
        println!("{answer}");
    }
    if !(200..300).contains(&status) {
        return Err(v["error"].as_str().unwrap_or(&answer).to_owned());
    }
    if !json {
        print_changes(&v);
    }
    Ok(())
}

fn target_op(t: TargetCmd) -> Op {
    match t {
        TargetCmd::Add { name, lun } => Op::AddTarget { name, luns: lun },
        TargetCmd::Remove { name } => Op::RemoveTarget { name },
        TargetCmd::Set {
            name,
            alias,
            allow,
            chap,
            default_map,
        } => Op::SetTarget {
            name,
            alias,
            allow,
            chap,
            default_map,
        },
    }
}

fn lun_op(l: LunCmd) -> Op {
    match l {
        LunCmd::Add { target, spec, lun } => Op::AddLun { target, spec, lun },
        LunCmd::Remove { target, lun } => Op::RemoveLun { target, lun },
        LunCmd::Resize { target, lun, size } => Op::ResizeLun { target, lun, size },
        LunCmd::ReadOnly { target, lun, on } => Op::SetReadOnly {
            target,
            lun,
            read_only: matches!(on, OnOff::On),
        },
        LunCmd::Online { target, lun } => Op::OnlineLun { target, lun },
    }
}

fn initiator_op(i: InitiatorCmd) -> Result<Op, String> {
    Ok(match i {
        InitiatorCmd::Set {
            target,
            name,
            maps,
            chap,
        } => Op::SetInitiator {
            target,
            name,
            luns: if maps.is_empty() {
                None
            } else {
                Some(maps.iter().map(|m| mapping(m)).collect::<Result<_, _>>()?)
            },
            chap,
        },
        InitiatorCmd::Remove { target, name } => Op::RemoveInitiator { target, name },
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
    Ok(Endpoint::Http { addr, token })
}

/// The management API's address.
enum Endpoint {
    Socket(PathBuf),
    Http {
        addr: std::net::SocketAddr,
        token: String,
    },
}

/// A connection to the API, whichever its kind.
trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

impl Endpoint {
    /// Connects; also gives the `Authorization` header line to send.
    fn connect(&self) -> Result<(Box<dyn Stream>, String), String> {
        match self {
            Endpoint::Socket(p) => {
                let s = UnixStream::connect(p).map_err(|e| format!("{}: {e}", p.display()))?;
                let _ = s.set_read_timeout(Some(ANSWER_WITHIN));
                Ok((Box::new(s), String::new()))
            }
            Endpoint::Http { addr, token } => {
                let s = std::net::TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
                let _ = s.set_read_timeout(Some(ANSWER_WITHIN));
                Ok((Box::new(s), format!("Authorization: Bearer {token}\r\n")))
            }
        }
    }

    fn name(&self) -> String {
        match self {
            Endpoint::Socket(p) => p.display().to_string(),
            Endpoint::Http { addr, .. } => format!("http://{addr}"),
        }
    }
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
    let cfg = ironlun_target::Config::load(&ironlun_target::Overrides {
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

/// One HTTP/1.1 exchange with the API: status and body.
fn call(
    ep: &Endpoint,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<(u16, String), String> {
    let (mut s, auth) = ep.connect()?;
    let body = body.unwrap_or("");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: ironlun\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let failed = |e: std::io::Error| format!("{}: {e}", ep.name());
    s.write_all(head.as_bytes())
        .and_then(|()| s.write_all(body.as_bytes()))
        .map_err(failed)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(failed)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or("the daemon's answer has no body")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or("the daemon's answer has no status")?;
    Ok((status, body.to_owned()))
}

/// The body of `GET path`.
fn get(socket: &Endpoint, path: &str) -> Result<String, String> {
    let (status, body) = call(socket, "GET", path, None)?;
    if status != 200 {
        return Err(format!("{path}: HTTP {status}: {body}"));
    }
    Ok(body)
}

fn parse(body: &str) -> Result<Value, String> {
    serde_json::from_str(body).map_err(|e| e.to_string())
}

fn show(socket: &Endpoint, path: &str, json: bool, table: fn(&Value)) -> Result<(), String> {
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
fn show_state(socket: &Endpoint, json: bool) -> Result<(), String> {
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
        println!("no change");
    }
    for c in &changes {
        println!("{}", c.as_str().unwrap_or_default());
    }
    if v["dry_run"].as_bool() == Some(true) {
        println!("(dry run: nothing applied)");
    }
    if let Some(n) = v["note"].as_str() {
        println!("{n}");
    }
}

fn print_sessions(v: &Value) {
    out!("{}", super::admin_show::sessions(v));
}
