//! A running `scripts/ha-cluster` (two gateways of one group in network
//! namespaces over a single-node Ceph, one RBD image), for the tests
//! that drive it: tests/e2e/ha.rs with raw PDUs, libiscsi and benchmarks,
//! and the kernel initiator's `ha-failover` VM case. The crate root
//! includes it beside `support/ceph.rs` (whose skip rule it shares).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::ceph;

/// A bound on waiting for the group to act (a hung group fails the test;
/// not a timing: the group decides in ~3 s, machines under load are
/// slow).
pub const WITHIN: Duration = Duration::from_secs(90);

/// A running `scripts/ha-cluster`, stopped on drop.
pub struct Ha {
    pub dir: PathBuf,
    pub conf: PathBuf,
    pub iqn: String,
    pub portals: Vec<SocketAddr>,
    pub pids: Vec<u32>,
}

/// The ironlun binary the gateways run: `IRONLUN_HA_BIN` (a release
/// build, for the benchmarks below), else [`crate::support::ironlun_bin`].
pub fn bin() -> String {
    std::env::var("IRONLUN_HA_BIN")
        .ok()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| crate::support::ironlun_bin().to_owned())
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ha-cluster")
}

impl Ha {
    pub fn start(tag: &str) -> Option<Ha> {
        Ha::start_with(tag, &[])
    }

    /// [`Ha::start`] with more of scripts/ha-cluster's settings.
    pub fn start_with(tag: &str, env: &[(&str, &str)]) -> Option<Ha> {
        let dir = std::env::temp_dir().join(format!("ironlun-e2e-ha-{}-{tag}", std::process::id()));
        let _ = Command::new(script()).arg("stop").arg(&dir).output();
        let o = Command::new(script())
            .arg("start")
            .arg(&dir)
            .env("IRONLUN", bin())
            .env("HA_CLUSTER_IMAGE_SIZE", "64M")
            // To see the stale-write test fail without the fence:
            // IRONLUN_HA_CLIENT_OPTIONS=rbd_blocklist_on_break_lock=false.
            .env(
                "HA_CLUSTER_CLIENT_OPTIONS",
                std::env::var("IRONLUN_HA_CLIENT_OPTIONS").unwrap_or_default(),
            )
            .envs(env.iter().copied())
            .output()
            .expect("run scripts/ha-cluster");
        let out = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        if !o.status.success() {
            let _ = Command::new(script()).arg("stop").arg(&dir).output();
            let _ = std::fs::remove_dir(&dir);
            if ceph::skipped(&out) {
                return None;
            }
            panic!("scripts/ha-cluster start failed:\n{out}");
        }
        // The interface other tools rely on: exactly these last lines.
        let stdout = String::from_utf8_lossy(&o.stdout);
        let last: Vec<&str> = stdout.lines().rev().take(4).collect();
        let value = |i: usize, key: &str| {
            last[i]
                .strip_prefix(key)
                .unwrap_or_else(|| panic!("last lines: {last:?}"))
                .to_owned()
        };
        let ha = Ha {
            conf: PathBuf::from(value(3, "CEPH_CONF=")),
            iqn: value(2, "IQN="),
            portals: value(1, "PORTALS=")
                .split(',')
                .map(|p| p.parse().unwrap())
                .collect(),
            pids: value(0, "PIDS=")
                .split(',')
                .map(|p| p.parse().unwrap())
                .collect(),
            dir,
        };
        assert_eq!(ha.portals.len(), 2);
        assert_eq!(ha.pids.len(), 2);
        Some(ha)
    }

    /// The iSCSI URL of LUN 0 through gateway `gw`.
    pub fn url(&self, gw: usize) -> String {
        format!("iscsi://{}/{}/0", self.portals[gw], self.iqn)
    }

    pub fn socket(&self, gw: usize) -> PathBuf {
        self.dir.join(format!("gw{}/admin.sock", gw + 1))
    }

