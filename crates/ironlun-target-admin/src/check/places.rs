//! The places the daemon writes or reads besides its LUNs: the state
//! directory (made, with its parents, at the first save), the management
//! socket's directory (made at start), `admin_save_dir` (used as it is)
//! and the HTTP management API's token file (`ironlun_token`'s rules).
//! Whether this process may write there is asked of the kernel
//! (`faccessat` with the effective ids), which also says a read-only
//! file system refuses.

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use rustix::fs::{Access, AtFlags, CWD};

use super::Finding;
use ironlun_target_config::Config;

pub(super) fn check(cfg: &Config, out: &mut Vec<Finding>) {
    if let Some(d) = &cfg.state_dir {
        state_dir(d, out);
    }
    if let Some(p) = cfg.admin_socket() {
        admin_socket(&p, out);
    }
    if let Some(d) = &cfg.admin_save_dir {
        save_dir(d, out);
    }
    if let Some(h) = &cfg.admin_http {
        if let Err(e) = crate::Token::load(&h.token_file) {
            out.push(Finding::error(
                format!("admin_token_file {}", h.token_file.display()),
                e.to_string(),
            ));
        }
    }
}

/// What is at a path, as far as these checks care.
enum Found {
    Nothing,
    Dir,
    Socket,
    /// Something else: what it is, in words.
    Other(&'static str),
}

fn found(p: &Path) -> io::Result<Found> {
    let m = match std::fs::symlink_metadata(p) {
        Ok(m) => m,
        // A file where a directory above it should be: nothing here.
        Err(e)
            if e.kind() == io::ErrorKind::NotFound
                || e.raw_os_error() == Some(rustix::io::Errno::NOTDIR.raw_os_error()) =>
        {
            return Ok(Found::Nothing)
        }
        Err(e) => return Err(e),
    };
    let t = m.file_type();
    Ok(if t.is_dir() {
        Found::Dir
    } else if t.is_socket() {
        Found::Socket
    } else if t.is_symlink() {
        // A link to a directory is as good as the directory.
        match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => Found::Dir,
            Ok(_) => Found::Other("a symbolic link to something that is not a directory"),
            Err(_) => Found::Other("a symbolic link to nothing"),
        }
    } else if t.is_file() {
        Found::Other("a regular file")
    } else {
        Found::Other("neither a directory nor a socket")
    })
}

/// Whether this process may make entries in directory `d`; the error
/// says why not.
fn writable(d: &Path) -> Result<(), String> {
    rustix::fs::accessat(CWD, d, Access::WRITE_OK | Access::EXEC_OK, AtFlags::EACCESS)
        .map_err(|e| format!("cannot write in it: {e}"))
}

/// The nearest directory at or above `p` that is there, and whether
/// `p`'s own parent is among those missing.
fn nearest(p: &Path) -> (Option<&Path>, bool) {
    let mut missing_parent = false;
    let mut at = p.parent();
    let mut first = true;
    while let Some(d) = at {
        let d = if d.as_os_str().is_empty() {
            Path::new(".")
        } else {
            d
        };
        if std::fs::symlink_metadata(d).is_ok() {
            return (Some(d), missing_parent);
        }
        if first {
            missing_parent = true;
        }
        first = false;
        at = d.parent();
    }
    (None, missing_parent)
}

/// A directory that is not there: can the daemon make it (with its
/// parents)? An error if not; `ok` (a note or a warning) if so.
fn makeable(subject: &str, d: &Path, out: &mut Vec<Finding>, ok: impl FnOnce(bool) -> Finding) {
    let (above, parent_missing) = nearest(d);
    let Some(above) = above else {
        out.push(Finding::error(subject, "no directory above it exists"));
        return;
    };
    match found(above) {
        Ok(Found::Dir) => {}
        _ => {
            out.push(Finding::error(
                subject,
                format!("cannot be made: {} is not a directory", above.display()),
            ));
            return;
        }
    }
    match writable(above) {
        Ok(()) => out.push(ok(parent_missing)),
        Err(why) => out.push(Finding::error(
            subject,
            format!(
                "does not exist and cannot be made: {}: {why}",
                above.display()
            ),
        )),
    }
}

fn state_dir(d: &Path, out: &mut Vec<Finding>) {
    let subject = format!("state_dir {}", d.display());
    match found(d) {
        Ok(Found::Dir) => {
            if let Err(why) = writable(d) {
                out.push(Finding::error(
                    subject,
                    format!("{why}: the LUNs' saved reservations and sanitize records could not be kept"),
                ));
            }
        }
        Ok(Found::Nothing) => makeable(&subject.clone(), d, out, |parent_missing| {
            if parent_missing {
                Finding::warning(
                    subject,
                    "neither it nor its parent exists: both are made at the first save (a typo?)",
                )
            } else {
                Finding::note(subject, "does not exist yet: made at the first save")
            }
        }),
        Ok(Found::Socket) => out.push(Finding::error(subject, "not a directory")),
        Ok(Found::Other(what)) => {
            out.push(Finding::error(subject, format!("not a directory: {what}")))
        }
        Err(e) => out.push(Finding::error(subject, e.to_string())),
    }
}

fn admin_socket(p: &Path, out: &mut Vec<Finding>) {
    let subject = format!("admin_socket {}", p.display());
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match found(dir) {
        Ok(Found::Dir) => {
            if let Err(why) = writable(dir) {
                out.push(Finding::error(
                    subject.clone(),
                    format!("{}: {why}: the socket could not be made", dir.display()),
                ));
            }
        }
        Ok(Found::Nothing) => {
            return makeable(&subject.clone(), dir, out, |_| {
                Finding::note(
                    subject,
                    format!("{} does not exist yet: made at start", dir.display()),
                )
            })
        }
        Ok(_) => {
            return out.push(Finding::error(
                subject,
                format!("{} is not a directory", dir.display()),
            ))
        }
        Err(e) => return out.push(Finding::error(subject, e.to_string())),
    }
    // The directory is there: what is at the path itself.
    match crate::old_socket(p) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => out.push(Finding::note(
            subject,
            "a daemon answers on it now (the daemon of this configuration, if it runs; a second one started with it is refused)",
        )),
        Err(e) => out.push(Finding::error(subject, e.to_string())),
    }
}

fn save_dir(d: &Path, out: &mut Vec<Finding>) {
    let subject = format!("admin_save_dir {}", d.display());
    let problem = match found(d) {
        Ok(Found::Dir) => match writable(d) {
            Ok(()) => return,
            Err(why) => why,
        },
        Ok(Found::Nothing) => "does not exist: config save could not write there".to_owned(),
        Ok(_) => "not a directory".to_owned(),
        Err(e) => e.to_string(),
    };
    out.push(Finding::error(subject, problem));
}
