//! Helpers for end-to-end tests: run the real `ironlun` binary on a
//! loopback port, find external tools, and talk raw PDUs to the target.
//!
//! External tools (libiscsi-bin, qemu-utils + qemu-block-extra) are
//! required: `scripts/test` installs them. A test that needs a missing tool
//! fails and says which package to install; it never passes silently.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub mod alua;
pub mod browser;
pub mod ceph;
pub mod cu;
pub mod ha;
pub mod nexus;
pub mod skip;
pub mod xfs;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use ironlun_wire::text::{encode_pairs, parse_pairs};
use ironlun_wire::{
    encode_frame, DataOut, Digests, FrameDecoder, LoginRequest, LoginResponse, Lun, Pdu,
    ScsiCommand, TaskMgmtRequest, TmfFunction, TmfResponse,
};

/// The ironlun binary the end-to-end tests run: this build's, or
/// `IRONLUN_BIN` (scripts/test's VM tier points it at the release
/// binary it builds once for the VM tier and the .deb, so that the test
/// harness itself need not be built again in release).
pub fn ironlun_bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        std::env::var("IRONLUN_BIN")
            .ok()
            .filter(|b| !b.is_empty())
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_ironlun").to_owned())
    })
}

/// Path of a required tool, or a panic naming the package.
pub fn tool(name: &str, package: &str) -> String {
    for dir in ["/usr/bin", "/usr/local/bin", "/usr/sbin"] {
        let p = format!("{dir}/{name}");
        if std::path::Path::new(&p).exists() {
            return p;
        }
    }
    panic!(
        "{name} is not installed: install the Debian package {package} (scripts/test does this)"
    );
}

/// A running target process. Killed on drop, and then its log must not
/// say it panicked ([`panics_in`]): a panic in a connection's task does
/// not stop the daemon, and the test that caused it would not know.
pub struct Target {
    pub child: Child,
    /// The first portal.
    pub addr: SocketAddr,
    /// Every portal, in the order the target reported them.
    pub addrs: Vec<SocketAddr>,
    pub log: Arc<Mutex<String>>,
    /// Closes when the whole log has been read (the target's stderr
    /// ended).
    log_done: Option<std::sync::mpsc::Receiver<()>>,
}

impl Target {
    /// Starts `ironlun target` with these arguments plus
    /// `--listen 127.0.0.1:0`, and waits until it listens.
    pub fn start(args: &[&str]) -> Target {
        Self::start_portals(args, 1)
    }

    /// Starts the target with `portals` loopback portals on ports the
    /// kernel picks (none: the arguments name them, and one is awaited).
    pub fn start_portals(args: &[&str], portals: usize) -> Target {
        Self::start_env(args, portals, &[])
    }

    /// As [`Target::start_portals`], with extra environment variables.
    pub fn start_env(args: &[&str], portals: usize, envs: &[(&str, &str)]) -> Target {
        let mut cmd = Command::new(ironlun_bin());
        cmd.envs(envs.iter().copied());
        cmd.arg("--log").arg("info").arg("target");
        for _ in 0..portals {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        cmd.args(args);
        Self::spawn(cmd, portals.max(1))
    }

    /// Runs `cmd` as the target (its stderr is the log) and waits until
    /// it has said `listening on ADDR` `want` times.
    pub fn spawn(mut cmd: Command, want: usize) -> Target {
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn ironlun");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, log_done) = std::sync::mpsc::channel::<()>();
        let log2 = log.clone();
        std::thread::spawn(move || {
            let _done = done_tx;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let plain = strip_ansi(&line);
                if let Some(pos) = plain.find("listening on ") {
                    let _ = tx.send(plain[pos + 13..].trim().to_owned());
                }
                let mut l = log2.lock().unwrap();
                l.push_str(&plain);
                l.push('\n');
            }
        });
        let mut addrs = Vec::new();
        while addrs.len() < want {
            match rx.recv_timeout(Duration::from_secs(20)) {
                Ok(a) => addrs.push(a.parse().expect("listen address")),
                Err(_) => {
                    let _ = child.kill();
                    panic!("target did not start: {}", log.lock().unwrap());
                }
            }
        }
        Target {
            child,
            addr: addrs[0],
            addrs,
            log,
            log_done: Some(log_done),
        }
    }

    /// Starts the target with exactly these arguments (they name the
    /// portals), waiting for the first portal.
    pub fn start_with(args: &[&str], add_listen: bool) -> Target {
        Self::start_portals(args, usize::from(add_listen))
    }

    pub fn portal(&self) -> String {
        format!("iscsi://{}", self.addr)
    }

