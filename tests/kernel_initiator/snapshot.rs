//! Case snapshot (issue 39, docs/snapshots.md): a snapshot of a `file:`
//! LUN on a reflink XFS (tests/support/xfs.rs: a loop device the test
//! formats) taken while the Linux kernel initiator writes ext4 on it.
//!
//! The guest's writer reports each file (`file=/w/fN sha256=S lun=0`)
//! only once its fsync returned. On `phase=snapshot` the host notes the
//! files whose lines it has read, then, while the writer goes on, takes
//! the snapshot (`ironlun admin snapshot create`), clones it and adds
//! the clone as LUN 1 and the snapshot itself (read-only, the spec the
//! create answered) as LUN 2. Every file noted must be on the clone and
//! verify, in the guest (after ext4 replayed the clone's journal and
//! `e2fsck -f -n` found it clean) and on the host (e2fsck and debugfs on
//! the clone's file); no file the writer began after the guest saw LUN 1
//! may be there; LUN 0 went on being written, and all its files verify
//! in the guest and on the host. The read-only snapshot's journal needs
//! recovery: `mount -o ro` must refuse it and `mount -o ro,noload`
//! mount it (what it shows then is reported, not required).
//!
//! The guest finds the new LUNs by their LUN numbers (the H:C:T:L the
//! host chose), not by /dev/sdX order, and reports each one's serial
//! (VPD page 80h) and WWID; the host checks each serial against its own
//! INQUIRY of that LUN (`ironlun inquiry`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ironlun_vm::guest::{field, parse_record};
use ironlun_vm::{cases, Outcome};

use super::live_lun::admin_step;
use super::support::xfs::Xfs;
use super::support::{run, Target};
use super::{boot_watching, host_checks_ext4, host_fsck, host_verify_files, require_kv};
use super::{require_pass, verdict, Ctx, Verdict, IQN};

/// How long the guest waits for the writer and for each new LUN; it
/// only stops a guest that would otherwise wait for ever.
const WAIT_S: &str = "300";
const SNAP: &str = "vm-snap";
const CLONE: &str = "vm-clone";

/// What the host did on the guest's lines.
#[derive(Default)]
struct Host {
    /// Files (path to SHA-256) whose lines the host has read, in order.
    completed: Vec<(String, String)>,
    /// Those read before it asked for the snapshot: the clone must hold
    /// every one of them.
    required: Option<BTreeMap<String, String>>,
    /// The clone's spec, once made.
    clone: Option<String>,
    /// The create's answer about the I/O pause, and the steps' times.
    done: Vec<String>,
    errors: Vec<String>,
}

pub(super) fn case_snapshot(ctx: &Ctx) -> Verdict {
    let xfs = match Xfs::try_make() {
        Ok(x) => x,
        Err(why) => return Verdict::Skip(format!("a reflink XFS on a loop device: {why}")),
    };
    let img0 = xfs.mnt.join("vm-lun0.img");
    let sock = ctx.work.path().join("snapshot.admin.sock");
    let lun0 = format!("file:{},size=64MiB", img0.display());
    let sock_arg = sock.to_str().unwrap_or_default();
    let mut target = Target::start(&["--name", IQN, "--lun", &lun0, "--admin-socket", sock_arg]);
    let host = Mutex::new(Host::default());
    let t0 = Instant::now();
    let on_line = |line: &str| {
        let rec = parse_record(line).unwrap_or_default();
        let mut h = host.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some(path), Some(sum), Some("0")) = (
            field(&rec, "file"),
            field(&rec, "sha256"),
            field(&rec, "lun"),
        ) {
            h.completed.push((path.to_owned(), sum.to_owned()));
        } else if field(&rec, "phase") == Some("snapshot") && h.required.is_none() {
            h.required = Some(h.completed.iter().cloned().collect());
            match snapshot_and_export(&sock, t0) {
                Ok((clone, done)) => {
                    h.clone = Some(clone);
                    h.done = done;
                }
                Err(e) => h.errors.push(e),
            }
        }
    };
    let extra = [("WAIT_S", WAIT_S)];
    let port = target.addr.port();
    let o = boot_watching(
        ctx,
        &cases::SNAPSHOT,
        "snapshot",
        port,
        &extra,
        Some(&on_line),
    );
    let host = host.into_inner().unwrap_or_else(|e| e.into_inner());
    let r = check(&o, &host, &target, &img0);
    let _ = target.terminate(Duration::from_secs(10));
    drop(xfs);
    verdict(r)
}

