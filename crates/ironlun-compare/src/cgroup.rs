//! A memory limit on one process, as a study limited its target's RAM: a
//! cgroup of our own under the memory hierarchy, its limit set, the
//! process moved in, and the group removed when the limit is dropped.
//!
//! cgroup v2 (`memory.max`) is used where its hierarchy offers the memory
//! controller; on a hybrid host whose memory controller is still on a v1
//! hierarchy, v1's `memory.limit_in_bytes`. Where neither is writable the
//! caller gets the reason, to print: a limit is never skipped silently.
//! The file names are the kernel's (Documentation/admin-guide/cgroup-v2.rst
//! "memory.max"; cgroup-v1/memory.rst "memory.limit_in_bytes").

use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

/// Which memory hierarchy, at which mount point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hierarchy {
    /// A cgroup2 mount whose root offers the memory controller.
    V2(PathBuf),
    /// A v1 hierarchy with the memory controller attached.
    V1(PathBuf),
}

impl Hierarchy {
    pub fn root(&self) -> &Path {
        match self {
            Hierarchy::V2(p) | Hierarchy::V1(p) => p,
        }
    }

    /// The file that holds a group's limit.
    pub fn limit_file(&self) -> &'static str {
        match self {
            Hierarchy::V2(_) => "memory.max",
            Hierarchy::V1(_) => "memory.limit_in_bytes",
        }
    }

    /// The file with the most memory the group has used.
    pub fn peak_file(&self) -> &'static str {
        match self {
            Hierarchy::V2(_) => "memory.peak",
            Hierarchy::V1(_) => "memory.max_usage_in_bytes",
        }
    }

    /// "cgroup v2 memory.max" or "cgroup v1 memory.limit_in_bytes".
    pub fn describe(&self) -> String {
        let v = match self {
            Hierarchy::V2(_) => "v2",
            Hierarchy::V1(_) => "v1",
        };
        format!("cgroup {v} {}", self.limit_file())
    }
}

/// The memory hierarchy to use, from the text of /proc/self/mounts and
/// a reader of a v2 root's `cgroup.controllers`: v2 when a cgroup2 mount
/// offers `memory`, else a v1 mount with the `memory` option; `Err` says
/// why there is none.
pub fn memory_hierarchy(
    mounts: &str,
    controllers: impl Fn(&Path) -> Option<String>,
) -> Result<Hierarchy, String> {
    let mut v2_without = None;
    let mut v1 = None;
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(at), Some(fstype), Some(options)) = (f.get(1), f.get(2), f.get(3)) else {
            continue;
        };
        let at = PathBuf::from(at);
        match *fstype {
            "cgroup2" => {
                let offers =
                    controllers(&at).is_some_and(|c| c.split_whitespace().any(|x| x == "memory"));
                if offers {
                    return Ok(Hierarchy::V2(at));
                }
                v2_without = Some(at);
            }
            "cgroup" if options.split(',').any(|o| o == "memory") => {
                v1.get_or_insert(at);
            }
            _ => {}
        }
    }
    match (v1, v2_without) {
        (Some(p), _) => Ok(Hierarchy::V1(p)),
        (None, Some(p)) => Err(format!(
            "the cgroup v2 hierarchy at {} does not offer the memory controller, and no v1 hierarchy has it",
            p.display()
        )),
        (None, None) => Err("no cgroup hierarchy is mounted".into()),
    }
}

/// The host's memory hierarchy.
pub fn host_hierarchy() -> Result<Hierarchy, String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")
        .map_err(|e| format!("/proc/self/mounts: {e}"))?;
    memory_hierarchy(&mounts, |root| {
        std::fs::read_to_string(root.join("cgroup.controllers")).ok()
    })
}

/// A process under a memory limit; the group is removed on drop (once
/// the process has left it: end the process first).
pub struct MemoryLimit {
    dir: PathBuf,
    parent: PathBuf,
    peak_file: &'static str,
    pub bytes: u64,
    pub how: String,
}

