//! Persistent reservations in RADOS for `rbd:` LUNs with `pr=rados`
//! (docs/ha.md, "Shared reservations"): one object per image,
//! `ironlun.pr.<image id>` in the image's pool, holding the state in the
//! shared form of `ironlun_scsi::reservations::shared`, written by
//! compare-and-swap on the object's version and announced with
//! notify; every gateway watches it and takes up each new version before
//! it acknowledges. The object is reached through the image's own
//! librados client ([`ironlun_backend::rbd::SharedObject`]): the
//! blocklist that fences a gateway off the image fences it off the
//! reservations too, and a fenced gateway changes nothing here until it
//! has rejoined.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use ironlun_backend::rbd::{SharedObject, SharedWatch};
use ironlun_backend::ImageLock;
use ironlun_rbd::{WatchEvent, WriteOutcome};
use ironlun_scsi::reservations::shared::{self, SharedPr, SharedState, Stored, MAX_SHARED_BYTES};
use ironlun_scsi::LogicalUnit;
use tracing::{error, info, warn};

/// How long a PERSISTENT RESERVE OUT waits for the other gateways to
/// take its change up before GOOD.
pub const ANNOUNCE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the OSD keeps a watch of a gateway it no longer hears from.
pub const WATCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between attempts to watch again after a watch was lost.
const REWATCH_PAUSE: Duration = Duration::from_secs(1);
/// How often the watcher looks for a lost event or a gone LU.
const POLL: Duration = Duration::from_millis(500);

/// The object that holds the reservations of the image with this id.
pub fn object_name(image_id: &str) -> String {
    format!("ironlun.pr.{image_id}")
}

/// The image id in a backend identity `rbd:POOL/id:ID`; `None` for an
/// old-format image (`rbd:POOL/IMAGE`), which has none.
pub fn image_id(identity: &str) -> Option<&str> {
    identity
        .rsplit_once("/id:")
        .map(|(_, id)| id)
        .filter(|id| !id.is_empty())
}

/// The reservations of one image in RADOS.
pub struct RadosPr {
    object: SharedObject,
    /// The watch is up and every announcement so far was taken up.
    in_step: AtomicBool,
}

impl RadosPr {
    /// The object of `image_id` beside the image that `lock` serves, on
    /// the image's client (nothing is read yet).
    pub fn open(lock: &dyn ImageLock, image_id: &str) -> io::Result<RadosPr> {
        Ok(RadosPr {
            object: lock.shared_object(&object_name(image_id))?,
            in_step: AtomicBool::new(false),
        })
    }

    fn name(&self) -> &str {
        self.object.name()
    }

    /// The group's power on (SPC-5 §5.14.5 with several gateways): when
    /// no gateway watches the object, the state's APTPL decides what
    /// survives: with APTPL the registrations and reservation stay and
    /// PRgeneration restarts at zero; without it, all is cleared. An
    /// SPC-2 reservation never survives (its I_T nexus is gone). One
    /// conditional write: if another gateway wrote meanwhile, it is up
    /// and the state is left as it is. Blocks.
    pub fn power_on(&self) -> io::Result<()> {
        let heard = match self.object.notify(b"", ANNOUNCE_TIMEOUT) {
            Ok(h) => h,
            // Nothing stored yet: nothing to clear.
            Err(e) if e.raw_os_error() == Some(2) => return Ok(()),
            Err(e) => return Err(e),
        };
        if heard.acks > 0 || heard.timeouts > 0 {
            info!(
                object = %self.name(),
                "shared reservations: {} gateway(s) already watch: state kept as stored",
                heard.acks + heard.timeouts
            );
            return Ok(());
        }
        let stored = self.load()?;
        let aptpl = stored.state.pr.aptpl;
        let after = SharedState {
            pr: if aptpl {
                stored.state.pr.clone().after_power_on()
            } else {
                Default::default()
            },
            spc2: None,
        };
        if after == stored.state {
            return Ok(());
        }
        match self.store_if(stored.version, &after)? {
            Some(_) => info!(
                object = %self.name(),
                aptpl,
                "shared reservations: first gateway up: {}",
                if aptpl {
                    "registrations kept (APTPL), PRgeneration 0"
                } else {
                    "registrations cleared (no APTPL)"
                }
            ),
            None => {
                info!(object = %self.name(), "shared reservations: another gateway wrote first: state kept")
            }
        }
        Ok(())
    }
}

impl SharedPr for RadosPr {
    fn load(&self) -> io::Result<Stored> {
        let Some(got) = self.object.read(MAX_SHARED_BYTES)? else {
            return Ok(Stored::default());
        };
        let state = std::str::from_utf8(&got.data)
            .map_err(|_| "not UTF-8".to_owned())
            .and_then(shared::decode)
            .map_err(|why| {
                error!(object = %self.name(), "shared reservations unreadable: {why}");
                io::Error::new(io::ErrorKind::InvalidData, why)
            })?;
        Ok(Stored {
            state,
            version: got.version,
        })
    }

    fn store_if(&self, version: u64, state: &SharedState) -> io::Result<Option<u64>> {
        let expected = (version != 0).then_some(version);
        let text = shared::encode(state);
        match self.object.write_if(expected, text.as_bytes()) {
            Ok(WriteOutcome::Written(v)) => Ok(Some(v)),
            Ok(WriteOutcome::Stale) => Ok(None),
            Err(e) => {
                error!(object = %self.name(), "writing shared reservations: {e}");
                Err(e)
            }
        }
    }

