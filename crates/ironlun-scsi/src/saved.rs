//! The spelling shared by the text forms of state that outlives the
//! process (persistent reservations, `reservations/persist.rs`; a
//! sanitize under way, `sanitize/record.rs`): numbers and hex in their one
//! canonical form, and free text escaped so that no field holds a space,
//! a line end or a control character. The readers accept only what the
//! writers write, so a file that reads is one they could have written.

use std::fmt::Write as _;

/// A decimal number in its one spelling: digits, no sign, no leading
/// zero.
pub(crate) fn decimal<T: std::str::FromStr>(s: &str) -> Option<T> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    canonical.then(|| s.parse().ok())?
}

/// A lower-case hex digit's value.
fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' | b'a'..=b'f' => char::from(b).to_digit(16).map(|d| d as u8),
        _ => None,
    }
}

/// A u64 as exactly 16 lower-case hex digits.
pub(crate) fn hex64(s: &str) -> Option<u64> {
    if s.len() != 16 || !s.bytes().all(|b| hex_digit(b).is_some()) {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

/// Bytes as lower-case hex, two digits each.
pub(crate) fn hex_bytes(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    s.as_bytes()
        .chunks(2)
        .map(|p| match p {
            [hi, lo] => Some(hex_digit(*hi)? << 4 | hex_digit(*lo)?),
            _ => None,
        })
        .collect()
}

/// Whether `b` is written as itself in an escaped field.
fn plain(b: u8) -> bool {
    matches!(b, b'!'..=b'~') && b != b'%'
}

/// Text as one field: every byte outside `!`..`~`, and `%`, as `%xx`.
pub fn escape(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    for b in text.bytes() {
        if plain(b) {
            s.push(char::from(b));
        } else {
            let _ = write!(s, "%{b:02x}");
        }
    }
    s
}

/// The text a field holds, if it is [`escape`]'s form exactly
/// (lower-case hex, only the bytes that must be escaped escaped) and
/// UTF-8.
pub fn unescape(field: &str) -> Option<String> {
    let mut out = Vec::with_capacity(field.len());
    let mut bytes = field.bytes();
    while let Some(b) = bytes.next() {
        if plain(b) {
            out.push(b);
            continue;
        }
        if b != b'%' {
            return None;
        }
        let v = hex_digit(bytes.next()?)? << 4 | hex_digit(bytes.next()?)?;
        if plain(v) {
            return None;
        }
        out.push(v);
    }
    String::from_utf8(out).ok()
}

/// The lines of a saved text, numbered from 1: every line ends with a
/// line feed (none is cut short), none holds a carriage return.
pub(crate) fn lines(text: &str) -> Result<impl Iterator<Item = (&str, usize)>, String> {
    let body = text
        .strip_suffix('\n')
        .ok_or("the last line does not end")?;
    Ok(body.split('\n').zip(1..))
}

/// The error for line `n`: why, and the line escaped so that a log shows
/// it on one line, cut short.
pub(crate) fn bad_line(n: usize, line: &str, why: &str) -> String {
    let shown: String = escape(line).chars().take(120).collect();
    format!("line {n}: {why}: '{shown}'")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_is_one_to_one() {
        for text in [
            "", "plain", "a b", "%", "%25", "\u{0}", "\u{7f}", "\u{e9}\n",
        ] {
            let e = escape(text);
            assert!(e.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{e}");
            assert_eq!(unescape(&e).as_deref(), Some(text));
        }
        assert_eq!(escape("a b%\n"), "a%20b%25%0a");
        for bad in ["%", "%2", "%zz", "%41", "a b", "%C3", "%c3", "\u{e9}"] {
            assert_eq!(unescape(bad), None, "{bad}");
        }
    }

    #[test]
    fn numbers_have_one_spelling() {
        assert_eq!(decimal::<u32>("0"), Some(0));
        assert_eq!(decimal::<u32>("4294967295"), Some(u32::MAX));
        for bad in ["", "01", "+1", "-1", " 1", "4294967296", "1e3"] {
            assert_eq!(decimal::<u32>(bad), None, "{bad}");
        }
        assert_eq!(hex64("00000000000000ff"), Some(255));
        for bad in [
            "ff",
            "00000000000000FF",
            "+0000000000000ff",
            "000000000000000ff",
        ] {
            assert_eq!(hex64(bad), None, "{bad}");
        }
        assert_eq!(hex_bytes("a500ff"), Some(vec![0xa5, 0, 0xff]));
        for bad in ["a", "A5", "zz", "a5 "] {
            assert_eq!(hex_bytes(bad), None, "{bad}");
        }
    }
}
