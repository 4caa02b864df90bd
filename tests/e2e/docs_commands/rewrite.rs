//! The substitutions that make a documented command run on loopback in
//! a scratch directory, and the check that nothing else is left that
//! would reach past it. Each rule is here and listed in the test's
//! header (tests/e2e/docs_commands.rs).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use regex::{Captures, Regex};

use super::extract::{assignment, stage_end, DocCommand};

/// A target the commands may use: its first portal, statistics
/// endpoint, process and (for the test's own) name.
#[derive(Clone, Debug)]
pub struct Place {
    pub portal: SocketAddr,
    pub stats: Option<SocketAddr>,
    pub pid: u32,
}

/// The test's own target: LUN n's URL is `URLn`'s, LUN 0's is `$URL`'s
/// where a document does not set it.
pub const SHARED_NAME: &str = "iqn.2026-11.io.ironlun:lab";
pub const SHARED_LUNS: usize = 4;

/// The documented addresses that stand for "the target".
const DOC_PORTAL: &str = "127.0.0.1:3260";
const DOC_STATS: &str = "127.0.0.1:9260";

/// Directories whose paths are made relative to the scratch directory
/// (`/srv/disk.img` is `DIR/srv/disk.img`); any other absolute path
/// makes a command unrunnable here.
const REROOTED: &[&str] = &[
    "/srv/",
    "/var/tmp/",
    "/etc/ironlun/",
    "/etc/bash_completion.d/",
    "/usr/local/share/man/",
];

/// The measured time every shortened run gets (`--time`), and no ramp.
pub const SHORT_TIME: &str = "100ms";

/// What surrounds a command when it runs.
pub struct Context<'a> {
    /// The target the document started in the background, else the
    /// test's.
    pub current: &'a Place,
    /// The test's target.
    pub shared: &'a Place,
    /// Variables the document set.
    pub vars: &'a HashMap<String, String>,
    /// The document's scratch directory (the commands' working one).
    pub root: &'a Path,
    /// The test's target's management socket.
    pub admin_socket: &'a Path,
}

/// How a command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Runs to its end.
    Once,
    /// Serves until stopped: ready once its output has said each
    /// `(words, times)` of `ready` that many times; `target`: it is an
    /// `ironlun target`.
    Serves {
        ready: Vec<(&'static str, usize)>,
        target: bool,
    },
}

/// A command ready to give to `bash -c`.
#[derive(Debug)]
pub struct Runnable {
    pub text: String,
    pub kind: Kind,
    /// Directories of re-rooted paths, to make before it runs.
    pub dirs: Vec<PathBuf>,
}

/// The command with every substitution made, or why it cannot run here.
pub fn rewrite(cmd: &DocCommand, cx: &Context) -> Result<Runnable, String> {
    let mut text = cmd.text.trim_end_matches('&').trim_end().to_owned();
    text = text.replace("$(pidof ironlun)", &cx.current.pid.to_string());
    text = expand_vars(&text, cx)?;
    text = placeholder_urls(&text, cx.shared)?;
    let (sub, sub2) = subcommand(&text);
    let mut kind = kind_of(&text, &sub, &sub2);
    if let Kind::Serves { .. } = kind {
        text = serving_addresses(&text, &sub);
    }
    text = documented_addresses(&text, cx.current)?;
    let (rerooted, dirs) = reroot(&text, cx.root)?;
    text = rerooted;
    text = shorten(&text, &sub, &sub2);
    refuse_leftovers(&text)?;
    if sub == "admin" {
        text = admin_socket(&text, cx.admin_socket);
    }
    if let Kind::Serves {
        ready,
        target: true,
    } = &mut kind
    {
        *ready = target_ready(&text);
    }
    Ok(Runnable { text, kind, dirs })
}

/// The words of the first command, without leading assignments.
fn words(text: &str) -> Vec<String> {
    shlex::split(&text[..stage_end(text)])
        .unwrap_or_default()
        .into_iter()
        .skip_while(|w| assignment(w).is_some())
        .collect()
}

/// `ironlun SUB SUB2 …`'s SUB and SUB2 (empty when absent).
fn subcommand(text: &str) -> (String, String) {
    let w = words(text);
    let at = |i: usize| w.get(i).cloned().unwrap_or_default();
    (at(1), at(2))
}

fn has_flag(text: &str, flag: &str) -> bool {
    words(text)
        .iter()
        .any(|w| w == flag || w.starts_with(&format!("{flag}=")))
}

