//! Snapshots of an `rbd:` LUN: librbd's own (`rbd snap`), taken on the
//! image the LUN has open, and clones of them in format 2 (no protect
//! step, Ceph 13 and later). No data is copied: a snapshot or a clone
//! shares the image's objects until they are written.

use std::io;
use std::sync::atomic::Ordering;

use super::link::io_error;
use super::RbdBackend;
use crate::snapshot::{refusal, SnapshotInfo, SnapshotName, Snapshots, MAX_SNAPSHOTS};

/// The snapshots of the image `backend` serves.
pub(super) struct RbdSnapshots<'a> {
    pub(super) backend: &'a RbdBackend,
}

impl RbdSnapshots<'_> {
    fn writable(&self) -> io::Result<()> {
        if self.backend.read_only {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the image is served read-only: snapshots are taken on the LUN that writes it",
            ));
        }
        Ok(())
    }
}

impl Snapshots for RbdSnapshots<'_> {
    fn create(&self, name: &SnapshotName) -> io::Result<()> {
        self.writable()?;
        if self.list()?.len() >= MAX_SNAPSHOTS {
            return Err(refusal(format!(
                "the image keeps {MAX_SNAPSHOTS} snapshots, the most a LUN may: delete one first"
            )));
        }
        let image = self.backend.link.image();
        image.create_snapshot(name.as_str()).map_err(io_error)
    }

    fn list(&self) -> io::Result<Vec<SnapshotInfo>> {
        let snaps = self.backend.link.image().snapshots().map_err(io_error)?;
        Ok(snaps
            .into_iter()
            .map(|s| SnapshotInfo {
                name: s.name,
                bytes: s.size,
                taken: s.taken,
            })
            .collect())
    }

    fn delete(&self, name: &SnapshotName) -> io::Result<()> {
        let image = self.backend.link.image();
        image.remove_snapshot(name.as_str()).map_err(io_error)
    }

    fn rollback(&self, name: &SnapshotName) -> io::Result<()> {
        self.writable()?;
        let image = self.backend.link.image();
        image.rollback_snapshot(name.as_str()).map_err(io_error)?;
        // The size is the snapshot's now: the LU reads it at once
        // (the header watch would only say so later).
        let size = image.info().map_err(io_error)?.size;
        self.backend.link.size.store(size, Ordering::Release);
        Ok(())
    }

    fn clone_to(&self, name: &SnapshotName, clone: &SnapshotName) -> io::Result<String> {
        let image = self.backend.link.image();
        image
            .clone_snapshot(name.as_str(), clone.as_str())
            .map_err(io_error)?;
        Ok(format!("rbd:{}/{}", self.backend.pool, clone))
    }

    fn export_spec(&self, name: &SnapshotName) -> String {
        format!("rbd:{}/{}@{name}", self.backend.pool, self.backend.image)
    }
}
