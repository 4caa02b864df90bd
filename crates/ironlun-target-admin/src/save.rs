//! `config save`: where it may write, and the write. A client names at
//! most which of the allowed files: the daemon's own configuration file
//! (the default), or `NAME.toml` directly in `admin_save_dir` when that
//! is set. Any other path is refused, so a token holder cannot make the
//! daemon write its configuration (mode 0600, but its text chosen by the
//! client through `apply`) over a file of the client's choosing.

use std::path::{Path, PathBuf};

use super::ops::{Answer, OpError};
use ironlun_target::live::Live;

/// Saves the running configuration to `requested` (default: the
/// daemon's file) if it is allowed; with `dry_run`, only says where.
pub(super) fn save(
    live: &Live,
    requested: Option<PathBuf>,
    dry_run: bool,
) -> Result<Answer, OpError> {
    let own = live.path();
    let dir = live.config().admin_save_dir;
    let path = destination(requested.as_deref(), own.as_deref(), dir.as_deref())?;
    if dry_run {
        return Ok(Answer {
            changes: Vec::new(),
            dry_run,
            note: Some(format!("would save to {}", path.display())),
        });
    }
    // Through the running configuration, which then knows whether its
    // own file has every live change.
    live.save(Some(path.clone()))
        .map_err(|e| OpError::new(500, e.to_string()))?;
    Ok(Answer {
        changes: Vec::new(),
        dry_run,
        note: Some(format!("saved to {}", path.display())),
    })
}

/// Where a save to `requested` goes, given the daemon's file `own` and
/// the save directory `dir`; a refusal says what is allowed.
fn destination(
    requested: Option<&Path>,
    own: Option<&Path>,
    dir: Option<&Path>,
) -> Result<PathBuf, OpError> {
    let Some(p) = requested else {
        return own.map(Path::to_owned).ok_or_else(|| {
            OpError::new(
                422,
                match dir {
                    Some(d) => format!(
                        "the daemon was started without a file: give a path NAME.toml in {}",
                        d.display()
                    ),
                    None => "the daemon was started without a file and without admin_save_dir: there is nowhere to save to".to_owned(),
                },
            )
        });
    };
    if !p.is_absolute() {
        return Err(OpError::new(
            422,
            format!("{}: give an absolute path", p.display()),
        ));
    }
    if own.is_some_and(|o| same_place(p, o)) {
        return Ok(own.map_or_else(|| p.to_owned(), Path::to_owned));
    }
    if let Some(d) = dir {
        if let Some(inside) = in_save_dir(p, d) {
            return Ok(inside);
        }
    }
    Err(OpError::new(403, refusal(p, own, dir)))
}

fn refusal(p: &Path, own: Option<&Path>, dir: Option<&Path>) -> String {
    let mut allowed = Vec::new();
    if let Some(o) = own {
        allowed.push(format!("the daemon's own file {}", o.display()));
    }
    if let Some(d) = dir {
        allowed.push(format!(
            "NAME.toml directly in admin_save_dir {}",
            d.display()
        ));
    }
    if allowed.is_empty() {
        allowed.push("nothing: the daemon has neither a file nor admin_save_dir".to_owned());
    }
    format!(
        "{}: config save writes only {}",
        p.display(),
        allowed.join(" or ")
    )
}

/// Whether `a` and `b` name one place: the same file name in the same
/// directory (symbolic links in the directories resolved).
fn same_place(a: &Path, b: &Path) -> bool {
    match (split(a), split(b)) {
        (Some((da, na)), Some((db, nb))) => na == nb && da == db,
        _ => false,
    }
}

/// `p` if it is a plain `NAME.toml` (not hidden) directly in `dir`.
fn in_save_dir(p: &Path, dir: &Path) -> Option<PathBuf> {
    let (parent, name) = split(p)?;
    let dir = dir.canonicalize().ok()?;
    let plain = !name.to_string_lossy().starts_with('.')
        && Path::new(&name).extension().is_some_and(|e| e == "toml");
    (parent == dir && plain).then(|| dir.join(name))
}

/// The canonical directory of `p` and its file name.
fn split(p: &Path) -> Option<(PathBuf, std::ffi::OsString)> {
    let name = p.file_name()?.to_owned();
    let parent = p.parent()?.canonicalize().ok()?;
    Some((parent, name))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    struct Place {
        _tmp: tempfile::TempDir,
        own: PathBuf,
        dir: PathBuf,
        root: PathBuf,
    }

    fn place() -> Place {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let dir = root.join("saved");
        std::fs::create_dir(&dir).unwrap();
        std::fs::create_dir(root.join("etc")).unwrap();
        Place {
            _tmp: tmp,
            own: root.join("etc/ironlun.toml"),
            dir,
            root,
        }
    }

    fn refused(r: Result<PathBuf, OpError>) -> (u16, String) {
        let e = r.err().unwrap();
        (e.status, e.message)
    }

    #[test]
    fn without_a_path_the_daemons_own_file() {
        let p = place();
        assert_eq!(destination(None, Some(&p.own), None).unwrap(), p.own);
        let (status, m) = refused(destination(None, None, None));
        assert_eq!(status, 422);
        assert!(m.contains("nowhere to save"), "{m}");
        let (_, m) = refused(destination(None, None, Some(&p.dir)));
        assert!(m.contains("NAME.toml in"), "{m}");
    }

    #[test]
    fn the_daemons_own_file_by_any_spelling() {
        let p = place();
        let own = Some(p.own.as_path());
        assert_eq!(destination(Some(&p.own), own, None).unwrap(), p.own);
        let round = p.root.join("saved/../etc/ironlun.toml");
        assert_eq!(destination(Some(&round), own, None).unwrap(), p.own);
        let link = p.root.join("link");
        std::os::unix::fs::symlink(p.root.join("etc"), &link).unwrap();
        let via = link.join("ironlun.toml");
        assert_eq!(destination(Some(&via), own, None).unwrap(), p.own);
    }

    #[test]
    fn any_other_path_is_refused() {
        let p = place();
        let own = Some(p.own.as_path());
        for other in [
            p.root.join("etc/other.toml"),
            p.root.join("etc/ironlun.toml.d"),
            PathBuf::from("/etc/passwd"),
            PathBuf::from("/root/.ssh/authorized_keys"),
            p.dir.join("x.toml"),
        ] {
            let (status, m) = refused(destination(Some(&other), own, None));
            assert_eq!(status, 403, "{other:?}");
            assert!(m.contains("writes only the daemon's own file"), "{m}");
        }
        let (status, m) = refused(destination(Some(Path::new("rel.toml")), own, None));
        assert_eq!(status, 422);
        assert!(m.contains("absolute"), "{m}");
    }

    #[test]
    fn a_plain_toml_name_directly_in_the_save_dir() {
        let p = place();
        let (own, dir) = (Some(p.own.as_path()), Some(p.dir.as_path()));
        let ok = p.dir.join("backup.toml");
        assert_eq!(destination(Some(&ok), own, dir).unwrap(), ok);
        for bad in [
            p.dir.join("backup.txt"),
            p.dir.join(".hidden.toml"),
            p.dir.join("sub/backup.toml"),
            p.dir.join("../escape.toml"),
            p.root.join("etc/other.toml"),
        ] {
            let (status, m) = refused(destination(Some(&bad), own, dir));
            assert_eq!(status, 403, "{bad:?}");
            assert!(m.contains("NAME.toml directly in admin_save_dir"), "{m}");
        }
    }
}
