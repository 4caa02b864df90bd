//! Latency mode: a bounded spin before a connection sleeps
//! (`[tcp] busy_poll`, `--busy-poll`; off by default).
//!
//! At queue depth 1 every command costs the target two wake-ups: the
//! connection's task parks on the socket (epoll) after sending a status,
//! and the reactor wakes it, often on the other core, when the next
//! command arrives; a command on a file or block LUN adds the ring's
//! completion. With a budget, a connection that has sent everything and
//! waits only for its socket, its io_uring or the blocking pool first
//! polls them itself, without a system call for the ring and with one
//! non-blocking `recv` per turn for the socket, until something arrives
//! or the budget is spent; only then does it await readiness as usual.
//! Like NAPI busy polling or io_uring's SQPOLL idle time, it buys latency
//! with CPU: a spin that times out burns its whole budget on a core, and
//! the worker thread runs nothing else meanwhile. The counters here say
//! how often spins found work and how much time they took.
//!
//! This module owns the rules: the bound on the budget ([`MAX_BUDGET`]),
//! when a connection may spin ([`Idle::may_spin`]), the loop itself with
//! the clock passed in ([`spin`]), the socket read that bypasses tokio's
//! readiness ([`recv_now`]) and the counters ([`BusyPollCounters`]).
//!
//! `SO_BUSY_POLL` is not set: it makes the kernel poll a NIC's NAPI queue
//! on a blocking read or (with `net.core.busy_poll`) in epoll, so it does
//! nothing on loopback and nothing for the wake-up of the user thread
//! this mode avoids; where a NIC supports it, the sysctls
//! `net.core.busy_read` and `net.core.busy_poll` turn it on for every
//! socket without a change here.

use std::io;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use ironlun_net::Read;
use prometheus_client::metrics::counter::Counter;
use tokio::net::TcpStream;

/// The largest budget, checked where the configuration is read.
pub use crate::config::MAX_BUSY_POLL as MAX_BUDGET;

/// What a connection waits for when it is about to sleep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Idle {
    /// It would read the socket (its outgoing queue is under the high
    /// water mark).
    pub want_read: bool,
    /// It has PDUs queued that the socket did not take.
    pub want_write: bool,
    /// Commands wait on a store's own asynchronous path (RBD): those
    /// complete in milliseconds, through a waker, and are not polled.
    pub store_ios: bool,
    /// Another session signalled, or the target shuts down, or the
    /// connection closes: handled at once, without spinning.
    pub interrupted: bool,
}

impl Idle {
    /// A connection spins only when all it waits for is the next PDU or
    /// the completion of its ring or blocking pool: with output queued the
    /// socket's writability decides, which a spin does not speed up.
    pub fn may_spin(&self) -> bool {
        self.want_read && !self.want_write && !self.store_ios && !self.interrupted
    }
}

/// Polls with `poll` until it finds something or `clock` reaches `start +
/// budget`; the clock is read once per turn, after the poll, so a budget
/// too short to poll still polls once. Returns what was found and when
/// the spin ended.
pub fn spin<T>(
    start: Instant,
    budget: Duration,
    mut clock: impl FnMut() -> Instant,
    mut poll: impl FnMut() -> Option<T>,
) -> (Option<T>, Instant) {
    let deadline = start + budget.min(MAX_BUDGET);
    loop {
        let found = poll();
        let now = clock();
        if found.is_some() || now >= deadline {
            return (found, now);
        }
        std::hint::spin_loop();
    }
}

/// One non-blocking read straight from the socket into `buf`'s spare
/// room (at most `most` bytes). Unlike tokio's `try_read`, which returns
/// `WouldBlock` without asking the kernel until the reactor has seen the
/// socket readable, this asks the kernel each time, so a spin sees bytes
/// as soon as they arrive. It leaves tokio's readiness alone: a
/// readiness the reactor records for bytes read here costs one empty read
/// later, and none is lost (epoll reports every arrival).
pub fn recv_now(stream: &TcpStream, buf: &mut BytesMut, most: usize) -> io::Result<Read> {
    if buf.capacity() == buf.len() {
        buf.reserve(most.max(4096));
    }
    let spare = buf.spare_capacity_mut();
    let room = spare.len().min(most.max(1));
    let Some(spare) = spare.get_mut(..room) else {
        return Ok(Read::Nothing);
    };
    match socket2::SockRef::from(stream).recv(spare) {
        Ok(0) => Ok(Read::Eof),
        Ok(n) => {
            // SAFETY: recv(2) initialized the first n bytes of the spare
            // room it was given, and n is at most that room.
            unsafe { buf.advance_mut(n) };
            Ok(Read::Bytes { drained: n < room })
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Read::Nothing),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(Read::Nothing),
        Err(e) => Err(e),
    }
}

