//! A sanitize under way or failed, kept in the state directory (SBC-4
//! §4.11): one file per LU, written atomically (a new file, fsync,
//! rename, fsync of the directory) so that a crash leaves the old record
//! or the new one. At start a LU resumes an interrupted operation or
//! enters failure mode (ironlun-scsi decides which); at shutdown a running
//! operation stops at a checkpoint. Each outcome is logged with its LUN.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::Arc;

use ironlun_scsi::{LogicalUnit, SanitizeRestore, SanitizeStore, MAX_SANITIZE_RECORD_BYTES};
use tracing::{info, warn};

use crate::registry::Registry;
use crate::state_file::StateFile;

pub struct FileSanitizeStore {
    file: StateFile,
}

/// What the store held at start: nothing, the record, or why it could
/// not be read.
pub type Saved = Option<Result<String, String>>;

impl FileSanitizeStore {
    /// The store for one LU of a target, and what it held.
    pub fn open(dir: &Path, target: &str, lun: u16) -> (FileSanitizeStore, Saved) {
        let file = StateFile::for_lu(dir, "sanitize", target, lun);
        let path = file.path();
        let saved = read_bounded(path).map_err(|e| format!("{}: {e}", path.display()));
        let saved = saved.transpose();
        (FileSanitizeStore { file }, saved)
    }
}

/// The file's text, `None` when there is none; longer than a record can
/// be is an error.
fn read_bounded(path: &Path) -> io::Result<Option<String>> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut text = String::new();
    f.take(MAX_SANITIZE_RECORD_BYTES as u64 + 1)
        .read_to_string(&mut text)?;
    if text.len() > MAX_SANITIZE_RECORD_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "longer than a sanitize record",
        ));
    }
    Ok(Some(text))
}

impl SanitizeStore for FileSanitizeStore {
    fn save(&self, text: &str) -> io::Result<()> {
        self.file.replace(text).inspect_err(|e| {
            tracing::error!(path = %self.file.path().display(), "saving the sanitize state: {e}");
        })
    }

    fn clear(&self) -> io::Result<()> {
        self.file.remove().inspect_err(|e| {
            tracing::error!(path = %self.file.path().display(), "removing the sanitize state: {e}");
        })
    }
}

/// Gives `lu` its store in `dir`; what the store held, for [`restore`].
pub fn attach(lu: &mut LogicalUnit, dir: &Path, target: &str, lun: u16) -> Saved {
    let (store, saved) = FileSanitizeStore::open(dir, target, lun);
    lu.set_sanitize_store(Arc::new(store));
    saved
}

/// Resumes or fails what `saved` holds on `lu`, and says so in the log.
pub fn restore(lu: &Arc<LogicalUnit>, saved: Saved, target: &str, lun: u16) {
    match LogicalUnit::restore_sanitize(lu, saved) {
        SanitizeRestore::Nothing => {}
        SanitizeRestore::Resumed { progress } => info!(
            "target {target} LUN {lun}: resuming the interrupted sanitize at {}%",
            percent(progress)
        ),
        SanitizeRestore::FailureMode { why } => warn!(
            "target {target} LUN {lun}: sanitize failure mode ({why}): media access fails with MEDIUM ERROR, SANITIZE COMMAND FAILED until a sanitize succeeds or EXIT FAILURE MODE"
        ),
    }
}

/// The target is stopping: every running sanitize stops at a checkpoint
/// and is logged, with whether it resumes at the next start.
pub fn stop_all(registry: &Registry) {
    for t in registry.targets().iter() {
        for (n, lu) in t.luns.iter() {
            match lu.stop_sanitize() {
                None => {}
                Some((p, true)) => info!(
                    "target {} LUN {n}: sanitize stopped at {}%; it resumes when the target starts again",
                    t.cfg.name,
                    percent(p)
                ),
                Some((p, false)) => warn!(
                    "target {} LUN {n}: sanitize stopped at {}% and is lost (no state directory): the LU is NOT sanitized",
                    t.cfg.name,
                    percent(p)
                ),
            }
        }
    }
}

fn percent(progress: u16) -> u32 {
    u32::from(progress) * 100 / 65536
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_reads_back_and_clears() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let (store, saved) = FileSanitizeStore::open(&state, "iqn.2026-11.x:t", 3);
        assert!(saved.is_none());
        store.save("ironlun-sanitize 1\nx\n").unwrap();
        let (_, saved) = FileSanitizeStore::open(&state, "iqn.2026-11.x:t", 3);
        assert_eq!(saved, Some(Ok("ironlun-sanitize 1\nx\n".into())));
        // Another LUN, another file.
        let (_, other) = FileSanitizeStore::open(&state, "iqn.2026-11.x:t", 4);
        assert!(other.is_none());
        store.clear().unwrap();
        store.clear().unwrap();
        let (_, saved) = FileSanitizeStore::open(&state, "iqn.2026-11.x:t", 3);
        assert!(saved.is_none());
        let long = "y".repeat(MAX_SANITIZE_RECORD_BYTES + 1);
        std::fs::write(state.join("sanitize-iqn.2026-11.x_t-lun3.txt"), long).unwrap();
        let (_, saved) = FileSanitizeStore::open(&state, "iqn.2026-11.x:t", 3);
        assert!(matches!(saved, Some(Err(_))), "{saved:?}");
    }
}
