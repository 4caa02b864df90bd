//! `ironlun completions` and `ironlun man`: shell completion scripts and
//! manual pages made from the clap definitions themselves, so they never
//! disagree with the program. The Debian package installs both
//! (scripts/deb-assets writes them before `cargo deb`; docs/admin.md,
//! "Service").

use std::path::PathBuf;

use clap_complete::Shell;

use crate::runtime::{usage, Failure};

#[derive(clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete for: bash, zsh, fish, elvish or powershell.
    #[arg(value_name = "SHELL")]
    pub shell: Shell,
}

#[derive(clap::Args)]
pub struct ManArgs {
    /// The directory to write the pages in (created if missing):
    /// ironlun.1, and ironlun-COMMAND[-SUBCOMMAND].1 for each command.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// The completion script on standard output.
pub fn completions(a: CompletionsArgs, mut cli: clap::Command) -> Result<(), Failure> {
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut cli, "ironlun", &mut script);
    let script = String::from_utf8(script).map_err(|e| format!("completion script: {e}"))?;
    out!("{script}");
    Ok(())
}

/// Every page, written into `--out`; their paths on standard output.
pub fn man(a: ManArgs, cli: clap::Command) -> Result<(), Failure> {
    let dir = &a.out;
    let fail = |e: std::io::Error| format!("{}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(|e| usage(fail(e)))?;
    clap_mangen::generate_to(cli, dir).map_err(fail)?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(fail)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "1"))
        .collect();
    pages.sort();
    for p in pages {
        outln!("{}", p.display());
    }
    Ok(())
}
