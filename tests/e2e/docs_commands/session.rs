//! One document's commands run in order, as a reader at a shell would:
//! in a scratch directory of its own, with the variables it sets, and
//! with what it starts in the background (`… &`) running until its
//! last command is done. A target started so serves the document's
//! later commands; otherwise the test's target does.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::extract::{assignment, DocCommand, Item};
use super::rewrite::{rewrite, Context, Kind, Place, Runnable};

/// Bounds that only stop a hang: a command that ends, or says it
/// listens, passes however long it took within them.
const RUN_BOUND: Duration = Duration::from_secs(600);
const START_BOUND: Duration = Duration::from_secs(120);

/// Lines of output a failure shows.
const SHOWN: usize = 15;

/// What a document's scratch directory holds before its first command.
fn prepare(root: &Path, bench_result: &Path) {
    let disk = root.join("var/tmp/disk.img");
    std::fs::create_dir_all(disk.parent().unwrap()).unwrap();
    std::fs::File::create(&disk)
        .and_then(|f| f.set_len(64 << 20))
        .unwrap();
    let token = root.join("etc/ironlun/agents.token");
    std::fs::create_dir_all(token.parent().unwrap()).unwrap();
    std::fs::write(&token, "docs-commands-token-0123456789ab\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    for name in ["before.json", "after.json"] {
        std::fs::copy(bench_result, root.join(name)).unwrap();
    }
}

/// A command that serves, with what it has written so far.
struct Served {
    child: Child,
    log: Arc<Mutex<String>>,
    /// The threads reading its output: done when it has ended.
    readers: Vec<std::thread::JoinHandle<()>>,
    /// `FILE:LINE: TEXT`, for messages.
    what: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Its whole output, once it has ended.
    fn final_log(&mut self) -> String {
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        self.log()
    }

    /// The target it is, from what it said: its first portal and its
    /// statistics endpoint.
    fn place(&self) -> Place {
        let log = self.log();
        let after = |needle: &str| {
            log.lines()
                .find_map(|l| l.split_once(needle).map(|(_, r)| r.trim().to_owned()))
        };
        let portal = after("listening on ").expect("said it listens");
        let stats = after("statistics on http://")
            .and_then(|r| r.split('/').next().and_then(|a| a.parse().ok()));
        Place {
            portal: portal.parse().expect("a portal address"),
            stats,
            pid: self.child.id(),
        }
    }

    /// SIGTERM, then its end: status 0 or the signal's, and no panic.
    fn stop(mut self) -> Result<(), String> {
        // SAFETY: kill(2) on a child of ours that has not been waited for.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let status = wait_bounded(&mut self.child, RUN_BOUND);
        let log = self.final_log();
        if let Some(report) = crate::support::panics_in(&log) {
            return Err(format!("{}: {report}", self.what));
        }
        match status {
            Some(st) if st.success() || st.signal() == Some(libc::SIGTERM) => Ok(()),
            Some(st) => Err(format!(
                "{}: stopped with SIGTERM, it ended with {st}\n{}",
                self.what,
                tail(&log)
            )),
            None => Err(format!("{}: did not end after SIGTERM", self.what)),
        }
    }
}

/// The child's status, or `None` (and the child killed) past `bound`.
fn wait_bounded(child: &mut Child, bound: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the process group a child of ours leads.
    unsafe {
        libc::kill(-(child.id() as i32), libc::SIGKILL);
    }
    let _ = child.wait();
    None
}

/// Every line `from` writes, appended to `log` (stdout and stderr
/// share it).
fn collect(
    from: impl Read + Send + 'static,
    log: Arc<Mutex<String>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            let mut l = log.lock().unwrap();
            l.push_str(&line);
            l.push('\n');
        }
    })
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    let from = lines.len().saturating_sub(SHOWN);
    lines[from..].iter().map(|l| format!("  | {l}\n")).collect()
}

/// The exit status in words.
fn status_text(st: &ExitStatus) -> String {
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => format!("{st}"),
    }
}

/// `exec` with the command's environment words before it (`A=1 exec
/// ironlun …`: `exec A=1 …` would run a program named `A=1`), so that
/// the process is `ironlun` itself.
fn exec_script(text: &str) -> Result<String, String> {
    let words = shlex::split(text).ok_or_else(|| format!("`{text}`: unbalanced quotes"))?;
    let n = words.iter().take_while(|w| assignment(w).is_some()).count();
    if n == 0 {
        return Ok(format!("exec {text}"));
    }
    let env: Vec<String> = words[..n]
        .iter()
        .filter_map(|w| assignment(w))
        .map(|(name, value)| format!("{name}={}", shlex::try_quote(value).unwrap()))
        .collect();
    let rest = shlex::try_join(words[n..].iter().map(String::as_str)).unwrap();
    Ok(format!("{} exec {rest}", env.join(" ")))
}

/// One document's run.
pub struct Session<'a> {
    root: PathBuf,
    /// The directory the `ironlun` binary is in (first on PATH).
    bin_dir: PathBuf,
    vars: HashMap<String, String>,
    shared: &'a Place,
    admin_socket: &'a Path,
    /// The target this document started in the background.
    current: Option<Place>,
    background: Vec<Served>,
    excluded: &'a [(&'a str, &'a str)],
    pub failures: Vec<String>,
    /// Commands run (not excluded).
    pub ran: usize,
}

impl<'a> Session<'a> {
    pub fn new(
        root: PathBuf,
        shared: &'a Place,
        admin_socket: &'a Path,
        excluded: &'a [(&'a str, &'a str)],
        bench_result: &Path,
    ) -> Self {
        std::fs::create_dir_all(&root).unwrap();
        prepare(&root, bench_result);
        let bin = PathBuf::from(crate::support::ironlun_bin());
        Session {
            root,
            bin_dir: bin.parent().unwrap().to_path_buf(),
            vars: HashMap::new(),
            shared,
            admin_socket,
            current: None,
            background: Vec::new(),
            excluded,
            failures: Vec::new(),
            ran: 0,
        }
    }

