//! LU shapes for libiscsi's conformance suite: kind × block size × flags ×
//! size, the LUN spec each becomes, and which of the suite's tests apply
//! to it (tests/conformance_suite.rs runs them).

#![allow(dead_code)]

use std::path::Path;

/// Where the LU's blocks live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Ram,
    /// A file through the page cache.
    File,
    /// A file with O_DIRECT.
    FileDirect,
    /// A loop device (over a sparse file) with O_DIRECT.
    Block,
    /// Reads zeros, drops writes.
    Null,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Ram,
        Kind::File,
        Kind::FileDirect,
        Kind::Block,
        Kind::Null,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Ram => "ram",
            Kind::File => "file",
            Kind::FileDirect => "file-direct",
            Kind::Block => "block",
            Kind::Null => "null",
        }
    }
}

/// Logical and physical block size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocks {
    B512,
    B4096,
    /// 512-byte logical blocks on 4096-byte physical blocks.
    E512,
}

impl Blocks {
    pub const ALL: [Blocks; 3] = [Blocks::B512, Blocks::B4096, Blocks::E512];

    pub fn name(self) -> &'static str {
        match self {
            Blocks::B512 => "512",
            Blocks::B4096 => "4096",
            Blocks::E512 => "512e",
        }
    }

    fn spec(self) -> &'static str {
        match self {
            // A file's own physical block would be its file system's
            // (4096 on ext4 or XFS): the 512 shape says 512 outright.
            Blocks::B512 => ",pbs=512",
            Blocks::B4096 => ",bs=4096",
            Blocks::E512 => ",pbs=4096",
        }
    }
}

/// The LUN options the matrix varies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    pub thin: bool,
    pub ro: bool,
    pub sanitize: bool,
}

impl Flags {
    pub const fn new(thin: bool, ro: bool, sanitize: bool) -> Flags {
        Flags { thin, ro, sanitize }
    }

    /// Every combination the matrix runs: SANITIZE destroys the medium, so
    /// it is not combined with a write-protected LU (it would be refused).
    pub const ALL: [Flags; 6] = [
        Flags::new(false, false, false),
        Flags::new(true, false, false),
        Flags::new(false, true, false),
        Flags::new(true, true, false),
        Flags::new(false, false, true),
        Flags::new(true, false, true),
    ];

    pub fn name(self) -> String {
        let mut parts = vec![if self.thin { "thin" } else { "full" }];
        if self.ro {
            parts.push("ro");
        }
        if self.sanitize {
            parts.push("sanitize");
        }
        parts.join("+")
    }
}

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// One LU configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub kind: Kind,
    pub blocks: Blocks,
    pub flags: Flags,
    pub size: u64,
    /// `,sanitize_rate=`: SANITIZE proceeds at this rate, as on real
    /// media (only the shape that runs Sanitize.Reset has one).
    pub sanitize_rate: Option<&'static str>,
}

