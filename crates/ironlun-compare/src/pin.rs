//! CPU sets: the machine split into a target half and a client half, and
//! a program started on one of them (`taskset -c LIST PROGRAM …`, which
//! execs the program, so the child's PID is the program's own and its
//! CPU can be read from /proc as before).

use std::ffi::OsStr;
use std::process::Command;

/// Disjoint CPU sets for the target and the client.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Split {
    /// CPUs the target runs on (a `taskset -c` list).
    pub target: String,
    /// CPUs the client runs on.
    pub client: String,
    /// How many CPUs each side has.
    pub target_cpus: usize,
    pub client_cpus: usize,
}

impl Split {
    /// The first half of `cpus` (rounded down, at least one) for the
    /// target, the rest for the client; `None` on one CPU, where there is
    /// nothing to split.
    pub fn halves(cpus: usize) -> Option<Split> {
        if cpus < 2 {
            return None;
        }
        let half = cpus / 2;
        Some(Split {
            target: range(0, half),
            client: range(half, cpus),
            target_cpus: half,
            client_cpus: cpus - half,
        })
    }
}

/// The CPUs `lo..hi` as a `taskset -c` list.
fn range(lo: usize, hi: usize) -> String {
    if hi - lo == 1 {
        lo.to_string()
    } else {
        format!("{lo}-{}", hi - 1)
    }
}

/// A command that runs `program` on `cpus` (a `taskset -c` list), or
/// anywhere when `None`.
pub fn command(program: impl AsRef<OsStr>, cpus: Option<&str>) -> Command {
    match cpus {
        Some(list) => {
            let mut c = Command::new("taskset");
            c.args(["-c", list]).arg(program);
            c
        }
        None => Command::new(program),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_are_disjoint_and_cover_the_machine() {
        assert_eq!(Split::halves(1), None);
        let two = Split::halves(2).unwrap();
        assert_eq!((two.target.as_str(), two.client.as_str()), ("0", "1"));
        let sixteen = Split::halves(16).unwrap();
        assert_eq!(
            (sixteen.target.as_str(), sixteen.client.as_str()),
            ("0-7", "8-15")
        );
        let three = Split::halves(3).unwrap();
        assert_eq!((three.target.as_str(), three.client.as_str()), ("0", "1-2"));
        assert_eq!((three.target_cpus, three.client_cpus), (1, 2));
    }

    #[test]
    fn a_pinned_command_goes_through_taskset() {
        let c = command("tgtd", Some("0-3"));
        assert_eq!(c.get_program(), "taskset");
        let args: Vec<_> = c.get_args().collect();
        assert_eq!(args, ["-c", "0-3", "tgtd"]);
        assert_eq!(command("tgtd", None).get_program(), "tgtd");
    }
}
