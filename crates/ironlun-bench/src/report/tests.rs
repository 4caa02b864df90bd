//! The page from fabricated results: runs overlay, every chart has each
//! run's points, older files still render, nothing is fetched.

use super::*;
use crate::result::{Cpu, HostInfo, Latency, Second, WorkloadResult, ZoneRate};
use crate::spec::{AccessLine, Workload};

/// Counts per power-of-√2 bucket from 1 µs, as the engine writes them.
fn buckets(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, u64)> {
    let mut out = Vec::new();
    let mut lo = 1000.0f64;
    while lo <= h.max() as f64 {
        let hi = lo * std::f64::consts::SQRT_2;
        out.push((hi / 1000.0, h.count_between(lo as u64, hi as u64 - 1)));
        lo = hi;
    }
    out
}

fn result(name: &str, scale: f64, seconds: u32) -> WorkloadResult {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1_000, 60_000_000_000, 3).unwrap();
    for i in 0..20_000u64 {
        // 50 µs to about 5 ms, a long tail.
        h.record(((50_000 + i * i * i / 1_600_000) as f64 * scale) as u64)
            .unwrap();
    }
    let latency = Latency::from_histogram(&h);
    WorkloadResult {
        name: name.into(),
        description: "a test workload".into(),
        alignment: "transfer size".into(),
        luns: vec!["iscsi://127.0.0.1:3260/iqn.x:y/0".into()],
        elapsed_s: f64::from(seconds),
        ios: h.len(),
        read_ios: h.len(),
        write_ios: 0,
        iops: 20_000.0 / scale,
        read_iops: 20_000.0 / scale,
        write_iops: 0.0,
        mb_per_s: 80.0 / scale,
        mib_per_s: 76.3 / scale,
        read_mb_per_s: 80.0 / scale,
        write_mb_per_s: 0.0,
        transaction_time_us: latency.mean,
        latency_us: latency.clone(),
        read_latency_us: latency,
        write_latency_us: Latency::default(),
        cpu: Cpu {
            initiator_pct: Some(12.0),
            ..Cpu::default()
        },
        errors: 0,
        error_samples: Vec::new(),
        verify: None,
        series: (0..seconds)
            .map(|t| Second {
                t,
                iops: 20_000.0 / scale + f64::from(t) * 10.0,
                read_iops: 20_000.0 / scale,
                write_iops: 0.0,
                mb_per_s: 80.0 / scale,
                p99_us: 900.0 * scale,
            })
            .collect(),
        histogram_us: buckets(&h),
        percentiles_us: Latency::curve(&h),
        zones: None,
        hdr: None,
        agents: Vec::new(),
        threads: 1,
        per_thread: Vec::new(),
        workload: Workload::simple(name, "", AccessLine::simple(4096, 100, 100), 16),
        latency_buckets_ns: Vec::new(),
        ops: Default::default(),
        steady: None,
    }
}

fn report(workloads: Vec<WorkloadResult>) -> RunReport {
    let mut r = RunReport::new(
        "ironlun bench".into(),
        "2026-11-24T09:00:00Z".into(),
        Some("iscsi://127.0.0.1:3260/iqn.x:y/0".into()),
        workloads,
    );
    r.host = HostInfo {
        cpu_model: "Test CPU".into(),
        cpus: 2,
        kernel: "6.1.0-test".into(),
    };
    r
}

/// The `d` of every line path in the chart of kind `kind`, by run.
fn paths<'a>(page: &'a str, kind: &str) -> Vec<Vec<&'a str>> {
    let marker = format!("data-chart=\"{kind}\"");
    page.match_indices(&marker)
        .map(|(at, _)| {
            let chart = &page[at..];
            let chart = &chart[..chart.find("</svg>").unwrap()];
            chart
                .split("<path class=\"line\"")
                .skip(1)
                .map(|p| {
                    let d = &p[p.find(" d=\"").unwrap() + 4..];
                    &d[..d.find('"').unwrap()]
                })
                .collect()
        })
        .collect()
}

fn points(d: &str) -> usize {
    d.matches(['M', 'L']).count()
}