    pub fn item(&mut self, item: Item) {
        match item {
            Item::Assign { name, value } => {
                self.vars.insert(name, value);
            }
            Item::Command(cmd) => self.command(&cmd),
        }
    }

    fn command(&mut self, cmd: &DocCommand) {
        if self.excluded.iter().any(|(text, _)| *text == cmd.text) {
            println!("{}:{}: excluded: {}", cmd.file, cmd.line, cmd.text);
            return;
        }
        let current = self.current.clone().unwrap_or_else(|| self.shared.clone());
        let cx = Context {
            current: &current,
            shared: self.shared,
            vars: &self.vars,
            root: &self.root,
            admin_socket: self.admin_socket,
        };
        match rewrite(cmd, &cx) {
            Ok(r) => {
                self.ran += 1;
                for d in &r.dirs {
                    std::fs::create_dir_all(d).unwrap();
                }
                println!("{}:{}: {}", cmd.file, cmd.line, r.text);
                if let Err(e) = self.run(cmd, &r) {
                    self.failures.push(e);
                }
            }
            Err(why) => self.failures.push(format!(
                "{}:{}: `{}` is neither run nor excluded: {why} (add a substitution to \
                 tests/e2e/docs_commands/rewrite.rs or an entry to EXCLUDED in tests/e2e/docs_commands.rs)",
                cmd.file, cmd.line, cmd.text
            )),
        }
    }

    fn bash(&self, script: &str) -> Command {
        let path = std::env::var("PATH").unwrap_or_default();
        let mut c = Command::new("bash");
        c.arg("-c")
            .arg(script)
            .current_dir(&self.root)
            .env("PATH", format!("{}:{path}", self.bin_dir.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        c
    }

    fn run(&mut self, cmd: &DocCommand, r: &Runnable) -> Result<(), String> {
        let what = format!(
            "{}:{}: `{}` (ran `{}`)",
            cmd.file, cmd.line, cmd.text, r.text
        );
        match r.kind {
            Kind::Once => self.once(cmd, &r.text, &what),
            Kind::Serves { ref ready, target } => {
                if r.text.contains('|') {
                    return Err(format!("{what}: a pipe from a command that serves"));
                }
                let served = self.start(&r.text, ready, cmd.expect, &what)?;
                let Some(served) = served else { return Ok(()) };
                if !cmd.background {
                    return served.stop();
                }
                if target {
                    self.current = Some(served.place());
                }
                self.background.push(served);
                Ok(())
            }
        }
    }

    /// Runs to its end; the status must be the documented one.
    fn once(&self, cmd: &DocCommand, text: &str, what: &str) -> Result<(), String> {
        let mut child = self
            .bash(&format!("set -o pipefail\n{text}"))
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let readers = [
            collect(child.stdout.take().unwrap(), log.clone()),
            collect(child.stderr.take().unwrap(), log.clone()),
        ];
        let status = wait_bounded(&mut child, RUN_BOUND);
        for r in readers {
            let _ = r.join();
        }
        let log = log.lock().unwrap().clone();
        let Some(status) = status else {
            return Err(format!(
                "{what}: did not end within {RUN_BOUND:?}\n{}",
                tail(&log)
            ));
        };
        if let Some(report) = crate::support::panics_in(&log) {
            return Err(format!("{what}: {report}"));
        }
        if status.code() == Some(cmd.expect) {
            return Ok(());
        }
        Err(format!(
            "{what}: documented to exit {}, it ended with {}\n{}",
            cmd.expect,
            status_text(&status),
            tail(&log)
        ))
    }

    /// Starts a command that serves and waits until it has said what
    /// `ready` wants: `Some` once it serves; `None` when it ended with
    /// the status documented for it (not 0).
    fn start(
        &self,
        text: &str,
        ready: &[(&str, usize)],
        expect: i32,
        what: &str,
    ) -> Result<Option<Served>, String> {
        let mut child = self.bash(&exec_script(text)?).spawn().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let readers = vec![
            collect(child.stdout.take().unwrap(), log.clone()),
            collect(child.stderr.take().unwrap(), log.clone()),
        ];
        let mut served = Served {
            child,
            log,
            readers,
            what: what.to_owned(),
        };
        let deadline = Instant::now() + START_BOUND;
        loop {
            let log = served.log();
            if ready
                .iter()
                .all(|(words, n)| log.matches(words).count() >= *n)
            {
                if expect != 0 {
                    served.stop()?;
                    return Err(format!(
                        "{what}: documented to exit {expect}, it started\n{}",
                        tail(&log)
                    ));
                }
                return Ok(Some(served));
            }
            if let Some(st) = served.child.try_wait().unwrap() {
                let log = served.final_log();
                if let Some(report) = crate::support::panics_in(&log) {
                    return Err(format!("{what}: {report}"));
                }
                if expect != 0 && st.code() == Some(expect) {
                    return Ok(None);
                }
                return Err(format!(
                    "{what}: ended with {} before it said {:?}\n{}",
                    status_text(&st),
                    ready,
                    tail(&log)
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{what}: did not say {:?} within {START_BOUND:?}\n{}",
                    ready,
                    tail(&served.log())
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops what the document left running; its failures.
    pub fn finish(mut self) -> Vec<String> {
        while let Some(served) = self.background.pop() {
            if let Err(e) = served.stop() {
                self.failures.push(e);
            }
        }
        self.failures
    }
}
