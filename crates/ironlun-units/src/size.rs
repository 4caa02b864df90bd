//! Sizes in bytes: `4k`, `512KiB`, `1G`, `1.5GiB`, `10MB`, `4096`.

/// Parses a size: a number with an optional unit. `K`, `M`, `G`, `T`
/// (or lower case) and `KiB`..`TiB` are powers of 1024; `KB`..`TB` powers
/// of 1000; `B` or no unit means bytes. The number may have a decimal
/// fraction (`1.5GiB`) when the size it gives is a whole number of bytes;
/// it is computed exactly, never through floating point.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, unit) = crate::split_number(s, true);
    if num.is_empty() {
        return Err(format!("size '{s}' has no number"));
    }
    let mult = unit_bytes(s, unit)?;
    let (whole, frac) = num.split_once('.').unwrap_or((num, ""));
    if num.contains('.') && (whole.is_empty() || frac.is_empty() || frac.contains('.')) {
        return Err(format!(
            "size '{s}': write a decimal number as 1.5, with digits on both sides of one '.'"
        ));
    }
    let too_large = || format!("size '{s}' is too large");
    // At most 18 decimals: 10^18 and the products below stay in a u128.
    if frac.len() > 18 {
        return Err(format!("size '{s}': more than 18 decimals"));
    }
    let scale = 10u128.pow(frac.len() as u32);
    let digits: u128 = format!("{whole}{frac}").parse().map_err(|_| too_large())?;
    let scaled = digits.checked_mul(u128::from(mult)).ok_or_else(too_large)?;
    if scaled % scale != 0 {
        return Err(format!(
            "size '{s}' is {}.{:0width$} bytes: not a whole number of bytes",
            scaled / scale,
            scaled % scale,
            width = frac.len()
        ));
    }
    u64::try_from(scaled / scale).map_err(|_| too_large())
}

/// The bytes in one `unit`.
fn unit_bytes(s: &str, unit: &str) -> Result<u64, String> {
    Ok(match unit {
        "" | "B" => 1,
        "K" | "KiB" | "k" => 1 << 10,
        "M" | "MiB" | "m" => 1 << 20,
        "G" | "GiB" | "g" => 1 << 30,
        "T" | "TiB" | "t" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        other => return Err(format!("size '{s}': unknown unit '{other}' (use B, KiB, MiB, GiB, TiB, K, M, G, T, KB, MB, GB, TB)")),
    })
}

/// The shortest exact form of `n` bytes that [`parse_size`] reads back:
/// `512KiB`, `10MB`, `1000`.
pub fn format_size(n: u64) -> String {
    for (unit, div) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if n >= div && n % div == 0 {
            return format!("{}{unit}", n / div);
        }
    }
    for (unit, div) in [("GB", 1_000_000_000u64), ("MB", 1_000_000), ("kB", 1000)] {
        if n >= div && n % div == 0 {
            return format!("{}{unit}", n / div);
        }
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_decimal_units() {
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("512KiB"), Ok(512 << 10));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("2T"), Ok(2 << 40));
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_size("10MB"), Ok(10_000_000));
        assert_eq!(parse_size("64kB"), Ok(64_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size(" 8B "), Ok(8));
    }

    #[test]
    fn bad_sizes_say_why() {
        assert!(parse_size("GiB").unwrap_err().contains("no number"));
        assert!(parse_size("1XB").unwrap_err().contains("unknown unit"));
        assert!(parse_size("4q").is_err());
        assert!(parse_size("1.5G3").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999999T")
            .unwrap_err()
            .contains("too large"));
        assert!(parse_size("99999999999999999999")
            .unwrap_err()
            .contains("too large"));
    }

    /// Decimal fractions are exact, and only whole bytes are sizes.
    #[test]
    fn fractions_are_exact_or_refused() {
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("0.5KiB"), Ok(512));
        assert_eq!(parse_size("2.25MiB"), Ok(9 << 18));
        assert_eq!(parse_size("1.5GB"), Ok(1_500_000_000));
        assert_eq!(parse_size("1.000"), Ok(1));
        assert_eq!(parse_size("0.001KB"), Ok(1));
        assert!(parse_size("1.000000000000000001GB").is_err());
        assert!(parse_size("1.0000000000000000001KiB")
            .unwrap_err()
            .contains("more than 18"));
        let e = parse_size("1.1KiB").unwrap_err();
        assert!(
            e.contains("1126.4 bytes: not a whole number of bytes"),
            "{e}"
        );
        let e = parse_size("0.3B").unwrap_err();
        assert!(e.contains("not a whole number of bytes"), "{e}");
        for bad in ["1.", ".5G", "1..5G", "1.2.3G"] {
            let e = parse_size(bad).unwrap_err();
            assert!(e.contains("digits on both sides"), "{bad}: {e}");
        }
        assert!(parse_size("16777216.5TiB")
            .unwrap_err()
            .contains("too large"));
    }

    #[test]
    fn formatted_sizes_read_back() {
        assert_eq!(format_size(524_288), "512KiB");
        assert_eq!(format_size(10_000_000), "10MB");
        assert_eq!(format_size(2 << 30), "2GiB");
        assert_eq!(format_size(1000), "1kB");
        assert_eq!(format_size(1500), "1500");
        assert_eq!(format_size(0), "0");
        for n in [0, 1, 512, 4096, 65536, 1000, 8192, 10_000_000, 3 << 30] {
            assert_eq!(parse_size(&format_size(n)), Ok(n));
        }
    }
}
