//! [`ImageLock`]: what the gateway group (ironlun-target's `group`)
//! needs of a store several gateways serve: a lock that names one owner,
//! taken from a dead owner with a fence, and an explicit way back for a
//! gateway that was fenced. Only `rbd:` stores have one (librbd's
//! exclusive lock, `rbd/group.rs`).
//!
//! Every method may block on the cluster: callers run them off the async
//! runtime.

use std::io;

/// The lock that says which gateway owns a shared store.
pub trait ImageLock: Send + Sync {
    /// Takes the lock and keeps it until [`ImageLock::release`]; fails
    /// while another live client holds it, and once fenced.
    fn acquire(&self) -> io::Result<()>;

    /// Flushes and gives the lock up (an orderly handover).
    fn release(&self) -> io::Result<()>;

    /// Who holds the lock now, read from the cluster: each holder's
    /// client address, the name [`ImageLock::break_owner`] takes; empty
    /// when nobody does.
    fn owners(&self) -> io::Result<Vec<String>>;

    /// Takes the lock from `owner` and fences that client (it is cut off
    /// the cluster before this returns: none of its writes land after).
    fn break_owner(&self, owner: &str) -> io::Result<()>;

    /// Whether this gateway holds the lock, as it last knew (no round
    /// trip).
    fn holds(&self) -> bool;

    /// Whether the cluster cut this gateway's client off (another
    /// gateway's break): nothing is served until [`ImageLock::rejoin`].
    fn fenced(&self) -> bool;

    /// Opens the store again with a new client after a fence (blocks).
    fn rejoin(&self) -> io::Result<()>;

    /// An object beside the store for state the gateways share (the
    /// reservations of `pr=rados`), reached through the client that
    /// serves the store, so that the fence that cuts this gateway off
    /// the store cuts it off the object too ([`crate::rbd::SharedObject`]).
    fn shared_object(&self, name: &str) -> io::Result<crate::rbd::SharedObject>;

    /// Whether the store reopens by itself after a fence (`reconnect=on`),
    /// which would undo the group's fence: a group refuses such a store.
    fn reconnects(&self) -> bool;
}
