//! `target-backends` (section 3): NULLIO, FILEIO and BLOCKIO stand-ins
//! for sequential 512 KiB reads and writes over 1 Gbit/s, the
//! database-like random test, MPIO over two 100 Mbit/s paths against one,
//! the file rows through the kernel initiator, and the other targets
//! (tgt for STGT, istgt for IET: `peers`) beside ironlun's rows.

use std::time::Instant;

use ironlun_units::format_size;

use super::fitted::{self, Profile};
use super::peers;
use super::steps::{fs_file_lun, run_tables, sweep_from, vm_fs_rows};
use super::{Progress, ReproduceOptions, Reproduction, NAMES};
use crate::fs_rows::{self, FsPlan, FsRow};
use crate::runner::Lab;
use crate::sweep::Sweep;

/// The study's test I (dd-style 512 KiB transfers at queue depth 1 over
/// 1 Gbit/s) for `backends` × `ops`, each a TOML array of strings: for
/// ironlun's rows and the peers' ([`super::peers`]).
pub(super) fn seq_sweep(backends: &str, ops: &str) -> Result<Sweep, String> {
    sweep_from(&format!(
        r#"rows = ["backend"]
           cols = ["op"]
           [base]
           bs = "512KiB"
           qd = 1
           link_rate = "1Gbit"
           tcp_window = "4MB"
           [axes]
           backend = {backends}
           op = {ops}"#
    ))
}

pub(super) fn run(opts: &ReproduceOptions, progress: Progress<'_>) -> Result<Reproduction, String> {
    let started = Instant::now();
    // The measured rows, ironlun's and the peers', run under the study's
    // fitted testbed profile.
    let profile = Profile::of("target-backends")?;
    let mut lab = Lab::new(opts.lab.clone())?;
    let seq = seq_sweep(r#"["null", "file", "file-direct"]"#, r#"["read", "write"]"#)?;
    let db = sweep_from(
        r#"rows = ["backend"]
           cols = ["workers"]
           [base]
           op = "write"
           bs = "4KiB"
           read = 70
           random = 90
           qd = 1
           workers = 2
           link_rate = "1Gbit"
           [axes]
           backend = ["null", "file", "file-direct"]"#,
    )?;
    let mpio = sweep_from(
        r#"rows = ["sessions"]
           cols = ["backend"]
           [base]
           op = "read"
           bs = "512KiB"
           qd = 8
           link_rate = "100Mbit"
           [axes]
           backend = ["null", "file"]
           sessions = [1, 2]"#,
    )?;
    let sweeps = vec![
        (
            "dd-style sequential 512 KiB, queue depth 1, 1 Gbit/s (MB/s)".to_owned(),
            seq,
        ),
        (
            "database-like: 4 KiB, 90 % random, 70 % read, two workers, 1 Gbit/s".to_owned(),
            db,
        ),
        (
            "MPIO: sequential read over one or two 100 Mbit/s paths, null and file backends"
                .to_owned(),
            mpio,
        ),
    ];
    let tables = run_tables(&mut lab, &sweeps, opts, started, Some(&profile), progress)?;
    lab.close();
    drop(lab);
    let measured = tables.iter().flat_map(|t| &t.cells).map(|c| &c.cell);
    let mut notes = vec![
        profile.note(&format!(
            "1 Gbit/s at {:.2} MB/s of TCP payload (MTU {}) and the MPIO paths' 100 Mbit/s at {:.2} MB/s",
            profile.payload_bits(None) as f64 / 8e6,
            profile.mtu(),
            profile.payload_bits(Some(100e6)) as f64 / 8e6,
        )),
        format!(
            "Host time the relay held per command (the profile's less this machine's own at queue depth 1): {}; the peers' rows run over the same link, the relay holding each of their commands as long as for ironlun's row of the same backend and direction (the file row's for the block rows).",
            fitted::held(measured)
        ),
    ];
    let (fs_rows, fs_notes) = file_system_rows(opts, progress)?;
    notes.extend(fs_notes);
    let seq: Vec<_> = tables
        .first()
        .map(|t| t.cells.iter().map(|c| c.cell.clone()).collect())
        .unwrap_or_default();
    let (peers, peer_notes) = peers::run(opts, true, &seq, progress)?;
    notes.extend(peer_notes);
    Ok(Reproduction {
        reproduction: "target-backends".into(),
        description: NAMES[1].1.into(),
        elapsed_s: started.elapsed().as_secs_f64(),
        steal_pct: None,
        tcp: Vec::new(),
        tables,
        workloads: Vec::new(),
        fs_rows,
        peers,
        notes,
        comparison: None,
        initiators: None,
    })
}

/// Tests 3 and 4: a file read and written through ext4 on the kernel
/// initiator, on the file and file-direct backends (a null LUN holds no
/// file system); with the study's notes.
fn file_system_rows(
    opts: &ReproduceOptions,
    progress: Progress<'_>,
) -> Result<(Vec<FsRow>, Vec<String>), String> {
    let plan = FsPlan {
        copy_scale: 0,
        ..opts.fs.clone()
    };
    let size = fs_rows::lun_size_for(&plan);
    let luns = [
        ("file", fs_file_lun(opts, "file", size, false)),
        ("file-direct", fs_file_lun(opts, "direct", size, true)),
    ];
    let fs = vm_fs_rows(opts, &luns, &plan, progress);
    for (_, spec) in &luns {
        if let Some(path) = spec.strip_prefix("file:").and_then(|s| s.split(',').next()) {
            let _ = std::fs::remove_file(path);
        }
    }
    let (fs_rows, fs_note) = fs?;
    let mut notes = vec![
        format!("NULLIO is ironlun's null backend. FILEIO is a file LUN through the page cache; the study limited the target's memory so the cache could not hold the data, which a process cannot do to itself here, so BLOCKIO is stood in for by the same file opened with O_DIRECT (no spare block device on this machine). The LUN is {}, not 5 GB.", format_size(opts.lab.lun_size)),
    ];
    notes.extend(fs_note);
    if !fs_rows.is_empty() {
        notes.push(format!("Tests 3 and 4 ran through ext4 on the Linux kernel initiator (open-iscsi) in a QEMU VM, {} MiB file{}; under software emulation the guest CPU, not the target, bounds them.", plan.file_mb, if plan.file_mb == 1000 { "" } else { " (1000 MiB with --full)" }));
    }
    notes.push("The database-like test reports throughput over a fixed time rather than the total time of a fixed job.".into());
    Ok((fs_rows, notes))
}
