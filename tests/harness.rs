//! The test harness's own checks: the helpers that decide "closed",
//! "skipped" and "ran" must not pass on silence. Against stub peers on
//! loopback and fabricated inputs, never the daemon.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ironlun_wire::{encode_frame, Digests, NopIn, Pdu};
use support::{closed_within, End, Raw};

/// A raw client connected to a stub that has accepted it: the stub's end
/// of the connection is the test's to hold, write to or drop.
fn stub_pair(read_timeout: Duration) -> (Raw, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = Raw::connect(l.local_addr().unwrap());
    c.stream.set_read_timeout(Some(read_timeout)).unwrap();
    let (s, _) = l.accept().unwrap();
    (c, s)
}

fn nop_in() -> Vec<u8> {
    let mut out = BytesMut::new();
    let pdu = Pdu::NopIn(NopIn {
        itt: 0xffff_ffff,
        ttt: 7,
        ..Default::default()
    });
    encode_frame(&pdu.encode(), &[], &[], Digests::default(), &mut out).unwrap();
    out.to_vec()
}

#[test]
fn a_peer_that_goes_silent_has_not_closed() {
    let (mut c, held) = stub_pair(Duration::from_millis(300));
    let started = Instant::now();
    assert_eq!(c.end(), End::TimedOut);
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert!(!c.closed(), "a read timeout counted as a close");
    // Even after a PDU.
    let (mut c, mut held2) = stub_pair(Duration::from_millis(300));
    held2.write_all(&nop_in()).unwrap();
    assert!(!c.closed());
    drop((held, held2));
}

#[test]
fn eof_and_reset_are_closed_even_after_pdus() {
    let (mut c, s) = stub_pair(Duration::from_secs(5));
    drop(s);
    assert_eq!(c.end(), End::Closed);

    let (mut c, mut s) = stub_pair(Duration::from_secs(5));
    s.write_all(&nop_in()).unwrap();
    s.write_all(&nop_in()).unwrap();
    drop(s);
    assert!(c.closed());

    // SO_LINGER with a zero timeout: close(2) sends a reset.
    let (mut c, s) = stub_pair(Duration::from_secs(5));
    reset(s);
    assert_eq!(c.end(), End::Closed);
}

fn reset(s: TcpStream) {
    use std::os::unix::io::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt(2) on a socket we own, with a valid linger value
    // and its size.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            std::ptr::addr_of!(linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
    drop(s);
}

#[test]
fn bytes_that_are_not_a_pdu_are_not_a_close() {
    let (mut c, mut s) = stub_pair(Duration::from_secs(5));
    let mut junk = [0u8; 48];
    junk[0] = 0x1e; // no such opcode
    s.write_all(&junk).unwrap();
    assert!(matches!(c.end(), End::Undecodable(_)));
    let (mut c, mut s) = stub_pair(Duration::from_secs(5));
    s.write_all(&junk).unwrap();
    assert!(!c.closed());
}

#[test]
fn a_peer_that_keeps_talking_is_reported_within_a_bound() {
    let (mut c, mut s) = stub_pair(Duration::from_millis(300));
    let talker = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until && s.write_all(&nop_in()).is_ok() {
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let started = Instant::now();
    assert_eq!(c.end(), End::StillSending);
    assert!(started.elapsed() < Duration::from_secs(3));
    drop(c);
    talker.join().unwrap();
}

#[test]
fn closed_within_counts_only_eof_or_reset() {
    let (c, held) = stub_pair(Duration::from_secs(5));
    let mut c = c.stream;
    assert!(!closed_within(&mut c, Duration::from_millis(200)));
    let (c2, mut s2) = stub_pair(Duration::from_secs(5));
    let mut c2 = c2.stream;
    s2.write_all(b"x").unwrap();
    assert!(!closed_within(&mut c2, Duration::from_secs(5)));
    drop(held);
    assert!(closed_within(&mut c, Duration::from_secs(5)));
    reset(s2);
    assert!(closed_within(&mut c2, Duration::from_secs(5)));
}
