//! A Ceph cluster for the integration tests: the one named by
//! `IRONLUN_CEPH_CONF`, or one started by `scripts/ceph-cluster` in a
//! directory of its own and stopped (data removed) when dropped.
//!
//! Only where Ceph is not installed and cannot be installed (librados
//! and librbd absent, or the script's "Ceph could not be installed") the
//! test skips, by the workspace's rule (`tests/support/skip.rs`: listed
//! in scripts/test's summary, a failure where every test is required).
//! Anything else, a script that is missing or a cluster that does not
//! come up, fails the test with the script's output, which ends with the
//! failing daemon's log lines.

#![allow(dead_code)]

#[path = "../../../../tests/support/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use std::process::Command;

use ironlun_rbd::{Cluster, ClusterConfig, Library};

/// A running cluster and whether we must stop it.
pub struct TestCluster {
    pub conf: PathBuf,
    pub pool: String,
    started: Option<(PathBuf, PathBuf)>,
}

impl TestCluster {
    pub fn config(&self) -> ClusterConfig {
        ClusterConfig {
            conf: Some(self.conf.clone()),
            // A dead cluster fails the test instead of hanging it.
            options: vec![("client_mount_timeout".into(), "60".into())],
            ..ClusterConfig::default()
        }
    }

    /// A new connection (blocking).
    pub fn connect(&self) -> Cluster {
        match Cluster::connect(&self.config()) {
            Ok(c) => c,
            Err(e) => panic!("connecting with {}: {e}", self.conf.display()),
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if let Some((script, dir)) = &self.started {
            eprintln!("stopping the test cluster in {}", dir.display());
            let status = Command::new(script).arg("stop").arg(dir).status();
            if !matches!(status, Ok(s) if s.success()) {
                eprintln!(
                    "WARNING: {} stop {} failed: {status:?}",
                    script.display(),
                    dir.display()
                );
            }
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Ceph is not installed and cannot be: a skip (a failure where every
/// test is required).
fn not_installable(why: &str) -> Option<TestCluster> {
    skip::skip("the RBD integration tests against a Ceph cluster", why);
    None
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The cluster to test against, or `None` after saying why not.
pub fn cluster() -> Option<TestCluster> {
    if let Err(e) = Library::system() {
        return not_installable(&format!("librados and librbd are not installed: {e}"));
    }
    let pool = std::env::var("IRONLUN_CEPH_POOL").unwrap_or_else(|_| "rbd".into());
    if let Ok(conf) = std::env::var("IRONLUN_CEPH_CONF") {
        return Some(TestCluster {
            conf: conf.into(),
            pool,
            started: None,
        });
    }
    let script = std::env::var_os("IRONLUN_CEPH_CLUSTER")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("scripts/ceph-cluster"));
    assert!(
        script.exists(),
        "{} does not exist and IRONLUN_CEPH_CONF is not set",
        script.display()
    );
    let dir = std::env::temp_dir().join(format!("ironlun-rbd-it-{}", std::process::id()));
    eprintln!(
        "starting a test cluster: {} start {}",
        script.display(),
        dir.display()
    );
    let start = format!("{} start {}", script.display(), dir.display());
    let out = Command::new(&script)
        .arg("start")
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| panic!("running {start}: {e}"));
    // From here on the guard stops whatever did start.
    let mut guard = TestCluster {
        conf: PathBuf::new(),
        pool,
        started: Some((script, dir)),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let conf = stdout
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("CEPH_CONF="));
    match (out.status.success(), conf) {
        (true, Some(conf)) => {
            guard.conf = conf.into();
            Some(guard)
        }
        _ => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            if stderr.contains("Ceph could not be installed") {
                return not_installable(&stderr);
            }
            panic!("{start} failed ({}):\n{stdout}{stderr}", out.status);
        }
    }
}
