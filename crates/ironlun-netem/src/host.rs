//! Host time per message, without sockets or threads: where the messages
//! of a byte stream begin (read by a framer the caller gives, since the
//! relay knows no protocol), and when a message the framer marks may
//! enter the link after a host held it for a fixed time with a fixed
//! number of cores. Deterministic given arrival times, so it is tested
//! without a clock.
//!
//! A fitted testbed profile (ironlun-lab) imposes its hosts' time per
//! command this way: the relay holds each command before the link, so a
//! command's cycle gains the host time and a deep queue is bounded by
//! cores over host time, as on the testbed. A second [`Stage`] may follow
//! the host (a disk whose servers each hold a command for its time), also
//! before the link.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Reads message boundaries in one direction of a stream.
pub trait Framer: Send + Sync + fmt::Debug {
    /// Bytes of a message's header: enough to know its length.
    fn header_len(&self) -> usize;
    /// The whole message's length (header included) and whether the host
    /// time applies to it, from its first [`Framer::header_len`] bytes;
    /// `None` when the header is not one the framer knows (the stream is
    /// then left alone from there on).
    fn message(&self, header: &[u8]) -> Option<(usize, bool)>;
}

/// Largest header a framer may ask for.
pub const MAX_HEADER: usize = 4096;

/// Host time held per marked message of the client → server direction.
#[derive(Clone, Debug)]
pub struct HostDelay {
    /// Time each marked message is held before it enters the link.
    pub delay: Duration,
    /// Time each keeps one of the host's cores busy (a message waits for
    /// a free core first): with `busy` equal to `delay` the relay is the
    /// whole host; with more, it stands for a host whose own time is
    /// partly spent elsewhere (the endpoints), and still bounds a deep
    /// queue at `servers / busy` messages a second.
    pub busy: Duration,
    /// The host's cores; at least 1.
    pub servers: u32,
    /// A second stage a marked message passes after the host and before
    /// the link: a disk whose [`Stage::servers`] (spindles or arrays)
    /// each hold one for [`Stage::time`] (so a deep queue goes at
    /// servers / time).
    pub then: Option<Stage>,
    pub framer: Arc<dyn Framer>,
}

/// A stage of servers that each hold a message for a fixed time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stage {
    /// How long a message holds a server.
    pub time: Duration,
    /// Servers at once, 1 to 1024 (as [`HostTime::new`] clamps them);
    /// per relay, so per session where each session has its own.
    pub servers: u32,
}

impl Stage {
    /// The stage's schedule, for a relay.
    pub fn times(&self) -> HostTime {
        HostTime::new(self.time, self.time, self.servers)
    }
}

impl PartialEq for HostDelay {
    fn eq(&self, other: &HostDelay) -> bool {
        self.delay == other.delay
            && self.busy == other.busy
            && self.servers == other.servers
            && self.then == other.then
            && Arc::ptr_eq(&self.framer, &other.framer)
    }
}

/// Where marked messages begin, as a stream's bytes go by.
#[derive(Debug)]
pub struct Messages {
    framer: Arc<dyn Framer>,
    header_len: usize,
    /// The header being collected.
    head: Vec<u8>,
    /// Bytes of the current message after its header still to come.
    left: usize,
    /// A header the framer did not know: nothing more is marked.
    lost: bool,
}

impl Messages {
    pub fn new(framer: Arc<dyn Framer>) -> Messages {
        let header_len = framer.header_len().clamp(1, MAX_HEADER);
        Messages {
            framer,
            header_len,
            head: Vec::with_capacity(header_len),
            left: 0,
            lost: false,
        }
    }

    /// Whether the framer lost the stream (a header it did not know).
    pub fn lost(&self) -> bool {
        self.lost
    }

    /// Takes the stream's next bytes and returns, in order, the offsets
    /// in `data` where a marked message begins (0 for one whose header
    /// began in earlier bytes and ends in these).
    pub fn marks(&mut self, data: &[u8]) -> Vec<usize> {
        let mut out = Vec::new();
        let mut i = 0usize;
        while i < data.len() && !self.lost {
            if self.left > 0 {
                let k = self.left.min(data.len() - i);
                i += k;
                self.left -= k;
                continue;
            }
            let begin = if self.head.is_empty() { i } else { 0 };
            let k = (self.header_len - self.head.len()).min(data.len() - i);
            self.head
                .extend_from_slice(data.get(i..i + k).unwrap_or_default());
            i += k;
            if self.head.len() < self.header_len {
                break;
            }
            match self.framer.message(&self.head) {
                Some((len, marked)) if len >= self.header_len => {
                    if marked {
                        out.push(begin);
                    }
                    self.left = len - self.header_len;
                    self.head.clear();
                }
                _ => self.lost = true,
            }
        }
        out
    }
}

