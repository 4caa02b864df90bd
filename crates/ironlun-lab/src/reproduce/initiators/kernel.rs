//! The Linux kernel initiator's rows of the initiator comparison: fio in
//! the QEMU VM (crate ironlun-vm, case `fio-cpu`) drives the raw LUN
//! through the same relay as the other clients, and the guest's own CPU
//! ticks over a window in each run give its CPU per I/O.
//!
//! Under TCG the guest's CPU is emulated, so that raw figure measures the
//! emulation. The guest and the host time the same fixed CPU-bound works
//! with the same program (fio): a checksum ([`CAL_HASH`], user-space
//! arithmetic) and reads of a tmpfs file ([`COPY_JOB`], the kernel
//! copying page-cache pages to user memory). The row's CPU per I/O is the
//! raw figure divided by the copy's slowdown ([`USED`]: the initiator's
//! work is kernel code moving data, and emulation slows that far more
//! than arithmetic): an estimate, labelled so, and its verdict too. The
//! checksum's slowdown is reported beside it, as the spread between kinds
//! of work.
//!
//! **Owns:** the guest's samples and their arithmetic (ticks to CPU per
//! I/O, the calibration), the VM run and the rows. **Must not know:** how
//! the guest is booted (ironlun-vm) or how rows are printed.

use std::process::Command;
use std::time::Duration;

use serde::Serialize;

use super::{Line, Row, Spec};

/// The initiator column of these rows.
pub const NAME: &str = "Linux kernel (VM)";
/// fio's checksum timed as user-space calibration work: a pure-integer
/// hash (no instruction the emulator may lack or the host may
/// accelerate), 256 MiB per run.
pub const CAL_HASH: &str = "fnv";
/// The kernel-copy calibration work: fio's options for 64 KiB reads of a
/// 64 MiB tmpfs file, twice over, from the page cache (`--invalidate=0`).
pub const COPY_JOB: &str =
    "--rw=read --bs=64k --size=64m --loops=2 --invalidate=0 --ioengine=psync --thread";
/// The calibration work the estimate divides by.
pub const USED: &str = "page-cache-read";
/// Calibration runs in the guest (each some seconds under TCG) and on
/// the host; the fastest of each is kept.
const GUEST_CAL_RUNS: u32 = 2;
const HOST_CAL_RUNS: u32 = 3;
/// The kernel's USER_HZ (/proc/stat's tick; 100 on every Linux arch
/// QEMU's x86 guest runs).
const USER_HZ: f64 = 100.0;
/// Guest memory: the image, fio's bundle (~80 MiB), its buffers.
const GUEST_MIB: u32 = 768;

/// One fixed work timed in the guest and on the host (the fastest run of
/// each).
#[derive(Clone, Debug, Serialize)]
pub struct Work {
    /// [`CAL_HASH`] or [`USED`].
    pub work: String,
    /// The fio command line's options.
    pub fio: String,
    pub host_mib_s: f64,
    pub guest_mib_s: f64,
    /// host / guest: how many times slower the guest's CPU ran it.
    pub slowdown: Option<f64>,
}

impl Work {
    pub fn new(work: &str, fio: &str, host_mib_s: f64, guest_mib_s: f64) -> Work {
        let ok = host_mib_s > 0.0 && guest_mib_s > 0.0;
        Work {
            work: work.to_owned(),
            fio: fio.to_owned(),
            host_mib_s,
            guest_mib_s,
            slowdown: ok.then(|| host_mib_s / guest_mib_s),
        }
    }
}

/// The calibration: each work, and the slowdown the estimate uses.
#[derive(Clone, Debug, Serialize)]
pub struct Calibration {
    pub works: Vec<Work>,
    /// The work whose slowdown divides the guest's CPU ([`USED`]).
    pub used: String,
    pub slowdown: Option<f64>,
    /// "tcg" or "kvm".
    pub accel: String,
}