    pub fn url(&self, target: &str, lun: u16) -> String {
        format!("iscsi://{}/{}/{}", self.addr, target, lun)
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// The statistics endpoint's address, from the log (started with
    /// `--stats 127.0.0.1:0`).
    pub fn stats_addr(&self) -> SocketAddr {
        let needle = "statistics on http://";
        assert!(
            self.wait_log(needle, Duration::from_secs(10)),
            "no statistics endpoint: {}",
            self.log()
        );
        let log = self.log();
        let rest = &log[log.find(needle).unwrap() + needle.len()..];
        rest[..rest.find('/').unwrap()].parse().unwrap()
    }

    /// Waits (bounded) until the log contains `needle`.
    pub fn wait_log(&self, needle: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.log().contains(needle) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Sends SIGTERM and waits for the exit status (bounded).
    pub fn terminate(&mut self, within: Duration) -> Option<i32> {
        // SAFETY: kill(2) with a pid we own and a valid signal number.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Target {
    /// Stops the target (SIGKILL, if it still runs), reads the rest of
    /// its log and fails the test if the target panicked; during a test
    /// that fails anyway, the panic is printed instead.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(done) = self.log_done.take() {
            // Disconnected once the reader has seen the end of stderr.
            let _ = done.recv_timeout(Duration::from_secs(10));
        }
        let Some(report) = panics_in(&self.log()) else {
            return;
        };
        if std::thread::panicking() {
            let _ = writeln!(std::io::stderr(), "{report}");
        } else {
            panic!("{report}");
        }
    }
}

/// Lines of log context shown after each panic line, and at the end.
const PANIC_CONTEXT: usize = 6;
const LOG_TAIL: usize = 40;

/// What a target's log says of a panic: each line saying "panicked"
/// with the lines after it (the message and location), then the log's
/// last lines; `None` when no line says so.
pub fn panics_in(log: &str) -> Option<String> {
    let lines: Vec<&str> = log.lines().collect();
    let at: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains("panicked"))
        .collect();
    if at.is_empty() {
        return None;
    }
    let mut out = format!("the target panicked ({} time(s)):\n", at.len());
    for &i in &at {
        for l in &lines[i..(i + PANIC_CONTEXT).min(lines.len())] {
            out.push_str(&format!("  | {l}\n"));
        }
        out.push_str("  ...\n");
    }
    let tail = lines.len().saturating_sub(LOG_TAIL);
    out.push_str(&format!("last {} lines of its log:\n", lines.len() - tail));
    for l in &lines[tail..] {
        out.push_str(&format!("  | {l}\n"));
    }
    Some(out)
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Runs `ironlun target` with these arguments (and a loopback portal the
/// kernel picks) where it must refuse to start: its exit code and what
/// it wrote. One that starts instead is stopped and fails the test.
pub fn target_refused(args: &[&str]) -> (i32, String) {
    let mut child = Command::new(ironlun_bin())
        .args(["--log", "info", "target", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ironlun");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        strip_ansi(&text)
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "ironlun target {args:?} did not refuse to start: {}",
                reader.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code().unwrap_or(-1), reader.join().unwrap())
}

/// Runs a command, returning (exit code, stdout+stderr).
pub fn run(cmd: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(cmd).args(args).output().expect("run tool");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// Runs `ironlun ARGS`, fails the test unless it exits 0, and returns
/// its stdout and stderr.
pub fn ironlun_ok(args: &[&str]) -> String {
    let (rc, out) = run(ironlun_bin(), args);
    assert_eq!(rc, 0, "ironlun {args:?} failed:\n{out}");
    out
}

/// The JSON report at `path` (`ironlun bench --json`, `ironlun lab`).
pub fn read_json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The first workload's result in the JSON report at `path`.
pub fn first_workload(path: &std::path::Path) -> serde_json::Value {
    read_json(path)["workloads"][0].clone()
}

/// `ironlun bench ARGS --json DIR/r.json`, which must succeed; the first
/// workload's result.
pub fn bench_first_workload(dir: &std::path::Path, args: &[&str]) -> serde_json::Value {
    let json = dir.join("r.json");
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", json.to_str().unwrap()]);
    ironlun_ok(&all);
    first_workload(&json)
}

/// `ironlun bench` arguments for a verifying pass over the first MiB of
/// `lun` (a URL or a local file): 64 KiB sequential transfers at QD 4,
/// 64 of them, `read` percent reads (0 fills, 100 checks).
pub fn verify_pass_args<'a>(lun: &'a str, read: &'a str) -> Vec<&'a str> {
    vec![
        "bench",
        lun,
        "--verify",
        "--bs",
        "64k",
        "--read",
        read,
        "--random",
        "0",
        "--qd",
        "4",
        "--seek-range",
        "1MiB",
        "--ios",
        "64",
        "--time",
        "10s",
        "--ramp",
        "0",
    ]
}

/// `ironlun bench` flags for a verifying mixed run (after the LUNs) for
/// `time`: 8 KiB transfers, half reads, 60 % random, QD 16, within the
/// first `seek_range` bytes.
pub fn verify_mix_flags<'a>(time: &'a str, seek_range: &'a str) -> Vec<&'a str> {
    vec![
        "--verify",
        "--bs",
        "8k",
        "--read",
        "50",
        "--random",
        "60",
        "--qd",
        "16",
        "--time",
        time,
        "--ramp",
        "0",
        "--seek-range",
        seek_range,
    ]
}

/// A loopback port free at the time of asking.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Deterministic, incompressible-enough test data written to `path`.
pub fn random_file(path: &std::path::Path, len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let data: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(path, &data).unwrap();
    data
}

/// Writes `src` to an iSCSI URL with qemu-img, reads the LUN back into a
/// file in `dir`, and checks the first `data.len()` bytes are `data`.
pub fn qemu_round_trip(dir: &std::path::Path, src: &std::path::Path, data: &[u8], url: &str) {
    let qemu_img = tool("qemu-img", "qemu-utils");
    let (rc, out) = run(
        &qemu_img,
        &[
            "convert",
            "-n",
            "-f",
            "raw",
            "-O",
            "raw",
            src.to_str().unwrap(),
            url,
        ],
    );
    assert_eq!(
        rc, 0,
        "qemu-img write to {url}: {out} (qemu-block-extra provides the iscsi driver)"
    );
    let back = dir.join("qemu-read-back.img");
    let (rc, out) = run(
        &qemu_img,
        &[
            "convert",
            "-f",
            "raw",
            "-O",
            "raw",
            url,
            back.to_str().unwrap(),
        ],
    );
    assert_eq!(rc, 0, "qemu-img read from {url}: {out}");
    let got = std::fs::read(&back).unwrap();
    assert!(
        got.len() >= data.len() && got[..data.len()] == data[..],
        "{url}: data read back differs"
    );
    std::fs::remove_file(&back).unwrap();
}

/// How a connection ended, or why it is not known to have ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// The peer closed it: EOF (a FIN, RFC 9293 §3.6) or a reset
    /// (ECONNRESET / ECONNABORTED, RFC 9293 §3.5.2).
    Closed,
    /// Nothing arrived within the read timeout: the peer is still there.
    TimedOut,
    /// PDUs kept arriving for longer than one read timeout.
    StillSending,
    /// Bytes arrived that are not a PDU (a framing, digest or opcode
    /// error).
    Undecodable(String),
    /// Another socket error: not the peer closing.
    Error(std::io::ErrorKind),
}

/// One `read` from `s`, retried on EINTR: the byte count, or how the
/// connection ended. Only EOF and a reset are [`End::Closed`]; a read
/// timeout is [`End::TimedOut`].
pub fn read_some(s: &mut TcpStream, buf: &mut [u8]) -> Result<usize, End> {
    use std::io::ErrorKind as K;
    loop {
        match s.read(buf) {
            Ok(0) => return Err(End::Closed),
            Ok(n) => return Ok(n),
            Err(e) => match e.kind() {
                K::Interrupted => {}
                K::WouldBlock | K::TimedOut => return Err(End::TimedOut),
                K::ConnectionReset | K::ConnectionAborted => return Err(End::Closed),
                other => return Err(End::Error(other)),
            },
        }
    }
}

/// Whether the peer closed `s` (EOF or reset) within `wait`; bytes or
/// silence are not a close.
pub fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 64];
    matches!(read_some(s, &mut b), Err(End::Closed))
}

/// A minimal raw initiator for protocol-level end-to-end checks.
pub struct Raw {
    pub stream: TcpStream,
    buf: BytesMut,
    dec: FrameDecoder,
    pub cmd_sn: u32,
    pub exp_stat_sn: u32,
    next_itt: u32,
    /// Digests used both ways once negotiated (set by the caller).
    pub digests: Digests,
    /// The LUN commands, Data-Out and task management address (0 unless
    /// set).
    pub lun: u16,
}

impl Raw {
    pub fn connect(addr: SocketAddr) -> Raw {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Raw {
            stream,
            buf: BytesMut::new(),
            dec: FrameDecoder::new(1 << 24),
            cmd_sn: 1,
            exp_stat_sn: 0,
            next_itt: 1,
            digests: Digests::default(),
            lun: 0,
        }
    }

