//! How a fuzz input is cut into steps.
//!
//! Harnesses that drive a state machine read their input as records: a tag
//! byte, a little-endian `u16` length and that many payload bytes (fewer
//! when the input ends first). The tag says what the step is (bytes from
//! the wire, time passing, a command completing); its meaning is each
//! harness's own. Any byte string is a valid input.

/// The records of one input, in order.
#[derive(Clone, Debug)]
pub struct Records<'a> {
    rest: &'a [u8],
}

impl<'a> Records<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Records { rest: data }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = (u8, &'a [u8]);

    fn next(&mut self) -> Option<(u8, &'a [u8])> {
        let (&tag, rest) = self.rest.split_first()?;
        let (len, rest) = match rest {
            [a, b, rest @ ..] => (usize::from(u16::from_le_bytes([*a, *b])), rest),
            _ => (0, &[][..]),
        };
        let take = len.min(rest.len());
        let (payload, rest) = rest.split_at(take);
        self.rest = rest;
        Some((tag, payload))
    }
}

/// Builds inputs record by record (the seed generators' side).
#[derive(Clone, Debug, Default)]
pub struct RecordWriter {
    bytes: Vec<u8>,
}

impl RecordWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one record; payloads longer than 65535 bytes are split into
    /// several records with the same tag.
    pub fn push(&mut self, tag: u8, payload: &[u8]) -> &mut Self {
        let mut chunks = payload.chunks(usize::from(u16::MAX)).peekable();
        if chunks.peek().is_none() {
            self.bytes.extend_from_slice(&[tag, 0, 0]);
        }
        for chunk in chunks {
            let len = u16::try_from(chunk.len()).unwrap_or(u16::MAX);
            self.bytes.push(tag);
            self.bytes.extend_from_slice(&len.to_le_bytes());
            self.bytes.extend_from_slice(chunk);
        }
        self
    }

    pub fn finish(&self) -> Vec<u8> {
        self.bytes.clone()
    }
}

/// A harness that plays one side of a connection record by record (the
/// `session` and `initiator` targets): an input's first byte is its
/// settings, the rest its records.
pub trait Stepped: Sized {
    /// What an input exercised.
    type Run;

    /// `settings` is the input's first byte.
    fn new(settings: u8) -> Self;

    /// One record of an input.
    fn step(&mut self, tag: u8, payload: &[u8]);

    /// The connection is gone: further records change nothing.
    fn is_closed(&self) -> bool;

    /// The input ended (the peer went away).
    fn finish(self) -> Self::Run;
}

/// Where a stepped harness's connection is: logging in, in full feature
/// phase, or gone.
pub(crate) enum Stage<L, F> {
    Login(Box<L>),
    Ffp(Box<F>),
    Closed,
}

/// A "time passes" record's payload: little-endian milliseconds, at most
/// ten minutes a step.
pub(crate) fn elapsed(payload: &[u8]) -> std::time::Duration {
    std::time::Duration::from_millis(u64::from(le_u32(payload).min(600_000)))
}

/// Runs one input through a stepped harness.
pub fn run_steps<H: Stepped>(data: &[u8]) -> H::Run {
    let (settings, rest) = data.split_first().unwrap_or((&0, &[]));
    let mut h = H::new(*settings);
    for (tag, payload) in Records::new(rest) {
        if h.is_closed() {
            break;
        }
        h.step(tag, payload);
    }
    h.finish()
}

/// The bytes the harness's side of a connection sends: dropped after each
/// step, or kept for a recording peer (the seed generators) to take.
#[derive(Clone, Debug, Default)]
pub struct Sent {
    keep: bool,
    pub(crate) bytes: Vec<u8>,
}

impl Sent {
    /// Keeps what is sent from now on, for [`Sent::take`].
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// Bytes sent since the last call.
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.bytes)
    }

    /// A step ended: unless kept, what was sent is gone.
    pub(crate) fn step_done(&mut self) {
        if !self.keep {
            self.bytes.clear();
        }
    }
}

/// A little-endian number from the start of `payload`, zero-padded.
pub fn le_u32(payload: &[u8]) -> u32 {
    let mut b = [0u8; 4];
    for (d, s) in b.iter_mut().zip(payload) {
        *d = *s;
    }
    u32::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_truncated_input_is_still_records() {
        let mut w = RecordWriter::new();
        w.push(1, b"abc").push(2, b"").push(3, &[7; 70_000]);
        let bytes = w.finish();
        let got: Vec<(u8, usize)> = Records::new(&bytes).map(|(t, p)| (t, p.len())).collect();
        assert_eq!(got, vec![(1, 3), (2, 0), (3, 65535), (3, 4465)]);

        let cut: Vec<(u8, Vec<u8>)> = Records::new(&[9, 5, 0, b'x'])
            .map(|(t, p)| (t, p.to_vec()))
            .collect();
        assert_eq!(cut, vec![(9, b"x".to_vec())]);
        assert_eq!(Records::new(&[4]).count(), 1);
        assert_eq!(Records::new(&[]).count(), 0);
    }

    #[test]
    fn le_u32_pads_short_payloads() {
        assert_eq!(le_u32(&[1]), 1);
        assert_eq!(le_u32(&[0, 1, 0, 0, 9]), 256);
        assert_eq!(le_u32(&[]), 0);
    }
}