/// Which of the suite's tests a run selects.
#[derive(Clone, Debug)]
pub enum Tests {
    /// `--test=ALL`.
    All,
    /// These families, one invocation each.
    Some(&'static [&'static str]),
    /// Every test under this prefix but these, one invocation each (minus
    /// the tests the expected-skips list leaves out).
    Each(&'static str, &'static [&'static str]),
    /// The whole suite but these tests ("ALL.Suite.Test"), which cannot
    /// apply to the shape: one invocation per suite, and one per test in
    /// the suites that hold one of them.
    AllBut(Vec<&'static str>),
}

/// One or more invocations of the suite against a shape.
#[derive(Clone, Debug)]
pub struct Run {
    /// The shape's name, plus " -S" for the sanitize run.
    pub label: String,
    /// What the expected-skips list's COVERED BY column can name: the
    /// kind, the block size, thin or full, ro, sanitize, allow-sanitize.
    pub tags: Vec<&'static str>,
    pub tests: Tests,
    pub allow_sanitize: bool,
    /// Pass the second portal's URL for the multipath tests.
    pub multipath: bool,
}

/// The families (and tests) that do not write: what a write-protected LU
/// is tested with (every other family writes and expects the writes to
/// succeed: MultipathIO, iSCSITMF, Unmap and GetLBAStatus.UnmapSingle
/// too). ReadOnly checks that every write is refused.
pub const READ_ONLY_FAMILIES: &[&str] = &[
    "ALL.GetLBAStatus.Simple",
    "ALL.GetLBAStatus.BeyondEol",
    "ALL.Inquiry",
    "ALL.Mandatory",
    "ALL.ModeSense6",
    "ALL.NoMedia",
    "ALL.Prefetch10",
    "ALL.Prefetch16",
    "ALL.PreventAllow",
    "ALL.PrinReadKeys",
    "ALL.PrinReportCapabilities",
    "ALL.PrinServiceactionRange",
    "ALL.ProutClear",
    "ALL.ProutPreempt",
    "ALL.ProutRegister",
    "ALL.Read6",
    "ALL.Read10",
    "ALL.Read12",
    "ALL.Read16",
    "ALL.ReadCapacity10",
    "ALL.ReadCapacity16",
    "ALL.ReadDefectData10",
    "ALL.ReadDefectData12",
    "ALL.ReadOnly",
    "ALL.ReportSupportedOpcodes",
    "ALL.Reserve6",
    "ALL.StartStopUnit",
    "ALL.TestUnitReady",
    "ALL.Verify10",
    "ALL.Verify12",
    "ALL.Verify16",
    "ALL.iSCSIcmdsn",
    "ALL.iSCSIdatasn",
];

/// Tests that read back what they wrote (or compare with it): a null LU
/// drops writes, so they cannot apply to it.
pub const DATA_CHECKING_TESTS: &[&str] = &[
    "ALL.CompareAndWrite.Simple",
    "ALL.CompareAndWrite.Miscompare",
    "ALL.ExtendedCopy.Simple",
    "ALL.OrWrite.Verify",
    "ALL.WriteSame10.Check",
    "ALL.WriteSame10.UnmapVPD",
    "ALL.WriteSame16.Check",
    "ALL.WriteSame16.UnmapVPD",
    "ALL.iSCSIResiduals.Write10Residuals",
    "ALL.iSCSIResiduals.Write12Residuals",
    "ALL.iSCSIResiduals.Write16Residuals",
    "ALL.iSCSIResiduals.WriteVerify10Residuals",
    "ALL.iSCSIResiduals.WriteVerify12Residuals",
    "ALL.iSCSIResiduals.WriteVerify16Residuals",
    "ALL.MultipathIO.Simple",
    "ALL.MultipathIO.CompareAndWrite",
];

/// Tests whose checks assume one logical block per physical block: on a
/// 512e LU (8 per physical block) libiscsi 1.19's GetLBAStatus.UnmapSingle
/// asks for the status at LBA i+1 and expects the first descriptor at
/// i+LBPPB, where SBC-4 §5.8.2.3 says the first descriptor starts at the
/// STARTING LOGICAL BLOCK ADDRESS of the CDB (what ironlun answers). It
/// runs on every other thin LU.
/// The SANITIZE tests that need an operation that lasts: they run on
/// [`Shape::slow_sanitize`] alone.
pub const SLOW_SANITIZE_TESTS: &[&str] = &["ALL.Sanitize.Reset"];

pub const ONE_BLOCK_PER_PHYSICAL_TESTS: &[&str] = &["ALL.GetLBAStatus.UnmapSingle"];

impl Shape {
    pub const fn new(kind: Kind, blocks: Blocks, flags: Flags, size: u64) -> Shape {
        Shape {
            kind,
            blocks,
            flags,
            size,
            sanitize_rate: None,
        }
    }

    /// The size as the LUN spec and the name write it.
    fn size_text(&self) -> String {
        if self.size % GIB == 0 {
            format!("{}GiB", self.size / GIB)
        } else {
            format!("{}MiB", self.size / MIB)
        }
    }

    pub fn name(&self) -> String {
        let size = self.size_text();
        let rate = self
            .sanitize_rate
            .map(|r| format!("@{r}"))
            .unwrap_or_default();
        format!(
            "{}/{}/{}/{size}{rate}",
            self.kind.name(),
            self.blocks.name(),
            self.flags.name()
        )
    }

    fn tags(&self) -> Vec<&'static str> {
        let mut t = vec![
            self.kind.name(),
            self.blocks.name(),
            if self.flags.thin { "thin" } else { "full" },
        ];
        if self.flags.ro {
            t.push("ro");
        }
        if self.flags.sanitize {
            t.push("sanitize");
        }
        t
    }

    /// The `--lun` spec; `dir` holds files, `device` is the loop device of
    /// a block shape.
    pub fn spec(&self, dir: &Path, device: Option<&str>) -> String {
        let base = match self.kind {
            Kind::Ram => format!("ram:{}", self.size_text()),
            Kind::Null => format!("null:{}", self.size_text()),
            Kind::File | Kind::FileDirect => format!(
                "file:{},size={}{}",
                dir.join("lu.img").display(),
                self.size_text(),
                if self.kind == Kind::FileDirect {
                    ",direct"
                } else {
                    ""
                }
            ),
            Kind::Block => format!("block:{},direct", device.unwrap_or("/dev/missing-loop")),
        };
        let f = self.flags;
        let flags = [(f.thin, ",thin"), (f.ro, ",ro"), (f.sanitize, ",sanitize")]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, s)| *s)
            .collect::<String>();
        let rate = self
            .sanitize_rate
            .map(|r| format!(",sanitize_rate={r}"))
            .unwrap_or_default();
        format!("{base}{}{flags}{rate}", self.blocks.spec())
    }

    /// The suite runs this shape gets: the whole suite where it applies,
    /// the families that do not write on a write-protected LU, everything
    /// but the data checks on a null LU, and the SANITIZE tests one at a
    /// time with `-S` on a sanitize LU.
    pub fn runs(&self) -> Vec<Run> {
        let sanitize_run = |tests| {
            let mut tags = self.tags();
            tags.push("allow-sanitize");
            Run {
                label: format!("{} -S", self.name()),
                tags,
                tests,
                allow_sanitize: true,
                multipath: false,
            }
        };
        if self.sanitize_rate.is_some() {
            return vec![sanitize_run(Tests::Some(SLOW_SANITIZE_TESTS))];
        }
        let mut out = vec![Run {
            label: self.name(),
            tags: self.tags(),
            tests: self.tests(),
            allow_sanitize: false,
            multipath: true,
        }];
        if self.flags.sanitize {
            out.push(sanitize_run(Tests::Each(
                "ALL.Sanitize.",
                SLOW_SANITIZE_TESTS,
            )));
        }
        out
    }

    /// The LU Sanitize.Reset needs: a SANITIZE that is still running
    /// seconds after it starts, and after resets and a new login (16 MiB at
    /// 1 MiB/s: 16 s per pass). The other SANITIZE tests run at full speed
    /// on the sanitize shapes.
    pub fn slow_sanitize() -> Shape {
        Shape {
            sanitize_rate: Some("1MiB/s"),
            ..Shape::new(
                Kind::Ram,
                Blocks::B512,
                Flags::new(false, false, true),
                16 * MIB,
            )
        }
    }

    /// What the shape's main run selects.
    fn tests(&self) -> Tests {
        if self.flags.ro {
            return Tests::Some(READ_ONLY_FAMILIES);
        }
        let mut not_applicable = Vec::new();
        if self.kind == Kind::Null {
            not_applicable.extend_from_slice(DATA_CHECKING_TESTS);
        }
        if self.blocks == Blocks::E512 {
            not_applicable.extend_from_slice(ONE_BLOCK_PER_PHYSICAL_TESTS);
        }
        if not_applicable.is_empty() {
            Tests::All
        } else {
            Tests::AllBut(not_applicable)
        }
    }

    /// Whether the matrix runs this combination. Left out: thin block
    /// devices (a block LU is never thin), a thin null LU (nothing is
    /// stored to provision), SANITIZE above 1 GiB (OVERWRITE writes the
    /// whole medium: 16 GiB of RAM or disk per test), sanitize on a null
    /// LU (nothing to destroy), and 16 GiB fully provisioned RAM (it would
    /// need 16 GiB of this machine's memory).
    pub fn in_matrix(&self) -> bool {
        let f = self.flags;
        let big = self.size > GIB;
        !(self.kind == Kind::Block && f.thin
            || self.kind == Kind::Null && (f.thin || f.sanitize)
            || f.sanitize && big
            || self.kind == Kind::Ram && big && !f.thin)
    }

    /// The whole matrix.
    pub fn matrix() -> Vec<Shape> {
        Self::filtered(Self::all())
    }

    /// The shapes whose name contains IRONLUN_CONFORMANCE_SHAPES (a comma
    /// list of substrings), to re-run some; all without it.
    fn filtered(shapes: Vec<Shape>) -> Vec<Shape> {
        let Ok(filter) = std::env::var("IRONLUN_CONFORMANCE_SHAPES") else {
            return shapes;
        };
        let wanted: Vec<&str> = filter.split(',').filter(|f| !f.is_empty()).collect();
        shapes
            .into_iter()
            .filter(|s| wanted.iter().any(|w| s.name().contains(w)))
            .collect()
    }

    fn all() -> Vec<Shape> {
        let mut out = vec![Shape::slow_sanitize()];
        for kind in Kind::ALL {
            for blocks in Blocks::ALL {
                for flags in Flags::ALL {
                    for size in [64 * MIB, GIB, 16 * GIB] {
                        let s = Shape::new(kind, blocks, flags, size);
                        if s.in_matrix() {
                            out.push(s);
                        }
                    }
                }
            }
        }
        out
    }

    /// The slice `scripts/test` runs by default: the shapes users were seen
    /// to fail with (a 1 GiB thin file LU with sanitize, a read-only LU that
    /// is not thin), a thin read-only LU, a 4096-byte LU, 512e, a loop
    /// device, a 64 MiB fully provisioned sanitize LU (OVERWRITE only; it
    /// also covers the skips larger LUs take without a word), and the slow
    /// sanitize LU of Sanitize.Reset.
    pub fn default_slice() -> Vec<Shape> {
        Self::filtered(Self::slice())
    }

    fn slice() -> Vec<Shape> {
        use Blocks::*;
        use Kind::*;
        vec![
            // First: its minute of waiting overlaps the other shapes.
            Shape::slow_sanitize(),
            Shape::new(Ram, B512, Flags::new(false, false, true), 64 * MIB),
            Shape::new(File, B512, Flags::new(true, false, true), GIB),
            Shape::new(Ram, B512, Flags::new(false, true, false), 64 * MIB),
            Shape::new(File, B512, Flags::new(true, true, false), 64 * MIB),
            Shape::new(FileDirect, B4096, Flags::new(true, false, false), 64 * MIB),
            Shape::new(Ram, E512, Flags::new(true, false, false), 64 * MIB),
            Shape::new(Block, B4096, Flags::new(false, false, false), 64 * MIB),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_and_names() {
        let s = Shape::new(
            Kind::FileDirect,
            Blocks::E512,
            Flags::new(true, false, true),
            GIB,
        );
        assert_eq!(s.name(), "file-direct/512e/thin+sanitize/1GiB");
        assert_eq!(
            s.spec(Path::new("/d"), None),
            "file:/d/lu.img,size=1GiB,direct,pbs=4096,thin,sanitize"
        );
        assert_eq!(s.runs().len(), 2);
        let b = Shape::new(
            Kind::Block,
            Blocks::B4096,
            Flags::new(false, true, false),
            GIB,
        );
        assert_eq!(
            b.spec(Path::new("/d"), Some("/dev/loop3")),
            "block:/dev/loop3,direct,bs=4096,ro"
        );
        assert!(matches!(b.runs()[0].tests, Tests::Some(_)));
        let n = Shape::new(Kind::Null, Blocks::E512, Flags::default(), GIB);
        assert!(
            matches!(&n.runs()[0].tests, Tests::AllBut(l) if l.len() == DATA_CHECKING_TESTS.len() + 1)
        );
    }
}
