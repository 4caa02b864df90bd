//! The LUN spec shorthand (`ram:1GiB`, `file:PATH,size=1G,direct`,
//! `block:/dev/sdb,ro`) of `--lun` and of `spec = …` in the file:
//! [`LunSpec`], [`BackendSpec`] and what can be wrong with one; `display`
//! writes a spec back in the same grammar.

use std::path::{Path, PathBuf};

use ironlun_backend::Rotation;
use ironlun_scsi::SoftThreshold;
use ironlun_units::{parse_rate, parse_size};

mod display;

impl BackendSpec {
    /// The options a file or block LUN's store opens it with (the
    /// defaults for the other kinds): one reading for the daemon's open
    /// and `--check`'s probe.
    pub fn file_options(&self, read_only: bool) -> ironlun_backend::FileOptions {
        use ironlun_backend::FileOptions;
        match self {
            BackendSpec::File {
                size,
                grow,
                direct,
                preallocate,
                ..
            } => FileOptions {
                size: *size,
                grow: *grow,
                direct: *direct,
                preallocate: *preallocate,
                read_only,
            },
            BackendSpec::Block { direct, .. } => FileOptions {
                direct: *direct,
                read_only,
                ..FileOptions::default()
            },
            _ => FileOptions {
                read_only,
                ..FileOptions::default()
            },
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendSpec {
    Null {
        size: u64,
    },
    Ram {
        size: u64,
    },
    File {
        path: PathBuf,
        size: Option<u64>,
        /// `,grow`: an existing file smaller than `size` grows to it
        /// (without it, the open refuses).
        grow: bool,
        direct: bool,
        preallocate: bool,
    },
    Block {
        path: PathBuf,
        direct: bool,
    },
    /// A Ceph RBD image: `rbd:POOL/IMAGE[,conf=PATH][,id=CLIENT][,keyring=PATH]`
    /// `[,timeout=SECS][,reconnect=on|off][,pr=local|rados]`.
    Rbd(RbdSpec),
}

/// Where an RBD LUN's image is and how to reach its cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RbdSpec {
    pub pool: String,
    pub image: String,
    /// ceph.conf (`None`: librados' search, $CEPH_CONF first).
    pub conf: Option<PathBuf>,
    /// The client id without `client.` (`None`: admin).
    pub client_id: Option<String>,
    pub keyring: Option<PathBuf>,
    /// Seconds an operation may wait for the cluster before it fails
    /// (`timeout=`: rados_osd_op_timeout and rados_mon_op_timeout).
    pub timeout_secs: Option<u32>,
    /// Open the image again with a new client after the cluster
    /// blocklisted this one (`reconnect=on`). Off by default: that
    /// undoes a fence (docs/rbd.md, "Blocklist and reconnect").
    pub reconnect: bool,
    /// Persistent reservations kept in RADOS beside the image and shared
    /// by every gateway that serves it (`pr=rados`; docs/ha.md, "Shared
    /// reservations"), instead of this target's state directory
    /// (`pr=local`, the default).
    pub shared_pr: bool,
}

/// Whether `path` lies in a file LUN's snapshot directory
/// (`FILE.snapshots/NAME`).
fn in_snapshot_dir(path: &Path) -> bool {
    path.parent()
        .and_then(Path::file_name)
        .and_then(|d| d.to_str())
        .is_some_and(|d| d.len() > ".snapshots".len() && d.ends_with(".snapshots"))
}

/// A parsed `--lun` spec: `ram:SIZE`, `null:SIZE`,
/// `file:PATH[,size=SIZE[,grow]][,direct][,prealloc]`, `block:PATH[,direct]` or
/// `rbd:POOL/IMAGE[,conf=PATH][,id=CLIENT][,keyring=PATH][,timeout=SECS]`
/// `[,reconnect=on|off][,pr=local|rados]` (always thin),
/// each optionally followed by `,bs=512|4096`, `,pbs=BYTES`, `,ro`,
/// `,rotation=ssd|unknown|RPM`, (not for block devices) `,thin`,
/// `,sanitize` and, with it, `,sanitize_rate=RATE`, and (thin files)
/// `,soft_threshold=SIZE|PERCENT%`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LunSpec {
    pub backend: BackendSpec,
    pub block_size: u32,
    /// Physical block size reported to initiators (`pbs=`, a power of
    /// two from the block size to 64 KiB; 4096 over bs=512 is "512e");
    /// `None`: what the backend says of its store (a file system's block,
    /// a device's physical block), else the block size
    /// ([`ironlun_scsi::geometry::physical_block`]).
    pub physical_block_size: Option<u32>,
    pub read_only: bool,
    /// Thin provisioning: UNMAP, WRITE SAME with UNMAP, GET LBA STATUS.
    pub thin: bool,
    /// SANITIZE is offered: it destroys every block, so only on request.
    pub sanitize: bool,
    /// The medium rate a sanitize operation keeps to, in bytes per
    /// second, like real media (minutes to hours); `None`: as fast as the
    /// backend goes.
    pub sanitize_rate: Option<u64>,
    /// MEDIUM ROTATION RATE to report instead of the backend's (RAM, null
    /// and memory file systems: non-rotating; files and devices: what
    /// Linux says of the device under them).
    pub rotation: Option<Rotation>,
    /// A thin file LU's soft threshold (SBC-4 §4.7.3.7): initiators are
    /// told when the file system's free space drops below it.
    pub soft_threshold: Option<SoftThreshold>,
}

/// A LUN spec that does not parse: the spec as given and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("LUN '{spec}': {problem}")]
pub struct LunSpecError {
    pub spec: String,
    pub problem: LunSpecProblem,
}

/// What is wrong with a LUN spec.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LunSpecProblem {
    #[error("expected KIND:ARG (ram:SIZE, null:SIZE, file:PATH, block:PATH, rbd:POOL/IMAGE)")]
    NoKind,
    /// Nothing after `KIND:`; `what` is `size` or `path`.
    #[error("missing {what} after '{kind}:'")]
    Missing { kind: String, what: &'static str },
    /// A size that does not parse (the message quotes it).
    #[error("{0}")]
    Size(String),
    /// `bs=` or `pbs=` other than 512 or 4096.
    #[error("{key}={value} (must be 512 or 4096)")]
    BlockSize { key: &'static str, value: String },
    #[error("unknown option '{0}'")]
    UnknownOption(String),
    /// `size=`, `direct` or `prealloc` on `ram:` or `null:`.
    #[error("{kind} takes only a size, bs=, ro, thin and sanitize")]
    MemoryOption { kind: String },
    /// `size=` or `prealloc` on `block:`.
    #[error("block devices take their own size")]
    BlockDeviceSize,
    /// `grow` on another kind than `file:`, without `size=`, or with `ro`.
    #[error("grow {0}")]
    Grow(&'static str),
    #[error("thin provisioning needs ram, null or file (a discard on a device need not read back as zeros)")]
    ThinBlockDevice,
    /// `conf=`, `id=`, `keyring=`, `timeout=`, `reconnect=` or `pr=` on another
    /// kind than `rbd:`.
    #[error("{0}= is an rbd option")]
    RbdOnly(&'static str),
    /// `size=`, `direct`, `prealloc` or `sparse` on `rbd:`.
    #[error("rbd takes its size from the image and does no direct or preallocated I/O ({0})")]
    RbdOption(String),
    /// `rbd:` not followed by POOL/IMAGE.
    #[error("rbd:{0}: expected POOL/IMAGE or POOL/IMAGE@SNAPSHOT (no namespace, none empty)")]
    RbdName(String),
    /// `rbd:POOL/IMAGE@SNAP` with a bad snapshot name, or without `ro`.
    #[error("rbd:{0}")]
    RbdSnapshot(String),
    /// `file:` of a file in a LUN's snapshot directory, without `ro`.
    #[error("file:{0}: a snapshot is served read-only: add ,ro (a writable copy is `ironlun admin snapshot clone`)")]
    FileSnapshot(String),
    /// `timeout=` outside 1..=3600 seconds.
    #[error("timeout={0} (seconds, 1 to 3600)")]
    Timeout(String),
    /// `reconnect=` other than on or off.
    #[error("reconnect={0} (on or off)")]
    Reconnect(String),
    /// `pr=` other than local or rados.
    #[error("pr={0} (local or rados)")]
    Pr(String),
    /// `id=` or a path that is empty.
    #[error("{0}= is empty")]
    EmptyValue(&'static str),
    #[error("unknown backend '{0}' (use ram, null, file, block or rbd)")]
    UnknownBackend(String),
    #[error("size is smaller than one {block_size}-byte block")]
    BelowOneBlock { block_size: u32 },
    /// A RAM or null LU whose size is not whole blocks: the LU would be
    /// smaller than asked, without a word.
    #[error("size {size} bytes is not a whole number of {block_size}-byte blocks")]
    PartBlock { size: u64, block_size: u32 },
    /// `pbs=` that is not a power of two from 512 to 64 KiB.
    #[error("pbs={0} (must be a power of two from 512 to 64KiB)")]
    PhysicalBlockSize(String),
    #[error("pbs={physical} is smaller than bs={logical}")]
    PhysicalBelowLogical { physical: u32, logical: u32 },
    #[error("thin and prealloc contradict each other")]
    ThinPreallocated,
    /// `rotation=` other than ssd, unknown or a rate in 1025..=65534.
    #[error("rotation={0} (ssd, unknown, or revolutions per minute 1025..=65534, SBC-4 §6.6.2)")]
    Rotation(String),
    /// `sanitize_rate=` that does not parse (the message quotes it).
    #[error("sanitize_rate: {0}")]
    SanitizeRate(String),
    #[error("sanitize_rate needs sanitize")]
    SanitizeRateWithoutSanitize,
    /// `soft_threshold=` that is not a size above zero or a percentage
    /// in 1..=100.
    #[error("soft_threshold={0} (a size such as 512MiB, or a percentage of the LU such as 10%)")]
    SoftThreshold(String),
    #[error("soft_threshold needs a thin file LU (it watches the file system's free space)")]
    SoftThresholdNotThinFile,
}

impl std::str::FromStr for LunSpec {
    type Err = LunSpecError;

    fn from_str(spec: &str) -> Result<LunSpec, LunSpecError> {
        parse(spec).map_err(|problem| LunSpecError {
            spec: spec.to_owned(),
            problem,
        })
    }
}

fn parse(spec: &str) -> Result<LunSpec, LunSpecProblem> {
    let (kind, rest) = spec.split_once(':').ok_or(LunSpecProblem::NoKind)?;
    let mut parts = rest.split(',');
    let first = parts.next().unwrap_or("");
    if first.is_empty() {
        let what = match kind {
            "ram" | "null" => "size",
            "rbd" => "POOL/IMAGE",
            _ => "path",
        };
        return Err(LunSpecProblem::Missing {
            kind: kind.to_owned(),
            what,
        });
    }
    let mut opts = Options::default();
    for opt in parts {
        opts.set(opt)?;
    }
    let backend = opts.backend(kind, first)?;
    opts.finish(backend)
}

/// The `,key[=value]` options after the path or size.
#[derive(Default)]
struct Options {
    size: Option<u64>,
    block_size: Option<u32>,
    physical_block_size: Option<u32>,
    read_only: bool,
    direct: bool,
    preallocate: bool,
    grow: bool,
    thin: bool,
    sanitize: bool,
    sanitize_rate: Option<u64>,
    rotation: Option<Rotation>,
    soft_threshold: Option<SoftThreshold>,
    /// `sparse` was given (only its absence is meaningful elsewhere).
    sparse: bool,
    conf: Option<PathBuf>,
    client_id: Option<String>,
    keyring: Option<PathBuf>,
    timeout_secs: Option<u32>,
    reconnect: Option<bool>,
    shared_pr: Option<bool>,
}

fn size(s: &str) -> Result<u64, LunSpecProblem> {
    parse_size(s).map_err(LunSpecProblem::Size)
}

/// `sanitize_rate=`: a rate as `ironlun_units::parse_rate` reads it
/// (`64MiB/s`, `500Mbit`), in bytes per second; `0`, `none` or
/// `unlimited`: no limit.
fn sanitize_rate(v: &str) -> Result<Option<u64>, LunSpecProblem> {
    let bits = parse_rate(v).map_err(LunSpecProblem::SanitizeRate)?;
    Ok(bits.map(|b| (b / 8).max(1)))
}

/// `rotation=`: `ssd` (non-rotating), `unknown` (not reported) or a
/// nominal rate in revolutions per minute.
fn rotation(v: &str) -> Result<Rotation, LunSpecProblem> {
    match v {
        "ssd" | "none" | "nonrotating" => Ok(Rotation::NonRotating),
        "unknown" => Ok(Rotation::NotReported),
        _ => match v.parse::<u16>() {
            Ok(rpm @ 0x0401..=0xfffe) => Ok(Rotation::Rpm(rpm)),
            _ => Err(LunSpecProblem::Rotation(v.to_owned())),
        },
    }
}

/// `soft_threshold=`: a size (`ironlun_units::parse_size`: `512MiB`,
/// `1G`) or a percentage of the LU's capacity (`10%`).
fn soft_threshold(v: &str) -> Result<SoftThreshold, LunSpecProblem> {
    let bad = || LunSpecProblem::SoftThreshold(v.to_owned());
    let t = match v.strip_suffix('%') {
        Some(p) => match p.trim().parse::<u8>() {
            Ok(p @ 1..=100) => SoftThreshold::Percent(p),
            _ => return Err(bad()),
        },
        None => SoftThreshold::Bytes(parse_size(v).map_err(|_| bad())?),
    };
    if t == SoftThreshold::Bytes(0) {
        return Err(bad());
    }
    Ok(t)
}

/// `timeout=`: whole seconds in 1..=3600 (`30s` and `2m` are taken too).
fn timeout_secs(v: &str) -> Result<u32, LunSpecProblem> {
    let bad = || LunSpecProblem::Timeout(v.to_owned());
    let secs = match v.parse::<u64>() {
        Ok(s) => s,
        Err(_) => ironlun_units::parse_duration(v)
            .map_err(|_| bad())?
            .as_secs(),
    };
    match u32::try_from(secs) {
        Ok(s @ 1..=3600) => Ok(s),
        _ => Err(bad()),
    }
}

/// `reconnect=`: `on` or `off` (also `yes`/`no`, `true`/`false`).
fn on_off(v: &str) -> Result<bool, LunSpecProblem> {
    match v {
        "on" | "yes" | "true" => Ok(true),
        "off" | "no" | "false" => Ok(false),
        _ => Err(LunSpecProblem::Reconnect(v.to_owned())),
    }
}

/// `pr=`: `rados` (shared by the gateways) or `local`.
fn shared_pr(v: &str) -> Result<bool, LunSpecProblem> {
    match v {
        "rados" => Ok(true),
        "local" => Ok(false),
        _ => Err(LunSpecProblem::Pr(v.to_owned())),
    }
}

fn non_empty<'a>(key: &'static str, v: &'a str) -> Result<&'a str, LunSpecProblem> {
    if v.is_empty() {
        return Err(LunSpecProblem::EmptyValue(key));
    }
    Ok(v)
}

fn block_size(key: &'static str, v: &str) -> Result<u32, LunSpecProblem> {
    match v {
        "512" => Ok(512),
        "4096" | "4k" | "4K" | "4KiB" => Ok(4096),
        _ => Err(LunSpecProblem::BlockSize {
            key,
            value: v.to_owned(),
        }),
    }
}

/// `pbs=`: a power of two from 512 bytes to
/// [`ironlun_scsi::geometry::MAX_PHYSICAL`], as a size (`4096`, `4k`,
/// `64KiB`).
fn physical_block_size(v: &str) -> Result<u32, LunSpecProblem> {
    let bad = || LunSpecProblem::PhysicalBlockSize(v.to_owned());
    let bytes = parse_size(v).map_err(|_| bad())?;
    let max = u64::from(ironlun_scsi::geometry::MAX_PHYSICAL);
    if !bytes.is_power_of_two() || !(512..=max).contains(&bytes) {
        return Err(bad());
    }
    u32::try_from(bytes).map_err(|_| bad())
}

impl Options {
    fn set(&mut self, opt: &str) -> Result<(), LunSpecProblem> {
        let (k, v) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        match (k, v) {
            ("size", Some(v)) => self.size = Some(size(v)?),
            ("bs", Some(v)) => self.block_size = Some(block_size("bs", v)?),
            ("pbs", Some(v)) => self.physical_block_size = Some(physical_block_size(v)?),
            ("ro", None) => self.read_only = true,
            ("thin", None) => self.thin = true,
            ("sanitize", None) => self.sanitize = true,
            ("sanitize_rate", Some(v)) => self.sanitize_rate = sanitize_rate(v)?,
            ("rotation", Some(v)) => self.rotation = Some(rotation(v)?),
            ("soft_threshold", Some(v)) => self.soft_threshold = Some(soft_threshold(v)?),
            ("direct", None) => self.direct = true,
            ("grow", None) => self.grow = true,
            ("prealloc", None) | ("preallocate", None) => self.preallocate = true,
            ("sparse", None) => {
                self.preallocate = false;
                self.sparse = true;
            }
            ("conf", Some(v)) => self.conf = Some(PathBuf::from(non_empty("conf", v)?)),
            ("id", Some(v)) => self.client_id = Some(non_empty("id", v)?.to_owned()),
            ("timeout", Some(v)) => self.timeout_secs = Some(timeout_secs(v)?),
            ("reconnect", Some(v)) => self.reconnect = Some(on_off(v)?),
            ("pr", Some(v)) => self.shared_pr = Some(shared_pr(v)?),
            ("keyring", Some(v)) => self.keyring = Some(PathBuf::from(non_empty("keyring", v)?)),
            _ => return Err(LunSpecProblem::UnknownOption(opt.to_owned())),
        }
        Ok(())
    }

    /// The backend of `kind` at `first` (its size or path).
    fn backend(&self, kind: &str, first: &str) -> Result<BackendSpec, LunSpecProblem> {
        if self.grow && matches!(kind, "ram" | "null" | "block" | "rbd") {
            return Err(LunSpecProblem::Grow(
                "is a file: option (the others are not grown from a spec)",
            ));
        }
        if kind == "rbd" {
            return self.rbd(first);
        }
        let rbd_only = [
            ("conf", self.conf.is_some()),
            ("id", self.client_id.is_some()),
            ("keyring", self.keyring.is_some()),
            ("timeout", self.timeout_secs.is_some()),
            ("reconnect", self.reconnect.is_some()),
            ("pr", self.shared_pr.is_some()),
        ];
        if let Some((key, _)) = rbd_only.iter().find(|(_, set)| *set) {
            return Err(LunSpecProblem::RbdOnly(key));
        }
        Ok(match kind {
            "ram" | "null" => {
                if self.size.is_some() || self.direct || self.preallocate {
                    return Err(LunSpecProblem::MemoryOption {
                        kind: kind.to_owned(),
                    });
                }
                let size = size(first)?;
                if kind == "ram" {
                    BackendSpec::Ram { size }
                } else {
                    BackendSpec::Null { size }
                }
            }
            "file" => {
                if self.grow && self.size.is_none() {
                    return Err(LunSpecProblem::Grow(
                        "needs size= (the size to grow the file to)",
                    ));
                }
                if self.grow && self.read_only {
                    return Err(LunSpecProblem::Grow("writes the file: not with ro"));
                }
                // A file LUN's snapshots live in `FILE.snapshots/`
                // (docs/snapshots.md): served writable, one would change
                // what a later rollback restores.
                if !self.read_only && in_snapshot_dir(Path::new(first)) {
                    return Err(LunSpecProblem::FileSnapshot(first.to_owned()));
                }
                BackendSpec::File {
                    path: PathBuf::from(first),
                    size: self.size,
                    grow: self.grow,
                    direct: self.direct,
                    preallocate: self.preallocate,
                }
            }
            "block" => {
                if self.size.is_some() || self.preallocate {
                    return Err(LunSpecProblem::BlockDeviceSize);
                }
                if self.thin {
                    return Err(LunSpecProblem::ThinBlockDevice);
                }
                BackendSpec::Block {
                    path: PathBuf::from(first),
                    direct: self.direct,
                }
            }
            other => return Err(LunSpecProblem::UnknownBackend(other.to_owned())),
        })
    }

    /// `rbd:POOL/IMAGE` and its cluster options.
    fn rbd(&self, name: &str) -> Result<BackendSpec, LunSpecProblem> {
        let local = [
            ("size", self.size.is_some()),
            ("direct", self.direct),
            ("prealloc", self.preallocate),
            ("sparse", self.sparse),
        ];
        if let Some((key, _)) = local.iter().find(|(_, set)| *set) {
            return Err(LunSpecProblem::RbdOption((*key).to_owned()));
        }
        let bad = || LunSpecProblem::RbdName(name.to_owned());
        let (pool, image) = name.split_once('/').ok_or_else(bad)?;
        let ok = |s: &str| !s.is_empty() && !s.contains(['/', '@', '\0']);
        // IMAGE@SNAPSHOT: the snapshot, read-only (docs/snapshots.md).
        let (base, snapshot) = match image.split_once('@') {
            Some((base, snap)) => (base, Some(snap)),
            None => (image, None),
        };
        if !ok(pool) || !ok(base) {
            return Err(bad());
        }
        if let Some(snap) = snapshot {
            ironlun_backend::SnapshotName::new(snap)
                .map_err(|e| LunSpecProblem::RbdSnapshot(format!("{name}: {e}")))?;
            if !self.read_only {
                return Err(LunSpecProblem::RbdSnapshot(format!(
                    "{name}: a snapshot is served read-only: add ,ro"
                )));
            }
        }
        Ok(BackendSpec::Rbd(RbdSpec {
            pool: pool.to_owned(),
            image: image.to_owned(),
            conf: self.conf.clone(),
            client_id: self.client_id.clone(),
            keyring: self.keyring.clone(),
            timeout_secs: self.timeout_secs,
            reconnect: self.reconnect.unwrap_or(false),
            shared_pr: self.shared_pr.unwrap_or(false),
        }))
    }

    /// The checks across options, then the spec.
    fn finish(self, backend: BackendSpec) -> Result<LunSpec, LunSpecProblem> {
        let block_size = self.block_size.unwrap_or(512);
        if let BackendSpec::Null { size } | BackendSpec::Ram { size } = &backend {
            if *size < u64::from(block_size) {
                return Err(LunSpecProblem::BelowOneBlock { block_size });
            }
            if *size % u64::from(block_size) != 0 {
                return Err(LunSpecProblem::PartBlock {
                    size: *size,
                    block_size,
                });
            }
        }
        let physical_block_size = self.physical_block_size;
        if let Some(physical) = physical_block_size.filter(|p| *p < block_size) {
            return Err(LunSpecProblem::PhysicalBelowLogical {
                physical,
                logical: block_size,
            });
        }
        if self.thin && self.preallocate {
            return Err(LunSpecProblem::ThinPreallocated);
        }
        if self.sanitize_rate.is_some() && !self.sanitize {
            return Err(LunSpecProblem::SanitizeRateWithoutSanitize);
        }
        let thin_file = self.thin && matches!(backend, BackendSpec::File { .. });
        if self.soft_threshold.is_some() && !thin_file {
            return Err(LunSpecProblem::SoftThresholdNotThinFile);
        }
        // An RBD image is thin by nature: UNMAP, WRITE SAME with UNMAP
        // and GET LBA STATUS reach its discard and allocation map.
        let thin = self.thin || matches!(backend, BackendSpec::Rbd(_));
        Ok(LunSpec {
            backend,
            block_size,
            physical_block_size,
            read_only: self.read_only,
            thin,
            sanitize: self.sanitize,
            sanitize_rate: self.sanitize_rate,
            rotation: self.rotation,
            soft_threshold: self.soft_threshold,
        })
    }
}

/// Parses the LUN spec given at `key` (`--lun`, `target NAME lun[N]`).
pub(crate) fn parse_at(key: String, spec: &str) -> Result<LunSpec, super::ConfigError> {
    spec.parse()
        .map_err(|source| super::ConfigError::Lun { key, source })
}
