//! The data files parse and pass their checks; matching, ratio, flag and
//! share on hand-made rows (no sockets, no runs).

use std::collections::BTreeMap;

use super::compare::{ratio, share, within};
use super::*;

#[test]
fn every_study_has_a_file_that_parses_and_names_where_each_cell_stands() {
    for (name, _) in crate::reproduce::NAMES {
        let f = load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(f.study, name);
        assert!(!f.cell.is_empty(), "{name}");
        for c in &f.cell {
            c.at.check().unwrap();
            assert!(!c.at.to_string().is_empty());
            assert!(c.canonical().is_some(), "{name}: {}", c.at);
            assert!(c.metric.units().contains(&c.unit), "{name}: {}", c.at);
        }
    }
    // The tables as the studies printed them: 16 TCP and 96 WAN cells
    // plus 24 LAN cells; 2 x 3 x 2 + 10 x 3 x 2 Broadcom and 24 Intel.
    assert_eq!(load("wan-tuning").unwrap().cell.len(), 136);
    assert_eq!(load("app-profiles").unwrap().cell.len(), 96);
}

#[test]
fn the_files_on_disk_are_the_ones_compiled_in() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/published");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut compiled: Vec<String> = FILES.iter().map(|(n, _)| format!("{n}.toml")).collect();
    compiled.sort();
    assert_eq!(on_disk, compiled);
}

const ONE: &str = r#"
study = "wan-tuning"
source = "s"
convention = "c"
[[cell]]
metric = "throughput"
value = 19.3
unit = "MB/s"
where = { table = "Table 2", row = "up", column = "0 ms" }
conditions = { test = "tcp", rtt = "0ms" }
"#;

#[test]
fn a_file_is_refused_for_unknown_fields_units_places_and_duplicates() {
    StudyFile::parse(ONE).unwrap();
    let bad = [
        (
            ONE.replace("unit = \"MB/s\"", "unit = \"MBps\""),
            "unknown variant",
        ),
        (
            ONE.replace("unit = \"MB/s\"", "unit = \"IOPS\""),
            "not a unit of",
        ),
        (
            ONE.replace("source = \"s\"", "source = \"s\"\ncolour = 1"),
            "unknown field",
        ),
        (
            ONE.replace("value = 19.3", "value = 19.3\nsize = 1"),
            "unknown field",
        ),
        (ONE.replace(", row = \"up\"", ""), "row and column"),
        (
            ONE.replace(
                "table = \"Table 2\", row = \"up\", column = \"0 ms\"",
                "section = \"4\"",
            ),
            "paragraph",
        ),
        (
            ONE.replace("value = 19.3", "range = [2.0, 1.0]"),
            "low to high",
        ),
        (
            ONE.replace("value = 19.3", "value = -1.0"),
            "not a throughput",
        ),
        (
            ONE.replace("study = \"wan-tuning\"", "study = \"nope\""),
            "unknown study",
        ),
        (ONE.replace("rtt = \"0ms\"", "rtt = 0"), "invalid type"),
    ];
    for (text, want) in &bad {
        let e = StudyFile::parse(text).unwrap_err();
        assert!(e.contains(want), "{want}: {e}");
    }
    // The same cell twice: by its conditions, then by its place.
    let twice = format!("{ONE}[[cell]]{}", ONE.split("[[cell]]").nth(1).unwrap());
    let e = StudyFile::parse(&twice).unwrap_err();
    assert!(e.contains("duplicates"), "{e}");
    let moved = format!(
        "{ONE}[[cell]]{}",
        ONE.split("[[cell]]")
            .nth(1)
            .unwrap()
            .replace("rtt = \"0ms\"", "rtt = \"2ms\"")
    );
    let e = StudyFile::parse(&moved).unwrap_err();
    assert!(e.contains("two cells at"), "{e}");
}

#[test]
fn units_convert_to_one_per_metric() {
    let mut f = StudyFile::parse(ONE).unwrap();
    let c = &mut f.cell[0];
    c.unit = Unit::MibPerS;
    c.value = Some(100.0);
    assert!((c.canonical().unwrap() - 104.8576).abs() < 1e-9);
    c.metric = Metric::Latency;
    c.unit = Unit::Ms;
    c.value = Some(4.8);
    assert!((c.canonical().unwrap() - 4800.0).abs() < 1e-9);
    assert_eq!(Metric::Latency.canonical_unit(), Unit::Us);
    assert_eq!(Metric::Throughput.canonical_unit(), Unit::MbPerS);
    c.value = None;
    c.range = Some([0.13, 0.16]);
    assert!((c.canonical().unwrap() - 145.0).abs() < 1e-9);
    assert_eq!(c.as_printed(), "0.13-0.16 ms");
}

