//! What one boot of the guest reported: the case's status and evidence,
//! read off the evidence channel ([`crate::evidence`]), and the console
//! (the kernel's log and the scripts' progress), kept for diagnosis only.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::evidence::{field, Record};
use crate::guest::Accel;

/// What the guest reported.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The case's exit status from the evidence channel; `None` when the
    /// guest never reported one (killed at the budget, crashed, the VM
    /// failed to boot, or the line was malformed).
    pub rc: Option<i32>,
    pub timed_out: bool,
    pub elapsed: Duration,
    pub accel: Accel,
    /// Every evidence line, each as its `key=value` pairs in order.
    pub records: Vec<Record>,
    /// Why the evidence channel cannot be trusted (a malformed or foreign
    /// line, a cut-off line, a line after the result); empty when it can.
    /// Any entry fails the case.
    pub evidence_errors: Vec<String>,
    /// The evidence channel's lines, as text.
    pub evidence: String,
    /// The whole console (never parsed for evidence).
    pub console: String,
}

impl Outcome {
    /// The case exited 0, within its budget, and its evidence channel
    /// holds nothing but well-formed lines.
    pub fn passed(&self) -> bool {
        self.rc == Some(0) && !self.timed_out && self.evidence_errors.is_empty()
    }

    /// As [`Outcome::passed`], or why not, with the last `tail` console
    /// lines.
    pub fn check(&self, tail: usize) -> Result<(), String> {
        let mut why = Vec::new();
        if self.timed_out {
            why.push(format!(
                "killed at its budget after {:.0} s",
                self.elapsed.as_secs_f64()
            ));
        }
        if !self.evidence_errors.is_empty() {
            why.push(format!(
                "the evidence channel (ttyS1) holds what the case scripts did not write as evidence: {}",
                self.evidence_errors.join("; ")
            ));
        }
        match self.rc {
            Some(0) => {}
            Some(rc) => why.push(format!("guest case exited {rc}")),
            None if self.records.is_empty() => why.push(
                "the evidence channel (ttyS1) carried nothing: no evidence and no result".to_owned(),
            ),
            None => why.push(format!(
                "the guest reported no result on the evidence channel (ttyS1), after {} evidence lines",
                self.records.len()
            )),
        }
        if why.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{}; console tail:\n{}",
            why.join("; "),
            self.console_tail(tail)
        ))
    }

    /// The first value of `key` in any evidence line.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.records.iter().find_map(|r| field(r, key))
    }

    /// The evidence lines that carry `key`.
    pub fn with_key<'s>(&'s self, key: &'s str) -> impl Iterator<Item = &'s [(String, String)]> {
        self.records
            .iter()
            .filter(move |r| r.iter().any(|(k, _)| k == key))
            .map(|r| r.as_slice())
    }

    /// The files the guest reported writing on `lun`, path to SHA-256:
    /// exactly `expected` of them, or an error. A `file` record that
    /// lost its `lun` or `sha256` (or carries a malformed one), or a path
    /// reported twice, is an error rather than a record to drop, so a
    /// count that comes out right is a count of complete records.
    pub fn files_written(
        &self,
        lun: &str,
        expected: usize,
    ) -> Result<BTreeMap<String, String>, String> {
        let mut files = BTreeMap::new();
        for r in self.with_key("file") {
            let line = || {
                r.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let Some(on) = field(r, "lun") else {
                return Err(format!("a file record without lun: {}", line()));
            };
            if on != lun {
                continue;
            }
            let (Some(path), Some(sum)) = (field(r, "file"), field(r, "sha256")) else {
                return Err(format!("a file record without sha256: {}", line()));
            };
            if sum.len() != 64 || !sum.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(format!("a file record with a malformed sha256: {}", line()));
            }
            if files.insert(path.to_owned(), sum.to_owned()).is_some() {
                return Err(format!("{path} reported twice on LUN {lun}"));
            }
        }
        if files.len() != expected {
            return Err(format!(
                "the guest reported {} complete file records on LUN {lun}, it writes {expected}",
                files.len()
            ));
        }
        Ok(files)
    }

    /// The last `n` console lines (for failure messages).
    pub fn console_tail(&self, n: usize) -> String {
        crate::image::tail(&self.console, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::Channel;

    /// The outcome of a channel that carried `lines` (each given without
    /// the marker) and then `rc=0`.
    fn outcome_of(lines: &[&str]) -> Outcome {
        let mut ch = Channel::new();
        for l in lines {
            ch.feed(format!("{}{l}\n", crate::evidence::KV_MARK).as_bytes());
        }
        ch.feed(b"IRONLUN-VM-RESULT rc=0\n");
        from_channel(ch)
    }

    fn from_channel(ch: Channel) -> Outcome {
        let ev = ch.finish();
        Outcome {
            rc: ev.rc,
            timed_out: false,
            elapsed: Duration::ZERO,
            accel: Accel::Tcg,
            records: ev.records,
            evidence_errors: ev.errors,
            evidence: ev.text,
            console: "[    1.0] kernel line\nironlun-vm: progress\n".to_owned(),
        }
    }

    #[test]
    fn outcome_lookups() {
        let o = outcome_of(&["fsck=clean", "file=/a sha256=1", "file=/b sha256=2"]);
        assert!(o.passed());
        assert_eq!(o.check(5), Ok(()));
        assert_eq!(o.get("fsck"), Some("clean"));
        assert_eq!(o.with_key("file").count(), 2);
        assert_eq!(o.get("missing"), None);
    }

    #[test]
    fn a_case_passes_only_on_a_clean_channel_that_ends_in_rc_0() {
        // Silence: nothing on the channel.
        let silent = from_channel(Channel::new());
        assert!(!silent.passed());
        let e = silent.check(5).unwrap_err();
        assert!(e.contains("carried nothing"), "{e}");
        assert!(e.contains("ironlun-vm: progress"), "{e}");
        // Evidence but no result.
        let mut ch = Channel::new();
        ch.feed(b"IRONLUN-VM-KV login=ok\n");
        let e = from_channel(ch).check(5).unwrap_err();
        assert!(e.contains("no result"), "{e}");
        // rc=0, but a malformed line on the way.
        let mut ch = Channel::new();
        ch.feed(b"IRONLUN-VM-KV login=ok[ 3.1] sd\nIRONLUN-VM-RESULT rc=0\n");
        let o = from_channel(ch);
        assert_eq!(o.rc, Some(0));
        assert!(!o.passed());
        let e = o.check(5).unwrap_err();
        assert!(e.contains("login=ok["), "{e}");
        // A failing case.
        let mut ch = Channel::new();
        ch.feed(b"IRONLUN-VM-RESULT rc=90\n");
        assert!(from_channel(ch).check(5).unwrap_err().contains("exited 90"));
        // Timed out after rc=0 still fails.
        let mut o = outcome_of(&[]);
        o.timed_out = true;
        assert!(!o.passed());
        assert!(o.check(5).unwrap_err().contains("budget"));
    }

    #[test]
    fn files_written_counts_only_complete_records_and_wants_them_all() {
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        let fa = format!("file=/d/f1 sha256={a} lun=0");
        let fb = format!("file=/d/f2 sha256={b} lun=0");
        let other = format!("file=/d/f1 sha256={b} lun=1");
        let o = outcome_of(&[&fa, &fb, &other]);
        let files = o.files_written("0", 2).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files["/d/f2"], b);
        assert_eq!(o.files_written("1", 1).unwrap()["/d/f1"], b);
        // One record lost its checksum: not dropped, an error, even though
        // the other record would verify.
        let o = outcome_of(&[&fa, "file=/d/f2 lun=0"]);
        assert!(o.files_written("0", 1).is_err());
        assert!(o.files_written("0", 2).is_err());
        // Lost its LUN, a cut checksum, a path twice.
        assert!(outcome_of(&[&fa, "file=/d/f2 sha256=ab"])
            .files_written("0", 1)
            .is_err());
        assert!(outcome_of(&[&fa, "file=/d/f2 sha256=abc lun=0"])
            .files_written("0", 1)
            .is_err());
        assert!(outcome_of(&[&fa, &fa]).files_written("0", 1).is_err());
        // Fewer complete records than files written.
        assert!(outcome_of(&[&fa]).files_written("0", 2).is_err());
        assert!(outcome_of(&[]).files_written("0", 0).unwrap().is_empty());
    }
}
