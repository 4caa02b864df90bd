//! Commands stopped at their medium access, for a transport that runs the
//! access itself, asynchronously (the target's io_uring): the device
//! decides everything before the access ([`LogicalUnit::start`]) and after
//! it ([`MediumIo::finish`]), so a staged command answers exactly as
//! [`LogicalUnit::execute`] would, and its rules stay in one place (the
//! plans in `block.rs` serve both ways).
//!
//! Only READ, WRITE, WRITE AND VERIFY and SYNCHRONIZE CACHE are staged;
//! every other command, and every command on a store without files, runs
//! through [`LogicalUnit::execute`].

use std::io;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use ironlun_backend::aio::MediumFuture;
use ironlun_backend::ring::{Job, Request as MediumRequest};
use ironlun_backend::{Backend, Payload};

use crate::block::{self, Plan};
use crate::cdb::Cdb;
use crate::durability::Durable;
use crate::gate::SharedTicket;
use crate::lu::LogicalUnit;
use crate::reservations::Access;
use crate::{Request, Response};

/// What [`LogicalUnit::start`] made of a command.
pub enum Start {
    /// Finished without touching the medium: refused by a check, or a
    /// transfer of zero blocks.
    Done(Response),
    /// The medium access to run; its outcome goes to [`MediumIo::finish`].
    Io(MediumIo),
}

/// A command waiting for its medium access. It shares the LU's access
/// (as a synchronous read or write holds it) until it is finished or
/// dropped.
pub struct MediumIo {
    lu: Arc<LogicalUnit>,
    request: MediumRequest,
    /// First LBA, for the sense data of a failed access.
    lba: u64,
    /// The command's own transfer length (writes report it).
    bytes: u32,
    access: Access,
    data_out: usize,
    _ticket: SharedTicket,
}

impl LogicalUnit {
    /// Whether [`LogicalUnit::start`] would hand this command's medium
    /// access to the caller: a staged command on a store with files, and
    /// for a write, Data-Out that ends on a block boundary (a partial last
    /// block needs a read-modify-write, done the synchronous way) and a
    /// range the store writes without the LU alone (an unaligned write to
    /// a `,direct` file is a read-modify-write under
    /// `LogicalUnit::write_access`).
    pub fn stageable(&self, cdb: &[u8], data_out: usize) -> bool {
        let c = Cdb(cdb);
        (self.has_files() || self.has_async_medium())
            && block::planner(c.opcode()).is_some()
            && block::whole_blocks(self, &c, data_out)
            // A write this port forwards runs where it may block.
            && !self.forwarding(c.opcode())
            && !block::write_needs_exclusive(self, &c, data_out)
    }

    /// Runs a command up to its medium access. `None` while a command
    /// that must appear atomic holds the LU (or waits for it): nothing
    /// has happened yet, and the caller runs the command with
    /// [`LogicalUnit::execute`] where it may wait. A command that is not
    /// [`LogicalUnit::stageable`] is carried out here, synchronously.
    pub fn start(self: &Arc<Self>, req: &Request<'_>) -> Option<Start> {
        let ticket = SharedTicket::try_new(self.clone())?;
        let cdb = Cdb(req.cdb);
        let op = match self.admit(req, &cdb) {
            Ok(op) => op,
            Err((access, r)) => return Some(self.done(access, req, r)),
        };
        let access = Some(op.access);
        let planned = match block::planner(op.opcode) {
            Some(plan) => plan(self, req, &cdb),
            None => {
                // The handler takes the gate itself: let go first.
                drop(ticket);
                let r = (op.handler)(self, req, &cdb);
                return Some(self.done(access, req, self.or_sense(r)));
            }
        };
        let (request, lba, bytes) = match planned {
            Err(s) => return Some(self.done(access, req, self.check_condition(s, 0))),
            Ok(Plan::Done(r)) => return Some(self.done(access, req, r)),
            Ok(Plan::Read { lba, offset, bytes }) => {
                let len = bytes as usize;
                (MediumRequest::Read { offset, len }, lba, bytes)
            }
            Ok(Plan::Write {
                lba,
                offset,
                bytes,
                received,
                durable,
            }) => {
                // `received` is at most the CDB's u32 transfer length.
                let bs = self.block_bytes().get();
                let span = (received as u64).div_ceil(bs).saturating_mul(bs);
                if received % self.block_len() != 0
                    || self.backend().write_needs_exclusive(offset, span)
                {
                    // A partial last block, or a write the store runs
                    // with the LU alone (not stageable): by the
                    // synchronous handler.
                    drop(ticket);
                    let r = (op.handler)(self, req, &cdb);
                    return Some(self.done(access, req, self.or_sense(r)));
                }
                let request = MediumRequest::Write {
                    offset,
                    data: req.data_out.clone(),
                    len: received,
                    durable,
                };
                (request, lba, bytes)
            }
            Ok(Plan::Flush) => (MediumRequest::Flush, 0, 0),
        };
        if let Some(durable) = durable_access(&request) {
            // Refused before the store while a failed flush is reported
            // (crate::durability), as the synchronous handlers are.
            if let Err(e) = self.durability.admit(Instant::now()) {
                let sense = match durable {
                    Durable::Flush => block::flush_error(&e),
                    Durable::Write => block::write_error(lba, &e),
                };
                return Some(self.done(access, req, self.check_condition(sense, 0)));
            }
        }
        Some(Start::Io(MediumIo {
            lu: self.clone(),
            request,
            lba,
            bytes,
            access: op.access,
            data_out: req.data_out.len(),
            _ticket: ticket,
        }))
    }

