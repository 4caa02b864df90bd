//! What a LU's state files hold when it opens, and what happens when
//! one of them does not parse: the LU alone goes offline (NOT READY,
//! MANUAL INTERVENTION REQUIRED, `ironlun_scsi::offline`), never the
//! daemon; the file is kept aside for a person as
//! `NAME.corrupt-<unix time>` and a marker takes its place, so the LU
//! stays offline across restarts until someone decides what the state
//! is; the reason is logged, shown by `ironlun admin state` and counted
//! by `ironlun_lun_offline`. A person brings the LU back by putting a
//! repaired file in place of the marker, or removing the marker (the LU
//! then starts without that state), and then SIGHUP or `ironlun admin
//! lun online` ([`bring_back`]); docs/admin.md says so.
//!
//! Files under the names of before (`state_name.rs`) are renamed here,
//! when exactly one configured target could own them; when several
//! could, none takes the file and their LUs stay offline until a person
//! renames it for the one it belongs to. The former names kept the case
//! of the name as configured, so they are looked for ignoring ASCII case
//! ([`legacy`]); two files that match are the same kind of puzzle.

use std::path::Path;
use std::sync::Arc;

use ironlun_scsi::reservations::MAX_STATE_BYTES as MAX_PR_BYTES;
use ironlun_scsi::{LogicalUnit, PrState, SanitizeRecord, MAX_SANITIZE_RECORD_BYTES};
use tracing::{error, info, warn};

use crate::config::{Config, NameKey, TargetConfig};
use crate::prstore::FilePrStore;
use crate::sanitize_store::{self, FileSanitizeStore};
use crate::state_file::StateFile;
use crate::state_name;
pub use legacy::LegacyNames;

mod legacy;

/// The state directory, and the targets of the configuration in force
/// (to tell whether a file under its former name is one target's).
#[derive(Clone, Copy)]
pub struct StateDir<'a> {
    pub dir: &'a Path,
    pub targets: &'a [Arc<TargetConfig>],
    /// The directory's names, read once for many LUs; `None`: read when
    /// a LU needs them.
    pub names: Option<&'a LegacyNames>,
}

/// `cfg`'s state directory, if it has one.
pub fn state_dir(cfg: &Config) -> Option<StateDir<'_>> {
    Some(StateDir {
        dir: cfg.state_dir.as_deref()?,
        targets: &cfg.targets,
        names: None,
    })
}