#[test]
fn two_runs_overlay_in_every_chart_in_their_colours() {
    let runs = vec![
        Run {
            name: "before".into(),
            report: report(vec![result("4k-read", 1.0, 5), result("64k-write", 2.0, 5)]),
        },
        Run {
            name: "after".into(),
            report: report(vec![result("4k-read", 0.5, 5)]),
        },
    ];
    let page = compare(&runs);
    // The 4k-read charts carry both runs, 64k-write only the first.
    for kind in ["exceedance", "distribution", "iops", "latency"] {
        let charts = paths(&page, kind);
        assert_eq!(charts.len(), 2, "{kind}");
        assert_eq!(charts[0].len(), 2, "{kind}: both runs");
        assert_eq!(charts[1].len(), 1, "{kind}: one run");
        for d in charts.iter().flatten() {
            assert!(points(d) >= 5, "{kind}: {d}");
        }
    }
    // 20,000 samples: the curve reaches 1 - 1/20,000 (99.995 %).
    let exceedance = &paths(&page, "exceedance")[0][0];
    assert!(points(exceedance) >= 40, "{exceedance}");
    assert!(page.contains("99.99%") && page.contains("99.9%"));
    assert!(page.contains(svg::PALETTE[0]) && page.contains(svg::PALETTE[1]));
    for name in ["before", "after"] {
        assert!(page.contains(&format!("{name}</text>")), "legend: {name}");
    }
    assert!(page.contains("ironlun report: before vs after"));
    // Overview bars: per chart, three bars (two runs of 4k-read, one of
    // 64k-write), values in K.
    assert_eq!(page.matches("class=\"bar\"").count(), 12);
    assert!(page.contains(">20K</text>") && page.contains(">40K</text>"));
    // The comparison gives the change from the first run.
    assert!(page.contains("+100.0 %"), "IOPS doubled");
    assert!(!page.contains("no data"));
}

#[test]
fn the_page_fetches_nothing() {
    let page = html(&[report(vec![result("w", 1.0, 3)])]);
    for needle in ["http://", "https://", "src=", "href=", "@import", "url("] {
        let hits: Vec<_> = page
            .match_indices(needle)
            .map(|(i, _)| &page[i.saturating_sub(30)..(i + 40).min(page.len())])
            // The SVG namespace is a name, not a fetch.
            .filter(|c| !c.contains("xmlns=\"http://www.w3.org/2000/svg\""))
            .collect();
        assert!(hits.is_empty(), "{needle}: {hits:?}");
    }
    assert!(page.contains("<script>") && page.contains("data-report"));
}

#[test]
fn the_header_says_what_ran_where() {
    let mut rep = report(vec![result("w", 1.0, 3)]);
    rep.link = Some("RTT 10 ms, 155 Mbit/s".into());
    let page = html(&[rep]);
    for needle in [
        "iscsi://127.0.0.1:3260/iqn.x:y/0",
        "RTT 10 ms, 155 Mbit/s",
        "Test CPU, 2 cores, Linux 6.1.0-test",
        concat!("ironlun bench ", env!("CARGO_PKG_VERSION")),
        "4 KiB, 100 % read, 100 % random; QD 16",
    ] {
        assert!(page.contains(needle), "{needle}");
    }
}

#[test]
fn a_file_from_before_the_curve_still_plots_its_percentiles() {
    let mut old = result("w", 1.0, 3);
    old.percentiles_us.clear();
    let page = html(&[report(vec![old])]);
    let d = &paths(&page, "exceedance")[0][0];
    // p50, p90, p99, p99.9, p99.99 of 20,000 I/Os.
    assert_eq!(points(d), 5, "{d}");
}

#[test]
fn a_run_too_short_for_a_series_says_no_data() {
    let page = html(&[report(vec![result("w", 1.0, 0)])]);
    assert_eq!(page.matches("no data").count(), 2, "IOPS and p99 over time");
    let d = &paths(&page, "distribution")[0][0];
    assert!(points(d) >= 5, "{d}");
}

#[test]
fn zones_are_drawn_across_the_lun() {
    let mut z = result("zones", 1.0, 2);
    z.zones = Some(
        (0..8)
            .map(|i| ZoneRate {
                zone: i,
                start_byte: u64::from(i) << 30,
                mb_per_s: 100.0 - f64::from(i),
            })
            .collect(),
    );
    let page = html(&[report(vec![z])]);
    let d = &paths(&page, "zones")[0][0];
    assert_eq!(points(d), 8);
    assert!(page.contains("4 GiB"), "the axis is in binary units");
}

