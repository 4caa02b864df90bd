//! The multipath's router: the task that places every command that did
//! not go straight to a path, the commands a path gave back (its
//! connection lost: at once, not after reconnection; or retired), those
//! a path refused for its ALUA state, and those that wait because no
//! path can take them now (a transitioning or standby LU, a full queue),
//! each waiting at most the hold limit (`ironlun_initiator_core::alua`).
//! It also asks for REPORT TARGET PORT GROUPS to be read again when a
//! path reports an ALUA change.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ironlun_initiator_core::alua::{Decision, DEFAULT_HOLD, HOLD_REREAD, HOLD_RETRY};
use ironlun_initiator_core::ChoosePath;
use ironlun_proto::initiator::ScsiReply;
use tokio::sync::mpsc;
use tracing::{debug, info};

use super::alua::Alua;
use super::{decide, views};
use crate::error::Error;
use crate::session::{Orphan, PathNote, Session, WeakSession};

/// Commands waiting for a path at once; more fail.
const MAX_HELD: usize = 4096;

/// A command waiting for a path.
struct Held {
    orphan: Orphan,
    since: Instant,
    /// The refusal it came back with, its answer if no path takes it.
    reply: Option<ScsiReply>,
}

pub(crate) struct Router {
    pub(crate) paths: Vec<WeakSession>,
    pub(crate) chooser: Arc<dyn ChoosePath>,
    pub(crate) alua: Option<Arc<Alua>>,
    /// Asks the reader for REPORT TARGET PORT GROUPS on every path.
    pub(crate) reread: Option<mpsc::Sender<()>>,
    held: VecDeque<Held>,
    /// When the waiting commands are tried next.
    next_retry: tokio::time::Instant,
    /// When the states were last asked to be read again.
    asked: Instant,
    reissued: u64,
}

impl Router {
    pub(crate) fn new(
        paths: Vec<WeakSession>,
        chooser: Arc<dyn ChoosePath>,
        alua: Option<Arc<Alua>>,
        reread: Option<mpsc::Sender<()>>,
    ) -> Router {
        Router {
            paths,
            chooser,
            alua,
            reread,
            held: VecDeque::new(),
            next_retry: tokio::time::Instant::now(),
            asked: Instant::now(),
            reissued: 0,
        }
    }

    pub(crate) async fn run(mut self, mut notes: mpsc::UnboundedReceiver<PathNote>) {
        loop {
            let waiting = !self.held.is_empty();
            tokio::select! {
                note = notes.recv() => match note {
                    Some(n) => self.note(n),
                    None => break,
                },
                _ = tokio::time::sleep_until(self.next_retry), if waiting => self.retry_held(),
            }
        }
        for h in std::mem::take(&mut self.held) {
            fail(h, "the multipath was closed");
        }
        info!(reissued = self.reissued, "multipath router ended");
    }

    fn note(&mut self, note: PathNote) {
        let now = Instant::now();
        match note {
            PathNote::Orphan(orphan) => self.place(Held {
                orphan,
                since: now,
                reply: None,
            }),
            PathNote::Bounced {
                path,
                orphan,
                signal,
                reply,
            } => {
                let change = self
                    .alua
                    .as_ref()
                    .and_then(|a| a.lock().apply_signal(path, signal));
                if let Some((old, new)) = change {
                    let old = old.map_or("unknown".to_owned(), |o| o.to_string());
                    info!("ALUA: path {path} {old} -> {new} (its sense said so)");
                }
                self.ask_reread();
                self.place(Held {
                    orphan,
                    since: now,
                    reply: Some(reply),
                });
            }
            PathNote::Signal { path, signal } => {
                debug!(path, ?signal, "ALUA change reported");
                self.ask_reread();
            }
        }
    }

    fn ask_reread(&mut self) {
        self.asked = Instant::now();
        if let Some(r) = &self.reread {
            // Full: a read is asked for already.
            let _ = r.try_send(());
        }
    }

    fn hold_limit(&self) -> Duration {
        self.alua
            .as_ref()
            .map_or(DEFAULT_HOLD, |a| a.lock().hold_limit())
    }

    /// Sends a command on the path the choice names, or keeps it.
    fn place(&mut self, h: Held) {
        let live: Vec<Option<Session>> = self.paths.iter().map(WeakSession::upgrade).collect();
        let decision = decide(
            &views(&live),
            self.chooser.as_ref(),
            self.alua.as_deref(),
            &h.orphan.request,
        );
        match decision {
            Decision::Send(i) => {
                let Some(Some(path)) = live.get(i) else {
                    return self.hold(h);
                };
                match path.try_resubmit(h.orphan, self.alua.is_some()) {
                    Ok(()) => self.reissued += 1,
                    Err(orphan) => self.hold(Held { orphan, ..h }),
                }
            }
            Decision::Hold => self.hold(h),
            Decision::NoPath => fail(h, "every path is retired"),
        }
    }

    fn hold(&mut self, h: Held) {
        if self.held.len() >= MAX_HELD {
            return fail(h, "too many commands wait for a path");
        }
        if self.held.is_empty() {
            self.next_retry = tokio::time::Instant::now() + HOLD_RETRY;
        }
        self.held.push_back(h);
    }

    /// Tries every waiting command again; those past the limit end. While
    /// some wait, the states are read again every [`HOLD_REREAD`].
    fn retry_held(&mut self) {
        if self.asked.elapsed() >= HOLD_REREAD {
            self.ask_reread();
        }
        let limit = self.hold_limit();
        let now = Instant::now();
        self.next_retry = tokio::time::Instant::now() + HOLD_RETRY;
        for h in std::mem::take(&mut self.held) {
            if now.duration_since(h.since) > limit {
                fail(
                    h,
                    &format!("no path could take the command within {limit:?}"),
                );
            } else {
                self.place(h);
            }
        }
    }
}

/// Ends a command that found no path: with the refusal it came back
/// with, if any, else an error.
fn fail(h: Held, why: &str) {
    match h.reply {
        Some(r) => h.orphan.responder.send(Ok(r)),
        None => h.orphan.responder.send_error(Error::NoPath(why.to_owned())),
    }
}