/// Snapshot of LUN 0, its clone as LUN 1 and the snapshot, read-only, as
/// LUN 2: the clone's spec and what each step answered, with its time.
fn snapshot_and_export(sock: &Path, t0: Instant) -> Result<(String, Vec<String>), String> {
    let mut done = Vec::new();
    let mut step = |args: &[&str], expect: &str| {
        let out = admin_step(sock, args, expect)?;
        done.push(format!(
            "{} at {:.1} s into the case",
            args[..2].join(" "),
            t0.elapsed().as_secs_f64()
        ));
        Ok::<_, String>(out)
    };
    let out = step(
        &["snapshot", "create", IQN, "0", SNAP],
        &format!("+ snapshot {SNAP} of target {IQN} LUN 0"),
    )?;
    let export = after(&out, "export read-only as: ")?;
    let pause = out
        .lines()
        .find(|l| l.contains("I/O paused"))
        .and_then(|l| l.split(';').next())
        .unwrap_or("no pause reported")
        .trim()
        .to_owned();
    let out = step(
        &["snapshot", "clone", IQN, "0", SNAP, CLONE],
        &format!("+ clone {CLONE} of snapshot {SNAP}"),
    )?;
    let clone = after(&out, "ironlun admin lun add TARGET ")?;
    step(
        &["lun", "add", IQN, &clone, "--lun", "1"],
        &format!("+ target {IQN} LUN 1"),
    )?;
    step(
        &["lun", "add", IQN, &export, "--lun", "2"],
        &format!("+ target {IQN} LUN 2"),
    )?;
    done.push(format!("snapshot: {pause}"));
    Ok((clone, done))
}

/// The word after `marker` in an answer.
fn after(out: &str, marker: &str) -> Result<String, String> {
    out.split_once(marker)
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .map(str::to_owned)
        .ok_or(format!("no {marker:?} in: {out}"))
}

fn check(o: &Outcome, host: &Host, target: &Target, img0: &Path) -> Result<String, String> {
    if !host.errors.is_empty() {
        return Err(format!(
            "the host's steps failed: {}",
            host.errors.join("; ")
        ));
    }
    let (Some(required), Some(clone)) = (&host.required, &host.clone) else {
        return Err(format!(
            "the host took no snapshot (the guest never reported phase=snapshot); {}",
            require_pass(o).err().unwrap_or_default()
        ));
    };
    require_pass(o)?;
    for k in ["discovery", "login", "logout"] {
        require_kv(o, k, "ok")?;
    }
    let asked = at_phase(o, "snapshot", "files")?;
    let seen = number(o, "seen_files")?;
    let files = at_phase(o, "written", "files")?;
    let r = required.len() as u64;
    // The lines come in the writer's order: the first R are f1..fR, and
    // at least the guest's own count when it asked.
    if r < asked || (1..=r).any(|n| !required.contains_key(&format!("/w/f{n}"))) {
        return Err(format!(
            "the host read {r} file lines before the snapshot, not f1..f{r} from {asked} or more: {:?}",
            required.keys().collect::<Vec<_>>()
        ));
    }
    identities(o, target)?;
    // The clone: journal replayed, clean, and every required file.
    require_kv(o, "clone_journal", "replayed")?;
    fsck_clean(o, "1")?;
    let ok_through = number(o, "clone_ok_through")?;
    if ok_through < r {
        return Err(format!(
            "the clone verifies f1..f{ok_through} only; the host had read f1..f{r} before the snapshot ({} of them differ there)",
            o.get("clone_differ").unwrap_or("?")
        ));
    }
    let present = number(o, "clone_max_present")?;
    if present > seen + 1 {
        return Err(format!(
            "the clone holds f{present}, which the writer began after the guest saw the clone (at f{seen})"
        ));
    }
    // LUN 0 went on being written after the snapshot.
    if files < seen + 3 {
        return Err(format!(
            "LUN 0 has {files} files, not 3 past the {seen} written when the guest saw the clone"
        ));
    }
    fsck_clean(o, "0")?;
    require_kv(o, "verify", "ok")?;
    let n0 = host_checks_ext4(img0, o, "0", files as usize)?;
    let clone_img = PathBuf::from(
        clone
            .strip_prefix("file:")
            .and_then(|p| p.split(',').next())
            .ok_or(format!("the clone's spec {clone} is not a file"))?,
    );
    host_fsck(&clone_img)?;
    let n1 = host_verify_files(&clone_img, required)?;
    // The read-only snapshot: a journal to replay and no way to write it.
    require_kv(o, "snap_ro_mount", "refused")?;
    require_kv(o, "snap_noload_mount", "mounted")?;
    Ok(format!(
        "host: {}; {r} files acknowledged before the snapshot (the guest had {asked} when it asked) all on the clone after journal replay, e2fsck clean, verified in the guest and on the host ({n1}); the clone holds nothing past f{present} (LUN 1 seen at f{seen}); LUN 0 went on to {files} files, all {n0} verified in guest and host; the read-only snapshot: mount -o ro refused (its journal needs recovery), mount -o ro,noload showed {} of the {files} files; LUNs seen {:.1} s after asking (guest clock); boot to power-off {:.0} s ({})",
        host.done.join(", "),
        o.get("snap_noload_good").unwrap_or("?"),
        number(o, "seen_ms").unwrap_or(0) as f64 / 1000.0,
        o.elapsed.as_secs_f64(),
        o.accel.name()
    ))
}