impl<'a> StateDir<'a> {
    /// The same, with the directory's names read once in `names` for
    /// every LU opened through it.
    pub fn with_names(self, names: &'a LegacyNames) -> StateDir<'a> {
        StateDir {
            names: Some(names),
            ..self
        }
    }
}

/// What a LU's files held: its saved persistent reservations and its
/// sanitize record, each possibly absent.
#[derive(Debug, Default)]
pub struct Found {
    pub pr: Option<PrState>,
    pub sanitize: Option<SanitizeRecord>,
}

/// A LU's stores, and what they held or why the LU must stay offline.
pub struct Opened {
    pub pr: FilePrStore,
    pub sanitize: FileSanitizeStore,
    pub found: Result<Found, String>,
}

/// One kind of state: its file name prefix, what the log calls it, the
/// longest file, its reader, the first line of its files of version 1
/// and the current form of what one held.
struct Kind<T> {
    prefix: &'static str,
    what: &'static str,
    max: usize,
    decode: fn(&str) -> Result<T, String>,
    v1: &'static str,
    encode: fn(&T) -> String,
}

const PR: Kind<PrState> = Kind {
    prefix: "pr",
    what: "persistent reservation",
    max: MAX_PR_BYTES,
    decode: PrState::decode,
    v1: "ironlun-pr 1\n",
    encode: PrState::encode,
};

const SANITIZE: Kind<SanitizeRecord> = Kind {
    prefix: "sanitize",
    what: "sanitize",
    max: MAX_SANITIZE_RECORD_BYTES,
    decode: SanitizeRecord::decode,
    v1: "ironlun-sanitize 1\n",
    encode: SanitizeRecord::encode,
};

/// The first line of the marker left where a file was kept aside.
const HELD: &str = "ironlun-held 1";

/// Opens target `target`'s LUN `lun` state in `d`. Never fails: what
/// cannot be read is the reason in `found`.
pub fn open(d: StateDir<'_>, target: &str, lun: u16) -> Opened {
    let file = |prefix| StateFile::for_lu(d.dir, prefix, target, lun);
    Opened {
        pr: FilePrStore::new(file(PR.prefix)),
        sanitize: FileSanitizeStore::new(file(SANITIZE.prefix)),
        found: read_all(d, target, lun),
    }
}

fn read_all(d: StateDir<'_>, target: &str, lun: u16) -> Result<Found, String> {
    let pr = read(d, &PR, target, lun);
    let sanitize = read(d, &SANITIZE, target, lun);
    match (pr, sanitize) {
        (Ok(pr), Ok(sanitize)) => Ok(Found { pr, sanitize }),
        (Err(a), Err(b)) => Err(format!("{a}; {b}")),
        (Err(e), _) | (_, Err(e)) => Err(e),
    }
}

/// One kind of state of the LU: renamed from its former name if it has
/// one, read, and kept aside if it does not parse.
fn read<T>(d: StateDir<'_>, k: &Kind<T>, target: &str, lun: u16) -> Result<Option<T>, String> {
    let file = StateFile::for_lu(d.dir, k.prefix, target, lun);
    migrate(d, k, target, lun, &file)?;
    let path = file.path().display();
    let text = match file.read_bounded(k.max) {
        Ok(None) => return Ok(None),
        Ok(Some(t)) => t,
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return Err(keep_aside(k, &file, &e.to_string()))
        }
        Err(e) => return Err(format!("{} state file {path} cannot be read: {e}", k.what)),
    };
    if let Some(aside) = held(&text) {
        return Err(format!(
            "{} state file {path} is the marker left when it did not parse; what it held is kept as {}; a person decides what the state is (docs/admin.md, \"A LU offline for its state\")",
            k.what,
            d.dir.join(aside).display()
        ));
    }
    match (k.decode)(&text) {
        Ok(v) => {
            if text.starts_with(k.v1) {
                warn_v1(k, &v, &file, target, lun);
            }
            Ok(Some(v))
        }
        Err(why) => Err(keep_aside(k, &file, &why)),
    }
}

/// A file of version 1, which wrote names raw (a name could add records
/// before the names were checked at login): it reads, and what it holds
/// goes to the log for a person to review, record by record in the
/// current form (names escaped, so none can forge a log line).
fn warn_v1<T>(k: &Kind<T>, v: &T, file: &StateFile, target: &str, lun: u16) {
    let text = (k.encode)(v);
    let shown: Vec<&str> = text.lines().skip(1).filter(|l| *l != "end").collect();
    warn!(
        "target {target} LUN {lun}: {} state file {} was written by an older version (version 1, names not checked then) and is taken up as: {}; review it (an initiator's name could have added records); it is written in the current form at the next change",
        k.what,
        file.path().display(),
        shown.join("; ")
    );
}

/// The reason a LU is offline for `file`, which does not parse because
/// of `why`, after keeping it aside.
fn keep_aside<T>(k: &Kind<T>, file: &StateFile, why: &str) -> String {
    let path = file.path().display();
    match file.keep_aside(marker) {
        Ok(aside) => format!(
            "{} state file {path} does not parse ({why}); kept aside as {}",
            k.what,
            aside.display()
        ),
        Err(e) => format!(
            "{} state file {path} does not parse ({why}); it could not be kept aside ({e}) and stays where it is",
            k.what
        ),
    }
}

/// The marker for a file kept aside as `aside` (a name in the same
/// directory).
fn marker(aside: &str) -> String {
    format!("{HELD}\naside {}\n", ironlun_scsi::saved::escape(aside))
}

/// The name a marker names, if `text` is one.
pub fn held(text: &str) -> Option<String> {
    let rest = text.strip_prefix(HELD)?.strip_prefix("\naside ")?;
    let name = ironlun_scsi::saved::unescape(rest.strip_suffix('\n')?)?;
    // A name in the state directory, nothing else.
    let plain = !name.is_empty() && !name.contains('/') && name != "." && name != "..";
    plain.then_some(name)
}

