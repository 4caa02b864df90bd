//! The relay on loopback against its settings: added delay, delivered
//! rate, the window limit, half-close and cut. Pass/fail checks only
//! the bounds load cannot break (never sooner than the delay or the
//! host time, less the coalescing slack a delivery may leave early by;
//! never faster than the cap or the window); how close the relay comes to its
//! setting is printed, not asserted. The tests run one at a time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ironlun_netem::relay::COALESCE;
use ironlun_netem::{Framer, HostDelay, LinkSpec, Relay, Stage};

static SERIAL: Mutex<()> = Mutex::new(());

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// An upstream server that runs `f` on each connection.
fn server(f: fn(TcpStream)) -> SocketAddr {
    let l = TcpListener::bind(any_port()).unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            c.set_nodelay(true).unwrap();
            std::thread::spawn(move || f(c));
        }
    });
    addr
}

fn echo(mut c: TcpStream) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = c.read(&mut buf) {
        if n == 0 || c.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

/// Reads everything, then answers with the byte count.
fn sink(mut c: TcpStream) {
    let mut buf = vec![0u8; 1 << 16];
    let mut total = 0u64;
    while let Ok(n) = c.read(&mut buf) {
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    let _ = c.write_all(&total.to_be_bytes());
}

/// Measures once, fails if the value breaks a bound no load can
/// explain (delivering faster than the cap, sooner than the delay, more
/// than the window allows), and prints how close it came to the
/// setting. Whether the relay *reaches* its setting is a matter of
/// timing on a loaded machine, so it is not a pass/fail check here: the
/// virtual-clock tests in `model.rs` check the arithmetic exactly, and
/// the measured value is printed (`--nocapture`) for a reader to judge.
fn within_hard_bound<T: std::fmt::Debug>(
    what: &str,
    measure: impl FnOnce() -> T,
    setting: &str,
    never: impl Fn(&T) -> bool,
) {
    let v = measure();
    assert!(!never(&v), "{what}: {v:?} breaks a hard bound ({setting})");
    eprintln!("{what}: measured {v:?}, setting {setting}");
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn round_trips(addr: SocketAddr, n: usize) -> Duration {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    let mut times = Vec::new();
    let mut b = [0u8; 1];
    for _ in 0..n {
        let t = Instant::now();
        c.write_all(&[7]).unwrap();
        c.read_exact(&mut b).unwrap();
        times.push(t.elapsed());
    }
    median(times)
}

#[test]
fn added_delay_matches_the_round_trip_setting() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let up = server(echo);
    for rtt_ms in [0u64, 10, 40] {
        let rtt = Duration::from_millis(rtt_ms);
        let relay = Relay::start(any_port(), up, LinkSpec::with_rtt(rtt)).unwrap();
        within_hard_bound(
            "median round trip",
            || round_trips(relay.addr(), 15),
            &format!("{rtt:?}"),
            // A delivery may leave up to COALESCE early, each way.
            |got| *got + 2 * COALESCE < rtt,
        );
    }
}

#[test]
fn asymmetric_delays_add_up() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let up = server(echo);
    let spec = LinkSpec {
        delay_up: Duration::from_millis(30),
        delay_down: Duration::from_millis(5),
        ..LinkSpec::default()
    };
    let relay = Relay::start(any_port(), up, spec).unwrap();
    within_hard_bound(
        "median round trip",
        || round_trips(relay.addr(), 9),
        "30 ms up + 5 ms down",
        |got| *got + 2 * COALESCE < Duration::from_millis(35),
    );
}

/// Sends `bytes` through the relay and returns the sink's count and the
/// time until the count came back.
fn push(addr: SocketAddr, bytes: usize) -> (u64, Duration) {
    let mut c = TcpStream::connect(addr).unwrap();
    let chunk = vec![0x5a; 64 << 10];
    let t = Instant::now();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len());
        c.write_all(&chunk[..n]).unwrap();
        left -= n;
    }
    c.shutdown(Shutdown::Write).unwrap();
    let mut count = [0u8; 8];
    c.read_exact(&mut count).unwrap();
    (u64::from_be_bytes(count), t.elapsed())
}

