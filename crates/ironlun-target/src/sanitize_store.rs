//! A sanitize under way or failed, kept in the state directory (SBC-4
//! §4.11): one file per LU, written atomically (a new file, fsync,
//! rename, fsync of the directory) so that a crash leaves the old record
//! or the new one. At start (`lu_state.rs` reads the record) a LU resumes
//! an interrupted operation or enters failure mode (ironlun-scsi decides
//! which; a record that does not parse takes the LU offline instead); at
//! shutdown a running operation stops at a checkpoint. Each outcome is
//! logged with its LUN.

use std::io;
use std::sync::Arc;

use ironlun_scsi::{LogicalUnit, SanitizeRecord, SanitizeRestore, SanitizeStore};
use tracing::{info, warn};

use crate::registry::Registry;
use crate::state_file::StateFile;

/// Where one LU's sanitize record is saved; `lu_state.rs` reads it back
/// when the LU opens.
pub struct FileSanitizeStore {
    file: StateFile,
}

impl FileSanitizeStore {
    pub fn new(file: StateFile) -> FileSanitizeStore {
        FileSanitizeStore { file }
    }
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

/// Resumes or fails the record `saved` on `lu`, and says so in the log.
pub fn restore(lu: &Arc<LogicalUnit>, saved: Option<SanitizeRecord>, target: &str, lun: u16) {
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
    fn saves_and_clears() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let file = || StateFile::for_lu(&state, "sanitize", "iqn.2026-11.test:t", 3);
        let store = FileSanitizeStore::new(file());
        store.save("ironlun-sanitize 2\nx\n").unwrap();
        assert_eq!(
            file().read_bounded(1 << 10).unwrap().as_deref(),
            Some("ironlun-sanitize 2\nx\n")
        );
        store.clear().unwrap();
        store.clear().unwrap();
        assert_eq!(file().read_bounded(1 << 10).unwrap(), None);
    }
}
