//! The configuration as the daemon would run it, written in the file's
//! own terms: [`Config::effective_toml`], what `ironlun target --check`
//! prints. Every default is filled in (`[defaults]` merged into each
//! target's `params`, the state directory beside the file, the
//! management socket in it), each value a command-line flag set is
//! marked with the flag in a comment, and every secret is shown as
//! `USER:<hidden>` (as `GET /v1/config` shows them). With the secrets put
//! back, the text loads to the same configuration (the tests below).

use std::path::Path;

use ironlun_proto::chap::ChapPolicy;
use ironlun_proto::keys::Value as KeyValue;
use ironlun_proto::offers::{Offers, OFFER_KEYS};
use ironlun_units::format_size;
use toml_edit::{Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};

use super::{
    every_text, Config, DefaultMap, InitiatorEntry, IoEngine, Limits, Overrides, TargetConfig,
    TcpTuning, HIDDEN_SECRET,
};

/// The log filter the daemon uses when neither `--log` nor the file's
/// `log` names one.
const DEFAULT_LOG: &str = "info";

impl Config {
    /// This configuration as TOML, defaults filled in, the values `flags`
    /// set (and `--log`, `log_flag`) marked, secrets hidden.
    pub fn effective_toml(&self, flags: &Overrides, log_flag: Option<&str>) -> String {
        let by = Marks {
            flags,
            log: log_flag.is_some(),
        };
        let mut doc = DocumentMut::new();
        top_level(&mut doc, self, &by, log_flag);
        doc.insert("limits", Item::Table(limits(&self.limits)));
        doc.insert("tcp", Item::Table(tcp(&self.tcp, &by)));
        if let Some(p) = &self.discovery_chap {
            let mut d = Table::new();
            chap(&mut d, p, by.chap());
            doc.insert("discovery", Item::Table(d));
        }
        let mut targets = ArrayOfTables::new();
        for t in &self.targets {
            targets.push(target(t, &by));
        }
        doc.insert("target", Item::ArrayOfTables(targets));
        format!("{}{doc}", header(self.source.as_deref()))
    }
}

fn header(source: Option<&Path>) -> String {
    let of = source.map_or("the command line".to_owned(), |p| p.display().to_string());
    format!(
        "# The effective configuration of {of}: every default filled in,\n\
         # values set by command-line flags marked with the flag, secrets\n\
         # hidden as USER:{HIDDEN_SECRET}.\n"
    )
}

/// Which flags were given: each value they set gets the flag as a
/// comment.
struct Marks<'a> {
    flags: &'a Overrides,
    log: bool,
}

impl Marks<'_> {
    /// `--chap`/`--mutual-chap` replace every target's CHAP and
    /// discovery's.
    fn chap(&self) -> bool {
        self.flags.chap.is_some() || self.flags.mutual_chap.is_some()
    }
}

/// `v` with `# FLAG` after it when `set`.
fn marked(v: impl Into<Value>, set: bool, flag: &str) -> Item {
    let mut v: Value = v.into();
    if set {
        v.decor_mut().set_suffix(format!(" # {flag}"));
    }
    Item::Value(v)
}

fn int(n: impl TryInto<i64>) -> Value {
    Value::from(n.try_into().unwrap_or(i64::MAX))
}

fn path(p: &Path) -> Value {
    Value::from(p.to_string_lossy().as_ref())
}

fn strings<I: IntoIterator<Item = S>, S: AsRef<str>>(items: I) -> Value {
    let mut a = Array::new();
    for s in items {
        a.push(s.as_ref());
    }
    Value::Array(a)
}

fn top_level(doc: &mut DocumentMut, cfg: &Config, by: &Marks<'_>, log_flag: Option<&str>) {
    let o = by.flags;
    let listen = strings(cfg.listen.iter().map(ToString::to_string));
    doc.insert("listen", marked(listen, !o.listen.is_empty(), "--listen"));
    let log = log_flag.or(cfg.log.as_deref()).unwrap_or(DEFAULT_LOG);
    doc.insert("log", marked(log, by.log, "--log"));
    if let Some(d) = &cfg.state_dir {
        doc.insert(
            "state_dir",
            marked(path(d), o.state_dir.is_some(), "--state-dir"),
        );
    }
    if let Some(s) = cfg.stats {
        doc.insert("stats", marked(s.to_string(), o.stats.is_some(), "--stats"));
    }
    let engine = match cfg.io_engine {
        IoEngine::Uring => "uring",
        IoEngine::Pool => "pool",
    };
    doc.insert(
        "io_engine",
        marked(engine, o.io_engine.is_some(), "--io-engine"),
    );
    if let Some(p) = cfg.admin_socket() {
        let set = o.admin_socket.is_some();
        doc.insert("admin_socket", marked(path(&p), set, "--admin-socket"));
    }
    if let Some(h) = &cfg.admin_http {
        let set = o.admin_http.is_some();
        doc.insert(
            "admin_http",
            marked(h.addr.to_string(), set, "--admin-http"),
        );
        let set = o.admin_token_file.is_some();
        let file = path(&h.token_file);
        doc.insert("admin_token_file", marked(file, set, "--admin-token-file"));
    }
    doc.insert("save_on_change", Item::Value(cfg.save_on_change.into()));
    if let Some(d) = &cfg.admin_save_dir {
        let set = o.admin_save_dir.is_some();
        doc.insert("admin_save_dir", marked(path(d), set, "--admin-save-dir"));
    }
}

