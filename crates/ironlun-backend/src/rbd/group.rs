//! The image lock of an `rbd:` LU, for the gateway group
//! ([`crate::ImageLock`]): librbd's exclusive lock in managed mode on the
//! link's current client, the explicit rejoin after a fence, and the
//! objects beside the image on that same client (`shared.rs`).

use std::io;
use std::sync::Arc;

use super::{RbdBackend, SharedObject};
use crate::ImageLock;

impl ImageLock for RbdBackend {
    fn acquire(&self) -> io::Result<()> {
        self.link.ready()?;
        self.link
            .image()
            .lock_acquire()
            .map_err(|e| self.link.lock_error(e))
    }

    fn release(&self) -> io::Result<()> {
        self.link
            .image()
            .lock_release()
            .map_err(|e| self.link.lock_error(e))
    }

    fn owners(&self) -> io::Result<Vec<String>> {
        self.link.ready()?;
        let found = self
            .link
            .image()
            .lock_owners()
            .map_err(|e| self.link.lock_error(e))?;
        Ok(found.owners)
    }

    fn break_owner(&self, owner: &str) -> io::Result<()> {
        self.link.ready()?;
        self.link
            .image()
            .lock_break(owner)
            .map_err(|e| self.link.lock_error(e))
    }

    fn holds(&self) -> bool {
        !self.link.fenced() && self.link.image().is_lock_owner().unwrap_or(false)
    }

    fn fenced(&self) -> bool {
        self.link.fenced()
    }

    fn rejoin(&self) -> io::Result<()> {
        self.link.rejoin()
    }

    fn shared_object(&self, name: &str) -> io::Result<SharedObject> {
        Ok(SharedObject::new(Arc::clone(&self.link), name))
    }

    fn reconnects(&self) -> bool {
        self.reconnect
    }
}