    fn announce(&self) {
        match self.object.notify(b"pr", ANNOUNCE_TIMEOUT) {
            Ok(h) if h.timeouts > 0 => warn!(
                object = %self.name(),
                "shared reservations: {} gateway(s) did not confirm the change within {:?} \
                 (each reloads when its watch recovers; one cut off is to be fenced)",
                h.timeouts,
                ANNOUNCE_TIMEOUT
            ),
            Ok(_) => {}
            Err(e) => warn!(object = %self.name(), "shared reservations: notify failed: {e}"),
        }
    }

    fn in_step(&self) -> bool {
        self.in_step.load(Ordering::Acquire)
    }
}

/// A LU's start: the object watched first, then read, so that no change
/// falls between the two. The state read goes to
/// [`LogicalUnit::set_shared_pr`]; the watch to [`follow`]. Blocks.
pub fn start(store: &RadosPr) -> io::Result<(SharedWatch, Stored)> {
    // Only an object that exists can be watched: the first gateway of
    // an image creates it empty (another creating it first is as good).
    if store.load()?.version == 0 {
        store.store_if(0, &SharedState::default())?;
    }
    let watch = store.object.watch(WATCH_TIMEOUT)?;
    let stored = store.load()?;
    store.in_step.store(true, Ordering::Release);
    Ok((watch, stored))
}

/// Follows the object for `lu` on a thread of its own until the LU is
/// gone: each notification is taken up (read, put in place) and then
/// acknowledged; a lost watch makes the LU's media access NOT READY
/// until the state is read again under a new watch.
pub fn follow(
    store: Arc<RadosPr>,
    watch: SharedWatch,
    lu: Weak<LogicalUnit>,
    label: String,
) -> io::Result<()> {
    std::thread::Builder::new()
        .name("pr-watch".into())
        .spawn(move || watch_loop(&store, Some(watch), &lu, &label))
        .map(drop)
}

fn watch_loop(
    store: &RadosPr,
    mut first: Option<SharedWatch>,
    lu: &Weak<LogicalUnit>,
    label: &str,
) {
    let mut lost_logged = false;
    while lu.strong_count() > 0 {
        let watch = match first
            .take()
            .map_or_else(|| store.object.watch(WATCH_TIMEOUT), Ok)
        {
            Ok(w) => w,
            Err(e) => {
                store.in_step.store(false, Ordering::Release);
                if !lost_logged {
                    error!(
                        "{label}: cannot watch {}: {e}; media access NOT READY until it can",
                        store.name()
                    );
                    lost_logged = true;
                }
                std::thread::sleep(REWATCH_PAUSE);
                continue;
            }
        };
        if !reload(store, lu, label) {
            std::thread::sleep(REWATCH_PAUSE);
            continue;
        }
        if lost_logged {
            info!(
                "{label}: watching {} again: shared reservations reloaded",
                store.name()
            );
        }
        // Events until the watch fails or the LU goes.
        loop {
            let Some(lu_alive) = lu.upgrade() else {
                return;
            };
            drop(lu_alive);
            match watch.next(POLL) {
                Some(WatchEvent::Notify {
                    notify_id, cookie, ..
                }) => {
                    reload(store, lu, label);
                    if let Err(e) = store.object.ack(&watch, notify_id, cookie) {
                        warn!("{label}: acknowledging a change of {}: {e}", store.name());
                    }
                }
                Some(WatchEvent::Error(err)) => {
                    store.in_step.store(false, Ordering::Release);
                    error!(
                        "{label}: watch of {} lost (errno {}): media access NOT READY until it is back",
                        store.name(),
                        -err
                    );
                    lost_logged = true;
                    break;
                }
                None if watch.take_lost() => {
                    reload(store, lu, label);
                }
                None => {
                    if let Some(why) = unconfirmed(&watch) {
                        store.in_step.store(false, Ordering::Release);
                        error!(
                            "{label}: watch of {} {why}: media access NOT READY until it is back",
                            store.name()
                        );
                        lost_logged = true;
                        break;
                    }
                }
            }
        }
    }
}

/// Why the watch can no longer be trusted to deliver every notification:
/// its client no longer serves the image, the OSD has not confirmed it for longer than [`WATCH_TIMEOUT`] (it may
/// have dropped it; librados calls no error back while the whole cluster
/// is unreachable), or it failed.
fn unconfirmed(watch: &SharedWatch) -> Option<String> {
    if !watch.current() {
        return Some(
            "made on a client that no longer serves the image (fenced, or replaced by a rejoin)"
                .into(),
        );
    }
    match watch.confirmed_ago() {
        Ok(ago) if ago > WATCH_TIMEOUT => Some(format!("unconfirmed for {ago:?}")),
        Ok(_) => None,
        Err(e) => Some(format!("lost ({e})")),
    }
}

/// Reads the object and puts it in place; marks the LU in step on
/// success and out of step on failure.
fn reload(store: &RadosPr, lu: &Weak<LogicalUnit>, label: &str) -> bool {
    let Some(lu) = lu.upgrade() else {
        return false;
    };
    match store.load() {
        Ok(stored) => {
            lu.take_up_shared(stored);
            store.in_step.store(true, Ordering::Release);
            true
        }
        Err(e) => {
            store.in_step.store(false, Ordering::Release);
            error!(
                "{label}: reading {}: {e}; media access NOT READY until it is read",
                store.name()
            );
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_object_is_named_by_the_image_id() {
        assert_eq!(image_id("rbd:rbd/id:10f2a8c9e1"), Some("10f2a8c9e1"));
        assert_eq!(image_id("rbd:rbd/old-image"), None);
        assert_eq!(image_id("rbd:rbd/id:"), None);
        assert_eq!(object_name("10f2a8c9e1"), "ironlun.pr.10f2a8c9e1");
    }
}
