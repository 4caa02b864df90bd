//! # ironlun-token: secret tokens read from files
//!
//! **Owns:** the one rule for a token file, shared by the target's
//! management API (`admin_token_file`, a bearer token), its client
//! (`ironlun admin --token-file`) and the bench agents (`--token-file`,
//! the key of their challenge-response): the token is the file's text
//! without surrounding white space, 16 to 4096 printable ASCII bytes
//! without spaces, in a regular file of the reading user's own that no
//! other user may read, write or replace.
//!
//! The file is opened once, without following a symbolic link, and every
//! check is made on the open descriptor (`fstat`), from which the text is
//! then read with a bound: what is checked is what is read, whatever
//! happens to the path in between.
//!
//! **Must not know:** how a token is used (compared as a bearer token,
//! used as an HMAC key); callers wrap the bytes in a type of their own
//! and compare in constant time. It depends on `std` and `rustix` (the
//! open flags and the effective user, without unsafe code).

#![forbid(unsafe_code)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

use rustix::fs::{Mode, OFlags};

/// Shortest token accepted: a guessable one would let any local process
/// use the API, or anyone on the network drive an agent.
pub const MIN_LEN: usize = 16;
/// Longest token read.
pub const MAX_LEN: usize = 4096;
/// Largest token file read: the token with as much white space around
/// it.
pub const MAX_FILE: u64 = 2 * MAX_LEN as u64;

/// Reads the token from `path`: its text without surrounding white
/// space, 16 to 4096 bytes, in a regular file (not a symbolic link to
/// one) owned by the effective user, with no access for group or others.
/// Each refusal says what to run.
pub fn load(path: &Path) -> io::Result<Vec<u8>> {
    let bad = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
    let mut file = open(path)?;
    // fstat(2) on the descriptor: the file that will be read.
    let meta = file.metadata()?;
    let euid = rustix::process::geteuid().as_raw();
    if let Some(why) = unfit(&meta, euid, path) {
        return Err(bad(why));
    }
    let mut text = Vec::new();
    (&mut file).take(MAX_FILE + 1).read_to_end(&mut text)?;
    if text.len() as u64 > MAX_FILE {
        return Err(bad(too_large()));
    }
    parse(&text).map_err(|m| bad(m.to_owned()))
}

/// Opens `path` for reading: not through a symbolic link at its end
/// (`O_NOFOLLOW`), and without waiting for a writer if it is a FIFO
/// (`O_NONBLOCK`; the type check then refuses it).
fn open(path: &Path) -> io::Result<File> {
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => Ok(File::from(fd)),
        Err(rustix::io::Errno::LOOP) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a symbolic link: give the token file itself, not a link to it",
        )),
        Err(e) => Err(e.into()),
    }
}