/// Spins by outcome and their time, for `/metrics` and `/stats`; clones
/// share the counts.
#[derive(Clone, Debug, Default)]
pub struct BusyPollCounters {
    /// Spins that found a PDU or a completion before the budget ran out.
    pub found: Counter,
    /// Spins that used their whole budget and then slept.
    pub timed_out: Counter,
    /// Time spent spinning, in seconds: the CPU the mode costs, found
    /// work or not.
    pub seconds: Counter<f64, std::sync::atomic::AtomicU64>,
}

impl BusyPollCounters {
    /// One spin that took `took` and found work or not.
    pub fn record(&self, found: bool, took: Duration) {
        if found {
            self.found.inc();
        } else {
            self.timed_out.inc();
        }
        self.seconds.inc_by(took.as_secs_f64());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A clock that moves `step` each time it is read.
    fn ticking(start: Instant, step: Duration) -> impl FnMut() -> Instant {
        let t = Cell::new(start);
        move || {
            t.set(t.get() + step);
            t.get()
        }
    }

    #[test]
    fn spin_stops_at_the_budget() {
        let start = Instant::now();
        let mut polls = 0;
        let us = Duration::from_micros;
        let (found, end) = spin(start, us(50), ticking(start, us(10)), || {
            polls += 1;
            None::<()>
        });
        assert_eq!(found, None);
        assert_eq!(polls, 5, "polled at 10, 20, 30, 40 and 50 µs");
        assert_eq!(end, start + us(50));
    }

    #[test]
    fn spin_returns_what_it_finds_at_once() {
        let start = Instant::now();
        let mut polls = 0;
        let us = Duration::from_micros;
        let (found, end) = spin(start, us(50), ticking(start, us(10)), || {
            polls += 1;
            (polls == 3).then_some("pdu")
        });
        assert_eq!(found, Some("pdu"));
        assert_eq!(polls, 3);
        assert_eq!(end, start + us(30));
    }

    #[test]
    fn spin_budget_is_bounded_and_polls_at_least_once() {
        let start = Instant::now();
        let mut polls = 0;
        let (_, end) = spin(
            start,
            Duration::from_secs(10),
            ticking(start, Duration::from_micros(100)),
            || {
                polls += 1;
                None::<()>
            },
        );
        assert_eq!(end, start + MAX_BUDGET, "10 s is cut to the bound");
        assert_eq!(polls, 10);
        let mut polls = 0;
        let (_, _) = spin(
            start,
            Duration::ZERO,
            ticking(start, Duration::ZERO),
            || {
                polls += 1;
                None::<()>
            },
        );
        assert_eq!(polls, 1);
    }

    #[test]
    fn only_a_connection_waiting_for_input_spins() {
        let idle = Idle {
            want_read: true,
            ..Idle::default()
        };
        assert!(idle.may_spin());
        for other in [
            Idle {
                want_read: false,
                ..idle
            },
            Idle {
                want_write: true,
                ..idle
            },
            Idle {
                store_ios: true,
                ..idle
            },
            Idle {
                interrupted: true,
                ..idle
            },
        ] {
            assert!(!other.may_spin(), "{other:?}");
        }
    }

    #[test]
    fn counters_split_by_outcome() {
        let c = BusyPollCounters::default();
        let shared = c.clone();
        c.record(true, Duration::from_micros(3));
        c.record(false, Duration::from_micros(50));
        assert_eq!(shared.found.get(), 1);
        assert_eq!(shared.timed_out.get(), 1);
        assert!((shared.seconds.get() - 53e-6).abs() < 1e-9);
    }

    #[tokio::test]
    async fn recv_now_reads_what_tokio_has_not_seen_yet() {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let server = TcpStream::from_std(server).unwrap();
        let mut buf = BytesMut::new();
        assert!(matches!(
            recv_now(&server, &mut buf, 64).unwrap(),
            Read::Nothing
        ));
        client.write_all(b"hello").unwrap();
        // The bytes are in the socket once write returns on loopback; the
        // read may still race the kernel's delivery, so it is retried a
        // bounded number of times (not a timing: the count bounds it).
        let mut got = Read::Nothing;
        for _ in 0..100_000 {
            got = recv_now(&server, &mut buf, 64).unwrap();
            if !matches!(got, Read::Nothing) {
                break;
            }
            std::thread::yield_now();
        }
        assert!(matches!(got, Read::Bytes { drained: true }), "{got:?}");
        assert_eq!(&buf[..], b"hello");
        drop(client);
        let mut end = Read::Nothing;
        for _ in 0..100_000 {
            end = recv_now(&server, &mut buf, 64).unwrap();
            if !matches!(end, Read::Nothing) {
                break;
            }
            std::thread::yield_now();
        }
        assert!(matches!(end, Read::Eof), "{end:?}");
    }
}
