//! The running configuration and changing it while the daemon serves:
//! the operator's API, `ironlun admin apply` and SIGHUP all come here
//! with a whole new configuration (a TOML document), which is checked,
//! compared with the running one ([`diff::plan`]) and applied
//! ([`apply`]) without disturbing sessions the change does not concern.
//! An API operation on one target checks that target alone ([`scoped`]),
//! and the targets it leaves alone stay the same objects, which the plan
//! and the apply pass over ([`shared`]): an operation costs about the
//! same at ten targets or a thousand.
//!
//! What must not happen: half a change. Everything that can fail (a
//! backend that does not open, a portal that does not bind, a resize the
//! store refuses) is done before the new state is put in place, and undone
//! if a later step fails.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;
use toml_edit::DocumentMut;
use tracing::{info, warn};

use crate::config::{Config, ConfigError, Overrides};
use crate::registry::Registry;

mod apply;
pub mod diff;
pub mod edit;
mod online;
mod portals;
mod scoped;
mod shared;

pub use apply::ApplyError;
pub use diff::{Change, Plan};
pub use online::BroughtBack;
pub use portals::Accepted;

/// The running configuration, the document it came from, and what turns
/// a document into a configuration.
pub struct Live {
    pub registry: Arc<Registry>,
    state: Mutex<State>,
    /// The connections' runtime: portals a change binds accept there,
    /// whichever thread applies it (the API has a runtime of its own).
    runtime: Option<tokio::runtime::Handle>,
    /// Built in code ([`Live::fixed`]): no document, so no change.
    fixed: bool,
}

struct State {
    config: Config,
    /// The configuration as TOML: the file as read (comments and layout
    /// kept), or one written from the flags the daemon started with.
    doc: DocumentMut,
    /// The file SIGHUP reads again and `config save` writes.
    path: Option<PathBuf>,
    /// Flags that stay on top of the file (`--allow`, `--chap`, …).
    overrides: Overrides,
    portals: portals::Portals,
}

/// The document a checked change leaves: a whole new one, or the running
/// one with one target's table replaced.
enum NewDoc {
    Whole(DocumentMut),
    Target(scoped::Splice),
}

/// What an apply did, or would do (`dry_run`).
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub changes: Vec<Change>,
    pub dry_run: bool,
}

