//! A Ceph cluster for the integration tests: the one named by
//! `IRONLUN_CEPH_CONF`, or one started by `scripts/ceph-cluster` in a
//! directory of its own and stopped (data removed) when dropped.
//!
//! When neither is possible the test says why: under `CI=true` it fails,
//! locally it prints a loud SKIPPED line and passes.

#![allow(dead_code)]

use std::io::Write;
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

/// Skips loudly, or fails under CI=true.
pub fn unavailable(why: &str) -> Option<TestCluster> {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(!ci, "Ceph is required under CI=true: {why}");
    // Written to the stderr handle, not through eprintln!, so the test
    // harness's output capture cannot hide it.
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED: no Ceph cluster for the RBD integration tests: {why} ***\n"
    );
    None
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The cluster to test against, or `None` after saying why not.
pub fn cluster() -> Option<TestCluster> {
    if let Err(e) = Library::system() {
        return unavailable(&e.to_string());
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
    if !script.exists() {
        return unavailable(&format!(
            "{} does not exist and IRONLUN_CEPH_CONF is not set",
            script.display()
        ));
    }
    let dir = std::env::temp_dir().join(format!("ironlun-rbd-it-{}", std::process::id()));
    eprintln!(
        "starting a test cluster: {} start {}",
        script.display(),
        dir.display()
    );
    let out = match Command::new(&script).arg("start").arg(&dir).output() {
        Ok(o) => o,
        Err(e) => return unavailable(&format!("running {}: {e}", script.display())),
    };
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
            unavailable(&format!(
                "ceph-cluster start failed ({}):\n{stderr}",
                out.status
            ))
        }
    }
}