#[test]
fn delivered_rate_matches_the_rate_cap() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let up = server(sink);
    for mbit in [20u64, 80] {
        let spec = LinkSpec {
            rate_bps: Some(mbit * 1_000_000),
            ..LinkSpec::default()
        };
        let relay = Relay::start(any_port(), up, spec).unwrap();
        // About 1 s of data at the cap.
        let bytes = (mbit * 1_000_000 / 8) as usize;
        let cap = mbit as f64;
        let mut sent = 0u64;
        within_hard_bound(
            "delivered Mbit/s",
            || {
                let (count, took) = push(relay.addr(), bytes);
                assert_eq!(count, bytes as u64, "every byte arrives");
                sent += count;
                bytes as f64 * 8.0 / took.as_secs_f64() / 1e6
            },
            &format!("cap {mbit} Mbit/s"),
            |rate| *rate > cap * 1.05,
        );
        assert_eq!(relay.stats().bytes_up, sent);
    }
}

#[test]
fn rate_and_delay_together_are_pipelined() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let up = server(sink);
    // 4 MB at 40 Mbit/s with a 40 ms RTT: 0.8 s of serialisation plus
    // one one-way delay for the last byte and one for the count, not a
    // delay per chunk.
    let mut spec = LinkSpec::with_rtt(Duration::from_millis(40));
    spec.rate_bps = Some(40_000_000);
    let relay = Relay::start(any_port(), up, spec).unwrap();
    let expected = 0.8 + 0.040;
    within_hard_bound(
        "seconds to deliver 4 MB",
        || {
            let (count, took) = push(relay.addr(), 4_000_000);
            assert_eq!(count, 4_000_000);
            took.as_secs_f64()
        },
        &format!("~{expected:.2} s"),
        |got| *got < expected * 0.95,
    );
}

#[test]
fn an_emulated_window_limits_throughput_to_window_per_round_trip() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let up = server(sink);
    let mut spec = LinkSpec::with_rtt(Duration::from_millis(40));
    spec.window = Some(128 << 10);
    let relay = Relay::start(any_port(), up, spec).unwrap();
    // 128 KiB per 40 ms: ~3.3 MB/s; 2.5 MB takes ~0.77 s.
    let bytes = 2_500_000;
    let model = f64::from(128u32 << 10) / 0.040;
    within_hard_bound(
        "B/s through the window",
        || {
            let (count, took) = push(relay.addr(), bytes);
            assert_eq!(count, bytes as u64);
            bytes as f64 / took.as_secs_f64()
        },
        &format!("window model {model:.0} B/s"),
        |rate| *rate > model * 1.15,
    );
}

#[test]
fn half_close_is_relayed_and_cut_closes_everything() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let up = server(sink);
    let mut relay = Relay::start(any_port(), up, LinkSpec::default()).unwrap();
    let (count, _) = push(relay.addr(), 100_000);
    assert_eq!(count, 100_000, "the answer came back after our half-close");

    let up = server(echo);
    let mut relay2 = Relay::start(any_port(), up, LinkSpec::default()).unwrap();
    let mut c = TcpStream::connect(relay2.addr()).unwrap();
    c.write_all(b"x").unwrap();
    let mut b = [0u8; 1];
    c.read_exact(&mut b).unwrap();
    let addr = relay2.addr();
    relay2.cut();
    assert_eq!(
        ended_within(&mut c, Duration::from_secs(5)),
        Ok(()),
        "a cut connection ends"
    );
    assert!(TcpStream::connect(addr).is_err(), "a cut relay refuses");
    relay.cut();
}

/// Whether the peer ended `c` within `wait`: EOF or a reset (RFC 9293
/// §3.6, §3.5.2) is `Ok`; silence for `wait`, bytes, or another error is
/// not an end, and says what happened instead.
fn ended_within(c: &mut TcpStream, wait: Duration) -> Result<(), String> {
    use std::io::ErrorKind as K;
    c.set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 64];
    loop {
        match c.read(&mut b) {
            Ok(0) => return Ok(()),
            Ok(n) => return Err(format!("{n} bytes arrived")),
            Err(e) => match e.kind() {
                K::Interrupted => {}
                K::ConnectionReset | K::ConnectionAborted => return Ok(()),
                K::WouldBlock | K::TimedOut => return Err(format!("still open after {wait:?}")),
                _ => return Err(format!("read failed: {e}")),
            },
        }
    }
}