#[test]
fn names_are_made_distinct_and_reports_named_by_target() {
    assert_eq!(
        distinct_names(vec!["a".into(), "a".into(), "b".into(), "a".into()]),
        ["a", "a (2)", "b", "a (3)"]
    );
    let mut one = report(vec![result("w", 1.0, 2)]);
    one.target = Some("first set".into());
    let mut two = report(vec![result("w", 1.0, 2)]);
    two.target = Some("second set".into());
    let page = html(&[one.clone(), two]);
    assert!(page.contains("ironlun report: first set vs second set"));
    let page = html(&[one.clone(), one]);
    assert!(page.contains("ironlun report: run 1 vs run 2"));
}

#[test]
fn the_curve_spreads_over_the_nines_and_stops_at_the_samples() {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1_000, 60_000_000_000, 3).unwrap();
    for i in 1..=1000u64 {
        h.record(i * 1_000).unwrap();
    }
    let c = Latency::curve(&h);
    // 1/(1-p) from 2 to 1000, ten steps a decade.
    assert_eq!(c.first().map(|p| p.0), Some(50.0));
    assert!((c.last().unwrap().0 - 99.9).abs() < 1e-9, "{c:?}");
    assert_eq!(c.len(), 28, "{c:?}");
    assert!(
        (c[0].1 - 500.0).abs() <= 1.0,
        "p50 of 1 to 1000 µs is 500 µs: {c:?}"
    );
    assert!(c.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
}

#[test]
fn a_long_run_s_series_is_drawn_in_spans() {
    // A day at one point a second: 86,400 seconds in 600 spans of 144 s.
    let mut day = result("soak", 1.0, 86_400);
    day.series[1000].p99_us = 50_000.0;
    let page = html(&[report(vec![day])]);
    for kind in ["iops", "latency"] {
        let d = &paths(&page, kind)[0][0];
        assert_eq!(points(d), charts::MAX_TIME_POINTS, "{kind}");
    }
    assert!(page.contains("IOPS over time (144 s means)"));
    // The worst second of its span shows.
    assert!(
        page.contains("1008 s: p99 50 ms"),
        "the span of second 1000"
    );
    assert!(page.len() < 2_000_000, "{} bytes", page.len());
}

// The engine's parts the lab's pages use: scatters, dashed model lines,
// reference lines and category axes.

fn log_plot(lines: Vec<svg::Line>, rules: Vec<svg::Rule>, runs: &[String]) -> String {
    let axis = |t: &str| axis::Axis::log(10.0, 1000.0, 10, format::count, t);
    svg::Plot {
        kind: "scatter",
        title: "measured against published".into(),
        x: axis("published (MB/s)"),
        y: axis("measured (MB/s)"),
        lines,
        rules,
        runs,
    }
    .svg()
}

#[test]
fn a_scatter_draws_its_points_without_a_path_each_with_its_tip() {
    let runs = vec!["within ±25 %".to_owned(), "outside ±25 %".to_owned()];
    let line = |run, points: Vec<(f64, f64)>| svg::Line {
        run,
        tips: points
            .iter()
            .map(|p| format!("{} → {}", p.0, p.1))
            .collect(),
        points,
        style: svg::Style::Points,
    };
    let page = log_plot(
        vec![
            line(0, vec![(10.0, 11.0), (100.0, 90.0)]),
            line(1, vec![(1000.0, 100.0)]),
        ],
        Vec::new(),
        &runs,
    );
    assert!(!page.contains("<path"), "{page}");
    assert_eq!(page.matches("<circle class=\"pt\"").count(), 3);
    assert_eq!(page.matches("<title>").count(), 3 + 2, "points and keys");
    assert!(page.contains("<title>1000 → 100</title>"));
    // (1000, 100) is at the right edge, half way up.
    assert!(page.contains("cx=\"450.0\" cy=\"135.0\""), "{page}");
    assert!(page.contains(&format!("fill=\"{}\"", svg::PALETTE[1])));
    assert!(page.contains(">outside ±25 %</text>"));
    assert!(!page.contains("no data"));
}

