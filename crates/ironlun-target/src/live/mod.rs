//! The running configuration and changing it while the daemon serves:
//! the operator's API, `ironlun admin apply` and SIGHUP all come here
//! with a whole new configuration (a TOML document), which is checked,
//! compared with the running one ([`diff::plan`]) and applied
//! (`apply`) without disturbing sessions the change does not concern.
//! An API operation on one target checks that target alone (`scoped`),
//! and the targets it leaves alone stay the same objects, which the plan
//! and the apply pass over (`shared`): an operation costs about the
//! same at ten targets or a thousand.
//!
//! The running configuration and the file can differ: a change made
//! through the API is live at once but reaches the file only when it is
//! saved (`config save`, or at once with `save_on_change`). The daemon
//! counts such changes, warns of each, exposes the count in /metrics, and
//! says on a reload which changes applying the file makes (undoing
//! the unsaved ones).
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
use crate::metrics::ReloadResult;
use crate::registry::Registry;

mod apply;
pub mod diff;
pub mod edit;
mod hidden;
mod online;
mod portals;
mod scoped;
mod shared;

pub use apply::ApplyError;
pub use diff::{Change, Plan};
pub use hidden::redacted;
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
    /// Changes made through the API since the file was last read or
    /// written: what a reload or a restart would undo.
    unsaved: usize,
}

