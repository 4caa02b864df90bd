//! APTPL persistence (SPC-4 §5.13.5): persistent reservation state of a
//! LU saved in a file of the state directory, written atomically (a new
//! file, fsync, rename, fsync of the directory) so a crash leaves either
//! the old state or the new one.

use std::fs;
use std::io;
use std::path::Path;

use ironlun_scsi::reservations::{PrState, PrStore};

use crate::state_file::StateFile;

pub struct FilePrStore {
    file: StateFile,
}

impl FilePrStore {
    /// The store for one LU of a target, and the state saved before (none
    /// when the directory or the file does not exist yet) as a power on
    /// leaves it: the daemon starting is the LU's power on, so PRgeneration
    /// starts again at zero (SPC-5 §6.16.2).
    pub fn open(
        dir: &Path,
        target: &str,
        lun: u16,
    ) -> Result<(FilePrStore, Option<PrState>), String> {
        let file = StateFile::for_lu(dir, "pr", target, lun);
        let path = file.path();
        let restored = match fs::read_to_string(path) {
            Ok(text) => Some(
                PrState::decode(&text)
                    .map_err(|e| format!("{}: persistent reservation state: {e}", path.display()))?
                    .after_power_on(),
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        Ok((FilePrStore { file }, restored))
    }
}

impl PrStore for FilePrStore {
    fn save(&self, text: &str) -> io::Result<()> {
        self.file.replace(text).inspect_err(|e| {
            tracing::error!(path = %self.file.path().display(), "saving persistent reservations: {e}");
        })
    }

    fn clear(&self) -> io::Result<()> {
        self.file.remove().inspect_err(|e| {
            tracing::error!(path = %self.file.path().display(), "removing persistent reservations: {e}");
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ironlun_scsi::reservations::{ItNexus, Registration};

    #[test]
    fn saves_restores_and_clears() {
        let dir = tempfile::tempdir().unwrap();
        let (store, restored) = FilePrStore::open(dir.path(), "iqn.2026-11.x:t", 3).unwrap();
        assert!(restored.is_none());
        let st = PrState {
            generation: 4,
            registrations: vec![Registration {
                nexus: ItNexus::new("iqn.x:i", [0, 1, 2, 3, 4, 5], 1),
                key: 42,
                all_tg_pt: false,
            }],
            reservation: None,
            aptpl: true,
        };
        store.save(&st.encode()).unwrap();
        let (_, restored) = FilePrStore::open(dir.path(), "iqn.2026-11.x:t", 3).unwrap();
        // Everything but PRgeneration, which a power on sets to zero
        // (SPC-5 §6.16.2).
        assert_eq!(
            restored,
            Some(PrState {
                generation: 0,
                ..st
            })
        );
        store.clear().unwrap();
        store.clear().unwrap();
        let (_, restored) = FilePrStore::open(dir.path(), "iqn.2026-11.x:t", 3).unwrap();
        assert!(restored.is_none());
        std::fs::write(dir.path().join("pr-iqn.2026-11.x_t-lun3.txt"), "junk").unwrap();
        assert!(FilePrStore::open(dir.path(), "iqn.2026-11.x:t", 3).is_err());
    }
}
