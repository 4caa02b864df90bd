//! iSCSI names (RFC 7143 §4.2.7): the one check every InitiatorName and
//! TargetName passes, wherever it enters (a Login Request, the
//! configuration, the management API), and the normal form it is then
//! compared and stored in.
//!
//! A name is first prepared with the iSCSI stringprep profile (RFC 3722):
//! characters that map to nothing are dropped, the rest case-folded
//! (tables B.1 and B.2 of RFC 3454) and normalised to Unicode NFKC;
//! prohibited and unassigned characters and malformed bidirectional text
//! are refused. The prepared name must then have one of the three forms
//! of RFC 7143 §4.2.7.4–§4.2.7.6:
//!
//! - `iqn.` YYYY-MM `.` reversed domain name, then optionally `:` and a
//!   unique part chosen by the naming authority;
//! - `eui.` and 16 hexadecimal digits (an EUI-64);
//! - `naa.` and 16 or 32 hexadecimal digits (a 64- or 128-bit NAA).
//!
//! It is at most 223 bytes of UTF-8 (RFC 7143 §4.2.7.1). Because case is
//! folded, the normal form is lower case: names that differ only in case
//! are one name.

use std::borrow::Cow;
use std::fmt;

use stringprep::tables;
use unicode_normalization::UnicodeNormalization;

/// Longest iSCSI name, in bytes of UTF-8 (RFC 7143 §4.2.7.1).
pub const MAX_NAME_BYTES: usize = 223;

/// Why a string is not an iSCSI name. Its text shows the name as it was
/// given, escaped ([`loggable`]), so a hostile name cannot forge a log
/// line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameError {
    /// The name as given, escaped for a log line and cut to a bound.
    pub name: String,
    pub problem: NameProblem,
}

/// What is wrong with a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameProblem {
    Empty,
    /// More than [`MAX_NAME_BYTES`] once prepared.
    TooLong(usize),
    /// A character the iSCSI profile prohibits (RFC 3722 §6), or one
    /// unassigned in Unicode 3.2.
    Character(char),
    /// Right-to-left text that breaks RFC 3454 §6.
    Bidi,
    /// Not `iqn.`, `eui.` or `naa.`.
    Type,
    /// `iqn.` without a YYYY-MM date (RFC 7143 §4.2.7.4).
    IqnDate,
    /// `iqn.` whose naming authority (reversed domain name) is missing or
    /// has an empty label.
    IqnAuthority,
    /// `eui.` without exactly 16 hexadecimal digits.
    Eui,
    /// `naa.` without 16 or 32 hexadecimal digits.
    Naa,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "iSCSI name \"{}\" ", self.name)?;
        match self.problem {
            NameProblem::Empty => write!(f, "is empty"),
            NameProblem::TooLong(n) => {
                write!(f, "is {n} bytes long; at most {MAX_NAME_BYTES} are allowed")
            }
            NameProblem::Character(c) => write!(
                f,
                "contains {}, which iSCSI names may not hold (RFC 3722 §6: only a-z, 0-9, '-', '.', ':' and printable non-ASCII characters)",
                describe_char(c)
            ),
            NameProblem::Bidi => write!(f, "mixes right-to-left and left-to-right text (RFC 3454 §6)"),
            NameProblem::Type => write!(f, "must start with iqn., eui. or naa. (RFC 7143 §4.2.7)"),
            NameProblem::IqnDate => write!(
                f,
                "must have a year and month after iqn., as in iqn.2026-11.com.example (RFC 7143 §4.2.7.4)"
            ),
            NameProblem::IqnAuthority => write!(
                f,
                "must name a reversed domain after its date, as in iqn.2026-11.com.example:disk1 (RFC 7143 §4.2.7.4)"
            ),
            NameProblem::Eui => write!(f, "must be eui. and 16 hexadecimal digits (RFC 7143 §4.2.7.5)"),
            NameProblem::Naa => write!(f, "must be naa. and 16 or 32 hexadecimal digits (RFC 7143 §4.2.7.6)"),
        }
    }
}

impl std::error::Error for NameError {}

