//! Numbers as a reader wants them on an axis or in a table: counts in K
//! and M, latencies in µs, ms or s, sizes in KiB to TiB, percentiles
//! with as many nines as they have.

/// Escapes text for HTML (and for SVG text and attributes).
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `v` with at most three significant digits and no trailing zeros:
/// 1.25, 12.5, 125, 0.5.
pub fn short(v: f64) -> String {
    let digits = if v.abs() >= 100.0 {
        0
    } else if v.abs() >= 10.0 {
        1
    } else {
        2
    };
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// A count or rate with K (10^3), M (10^6) or G (10^9): 950, 12.5K, 1.2M.
pub fn count(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{}G", short(v / 1e9))
    } else if a >= 1e6 {
        format!("{}M", short(v / 1e6))
    } else if a >= 1e3 {
        format!("{}K", short(v / 1e3))
    } else {
        short(v)
    }
}

/// A latency given in µs, in the unit that reads best: 850 µs, 1.2 ms, 2 s.
pub fn latency_us(us: f64) -> String {
    let a = us.abs();
    if a >= 1e6 {
        format!("{} s", short(us / 1e6))
    } else if a >= 1e3 {
        format!("{} ms", short(us / 1e3))
    } else {
        format!("{} µs", short(us))
    }
}

/// Bytes in binary units: 512 B, 64 KiB, 1.5 GiB.
pub fn bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut unit = "B";
    for u in UNITS {
        unit = u;
        if v.abs() < 1024.0 || u == "TiB" {
            break;
        }
        v /= 1024.0;
    }
    format!("{} {unit}", short(v))
}

/// A percentile with the nines it has: 50%, 99%, 99.9%, 99.999%.
pub fn percentile(p: f64) -> String {
    for digits in 0..6 {
        let s = format!("{p:.digits$}");
        if (s.parse::<f64>().unwrap_or(f64::NAN) - p).abs() < 1e-9 {
            return format!("{s}%");
        }
    }
    format!("{p:.5}%")
}

/// A percentage: 8 %, 98.6 %.
pub fn pct(v: f64) -> String {
    format!("{} %", short(v))
}

/// Seconds on a time axis: 0 s, 30 s, 2 min, 1.5 h.
pub fn seconds(s: f64) -> String {
    if s.abs() >= 5400.0 {
        format!("{} h", short(s / 3600.0))
    } else if s.abs() >= 120.0 {
        format!("{} min", short(s / 60.0))
    } else {
        format!("{} s", short(s))
    }
}

/// A table cell: the value with `digits` decimals and thousands
/// separated by narrow no-break spaces (12 345.6), or "-" when there is none.
pub fn cell(v: Option<f64>, digits: usize) -> String {
    let Some(v) = v.filter(|v| v.is_finite()) else {
        return "-".into();
    };
    let s = format!("{:.digits$}", v.abs());
    let (int, frac) = s.split_once('.').map_or((s.as_str(), ""), |(i, f)| (i, f));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push('\u{202f}');
        }
        out.push(c);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    if v < 0.0 {
        out.insert(0, '−');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_take_k_m_and_g() {
        assert_eq!(count(0.0), "0");
        assert_eq!(count(950.0), "950");
        assert_eq!(count(12_500.0), "12.5K");
        assert_eq!(count(100_000.0), "100K");
        assert_eq!(count(1_250_000.0), "1.25M");
        assert_eq!(count(2e9), "2G");
        assert_eq!(count(2.5), "2.5");
    }

    #[test]
    fn latencies_take_the_unit_that_reads_best() {
        assert_eq!(latency_us(850.0), "850 µs");
        assert_eq!(latency_us(12.34), "12.3 µs");
        assert_eq!(latency_us(1.234), "1.23 µs");
        assert_eq!(latency_us(1200.0), "1.2 ms");
        assert_eq!(latency_us(2_000_000.0), "2 s");
        assert_eq!(latency_us(0.0), "0 µs");
    }

    #[test]
    fn sizes_are_binary() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(65536.0), "64 KiB");
        assert_eq!(bytes(1.5 * 1024.0 * 1024.0 * 1024.0), "1.5 GiB");
        assert_eq!(bytes(4.0 * 1024f64.powi(5)), "4096 TiB");
    }

    #[test]
    fn percentiles_keep_their_nines() {
        assert_eq!(percentile(50.0), "50%");
        assert_eq!(percentile(99.9), "99.9%");
        assert_eq!(percentile(99.999), "99.999%");
    }

    #[test]
    fn cells_group_thousands() {
        assert_eq!(cell(Some(1_234_567.891), 1), "1\u{202f}234\u{202f}567.9");
        assert_eq!(cell(Some(999.0), 0), "999");
        assert_eq!(cell(Some(-1000.0), 0), "−1\u{202f}000");
        assert_eq!(cell(None, 1), "-");
        assert_eq!(cell(Some(f64::NAN), 1), "-");
    }

    #[test]
    fn percentages_drop_needless_zeros() {
        assert_eq!(pct(20.0), "20 %");
        assert_eq!(pct(98.6), "98.6 %");
    }

    #[test]
    fn time_axes_switch_units() {
        assert_eq!(seconds(30.0), "30 s");
        assert_eq!(seconds(600.0), "10 min");
        assert_eq!(seconds(7200.0), "2 h");
    }

    #[test]
    fn html_is_escaped() {
        assert_eq!(
            esc("<a href=\"x\">&</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
        );
    }
}
