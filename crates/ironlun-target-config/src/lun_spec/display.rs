//! [`LunSpec`] written back in the spec grammar it was read from
//! (`file:/srv/a.img,size=10GiB,thin`): what the startup log, `ironlun
//! admin state` and `ironlun target --check` show. Parsing what this
//! writes gives the same spec (the tests below hold it to that for every
//! kind and option); options at their defaults are left out.

use std::fmt::{self, Display, Formatter};

use ironlun_backend::Rotation;
use ironlun_scsi::SoftThreshold;
use ironlun_units::format_size;

use super::{BackendSpec, LunSpec, RbdSpec};

/// The block size a spec without `bs=` has.
const DEFAULT_BLOCK_SIZE: u32 = 512;

impl Display for LunSpec {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.backend)?;
        if self.block_size != DEFAULT_BLOCK_SIZE {
            write!(f, ",bs={}", self.block_size)?;
        }
        if let Some(p) = self.physical_block_size {
            write!(f, ",pbs={p}")?;
        }
        if self.read_only {
            f.write_str(",ro")?;
        }
        // An RBD image is thin whether or not the spec says so.
        if self.thin && !matches!(self.backend, BackendSpec::Rbd(_)) {
            f.write_str(",thin")?;
        }
        if let Some(r) = self.rotation {
            write!(f, ",rotation={}", rotation(r))?;
        }
        if self.sanitize {
            f.write_str(",sanitize")?;
        }
        if let Some(rate) = self.sanitize_rate {
            write!(f, ",sanitize_rate={}", bytes_per_second(rate))?;
        }
        match self.soft_threshold {
            Some(SoftThreshold::Bytes(n)) => write!(f, ",soft_threshold={}", format_size(n))?,
            Some(SoftThreshold::Percent(p)) => write!(f, ",soft_threshold={p}%")?,
            None => {}
        }
        Ok(())
    }
}

impl Display for BackendSpec {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            BackendSpec::Null { size } => write!(f, "null:{}", format_size(*size)),
            BackendSpec::Ram { size } => write!(f, "ram:{}", format_size(*size)),
            BackendSpec::File {
                path,
                size,
                grow,
                direct,
                preallocate,
            } => {
                write!(f, "file:{}", path.display())?;
                if let Some(s) = size {
                    write!(f, ",size={}", format_size(*s))?;
                }
                flag(f, *grow, "grow")?;
                flag(f, *direct, "direct")?;
                flag(f, *preallocate, "prealloc")
            }
            BackendSpec::Block { path, direct } => {
                write!(f, "block:{}", path.display())?;
                flag(f, *direct, "direct")
            }
            BackendSpec::Rbd(r) => rbd(f, r),
        }
    }
}

fn rbd(f: &mut Formatter<'_>, r: &RbdSpec) -> fmt::Result {
    write!(f, "rbd:{}/{}", r.pool, r.image)?;
    if let Some(c) = &r.conf {
        write!(f, ",conf={}", c.display())?;
    }
    if let Some(id) = &r.client_id {
        write!(f, ",id={id}")?;
    }
    if let Some(k) = &r.keyring {
        write!(f, ",keyring={}", k.display())?;
    }
    if let Some(t) = r.timeout_secs {
        write!(f, ",timeout={t}")?;
    }
    Ok(())
}

fn flag(f: &mut Formatter<'_>, on: bool, name: &str) -> fmt::Result {
    if on {
        write!(f, ",{name}")?;
    }
    Ok(())
}

/// `rotation=` as the parser reads it.
fn rotation(r: Rotation) -> String {
    match r {
        Rotation::NonRotating => "ssd".to_owned(),
        Rotation::NotReported => "unknown".to_owned(),
        Rotation::Rpm(rpm) => rpm.to_string(),
    }
}