    pub fn send(&mut self, pdu: &Pdu, data: &[u8]) {
        let mut out = BytesMut::new();
        encode_frame(&pdu.encode(), &[], data, self.digests, &mut out).unwrap();
        self.stream.write_all(&out).unwrap();
    }

    pub fn send_bytes(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(b)
    }

    /// The next PDU, or how the connection ended instead.
    pub fn next_pdu(&mut self) -> Result<(Pdu, Bytes), End> {
        loop {
            self.dec.digests = self.digests;
            match self.dec.decode(&mut self.buf) {
                Ok(Some(f)) => {
                    return match Pdu::decode(&f.bhs) {
                        Ok(pdu) => Ok((pdu, f.data)),
                        Err(e) => Err(End::Undecodable(format!("{e:?}"))),
                    }
                }
                Ok(None) => {}
                Err(e) => return Err(End::Undecodable(format!("{e:?}"))),
            }
            let mut tmp = [0u8; 65536];
            let n = read_some(&mut self.stream, &mut tmp)?;
            self.buf.extend_from_slice(&tmp[..n]);
        }
    }

    /// Next PDU, or None when there is none (closed, silent or garbled:
    /// [`Raw::next_pdu`] says which).
    pub fn recv(&mut self) -> Option<(Pdu, Bytes)> {
        self.next_pdu().ok()
    }