fn kind_of(text: &str, sub: &str, sub2: &str) -> Kind {
    let serves = |marker, target| Kind::Serves {
        ready: vec![(marker, 1)],
        target,
    };
    match (sub, sub2) {
        ("target", _) if !has_flag(text, "--check") => serves("listening on ", true),
        ("netem", _) if !has_flag(text, "--time") => serves("relaying ", false),
        ("bench", "agent") => serves("listening on ", false),
        _ => Kind::Once,
    }
}

/// A target is ready once it has said it listens on each portal and,
/// with `--stats`, where its statistics are (said after the portals).
fn target_ready(text: &str) -> Vec<(&'static str, usize)> {
    let mut ready = vec![("listening on ", text.matches("--listen ").count())];
    if has_flag(text, "--stats") {
        ready.push(("statistics on http://", 1));
    }
    ready
}

/// `$NAME` and `${NAME}`: the document's variable; `$URL` where the
/// document sets none is LUN 0 of the test's target.
fn expand_vars(text: &str, cx: &Context) -> Result<String, String> {
    let re = Regex::new(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?").expect("regex");
    let mut missing = None;
    let out = re.replace_all(text, |c: &Captures| {
        let name = &c[1];
        match cx.vars.get(name) {
            Some(v) => v.clone(),
            None if name == "URL" => shared_url(cx.shared, 0),
            None => {
                missing = Some(name.to_owned());
                String::new()
            }
        }
    });
    match missing {
        Some(name) => Err(format!("${name} is not set in the document")),
        None => Ok(out.into_owned()),
    }
}

fn shared_url(shared: &Place, lun: usize) -> String {
    format!("iscsi://{}/{SHARED_NAME}/{lun}", shared.portal)
}

/// `URL0` … `URL3` standing alone: LUN n of the test's target.
fn placeholder_urls(text: &str, shared: &Place) -> Result<String, String> {
    let re = Regex::new(r"\bURL(\d+)\b").expect("regex");
    let mut bad = None;
    let out = re.replace_all(text, |c: &Captures| {
        let lun: usize = c[1].parse().unwrap_or(usize::MAX);
        if lun >= SHARED_LUNS {
            bad = Some(lun);
        }
        shared_url(shared, lun)
    });
    match bad {
        Some(lun) => Err(format!(
            "URL{lun}: the test's target has {SHARED_LUNS} LUNs"
        )),
        None => Ok(out.into_owned()),
    }
}

/// A command that serves listens where the kernel picks (IPv4 or IPv6
/// loopback as written), a target's statistics too, and a target given
/// no portal gets one (its default is 127.0.0.1:3260).
fn serving_addresses(text: &str, sub: &str) -> String {
    let listen = Regex::new(r#"--listen(?:\s+|=)('[^']*'|"[^"]*"|\S+)"#).expect("regex");
    let mut out = listen
        .replace_all(text, |c: &Captures| {
            let v6 = c[1].contains('[');
            format!("--listen {}", if v6 { "'[::1]:0'" } else { "127.0.0.1:0" })
        })
        .into_owned();
    if sub == "target" {
        let stats = Regex::new(r"--stats(?:\s+|=)\S+").expect("regex");
        out = stats.replace_all(&out, "--stats 127.0.0.1:0").into_owned();
        if !out.contains("--listen ") {
            out = insert_flags(&out, "--listen 127.0.0.1:0");
        }
    }
    out
}

/// 127.0.0.1:3260 is the target serving the document, 127.0.0.1:9260
/// its statistics endpoint.
fn documented_addresses(text: &str, current: &Place) -> Result<String, String> {
    let mut out = text.replace(DOC_PORTAL, &current.portal.to_string());
    if out.contains(DOC_STATS) {
        let stats = current.stats.ok_or_else(|| {
            format!("{DOC_STATS}: the target serving the document has no --stats")
        })?;
        out = out.replace(DOC_STATS, &stats.to_string());
    }
    Ok(out)
}

/// Absolute paths under [`REROOTED`] moved into `root`, with the
/// directories they need; any other one is refused. URLs are not paths.
fn reroot(text: &str, root: &Path) -> Result<(String, Vec<PathBuf>), String> {
    let urls = Regex::new(r#"[a-z][a-z0-9+]*://[^\s'"]*"#).expect("regex");
    let spans: Vec<(usize, usize)> = urls.find_iter(text).map(|m| (m.start(), m.end())).collect();
    let path = Regex::new(r#"(^|[\s=:,'"])(/[^\s,'"]*)"#).expect("regex");
    let mut failed = None;
    let mut dirs = Vec::new();
    let out = path.replace_all(text, |c: &Captures| {
        let m = c.get(2).expect("group 2");
        let whole = &c[0];
        if spans.iter().any(|&(s, e)| m.start() >= s && m.start() < e) {
            return whole.to_owned();
        }
        let p = m.as_str();
        if !REROOTED.iter().any(|d| p.starts_with(d)) {
            failed = Some(format!(
                "{p}: a path outside the directories the test re-roots"
            ));
            return whole.to_owned();
        }
        let moved = root.join(p.trim_start_matches('/'));
        dirs.extend(moved.parent().map(Path::to_path_buf));
        format!("{}{}", &c[1], moved.display())
    });
    match failed {
        Some(why) => Err(why),
        None => Ok((out.into_owned(), dirs)),
    }
}

/// Runs of fixed length shortened: `bench` measures [`SHORT_TIME`]
/// per workload with no ramp, `sweep` a cell and `tcpbench` a
/// measurement that long (the flag replaced, or added).
fn shorten(text: &str, sub: &str, sub2: &str) -> String {
    let flags: &[(&str, &str)] = match (sub, sub2) {
        ("bench", "agent") => &[],
        ("bench", _) if has_flag(text, "--list") => &[],
        ("bench", _) => &[("--time", SHORT_TIME), ("--ramp", "0s")],
        ("sweep" | "tcpbench", _) => &[("--time", SHORT_TIME)],
        _ => &[],
    };
    let mut out = text.to_owned();
    for (flag, value) in flags {
        let re = Regex::new(&format!(r"{flag}(?:\s+|=)\S+")).expect("regex");
        out = if re.is_match(&out) {
            re.replace_all(&out, format!("{flag} {value}")).into_owned()
        } else {
            insert_flags(&out, &format!("{flag} {value}"))
        };
    }
    out
}

/// `ironlun admin` told no socket, file or URL talks to the test's
/// target (the default, /etc/ironlun/ironlun.toml's socket, is not
/// there).
fn admin_socket(text: &str, socket: &Path) -> String {
    if ["--socket", "--config", "--url"]
        .iter()
        .any(|f| has_flag(text, f))
    {
        return text.to_owned();
    }
    let with = format!("ironlun admin --socket {}", socket.display());
    text.replacen("ironlun admin", &with, 1)
}

/// `flags` added at the end of the first command (before a pipe or a
/// redirection).
fn insert_flags(text: &str, flags: &str) -> String {
    let end = stage_end(text);
    let (head, tail) = text.split_at(end);
    let sep = if tail.is_empty() { "" } else { " " };
    format!("{} {flags}{sep}{}", head.trim_end(), tail)
}

/// What no substitution covered: a shell expansion, an address that is
/// not loopback, a URL to another host, an upper-case placeholder.
fn refuse_leftovers(text: &str) -> Result<(), String> {
    if let Some(at) = text.find('$') {
        return Err(format!(
            "a shell expansion the test does not make: {}",
            &text[at..]
        ));
    }
    let ipv4 = Regex::new(r"\b(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})\b").expect("regex");
    if let Some(c) = ipv4.captures_iter(text).find(|c| &c[1] != "127.0.0.1") {
        return Err(format!("{}: not a loopback address", &c[1]));
    }
    let host = Regex::new(r"iscsi://(?:[^@/\s]*@)?(\[[^\]]*\]|[^/\s:'\x22]+)").expect("regex");
    if let Some(c) = host
        .captures_iter(text)
        .find(|c| !matches!(&c[1], "127.0.0.1" | "[::1]"))
    {
        return Err(format!("iscsi://{}: not on loopback", &c[1]));
    }
    let placeholder = Regex::new(r"^[A-Z][A-Z0-9_]+$").expect("regex");
    if let Some(w) = words(text).into_iter().find(|w| placeholder.is_match(w)) {
        return Err(format!("{w}: a placeholder"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(port: u16, stats: Option<u16>, pid: u32) -> Place {
        Place {
            portal: SocketAddr::from(([127, 0, 0, 1], port)),
            stats: stats.map(|p| SocketAddr::from(([127, 0, 0, 1], p))),
            pid,
        }
    }

    fn cmd(text: &str) -> DocCommand {
        DocCommand {
            file: "x.md".into(),
            line: 1,
            text: text.into(),
            background: text.ends_with('&'),
            expect: 0,
        }
    }

    fn with(text: &str, vars: &[(&str, &str)]) -> Result<Runnable, String> {
        let current = place(4000, Some(4001), 77);
        let shared = place(5000, None, 88);
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let root = std::env::temp_dir().join("docs-commands-unit");
        let socket = root.join("admin.sock");
        let cx = Context {
            current: &current,
            shared: &shared,
            vars: &vars,
            root: &root,
            admin_socket: &socket,
        };
        rewrite(&cmd(text), &cx)
    }

    #[test]
    fn targets_listen_where_the_kernel_picks() {
        let r = with(
            "ironlun target --lun ram:1GiB --stats 127.0.0.1:9260 --listen 127.0.0.1:3260 --listen '[::1]:3260' &",
            &[],
        )
        .unwrap();
        assert_eq!(
            r.text,
            "ironlun target --lun ram:1GiB --stats 127.0.0.1:0 --listen 127.0.0.1:0 --listen '[::1]:0'"
        );
        assert_eq!(
            r.kind,
            Kind::Serves {
                ready: vec![("listening on ", 2), ("statistics on http://", 1)],
                target: true
            }
        );
        let r = with("IRONLUN_CHAP='a:b' ironlun target --lun ram:1GiB", &[]).unwrap();
        assert_eq!(
            r.text,
            "IRONLUN_CHAP='a:b' ironlun target --lun ram:1GiB --listen 127.0.0.1:0"
        );
        let r = with("ironlun target --config x.toml --check", &[]).unwrap();
        assert_eq!(r.kind, Kind::Once);
    }

    #[test]
    fn urls_addresses_and_pids_name_the_targets() {
        let r = with(
            "ironlun bench $URL --target-pid $(pidof ironlun) --target-stats 127.0.0.1:9260 --time 30s",
            &[("URL", "iscsi://127.0.0.1:3260/iqn.2026-11.test:t/0")],
        )
        .unwrap();
        assert_eq!(
            r.text,
            "ironlun bench iscsi://127.0.0.1:4000/iqn.2026-11.test:t/0 --target-pid 77 \
             --target-stats 127.0.0.1:4001 --time 100ms --ramp 0s"
        );
        let r = with("ironlun bench URL0 URL3 --ramp 60s", &[]).unwrap();
        assert_eq!(
            r.text,
            format!(
                "ironlun bench iscsi://127.0.0.1:5000/{SHARED_NAME}/0 \
                 iscsi://127.0.0.1:5000/{SHARED_NAME}/3 --ramp 0s --time 100ms"
            )
        );
        assert!(with("ironlun bench URL4", &[]).is_err());
        assert!(with("ironlun bench $OTHER", &[]).is_err());
    }

    #[test]
    fn paths_are_rerooted_or_refused() {
        let root = std::env::temp_dir().join("docs-commands-unit");
        let r = with(
            "ironlun completions bash > /etc/bash_completion.d/ironlun",
            &[],
        )
        .unwrap();
        assert_eq!(
            r.text,
            format!(
                "ironlun completions bash > {}/etc/bash_completion.d/ironlun",
                root.display()
            )
        );
        let r = with("ironlun bench /var/tmp/disk.img --qd 32 | head -1", &[]).unwrap();
        assert_eq!(
            r.text,
            format!(
                "ironlun bench {}/var/tmp/disk.img --qd 32 --time 100ms --ramp 0s | head -1",
                root.display()
            )
        );
        let e = with("ironlun target --lun block:/dev/sdb,direct", &[]).unwrap_err();
        assert!(e.contains("/dev/sdb"), "{e}");
    }

    #[test]
    fn admin_talks_to_the_tests_target_unless_told_where() {
        let root = std::env::temp_dir().join("docs-commands-unit");
        let r = with("ironlun admin state | head -1", &[]).unwrap();
        assert_eq!(
            r.text,
            format!(
                "ironlun admin --socket {}/admin.sock state | head -1",
                root.display()
            )
        );
        let r = with("ironlun admin --config x.toml config reload", &[]).unwrap();
        assert_eq!(r.text, "ironlun admin --config x.toml config reload");
        assert_eq!(r.kind, Kind::Once);
    }

    #[test]
    fn what_no_rule_covers_is_refused() {
        assert!(with("ironlun bench iscsi://HOST/IQN/0", &[])
            .unwrap_err()
            .contains("HOST"));
        assert!(with("ironlun bench agent --listen 0.0.0.0:7370", &[]).is_ok());
        assert!(with("ironlun discover 10.0.0.5", &[])
            .unwrap_err()
            .contains("10.0.0.5"));
        assert!(with("ironlun bench --agents a:7370 FILE", &[])
            .unwrap_err()
            .contains("FILE"));
        let shared_stats = with("ironlun bench $URL --target-stats 127.0.0.1:9260", &[]);
        assert!(shared_stats.is_ok());
    }
}