/// A host with `servers` cores that keeps a core `busy` with each marked
/// message and releases it `delay` after the message starts: a message
/// starts when it arrives or when a core frees, the earliest free core
/// first. With one delay for all, messages leave in the order they came.
#[derive(Debug)]
pub struct HostTime {
    delay: Duration,
    busy: Duration,
    free: Vec<Option<Instant>>,
}

impl HostTime {
    pub fn new(delay: Duration, busy: Duration, servers: u32) -> HostTime {
        let n = usize::try_from(servers.clamp(1, 1024)).unwrap_or(1);
        HostTime {
            delay,
            busy,
            free: vec![None; n],
        }
    }

    /// When a marked message that arrived at `arrival` is released
    /// (arrivals come in time order).
    pub fn schedule(&mut self, arrival: Instant) -> Instant {
        let busy = self.busy;
        let start = self
            .free
            .iter_mut()
            .min_by_key(|f| f.unwrap_or(arrival))
            .map(|f| {
                let start = f.map_or(arrival, |t| t.max(arrival));
                *f = Some(start + busy);
                start
            });
        start.unwrap_or(arrival) + self.delay
    }
}

/// Cuts `len` bytes into pieces of at most `piece` bytes, also where a
/// marked message begins (`marks`, ascending): (start, end, begins a
/// marked message).
pub fn cuts(len: usize, piece: usize, marks: &[usize]) -> Vec<(usize, usize, bool)> {
    let piece = piece.max(1);
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut next_mark = marks.iter().copied().filter(|m| *m < len).peekable();
    while start < len {
        let marked = next_mark.next_if_eq(&start).is_some();
        while next_mark.next_if(|m| *m <= start).is_some() {}
        let limit = (start + piece).min(len);
        let end = next_mark.peek().map_or(limit, |m| limit.min(*m));
        out.push((start, end, marked));
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    /// Messages of a 4-byte header: a flag byte (1: marked) and a
    /// 3-byte big-endian total length; 0xff is not a header.
    #[derive(Debug)]
    struct Test;

    impl Framer for Test {
        fn header_len(&self) -> usize {
            4
        }
        fn message(&self, h: &[u8]) -> Option<(usize, bool)> {
            let (&flag, len) = h.split_first()?;
            if flag == 0xff {
                return None;
            }
            let len = len.iter().fold(0usize, |a, b| a << 8 | usize::from(*b));
            Some((len, flag == 1))
        }
    }

    fn msg(marked: bool, len: usize) -> Vec<u8> {
        let mut m = vec![
            u8::from(marked),
            (len >> 16) as u8,
            (len >> 8) as u8,
            len as u8,
        ];
        m.resize(len, 0xee);
        m
    }

    /// The stream's marked messages, found however the bytes are split.
    #[test]
    fn marks_are_found_however_the_stream_is_split() {
        let parts = [msg(true, 10), msg(false, 300), msg(true, 4), msg(true, 70)];
        let stream = parts.concat();
        let want = vec![0usize, 310, 314];
        for step in [1usize, 2, 3, 5, 7, 64, 1000] {
            let mut m = Messages::new(Arc::new(Test));
            let mut got = Vec::new();
            for (k, chunk) in stream.chunks(step).enumerate() {
                for off in m.marks(chunk) {
                    got.push(k * step + off);
                }
            }
            // A header split across reads is marked where its last
            // part begins: within the message's header, never before it.
            assert_eq!(got.len(), want.len(), "step {step}: {got:?}");
            for (g, w) in got.iter().zip(&want) {
                assert!(*g >= *w && *g < *w + 4, "step {step}: {got:?}");
            }
            if step >= stream.len() {
                assert_eq!(got, want);
            }
            assert!(!m.lost());
        }
    }

    #[test]
    fn an_unknown_header_stops_marking_without_failing() {
        let mut m = Messages::new(Arc::new(Test));
        let mut stream = msg(true, 8);
        stream.extend([0xff, 0, 0, 9]);
        stream.extend(msg(true, 8));
        assert_eq!(m.marks(&stream), vec![0]);
        assert!(m.lost());
        assert!(m.marks(&msg(true, 8)).is_empty());
        // A length shorter than the header is not a message either.
        let mut m = Messages::new(Arc::new(Test));
        assert!(m.marks(&[1, 0, 0, 2, 1, 0, 0, 8]).is_empty());
        assert!(m.lost());
    }

    #[test]
    fn a_disk_stage_after_the_host_holds_each_with_its_servers() {
        // A host of no time, then a disk of two servers at 100 µs: three
        // at once leave at 100, 100 and 200 µs, in order.
        let t0 = Instant::now();
        let us = Duration::from_micros;
        let mut host = HostTime::new(Duration::ZERO, Duration::ZERO, 1);
        let mut disk = Stage {
            time: us(100),
            servers: 2,
        }
        .times();
        let out: Vec<Duration> = (0..3)
            .map(|_| disk.schedule(host.schedule(t0)) - t0)
            .collect();
        assert_eq!(out, [us(100), us(100), us(200)]);
        // One arriving after the first two left starts at once.
        assert_eq!(disk.schedule(t0 + us(250)) - t0, us(350));
    }

    #[test]
    fn a_host_holds_each_message_with_its_cores_in_order() {
        let t0 = Instant::now();
        let mut h = HostTime::new(100 * US, 100 * US, 2);
        // Three at once on two cores: two done at 100 µs, one at 200.
        assert_eq!(h.schedule(t0), t0 + 100 * US);
        assert_eq!(h.schedule(t0), t0 + 100 * US);
        assert_eq!(h.schedule(t0), t0 + 200 * US);
        assert_eq!(h.schedule(t0 + 50 * US), t0 + 200 * US);
        // After an idle gap nothing queues.
        let later = t0 + Duration::from_millis(1);
        assert_eq!(h.schedule(later), later + 100 * US);
        // One core: back to back.
        let mut one = HostTime::new(100 * US, 100 * US, 1);
        let done: Vec<_> = (0..4).map(|_| one.schedule(t0)).collect();
        assert_eq!(done, [1u32, 2, 3, 4].map(|k| t0 + k * 100 * US));
        // In order for any arrivals.
        for busy in [10 * US, 30 * US, 90 * US] {
            let mut h = HostTime::new(30 * US, busy, 3);
            let mut last = t0;
            for i in 0..500u32 {
                let due = h.schedule(t0 + (i * 7 % 11 + i * 5) * US);
                assert!(due >= last);
                last = due;
            }
        }
    }

    /// A core busy longer than the hold: one message alone is held only
    /// the hold, a deep queue goes at cores / busy.
    #[test]
    fn a_busy_time_bounds_a_deep_queue_not_one_message() {
        let t0 = Instant::now();
        let mut h = HostTime::new(10 * US, 100 * US, 2);
        assert_eq!(h.schedule(t0), t0 + 10 * US);
        let mut h = HostTime::new(10 * US, 100 * US, 2);
        let done: Vec<_> = (0..6).map(|_| h.schedule(t0)).collect();
        let want = [0u32, 0, 100, 100, 200, 200].map(|k| t0 + (k + 10) * US);
        assert_eq!(done, want);
        // Spaced wider than the busy time, nothing waits.
        let mut h = HostTime::new(10 * US, 100 * US, 1);
        for k in 0..5u32 {
            let at = t0 + k * 150 * US;
            assert_eq!(h.schedule(at), at + 10 * US);
        }
    }

    #[test]
    fn pieces_are_cut_at_marked_messages() {
        assert_eq!(
            cuts(10, 4, &[0, 6]),
            vec![(0, 4, true), (4, 6, false), (6, 10, true)]
        );
        assert_eq!(cuts(5, 8, &[]), vec![(0, 5, false)]);
        assert_eq!(
            cuts(6, 2, &[3, 3, 9]),
            vec![(0, 2, false), (2, 3, false), (3, 5, true), (5, 6, false)]
        );
        assert!(cuts(0, 4, &[0]).is_empty());
    }
}
