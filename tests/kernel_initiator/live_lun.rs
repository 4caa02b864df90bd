//! Case 6, live-lun: the target is changed with `ironlun admin` while
//! the Linux kernel initiator has ext4 mounted on LUN 0. When the guest
//! reports `phase=lun0-mounted` the host adds LUN 1 (a file); when it
//! reports `phase=lun1-written` the host grows LUN 1. The guest must find
//! each change by rescanning, with the sizes the host set, and LUN 0's
//! file system must stay mounted and whole throughout. Afterwards the
//! host checks both LUN files itself.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ironlun_vm::guest::{field, parse_record, WRITE_FILES};
use ironlun_vm::{cases, Outcome};

use super::support::{run, Target};
use super::{boot_watching, host_checks_ext4, require_kv, require_pass, sha256_file, verdict};
use super::{Ctx, Verdict, IQN};

const MIB: u64 = 1 << 20;
/// LUN 1 as added, and as grown: sizes the kernel must report exactly.
const LUN1_BYTES: u64 = 24 * MIB;
const LUN1_RESIZED: u64 = 40 * MIB;
/// How long the guest rescans for a change after reporting the phase
/// that asks for it. The host acts within a second on a quiet machine;
/// this bound only stops a guest that would otherwise wait for ever.
const WAIT_S: &str = "300";

/// What the host did on the guest's lines, and what went wrong there.
#[derive(Default)]
struct Steps {
    done: Vec<String>,
    errors: Vec<String>,
}

pub(super) fn case_live_lun(ctx: &Ctx) -> Verdict {
    let dir = ctx.work.path();
    let (img0, img1) = (dir.join("live-lun0.img"), dir.join("live-lun1.img"));
    let sock = dir.join("live-lun.admin.sock");
    let lun0 = format!("file:{},size=64MiB", img0.display());
    let sock_arg = sock.to_str().unwrap_or_default();
    let mut target = Target::start(&["--name", IQN, "--lun", &lun0, "--admin-socket", sock_arg]);
    let steps = Mutex::new(Steps::default());
    let t0 = Instant::now();
    let lun1 = format!("file:{},size={}MiB", img1.display(), LUN1_BYTES / MIB);
    let grown = format!("{}MiB", LUN1_RESIZED / MIB);
    let on_line = |line: &str| {
        let rec = parse_record(line).unwrap_or_default();
        let (args, expect): (Vec<&str>, String) = match field(&rec, "phase") {
            Some("lun0-mounted") => (
                vec!["lun", "add", IQN, &lun1, "--lun", "1"],
                format!("+ target {IQN} LUN 1"),
            ),
            Some("lun1-written") => (
                vec!["lun", "resize", IQN, "1", &grown],
                format!("LUN 1: size {LUN1_RESIZED}"),
            ),
            _ => return,
        };
        let step = admin_step(&sock, &args, &expect);
        let mut s = steps.lock().unwrap_or_else(|e| e.into_inner());
        match step {
            Ok(_) => s.done.push(format!(
                "{} at {:.1} s",
                args[..2].join(" "),
                t0.elapsed().as_secs_f64()
            )),
            Err(e) => s.errors.push(e),
        }
    };
    let extra = [
        ("LUN1_BYTES", LUN1_BYTES.to_string()),
        ("LUN1_RESIZED", LUN1_RESIZED.to_string()),
        ("WAIT_S", WAIT_S.to_owned()),
    ];
    let extra: Vec<(&str, &str)> = extra.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let port = target.addr.port();
    let o = boot_watching(
        ctx,
        &cases::LIVE_LUN,
        "live-lun",
        port,
        &extra,
        Some(&on_line),
    );
    let steps = steps.into_inner().unwrap_or_else(|e| e.into_inner());
    let r = check(&o, &steps, &img0, &img1);
    let _ = target.terminate(Duration::from_secs(10));
    verdict(r)
}

/// `ironlun admin --socket SOCK ARGS…`: exit 0 and `expect` in its
/// output, which it returns.
pub(super) fn admin_step(sock: &Path, args: &[&str], expect: &str) -> Result<String, String> {
    let mut all = vec!["admin", "--socket", sock.to_str().unwrap_or_default()];
    all.extend_from_slice(args);
    let (rc, out) = run(super::support::ironlun_bin(), &all);
    if rc == 0 && out.contains(expect) {
        Ok(out)
    } else {
        Err(format!(
            "ironlun {}: exit {rc}, expected {expect:?}: {out}",
            all.join(" ")
        ))
    }
}

