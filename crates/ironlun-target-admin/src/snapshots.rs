//! The management API's snapshot operations (docs/snapshots.md): take,
//! list, delete, roll back and clone point-in-time copies of LUNs whose
//! store keeps them (`file:` on a file system with reflink, `rbd:`).
//! Taking a snapshot, or rolling one back, holds the LUs still while it
//! happens (`ironlun_scsi::quiesce`): the pause is logged and answered.
//! A rollback replaces the data under the sessions that have the LUN
//! open: refused while there are any unless forced, and then they are
//! told (unit attentions, `LogicalUnit::medium_replaced`).

use std::io;
use std::sync::Arc;

use ironlun_backend::{SnapshotName, Snapshots};
use ironlun_scsi::quiesce::{quiesced, Pause};
use ironlun_scsi::LogicalUnit;
use serde::Serialize;
use tracing::info;

use super::ops::{Answer, OpError};
use ironlun_target::live::Live;

/// Most LUNs one consistency group holds still at once.
pub const MAX_GROUP: usize = 16;

/// A LUN of a target, looked up for an operation.
struct Lun {
    target: String,
    number: u16,
    lu: Arc<LogicalUnit>,
}

impl Lun {
    fn find(live: &Live, target: &str, number: u16) -> Result<Lun, OpError> {
        let lu = live
            .registry
            .find(target)
            .and_then(|t| t.luns.get(number).cloned())
            .ok_or_else(|| OpError::new(404, format!("target {target} has no LUN {number}")))?;
        Ok(Lun {
            target: target.to_owned(),
            number,
            lu,
        })
    }

    fn what(&self) -> String {
        format!("target {} LUN {}", self.target, self.number)
    }

    /// The store's snapshots, or the refusal (409) saying why it has none.
    fn snapshots(&self) -> Result<Box<dyn Snapshots + '_>, OpError> {
        self.lu
            .backend()
            .snapshots()
            .map_err(|why| OpError::new(409, format!("{}: {why}", self.what())))
    }

    fn failed(&self, e: &io::Error) -> OpError {
        OpError::new(io_status(e), format!("{}: {e}", self.what()))
    }
}

/// The one place a store's error gets its HTTP status.
fn io_status(e: &io::Error) -> u16 {
    // In use (an RBD snapshot with an image open at it).
    if e.raw_os_error() == Some(libc::EBUSY) {
        return 409;
    }
    match e.kind() {
        io::ErrorKind::NotFound => 404,
        io::ErrorKind::AlreadyExists
        | io::ErrorKind::Unsupported
        | io::ErrorKind::PermissionDenied => 409,
        _ => 500,
    }
}

fn name(raw: &str) -> Result<SnapshotName, OpError> {
    SnapshotName::new(raw).map_err(|e| OpError::new(422, e))
}

