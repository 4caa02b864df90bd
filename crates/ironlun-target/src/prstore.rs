//! APTPL persistence (SPC-4 §5.13.5): persistent reservation state of a
//! LU saved in a file of the state directory, written atomically (a new
//! file, fsync, rename, fsync of the directory) so a crash leaves either
//! the old state or the new one.

use std::io;

use ironlun_scsi::reservations::PrStore;

use crate::state_file::StateFile;

/// Where one LU's persistent reservations are saved; `lu_state.rs`
/// reads them back when the LU opens.
pub struct FilePrStore {
    file: StateFile,
}

impl FilePrStore {
    pub fn new(file: StateFile) -> FilePrStore {
        FilePrStore { file }
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
    use ironlun_scsi::reservations::{ItNexus, PrState, Registration};

    #[test]
    fn saves_and_clears() {
        let dir = tempfile::tempdir().unwrap();
        let file = || StateFile::for_lu(dir.path(), "pr", "iqn.2026-11.test:t", 3);
        let store = FilePrStore::new(file());
        let st = PrState {
            generation: 4,
            registrations: vec![Registration {
                nexus: ItNexus::new("iqn.2026-11.test:i", [0, 1, 2, 3, 4, 5], 1),
                key: 42,
                all_tg_pt: false,
            }],
            reservation: None,
            aptpl: true,
        };
        store.save(&st.encode()).unwrap();
        let text = file().read_bounded(1 << 20).unwrap().unwrap();
        assert_eq!(PrState::decode(&text), Ok(st));
        store.clear().unwrap();
        store.clear().unwrap();
        assert_eq!(file().read_bounded(1 << 20).unwrap(), None);
    }
}
