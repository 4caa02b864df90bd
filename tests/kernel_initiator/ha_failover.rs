//! Case ha-failover (issue 37): the Linux kernel initiator with
//! dm-multipath over the two gateways of `scripts/ha-cluster` (a gateway
//! group on one RBD image of a single-node Ceph), with the settings
//! docs/ha.md gives. The guest writes files through ext4 on the map,
//! each recorded with its SHA-256 only once its fsync returned. On
//! `phase=kill` the host kill -9s the owner (gw1) and measures, from the
//! kill, the first write that reaches the survivor (gw2's session
//! counters); the guest's writer must never see an error. On
//! `phase=failed-over` the host starts gw1 again (`scripts/ha-cluster
//! revive`) and measures the failback (gw1 owning the LUN again). At the
//! end every acknowledged file must verify in the guest, and on the host
//! in `rbd export` of the image (e2fsck -fn clean, debugfs reads of every
//! file), and the whole map's SHA-256 must equal the export's.
//!
//! One trial by default; `IRONLUN_HA_VM_TRIALS=N` runs N in one boot (the
//! failover benchmark of docs/ha.md: it prints a table; nothing is
//! asserted of the times). `IRONLUN_HA_VM_TMO=S` (open-iscsi's
//! replacement_timeout and dm-multipath's fast_io_fail_tmo, default 3)
//! and `IRONLUN_HA_VM_POLL=S` (multipathd's polling_interval, default 1)
//! vary docs/ha.md's settings.

use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ironlun_vm::cases;
use ironlun_vm::guest::{field, parse_record};

use super::ha::{Ha, WITHIN};
use super::support::run;
use super::{boot_watching, host_checks_ext4, require_kv, require_pass, sha256_file, verdict};
use super::{Ctx, Verdict};

/// How long the guest waits for each move of the map; it only stops a
/// guest that would otherwise wait for ever.
const WAIT_S: &str = "300";

/// What the host measured in one trial.
#[derive(Default, Clone)]
struct Trial {
    /// kill -9 of gw1 to the first write through gw2.
    failover: Option<Duration>,
    /// gw1 started again to gw1 owning the LUN.
    failback: Option<Duration>,
    error: Option<String>,
}

/// Bytes written through the sessions gateway `gw` serves now.
fn written(ha: &Ha, gw: usize) -> Result<u64, String> {
    super::multipath::written(&ha.socket(gw))
}

/// The owner of LUN 0 as gateway `gw` sees it; None while its admin
/// socket does not answer.
fn owner(ha: &Ha, gw: usize) -> Option<String> {
    let sock = ha.socket(gw);
    let args = [
        "admin",
        "--socket",
        sock.to_str().unwrap_or_default(),
        "state",
        "--json",
    ];
    let (rc, out) = run(super::support::ironlun_bin(), &args);
    if rc != 0 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    v["targets"][0]["group"]["luns"][0]["owner"]
        .as_str()
        .map(str::to_owned)
}