    /// `ironlun admin state --json` of gateway `gw`.
    pub fn state(&self, gw: usize) -> serde_json::Value {
        let o = Command::new(crate::support::ironlun_bin())
            .args(["admin", "--socket"])
            .arg(self.socket(gw))
            .args(["state", "--json"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    }

    /// (owner as gateway `gw` sees it, gateway `gw`'s role) for LUN 0;
    /// nothing while the gateway does not answer (killed, starting
    /// again).
    pub fn lun0(&self, gw: usize) -> (Option<String>, String) {
        let o = Command::new(bin())
            .args(["admin", "--socket"])
            .arg(self.socket(gw))
            .args(["state", "--json"])
            .output()
            .unwrap();
        if !o.status.success() {
            return (None, String::new());
        }
        let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let l = &s["targets"][0]["group"]["luns"][0];
        (
            l["owner"].as_str().map(str::to_owned),
            l["role"].as_str().unwrap_or("").to_owned(),
        )
    }

    /// Waits until gateway `gw` reports itself in `role` for LUN 0.
    pub fn wait_role(&self, gw: usize, role: &str) {
        let t = Instant::now();
        loop {
            let (_, r) = self.lun0(gw);
            if r == role {
                return;
            }
            assert!(
                t.elapsed() < WITHIN,
                "gw{} never became {role} (is {r})",
                gw + 1
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until gateway `gw` sees `owner` own LUN 0.
    pub fn wait_owner(&self, gw: usize, owner: &str) {
        let t = Instant::now();
        loop {
            let (o, _) = self.lun0(gw);
            if o.as_deref() == Some(owner) {
                return;
            }
            assert!(
                t.elapsed() < WITHIN,
                "gw{} never saw {owner} own LUN 0 (sees {o:?})",
                gw + 1
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until gateway `gw` has set target port group `group` of LUN
    /// 0 to `state` (`active/optimized`, ...): the ALUA state follows the
    /// owner a heartbeat later, and its change is a unit attention.
    pub fn wait_alua(&self, gw: usize, group: u64, state: &str) {
        fn found(v: &serde_json::Value, group: u64, state: &str) -> bool {
            match v {
                serde_json::Value::Object(m) => {
                    let here = m.get("id").and_then(|i| i.as_u64()) == Some(group)
                        && m.get("state").and_then(|s| s.as_str()) == Some(state);
                    here || m.values().any(|x| found(x, group, state))
                }
                serde_json::Value::Array(a) => a.iter().any(|x| found(x, group, state)),
                _ => false,
            }
        }
        let t = Instant::now();
        while !found(&self.state(gw), group, state) {
            assert!(
                t.elapsed() < WITHIN,
                "gw{} never set group {group} {state}",
                gw + 1
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The image's first `len` bytes, read in the host's namespace by
    /// `rbd export` (not through any gateway).
    pub fn image_head(&self, len: usize) -> Vec<u8> {
        let file = self.dir.join("export.img");
        let _ = std::fs::remove_file(&file);
        let o = Command::new("rbd")
            .arg("-c")
            .arg(&self.conf)
            .args(["export", "rbd/ha0"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let data = std::fs::read(&file).unwrap();
        let _ = std::fs::remove_file(&file);
        data[..len].to_vec()
    }

    /// The shared reservations' object (`pr=rados`), read in the host's
    /// namespace by `rados get` (not through any gateway).
    pub fn pr_object(&self) -> Vec<u8> {
        let tool = |args: &[&str]| {
            let o = Command::new(args[0])
                .arg("-c")
                .arg(&self.conf)
                .args(&args[1..])
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            o.stdout
        };
        let info: serde_json::Value =
            serde_json::from_slice(&tool(&["rbd", "info", "rbd/ha0", "--format", "json"])).unwrap();
        let id = info["id"].as_str().expect("the image's id");
        tool(&[
            "rados",
            "-p",
            "rbd",
            "get",
            &format!("ironlun.pr.{id}"),
            "-",
        ])
    }

    pub fn signal(&self, gw: usize, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pids[gw].to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig} gw{}", gw + 1);
    }

    pub fn admin(&self, gw: usize, args: &[&str]) -> String {
        let o = Command::new(crate::support::ironlun_bin())
            .args(["admin", "--socket"])
            .arg(self.socket(gw))
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.status.success(), "{text}");
        text
    }

    /// Starts gateway `gw` again after it died or was killed
    /// (`scripts/ha-cluster revive`), and takes its new pid.
    pub fn revive(&mut self, gw: usize) -> Result<(), String> {
        let o = Command::new(script())
            .arg("revive")
            .arg(&self.dir)
            .arg((gw + 1).to_string())
            .env("IRONLUN", bin())
            .output()
            .map_err(|e| format!("run scripts/ha-cluster revive: {e}"))?;
        let stdout = String::from_utf8_lossy(&o.stdout);
        let pid = stdout
            .lines()
            .last()
            .and_then(|l| l.strip_prefix("PID="))
            .and_then(|p| p.parse().ok());
        match pid {
            Some(pid) if o.status.success() => {
                self.pids[gw] = pid;
                Ok(())
            }
            _ => Err(format!(
                "scripts/ha-cluster revive gw{}: {}{stdout}{}",
                gw + 1,
                o.status,
                String::from_utf8_lossy(&o.stderr)
            )),
        }
    }
}

impl Drop for Ha {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for gw in ["gw1", "gw2"] {
                let log =
                    std::fs::read_to_string(self.dir.join(format!("{gw}.log"))).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                eprintln!("--- last lines of {gw}.log:");
                for l in tail.iter().rev() {
                    eprintln!("{l}");
                }
            }
        }
        // A stopped gateway must not hold the stop up.
        for pid in &self.pids {
            let _ = Command::new("kill")
                .arg("-CONT")
                .arg(pid.to_string())
                .status();
        }
        let o = Command::new(script()).arg("stop").arg(&self.dir).output();
        if !matches!(&o, Ok(o) if o.status.success()) {
            eprintln!(
                "WARNING: scripts/ha-cluster stop {} failed: {o:?}",
                self.dir.display()
            );
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}