impl Calibration {
    pub fn new(works: Vec<Work>, accel: &str) -> Calibration {
        let slowdown = works
            .iter()
            .find(|w| w.work == USED)
            .and_then(|w| w.slowdown);
        Calibration {
            works,
            used: USED.to_owned(),
            slowdown,
            accel: accel.to_owned(),
        }
    }
}

/// One spec's window in the guest.
#[derive(Clone, Debug, PartialEq)]
pub struct GuestSample {
    pub ms: u64,
    /// Read and written on the LUN in the window.
    pub bytes: u64,
    pub ncpu: u32,
    /// user, nice, system, idle, iowait, irq, softirq, steal.
    pub ticks: [u64; 8],
}

/// A guest record: `kinit=NAME ms= bytes= ncpu= user= ... steal=`, or
/// `kinit=NAME failed=WHY`.
pub fn parse_sample(r: &[(String, String)]) -> Result<GuestSample, String> {
    let get = |k: &str| ironlun_vm::guest::field(r, k);
    if let Some(why) = get("failed") {
        return Err(format!("fio in the guest: {why}"));
    }
    let num = |k: &str| -> Result<u64, String> {
        get(k)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("the guest's record has no {k}"))
    };
    let mut ticks = [0u64; 8];
    let keys = [
        "user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal",
    ];
    for (t, k) in ticks.iter_mut().zip(keys) {
        *t = num(k)?;
    }
    Ok(GuestSample {
        ms: num("ms")?,
        bytes: num("bytes")?,
        ncpu: u32::try_from(num("ncpu")?).unwrap_or(1).max(1),
        ticks,
    })
}

impl GuestSample {
    /// IOMeter's busy time (user, nice, system, irq, softirq), in ticks
    /// summed over the guest's CPUs.
    pub fn busy_ticks(&self) -> u64 {
        let [user, nice, system, _idle, _iowait, irq, softirq, _steal] = self.ticks;
        user + nice + system + irq + softirq
    }

    /// I/Os of `size` bytes in the window (from the LUN's sector
    /// counters, so the block layer's merges and splits do not count).
    pub fn ios(&self, size: u32) -> f64 {
        self.bytes as f64 / f64::from(size.max(1))
    }

    pub fn iops(&self, size: u32) -> Option<f64> {
        (self.ms > 0).then(|| self.ios(size) * 1000.0 / self.ms as f64)
    }

    /// Guest CPU µs per I/O, as measured (under emulation: the emulator's).
    pub fn raw_us_per_io(&self, size: u32) -> Option<f64> {
        let ios = self.ios(size);
        (ios > 0.0).then(|| self.busy_ticks() as f64 / USER_HZ * 1e6 / ios)
    }

    /// The guest's CPUs' busy share over the window, %.
    pub fn busy_pct(&self) -> Option<f64> {
        let total: u64 = self.ticks.iter().sum();
        (total > 0).then(|| self.busy_ticks() as f64 * 100.0 / total as f64)
    }
}

/// The estimate of what `raw` µs of guest CPU cost a CPU like the host's.
pub fn calibrated(raw: f64, slowdown: f64) -> Option<f64> {
    (slowdown > 0.0).then(|| raw / slowdown)
}

/// The row of `spec` from its guest sample: CPU per I/O, IOPS per CPU %
/// and CPU % at the study's `rate` from the calibrated estimate; the raw
/// figure beside it.
pub fn row(line: &Line, spec: &Spec, s: &GuestSample, cal: &Calibration, rate: Option<f64>) -> Row {
    let raw = s.raw_us_per_io(spec.size);
    let est = raw.zip(cal.slowdown).and_then(|(r, f)| calibrated(r, f));
    let pct = est.zip(rate).map(|(us, r)| line.host_pct(us, r));
    Row {
        spec: spec.name.clone(),
        initiator: NAME.into(),
        source: "measured",
        in_lab: true,
        runs_as: runs_as(cal),
        iops: s.iops(spec.size),
        cpu_us_per_io: est,
        iops_per_cpu_pct: est.and_then(|u| line.iops_per_pct(u)),
        cpu_pct: pct,
        verdict: pct.map(|p| line.verdict(p)),
        estimate: true,
        raw_cpu_us_per_io: raw,
        emulation_slowdown: cal.slowdown,
        guest_cpu_pct: s.busy_pct(),
        ..Row::default()
    }
}

