//! The Grafana dashboard (dist/grafana-ironlun.json) against the daemon
//! it draws: every metric name in its PromQL (panel queries and template
//! variables) must be a sample a real daemon exposes, so a renamed or
//! dropped metric fails here rather than as an empty panel. No Grafana
//! or Prometheus is needed: the names are taken out of the expressions by
//! a small PromQL lexer, itself tested on expressions with known names.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::collections::BTreeSet;

use ironlun_wire::{TmfFunction, TmfResponse};
use serde_json::Value;
use support::{http_get, Raw, Target};

const DASHBOARD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/dist/grafana-ironlun.json");
const NAME: &str = "iqn.2026-11.test:dashboard";

/// PromQL's aggregation operators and keywords: never metric names.
const KEYWORDS: [&str; 21] = [
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
    "nan",
];

/// Keywords followed by a list of label names in parentheses.
const LABEL_LISTS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The index just past the bracket that closes the one at `open`
/// (quoted strings inside are skipped whole).
fn past_closing(s: &[char], open: usize, close: char) -> usize {
    let mut i = open + 1;
    while let Some(&c) = s.get(i) {
        match c {
            '"' | '\'' | '`' => i = past_string(s, i),
            c if c == close => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// The index just past the string literal starting at `open`.
fn past_string(s: &[char], open: usize) -> usize {
    let quote = s[open];
    let mut i = open + 1;
    while let Some(&c) = s.get(i) {
        match c {
            '\\' if quote != '`' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    i
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// The metric names a PromQL expression selects: identifiers that are not
/// functions (followed by '('), keywords, label names (inside `{}` or a
/// `by (...)` list), durations (inside `[]`), numbers or Grafana
/// variables (`$x`).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let s: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    while let Some(&c) = s.get(i) {
        match c {
            '"' | '\'' | '`' => i = past_string(&s, i),
            '{' => i = past_closing(&s, i, '}'),
            '[' => i = past_closing(&s, i, ']'),
            '$' => {
                i += 1;
                while s
                    .get(i)
                    .is_some_and(|c| ident_char(*c) || *c == '{' || *c == '}')
                {
                    i += 1;
                }
            }
            c if c.is_ascii_digit() || c == '.' => {
                while s
                    .get(i)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '.')
                {
                    i += 1;
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while s.get(i).is_some_and(|c| ident_char(*c)) {
                    i += 1;
                }
                let word: String = s[start..i].iter().collect();
                let mut next = i;
                while s.get(next).is_some_and(|c| c.is_whitespace()) {
                    next += 1;
                }
                let call = s.get(next) == Some(&'(');
                if LABEL_LISTS.contains(&word.as_str()) {
                    if call {
                        i = past_closing(&s, next, ')');
                    }
                } else if !call && !KEYWORDS.contains(&word.to_ascii_lowercase().as_str()) {
                    names.insert(word);
                }
            }
            _ => i += 1,
        }
    }
    names
}

/// A template variable's query: the series selector of
/// `label_values(selector, label)` (the label is not a metric; nothing
/// for `label_values(label)`), else the query itself.
fn variable_expr(query: &str) -> String {
    let Some(inner) = query
        .trim()
        .strip_prefix("label_values(")
        .and_then(|q| q.strip_suffix(')'))
    else {
        return query.to_owned();
    };
    let s: Vec<char> = inner.chars().collect();
    let mut i = 0;
    while let Some(&c) = s.get(i) {
        match c {
            '{' => i = past_closing(&s, i, '}'),
            ',' => return s[..i].iter().collect(),
            _ => i += 1,
        }
    }
    String::new()
}

/// Every PromQL expression of the dashboard: each panel's targets (rows
/// nest panels) and each query variable.
fn expressions(dashboard: &Value) -> Vec<String> {
    fn panels(list: &Value, out: &mut Vec<String>) {
        for p in list.as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(e) = t["expr"].as_str() {
                    out.push(e.to_owned());
                }
            }
            panels(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    panels(&dashboard["panels"], &mut out);
    for v in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if v["type"] != "query" {
            continue;
        }
        let q = v["query"]["query"].as_str().or(v["query"].as_str());
        out.push(variable_expr(q.expect("a query variable's query")));
    }
    out
}

/// The sample names of an OpenMetrics text (`ironlun_logins_total`,
/// `..._bucket`): what PromQL selects.
fn sample_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_lexer_finds_metric_names_and_only_them() {
    let names = |e: &str| metric_names(e).into_iter().collect::<Vec<_>>();
    assert_eq!(
        names(
            r#"histogram_quantile(0.99, sum by (target, le) (rate(a_bucket{op=~"read|write", x="}"}[$__rate_interval])))"#
        ),
        ["a_bucket"]
    );
    assert_eq!(
        names(r#"sum(rate(b_total{job=~"$job"}[5m])) by (job) / on (job) group_left c > 0"#),
        ["b_total", "c"]
    );
    assert_eq!(names("x * on (a) group_left (b, c) y"), ["x", "y"]);
    assert_eq!(
        names("time() - max(d offset 1h) unless e and bool 1e3"),
        ["d", "e"]
    );
    assert_eq!(names(r#"topk(3, f) or ${var} + 'x y'"#), ["f"]);
    assert_eq!(
        variable_expr(r#"label_values(g{a="b,c"}, target)"#),
        r#"g{a="b,c"}"#
    );
    assert_eq!(variable_expr("label_values(job)"), "");
    assert_eq!(variable_expr("query_result(h)"), "query_result(h)");
}

#[test]
fn every_metric_the_grafana_dashboard_uses_is_exposed() {
    let text = std::fs::read_to_string(DASHBOARD).unwrap();
    let dashboard: Value = serde_json::from_str(&text).unwrap();
    let used: BTreeSet<String> = expressions(&dashboard)
        .iter()
        .flat_map(|e| metric_names(e))
        .collect();
    // What the issue asks the dashboard to show, so that a lexer that
    // found nothing cannot pass.
    for name in [
        "ironlun_lun_commands_total",
        "ironlun_lun_bytes_total",
        "ironlun_lun_command_duration_seconds_bucket",
        "ironlun_initiator_sessions",
        "ironlun_logins_total",
        "ironlun_lun_failed_commands_total",
        "ironlun_lun_offline",
        "ironlun_config_unsaved_changes",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
    ] {
        assert!(
            used.contains(name),
            "the dashboard does not show {name}: {used:?}"
        );
    }

    // A daemon with everything that has series only once it exists: a
    // thin LUN (allocation), a logged-in session (by initiator) and a
    // task management request (by function and response).
    let t = Target::start(&[
        "--name",
        NAME,
        "--lun",
        "ram:8MiB,thin",
        "--stats",
        "127.0.0.1:0",
    ]);
    let mut session = Raw::connect(t.addr);
    assert_eq!(
        session
            .login(NAME, [0x80, 0, 0, 0, 0x4d, 2], &[])
            .0
            .status
            .class(),
        0
    );
    assert_eq!(
        session.tmf(TmfFunction::LOGICAL_UNIT_RESET, 0),
        TmfResponse::FUNCTION_COMPLETE
    );
    let (status, body) = http_get(t.stats_addr(), "/metrics");
    assert_eq!(status, 200, "{body}");
    let exposed = sample_names(&body);
    let missing: Vec<&String> = used.difference(&exposed).collect();
    assert!(
        missing.is_empty(),
        "the dashboard uses metrics the daemon does not expose: {missing:?}\n{body}"
    );
    drop(session);
}
