//! `ironlun report` as a reader sees it: two real bench runs against a
//! null LUN, overlaid, rendered by headless Chromium. The page's script
//! must run without a console message, every chart must hold both runs'
//! points, nothing may be fetched, and the screenshot must show the two
//! runs' colours. The page and the screenshot are kept in
//! target/test-output/report/ (overlay.html, overlay.png).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;
use crate::support::browser;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use browser::Browser;
use support::{ironlun_ok as ok, Target};

/// The run colours the report gives the first two runs (Tableau 10's
/// first two, crates/ironlun-bench/src/report/svg.rs).
const RUN_COLOURS: [[u8; 3]; 2] = [[0x4e, 0x79, 0xa7], [0xf2, 0x8e, 0x2b]];

/// target/test-output/report, emptied.
fn out_dir() -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    let dir = target.join("test-output").join("report");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A 4 KiB random read run at queue depth `qd`, its JSON at `json`.
fn bench(url: &str, qd: &str, json: &Path) {
    ok(&[
        "bench",
        url,
        "--bs",
        "4k",
        "--read",
        "100",
        "--random",
        "100",
        "--qd",
        qd,
        "--time",
        "4s",
        "--ramp",
        "0",
        "--json",
        json.to_str().unwrap(),
    ]);
}

/// The value of attribute `name` on the dumped page's `<html>`.
fn html_attr<'a>(dom: &'a str, name: &str) -> &'a str {
    let start = dom.find("<html").expect("no <html> in the DOM");
    let tag = &dom[start..start + dom[start..].find('>').unwrap()];
    let key = format!("{name}=\"");
    let Some(at) = tag.find(&key) else {
        panic!("<html> has no {name} (did the page's script run?): {tag}");
    };
    let v = &tag[at + key.len()..];
    &v[..v.find('"').unwrap()]
}

/// `key=N` from the script's `data-report`.
fn field(report: &str, key: &str) -> usize {
    report
        .split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{key} missing from {report}"))
        .parse()
        .unwrap()
}

/// Per chart of kind `kind` in the DOM: (run, points) of each line.
fn lines(dom: &str, kind: &str) -> Vec<Vec<(String, usize)>> {
    let marker = format!("data-chart=\"{kind}\"");
    dom.match_indices(&marker)
        .map(|(at, _)| {
            let chart = &dom[at..];
            let chart = &chart[..chart.find("</svg>").unwrap()];
            chart
                .split("<path class=\"line\"")
                .skip(1)
                .map(|p| {
                    let attr = |k: &str| {
                        let v = &p[p.find(&format!(" {k}=\"")).unwrap() + k.len() + 3..];
                        v[..v.find('"').unwrap()].to_owned()
                    };
                    let points = attr("d").matches(['M', 'L']).count();
                    (attr("data-run"), points)
                })
                .collect()
        })
        .collect()
}

/// Checks the rendered DOM: the script ran, recorded no empty chart and
/// no fetch, and each chart holds both runs with their points.
fn check_dom(dom: &str) {
    let report = html_attr(dom, "data-report");
    assert_eq!(field(report, "empty"), 0, "{report}");
    // Four overview bar charts of one workload, two runs each.
    assert_eq!(field(report, "bars"), 8, "{report}");
    // And four line charts with a line per run.
    assert_eq!(field(report, "charts"), 8, "{report}");
    assert_eq!(field(report, "lines"), 8, "{report}");
    assert_eq!(
        html_attr(dom, "data-fetches"),
        "0",
        "the page fetched something"
    );
    let kinds = [
        ("exceedance", 10),
        ("distribution", 3),
        ("iops", 2),
        ("latency", 2),
    ];
    for (kind, least) in kinds {
        let charts = lines(dom, kind);
        assert_eq!(charts.len(), 1, "{kind}: one workload");
        let runs: Vec<&str> = charts[0].iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(runs, ["0", "1"], "{kind}: both runs overlaid");
        for (run, n) in &charts[0] {
            assert!(*n >= least, "{kind}: run {run} has {n} points");
        }
    }
    for name in ["qd2", "qd16"] {
        assert!(
            dom.contains(&format!(">{name}</text>")),
            "no legend for {name}"
        );
    }
}

/// Decodes the screenshot: (width, height, RGB pixels).
fn pixels(png: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let decoder = png::Decoder::new(std::fs::File::open(png).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.bit_depth, png::BitDepth::Eight, "{info:?}");
    let step = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    let px = buf[..info.buffer_size()]
        .chunks_exact(step)
        .map(|c| [c[0], c[1], c[2]])
        .collect();
    (info.width, info.height, px)
}

/// Checks the screenshot is the page, drawn: its size, many colours,
/// and both runs' colours over a fair area (bars, lines, keys).
fn check_png(png: &Path) {
    let (w, h, px) = pixels(png);
    assert_eq!((w, h), (1100, 2000));
    let distinct: HashSet<[u8; 3]> = px.iter().copied().collect();
    assert!(distinct.len() >= 100, "{} colours: blank?", distinct.len());
    let white = px.iter().filter(|p| **p == [255, 255, 255]).count();
    assert!(white < px.len() * 97 / 100, "almost all white");
    for c in RUN_COLOURS {
        let n = px.iter().filter(|p| **p == c).count();
        assert!(n >= 1000, "run colour {c:?} covers only {n} pixels");
    }
}

#[test]
fn two_bench_runs_overlay_in_a_report_chromium_renders() {
    let Some(chromium) = Browser::find() else {
        return;
    };
    let out = out_dir();
    let t = Target::start(&["--name", "iqn.2026-11.test:report", "--lun", "null:1GiB"]);
    let url = t.url("iqn.2026-11.test:report", 0);
    let (a, b) = (out.join("qd2.json"), out.join("qd16.json"));
    bench(&url, "2", &a);
    bench(&url, "16", &b);
    drop(t);
    let page = out.join("overlay.html");
    ok(&[
        "report",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    let dom = chromium.dump_dom(&page);
    assert!(dom.console().is_empty(), "console: {:?}", dom.console());
    check_dom(&dom.stdout);
    let png = out.join("overlay.png");
    let shot = chromium.screenshot(&page, &png, 1100, 2000);
    assert!(shot.console().is_empty(), "console: {:?}", shot.console());
    check_png(&png);
    println!("report: {}\nscreenshot: {}", page.display(), png.display());
}

/// The checks above can fail: a page whose script throws shows it on the
/// console, and has no data-report.
#[test]
fn a_script_error_reaches_the_console_check() {
    let Some(chromium) = Browser::find() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("broken.html");
    std::fs::write(
        &page,
        "<!doctype html><html><body><svg class=\"chart\"></svg>\
         <script>no_such_function();</script></body></html>",
    )
    .unwrap();
    let dom = chromium.dump_dom(&page);
    let console = dom.console();
    assert!(
        console.iter().any(|l| l.contains("no_such_function")),
        "{console:?}\n{}",
        dom.stderr
    );
    assert!(!dom.stdout.contains("data-report"));
}