fn runs_as(cal: &Calibration) -> String {
    format!(
        "fio (libaio, O_DIRECT) on the raw LUN in a QEMU VM ({}), guest CPU / {} slowdown: an estimate",
        cal.accel,
        cal.slowdown.map_or("unknown".into(), |f| format!("{f:.1}x"))
    )
}

/// A row saying why the kernel initiator did not run `spec`.
pub fn cannot(spec: &Spec, why: &str) -> Row {
    Row {
        spec: spec.name.clone(),
        initiator: NAME.into(),
        source: "measured",
        in_lab: true,
        runs_as: "not run".into(),
        cannot: Some(why.to_owned()),
        estimate: true,
        ..Row::default()
    }
}

/// `fio --crctest=HASH`'s rate, MiB/s (`HASH:<tab>RATE MiB/sec`).
pub fn crctest_rate(out: &str, hash: &str) -> Option<f64> {
    let head = format!("{hash}:");
    out.lines().find_map(|l| {
        let mut w = l.split_whitespace();
        (w.next() == Some(head.as_str()))
            .then(|| w.next().and_then(|v| v.parse().ok()))
            .flatten()
    })
}

/// fio's terse (version 3) read bandwidth, MiB/s: field 7, KiB/s.
pub fn terse_read_rate(out: &str) -> Option<f64> {
    out.lines()
        .map(|l| l.split(';').collect::<Vec<_>>())
        .find(|f| f.first() == Some(&"3"))
        .and_then(|f| f.get(6)?.parse::<f64>().ok())
        .map(|kib| kib / 1024.0)
}

