//! A host program carried into the guest: the program and every shared
//! library `ldd` resolves for it (the dynamic loader among them), as an
//! archive appended to the image under `/opt/NAME`. The guest runs it as
//! `/opt/NAME/run ARGS`, through the bundle's own loader and libraries, so
//! it needs nothing from the image's libraries and replaces none of them.
//!
//! **Owns:** reading `ldd`'s output and the bundle's layout. **Must not
//! know:** what the program is for.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cpio::Newc;
use crate::VmError;

/// The most a bundle may carry (Debian's fio with its engines' libraries
/// is about 80 MiB); the whole archive lives in memory and in the
/// guest's RAM.
pub const MAX_BYTES: u64 = 256 << 20;

/// One shared object as `ldd` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lib {
    /// The name the program asks for (`libaio.so.1`).
    pub soname: String,
    /// Where the host has it.
    pub path: PathBuf,
}

/// What `ldd` says a program needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// The dynamic loader (`None`: a static program).
    pub loader: Option<PathBuf>,
    pub libs: Vec<Lib>,
}

/// Reads `ldd`'s output. `name => /path (addr)` is a library, an absolute
/// path alone the loader, a name without a path (the vDSO) is skipped,
/// and `name => not found` is an error: the program could not start.
pub fn parse_ldd(text: &str) -> Result<Needs, String> {
    let mut needs = Needs::default();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("not a dynamic executable") || line.contains("statically linked") {
            return Ok(Needs::default());
        }
        let mut words = line.split_whitespace();
        let (Some(first), second, third) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        match (second, third) {
            (Some("=>"), Some("not")) => return Err(format!("{first} not found")),
            (Some("=>"), Some(p)) if p.starts_with('/') => needs.libs.push(Lib {
                soname: first.to_owned(),
                path: PathBuf::from(p),
            }),
            _ if first.starts_with('/') => needs.loader = Some(PathBuf::from(first)),
            _ => {}
        }
    }
    Ok(needs)
}

/// The script the guest runs the program through.
fn run_script(name: &str, dynamic: bool) -> String {
    let exe = format!("/opt/{name}/{name}");
    if dynamic {
        format!(
            "#!/bin/sh\nexec /opt/{name}/lib/ld.so --library-path /opt/{name}/lib {exe} \"$@\"\n"
        )
    } else {
        format!("#!/bin/sh\nexec {exe} \"$@\"\n")
    }
}

/// The archive for `name` from its files: the program and `needs`.
fn archive(name: &str, exe: &Path, needs: &Needs) -> Result<Vec<u8>, VmError> {
    let mut files: Vec<(String, &Path)> = vec![(format!("opt/{name}/{name}"), exe)];
    if let Some(l) = &needs.loader {
        files.push((format!("opt/{name}/lib/ld.so"), l));
    }
    for l in &needs.libs {
        files.push((format!("opt/{name}/lib/{}", l.soname), &l.path));
    }
    let mut total = 0u64;
    let mut a = Newc::new();
    for d in [
        "opt".to_owned(),
        format!("opt/{name}"),
        format!("opt/{name}/lib"),
    ] {
        a.dir(&d, 0o755);
    }
    for (at, from) in files {
        let data = std::fs::read(from).map_err(|e| VmError::io(from, e))?;
        total += data.len() as u64;
        if total > MAX_BYTES {
            return Err(VmError::Bundle(format!(
                "{name} and its libraries pass {} MiB",
                MAX_BYTES >> 20
            )));
        }
        a.file(&at, 0o755, &data);
    }
    let script = run_script(name, needs.loader.is_some());
    a.file(&format!("opt/{name}/run"), 0o755, script.as_bytes());
    Ok(a.finish())
}

/// The host's `name` (from Debian package `package`) and its libraries as
/// an archive to append to the image (`Boot::extra`).
pub fn host_program(name: &str, package: &str) -> Result<Vec<u8>, VmError> {
    let ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !ok {
        return Err(VmError::Bundle(format!("{name:?}: not a program name")));
    }
    let exe = crate::find_in_path(name).ok_or_else(|| VmError::MissingTool {
        tool: name.to_owned(),
        package: package.to_owned(),
    })?;
    let ldd = crate::find_in_path("ldd").ok_or_else(|| VmError::MissingTool {
        tool: "ldd".to_owned(),
        package: "libc-bin".to_owned(),
    })?;
    let out = Command::new(ldd)
        .arg(&exe)
        .output()
        .map_err(|e| VmError::io(Path::new("ldd"), e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let needs = parse_ldd(&text).map_err(|e| VmError::Bundle(format!("{name}: {e}")))?;
    archive(name, &exe, &needs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIO: &str = "\tlinux-vdso.so.1 (0x00007ffd)\n\
        \tlibaio.so.1 => /lib/x86_64-linux-gnu/libaio.so.1 (0x00007f1)\n\
        \tlibceph-common.so.2 => /usr/lib/x86_64-linux-gnu/ceph/libceph-common.so.2 (0x00007f2)\n\
        \t/lib64/ld-linux-x86-64.so.2 (0x00007f3)\n";

    #[test]
    fn ldd_gives_the_libraries_and_the_loader() {
        let n = parse_ldd(FIO).unwrap();
        assert_eq!(
            n.loader.as_deref(),
            Some(Path::new("/lib64/ld-linux-x86-64.so.2"))
        );
        let names: Vec<&str> = n.libs.iter().map(|l| l.soname.as_str()).collect();
        assert_eq!(names, ["libaio.so.1", "libceph-common.so.2"]);
        assert_eq!(
            n.libs[1].path,
            Path::new("/usr/lib/x86_64-linux-gnu/ceph/libceph-common.so.2")
        );
    }

    #[test]
    fn a_missing_library_is_an_error_and_a_static_program_needs_nothing() {
        let e = parse_ldd("\tlibrbd.so.1 => not found\n").unwrap_err();
        assert_eq!(e, "librbd.so.1 not found");
        assert_eq!(
            parse_ldd("\tnot a dynamic executable\n").unwrap(),
            Needs::default()
        );
    }

    #[test]
    fn the_run_script_uses_the_bundles_loader() {
        assert_eq!(
            run_script("fio", true),
            "#!/bin/sh\nexec /opt/fio/lib/ld.so --library-path /opt/fio/lib /opt/fio/fio \"$@\"\n"
        );
        assert!(run_script("fio", false).contains("exec /opt/fio/fio \"$@\""));
    }

    #[test]
    fn the_archive_holds_its_directories_before_its_files() {
        let dir = std::env::temp_dir().join(format!("ironlun-vm-bundle-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let exe = dir.join("prog");
        let lib = dir.join("libx.so.1");
        std::fs::write(&exe, b"EXE").unwrap();
        std::fs::write(&lib, b"LIB").unwrap();
        let needs = Needs {
            loader: Some(lib.clone()),
            libs: vec![Lib {
                soname: "libx.so.1".into(),
                path: lib,
            }],
        };
        let a = archive("prog", &exe, &needs).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let text = String::from_utf8_lossy(&a);
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} missing"));
        assert!(at("opt\0") < at("opt/prog\0"));
        assert!(at("opt/prog/lib\0") < at("opt/prog/lib/ld.so\0"));
        assert!(at("opt/prog/lib/libx.so.1\0") < at("opt/prog/run\0"));
    }
}
