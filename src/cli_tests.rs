//! The command line's definition as a whole: every command and argument
//! described, versions everywhere, errors on one line that name what they
//! are about.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use clap::error::ErrorKind;
use clap::{Command, CommandFactory, Parser};

use super::{one_line, Cli};

/// Every command below `cmd` (clap's generated `help` left out), with
/// its path.
fn commands(cmd: &Command, path: &str, out: &mut Vec<(String, Command)>) {
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        let p = format!("{path} {}", sub.get_name());
        out.push((p.clone(), sub.clone()));
        commands(sub, &p, out);
    }
}

fn all() -> Vec<(String, Command)> {
    let mut cli = Cli::command();
    cli.build();
    let mut out = Vec::new();
    commands(&cli, "ironlun", &mut out);
    out
}

#[test]
fn the_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn every_command_has_a_description_and_every_positional_a_help() {
    let all = all();
    assert!(all.len() > 30, "{}", all.len());
    for (path, cmd) in &all {
        let about = cmd.get_about().map(ToString::to_string).unwrap_or_default();
        assert!(!about.trim().is_empty(), "{path}: no description");
        for arg in cmd.get_positionals() {
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            assert!(
                !help.trim().is_empty(),
                "{path}: positional {} has no help",
                arg.get_id()
            );
        }
    }
}

#[test]
fn every_command_answers_version() {
    for (path, _) in all() {
        let mut argv: Vec<&str> = path.split(' ').collect();
        argv.push("--version");
        let e = Cli::try_parse_from(&argv)
            .err()
            .unwrap_or_else(|| panic!("{path}"));
        assert_eq!(e.kind(), ErrorKind::DisplayVersion, "{path}: {e}");
    }
}

/// Read-only admin commands show no flag that changes something.
#[test]
fn state_and_sessions_show_no_change_flags() {
    for path in [
        "ironlun admin state",
        "ironlun admin sessions",
        "ironlun admin config show",
    ] {
        let (_, cmd) = all().into_iter().find(|(p, _)| p == path).unwrap();
        let shown: Vec<String> = cmd
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(str::to_owned))
            .collect();
        for flag in ["diff", "force", "dry-run"] {
            assert!(!shown.iter().any(|s| s == flag), "{path} shows --{flag}");
        }
    }
    for path in ["ironlun admin target remove", "ironlun admin apply"] {
        let (_, cmd) = all().into_iter().find(|(p, _)| p == path).unwrap();
        let longs: Vec<&str> = cmd.get_arguments().filter_map(|a| a.get_long()).collect();
        assert!(
            longs.contains(&"diff") && longs.contains(&"force"),
            "{path}"
        );
    }
}

fn error_line(argv: &[&str]) -> String {
    one_line(&Cli::try_parse_from(argv).err().unwrap())
}

#[test]
fn errors_name_what_is_missing_and_suggest() {
    let e = error_line(&["ironlun", "admin", "lun", "resize", "iqn.2026-11.test:t"]);
    assert!(e.contains("<LUN>") && e.contains("<SIZE>"), "{e}");
    assert!(e.ends_with("(see ironlun admin lun resize --help)"), "{e}");
    let e = error_line(&["ironlun", "targt"]);
    assert!(e.contains("'target'"), "{e}");
    let e = error_line(&["ironlun", "target", "--listn", "x"]);
    assert!(e.contains("'--listen'"), "{e}");
    assert!(!e.contains('\n'), "{e}");
}

/// `--diff` and `--force` after the command, and before it as the docs
/// and the daemon's messages write them (`admin --force config reload`).
#[test]
fn change_flags_parse_before_and_after_the_command() {
    for argv in [
        &["ironlun", "admin", "--diff", "config", "reload"][..],
        &["ironlun", "admin", "config", "reload", "--diff"],
        &["ironlun", "admin", "--force", "config", "reload"],
        &[
            "ironlun",
            "admin",
            "target",
            "remove",
            "iqn.2026-11.test:t",
            "--force",
        ],
        &["ironlun", "admin", "--dry-run", "apply", "f.toml"],
        &["ironlun", "admin", "apply", "f.toml", "--dry-run"],
    ] {
        assert!(Cli::try_parse_from(argv).is_ok(), "{argv:?}");
    }
}