/// Where a change comes from: the operator's API (live, unsaved until
/// saved) or the configuration file (a reload: afterwards the running
/// configuration is the file's).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    Api,
    File,
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
                unsaved: 0,
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
        self.apply_text_from(text, dry_run, force, Origin::Api)
    }

    fn apply_text_from(
        &self,
        text: &str,
        dry_run: bool,
        force: bool,
        origin: Origin,
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
        self.apply_doc(doc, dry_run, force, origin)
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
        let new = guard.check(&doc).map_err(after_change)?;
        let doc = NewDoc::Whole(doc);
        self.apply_checked(&mut guard, new, doc, dry_run, force, Origin::Api)
    }

    /// As [`Live::apply_edit`] for an operation `f` that edits target
    /// `name` and nothing else: that target is checked alone
    /// (`scoped`), unless the whole document must decide (an error).
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
                self.apply_checked(&mut guard, s.config, doc, dry_run, force, Origin::Api)
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
        origin: Origin,
    ) -> Result<Outcome, ApplyError> {
        let mut guard = self.state();
        let mut doc = doc;
        if origin == Origin::Api {
            // `config show` hid the secrets; applied back, they stand for
            // the running ones.
            hidden::restore(&mut doc, &guard.doc);
        }
        let checked = guard.check(&doc);
        let new = match origin {
            Origin::Api => checked.map_err(after_change)?,
            Origin::File => checked?,
        };
        self.apply_checked(&mut guard, new, NewDoc::Whole(doc), dry_run, force, origin)
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
        origin: Origin,
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
            match origin {
                Origin::File => self.set_unsaved(st, 0),
                Origin::Api if !plan.changes.is_empty() => {
                    self.after_live_change(st, plan.changes.len());
                }
                Origin::Api => {}
            }
        }
        Ok(Outcome {
            changes: plan.changes,
            dry_run,
        })
    }

    /// SIGHUP: the file again, applied whole ([`Live::reload_file`]);
    /// without a file, sizes are looked at again (a grown file or
    /// device). The outcome is logged; nothing is returned. Either way,
    /// every LU its state files took offline reads them again
    /// ([`Live::bring_back_all`]).
    pub fn reload(&self) {
        self.reload_config();
        self.bring_back_all();
    }

    fn reload_config(&self) {
        if self.path().is_none() {
            crate::server::rescan(&self.registry);
            return;
        }
        let _ = self.reload_file(false, false);
    }

    /// Reads the configuration file again and applies it whole (SIGHUP,
    /// `ironlun admin config reload`), or with `dry_run` says what that
    /// would change. When live changes were not saved to the file, the
    /// log says so first, with every change applying the file makes
    /// (those changes undo them); `force` lets a removal log sessions
    /// out. A file that does not check changes nothing and is logged
    /// with its line and reason.
    pub fn reload_file(&self, dry_run: bool, force: bool) -> Result<Outcome, ApplyError> {
        let what = if dry_run {
            "reload (dry run)"
        } else {
            "reload"
        };
        let Some(path) = self.path() else {
            return Err(ApplyError::Refused(vec![
                "the daemon was started without a configuration file: there is nothing to reload"
                    .to_owned(),
            ]));
        };
        let text = std::fs::read_to_string(&path).map_err(|source| {
            let e = ConfigError::Read {
                path: path.clone(),
                source,
            };
            warn!("{what}: {e}; nothing changed");
            self.reloaded(dry_run, ReloadResult::Failed);
            ApplyError::Config(e)
        })?;
        let unsaved = self.state().unsaved;
        if unsaved > 0 && !dry_run {
            self.warn_reverts(&text, &path, unsaved);
        }
        match self.apply_text_from(&text, dry_run, force, Origin::File) {
            Ok(o) if o.changes.is_empty() => {
                info!("{what}: {} unchanged", path.display());
                if !dry_run {
                    crate::server::rescan(&self.registry);
                }
                self.reloaded(dry_run, ReloadResult::Unchanged);
                Ok(o)
            }
            Ok(o) => {
                info!(
                    "{what}: {}: {} change(s) {}",
                    path.display(),
                    o.changes.len(),
                    if dry_run { "planned" } else { "applied" }
                );
                self.reloaded(dry_run, ReloadResult::Applied);
                Ok(o)
            }
            Err(e) => {
                let hint = unsaved_hint(unsaved, &path);
                match &e {
                    // A configuration error names the file itself.
                    ApplyError::Config(_) => warn!("{what}: {e}; nothing changed{hint}"),
                    _ => warn!("{what}: {}: {e}; nothing changed{hint}", path.display()),
                }
                self.reloaded(dry_run, ReloadResult::Failed);
                Err(e)
            }
        }
    }

    /// Logs, before a reload, that `unsaved` live changes are not in the
    /// file and every change applying `text` makes.
    fn warn_reverts(&self, text: &str, path: &std::path::Path, unsaved: usize) {
        warn!(
            "reload: {unsaved} live change(s) made through the management API are not in {}: applying it undoes them",
            path.display()
        );
        if let Ok(plan) = self.apply_text_from(text, true, true, Origin::File) {
            for c in &plan.changes {
                warn!("reload: applying {} makes: {c}", path.display());
            }
        }
    }

    fn reloaded(&self, dry_run: bool, result: ReloadResult) {
        if !dry_run {
            self.registry.metrics.reloaded(result);
        }
    }

    /// Writes the running configuration to `path`, or to the file the
    /// daemon was started with; saved there, nothing is unsaved any more.
    pub fn save(&self, path: Option<PathBuf>) -> Result<PathBuf, SaveError> {
        let mut st = self.state();
        let own = st.path.clone();
        let path = path.or_else(|| own.clone()).ok_or(SaveError::NoPath)?;
        save(&path, &st.doc.to_string()).map_err(|source| SaveError::Io {
            path: path.clone(),
            source,
        })?;
        if own.as_ref() == Some(&path) {
            self.set_unsaved(&mut st, 0);
        }
        Ok(path)
    }

    /// Live changes made through the API and not in the file.
    pub fn unsaved(&self) -> usize {
        self.state().unsaved
    }

    /// After `n` changes made through the API: written to the file at
    /// once with `save_on_change`, else counted and warned of.
    fn after_live_change(&self, st: &mut State, n: usize) {
        if let (true, Some(path)) = (st.config.save_on_change, st.path.clone()) {
            match save(&path, &st.doc.to_string()) {
                Ok(()) => {
                    info!("saved to {} (save_on_change)", path.display());
                    self.set_unsaved(st, 0);
                    return;
                }
                Err(e) => warn!(
                    "save_on_change: {}: {e}; the change is live but not saved",
                    path.display()
                ),
            }
        }
        self.set_unsaved(st, st.unsaved.saturating_add(n));
        match &st.path {
            Some(p) => warn!(
                "{} live change(s) not saved to {}: a SIGHUP or a restart undoes them; `ironlun admin config save` keeps them (or set save_on_change = true)",
                st.unsaved,
                p.display()
            ),
            None => warn!(
                "{} live change(s): the daemon was started without a configuration file, so a restart loses them; `ironlun admin config save PATH` writes one",
                st.unsaved
            ),
        }
    }

    fn set_unsaved(&self, st: &mut State, n: usize) {
        st.unsaved = n;
        self.registry.metrics.unsaved_changes(n);
    }
}

/// Why `config save` wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    #[error("the daemon was started without a file: give a path to save to")]
    NoPath,
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A change through the API is checked as the document it leaves: its
/// errors name that, not the daemon's file, which nobody edited.
fn after_change(e: ApplyError) -> ApplyError {
    match e {
        ApplyError::Config(ConfigError::InFile { source, .. }) => {
            ApplyError::Config(ConfigError::AfterChange { source })
        }
        e => e,
    }
}

/// What a failed reload adds when live changes were not saved: how to
/// keep them or let the file win.
fn unsaved_hint(unsaved: usize, path: &std::path::Path) -> String {
    if unsaved == 0 {
        return String::new();
    }
    format!(
        " ({unsaved} live change(s) are not in {}: `ironlun admin config save` writes them to it; `ironlun admin --force config reload` applies the file anyway, logging out the sessions a removal concerns)",
        path.display()
    )
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
