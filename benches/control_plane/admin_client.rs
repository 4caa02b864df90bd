//! A keep-alive HTTP/1.1 client for the daemon's management socket, so
//! that an operation's time is its request and answer only: no process
//! start (as `ironlun admin` has) and no connect.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// Longest answer head, and body, taken from the daemon.
const MAX_HEAD: usize = 64 << 10;
const MAX_BODY: usize = 16 << 20;
/// How long one operation may take before the run fails.
const ANSWER_WITHIN: Duration = Duration::from_secs(120);

pub struct AdminClient {
    conn: BufReader<UnixStream>,
}

impl AdminClient {
    pub fn connect(socket: &Path) -> Result<AdminClient, String> {
        let s = UnixStream::connect(socket).map_err(|e| format!("{}: {e}", socket.display()))?;
        s.set_read_timeout(Some(ANSWER_WITHIN))
            .map_err(|e| e.to_string())?;
        Ok(AdminClient {
            conn: BufReader::new(s),
        })
    }

    /// One exchange: the status and the body.
    pub fn call(&mut self, method: &str, path: &str, body: &str) -> Result<(u16, String), String> {
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: ironlun\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let s = self.conn.get_mut();
        s.write_all(head.as_bytes())
            .and_then(|()| s.write_all(body.as_bytes()))
            .map_err(|e| format!("management socket: {e}"))?;
        let (status, len) = self.read_head()?;
        let mut buf = vec![0; len];
        self.conn
            .read_exact(&mut buf)
            .map_err(|e| format!("management socket: {e}"))?;
        Ok((status, String::from_utf8_lossy(&buf).into_owned()))
    }

    /// `POST /v1/ops` with `op`; the answer's JSON, or why it failed.
    pub fn op(&mut self, op: &serde_json::Value) -> Result<serde_json::Value, String> {
        let (status, body) = self.call("POST", "/v1/ops", &op.to_string())?;
        if status != 200 {
            return Err(format!("{op}: HTTP {status}: {}", body.trim()));
        }
        serde_json::from_str(&body).map_err(|e| format!("{op}: answer: {e}"))
    }

    /// The status line and headers: the status and the body's length.
    fn read_head(&mut self) -> Result<(u16, usize), String> {
        let mut status = None;
        let mut len = 0;
        let mut taken = 0;
        loop {
            let mut line = String::new();
            let n = self
                .conn
                .read_line(&mut line)
                .map_err(|e| format!("management socket: {e}"))?;
            taken += n;
            if n == 0 || taken > MAX_HEAD {
                return Err("management socket: the answer's head is cut or too long".into());
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if status.is_none() {
                status = line.split_whitespace().nth(1).and_then(|c| c.parse().ok());
                continue;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().map_err(|_| "bad Content-Length")?;
                }
            }
        }
        if len > MAX_BODY {
            return Err(format!("management socket: a {len}-byte answer"));
        }
        Ok((status.ok_or("management socket: no status")?, len))
    }
}