fn ms(d: std::time::Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

pub(crate) fn pause_text(p: Pause) -> String {
    format!(
        "I/O paused {} (in-flight drained in {}, flushed in {})",
        ms(p.paused),
        ms(p.drained),
        ms(p.flushed)
    )
}

/// `snapshot create`: snapshot `name` of each LUN of `luns` (one, or a
/// consistency group) at one instant.
pub fn create(
    live: &Live,
    target: &str,
    luns: &[u16],
    raw: &str,
    dry_run: bool,
) -> Result<Answer, OpError> {
    create_paused(live, target, luns, raw, dry_run).map(|(a, _)| a)
}

/// As [`create`], with how long the LUs were held still (none for a dry
/// run): what a scheduled snapshot records (`ironlun_target::schedule`).
pub fn create_paused(
    live: &Live,
    target: &str,
    luns: &[u16],
    raw: &str,
    dry_run: bool,
) -> Result<(Answer, Option<Pause>), OpError> {
    let name = name(raw)?;
    if luns.is_empty() || luns.len() > MAX_GROUP {
        return Err(OpError::new(
            422,
            format!("give 1 to {MAX_GROUP} LUNs, not {}", luns.len()),
        ));
    }
    let found: Vec<Lun> = luns
        .iter()
        .map(|n| Lun::find(live, target, *n))
        .collect::<Result<_, _>>()?;
    let stores: Vec<Box<dyn Snapshots + '_>> =
        found.iter().map(Lun::snapshots).collect::<Result<_, _>>()?;
    let changes: Vec<String> = found
        .iter()
        .map(|l| format!("+ snapshot {name} of {}", l.what()))
        .collect();
    let exports: Vec<String> = stores.iter().map(|s| s.export_spec(&name)).collect();
    if dry_run {
        return Ok((answer(changes, true, None), None));
    }
    let lus: Vec<&LogicalUnit> = found.iter().map(|l| &*l.lu).collect();
    let (made, pause) = quiesced(&lus, || Ok(take_all(&found, &stores, &name)))
        .map_err(|e| OpError::new(500, format!("quiesce before snapshot {name}: {e}")))?;
    made?;
    for (lun, store) in found.iter().zip(&stores) {
        store.persist(&name).map_err(|e| lun.failed(&e))?;
    }
    let group = if found.len() > 1 {
        " (one consistency group)"
    } else {
        ""
    };
    info!(
        "snapshot {name} of {}{group}: {}",
        found.iter().map(Lun::what).collect::<Vec<_>>().join(", "),
        pause_text(pause)
    );
    let note = format!(
        "{}; export read-only as: {}",
        pause_text(pause),
        exports.join(" ")
    );
    Ok((answer(changes, false, Some(note)), Some(pause)))
}

/// The names of the snapshots LUN `lun` of `target` keeps now.
pub fn names(live: &Live, target: &str, lun: u16) -> Result<Vec<String>, OpError> {
    let l = Lun::find(live, target, lun)?;
    let list = l.snapshots()?.list().map_err(|e| l.failed(&e))?;
    Ok(list.into_iter().map(|i| i.name).collect())
}

/// Takes the snapshot on every store; when one fails, the ones already
/// taken are deleted again, so that a group is all or nothing.
fn take_all(
    found: &[Lun],
    stores: &[Box<dyn Snapshots + '_>],
    name: &SnapshotName,
) -> Result<(), OpError> {
    for (i, (lun, store)) in found.iter().zip(stores).enumerate() {
        if let Err(e) = store.create(name) {
            for s in stores.iter().take(i) {
                let _ = s.delete(name);
            }
            return Err(lun.failed(&e));
        }
    }
    Ok(())
}

fn answer(changes: Vec<String>, dry_run: bool, note: Option<String>) -> Answer {
    Answer {
        changes,
        dry_run,
        note,
    }
}

/// `snapshot delete`.
pub fn delete(
    live: &Live,
    target: &str,
    lun: u16,
    raw: &str,
    dry_run: bool,
) -> Result<Answer, OpError> {
    let name = name(raw)?;
    let l = Lun::find(live, target, lun)?;
    let store = l.snapshots()?;
    let change = vec![format!("- snapshot {name} of {}", l.what())];
    if !dry_run {
        store.delete(&name).map_err(|e| l.failed(&e))?;
        info!("snapshot {name} of {} deleted", l.what());
    }
    Ok(answer(change, dry_run, None))
}

/// `snapshot rollback`: the LUN's data becomes the snapshot's. Refused
/// while sessions have the LUN open, unless `force`; they are then told
/// CAPACITY DATA HAS CHANGED and MEDIUM MAY HAVE CHANGED.
pub fn rollback(
    live: &Live,
    target: &str,
    lun: u16,
    raw: &str,
    dry_run: bool,
    force: bool,
) -> Result<Answer, OpError> {
    let name = name(raw)?;
    let l = Lun::find(live, target, lun)?;
    let store = l.snapshots()?;
    let open = l.lu.nexus_count();
    if open > 0 && !force {
        return Err(OpError::new(
            409,
            format!(
                "{}: {open} session(s) have the LUN open, and a rollback replaces its data under them: give --force to roll back anyway (they are told CAPACITY DATA HAS CHANGED and MEDIUM MAY HAVE CHANGED), or log them out first",
                l.what()
            ),
        ));
    }
    let change = vec![format!("~ {}: rolled back to snapshot {name}", l.what())];
    if dry_run {
        return Ok(answer(change, true, None));
    }
    let ((), pause) = quiesced(&[&l.lu], || {
        store.rollback(&name)?;
        l.lu.medium_replaced()
    })
    .map_err(|e| l.failed(&e))?;
    info!(
        "{} rolled back to snapshot {name}: {}",
        l.what(),
        pause_text(pause)
    );
    let told = if open > 0 {
        format!("; {open} session(s) told the medium changed")
    } else {
        String::new()
    };
    Ok(answer(
        change,
        false,
        Some(format!("{}{told}", pause_text(pause))),
    ))
}

/// `snapshot clone`: a new writable store from snapshot `raw`, named
/// `clone`, beside the LUN's (a file in its directory, an image in its
/// pool); the answer says the spec that serves it.
pub fn clone(
    live: &Live,
    target: &str,
    lun: u16,
    raw: &str,
    clone: &str,
    dry_run: bool,
) -> Result<Answer, OpError> {
    let (name, clone) = (name(raw)?, self::name(clone)?);
    let l = Lun::find(live, target, lun)?;
    let store = l.snapshots()?;
    let change = vec![format!(
        "+ clone {clone} of snapshot {name} of {}",
        l.what()
    )];
    if dry_run {
        return Ok(answer(change, true, None));
    }
    let spec = store.clone_to(&name, &clone).map_err(|e| l.failed(&e))?;
    info!("clone {clone} of snapshot {name} of {}: {spec}", l.what());
    Ok(answer(
        change,
        false,
        Some(format!(
            "serve it with: ironlun admin lun add TARGET {spec}"
        )),
    ))
}

/// One snapshot in the listing.
#[derive(Serialize)]
pub struct SnapshotView {
    pub name: String,
    pub bytes: u64,
    /// Seconds since the Unix epoch.
    pub taken: Option<i64>,
    /// The LUN spec that serves it read-only.
    pub export: String,
}

/// One LUN in the listing: its snapshots, or why it has none.
#[derive(Serialize)]
pub struct LunSnapshots {
    pub target: String,
    pub lun: u16,
    pub kind: &'static str,
    pub snapshots: Vec<SnapshotView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub none_because: Option<String>,
    /// Its snapshot schedule and the last run's result; absent without
    /// one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ironlun_target::schedule::ScheduleView>,
}

/// `GET /v1/snapshots`: every LUN of every target with its snapshots.
/// Blocks (a file system, the cluster).
pub fn list(live: &Live) -> Vec<LunSnapshots> {
    let mut out = Vec::new();
    for t in live.registry.targets().iter() {
        for (n, lu) in t.luns.iter() {
            let backend = lu.backend();
            let mut row = LunSnapshots {
                target: t.cfg.name.clone(),
                lun: *n,
                kind: backend.kind(),
                snapshots: Vec::new(),
                none_because: None,
                schedule: live.registry.schedules.view(&t.cfg.name, *n),
            };
            match backend.snapshots() {
                Err(why) => row.none_because = Some(why),
                Ok(s) => match s.list() {
                    Err(e) => row.none_because = Some(format!("listing failed: {e}")),
                    Ok(list) => {
                        row.snapshots = list
                            .into_iter()
                            .map(|i| SnapshotView {
                                export: SnapshotName::new(&i.name)
                                    .map(|n| s.export_spec(&n))
                                    .unwrap_or_default(),
                                name: i.name,
                                bytes: i.bytes,
                                taken: i.taken,
                            })
                            .collect();
                    }
                },
            }
            out.push(row);
        }
    }
    out
}