#[test]
fn ratio_flag_and_share() {
    assert_eq!(ratio(Some(20.0), Some(15.0)), Some(0.75));
    assert_eq!(ratio(Some(0.0), Some(1.0)), None);
    assert_eq!(ratio(None, Some(1.0)), None);
    assert_eq!(ratio(Some(1.0), None), None);
    assert!(within(0.75) && within(1.25) && within(1.0));
    assert!(!within(0.749) && !within(1.251));
    let f = StudyFile::parse(&format!(
        "{ONE}{}",
        [("2ms", 10.0), ("10ms", 4.0), ("50ms", 1.0)]
            .iter()
            .map(|(rtt, v)| format!(
                "[[cell]]\nmetric = \"throughput\"\nvalue = {v}\nunit = \"MB/s\"\n\
                 where = {{ table = \"Table 2\", row = \"up\", column = \"{rtt}\" }}\n\
                 conditions = {{ test = \"tcp\", rtt = \"{rtt}\" }}\n"
            ))
            .collect::<String>()
    ))
    .unwrap();
    let o = |rtt: &str, v: f64| {
        Observation::new(Metric::Throughput, &[("test", "tcp"), ("rtt", rtt)], v)
    };
    let observed = [
        o("0ms", 19.0).with_model(Some(19.2)), // 0.98: within
        o("2ms", 13.0),                        // 1.30: outside
        o("10ms", 3.0),                        // 0.75: within, at the edge
        o("100ms", 0.5),                       // no published cell
    ];
    let c = compare(&f, &observed);
    assert_eq!((c.published_cells, c.compared, c.within), (4, 3, 2));
    assert_eq!((c.not_measured, c.not_published), (1, 1));
    assert!((c.share_within_25pct.unwrap() - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(share(&c.cells), c.share_within_25pct);
    let first = &c.cells[0];
    assert_eq!(first.published, Some(19.3));
    assert_eq!(first.measured, Some(19.0));
    assert_eq!(first.model, Some(19.2));
    assert_eq!(first.within_25pct, Some(true));
    assert!(first.at.contains("Table 2") && first.at.contains("0 ms"));
    assert_eq!(c.cells[1].within_25pct, Some(false));
    let missing = &c.cells[3];
    assert_eq!(missing.status, Status::NotMeasured);
    assert_eq!((missing.measured, missing.ratio), (None, None));
    assert!(
        missing.note.contains("rtt (study 50ms, measured"),
        "{}",
        missing.note
    );
    let extra = &c.cells[4];
    assert_eq!(extra.status, Status::NotPublished);
    assert_eq!(extra.published, None);
    assert_eq!(extra.within_25pct, None);
    // Nothing compared: no share, not zero.
    let none = compare(&f, &[]);
    assert_eq!(none.share_within_25pct, None);
    assert_eq!(none.not_measured, 4);
}

#[test]
fn stand_ins_match_only_what_they_declare() {
    let f = StudyFile::parse(
        r#"
study = "target-backends"
source = "s"
convention = "c"
[[stand_in]]
key = "target"
published = "iscsi-scst"
measured = "ironlun"
why = "w"
[[cell]]
metric = "throughput"
value = 106.0
unit = "MB/s"
where = { table = "t", row = "NULLIO", column = "ISCSI-SCST" }
conditions = { test = "dd-read-raw", target = "iscsi-scst", backend = "null" }
[[cell]]
metric = "throughput"
value = 105.0
unit = "MB/s"
where = { table = "t", row = "NULLIO", column = "IET" }
conditions = { test = "dd-read-raw", target = "iet", backend = "null" }
[[cell]]
metric = "throughput"
value = 82.0
unit = "MB/s"
where = { table = "t", row = "FILEIO/CFQ", column = "ISCSI-SCST" }
conditions = { test = "dd-read-raw", target = "iscsi-scst", backend = "file", scheduler = "cfq" }
"#,
    )
    .unwrap();
    let null = Observation::new(
        Metric::Throughput,
        &[
            ("test", "dd-read-raw"),
            ("target", "ironlun"),
            ("backend", "null"),
        ],
        110.0,
    );
    let file = Observation::new(
        Metric::Throughput,
        &[
            ("test", "dd-read-raw"),
            ("target", "ironlun"),
            ("backend", "file"),
            ("scheduler", "not set"),
        ],
        300.0,
    );
    let c = compare(&f, &[null, file]);
    assert_eq!(c.cells[0].measured, Some(110.0));
    assert!(c.cells[0].note.contains("ironlun stands in for iscsi-scst"));
    // IET has no stand-in; the scheduler is a condition like any other.
    assert_eq!(c.cells[1].status, Status::NotMeasured);
    assert_eq!(c.cells[2].status, Status::NotMeasured);
    assert!(c.cells[2]
        .note
        .contains("scheduler (study cfq, measured not set)"));
    // The file row matched nothing published, so it stays as measured.
    assert_eq!(c.cells.len(), 4);
    assert_eq!(c.cells[3].status, Status::NotPublished);
    let conds: BTreeMap<String, String> = c.cells[3].conditions.clone();
    assert_eq!(conds.get("backend").map(String::as_str), Some("file"));
}

#[test]
fn the_report_shows_all_four_columns_the_flag_and_the_share() {
    let f = StudyFile::parse(ONE).unwrap();
    let c = compare(
        &f,
        &[
            Observation::new(Metric::Throughput, &[("test", "tcp"), ("rtt", "0ms")], 10.0)
                .with_model(Some(19.0)),
        ],
    );
    let t = render::text(&c);
    assert!(
        t.contains("published")
            && t.contains("measured")
            && t.contains("model")
            && t.contains("ratio")
    );
    assert!(t.contains("OFF") && t.contains("0.52"), "{t}");
    assert!(t.contains("0 of 1 compared cells within ±25 %"), "{t}");
    let none = compare(&f, &[]);
    assert!(render::text(&none)
        .contains("not measured, 1 cells: the reproduction measures no throughput"));
    let other = compare(
        &f,
        &[Observation::new(
            Metric::Throughput,
            &[("test", "tcp"), ("rtt", "9ms")],
            1.0,
        )],
    );
    assert_eq!(
        render::not_measured_by_reason(&other),
        [("the nearest measured row differs in rtt".to_owned(), 1)]
    );
    let h = render::html(&c);
    assert!(h.contains("<svg") && h.contains("class=off") && h.contains("Table 2"));
}

#[test]
fn the_scatter_has_a_point_per_compared_cell_over_the_band() {
    let two = format!(
        "{ONE}{}",
        r#"
[[cell]]
metric = "throughput"
value = 8.0
unit = "MB/s"
where = { table = "Table 2", row = "up", column = "10 ms" }
conditions = { test = "tcp", rtt = "10ms" }
"#
    );
    let f = StudyFile::parse(&two).unwrap();
    let obs = |rtt, v| Observation::new(Metric::Throughput, &[("test", "tcp"), ("rtt", rtt)], v);
    let c = compare(&f, &[obs("0ms", 10.0), obs("10ms", 9.0)]);
    let h = render::html(&c);
    assert_eq!(h.matches("data-chart=\"published\"").count(), 1);
    assert_eq!(h.matches("<circle class=\"pt\"").count(), 2);
    assert!(!h.contains("<path"), "points without a line");
    for needle in [
        "measured against published, MB/s",
        ">published (MB/s)</text>",
        ">measured (MB/s)</text>",
        ">within ±25 %</text>",
        ">outside ±25 %</text>",
        "published 19.30 MB/s, measured 10.00 MB/s, ratio 0.52</title>",
        "published 8.00 MB/s, measured 9.00 MB/s, ratio 1.12</title>",
        "<title>measured = published</title>",
        "<title>measured = published − 25 %</title>",
        "<title>measured = published + 25 %</title>",
    ] {
        assert!(h.contains(needle), "{needle}\n{h}");
    }
    assert_eq!(h.matches("<line class=\"rule solid\"").count(), 1);
    assert_eq!(h.matches("<line class=\"rule\"").count(), 2);
    // Within is the first run (its colour and key), outside the second.
    let run_of = |tip: &str| {
        const GROUP: &str = "<g class=\"run\" data-run=\"";
        let before = &h[..h.find(tip).unwrap()];
        let group = &before[before.rfind(GROUP).unwrap() + GROUP.len()..];
        group[..1].to_owned()
    };
    assert_eq!(
        (run_of("ratio 1.12"), run_of("ratio 0.52")),
        ("0".into(), "1".into())
    );
}
