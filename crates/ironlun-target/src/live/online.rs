//! Bringing back a LU its state files took offline (`lu_state.rs`): a
//! person fixed or removed the file; SIGHUP tries every offline LU,
//! `ironlun admin lun online` one.

use std::sync::Arc;

use ironlun_scsi::LogicalUnit;

use super::Live;
use crate::lu_state;

/// What bringing one LU back did.
#[derive(Debug, PartialEq, Eq)]
pub enum BroughtBack {
    /// Its state files parse now: it serves again.
    Online,
    /// It was not offline: nothing was done.
    WasOnline,
}

impl Live {
    /// Reads the state files of target `target`'s LUN `lun` again if it
    /// is offline. `Err`: no such LUN, or why it stays offline.
    pub fn bring_back(&self, target: &str, lun: u16) -> Result<BroughtBack, String> {
        let t = self
            .registry
            .find(target)
            .ok_or_else(|| format!("no target {target}"))?;
        let lu = t
            .luns
            .get(lun)
            .cloned()
            .ok_or_else(|| format!("target {target} has no LUN {lun}"))?;
        self.bring_back_lu(&lu, &t.cfg.name, lun)
    }

    /// Every offline LU read again (SIGHUP); each outcome is logged.
    pub fn bring_back_all(&self) {
        for t in self.registry.targets().iter() {
            for (n, lu) in t.luns.iter() {
                let _ = self.bring_back_lu(lu, &t.cfg.name, *n);
            }
        }
    }

    fn bring_back_lu(
        &self,
        lu: &Arc<LogicalUnit>,
        target: &str,
        lun: u16,
    ) -> Result<BroughtBack, String> {
        if lu.offline_reason().is_none() {
            return Ok(BroughtBack::WasOnline);
        }
        let cfg = self.config();
        let Some(d) = lu_state::state_dir(&cfg) else {
            return Err("no state directory".into());
        };
        lu_state::bring_back(lu, d, target, lun).map(|()| BroughtBack::Online)
    }
}
