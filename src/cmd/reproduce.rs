//! `ironlun reproduce NAME`: a published study in one command.

use std::path::PathBuf;

use ironlun_lab::fs_rows::VmMode;
use ironlun_lab::reproduce::{self, ReproduceOptions};
use ironlun_units::parse_duration;

#[derive(clap::Args)]
pub struct ReproduceArgs {
    /// The study (see --list).
    #[arg(required_unless_present = "list")]
    pub name: Option<String>,
    /// List the reproductions.
    #[arg(long)]
    pub list: bool,
    /// Measured time per iSCSI cell (stretched for long round trips).
    #[arg(long, value_name = "DURATION")]
    pub time: Option<String>,
    /// Published run lengths (10 s cells and TCP runs, 4 min profile runs
    /// after 60 s of ramp-up, 2 GiB LUN): hours instead of minutes.
    #[arg(long)]
    pub full: bool,
    /// Size of the embedded LUN (default 512MiB, 2GiB with --full).
    #[arg(long, value_name = "SIZE")]
    pub lun_size: Option<String>,
    /// The file-system rows through the Linux kernel initiator in a QEMU
    /// VM: auto (when qemu-system-x86_64 is installed), on, off.
    #[arg(long, default_value = "auto", value_name = "auto|on|off")]
    pub vm: String,
    /// app-profiles: the initiators' CPU comparison (ironlun's initiator
    /// and libiscsi's iscsi-perf against the study's 8 % line) on all
    /// twelve specs, a quick slice of three, or off.
    #[arg(long, default_value = "all", value_name = "all|quick|off")]
    pub initiators: String,
    /// app-profiles: the Linux kernel initiator's rows in the comparison
    /// (fio in the QEMU VM, when --vm allows; its CPU an estimate under
    /// emulation): the quick slice, all twelve, or off (the default; all
    /// with --full); never wider than --initiators.
    #[arg(long, value_name = "quick|all|off")]
    pub kernel_initiator: Option<String>,
    /// Where NAME.json and NAME.html go.
    #[arg(long, default_value = "ironlun-reproduce", value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run(a: ReproduceArgs) -> Result<(), String> {
    if a.list {
        for (n, d) in reproduce::NAMES {
            outln!("{n:<16} {d}");
        }
        return Ok(());
    }
    let name = a.name.clone().unwrap_or_default();
    let mut opts = if a.full {
        ReproduceOptions::full()
    } else {
        ReproduceOptions::default()
    };
    if let Some(t) = &a.time {
        opts.cell_time = parse_duration(t)?;
        opts.tcp_time = opts.cell_time.max(std::time::Duration::from_millis(200));
        opts.profile_time = opts.cell_time * 3;
        opts.initiators.time = opts.profile_time.max(std::time::Duration::from_secs(1));
    }
    opts.initiators.which = reproduce::initiators::Which::parse(&a.initiators)?;
    if let Some(k) = &a.kernel_initiator {
        opts.initiators.kernel = reproduce::initiators::Which::parse(k)
            .map_err(|e| e.replace("--initiators", "--kernel-initiator"))?;
    }
    opts.initiators.kernel = opts.initiators.kernel.within(opts.initiators.which);
    opts.vm = match a.vm.as_str() {
        "auto" => VmMode::Auto,
        "on" => VmMode::On,
        "off" => VmMode::Off,
        other => return Err(format!("--vm {other}: auto, on or off")),
    };
    // This binary serves target-backends' block rows as `ironlun target`.
    opts.target_exe = std::env::current_exe().ok();
    if let Some(s) = &a.lun_size {
        opts.lab.lun_size = ironlun_units::parse_size(s)?;
    }
    let t0 = std::time::Instant::now();
    let r = reproduce::run(&name, &opts, &mut |what| {
        eprintln!("[{:>5.1} s] {name}: {what} ...", t0.elapsed().as_secs_f64());
    })?;
    out!("{}", r.text());
    let out = r.outliers(0.25);
    if r.modelled() == 0 {
        outln!(
            "\n(no model for these runs: on loopback with no emulated link the only bound is the host itself, which is what they measure)"
        );
    } else if out.is_empty() {
        outln!(
            "\nall {} modelled cells are within 25 % of their model",
            r.modelled()
        );
    } else {
        outln!(
            "\n{} of {} modelled cells are more than 25 % from the model:",
            out.len(),
            r.modelled()
        );
        for o in &out {
            outln!("  {o}");
        }
    }
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let json = a.out.join(format!("{name}.json"));
    let html = a.out.join(format!("{name}.html"));
    std::fs::write(&json, r.json()?).map_err(|e| format!("{}: {e}", json.display()))?;
    std::fs::write(&html, r.html()).map_err(|e| format!("{}: {e}", html.display()))?;
    if !r.workloads.is_empty() {
        let w = a.out.join(format!("{name}-workloads.html"));
        let page = ironlun_bench::report::html(&r.workload_reports());
        std::fs::write(&w, page).map_err(|e| format!("{}: {e}", w.display()))?;
        outln!("workload charts: {}", w.display());
    }
    if let Some(c) = &r.comparison {
        outln!(
            "against the published figures: {}",
            ironlun_lab::published::render::share_line(c)
        );
        if let Some(f) = &c.fit {
            outln!(
                "fitted testbed profile against the published figures: in-sample {}; out-of-sample {}",
                f.in_sample.text(),
                f.out_of_sample.text()
            );
        }
    }
    outln!(
        "took {:.0} s; results: {}; report: {}",
        r.elapsed_s,
        json.display(),
        html.display()
    );
    Ok(())
}
