//! Objects beside an `rbd:` image for state the gateways of a group
//! share (the persistent reservations of `pr=rados`), reached through
//! the librados client that serves the image ([`SharedObject`]).
//!
//! One client for both is the fence (issue 37 item 4): the survivor of a
//! failover blocklists the client that held the image's lock, and that
//! cuts the old owner off the image *and* off these objects. A client of
//! their own would stay free: a gateway paused past its failover could,
//! once it runs again, still change the shared state and answer GOOD.
//! So every call here goes to the client now serving the image, is
//! refused while the LU is fenced, and fences the LU when the cluster
//! answers that the client was blocklisted (ESHUTDOWN), as an image
//! call would. After a rejoin, calls go to the new client; a watch made
//! on the old one says it is no longer current ([`SharedWatch::current`]).
//!
//! Calls block (cluster round trips): use them off the async runtime.

use std::io;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use ironlun_rbd::{NotifyOutcome, ObjectWatch, RadosObject, Versioned, WatchEvent, WriteOutcome};

use super::link::{io_error, Client, Link};

/// One object in the image's pool, on the image's client.
pub struct SharedObject {
    link: Arc<Link>,
    name: String,
    /// The object as opened on a client (opening one waits for the OSD
    /// map): reused while that client serves the image.
    opened: Mutex<Option<(Weak<Client>, RadosObject)>>,
}

/// A watch on a [`SharedObject`], made on the client serving the image
/// at the time.
pub struct SharedWatch {
    watch: ObjectWatch,
    client: Weak<Client>,
    link: Weak<Link>,
}

impl SharedObject {
    pub(super) fn new(link: Arc<Link>, name: &str) -> SharedObject {
        SharedObject {
            link,
            name: name.to_owned(),
            opened: Mutex::new(None),
        }
    }

    /// The object's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `op` on the object through the client now serving the image:
    /// refused once fenced; ESHUTDOWN fences the LU (or reopens the
    /// image, `reconnect=on`).
    fn on_client<T>(
        &self,
        op: impl FnOnce(&RadosObject) -> ironlun_rbd::Result<T>,
    ) -> io::Result<(T, Weak<Client>)> {
        self.link.ready()?;
        let client = self.link.current();
        let object = self.object_on(&client)?;
        match op(&object) {
            Ok(v) => Ok((v, Arc::downgrade(&client))),
            Err(e) => Err(self.link.note_error(&client, io_error(e))),
        }
    }

    fn object_on(&self, client: &Arc<Client>) -> io::Result<RadosObject> {
        let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((on, object)) = opened.as_ref() {
            if std::ptr::eq(on.as_ptr(), Arc::as_ptr(client)) {
                return Ok(object.clone());
            }
        }
        let object = client
            .pool()
            .object(&self.name)
            .map_err(|e| self.link.note_error(client, io_error(e)))?;
        *opened = Some((Arc::downgrade(client), object.clone()));
        Ok(object)
    }

    /// The whole object and its version; `None` when it does not exist.
    pub fn read(&self, max: usize) -> io::Result<Option<Versioned>> {
        self.on_client(|o| o.read(max)).map(|(v, _)| v)
    }

    /// [`RadosObject::write_if`] through the image's client.
    pub fn write_if(&self, version: Option<u64>, data: &[u8]) -> io::Result<WriteOutcome> {
        self.on_client(|o| o.write_if(version, data))
            .map(|(v, _)| v)
    }

    /// [`RadosObject::notify`] through the image's client.
    pub fn notify(&self, payload: &[u8], timeout: Duration) -> io::Result<NotifyOutcome> {
        self.on_client(|o| o.notify(payload, timeout))
            .map(|(v, _)| v)
    }

    /// Acknowledges a notification `watch` received.
    pub fn ack(&self, watch: &SharedWatch, notify_id: u64, cookie: u64) -> io::Result<()> {
        if !watch.current() {
            return Ok(());
        }
        self.on_client(|o| o.ack(notify_id, cookie)).map(drop)
    }

    /// Starts watching the object on the client now serving the image.
    pub fn watch(&self, timeout: Duration) -> io::Result<SharedWatch> {
        let (watch, client) = self.on_client(|o| o.watch(timeout))?;
        Ok(SharedWatch {
            watch,
            client,
            link: Arc::downgrade(&self.link),
        })
    }
}

impl SharedWatch {
    /// The next event, waiting up to `timeout`.
    pub fn next(&self, timeout: Duration) -> Option<WatchEvent> {
        self.watch.next(timeout)
    }

    /// [`ObjectWatch::take_lost`].
    pub fn take_lost(&self) -> bool {
        self.watch.take_lost()
    }

    /// [`ObjectWatch::confirmed_ago`].
    pub fn confirmed_ago(&self) -> io::Result<Duration> {
        self.watch.confirmed_ago().map_err(io_error)
    }

    /// Whether the watch is on the client serving the image and the LU is
    /// not fenced: false once the client was replaced (a rejoin, a
    /// reconnection) or cut off, when the watch must be made again.
    pub fn current(&self) -> bool {
        let Some(link) = self.link.upgrade() else {
            return false;
        };
        link.ready().is_ok() && std::ptr::eq(self.client.as_ptr(), Arc::as_ptr(&link.current()))
    }
}
