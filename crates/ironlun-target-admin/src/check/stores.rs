//! Each LUN's store as opening it would find it: a file or device
//! through `ironlun_backend::probe` (the open's own refusals, what it
//! would create or grow, and the process that serves it now, which is
//! information: `--check` is often run beside that daemon); the block
//! rule of the logical unit (a store smaller than one block serves
//! nothing, the bytes past the last whole block are not served); an RBD
//! LUN's configuration and keyring files. An RBD cluster is not
//! contacted.

use std::path::Path;

use ironlun_backend::probe::{probe_block, probe_file, Change, Probe};
use ironlun_units::format_size;
use rustix::fs::{Access, AtFlags, CWD};

use super::Finding;
use ironlun_target_config::{BackendSpec, Config, LunConfig, RbdSpec};

pub(super) fn check(cfg: &Config, out: &mut Vec<Finding>) {
    for t in &cfg.targets {
        for l in &t.luns {
            let subject = format!("target {} LUN {}", t.name, l.number);
            lun(&subject, l, out);
        }
    }
}

fn lun(subject: &str, l: &LunConfig, out: &mut Vec<Finding>) {
    if let (Some(_), BackendSpec::File { path, .. }) = (&l.schedule, &l.spec.backend) {
        schedule_on_file(subject, path, out);
    }
    let read_only = l.spec.read_only;
    let spec = &l.spec.backend;
    let probed = match spec {
        BackendSpec::File { path, .. } => probe_file(path, &spec.file_options(read_only)),
        BackendSpec::Block { path, .. } => probe_block(path, &spec.file_options(read_only)),
        BackendSpec::Rbd(r) => return rbd(subject, r, out),
        BackendSpec::Null { .. } | BackendSpec::Ram { .. } => return,
    };
    match probed {
        Ok(p) => found(subject, &p, l.spec.block_size, out),
        Err(e) => out.push(Finding::error(subject, e.to_string())),
    }
}

/// A snapshot schedule on a file LUN: its snapshots are reflinks, so a
/// file system that has none fails every run (a warning); on XFS the
/// first run finds whether it was made with reflink=1.
fn schedule_on_file(subject: &str, path: &std::path::Path, out: &mut Vec<Finding>) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let fs = ironlun_backend::snapshot::reflink::fs_name(dir);
    if fs != "xfs" && fs != "btrfs" {
        out.push(Finding::warning(
            subject,
            format!("snapshot_every: the file is on {fs}, which cannot share a file's blocks: every scheduled snapshot will fail (XFS with reflink=1 or btrfs can)"),
        ));
    }
}

/// What the probe of a file or device found.
fn found(subject: &str, p: &Probe, block_size: u32, out: &mut Vec<Finding>) {
    let bs = u64::from(block_size);
    if p.size < bs {
        out.push(Finding::error(
            subject,
            format!("{} bytes hold no {block_size}-byte block", p.size),
        ));
    } else if p.size % bs != 0 {
        out.push(Finding::warning(
            subject,
            format!(
                "{} bytes are not whole {block_size}-byte blocks: the last {} are not served",
                p.size,
                p.size % bs
            ),
        ));
    }
    let size = format_size(p.size);
    match p.change {
        Some(Change::Create) => {
            out.push(Finding::note(subject, format!("the file is made, {size}")));
        }
        Some(Change::Size) => {
            out.push(Finding::note(
                subject,
                format!("the empty file is given its size, {size}"),
            ));
        }
        Some(Change::Grow { from }) => out.push(Finding::note(
            subject,
            format!(
                "the file grows from {} to {size} (,grow)",
                format_size(from)
            ),
        )),
        None => {}
    }
    if let Some(h) = &p.holder {
        out.push(Finding::note(
            subject,
            format!("in use by {h}, which holds its lock (the daemon of this configuration, if it runs: another daemon would be refused it)"),
        ));
    }
}

/// An RBD LUN: the files its spec names must be readable (librados
/// reads them when the image opens); the cluster itself is not
/// contacted.
fn rbd(subject: &str, r: &RbdSpec, out: &mut Vec<Finding>) {
    for (key, file) in [("conf", &r.conf), ("keyring", &r.keyring)] {
        if let Some(f) = file {
            if let Err(why) = readable(f) {
                out.push(Finding::error(
                    subject,
                    format!("{key}={}: {why}", f.display()),
                ));
            }
        }
    }
    out.push(Finding::note(
        subject,
        format!(
            "the Ceph cluster is not contacted: whether {}/{} opens is known at start",
            r.pool, r.image
        ),
    ));
}

fn readable(f: &Path) -> Result<(), String> {
    match std::fs::metadata(f) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err("not a regular file".to_owned()),
        Err(e) => return Err(e.to_string()),
    }
    rustix::fs::accessat(CWD, f, Access::READ_OK, AtFlags::EACCESS)
        .map_err(|e| format!("cannot read it: {e}"))
}
