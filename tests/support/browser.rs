//! Headless Chromium for tests that look at a page as a reader would:
//! the DOM after the page's scripts ran, what they wrote to the console,
//! and a screenshot. Include it with `#[path = "support/browser.rs"] mod
//! browser;` beside `mod support;`.
//!
//! Debian's `chromium` is installed by scripts/test (scripts/deps.sh).
//! When it is missing, a test skips by the rule of `skip.rs` (listed in
//! scripts/test's summary; a failure where every test is required).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use crate::support::skip;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one browser run may take before the test fails (a bound
/// against a hang, not a measurement).
const BOUND: Duration = Duration::from_secs(180);

pub struct Browser {
    pub path: PathBuf,
    /// Scratch: the profile and the captured output.
    dir: tempfile::TempDir,
}

/// What one browser run left: stdout and the console lines of stderr.
pub struct Rendered {
    pub stdout: String,
    pub stderr: String,
}

impl Rendered {
    /// The page's console messages (Chromium logs them as
    /// `INFO:CONSOLE(line)] "message", source: ...` with
    /// `--enable-logging=stderr`), script errors among them.
    pub fn console(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .collect()
    }
}

impl Browser {
    /// Chromium, or None (after skipping: [`skip::skip`]) when it is not
    /// installed; where every test is required, a missing browser fails.
    pub fn find() -> Option<Browser> {
        let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists());
        let Some(path) = found else {
            skip::skip(
                "a test needing headless Chromium",
                "it is not installed (Debian package chromium; scripts/test installs it)",
            );
            return None;
        };
        Some(Browser {
            path,
            dir: tempfile::tempdir().unwrap(),
        })
    }

    /// Runs the browser headless on `page` with `extra` flags.
    fn run(&self, page: &Path, extra: &[String]) -> Rendered {
        let out = self.dir.path().join("stdout");
        let err = self.dir.path().join("stderr");
        let url = format!("file://{}", page.canonicalize().unwrap().display());
        let mut child = Command::new(&self.path)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--hide-scrollbars",
                // Nothing may be fetched: every host name fails.
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--enable-logging=stderr",
                "--v=0",
            ])
            .arg(format!(
                "--user-data-dir={}",
                self.dir.path().join("profile").display()
            ))
            .args(extra)
            .arg(&url)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("start chromium");
        let started = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st;
            }
            if started.elapsed() > BOUND {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "chromium did not finish within {BOUND:?}:\n{}",
                    std::fs::read_to_string(&err).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let r = Rendered {
            stdout: std::fs::read_to_string(&out).unwrap_or_default(),
            stderr: std::fs::read_to_string(&err).unwrap_or_default(),
        };
        assert!(
            status.success(),
            "chromium failed ({status}):\n{}",
            r.stderr
        );
        r
    }

    /// The page's DOM after its scripts ran, and the console.
    pub fn dump_dom(&self, page: &Path) -> Rendered {
        self.run(page, &["--dump-dom".to_owned()])
    }

    /// A screenshot of the page's first `width` x `height` CSS pixels as
    /// a PNG at `png`.
    pub fn screenshot(&self, page: &Path, png: &Path, width: u32, height: u32) -> Rendered {
        let r = self.run(
            page,
            &[
                format!("--screenshot={}", png.display()),
                format!("--window-size={width},{height}"),
            ],
        );
        assert!(png.exists(), "no screenshot written:\n{}", r.stderr);
        r
    }
}