/// Why the open file `meta` describes is no token file for user `euid`;
/// `None` when it is one. `path` goes into the command to run.
fn unfit(meta: &Metadata, euid: u32, path: &Path) -> Option<String> {
    let ft = meta.file_type();
    if !ft.is_file() {
        let kind = if ft.is_dir() {
            "a directory"
        } else if ft.is_fifo() {
            "a FIFO"
        } else if ft.is_socket() {
            "a socket"
        } else if ft.is_block_device() || ft.is_char_device() {
            "a device"
        } else {
            "not a plain file"
        };
        return Some(format!("{kind}: a token file is a regular file"));
    }
    if meta.uid() != euid {
        return Some(format!(
            "owned by uid {}, not by uid {euid} that reads it: run chown {euid} {}",
            meta.uid(),
            path.display()
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Some(format!(
            "{} (mode {mode:o}): other users may read or replace the token; run chmod 600 {}",
            open_to(mode),
            path.display()
        ));
    }
    if meta.len() > MAX_FILE {
        return Some(too_large());
    }
    None
}

/// The group and world access bits of `mode`, in words.
fn open_to(mode: u32) -> String {
    const BITS: [(u32, &str); 6] = [
        (0o040, "group-readable"),
        (0o020, "group-writable"),
        (0o010, "group-executable"),
        (0o004, "world-readable"),
        (0o002, "world-writable"),
        (0o001, "world-executable"),
    ];
    let words: Vec<&str> = BITS
        .iter()
        .filter(|(bit, _)| mode & bit != 0)
        .map(|(_, w)| *w)
        .collect();
    words.join(", ")
}

fn too_large() -> String {
    format!("larger than {MAX_FILE} bytes: a token is at most {MAX_LEN} bytes")
}

/// The token in `text`: without surrounding white space, 16 to 4096
/// printable ASCII bytes without spaces.
pub fn parse(text: &[u8]) -> Result<Vec<u8>, &'static str> {
    let token = text.trim_ascii();
    if token.len() < MIN_LEN {
        return Err("the token is shorter than 16 characters");
    }
    if token.len() > MAX_LEN {
        return Err("the token is longer than 4096 bytes");
    }
    if !token.iter().all(|b| b.is_ascii_graphic()) {
        return Err("the token must be printable ASCII without spaces");
    }
    Ok(token.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const T: &[u8] = b"0123456789abcdef-secret";

    /// A file in a fresh directory holding `text`, mode `mode`.
    fn file(text: &[u8], mode: u32) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        (dir, p)
    }

    fn refusal(p: &Path) -> String {
        let e = load(p).expect_err("refused");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        e.to_string()
    }

    #[test]
    fn surrounding_white_space_is_not_part_of_the_token() {
        assert_eq!(parse(b"  0123456789abcdef-secret\n").unwrap(), T);
    }

    #[test]
    fn short_long_or_spaced_tokens_are_refused() {
        assert!(parse(b"short").is_err());
        assert!(parse(b"   \n").is_err());
        assert!(parse(&[b'a'; MAX_LEN + 1]).is_err());
        assert!(parse(b"0123456789 abcdef").is_err());
        assert!(parse(&[b'a'; MAX_LEN]).is_ok());
    }

    #[test]
    fn an_owner_only_regular_file_is_read() {
        for mode in [0o600, 0o400] {
            let (_d, p) = file(b"0123456789abcdef-secret\n", mode);
            assert_eq!(load(&p).unwrap(), T, "mode {mode:o}");
        }
    }

    #[test]
    fn any_group_or_world_access_is_refused() {
        for (mode, says) in [
            (0o644, "world-readable"),
            (0o640, "group-readable"),
            (0o620, "group-writable"),
            (0o602, "world-writable"),
            (0o610, "group-executable"),
            (0o601, "world-executable"),
        ] {
            let (_d, p) = file(T, mode);
            let e = refusal(&p);
            assert!(e.contains(says), "mode {mode:o}: {e}");
            assert!(e.contains(&format!("chmod 600 {}", p.display())), "{e}");
        }
    }

    #[test]
    fn a_symbolic_link_is_refused_even_to_a_good_file() {
        let (dir, p) = file(T, 0o600);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let e = refusal(&link);
        assert!(e.contains("symbolic link"), "{e}");
        assert_eq!(load(&p).unwrap(), T);
    }

    #[test]
    fn a_directory_or_a_fifo_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(refusal(&sub).contains("a directory"));
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .args(["-m", "600"])
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        // No writer ever comes: a blocking open would hang here.
        assert!(refusal(&fifo).contains("a FIFO"));
    }

    #[test]
    fn an_oversized_file_is_refused() {
        let mut big = T.to_vec();
        big.resize(MAX_FILE as usize + 1, b'\n');
        let (_d, p) = file(&big, 0o600);
        assert!(refusal(&p).contains("larger than"));
        big.truncate(MAX_FILE as usize);
        let (_d, p) = file(&big, 0o600);
        assert_eq!(load(&p).unwrap(), T, "at the bound: read");
    }

    #[test]
    fn a_file_of_another_user_is_refused() {
        let (_d, p) = file(T, 0o600);
        let meta = std::fs::metadata(&p).unwrap();
        let other = meta.uid().wrapping_add(1);
        let e = unfit(&meta, other, &p).unwrap();
        assert!(e.contains(&format!("chown {other} {}", p.display())), "{e}");
        assert_eq!(unfit(&meta, meta.uid(), &p), None);
    }
}