fn check(o: &Outcome, steps: &Steps, img0: &Path, img1: &Path) -> Result<String, String> {
    if !steps.errors.is_empty() {
        return Err(format!(
            "the host's changes failed: {}",
            steps.errors.join("; ")
        ));
    }
    if steps.done.len() != 2 {
        return Err(format!(
            "the host made {} of 2 changes ({}); {}",
            steps.done.len(),
            steps.done.join(", "),
            require_pass(o).err().unwrap_or_default()
        ));
    }
    require_pass(o)?;
    for k in ["discovery", "login", "logout"] {
        require_kv(o, k, "ok")?;
    }
    require_kv(o, "lun1_bytes", &LUN1_BYTES.to_string())?;
    require_kv(o, "lun1_resized_bytes", &LUN1_RESIZED.to_string())?;
    require_kv(o, "pattern_before", "kept")?;
    require_kv(o, "lun0_mounted", "yes")?;
    require_kv(o, "verify", "ok")?;
    require_kv(o, "fsck", "clean")?;
    let device = o
        .get("lun1_device")
        .ok_or("guest did not report lun1_device")?;
    let (seen, grown) = (
        number(o, "lun1_seen_ms")?,
        number(o, "lun1_resize_seen_ms")?,
    );
    let (rescans, resize_rescans) = (
        number(o, "lun1_rescans")?,
        number(o, "lun1_resize_rescans")?,
    );
    let len = std::fs::metadata(img1)
        .map_err(|e| format!("{}: {e}", img1.display()))?
        .len();
    if len != LUN1_RESIZED {
        return Err(format!(
            "LUN 1's file has {len} bytes, expected {LUN1_RESIZED}"
        ));
    }
    host_checks_pattern(o, img1, "before", LUN1_BYTES - MIB)?;
    host_checks_pattern(o, img1, "after", LUN1_RESIZED - MIB)?;
    // write_files's, one written while LUN 1 was added, one after.
    let n = host_checks_ext4(img0, o, "0", WRITE_FILES + 2)?;
    Ok(format!(
        "host: {}; guest: LUN 1 ({device}) seen with {LUN1_BYTES} bytes {:.1} s after asking ({rescans} rescans), {LUN1_RESIZED} bytes {:.1} s after asking ({resize_rescans} rescans), guest-clock; a MiB written before and after the resize verified by guest and host; LUN 0 stayed mounted and its {n} files verify in the guest and on the host, e2fsck clean; boot to power-off {:.0} s ({})",
        steps.done.join(", "),
        seen as f64 / 1000.0,
        grown as f64 / 1000.0,
        o.elapsed.as_secs_f64(),
        o.accel.name()
    ))
}

/// A non-negative integer the guest reported as `key`.
fn number(o: &Outcome, key: &str) -> Result<u64, String> {
    let v = o.get(key).ok_or(format!("guest did not report {key}"))?;
    v.parse()
        .map_err(|_| format!("guest reported {key}={v}, not a number"))
}

/// The guest's `pattern=NAME` record is at `offset` on LUN 1 and the
/// LUN's file holds, there, the bytes whose SHA-256 the guest reported.
fn host_checks_pattern(o: &Outcome, img: &Path, name: &str, offset: u64) -> Result<(), String> {
    let rec = o
        .with_key("pattern")
        .find(|r| field(r, "pattern") == Some(name))
        .ok_or(format!("guest did not report pattern={name}"))?;
    let want = |k: &str, v: String| match field(rec, k) {
        Some(got) if got == v => Ok(()),
        got => Err(format!(
            "pattern {name}: guest reported {k}={got:?}, expected {v}"
        )),
    };
    want("lun", "1".to_owned())?;
    want("offset", offset.to_string())?;
    want("bytes", MIB.to_string())?;
    let sum = field(rec, "sha256").ok_or(format!("pattern {name} without sha256"))?;
    let mut bytes = vec![0u8; MIB as usize];
    let mut f = std::fs::File::open(img).map_err(|e| format!("{}: {e}", img.display()))?;
    f.seek(SeekFrom::Start(offset))
        .and_then(|_| f.read_exact(&mut bytes))
        .map_err(|e| format!("reading {} at {offset}: {e}", img.display()))?;
    let copy = img.with_extension(format!("{name}.bin"));
    std::fs::write(&copy, &bytes).map_err(|e| format!("{}: {e}", copy.display()))?;
    let got = sha256_file(&copy);
    let _ = std::fs::remove_file(&copy);
    if got != sum {
        return Err(format!(
            "pattern {name}: LUN 1's file holds sha256 {got} at {offset}, the guest wrote {sum}"
        ));
    }
    Ok(())
}