    fn or_sense(&self, r: Result<Response, crate::Sense>) -> Response {
        r.unwrap_or_else(|s| self.check_condition(s, 0))
    }

    fn done(&self, access: Option<Access>, req: &Request<'_>, mut r: Response) -> Start {
        self.record(access, req.data_out.len(), &mut r);
        Start::Done(r)
    }
}

/// What a request asks of the store's durability: a flush, a durable
/// write, or nothing (a read, a write the cache may hold).
fn durable_access(request: &MediumRequest) -> Option<Durable> {
    match request {
        MediumRequest::Flush => Some(Durable::Flush),
        MediumRequest::Write { durable: true, .. } => Some(Durable::Write),
        MediumRequest::Write { durable: false, .. } | MediumRequest::Read { .. } => None,
    }
}

/// A staged command is a ring's job as it is.
impl Job for MediumIo {
    /// The store to run the request against.
    fn backend(&self) -> &dyn Backend {
        &**self.lu.backend()
    }

    /// The access to run.
    fn request(&self) -> &MediumRequest {
        &self.request
    }
}

impl MediumIo {
    /// Finishes the command with the access's outcome (the bytes read, or
    /// nothing for writes and flushes): the response
    /// [`LogicalUnit::execute`] would have given.
    pub fn finish(self, outcome: io::Result<Option<Bytes>>) -> Response {
        self.finish_payload(outcome.map(|d| d.map(Payload::Mem)))
    }

    /// Starts the access on the store's asynchronous path, where it has
    /// one (RBD): the future's outcome goes to [`MediumIo::finish`].
    pub fn start_async(&self) -> Option<MediumFuture> {
        let medium = self.lu.backend().async_medium()?;
        Some(medium.start(&self.request))
    }

    /// Runs the access here, synchronously (where no ring takes it), and
    /// finishes the command. May block: call it where blocking is fine.
    pub fn run_here(self) -> Response {
        let backend = self.lu.backend();
        let outcome = match &self.request {
            MediumRequest::Read { offset, len } => backend.read_payload(*offset, *len).map(Some),
            MediumRequest::Write {
                offset,
                data,
                len,
                durable,
            } => {
                let parts: Vec<&[u8]> = data.slices(0..*len).collect();
                backend
                    .write_vectored(*offset, &parts, *durable)
                    .map(|()| None)
            }
            MediumRequest::Flush => backend.flush().map(|()| None),
        };
        self.finish_payload(outcome)
    }

    fn finish_payload(self, outcome: io::Result<Option<Payload>>) -> Response {
        let lu = &self.lu;
        if let Some(durable) = durable_access(&self.request) {
            lu.durability.settle(durable, &outcome, Instant::now());
        }
        let mut r = match (&self.request, outcome) {
            (MediumRequest::Read { .. }, Ok(Some(data))) => Response::read_data(data),
            (MediumRequest::Read { .. }, Err(e)) => {
                lu.check_condition(block::read_error(self.lba, &e), 0)
            }
            (MediumRequest::Read { .. }, Ok(None)) => {
                let e = io::Error::other("a read that returned no data");
                lu.check_condition(block::read_error(self.lba, &e), 0)
            }
            (MediumRequest::Write { .. }, Ok(_)) => Response::written(self.bytes),
            (MediumRequest::Write { .. }, Err(e)) => {
                lu.check_condition(block::write_error(self.lba, &e), 0)
            }
            (MediumRequest::Flush, Ok(_)) => Response::good(),
            (MediumRequest::Flush, Err(e)) => lu.check_condition(block::flush_error(&e), 0),
        };
        lu.record(Some(self.access), self.data_out, &mut r);
        r
    }
}

#[cfg(test)]
mod tests;