    /// Reads and drops PDUs until the connection ends, and says how:
    /// [`End::Closed`] only for EOF or a reset. Silence for the read
    /// timeout is [`End::TimedOut`]; PDUs that keep coming for longer
    /// than one read timeout are [`End::StillSending`].
    pub fn end(&mut self) -> End {
        let wait = self
            .stream
            .read_timeout()
            .ok()
            .flatten()
            .unwrap_or(Duration::from_secs(10));
        let deadline = Instant::now() + wait;
        loop {
            match self.next_pdu() {
                Ok(_) if Instant::now() > deadline => return End::StillSending,
                Ok(_) => {}
                Err(e) => return e,
            }
        }
    }

    /// True if the peer closed the connection (EOF or reset) within the
    /// read timeout. A peer that merely goes quiet, or sends bytes that
    /// are not PDUs, has not closed it (the reason is printed).
    pub fn closed(&mut self) -> bool {
        match self.end() {
            End::Closed => true,
            other => {
                eprintln!("expected the peer to close the connection: {other:?}");
                false
            }
        }
    }

    /// Logs in to a normal session in one PDU (operational stage straight
    /// to full feature phase, as libiscsi does).
    pub fn login(
        &mut self,
        target: &str,
        isid: [u8; 6],
        extra: &[(&str, &str)],
    ) -> (LoginResponse, Vec<(String, String)>) {
        let mut pairs = vec![
            ("InitiatorName", "iqn.2026-11.io.ironlun:e2e"),
            ("SessionType", "Normal"),
            ("TargetName", target),
            ("InitialR2T", "No"),
            ("ImmediateData", "Yes"),
            ("MaxBurstLength", "262144"),
            ("FirstBurstLength", "65536"),
            ("MaxRecvDataSegmentLength", "262144"),
            ("MaxOutstandingR2T", "1"),
            ("DefaultTime2Wait", "2"),
            ("DefaultTime2Retain", "0"),
            ("HeaderDigest", "None"),
            ("DataDigest", "None"),
        ];
        for (k, v) in extra {
            match pairs.iter_mut().find(|(pk, _)| pk == k) {
                Some(p) => p.1 = v,
                None => pairs.push((k, v)),
            }
        }
        let req = LoginRequest {
            transit: true,
            cont: false,
            csg: 1,
            nsg: 3,
            isid,
            itt: 0,
            cid: 0,
            cmd_sn: self.cmd_sn,
            ..Default::default()
        };
        self.send(&Pdu::LoginRequest(req), &encode_pairs(pairs));
        let (pdu, data) = self.recv().expect("login response");
        let Pdu::LoginResponse(r) = pdu else {
            panic!("not a login response: {pdu:?}")
        };
        self.exp_stat_sn = r.stat_sn.wrapping_add(1);
        (r, parse_pairs(&data).unwrap())
    }

    fn itt(&mut self) -> u32 {
        self.next_itt += 1;
        self.next_itt
    }

