//! `ironlun sweep`: a declarative parameter sweep against an embedded
//! target, with the model beside each cell.

use std::path::PathBuf;

use ironlun_lab::sweep::{self, SweepFile};
use ironlun_lab::{Lab, LabOptions, Sweep};
use ironlun_units::parse_size;

#[derive(clap::Args)]
pub struct SweepArgs {
    /// A TOML sweep: title, time, ramp, rows, cols, [base], [axes]
    /// (see docs/sweep.md).
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// A base value: PARAM=VALUE (repeatable), e.g. op=read,
    /// link_rate=155Mbit.
    #[arg(long = "set", value_name = "PARAM=VALUE")]
    pub set: Vec<String>,
    /// An axis: PARAM=V1,V2,... (repeatable; crossed in order).
    #[arg(long = "vary", value_name = "PARAM=V1,V2")]
    pub vary: Vec<String>,
    /// Parameters labelling table rows (comma-separated).
    #[arg(long, value_name = "PARAMS")]
    pub rows: Option<String>,
    /// Parameters labelling table columns (comma-separated).
    #[arg(long, value_name = "PARAMS")]
    pub cols: Option<String>,
    /// Measured time per cell.
    #[arg(long, value_name = "DURATION")]
    pub time: Option<String>,
    /// Leave out the model (and its calibration runs).
    #[arg(long)]
    pub no_model: bool,
    /// Size of the embedded LUN.
    #[arg(long, default_value = "512MiB", value_name = "SIZE")]
    pub lun_size: String,
    /// Write one JSON record per cell.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an HTML report with charts.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|x| x.trim().to_owned())
        .filter(|x| !x.is_empty())
        .collect()
}

fn build(a: &SweepArgs) -> Result<Sweep, String> {
    let mut f = match &a.file {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            SweepFile::parse(&text).map_err(|e| format!("{}: {e}", p.display()))?
        }
        None => SweepFile::default(),
    };
    for s in &a.set {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| format!("--set {s}: expected PARAM=VALUE"))?;
        f.set(k, v);
    }
    for s in &a.vary {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| format!("--vary {s}: expected PARAM=V1,V2"))?;
        f.vary(k, split_list(v));
    }
    if let Some(r) = &a.rows {
        f.rows = split_list(r);
    }
    if let Some(c) = &a.cols {
        f.cols = split_list(c);
    }
    if let Some(t) = &a.time {
        f.time = Some(t.clone());
    }
    let mut s = Sweep::from_file(&f)?;
    s.default_layout();
    Ok(s)
}

pub fn run(a: SweepArgs) -> Result<(), String> {
    let s = build(&a)?;
    let cells = s.cells()?;
    let mut lab = Lab::new(LabOptions {
        lun_size: parse_size(&a.lun_size)?,
        ..LabOptions::default()
    })?;
    eprintln!("sweep '{}': {} cells", s.title, cells.len());
    let cal = if a.no_model {
        None
    } else {
        eprintln!("calibrating host costs on loopback ...");
        Some(lab.calibrate(&cells, std::time::Duration::from_millis(300))?)
    };
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let results = sweep::run(&s, &mut lab, cal.as_ref(), &mut |done, all, r| {
        if tty {
            eprint!("\r\x1b[2K[{done}/{all}] {:.2} MB/s", r.measured.mb_per_s);
        }
    })?;
    if tty {
        eprint!("\r\x1b[2K");
    }
    outln!(
        "{} (MB/s{})",
        s.title,
        if cal.is_some() {
            "; model in parentheses"
        } else {
            ""
        }
    );
    out!("{}", sweep::table(&results, &s.rows, &s.cols));
    if let Some(p) = &a.json {
        let text = s.json(&results)?;
        std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    if let Some(p) = &a.html {
        std::fs::write(p, s.html(&results)).map_err(|e| format!("{}: {e}", p.display()))?;
        outln!("report: {}", p.display());
    }
    Ok(())
}