impl MemoryLimit {
    /// Puts `pid` in a new group `name` under `h` limited to `bytes`.
    pub fn apply(h: &Hierarchy, name: &str, pid: u32, bytes: u64) -> Result<MemoryLimit, String> {
        let root = h.root().to_owned();
        if let Hierarchy::V2(_) = h {
            enable_memory(&root)?;
        }
        let dir = root.join(name);
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let limit = MemoryLimit {
            dir,
            parent: root,
            peak_file: h.peak_file(),
            bytes,
            how: h.describe(),
        };
        limit.write(h.limit_file(), &bytes.to_string())?;
        limit.write("cgroup.procs", &pid.to_string())?;
        Ok(limit)
    }

    fn write(&self, file: &str, value: &str) -> Result<(), String> {
        let p = self.dir.join(file);
        std::fs::write(&p, value).map_err(|e| format!("{} <- {value}: {e}", p.display()))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The most memory (page cache included) the group has used, bytes:
    /// evidence that the limit was reached, or not.
    pub fn peak(&self) -> Option<u64> {
        std::fs::read_to_string(self.dir.join(self.peak_file))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

/// A v2 root's children get `memory.max` only with `+memory` in its
/// `cgroup.subtree_control`.
fn enable_memory(root: &Path) -> Result<(), String> {
    let p = root.join("cgroup.subtree_control");
    let on = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    if on.split_whitespace().any(|c| c == "memory") {
        return Ok(());
    }
    std::fs::write(&p, "+memory").map_err(|e| format!("{} <- +memory: {e}", p.display()))
}

impl Drop for MemoryLimit {
    fn drop(&mut self) {
        // Anything still inside goes back to the parent, then the group
        // goes (the kernel refuses while a task is in it: retry briefly).
        let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace() {
            let _ = std::fs::write(self.parent.join("cgroup.procs"), pid);
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
";

    #[test]
    fn v2_is_chosen_where_it_offers_memory() {
        let m = "cgroup2 /sys/fs/cgroup cgroup2 rw,nsdelegate 0 0\n";
        let h = memory_hierarchy(m, |_| Some("cpuset cpu io memory pids".into())).unwrap();
        assert_eq!(h, Hierarchy::V2("/sys/fs/cgroup".into()));
        assert_eq!(h.limit_file(), "memory.max");
        // A hybrid host with memory on v2 prefers v2 too.
        let h = memory_hierarchy(HYBRID, |_| Some("memory".into())).unwrap();
        assert_eq!(h, Hierarchy::V2("/sys/fs/cgroup/unified".into()));
    }

    #[test]
    fn a_hybrid_host_falls_back_to_the_v1_memory_hierarchy() {
        let h = memory_hierarchy(HYBRID, |_| Some("hugetlb".into())).unwrap();
        assert_eq!(h, Hierarchy::V1("/sys/fs/cgroup/memory".into()));
        assert_eq!(h.describe(), "cgroup v1 memory.limit_in_bytes");
    }

    #[test]
    fn without_a_memory_controller_the_reason_is_given() {
        let m = "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n";
        let e = memory_hierarchy(m, |_| Some("hugetlb".into())).unwrap_err();
        assert!(e.contains("does not offer the memory controller"), "{e}");
        let e = memory_hierarchy("proc /proc proc rw 0 0\n", |_| None).unwrap_err();
        assert_eq!(e, "no cgroup hierarchy is mounted");
    }

    #[test]
    fn a_limit_in_a_plain_directory_writes_the_files_and_is_removed() {
        // A directory standing in for a v1 root: its files are plain ones.
        let tmp = tempfile::tempdir().unwrap();
        let h = Hierarchy::V1(tmp.path().to_owned());
        let l = MemoryLimit::apply(&h, "ironlun-test", 4242, 64 << 20).unwrap();
        let dir = l.dir().to_owned();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(read("memory.limit_in_bytes"), "67108864");
        assert_eq!(read("cgroup.procs"), "4242");
        assert_eq!(l.peak(), None);
        std::fs::write(dir.join("memory.max_usage_in_bytes"), "1234\n").unwrap();
        assert_eq!(l.peak(), Some(1234));
        // A second group of the same name is refused, not merged.
        assert!(MemoryLimit::apply(&h, "ironlun-test", 1, 1).is_err());
        // The kernel's control files vanish with the group; plain ones
        // must go first for the drop's rmdir to succeed.
        for f in [
            "memory.limit_in_bytes",
            "cgroup.procs",
            "memory.max_usage_in_bytes",
        ] {
            std::fs::remove_file(dir.join(f)).unwrap();
        }
        drop(l);
        assert!(!dir.exists());
    }
}