    /// Sends a command (with `immediate` data, if any) and returns its
    /// ITT without waiting for anything.
    pub fn command(&mut self, cdb: &[u8], read_len: u32, write_len: u32, immediate: &[u8]) -> u32 {
        let mut c = [0u8; 16];
        c[..cdb.len()].copy_from_slice(cdb);
        let itt = self.itt();
        let cmd = ScsiCommand {
            immediate: false,
            final_bit: true,
            read: read_len > 0,
            write: write_len > 0,
            attr: 1,
            lun: Lun::from_index(self.lun),
            itt,
            expected_data_transfer_length: if write_len > 0 { write_len } else { read_len },
            cmd_sn: self.cmd_sn,
            exp_stat_sn: self.exp_stat_sn,
            cdb: c,
        };
        self.cmd_sn = self.cmd_sn.wrapping_add(1);
        self.send(&Pdu::ScsiCommand(cmd), immediate);
        itt
    }

    /// Sends one unsolicited Data-Out PDU for `itt`.
    pub fn data_out(&mut self, itt: u32, offset: u32, data: &[u8], final_bit: bool) {
        let d = DataOut {
            final_bit,
            lun: Lun::from_index(self.lun),
            itt,
            ttt: 0xffff_ffff,
            exp_stat_sn: self.exp_stat_sn,
            data_sn: 0,
            buffer_offset: offset,
        };
        self.send(&Pdu::DataOut(d), data);
    }

    /// An immediate task management request on LUN 0; returns the
    /// response.
    pub fn tmf(&mut self, function: TmfFunction, referenced_task_tag: u32) -> TmfResponse {
        let itt = self.itt();
        let req = TaskMgmtRequest {
            immediate: true,
            function,
            lun: Lun::from_index(self.lun),
            itt,
            referenced_task_tag,
            cmd_sn: self.cmd_sn,
            exp_stat_sn: self.exp_stat_sn,
            ref_cmd_sn: self.cmd_sn.wrapping_sub(1),
            exp_data_sn: 0,
        };
        self.send(&Pdu::TaskMgmtRequest(req), &[]);
        loop {
            match self.recv().expect("task management response").0 {
                Pdu::TaskMgmtResponse(r) => {
                    assert_eq!(r.itt, itt);
                    self.exp_stat_sn = r.stat_sn.wrapping_add(1);
                    return r.response;
                }
                Pdu::NopIn(_) | Pdu::AsyncMessage(_) => continue,
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    /// Runs a command and collects Data-In and status (the SCSI status
    /// as its byte).
    pub fn scsi(&mut self, cdb: &[u8], read_len: u32, write: &[u8]) -> (u8, Bytes, Vec<u8>) {
        self.command(cdb, read_len, write.len() as u32, write);
        let mut data = Vec::new();
        loop {
            let (pdu, d) = self.recv().expect("response");
            match pdu {
                Pdu::DataIn(di) => {
                    data.extend_from_slice(&d);
                    if let Some(st) = di.status {
                        return (st.0, Bytes::new(), data);
                    }
                }
                Pdu::ScsiResponse(r) => {
                    let sense = if d.len() > 2 {
                        d.slice(2..)
                    } else {
                        Bytes::new()
                    };
                    return (r.status.0, sense, data);
                }
                Pdu::NopIn(_) | Pdu::AsyncMessage(_) => continue,
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}

/// One HTTP/1.1 request with `Connection: close`: (status, body).
pub fn http_request(addr: SocketAddr, request_head: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A server may close before reading everything (oversized heads).
    let _ = s.write_all(request_head.as_bytes());
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// `GET path` on the statistics endpoint.
pub fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    http_request(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
    )
}

/// A TCP relay in front of a portal, to cut a path on demand: `cut`
/// closes every relayed connection and stops listening, so reconnection
/// attempts are refused.
pub struct Relay {
    pub addr: SocketAddr,
    stop: Arc<std::sync::atomic::AtomicBool>,
    conns: Arc<Mutex<Vec<std::net::TcpStream>>>,
    acceptor: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    pub fn start(to: SocketAddr) -> Relay {
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
        let (stop2, conns2) = (stop.clone(), conns.clone());
        let acceptor = std::thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                let client = match listener.accept() {
                    Ok((c, _)) => c,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    }
                    Err(_) => break,
                };
                client.set_nonblocking(false).unwrap();
                let Ok(server) = std::net::TcpStream::connect(to) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let mut held = conns2.lock().unwrap();
                held.push(client.try_clone().unwrap());
                held.push(server.try_clone().unwrap());
                drop(held);
                for (mut from, mut into) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut into);
                        let _ = into.shutdown(std::net::Shutdown::Both);
                        let _ = from.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Relay {
            addr,
            stop,
            conns,
            acceptor: Some(acceptor),
        }
    }

    pub fn cut(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.cut();
    }
}

/// Files of a state directory that hold LU state (`*.txt`), not the
/// management socket the daemon also keeps there.
pub fn state_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "txt"))
        .count()
}