/// A rate in bytes per second as `ironlun_units::parse_rate` reads it
/// back to the same bytes: `64MiB/s`, `10MB/s`, `1500B/s`.
fn bytes_per_second(n: u64) -> String {
    let size = format_size(n);
    if size.bytes().all(|b| b.is_ascii_digit()) {
        format!("{size}B/s")
    } else {
        format!("{size}/s")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Specs of every kind with every option the grammar has, alone and
    /// together.
    const SPECS: &[&str] = &[
        "ram:1GiB",
        "ram:512000",
        "ram:1GB",
        "null:64MiB,bs=4096,ro",
        "null:1GiB,thin",
        "ram:1GiB,pbs=4096",
        "ram:1GiB,bs=4096,pbs=4096",
        "file:/srv/a.img,pbs=512",
        "file:/srv/a.img,pbs=16384",
        "ram:64MiB,rotation=ssd",
        "ram:64MiB,rotation=unknown",
        "ram:64MiB,rotation=7200",
        "ram:64MiB,sanitize",
        "ram:64MiB,sanitize,sanitize_rate=64MiB/s",
        "ram:64MiB,sanitize,sanitize_rate=500Mbit",
        "ram:64MiB,sanitize,sanitize_rate=1001kbit",
        "ram:64MiB,sanitize,sanitize_rate=none",
        "file:/srv/a.img",
        "file:/srv/a.img,size=10GiB,thin",
        "file:/srv/a.img,size=10GiB,grow",
        "file:/srv/a.img,size=1G,direct,prealloc",
        "file:/srv/a.img,size=1G,sparse",
        "file:/srv/a.img,ro,bs=4096",
        "file:/srv/a b/c.img,thin,soft_threshold=512MiB",
        "file:/srv/a.img,thin,soft_threshold=10%",
        "file:relative/x.img,size=3000",
        "block:/dev/sdb",
        "block:/dev/sdb,direct,ro,rotation=15000",
        "rbd:pool/image",
        "rbd:pool/image,thin",
        "rbd:rbd/vm-1,conf=/etc/ceph/ceph.conf,id=gw,keyring=/etc/ceph/k,timeout=2m",
        "rbd:p/i,ro,bs=4096,sanitize",
        "file:/srv/all.img,size=2GiB,grow,direct,bs=4096,pbs=4096,thin,rotation=5400,sanitize,sanitize_rate=1GB/s,soft_threshold=50%",
    ];

    #[test]
    fn a_displayed_spec_parses_back_to_itself() {
        for s in SPECS {
            let spec: LunSpec = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            let shown = spec.to_string();
            let again: LunSpec = shown
                .parse()
                .unwrap_or_else(|e| panic!("{s} shown as {shown}: {e}"));
            assert_eq!(again, spec, "{s} shown as {shown}");
            // And it is a fixed point: shown again, the same text.
            assert_eq!(again.to_string(), shown, "{s}");
        }
    }

    #[test]
    fn specs_are_shown_in_the_grammar_not_as_debug_text() {
        let shown = |s: &str| s.parse::<LunSpec>().unwrap().to_string();
        assert_eq!(shown("ram:16777216"), "ram:16MiB");
        assert_eq!(
            shown("file:/srv/a.img,size=10G,thin"),
            "file:/srv/a.img,size=10GiB,thin"
        );
        assert_eq!(shown("ram:1G,bs=512"), "ram:1GiB");
        // pbs=512 says something: not the store's block.
        assert_eq!(shown("file:/x,pbs=512"), "file:/x,pbs=512");
        assert_eq!(shown("file:/x,pbs=64KiB"), "file:/x,pbs=65536");
        assert_eq!(shown("rbd:p/i,thin"), "rbd:p/i");
        assert_eq!(
            shown("block:/dev/sdb,rotation=none"),
            "block:/dev/sdb,rotation=ssd"
        );
        assert_eq!(
            shown("ram:1M,sanitize,sanitize_rate=64MiB/s"),
            "ram:1MiB,sanitize,sanitize_rate=64MiB/s"
        );
        assert_eq!(shown("rbd:p/i,timeout=30s"), "rbd:p/i,timeout=30");
    }

    #[test]
    fn every_option_changes_what_is_shown() {
        // Each option, added to a plain spec, shows: none is dropped.
        let base = "file:/x,size=1GiB";
        let options = [
            ",grow",
            ",direct",
            ",prealloc",
            ",bs=4096",
            ",pbs=4096",
            ",ro",
            ",thin",
            ",rotation=ssd",
            ",sanitize",
        ];
        for o in options {
            let with: LunSpec = format!("{base}{o}").parse().unwrap();
            assert!(with.to_string().contains(o), "{o}: {with}");
        }
    }
}