fn limits(l: &Limits) -> Table {
    let mut t = Table::new();
    let secs = |d: std::time::Duration| int(d.as_secs());
    t.insert("max_sessions", Item::Value(int(l.max_sessions)));
    t.insert("max_connections", Item::Value(int(l.max_connections)));
    t.insert("login_timeout_secs", Item::Value(secs(l.login_timeout)));
    t.insert("login_text_limit", Item::Value(int(l.login_text_limit)));
    // 0: no NOP-In pings (the file's way to say none).
    let nop = l.nop_interval.map_or(int(0), secs);
    t.insert("nop_interval_secs", Item::Value(nop));
    t.insert("nop_timeout_secs", Item::Value(secs(l.nop_timeout)));
    t.insert("shutdown_grace_secs", Item::Value(secs(l.shutdown_grace)));
    let max = format_size(u64::from(l.max_transfer_bytes));
    t.insert("max_transfer_length", Item::Value(max.into()));
    t
}

fn tcp(tcp: &TcpTuning, by: &Marks<'_>) -> Table {
    let o = by.flags;
    let mut t = Table::new();
    // Absent: the kernel's autotuning.
    for (key, n) in [
        ("send_buffer", tcp.send_buffer),
        ("recv_buffer", tcp.recv_buffer),
    ] {
        if let Some(n) = n {
            let v = format_size(u64::from(n));
            t.insert(key, marked(v, o.tcp_window.is_some(), "--tcp-window"));
        }
    }
    t.insert("nodelay", marked(tcp.nodelay, o.tcp_nagle, "--tcp-nagle"));
    t.insert(
        "quickack",
        marked(tcp.quickack, o.tcp_quickack, "--tcp-quickack"),
    );
    // In microseconds, as it is written ("0us": off).
    let busy_poll = format!("{}us", tcp.busy_poll.as_nanos() as f64 / 1000.0);
    t.insert(
        "busy_poll",
        marked(busy_poll, o.busy_poll.is_some(), "--busy-poll"),
    );
    t
}

/// `USER:<hidden>`: the user is no secret.
fn hidden(user: &str) -> String {
    format!("{user}:{HIDDEN_SECRET}")
}

/// `chap` and `mutual_chap` of `p` into `t`, marked when the flags
/// `set` them.
fn chap(t: &mut Table, p: &ChapPolicy, set: bool) {
    t.insert("chap", marked(hidden(&p.initiator.user), set, "--chap"));
    if let Some(m) = &p.target {
        t.insert("mutual_chap", marked(hidden(&m.user), set, "--mutual-chap"));
    }
}

fn target(t: &TargetConfig, by: &Marks<'_>) -> Table {
    let o = by.flags;
    let mut out = Table::new();
    // --name and --lun make the one target of a configuration without a
    // file.
    out.insert("name", marked(t.name.as_str(), o.name.is_some(), "--name"));
    if let Some(a) = &t.alias {
        out.insert("alias", Item::Value(a.as_str().into()));
    }
    out.insert("portal_group_tag", Item::Value(int(t.portal_group_tag)));
    let map = match t.default_map {
        DefaultMap::All => "all",
        DefaultMap::None => "none",
    };
    out.insert("default_map", Item::Value(map.into()));
    let allow = strings(t.acl.entries());
    out.insert("allow", marked(allow, !o.allow.is_empty(), "--allow"));
    if let Some(p) = &t.chap {
        chap(&mut out, p, by.chap());
    }
    out.insert("params", Item::Table(params(&t.offers, t.queue_depth, by)));
    let mut luns = ArrayOfTables::new();
    for l in &t.luns {
        let mut lt = Table::new();
        lt.insert("number", Item::Value(int(l.number)));
        lt.insert(
            "spec",
            marked(l.spec.to_string(), !o.luns.is_empty(), "--lun"),
        );
        if let Some(s) = &l.schedule {
            lt.insert("snapshot_every", Item::Value(every_text(s.every).into()));
            lt.insert("snapshot_keep", Item::Value(int(s.keep)));
            lt.insert("snapshot_prefix", Item::Value(s.prefix.as_str().into()));
        }
        luns.push(lt);
    }
    out.insert("lun", Item::ArrayOfTables(luns));
    if !t.initiators.is_empty() {
        let mut entries = ArrayOfTables::new();
        for e in &t.initiators {
            entries.push(initiator(e));
        }
        out.insert("initiator", Item::ArrayOfTables(entries));
    }
    out
}

/// The file's `params`: the queue depth, then each offered key in the
/// table's order, under its file name.
fn params(o: &Offers, queue_depth: u32, by: &Marks<'_>) -> Table {
    let mut t = Table::new();
    let qd_set = by.flags.queue_depth.is_some();
    t.insert(
        "queue_depth",
        marked(int(queue_depth), qd_set, "--queue-depth"),
    );
    for k in OFFER_KEYS {
        let v = match (k.get)(o) {
            KeyValue::Bool(b) => Value::from(b),
            KeyValue::Number(n) => int(n),
            KeyValue::Text(list) => strings(list.split(',')),
        };
        t.insert(k.field, Item::Value(v));
    }
    t
}

/// An initiator entry, its map in the file's `{ lun, target_lun,
/// read_only }` form.
fn initiator(e: &InitiatorEntry) -> Table {
    let mut t = Table::new();
    t.insert("name", Item::Value(e.name.as_str().into()));
    if let Some(m) = &e.luns {
        let mut a = Array::new();
        for x in m {
            let mut it = InlineTable::new();
            it.insert("lun", int(x.lun));
            it.insert("target_lun", int(x.target_lun));
            it.insert("read_only", x.read_only.into());
            a.push(Value::InlineTable(it));
        }
        t.insert("luns", Item::Value(Value::Array(a)));
    }
    if let Some(p) = &e.chap {
        // An entry's own credentials come from the file, never a flag.
        chap(&mut t, p, false);
    }
    t
}

#[cfg(test)]
mod tests;