/// The guest's `fsck=clean lun=LUN`.
fn fsck_clean(o: &Outcome, lun: &str) -> Result<(), String> {
    if o.with_key("fsck")
        .any(|r| field(r, "lun") == Some(lun) && field(r, "fsck") == Some("clean"))
    {
        Ok(())
    } else {
        Err(format!(
            "the guest did not report e2fsck clean on LUN {lun}"
        ))
    }
}

/// The number the guest reported as `key` (its first line with it).
fn number(o: &Outcome, key: &str) -> Result<u64, String> {
    parse(key, o.get(key))
}

/// The number `key` of the guest's `phase=PHASE` line.
fn at_phase(o: &Outcome, phase: &str, key: &str) -> Result<u64, String> {
    let rec = o
        .with_key("phase")
        .find(|r| field(r, "phase") == Some(phase));
    parse(key, rec.and_then(|r| field(r, key)))
}

fn parse(key: &str, v: Option<&str>) -> Result<u64, String> {
    let v = v.ok_or(format!("the guest did not report {key}"))?;
    v.parse()
        .map_err(|_| format!("the guest reported {key}={v}, not a number"))
}

/// Each LUN the guest reported is the one the target serves at that
/// number (its serial, by the host's own INQUIRY), three distinct LUs;
/// the clone writable, the snapshot read-only.
fn identities(o: &Outcome, target: &Target) -> Result<(), String> {
    let mut serials = Vec::new();
    for (lun, ro) in [(0u16, None), (1, Some("0")), (2, Some("1"))] {
        let l = lun.to_string();
        let rec = o
            .with_key("serial")
            .find(|r| field(r, "lun") == Some(&l))
            .ok_or(format!("the guest did not report LUN {lun}'s serial"))?;
        let got = field(rec, "serial").unwrap_or_default();
        let (rc, out) = run(
            super::support::ironlun_bin(),
            &["inquiry", "--json", &target.url(IQN, lun)],
        );
        let want: serde_json::Value = serde_json::from_str(&out)
            .map_err(|e| format!("ironlun inquiry of LUN {lun}: exit {rc}, {e}: {out}"))?;
        if want["unit_serial_number"].as_str() != Some(got) {
            return Err(format!(
                "the guest's LUN {lun} has serial {got:?}; the target's LUN {lun} has {}",
                want["unit_serial_number"]
            ));
        }
        if let Some(ro) = ro {
            if field(rec, "ro") != Some(ro) {
                return Err(format!(
                    "the guest's LUN {lun} has ro={:?}, expected {ro}",
                    field(rec, "ro")
                ));
            }
        }
        if serials.contains(&got.to_owned()) {
            return Err(format!("LUN {lun} has the serial {got} of another LUN"));
        }
        serials.push(got.to_owned());
    }
    Ok(())
}
