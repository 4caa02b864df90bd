//! `ramdisk-target` (section 2): the TCP window sweep, the file-server
//! mix and its 50/50 variant and the 64 KiB disk-benchmark tests under
//! three tuning scenarios, the NIC team (one flow on one link), two paths
//! with one pulled mid-run, and the file copies through the kernel
//! initiator.

use std::time::{Duration, Instant};

use ironlun_units::format_size;

use std::sync::mpsc;

use super::fitted::Profile;
use super::steps::{profile, tcp_baseline, vm_fs_rows};
use super::tunings::{self, Scenario};
use super::{Progress, ReproduceOptions, Reproduction, WorkloadSet, NAMES};
use crate::cell::{Cell, Op};
use crate::fs_rows::{self, FsPlan};
use crate::model::{predict_mix, HostLine};
use crate::runner::{Lab, LabOptions};
use crate::testbed::profile::Knob;

/// The link of every scenario: the study's 1 Gbit/s with no emulated
/// delay (the fitted profile adds the testbed's own round trip).
fn base_cell() -> Cell {
    Cell {
        op: Op::Write,
        link_rate: Some(1_000_000_000),
        ..Cell::default()
    }
}

/// Why the iSCSI rows do not run under the profile's fitted window: the
/// relay carries a window as credit in chunks of a quarter of it, and at
/// this one (20 KiB) the file-server mix got half to two thirds of a
/// window per round trip on this machine, and 64 KiB writes stalled
/// (one per 44 ms) when the sockets had it too (docs/studies.md). The TCP
/// rows keep the fitted share of their declared windows in flight.
const WINDOW_LEFT_OUT: &str = "the relay's credit loop does not carry a window this small faithfully here: the file-server mix got half to two thirds of one window per round trip under it; each scenario's own window is carried instead, and the TCP rows keep the fitted share of their declared windows in flight";

/// A workload's cell: `link` under the fitted profile for `w`, with this
/// machine's host line `host` (what the relay need not hold).
fn imposed(profile: &Profile, link: &Cell, w: &ironlun_bench::Workload, host: &HostLine) -> Cell {
    let mut c = link.clone();
    profile.impose_workload(&mut c, w, host);
    c
}

pub(super) fn run(opts: &ReproduceOptions, progress: Progress<'_>) -> Result<Reproduction, String> {
    let started = Instant::now();
    // The measured rows run under the study's fitted testbed profile,
    // less its window on the iSCSI rows (WINDOW_LEFT_OUT).
    let fitted = Profile::of("ramdisk-target")?.leave_out(Knob::TcpWindow, WINDOW_LEFT_OUT);
    progress("TCP baseline: windows 8, 64, 128, 512 KiB over 1 Gbit/s under the fitted profile, median of 3");
    let tcp = tcp_baseline(
        &[0.0],
        &[8192, 65536, 131_072, 524_288],
        fitted.payload_bits(None),
        opts.tcp_time / 2,
        3,
        Some(&fitted),
    )?;
    let time = opts.cell_time * 3;
    let base = base_cell();
    // The mixes of every scenario, then the disk tests of every scenario,
    // then the untuned scenario's NIC team and multipath runs.
    let mut workloads = Vec::new();
    let mut disks = Vec::new();
    let mut extra = Vec::new();
    let mut applied = Vec::new();
    let mut held = Vec::new();
    let mut host = None;
    for sc in tunings::scenarios() {
        progress(&format!("scenario {}: {}", sc.key, sc.settings()));
        let out = in_namespace(&sc, opts, &base, &fitted, host, time, progress)?;
        applied.push(out.applied);
        if held.is_empty() {
            held = out.held;
        }
        host = Some(out.host);
        let mut sets = out.sets.into_iter();
        workloads.extend(sets.next());
        disks.extend(sets.next());
        extra.extend(sets);
    }
    workloads.extend(disks);
    workloads.extend(extra);
    // The file copies through ext4 on the kernel initiator, on a RAM LUN.
    let plan = FsPlan {
        file_mb: 0,
        ..opts.fs.clone()
    };
    let luns = [("ram", format!("ram:{}", fs_rows::lun_size_for(&plan)))];
    let (fs_rows, fs_note) = vm_fs_rows(opts, &luns, &plan, progress)?;
    let mut notes = vec![
        fitted.note(&format!(
            "1 Gbit/s at {:.2} MB/s of TCP payload (MTU {}; the TCP baseline too), with no emulated delay beyond the testbed's own",
            fitted.payload_bits(None) as f64 / 8e6,
            fitted.mtu(),
        )),
        format!("Host time the relay held per command (the profile's at the workload's mean request size less this machine's own at queue depth 1 by size and direction, untuned scenario): {}.", held.join(", ")),
        "Not applied: the profile to the file copies through the kernel initiator in the VM (no relay between the guest and the target, so those rows are this machine's under emulation); the profile's MTU to the namespaces' loopback (the relay's payload rate carries the framing, see below).".into(),
    ];
    notes.extend(self::notes(opts, &plan, fs_note));
    notes.extend(applied);
    Ok(Reproduction {
        reproduction: "ramdisk-target".into(),
        description: NAMES[2].1.into(),
        elapsed_s: started.elapsed().as_secs_f64(),
        steal_pct: None,
        tcp,
        tables: Vec::new(),
        workloads,
        fs_rows,
        peers: Vec::new(),
        notes,
        comparison: None,
        initiators: None,
    })
}

