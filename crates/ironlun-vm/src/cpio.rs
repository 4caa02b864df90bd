//! The `newc` cpio format (the kernel's initramfs format), write side only:
//! enough to append a few regular files to the cached guest image. The
//! kernel unpacks concatenated archives in order, so later files replace
//! earlier ones (Documentation/driver-api/early-userspace/buffer-format.rst).

/// A newc archive being written in memory.
#[derive(Default)]
pub struct Newc {
    out: Vec<u8>,
    ino: u32,
}

impl Newc {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a regular file at `path` (no leading slash) with `mode` bits.
    pub fn file(&mut self, path: &str, mode: u32, data: &[u8]) {
        self.ino += 1;
        self.entry(path, 0o100000 | (mode & 0o7777), data);
    }

    /// Adds a directory at `path` (no leading slash). The kernel makes no
    /// parent directories: each must come before what it holds.
    pub fn dir(&mut self, path: &str, mode: u32) {
        self.ino += 1;
        self.entry(path, 0o040000 | (mode & 0o7777), &[]);
    }

    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        let namesize = name.len() + 1;
        let fields: [u32; 13] = [
            self.ino,
            mode,
            0, // uid
            0, // gid
            1, // nlink
            0, // mtime
            u32::try_from(data.len()).unwrap_or(u32::MAX),
            0, // devmajor
            0, // devminor
            0, // rdevmajor
            0, // rdevminor
            u32::try_from(namesize).unwrap_or(u32::MAX),
            0, // check
        ];
        self.out.extend_from_slice(b"070701");
        for f in fields {
            self.out.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
        self.out.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while self.out.len() % 4 != 0 {
            self.out.push(0);
        }
    }

    /// The archive with its trailer.
    pub fn finish(mut self) -> Vec<u8> {
        self.ino = 0;
        self.entry("TRAILER!!!", 0, &[]);
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_fields_and_alignment() {
        let mut a = Newc::new();
        a.file("init", 0o755, b"#!/bin/sh\n");
        let out = a.finish();
        assert_eq!(&out[..6], b"070701");
        // ino 1, mode 0100755, filesize 10, namesize 5.
        assert_eq!(&out[6..14], b"00000001");
        assert_eq!(&out[14..22], b"000081ED");
        assert_eq!(&out[54..62], b"0000000A");
        assert_eq!(&out[94..102], b"00000005");
        // Header (110) + "init\0" (5) padded to 116, then the data.
        assert_eq!(&out[116..126], b"#!/bin/sh\n");
        assert_eq!(out.len() % 4, 0);
        let trailer = out.windows(10).position(|w| w == b"TRAILER!!!");
        assert!(trailer.is_some());
    }

    #[test]
    fn a_directory_has_the_directory_type_and_no_data() {
        let mut a = Newc::new();
        a.dir("opt", 0o755);
        let out = a.finish();
        assert_eq!(&out[14..22], b"000041ED");
        assert_eq!(&out[54..62], b"00000000");
    }

    #[test]
    fn an_independent_reader_gets_every_file_back() {
        // The guest kernel is the reader that matters (the VM tests boot
        // with these archives); this parses the layout independently.
        let mut a = Newc::new();
        a.file("a", 0o644, b"xyz");
        a.file("case.env", 0o644, b"K=V\n");
        let out = a.finish();
        let mut pos = 0;
        let mut names = Vec::new();
        loop {
            let h = &out[pos..pos + 110];
            assert_eq!(&h[..6], b"070701");
            let field = |i: usize| {
                u32::from_str_radix(std::str::from_utf8(&h[6 + 8 * i..14 + 8 * i]).unwrap(), 16)
                    .unwrap() as usize
            };
            let (size, namesize) = (field(6), field(11));
            let name = std::str::from_utf8(&out[pos + 110..pos + 110 + namesize - 1]).unwrap();
            names.push(name.to_owned());
            let data_at = (pos + 110 + namesize).next_multiple_of(4);
            if name == "TRAILER!!!" {
                break;
            }
            if name == "case.env" {
                assert_eq!(&out[data_at..data_at + size], b"K=V\n");
            }
            pos = (data_at + size).next_multiple_of(4);
        }
        assert_eq!(names, ["a", "case.env", "TRAILER!!!"]);
    }
}