fn describe_char(c: char) -> String {
    match c {
        ' ' => "a space".to_owned(),
        c if c.is_ascii_graphic() => format!("'{c}'"),
        c => format!("U+{:04X}", u32::from(c)),
    }
}

/// The normal form of iSCSI name `raw`: prepared (RFC 3722), therefore
/// lower case, and checked against its type's form (RFC 7143 §4.2.7).
pub fn normalize(raw: &str) -> Result<String, NameError> {
    let fail = |problem| NameError {
        name: loggable_bounded(raw),
        problem,
    };
    let name = prepare(raw).map_err(fail)?;
    if name.is_empty() {
        return Err(fail(NameProblem::Empty));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(fail(NameProblem::TooLong(name.len())));
    }
    check_form(&name).map_err(fail)?;
    Ok(name)
}

/// The iSCSI stringprep profile (RFC 3722 §3–§7).
fn prepare(raw: &str) -> Result<String, NameProblem> {
    // Bound the work a hostile name can cause before it is refused for
    // its length: mapping never shrinks a name by more than the
    // characters it drops, and no real name is near this.
    if raw.len() > 4 * MAX_NAME_BYTES {
        return Err(NameProblem::TooLong(raw.len()));
    }
    if raw.is_ascii() {
        // ASCII's case folding is to_ascii_lowercase, and NFKC leaves it
        // as it is: the common case costs one pass.
        let name = raw.to_ascii_lowercase();
        if let Some(c) = name.chars().find(|&c| prohibited(c)) {
            return Err(NameProblem::Character(c));
        }
        return Ok(name);
    }
    let mapped = raw
        .chars()
        .filter(|&c| !tables::commonly_mapped_to_nothing(c))
        .flat_map(tables::case_fold_for_nfkc);
    let name: String = mapped.nfkc().collect();
    if let Some(c) = name.chars().find(|&c| prohibited(c)) {
        return Err(NameProblem::Character(c));
    }
    if bidi_malformed(&name) {
        return Err(NameProblem::Bidi);
    }
    Ok(name)
}

/// Prohibited output of the iSCSI profile (RFC 3722 §6.1 and §6.2), and
/// unassigned code points (RFC 3722 §7: names are stored strings).
fn prohibited(c: char) -> bool {
    let ascii_outside_names = matches!(
        c,
        '\u{0}'..='\u{2c}' | '/' | ';'..='@' | '['..='`' | '{'..='\u{7f}'
    );
    ascii_outside_names
        || c == '\u{3002}' // IDEOGRAPHIC FULL STOP
        || tables::non_ascii_space_character(c) // C.1.2
        || tables::non_ascii_control_character(c) // C.2.2
        || tables::private_use(c) // C.3
        || tables::non_character_code_point(c) // C.4
        || tables::surrogate_code(c) // C.5
        || tables::inappropriate_for_plain_text(c) // C.6
        || tables::inappropriate_for_canonical_representation(c) // C.7
        || tables::change_display_properties_or_deprecated(c) // C.8
        || tables::tagging_character(c) // C.9
        || tables::unassigned_code_point(c) // A.1
}

/// RFC 3454 §6: text with a right-to-left character holds no
/// left-to-right one, and starts and ends with right-to-left characters.
fn bidi_malformed(s: &str) -> bool {
    if !s.chars().any(tables::bidi_r_or_al) {
        return false;
    }
    let ends_rtl = s.chars().next().is_some_and(tables::bidi_r_or_al)
        && s.chars().last().is_some_and(tables::bidi_r_or_al);
    s.chars().any(tables::bidi_l) || !ends_rtl
}

/// The type designator's own form (RFC 7143 §4.2.7.4–§4.2.7.6).
fn check_form(name: &str) -> Result<(), NameProblem> {
    if let Some(rest) = name.strip_prefix("iqn.") {
        return check_iqn(rest);
    }
    if let Some(hex) = name.strip_prefix("eui.") {
        return all_hex(hex, &[16]).ok_or(NameProblem::Eui);
    }
    if let Some(hex) = name.strip_prefix("naa.") {
        return all_hex(hex, &[16, 32]).ok_or(NameProblem::Naa);
    }
    Err(NameProblem::Type)
}