/// Polls `done` every 20 ms for at most [`WITHIN`]; the time it took.
fn until(mut done: impl FnMut() -> Result<bool, String>) -> Result<Duration, String> {
    let t = Instant::now();
    while t.elapsed() < WITHIN {
        if done()? {
            return Ok(t.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(format!("not within {} s", WITHIN.as_secs()))
}

/// Kill -9 of the owner, and the time to the first write through gw2.
fn kill_owner(ha: &Ha) -> Result<Duration, String> {
    let base = written(ha, 1)?;
    if owner(ha, 1).as_deref() != Some("gw1") {
        return Err("gw1 did not own the LUN before the kill".to_owned());
    }
    ha.signal(0, "KILL");
    until(|| Ok(written(ha, 1)? > base)).map_err(|e| format!("no write reached gw2: {e}"))
}

/// gw1 started again, and the time until it owns the LUN.
fn revive_owner(ha: &mut Ha) -> Result<Duration, String> {
    ha.revive(0)?;
    let ha = &*ha;
    until(|| Ok(owner(ha, 0).as_deref() == Some("gw1")))
        .map_err(|e| format!("gw1 did not get the LUN back: {e}"))
}

/// The host's side of each trial, driven by the guest's phases.
fn control(ha: &mut Ha, rx: &mpsc::Receiver<(String, usize)>, trials: &Mutex<Vec<Trial>>) {
    for (phase, n) in rx {
        let mut all = trials.lock().unwrap_or_else(|e| e.into_inner());
        if all.len() < n {
            all.resize(n, Trial::default());
        }
        let Some(t) = n.checked_sub(1).and_then(|i| all.get_mut(i)) else {
            continue;
        };
        let r = match phase.as_str() {
            "kill" => kill_owner(ha).map(|d| t.failover = Some(d)),
            "failed-over" => revive_owner(ha).map(|d| t.failback = Some(d)),
            _ => Ok(()),
        };
        if let Err(e) = r {
            t.error.get_or_insert(format!("trial {n}, {phase}: {e}"));
        }
    }
}

pub(super) fn case_ha_failover(ctx: &Ctx) -> Verdict {
    let n_trials: usize = std::env::var("IRONLUN_HA_VM_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| (1..=100).contains(n))
        .unwrap_or(1);
    let Some(mut ha) = Ha::start_with("vm", &[("HA_CLUSTER_IMAGE_SIZE", "128M")]) else {
        return Verdict::Skip(
            "Ceph is not installed and could not be installed (scripts/deps.sh install_ceph)"
                .to_owned(),
        );
    };
    let setting = |var: &str, default: &str| {
        std::env::var(var)
            .ok()
            .filter(|v| v.parse::<u8>().is_ok_and(|n| (1..=120).contains(&n)))
            .unwrap_or_else(|| default.to_owned())
    };
    let (tmo, poll) = (
        setting("IRONLUN_HA_VM_TMO", "3"),
        setting("IRONLUN_HA_VM_POLL", "1"),
    );
    let trials = Mutex::new(Vec::new());
    let (p1, p2) = (ha.portals[0].to_string(), ha.portals[1].to_string());
    let count = n_trials.to_string();
    let iqn = ha.iqn.clone();
    let extra = [
        ("PORTAL1", p1.as_str()),
        ("PORTAL2", p2.as_str()),
        ("HA_IQN", iqn.as_str()),
        ("TRIALS", count.as_str()),
        ("TMO", tmo.as_str()),
        ("POLL", poll.as_str()),
        ("WAIT_S", WAIT_S),
    ];
    let o = std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        let ha = &mut ha;
        let trials = &trials;
        s.spawn(move || control(ha, &rx, trials));
        let on_line = move |line: &str| {
            let rec = parse_record(line).unwrap_or_default();
            if let (Some(p), Some(n)) = (field(&rec, "phase"), field(&rec, "trial")) {
                if let Ok(n) = n.parse() {
                    let _ = tx.send((p.to_owned(), n));
                }
            }
        };
        // The port is unused: the guest reaches the gateways at PORTAL1
        // and PORTAL2 through QEMU's NAT.
        let port = ha_port(&p1);
        boot_watching(
            ctx,
            &cases::HA_FAILOVER,
            "ha-failover",
            port,
            &extra,
            Some(&on_line),
        )
    });
    let trials = trials.into_inner().unwrap_or_else(|e| e.into_inner());
    let r = check(ctx, &ha, &o, &trials, n_trials);
    drop(ha);
    verdict(r)
}

fn ha_port(portal: &str) -> u16 {
    portal
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3260)
}

fn check(
    ctx: &Ctx,
    ha: &Ha,
    o: &ironlun_vm::Outcome,
    trials: &[Trial],
    n_trials: usize,
) -> Result<String, String> {
    require_pass(o)?;
    for k in ["discovery", "login", "login2", "fsck"] {
        require_kv(o, k, if k == "fsck" { "clean" } else { "ok" })?;
    }
    require_kv(o, "verify", "ok")?;
    if trials.len() != n_trials {
        return Err(format!("{} trial(s) of {n_trials} ran", trials.len()));
    }
    if let Some(e) = trials.iter().find_map(|t| t.error.clone()) {
        return Err(e);
    }
    let files: usize = o
        .with_key("verify")
        .last()
        .and_then(|r| field(r, "files"))
        .and_then(|n| n.parse().ok())
        .ok_or("the guest did not report how many files it wrote")?;
    let copy = ctx.work.path().join("ha-export.img");
    let _ = std::fs::remove_file(&copy);
    let (rc, out) = run(
        "rbd",
        &[
            "-c",
            ha.conf.to_str().unwrap_or_default(),
            "export",
            "rbd/ha0",
            copy.to_str().unwrap_or_default(),
        ],
    );
    if rc != 0 {
        return Err(format!("rbd export: exit {rc}: {out}"));
    }
    require_kv(o, "device_sha256", &sha256_file(&copy))
        .map_err(|e| format!("whole-image checksum: {e} (rbd export on the host)"))?;
    let verified = host_checks_ext4(&copy, o, "0", files)?;
    let _ = std::fs::remove_file(&copy);
    let gaps: Vec<(String, String)> = o
        .with_key("phase")
        .filter_map(|r| {
            let p = field(r, "phase")?;
            (p == "failed-over" || p == "failed-back").then(|| {
                (
                    p.to_owned(),
                    field(r, "max_gap_ms").unwrap_or("?").to_owned(),
                )
            })
        })
        .collect();
    print_table(trials, &gaps);
    let t0 = trials.first().cloned().unwrap_or_default();
    Ok(format!(
        "{n_trials} trial(s) (replacement_timeout and fast_io_fail_tmo {} s, polling_interval {} s); {verified} acknowledged files verified in the guest and in rbd export, e2fsck clean, whole-map SHA-256 equal; trial 1: kill -9 to the first write through gw2 {} ms, failback {} ms; the writer's longest wait {} ms after the kill, {} ms in the failback",
        o.get("tmo").unwrap_or("?"),
        o.get("poll").unwrap_or("?"),
        ms(t0.failover),
        ms(t0.failback),
        gaps.first().map(|g| g.1.as_str()).unwrap_or("?"),
        gaps.get(1).map(|g| g.1.as_str()).unwrap_or("?"),
    ))
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("?".to_owned(), |d| d.as_millis().to_string())
}

/// The benchmark's table (one row per trial), printed with the verdict.
fn print_table(trials: &[Trial], gaps: &[(String, String)]) {
    println!("ha-failover: trial | kill -9 -> first write via gw2 (ms) | writer's longest wait after the kill (ms) | failback (ms) | writer's longest wait in the failback (ms)");
    for (i, t) in trials.iter().enumerate() {
        let gap = |phase: &str| {
            gaps.iter()
                .filter(|g| g.0 == phase)
                .nth(i)
                .map_or("?", |g| g.1.as_str())
        };
        println!(
            "ha-failover: {} | {} | {} | {} | {}",
            i + 1,
            ms(t.failover),
            gap("failed-over"),
            ms(t.failback),
            gap("failed-back"),
        );
    }
    let mut f: Vec<u128> = trials
        .iter()
        .filter_map(|t| t.failover.map(|d| d.as_millis()))
        .collect();
    f.sort_unstable();
    if let (Some(mid), Some(worst)) = (f.get(f.len() / 2), f.last()) {
        println!("ha-failover: kill -9 -> first write via gw2: median {mid} ms, worst {worst} ms over {} trial(s)", f.len());
    }
}
