//! The live one-line progress display's text: elapsed, IOPS, MB/s, p99
//! so far and the time left. The command prints it on stderr when that
//! is a terminal, and nothing otherwise.

/// One progress line, `t` seconds into a measured interval of at most
/// `total` seconds (`None`: bounded by an I/O count only).
pub fn line(name: &str, t: f64, total: Option<f64>, iops: f64, mbs: f64, p99_us: f64) -> String {
    let eta = match total {
        Some(total) => format!(" ETA {}", clock((total - t).max(0.0))),
        None => String::new(),
    };
    format!(
        "{name}: {} {iops:>10.0} IOPS {mbs:>9.1} MB/s p99 {p99_us:>8.1} µs{eta}",
        clock(t)
    )
}

/// Seconds as m:ss, or h:mm:ss from an hour.
fn clock(s: f64) -> String {
    let s = s.round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_rates_and_eta() {
        let l = line("4k-rand", 65.2, Some(120.0), 12345.6, 50.5, 250.0);
        assert_eq!(
            l,
            "4k-rand: 1:05      12346 IOPS      50.5 MB/s p99    250.0 µs ETA 0:55"
        );
        assert!(!line("x", 3.0, None, 1.0, 1.0, 1.0).contains("ETA"));
        assert!(line("x", 3700.0, Some(7300.0), 1.0, 1.0, 1.0).ends_with("ETA 1:00:00"));
    }
}