#[test]
fn a_silent_peer_has_not_ended_and_a_closed_one_has() {
    let l = TcpListener::bind(any_port()).unwrap();
    let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mut s, _) = l.accept().unwrap();
    assert!(ended_within(&mut c, Duration::from_millis(200)).is_err());
    s.write_all(b"x").unwrap();
    assert!(ended_within(&mut c, Duration::from_secs(5)).is_err());
    drop(s);
    assert_eq!(ended_within(&mut c, Duration::from_secs(5)), Ok(()));
}

/// Messages of a 4-byte header: a flag byte (1: a command, which the
/// host holds) and a 3-byte big-endian total length.
#[derive(Debug)]
struct Flagged;

impl Framer for Flagged {
    fn header_len(&self) -> usize {
        4
    }
    fn message(&self, h: &[u8]) -> Option<(usize, bool)> {
        let len = h[1..4].iter().fold(0usize, |a, b| a << 8 | usize::from(*b));
        Some((len, h[0] == 1))
    }
}

/// Sends `commands` marked commands, each followed by unmarked data,
/// through a relay with `host` and an echo server behind it; checks every
/// byte comes back in order and returns how long the last took.
fn commands_round_trip(host: HostDelay, commands: u32) -> Duration {
    let up = server(echo);
    let spec = LinkSpec {
        host: Some(host),
        ..LinkSpec::default()
    };
    let relay = Relay::start(any_port(), up, spec).unwrap();
    let mut stream = Vec::new();
    for i in 0..commands {
        // A command, then data that is not one.
        stream.extend([1, 0, 0, 100]);
        stream.extend((4..100).map(|j| (i * 7 + j) as u8));
        stream.extend([0, 0, 1, 0]);
        stream.extend((4..256).map(|j| (i + j) as u8));
    }
    let mut c = TcpStream::connect(relay.addr()).unwrap();
    let t = Instant::now();
    c.write_all(&stream).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let mut back = Vec::new();
    c.read_to_end(&mut back).unwrap();
    let took = t.elapsed();
    assert!(back == stream, "bytes differ or are missing");
    took
}

/// A disk stage after a host of no time: each command then holds one of
/// the disk's servers for its time; every byte comes back, in order, and
/// the last not before commands / servers disk times have passed.
#[test]
fn a_disk_stage_holds_each_command_with_its_servers() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let time = Duration::from_millis(40);
    let (servers, commands) = (2u32, 6u32);
    let host = HostDelay {
        delay: Duration::ZERO,
        busy: Duration::ZERO,
        servers: 1,
        then: Some(Stage { time, servers }),
        framer: Arc::new(Flagged),
    };
    let took = commands_round_trip(host, commands);
    let least = time * (commands / servers);
    within_hard_bound(
        "time to the last byte",
        || took,
        &format!("{commands} commands, {servers} disk servers, {time:?} each: at least {least:?}"),
        |got| *got + COALESCE < least,
    );
}

/// Each command waits the host time, with as many at once as the host
/// has cores; every byte comes back, in order. The hard bound: the last
/// byte cannot be back before commands / cores host times have passed
/// (nothing else on this link delays).
#[test]
fn host_time_holds_each_command_with_the_hosts_cores() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let delay = Duration::from_millis(40);
    for (servers, commands) in [(1u32, 4u32), (2, 6)] {
        let host = HostDelay {
            delay,
            busy: delay,
            servers,
            then: None,
            framer: Arc::new(Flagged),
        };
        let took = commands_round_trip(host, commands);
        let least = delay * (commands / servers);
        within_hard_bound(
            "time to the last byte",
            || took,
            &format!("{commands} commands, {servers} cores, {delay:?} each: at least {least:?}"),
            |got| *got + COALESCE < least,
        );
    }
}