/// Renames the LU's file of kind `k` from its former name to `file`,
/// when `file` does not exist yet and no other configured target had the
/// same former name.
fn migrate<T>(
    d: StateDir<'_>,
    k: &Kind<T>,
    target: &str,
    lun: u16,
    file: &StateFile,
) -> Result<(), String> {
    if file.exists() {
        return Ok(());
    }
    let want = state_name::legacy_file_name(k.prefix, target, lun);
    let read;
    let names = match d.names {
        Some(n) => n,
        None => {
            read = LegacyNames::read(d.dir);
            &read
        }
    };
    let found = names.matching(d.dir, &want);
    let old = match found.as_slice() {
        [] => return Ok(()),
        [one] => StateFile::at(&d.dir.join(one)),
        several => {
            return Err(format!(
                "{} state files {} have the former name of this LU's (before names were one-to-one; it kept the case of the name as configured) but differ in case: a person decides which is target {target}'s and renames it to {}, or removes the others",
                k.what,
                several.join(", "),
                file.path().display()
            ))
        }
    };
    if old.path() == file.path() {
        return Ok(());
    }
    let stem = state_name::legacy_stem(target);
    let others: Vec<&str> = d
        .targets
        .iter()
        .filter(|t| NameKey(&t.name) != NameKey(target) && state_name::legacy_stem(&t.name) == stem)
        .map(|t| t.name.as_str())
        .collect();
    let (from, to) = (old.path().display(), file.path().display());
    if !others.is_empty() {
        return Err(format!(
            "{} state file {from} has its former name (before names were one-to-one), which targets {target} and {} share: a person decides whose it is and renames it to that target's name ({to} for this one), or removes it",
            k.what,
            others.join(", ")
        ));
    }
    old.rename_to(file).map_err(|e| {
        format!(
            "{} state file {from} cannot be renamed to {to}: {e}",
            k.what
        )
    })?;
    info!(
        "target {target} LUN {lun}: {} state file {from} renamed to {to} (one-to-one names)",
        k.what
    );
    Ok(())
}

/// Puts what the LU's files held in place at start: the reservations as
/// a power on leaves them (PRgeneration zero, SPC-5 §6.16.2) and the
/// sanitize record resumed or failed; or takes the LU offline, logged
/// with its target, LUN and the reason (the file).
pub fn take_up(lu: &Arc<LogicalUnit>, found: Result<Found, String>, target: &str, lun: u16) {
    match found {
        Ok(f) => {
            if let Some(pr) = f.pr {
                lu.restore_pr(pr.after_power_on());
            }
            sanitize_store::restore(lu, f.sanitize, target, lun);
        }
        Err(why) => {
            error!(
                "target {target} LUN {lun}: offline (NOT READY, MANUAL INTERVENTION REQUIRED) until a person looks: {why}"
            );
            lu.set_offline(why);
        }
    }
}

/// Reads an offline LU's files again and, if they parse now, brings it
/// back with what they hold (put in place before it serves); otherwise it
/// stays offline with the new reason, which is returned. A LU that is
/// not offline is left alone; one another caller is bringing back now
/// (SIGHUP and `ironlun admin lun online` at once) is that caller's: the
/// record of a sanitize resumed once is not taken up twice.
pub fn bring_back(
    lu: &Arc<LogicalUnit>,
    d: StateDir<'_>,
    target: &str,
    lun: u16,
) -> Result<(), String> {
    let Some(claim) = lu.claim_offline() else {
        return match lu.offline_reason() {
            None => Ok(()),
            Some(_) => Err(BEING_BROUGHT_BACK.into()),
        };
    };
    match read_all(d, target, lun) {
        Ok(f) => {
            claim.online(f.pr.map(PrState::after_power_on), || {
                sanitize_store::restore(lu, f.sanitize, target, lun);
            });
            info!("target {target} LUN {lun}: its state files read again: back online");
            Ok(())
        }
        Err(why) => {
            error!("target {target} LUN {lun}: still offline: {why}");
            claim.stay_offline(why.clone());
            Err(why)
        }
    }
}

/// What a caller is told while another brings the LU back.
pub const BEING_BROUGHT_BACK: &str =
    "another request (SIGHUP, configuration reload or lun online) is bringing this LU back now; ask again once it is done";

#[cfg(test)]
mod tests;