/// What one scenario's namespace measured.
struct ScenarioRun {
    /// The file-server mixes first, then the disk tests, then (notweaks
    /// only) the NIC team and the two paths.
    sets: Vec<WorkloadSet>,
    /// The line that says what was applied and what was not.
    applied: String,
    /// The host time the relay held per command, by workload.
    held: Vec<String>,
    host: HostLine,
}

/// Runs `sc`'s cells on a thread of their own in a network namespace
/// with the scenario's TCP settings (`tunings::enter`), against a target
/// and through relays started there. The untuned scenario also
/// calibrates the host line (when `host` is `None`) and runs the NIC
/// team and the two paths, which the study ran untuned. Each workload
/// runs under `fitted` (calibrated without it).
fn in_namespace(
    sc: &Scenario,
    opts: &ReproduceOptions,
    base: &Cell,
    fitted: &Profile,
    host: Option<HostLine>,
    time: Duration,
    progress: Progress<'_>,
) -> Result<ScenarioRun, String> {
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::scope(|s| {
        let worker = s.spawn(move || -> Result<ScenarioRun, String> {
            let applied = tunings::enter(sc.key, &sc.tcp).line(sc.key);
            let _ = tx.send(applied.clone());
            let mut lab = Lab::new(LabOptions {
                target_max_recv_dsl: Some(sc.iscsi.max_recv_dsl),
                ..opts.lab.clone()
            })?;
            let cell = sc.cell(base);
            let host = match host {
                Some(h) => h,
                None => {
                    let _ = tx.send("calibrating host time per command on loopback".into());
                    lab.calibrate_line(&cell, Duration::from_millis(300))?
                }
            };
            let mut run = Run {
                fitted,
                host: &host,
                time,
                held: Vec::new(),
            };
            let title = format!("file-server mix, {}", sc.title);
            let mut sets = vec![run.file_server_mixes(&mut lab, title, &cell)?];
            let _ = tx.send(format!("64 KiB disk-benchmark tests, {}", sc.key));
            sets.push(run.disk_tests(&mut lab, sc, &cell)?);
            if sc.key == "notweaks" {
                let _ = tx.send("NIC team: the mixes as one flow on one member link".into());
                sets.push(run.nic_team(&mut lab, &cell)?);
                let _ = tx.send("two paths, then one pulled mid-run".into());
                sets.push(run.two_paths(&mut lab, &cell)?);
            }
            lab.close();
            Ok(ScenarioRun {
                sets,
                applied,
                held: run.held,
                host,
            })
        });
        // The worker's progress, until it drops its sender.
        for m in rx {
            progress(&m);
        }
        worker
            .join()
            .map_err(|_| format!("scenario {} panicked", sc.key))?
    })
}

