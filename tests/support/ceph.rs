//! A single-node Ceph cluster for a test, started and stopped by
//! scripts/ceph-cluster (which installs Debian's Ceph packages when they
//! are missing). Include it with `#[path = "support/ceph.rs"] mod ceph;`
//! beside `mod support;`.
//!
//! When Ceph is not installed and cannot be installed (its packages are
//! absent), a test skips by the rule of `skip.rs`: it says so and the
//! summary of scripts/test lists it; where every test is required
//! (CI=true, `--require-all`) it fails. Any other start-up failure, a
//! cluster that does not come up, fails the test with the script's
//! output, which ends with the failing daemon's log lines.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::support::skip;
use std::process::{Command, Output};

/// A running cluster; stopped (daemons and data) on drop.
pub struct Ceph {
    pub dir: PathBuf,
    /// DIR/ceph.conf, from the script's last line of stdout.
    pub conf: PathBuf,
    stopped: bool,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ceph-cluster")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Whether the script's output says Ceph could not be installed (the
/// one sentence scripts/ceph-cluster gives for absent packages it could
/// not install): then the test skips ([`skip::skip`]; it fails instead
/// where every test is required). Any other output is not a skip.
pub fn skipped(out: &str) -> bool {
    if !out.contains("Ceph could not be installed") {
        return false;
    }
    let why = out
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    skip::skip(
        "a test needing Ceph",
        &format!("Ceph is not installed and could not be installed (scripts/deps.sh install_ceph): {why}"),
    );
    true
}

/// Runs `scripts/ceph-cluster VERB DIR` with extra environment.
pub fn cluster_script(verb: &str, dir: &Path, env: &[(&str, &str)]) -> Output {
    Command::new(script())
        .arg(verb)
        .arg(dir)
        .envs(env.iter().copied())
        .output()
        .expect("run scripts/ceph-cluster")
}

impl Ceph {
    /// Starts a cluster in `dir`; None when Ceph cannot be installed here
    /// (outside CI only).
    pub fn start(dir: &Path) -> Option<Ceph> {
        let o = cluster_script("start", dir, &[]);
        let out = text(&o);
        if !o.status.success() {
            if skipped(&out) {
                return None;
            }
            let _ = Command::new(script()).arg("stop").arg(dir).output();
            panic!(
                "scripts/ceph-cluster start {} failed:\n{out}",
                dir.display()
            );
        }
        let stdout = String::from_utf8_lossy(&o.stdout);
        let last = stdout.lines().last().unwrap_or_default();
        let conf = dir.join("ceph.conf");
        assert_eq!(
            last,
            format!("CEPH_CONF={}", conf.display()),
            "the last line of stdout must name the conf:\n{out}"
        );
        Some(Ceph {
            dir: dir.to_owned(),
            conf,
            stopped: false,
        })
    }

    /// Runs a Ceph command-line tool (`ceph`, `rbd`, `rados`) against this
    /// cluster; fails the test unless it exits 0; returns its stdout.
    pub fn tool(&self, name: &str, args: &[&str]) -> String {
        let o = Command::new(name)
            .env("CEPH_CONF", &self.conf)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("run {name}: {e}"));
        assert!(o.status.success(), "{name} {args:?} failed:\n{}", text(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    pub fn ceph(&self, args: &[&str]) -> String {
        self.tool("ceph", args)
    }

    pub fn rbd(&self, args: &[&str]) -> String {
        self.tool("rbd", args)
    }

    /// `scripts/ceph-cluster stop DIR`, checked; returns its output.
    pub fn stop(&mut self) -> String {
        self.stopped = true;
        let o = cluster_script("stop", &self.dir, &[]);
        assert!(o.status.success(), "stop failed:\n{}", text(&o));
        text(&o)
    }
}

impl Drop for Ceph {
    fn drop(&mut self) {
        if !self.stopped {
            let o = cluster_script("stop", &self.dir, &[]);
            if !o.status.success() {
                let _ = writeln!(std::io::stderr(), "ceph-cluster stop failed:\n{}", text(&o));
            }
        }
    }
}

/// Live processes whose command line names `conf` (the daemons the
/// script starts get `-c DIR/ceph.conf`); zombies have no command line.
pub fn daemons_of(conf: &Path) -> Vec<u32> {
    let want = conf.as_os_str().as_encoded_bytes();
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if cmdline.split(|b| *b == 0).any(|arg| arg == want) {
            pids.push(pid);
        }
    }
    pids
}