fn all_hex(s: &str, lengths: &[usize]) -> Option<()> {
    (lengths.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())).then_some(())
}

/// `YYYY-MM.reversed.domain[:unique]` after `iqn.`.
fn check_iqn(rest: &str) -> Result<(), NameProblem> {
    let (date, tail) = rest.split_at_checked(7).ok_or(NameProblem::IqnDate)?;
    let (year, month) = date.split_once('-').ok_or(NameProblem::IqnDate)?;
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let month_ok = digits(month, 2) && matches!(month.parse::<u8>(), Ok(1..=12));
    if !digits(year, 4) || !month_ok {
        return Err(NameProblem::IqnDate);
    }
    let authority = tail.strip_prefix('.').ok_or(NameProblem::IqnAuthority)?;
    let authority = authority.split(':').next().unwrap_or_default();
    if authority.is_empty() || authority.split('.').any(str::is_empty) {
        return Err(NameProblem::IqnAuthority);
    }
    Ok(())
}

/// `s` with every character that could end or forge a log line or
/// confuse a terminal (controls, line and paragraph separators, the
/// escape character) written as an escape, as Rust writes them (`\n`,
/// `\u{1b}`). Printable text is unchanged, so names and reasons read as
/// they are, and escaping twice changes nothing.
pub fn loggable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len().saturating_add(8));
    for c in s.chars() {
        if needs_escape(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// [`loggable`], cut to a bound: at most twice the longest name, so an
/// error about a name stays one readable line.
fn loggable_bounded(s: &str) -> String {
    let cut = s
        .char_indices()
        .map(|(i, _)| i)
        .find(|&i| i > 2 * MAX_NAME_BYTES)
        .unwrap_or(s.len());
    let mut out = loggable(s.get(..cut).unwrap_or(s)).into_owned();
    if cut < s.len() {
        out.push('…');
    }
    out
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{85}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(raw: &str) -> NameProblem {
        normalize(raw).unwrap_err().problem
    }

    #[test]
    fn names_real_initiators_use_pass_unchanged() {
        for name in [
            "iqn.1993-08.org.debian:01:8a2b1c3d4e5f",
            "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test",
            "iqn.2008-11.org.linux-kvm",
            "iqn.2008-11.org.linux-kvm:vm-1",
            "iqn.1991-05.com.microsoft:host.example.com",
            "iqn.2026-11.io.ironlun:lab",
            "eui.02004567a425678d",
            "naa.52004567ba64678d",
            "naa.62004567ba64678d0123456789abcdef",
        ] {
            assert_eq!(normalize(name).as_deref(), Ok(name));
        }
    }

    #[test]
    fn case_is_folded_to_the_normal_form() {
        assert_eq!(
            normalize("IQN.2026-11.Com.Example:Disk1").as_deref(),
            Ok("iqn.2026-11.com.example:disk1")
        );
        assert_eq!(
            normalize("EUI.02004567A425678D").as_deref(),
            Ok("eui.02004567a425678d")
        );
        // Non-ASCII letters fold too (B.2), and full-width forms become
        // ASCII under NFKC.
        assert_eq!(
            normalize("iqn.2026-11.com.example:Ünïcode").as_deref(),
            Ok("iqn.2026-11.com.example:ünïcode")
        );
        assert_eq!(
            normalize("iqn.2026-11.com.example:ＤＩＳＫ").as_deref(),
            Ok("iqn.2026-11.com.example:disk")
        );
        // A soft hyphen maps to nothing (B.1).
        assert_eq!(
            normalize("iqn.2026-11.com.example:a\u{ad}b").as_deref(),
            Ok("iqn.2026-11.com.example:ab")
        );
    }

    #[test]
    fn the_forging_name_and_other_characters_are_refused() {
        let forged = "iqn.2026-11.evil:i,i,0x000000000001\nreserve 5 1 iqn.2026-11.victim:x";
        assert_eq!(problem(forged), NameProblem::Character(','));
        assert_eq!(
            problem("iqn.2026-11.evil:a\nb"),
            NameProblem::Character('\n')
        );
        for (raw, c) in [
            ("iqn.2026-11.com.example:a b", ' '),
            ("iqn.2026-11.com.example:a\tb", '\t'),
            ("iqn.2026-11.com.example:a\u{1b}[2Jb", '\u{1b}'),
            ("iqn.2026-11.com.example:a_b", '_'),
            ("iqn.2026-11.com.example:a/b", '/'),
            ("iqn.2026-11.com.example:a;b", ';'),
            ("iqn.2026-11.com.example:a@b", '@'),
            ("iqn.2026-11.com.example:a\u{3002}b", '\u{3002}'),
            // NFKC makes a no-break space a space.
            ("iqn.2026-11.com.example:a\u{a0}b", ' '),
            ("iqn.2026-11.com.example:a\u{e000}b", '\u{e000}'),
            ("iqn.2026-11.com.example:a\u{200e}b", '\u{200e}'),
            ("iqn.2026-11.com.example:a\u{2028}b", '\u{2028}'),
        ] {
            assert_eq!(problem(raw), NameProblem::Character(c), "{raw:?}");
        }
        assert_eq!(
            problem("iqn.2026-11.com.example:\u{5d0}"),
            NameProblem::Bidi
        );
    }

    #[test]
    fn each_type_has_its_form() {
        assert_eq!(problem(""), NameProblem::Empty);
        assert_eq!(problem("\u{ad}"), NameProblem::Empty);
        assert_eq!(problem("host1"), NameProblem::Type);
        assert_eq!(problem("iqn.x:y"), NameProblem::IqnDate);
        assert_eq!(problem("iqn.2026-13.com.example"), NameProblem::IqnDate);
        assert_eq!(problem("iqn.2026-1.com.example"), NameProblem::IqnDate);
        assert_eq!(problem("iqn.26-11.com.example"), NameProblem::IqnDate);
        assert_eq!(problem("iqn.2026-11"), NameProblem::IqnAuthority);
        assert_eq!(problem("iqn.2026-11.:a"), NameProblem::IqnAuthority);
        assert_eq!(problem("iqn.2026-11:a"), NameProblem::IqnAuthority);
        assert_eq!(
            problem("iqn.2026-11.com..example"),
            NameProblem::IqnAuthority
        );
        assert_eq!(problem("eui.02004567a425678"), NameProblem::Eui);
        assert_eq!(problem("eui.02004567a425678dd"), NameProblem::Eui);
        assert_eq!(problem("eui.02004567a425678g"), NameProblem::Eui);
        assert_eq!(problem("naa.52004567ba64678d00"), NameProblem::Naa);
        assert_eq!(problem("naa.5200"), NameProblem::Naa);
        let long = format!("iqn.2026-11.com.example:{}", "a".repeat(200));
        assert_eq!(problem(&long), NameProblem::TooLong(224));
        let just = format!("iqn.2026-11.com.example:{}", "a".repeat(199));
        assert_eq!(normalize(&just).map(|n| n.len()), Ok(223));
        assert!(matches!(
            problem(&"a".repeat(100_000)),
            NameProblem::TooLong(_)
        ));
    }

    #[test]
    fn errors_show_the_name_escaped() {
        let e = normalize("iqn.2026-11.evil:a\nreserve 5 1 x").unwrap_err();
        let text = e.to_string();
        assert!(!text.contains('\n'), "{text}");
        assert!(text.contains("a\\nreserve"), "{text}");
        let e = normalize(&"\u{1b}".repeat(10_000)).unwrap_err();
        assert!(e.to_string().len() < 4_000);
        assert!(!e.to_string().contains('\u{1b}'));
    }

    #[test]
    fn loggable_escapes_only_what_can_forge_a_line() {
        assert!(matches!(loggable("iqn.2026-11.a:b c"), Cow::Borrowed(_)));
        assert_eq!(loggable("a\r\nb\u{1b}"), "a\\r\\nb\\u{1b}");
        assert_eq!(loggable(&loggable("a\nb")), loggable("a\nb"));
        assert_eq!(loggable("x\u{2028}y"), "x\\u{2028}y");
    }
}