/// What a scenario's workloads run under: the fitted profile, this
/// machine's host line, the run time; and the host time held so far.
struct Run<'a> {
    fitted: &'a Profile,
    host: &'a HostLine,
    time: Duration,
    held: Vec<String>,
}

impl Run<'_> {
    /// `w`'s cell over `link` under the profile, noting the time held.
    fn cell(&mut self, link: &Cell, w: &ironlun_bench::Workload) -> Cell {
        let c = imposed(self.fitted, link, w, self.host);
        let us = c.imposed.host_delay.as_secs_f64() * 1e6;
        let name = &w.name;
        if !self.held.iter().any(|h| h.starts_with(&format!("{name} "))) {
            self.held.push(format!("{name} {us:.0} us"));
        }
        c
    }

    /// The file-server mix and its 50/50 variant over `link`, as one set.
    fn file_server_mixes(
        &mut self,
        lab: &mut Lab,
        title: String,
        link: &Cell,
    ) -> Result<WorkloadSet, String> {
        let mut set = WorkloadSet::new(title);
        for name in ["file-server", "file-server-50"] {
            let w = profile(name, self.time)?;
            let cell = self.cell(link, &w);
            let (r, steal) = lab.run_workload(&cell, &w, false)?;
            set.push(r, predict_mix(&w, &cell, Some(self.host)), steal);
        }
        Ok(set)
    }

    /// The 64 KiB disk-benchmark tests over the base link, under one
    /// tuning scenario (the study ran h2benchw under all three).
    fn disk_tests(
        &mut self,
        lab: &mut Lab,
        sc: &Scenario,
        link: &Cell,
    ) -> Result<WorkloadSet, String> {
        let mut set = WorkloadSet::new(format!("disk-benchmark style tests, 64 KiB, {}", sc.title));
        for mut w in ironlun_bench::profiles::lookup("disk-tests")? {
            // The group's section-3 tests (dd, database) have no cell in
            // this study: run once, in the untuned scenario.
            let section_3 = w.name.starts_with("dd-") || w.name.starts_with("db-");
            if section_3 && sc.key != "notweaks" {
                continue;
            }
            // A zone test ends when it has swept the whole LUN. The
            // section-2 others run one request at a time: two thirds of
            // a mix's time (1.2 s by default) still sees over 600
            // requests, and keeps the three scenarios' tests within the
            // 3-minute run.
            w.time_s = if w.zones.is_some() {
                120.0
            } else {
                self.time.as_secs_f64() * 2.0 / 3.0
            };
            w.ramp_s = 0.2; // none for zone sweeps (Workload::ramp)
            let cell = self.cell(link, &w);
            let (r, steal) = lab.run_workload(&cell, &w, false)?;
            set.push(r, predict_mix(&w, &cell, Some(self.host)), steal);
        }
        Ok(set)
    }

    /// The study's NIC team (two links teamed with LACP, one iSCSI
    /// session): a team keeps a conversation's frames on one member link,
    /// in order (IEEE 802.1AX), so the session's one TCP connection runs
    /// on one member. Both mixes, one session over one link of the team's
    /// member rate; a separate run from the single-link rows.
    fn nic_team(&mut self, lab: &mut Lab, link: &Cell) -> Result<WorkloadSet, String> {
        let title = "NIC team stand-in: one session, its one flow on one 1 Gbit/s member link";
        self.file_server_mixes(lab, title.into(), link)
    }

    /// Multipath, which the study recommended over a team (it did not
    /// measure it): the file-server mix over two paths, then again
    /// with path 0 pulled after the run time.
    fn two_paths(&mut self, lab: &mut Lab, link: &Cell) -> Result<WorkloadSet, String> {
        let time = self.time;
        let fs = profile("file-server", time * 2)?;
        let two = self.cell(
            &Cell {
                sessions: 2,
                ..link.clone()
            },
            &fs,
        );
        let mut set = WorkloadSet::new("multipath: two paths, and one pulled mid-run".into());
        let (both, steal) = lab.run_workload(&two, &fs, false)?;
        set.push(both, predict_mix(&fs, &two, Some(self.host)), steal);
        lab.close();
        lab.prepare(&two)?;
        lab.cut_path_after(0, time)?;
        let (mut pulled, steal) = lab.run_workload(&two, &fs, false)?;
        pulled.name = format!(
            "{} (path 0 pulled after {:.1} s)",
            pulled.name,
            time.as_secs_f64()
        );
        // A pulled path has no steady state to model.
        set.push(pulled, None, steal);
        Ok(set)
    }
}