impl Live {
    /// The state of a daemon that started with `config`, read from
    /// `overrides` (the file they name, or the flags), serving through
    /// `registry` with its portals bound to `bound`.
    pub fn new(
        registry: Arc<Registry>,
        config: Config,
        overrides: &Overrides,
        bound: Vec<(SocketAddr, tokio::net::TcpListener)>,
    ) -> Result<Live, ConfigError> {
        let (doc, path, overrides) = match &overrides.config {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                    path: p.clone(),
                    source,
                })?;
                let doc = edit::parse(&text).map_err(|e| e.in_file(Some(p)))?;
                // Absolute, so `config save` and SIGHUP find the same file
                // whatever the working directory becomes.
                let path = std::path::absolute(p).unwrap_or_else(|_| p.clone());
                (doc, Some(path), overrides.on_top_of_file())
            }
            None => (overrides.as_document(), None, Overrides::default()),
        };
        Ok(Live::with_doc(
            registry, config, doc, path, overrides, bound, false,
        ))
    }

    /// The state of a daemon whose `config` was built in code, not read
    /// from a file or flags: it has no document that describes it, so
    /// every change is refused rather than planned from an empty one.
    pub fn fixed(
        registry: Arc<Registry>,
        config: Config,
        bound: Vec<(SocketAddr, tokio::net::TcpListener)>,
    ) -> Live {
        let (doc, o) = (DocumentMut::new(), Overrides::default());
        Live::with_doc(registry, config, doc, None, o, bound, true)
    }

    fn with_doc(
        registry: Arc<Registry>,
        config: Config,
        doc: DocumentMut,
        path: Option<PathBuf>,
        overrides: Overrides,
        bound: Vec<(SocketAddr, tokio::net::TcpListener)>,
        fixed: bool,
    ) -> Live {
        Live {
            registry,
            runtime: tokio::runtime::Handle::try_current().ok(),
            fixed,
            state: Mutex::new(State {
                config,
                doc,
                path,
                overrides,
                portals: portals::Portals::new(bound),
            }),
        }
    }

    /// Refuses any change to a [`Live::fixed`] configuration.
    fn editable(&self) -> Result<(), ApplyError> {
        if self.fixed {
            return Err(ApplyError::Refused(vec![
                "this target's configuration was built in code (Server::bind), not read from a file or flags, so there is no document to change".to_owned(),
            ]));
        }
        Ok(())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts accepting on every portal; connections arrive on `tx`.
    pub fn start_accepting(&self, tx: mpsc::Sender<Accepted>) {
        self.state().portals.start(tx);
    }

    /// Stops accepting everywhere (shutdown).
    pub fn stop_accepting(&self) {
        self.state().portals.stop_all();
    }

    /// The running configuration as TOML.
    pub fn document(&self) -> String {
        self.state().doc.to_string()
    }

    /// The running configuration.
    pub fn config(&self) -> Config {
        self.state().config.clone()
    }

    /// The configuration file, if the daemon was started with one.
    pub fn path(&self) -> Option<PathBuf> {
        self.state().path.clone()
    }

    /// Applies the whole document `text` (`admin apply`, SIGHUP): plans
    /// the difference and, unless `dry_run`, carries it out. `force` lets
    /// a removal log out the sessions it concerns.
    pub fn apply_text(
        &self,
        text: &str,
        dry_run: bool,
        force: bool,
    ) -> Result<Outcome, ApplyError> {
        self.editable()?;
        let doc = match edit::parse(text) {
            Ok(d) => d,
            // The configuration parser's error names the line.
            Err(e) => {
                let path = self.path();
                return Err(ApplyError::Config(
                    Config::from_toml(text, path.as_deref()).err().unwrap_or(e),
                ));
            }
        };
        self.apply_doc(doc, dry_run, force)
    }

    /// Edits the running document with `f` (an API operation) and
    /// applies the result. The lock is held from the copy of the document
    /// to the end, so that two operations at once cannot undo each other.
    pub fn apply_edit(
        &self,
        f: impl FnOnce(&mut DocumentMut) -> Result<(), edit::EditError>,
        dry_run: bool,
        force: bool,
    ) -> Result<Outcome, ApplyError> {
        self.editable()?;
        let mut guard = self.state();
        let mut doc = guard.doc.clone();
        f(&mut doc).map_err(ApplyError::Edit)?;
        let new = guard.check(&doc)?;
        self.apply_checked(&mut guard, new, NewDoc::Whole(doc), dry_run, force)
    }

    /// As [`Live::apply_edit`] for an operation `f` that edits target
    /// `name` and nothing else: that target is checked alone
    /// ([`scoped`]), unless the whole document must decide (an error).
    pub fn apply_target_edit(
        &self,
        name: &str,
        f: impl Fn(&mut DocumentMut) -> Result<(), edit::EditError>,
        dry_run: bool,
        force: bool,
    ) -> Result<Outcome, ApplyError> {
        self.editable()?;
        let mut guard = self.state();
        match scoped::stage(&guard, name, &f) {
            Some(s) => {
                let doc = NewDoc::Target(s.splice);
                self.apply_checked(&mut guard, s.config, doc, dry_run, force)
            }
            None => {
                drop(guard);
                self.apply_edit(f, dry_run, force)
            }
        }
    }

    fn apply_doc(
        &self,
        doc: DocumentMut,
        dry_run: bool,
        force: bool,
    ) -> Result<Outcome, ApplyError> {
        let mut guard = self.state();
        let new = guard.check(&doc)?;
        self.apply_checked(&mut guard, new, NewDoc::Whole(doc), dry_run, force)
    }

    /// Plans the way from the running configuration to `new` (checked)
    /// and, unless `dry_run`, carries it out; then `new` and its document
    /// are the running ones.
    fn apply_checked(
        &self,
        st: &mut State,
        new: Config,
        doc: NewDoc,
        dry_run: bool,
        force: bool,
    ) -> Result<Outcome, ApplyError> {
        let plan = diff::plan(&st.config, &new);
        if !plan.refused.is_empty() {
            return Err(ApplyError::Refused(plan.refused));
        }
        if !dry_run {
            let _runtime = self.runtime.as_ref().map(tokio::runtime::Handle::enter);
            apply::apply(
                &self.registry,
                &mut st.portals,
                &st.config,
                &new,
                &plan,
                force,
            )?;
            for c in &plan.changes {
                info!("applied: {c}");
            }
            st.config = new;
            match doc {
                NewDoc::Whole(d) => st.doc = d,
                NewDoc::Target(s) => s.splice(&mut st.doc),
            }
        }
        Ok(Outcome {
            changes: plan.changes,
            dry_run,
        })
    }

    /// SIGHUP: the file again, applied whole; without a file, sizes are
    /// looked at again (a grown file or device). A file that does not
    /// check changes nothing and is logged with its line and reason.
    /// Either way, every LU its state files took offline reads them
    /// again ([`Live::bring_back_all`]).
    pub fn reload(&self) {
        self.reload_config();
        self.bring_back_all();
    }

    fn reload_config(&self) {
        let Some(path) = self.path() else {
            crate::server::rescan(&self.registry);
            return;
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                warn!("SIGHUP: {}: {e}; nothing changed", path.display());
                return;
            }
        };
        match self.apply_text(&text, false, false) {
            Ok(o) if o.changes.is_empty() => {
                info!("SIGHUP: {} unchanged", path.display());
                crate::server::rescan(&self.registry);
            }
            Ok(o) => info!(
                "SIGHUP: {}: {} change(s) applied",
                path.display(),
                o.changes.len()
            ),
            // A configuration error names the file itself.
            Err(e @ ApplyError::Config(_)) => warn!("SIGHUP: {e}; nothing changed"),
            Err(e) => warn!("SIGHUP: {}: {e}; nothing changed", path.display()),
        }
    }
}

/// Writes `text` to `path` atomically (new file, fsync, rename, fsync of
/// the directory), readable by the owner only.
pub fn save(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    crate::state_file::StateFile::at(path).replace(text)
}

impl State {
    /// The configuration a document gives, with the start's flags on top.
    fn check(&self, doc: &DocumentMut) -> Result<Config, ApplyError> {
        let path = self.path.as_deref();
        let mut cfg = Config::from_toml(&doc.to_string(), path).map_err(ApplyError::Config)?;
        self.overrides
            .apply_on_top(&mut cfg)
            .map_err(ApplyError::Config)?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests;