#[test]
fn a_dashed_model_line_shares_its_run_s_colour_and_key() {
    let runs = vec!["window 64 KiB".to_owned()];
    let line = |style, tips: [&str; 2]| svg::Line {
        run: 0,
        points: vec![(10.0, 20.0), (1000.0, 500.0)],
        tips: tips.map(String::from).to_vec(),
        style,
    };
    let page = log_plot(
        vec![
            line(svg::Style::Solid, ["measured 20", "measured 500"]),
            line(svg::Style::Dashed, ["model 20", "model 500"]),
        ],
        Vec::new(),
        &runs,
    );
    assert_eq!(paths(&page, "scatter")[0].len(), 1, "one solid line");
    assert_eq!(page.matches("<path class=\"line model\"").count(), 1);
    assert!(page.contains("stroke-dasharray=\"6 4\""));
    assert_eq!(
        page.matches("fill=\"#fff\"").count(),
        2,
        "hollow model points"
    );
    assert!(page.contains("<title>model 500</title>"));
    assert_eq!(page.matches("class=\"key\"").count(), 1);
}

#[test]
fn reference_lines_are_clipped_to_the_frame() {
    let runs: Vec<String> = Vec::new();
    let rule = |k: f64, dashed| svg::Rule {
        from: (10.0, 10.0 * k),
        to: (1000.0, 1000.0 * k),
        label: format!("measured = {k} × published"),
        dashed,
    };
    let page = log_plot(
        Vec::new(),
        vec![rule(1.0, false), rule(1.25, true), rule(100.0, true)],
        &runs,
    );
    // y = x corner to corner; y = 1.25 x leaves through the top at
    // x = 800 (log10 1.25 of the two decades short of the right edge).
    assert!(
        page.contains("class=\"rule solid\" x1=\"72.0\" y1=\"240.0\" x2=\"450.0\" y2=\"30.0\""),
        "{page}"
    );
    assert!(
        page.contains("class=\"rule\" x1=\"72.0\" y1=\"229.8\" x2=\"431.7\" y2=\"30.0\""),
        "{page}"
    );
    assert!(page.contains("<title>measured = 1.25 × published</title>"));
    // y = 100 x only touches the top left corner.
    assert_eq!(page.matches("<line class=\"rule").count(), 2);
    assert!(page.contains("no data"));
    assert_eq!(
        rules::clip((0.2, 0.3), (0.4, 0.5)),
        Some(((0.2, 0.3), (0.4, 0.5)))
    );
    assert_eq!(rules::clip((-1.0, 1.5), (2.0, 1.5)), None);
    assert_eq!(rules::clip((0.5, f64::NAN), (0.5, 0.5)), None);
}

#[test]
fn a_category_axis_labels_as_many_as_fit() {
    let names =
        |n: usize, w: usize| -> Vec<String> { (0..n).map(|i| format!("{i:0w$}")).collect() };
    let a = axis::Axis::categories(&names(3, 4), "rtt");
    assert_eq!((a.lo, a.hi), (-0.5, 2.5));
    let labelled: Vec<_> = a.ticks.iter().filter_map(|t| t.label.clone()).collect();
    assert_eq!(labelled, ["0000", "0001", "0002"]);
    assert_eq!(a.fraction(1.0), 0.5);
    // Thirty 10-character names: four fit, every eighth is labelled.
    let a = axis::Axis::categories(&names(30, 10), "cell");
    assert_eq!(a.ticks.len(), 30);
    let at: Vec<f64> = a
        .ticks
        .iter()
        .filter(|t| t.label.is_some())
        .map(|t| t.value)
        .collect();
    assert_eq!(at, [0.0, 8.0, 16.0, 24.0]);
}

#[test]
fn a_title_too_long_for_the_chart_is_cut_short_and_kept_whole_in_its_tooltip() {
    let long = "dd-style sequential 512 KiB, queue depth 1, 1 Gbit/s (MB/s) — MB/s";
    let svg = svg::open("sweep", long, 100.0);
    assert!(
        svg.contains(&format!(
            "<title>{long}</title>dd-style sequential 512 KiB, queue depth 1, 1 Gbit/s…</text>"
        )),
        "{svg}"
    );
    assert!(svg.contains(&format!("aria-label=\"{long}\"")));
    let short = svg::open("sweep", "a <b>", 100.0);
    assert!(
        short.contains(">a &lt;b&gt;</text>") && !short.contains("<title>"),
        "{short}"
    );
}