/// What differs from the published study, and the model.
fn notes(opts: &ReproduceOptions, plan: &FsPlan, fs_note: Option<String>) -> Vec<String> {
    vec![
        format!("The RAM LUN is {}, not 2 GB. The link is the study's 1 Gbit/s under the fitted profile (above), emulated by ironlun's relay.", format_size(opts.lab.lun_size)),
        "Model of a workload (a mix of sizes): per command, mean over the mix of host time (a line in the request size through 4 KiB and 256 KiB runs at queue depth 1, per direction) + round trips x RTT + wire bytes / rate, at least a line's transfer delay; throughput = the least of outstanding commands x mean size / mean cycle, the link rate in the busier direction, the TCP window per round trip and any rate limit. Under the fitted profile a command's host time also has the time the relay held it, and the profile's cores over its whole host time bound the rate. It has no bound for this machine's own host rate (a mix's host limit is not calibrated), and none for the run with a pulled path.".into(),
        "Each tuning scenario runs its initiator, relay and target over the loopback of a network namespace of its own with the scenario's per-namespace TCP sysctls (SACK, timestamps, window scaling, receive-buffer autotuning, congestion control) and, with delayed ACK off, a quickack route; the lines below say what each applied. The scenario's TCP window is set on the sockets and carried by the relay. The study's untuned iSCSI lengths are not in its text: Microsoft's documented defaults (FirstBurstLength 64 KiB, MaxBurstLength 256 KiB, MaxRecvDataSegmentLength 64 KiB) are ironlun's assumption. RSS and TCP chimney offload, which the study disabled, are NIC features the loopback does not have. The loopback keeps its MTU: at the study's 1500 it stalled queue-depth-1 commands (64 KiB sequential reads at 9.8 MB/s against 77.7), an artefact of the relay, whose emulated link carries the framing.".to_owned(),
        "The NIC team is one iSCSI session over one emulated link: the study's LACP team kept its one TCP flow on one member link (IEEE 802.1AX), so its rates were a single link's; the other member and the pulled cable are not emulated. The multipath run (two sessions, round-robin, over two emulated links; the study recommended multipath over a team but did not measure it) has no published cell; pulling a link there cuts one relay.".into(),
        fs_note.unwrap_or_else(|| format!("The file copies ran through ext4 on the Linux kernel initiator (open-iscsi) in a QEMU VM on a RAM LUN of its own, with no emulated link{}; under software emulation the guest CPU, not the target, bounds them.", if plan.copy_scale > 1 { format!(", at 1/{} of the published sizes (--full runs them whole)", plan.copy_scale) } else { String::new() })),
        format!("The study's copies ran between a RAM disk on the initiator and the LUN: here a tmpfs in the guest (random data, as the study's files were). RAM disk -> LUN is its write, timed as robocopy timed it, without the sync (the guest's page cache takes the data, as Windows' did); the synced row adds the time to put it on the LUN. LUN -> RAM disk is its read, with the files still cached from the write (the study's read rates, above its link's, were cache rates); the uncached row (with --full) drops the caches first.{}", if plan.lun_copies { "" } else { " LUN -> LUN copies (no published cell) run only with --full." }),
    ]
}