/// fio on the host with `args`, its standard output.
fn host_fio(args: &[String]) -> Result<String, String> {
    let out = Command::new("fio")
        .args(args)
        .output()
        .map_err(|e| format!("fio on the host (Debian package fio): {e}"))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The host's fastest of [`HOST_CAL_RUNS`] runs of each calibration
/// work: (checksum, page-cache read) in MiB/s. The file is in /dev/shm
/// (tmpfs, as in the guest) where there is one.
fn host_rates() -> Result<(f64, f64), String> {
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let file = dir.join(format!("ironlun-kcal-{}", std::process::id()));
    let mut copy_args = vec![
        "--name=cal".to_owned(),
        format!("--filename={}", file.display()),
    ];
    copy_args.extend(COPY_JOB.split_whitespace().map(str::to_owned));
    copy_args.extend(["--output-format=terse", "--terse-version=3"].map(str::to_owned));
    let (mut hash, mut copy) = (0.0f64, 0.0f64);
    let mut result = Ok(());
    for _ in 0..HOST_CAL_RUNS {
        let run = host_fio(&[format!("--crctest={CAL_HASH}")]).and_then(|o| {
            let h =
                crctest_rate(&o, CAL_HASH).ok_or("fio --crctest on the host printed no rate")?;
            let c = terse_read_rate(&host_fio(&copy_args)?)
                .ok_or("fio's page-cache read on the host printed no rate")?;
            Ok((h, c))
        });
        match run {
            Ok((h, c)) => (hash, copy) = (hash.max(h), copy.max(c)),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let _ = std::fs::remove_file(&file);
    result.map(|()| (hash, copy))
}

/// Where the guest logs in: the relay's port on the host's loopback, the
/// target and the LUN.
pub struct Portal {
    pub port: u16,
    pub iqn: String,
    pub lun: u16,
}

/// What one boot measured: the calibration and a sample (or why not) per
/// spec, in the specs' order.
pub struct KernelRun {
    pub calibration: Calibration,
    pub samples: Vec<Result<GuestSample, String>>,
}

/// Boots the VM once and runs `specs`, each measured for `time` after a
/// one-second ramp. `Err`: why the VM gave nothing.
pub fn run(
    specs: &[Spec],
    portal: &Portal,
    time: Duration,
    progress: &mut dyn FnMut(&str),
) -> Result<KernelRun, String> {
    let fio = ironlun_vm::bundle::host_program("fio", "fio").map_err(|e| e.to_string())?;
    let image = ironlun_vm::Image::ensure(&ironlun_vm::default_cache_dir(), progress)
        .map_err(|e| e.to_string())?;
    let accel = ironlun_vm::Accel::detect();
    let ramp = Duration::from_secs(1);
    let list: Vec<String> = specs
        .iter()
        .map(|s| {
            format!(
                "{}:{}:{}:{}:{}",
                s.name, s.size, s.read_pct, s.random_pct, s.qd
            )
        })
        .collect();
    let env = vec![
        ("PORTAL_PORT".to_owned(), portal.port.to_string()),
        ("TARGET_IQN".to_owned(), portal.iqn.clone()),
        ("LUN".to_owned(), portal.lun.to_string()),
        ("SPECS".to_owned(), list.join(" ")),
        ("RAMP_MS".to_owned(), ramp.as_millis().to_string()),
        ("MEASURE_MS".to_owned(), time.as_millis().to_string()),
        ("CAL_HASH".to_owned(), CAL_HASH.to_owned()),
        ("COPY_JOB".to_owned(), COPY_JOB.to_owned()),
        ("CAL_RUNS".to_owned(), GUEST_CAL_RUNS.to_string()),
    ];
    // Boot and calibration, then per spec fio's start-up under emulation,
    // the ramp and the window.
    let per_spec = time + ramp + Duration::from_secs(30);
    let budget = Duration::from_secs(180) + per_spec * u32::try_from(specs.len()).unwrap_or(12);
    progress(&format!(
        "the Linux kernel initiator in a QEMU VM ({}): {} specs",
        accel.name(),
        specs.len()
    ));
    let o = ironlun_vm::boot(&ironlun_vm::Boot {
        image: &image,
        case: &ironlun_vm::cases::FIO_CPU,
        env,
        budget,
        memory_mib: GUEST_MIB,
        accel,
        console_log: None,
        on_line: None,
        extra: &fio,
    })
    .map_err(|e| e.to_string())?;
    if !o.passed() {
        return Err(format!(
            "the VM's fio run failed (rc {:?}, {:.0} s): {}",
            o.rc,
            o.elapsed.as_secs_f64(),
            o.console_tail(12)
        ));
    }
    let guest = |work: &str| {
        o.with_key("calibration")
            .filter(|r| ironlun_vm::guest::field(r, "calibration") == Some(work))
            .filter_map(|r| ironlun_vm::guest::field(r, "mib_s")?.parse::<f64>().ok())
            .fold(0.0f64, f64::max)
    };
    let (host_hash, host_copy) = host_rates()?;
    let calibration = Calibration::new(
        vec![
            Work::new(USED, COPY_JOB, host_copy, guest(USED)),
            Work::new(
                CAL_HASH,
                &format!("--crctest={CAL_HASH}"),
                host_hash,
                guest(CAL_HASH),
            ),
        ],
        accel.name(),
    );
    let samples = specs
        .iter()
        .map(|s| {
            o.with_key("kinit")
                .find(|r| ironlun_vm::guest::field(r, "kinit") == Some(s.name.as_str()))
                .ok_or_else(|| "the guest reported nothing for it".to_owned())
                .and_then(parse_sample)
        })
        .collect();
    Ok(KernelRun {
        calibration,
        samples,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

    use super::*;

    fn rec(s: &str) -> Vec<(String, String)> {
        s.split_whitespace()
            .map(|w| {
                let (k, v) = w.split_once('=').unwrap();
                (k.to_owned(), v.to_owned())
            })
            .collect()
    }

    fn sample() -> GuestSample {
        // 2 s, 4 KiB I/Os: 20 000 of them; 150 busy ticks of 200.
        parse_sample(&rec(
            "kinit=web-file-server-4k ms=2000 bytes=81920000 ncpu=1 user=20 nice=0 system=100 idle=50 iowait=0 irq=10 softirq=20 steal=0",
        ))
        .unwrap()
    }

    fn spec() -> Spec {
        Spec {
            name: "web-file-server-4k".into(),
            size: 4096,
            read_pct: 95,
            random_pct: 75,
            qd: 64,
        }
    }

    #[test]
    fn guest_ticks_become_cpu_per_io() {
        let s = sample();
        assert_eq!(s.busy_ticks(), 150);
        assert_eq!(s.ios(4096), 20_000.0);
        assert_eq!(s.iops(4096), Some(10_000.0));
        // 1.5 s of CPU over 20 000 I/Os.
        assert_eq!(s.raw_us_per_io(4096), Some(75.0));
        assert_eq!(s.busy_pct(), Some(75.0));
        let idle = GuestSample { bytes: 0, ..s };
        assert_eq!(idle.raw_us_per_io(4096), None);
    }

    #[test]
    fn a_failed_or_short_record_is_an_error() {
        let e = parse_sample(&rec("kinit=x failed=no-io-within-60s")).unwrap_err();
        assert!(e.contains("no-io-within-60s"), "{e}");
        let e = parse_sample(&rec("kinit=x ms=10 bytes=1 ncpu=1 user=1")).unwrap_err();
        assert!(e.contains("nice"), "{e}");
    }

    fn calibration(copy_guest: f64) -> Calibration {
        Calibration::new(
            vec![
                Work::new(CAL_HASH, "", 3000.0, 1000.0),
                Work::new(USED, COPY_JOB, 3000.0, copy_guest),
            ],
            "tcg",
        )
    }

    #[test]
    fn the_calibration_divides_by_the_copys_slowdown() {
        let c = calibration(120.0);
        assert_eq!(c.works[0].slowdown, Some(3.0));
        // The estimate uses the page-cache copy's, not the checksum's.
        assert_eq!(c.slowdown, Some(25.0));
        assert_eq!(calibrated(75.0, 25.0), Some(3.0));
        assert_eq!(calibrated(75.0, 0.0), None);
        // A work the guest did not report gives no slowdown.
        assert_eq!(calibration(0.0).slowdown, None);
    }

    #[test]
    fn the_row_is_judged_from_the_estimate_and_says_so() {
        let line = Line {
            pct: 8.0,
            host_cpus: 8.0,
        };
        let cal = calibration(120.0);
        // 3 us per I/O at 20 000 IOPS on 8 CPUs: 0.75 %, under.
        let r = row(&line, &spec(), &sample(), &cal, Some(20_000.0));
        assert_eq!(r.raw_cpu_us_per_io, Some(75.0));
        assert_eq!(r.cpu_us_per_io, Some(3.0));
        assert!((r.cpu_pct.unwrap() - 0.75).abs() < 1e-9);
        assert_eq!(r.verdict, Some(super::super::Verdict::Under));
        assert!(r.estimate);
        assert_eq!(r.emulation_slowdown, Some(25.0));
        assert!(r.runs_as.contains("25.0x"), "{}", r.runs_as);
        // Without a slowdown there is no estimate and no verdict, only
        // the raw figure.
        let none = calibration(0.0);
        let r = row(&line, &spec(), &sample(), &none, Some(20_000.0));
        assert_eq!((r.cpu_us_per_io, r.verdict), (None, None));
        assert_eq!(r.raw_cpu_us_per_io, Some(75.0));
    }

    #[test]
    fn terse_output_gives_the_read_rate() {
        let out = "3;fio-3.33;cal;0;0;131072;2048000;32000;64;0\n";
        assert_eq!(terse_read_rate(out), Some(2000.0));
        assert_eq!(terse_read_rate("note: x\n"), None);
    }

    #[test]
    fn crctest_output_gives_the_rate() {
        let out = "fnv:\t\t 3586.19 MiB/sec\n";
        assert_eq!(crctest_rate(out, "fnv"), Some(3586.19));
        assert_eq!(crctest_rate(out, "md5"), None);
        assert_eq!(crctest_rate("fnv:\t\t x MiB/sec\n", "fnv"), None);
    }
}
