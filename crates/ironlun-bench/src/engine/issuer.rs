//! The issuer: the LUNs under test, the workers that keep each one's queue
//! depth of I/Os in flight, their pacing (rate limits, burst delays), the
//! slots of the I/Os in flight, and how each next I/O is picked (the
//! IOMeter rules).

use std::time::{Duration, Instant};

use bytes::Bytes;
use ironlun_initiator::scsi;
use ironlun_initiator::{Capacity, Responder, ScsiReply, ScsiRequest};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use super::sources::Sources;
use super::{LunTarget, Path, Slice};
use crate::access::Picker;
use crate::local::LocalIo;
use crate::mix::{self, Op, Place};
use crate::pattern::WriteData;
use crate::result::VerifyReport;
use crate::spec::{AccessLine, Workload};
use crate::verify::VerifyMap;
use crate::verify_log::{monotonic_ns, WriteLog, Written};

/// A completion as the initiator reports it: the I/O's slot and the reply.
pub(super) type Completion = (u64, Result<ScsiReply, ironlun_initiator::Error>);

/// One worker: keeps its queue depth of I/Os in flight on one LUN, in
/// its part of the seek range, by the workload's access lines.
struct Worker {
    lun: usize,
    qd: u32,
    in_flight: u32,
    rng: SmallRng,
    range_start: u64,
    range_len: u64,
    /// Where the previous I/O ended: the next sequential I/O starts here.
    last_end: u64,
    line: usize,
    burst_left: u32,
    not_before: Option<Instant>,
    next_intended: Option<Instant>,
    interval: Option<Duration>,
    /// A zone sweep wrapped around: the pass is complete.
    swept: bool,
    /// The skewed access's picker, for the last number of slots.
    picker: Option<Picker>,
    /// Write data of the workload's pattern (none: the shared buffer).
    data: Option<WriteData>,
}

impl Worker {
    /// When the worker may issue its next I/O: `Ok` with the time it was
    /// meant to start (now, or its rate's next slot), or `Err` with when
    /// it may (held back by a burst delay or by its rate).
    fn pace(&mut self, now: Instant) -> Result<Instant, Instant> {
        if let Some(t) = self.not_before {
            if now < t {
                return Err(t);
            }
            self.not_before = None;
        }
        match self.interval {
            Some(iv) => {
                let t = self.next_intended.unwrap_or(now);
                if now < t {
                    return Err(t);
                }
                self.next_intended = Some(t + iv);
                Ok(t)
            }
            None => Ok(now),
        }
    }

    /// The access line of the next I/O: the current burst's, or a new
    /// pick by share when the burst is done. After a burst's last I/O,
    /// the line's delay holds the worker back.
    fn next_line(&mut self, w: &Workload) -> AccessLine {
        if self.burst_left == 0 {
            self.line = pick_line(&w.lines, &mut self.rng);
            self.burst_left = w.lines.get(self.line).map_or(1, |l| l.burst);
        }
        let line = w
            .lines
            .get(self.line)
            .or(w.lines.first())
            .cloned()
            .unwrap_or(AccessLine {
                size: 512,
                share: 100,
                read: 100,
                random: 0,
                align: 0,
                burst: 1,
                delay_ms: 0,
            });
        self.burst_left -= 1;
        if self.burst_left == 0 && line.delay_ms > 0 {
            self.not_before =
                Some(Instant::now() + Duration::from_millis(u64::from(line.delay_ms)));
        }
        line
    }

    /// Where the next I/O of `size` bytes starts: at a random multiple of
    /// `align` in the range ([`random_offsets`]), or where the previous
    /// one ended (back at the start when it would run past the end, which
    /// completes a zone sweep). Remembers where it ends.
    fn next_offset(&mut self, w: &Workload, random: bool, size: u64, align: u64, bs: u64) -> u64 {
        let end = self.range_start + self.range_len;
        let offset = if random {
            let (first, slots) = random_offsets(self.range_start, self.range_len, size, align);
            first + self.random_slot(w, slots) * align.max(1)
        } else {
            let o = self.last_end.div_ceil(bs) * bs;
            if o + size > end || o < self.range_start {
                if w.zones.is_some() && o > self.range_start {
                    self.swept = true;
                }
                self.range_start
            } else {
                o
            }
        };
        self.last_end = offset + size;
        offset
    }
}

/// Where random I/Os of `size` bytes aligned to `align` may start in the
/// range of `len` bytes at `start`: the first such offset and how many
/// there are, `align` apart. They are multiples of `align` on the LUN,
/// not within the range, so that aligned transfers line up with the
/// store's blocks whatever the seek range or session slice; a range too
/// small to hold one such transfer takes them `align` apart from its
/// start instead. The range holds at least one transfer ([`range`]).
fn random_offsets(start: u64, len: u64, size: u64, align: u64) -> (u64, u64) {
    let align = align.max(1);
    let end = start.saturating_add(len);
    let first = start.div_ceil(align).saturating_mul(align);
    match first.checked_add(size) {
        Some(e) if e <= end => (first, (end - e) / align + 1),
        _ => (start, len.saturating_sub(size) / align + 1),
    }
}

impl Worker {
    /// A random slot in `0..slots`: uniform, or by the workload's skewed
    /// access (whose picker is rebuilt when the number of slots changes).
    fn random_slot(&mut self, w: &Workload, slots: u64) -> u64 {
        let access = w.shape.access;
        if access.is_uniform() {
            return self.rng.random_range(0..slots);
        }
        if self.picker.as_ref().map(Picker::slots) != Some(slots) {
            self.picker = Picker::new(access, slots).ok();
        }
        match &self.picker {
            Some(p) => p.slot(&mut self.rng),
            None => self.rng.random_range(0..slots),
        }
    }
}

/// One I/O in flight.
pub(super) struct InFlight {
    worker: u32,
    /// When it was issued (or meant to be, when rate-limited).
    pub(super) start: Instant,
    pub(super) read: bool,
    /// The command (read or write unless the workload has a mix).
    pub(super) op: Op,
    /// Bytes on the wire.
    pub(super) bytes: u32,
    /// The range's length in bytes.
    pub(super) len: u32,
    pub(super) lba: u64,
    blocks: u32,
    /// Writes: the generation written. Reads: the verify mark at issue.
    generation: u64,
    /// A logged write: `CLOCK_MONOTONIC` before its data was made.
    issued_ns: u64,
}

/// One LUN under test, with its verification map when verifying.
struct Lun {
    target: LunTarget,
    verify: Option<VerifyMap>,
    /// The LU's NAA designator, when the mix copies (EXTENDED COPY).
    naa: Option<[u8; 8]>,
}

/// A completed I/O, its reply checked, with where it lay in its worker's
/// range (for zone rates).
pub(super) struct Completed<'a> {
    pub(super) io: InFlight,
    /// The LUN's label, for error messages.
    pub(super) label: &'a str,
    /// The LUN's index among the run's targets.
    pub(super) lun: usize,
    /// Why it failed, when it did.
    pub(super) error: Option<String>,
    /// A COMPARE AND WRITE answered MISCOMPARE (not an error).
    pub(super) miscompare: bool,
    /// Its byte offset on the LUN.
    pub(super) offset: u64,
    /// The worker's seek range, in bytes (start, length).
    pub(super) range_start: u64,
    pub(super) range_len: u64,
}

/// The LUNs, their workers and the I/Os in flight.
pub(super) struct Issuer {
    luns: Vec<Lun>,
    workers: Vec<Worker>,
    /// Shared write payload: one buffer as large as the largest transfer.
    payload: Bytes,
    /// One slot per I/O that may be in flight (the sum of the queue
    /// depths); an I/O's tag is its slot.
    slots: Vec<Option<InFlight>>,
    free: Vec<u32>,
    /// Where each verified write is logged, and the run's number of
    /// each LUN (`None`: its index here).
    write_log: Option<(WriteLog, Option<Vec<usize>>)>,
}

impl Issuer {
    /// Checks the workload against every LUN and sets up the workers;
    /// with `verify`, a verification map per LUN.
    /// `share` says which of the workload's workers run on each target
    /// (`None`: all).
    pub(super) fn new(
        w: &Workload,
        targets: &[LunTarget],
        verify: bool,
        share: Option<&[Vec<u32>]>,
    ) -> Result<Issuer, String> {
        check_shape(w, targets, verify)?;
        let luns = luns(w, targets, verify)?;
        let workers = workers(w, &luns, share)?;
        let payload = {
            let mut rng = SmallRng::seed_from_u64(7);
            let v: Vec<u8> = (0..w.max_size()).map(|_| rng.random()).collect();
            Bytes::from(v)
        };
        let total_qd: usize = workers.iter().map(|k| k.qd as usize).sum();
        let mut slots: Vec<Option<InFlight>> = Vec::with_capacity(total_qd);
        let mut free: Vec<u32> = Vec::with_capacity(total_qd);
        for i in (0..total_qd as u32).rev() {
            slots.push(None);
            free.push(i);
        }
        Ok(Issuer {
            luns,
            workers,
            payload,
            slots,
            free,
            write_log: None,
        })
    }

    /// Logs every verified write to `log` ([`crate::verify_log`]), its
    /// LUN numbered by `luns` (the run's numbers of this part's LUNs).
    pub(super) fn set_write_log(&mut self, log: WriteLog, luns: Option<Vec<usize>>) {
        self.write_log = Some((log, luns));
    }

    /// Sets each LUN's NAA designator (for EXTENDED COPY), in target order.
    pub(super) fn set_designators(&mut self, naa: Vec<[u8; 8]>) {
        for (l, n) in self.luns.iter_mut().zip(naa) {
            l.naa = Some(n);
        }
    }

    /// I/Os in flight over all workers.
    pub(super) fn outstanding(&self) -> u32 {
        self.workers.iter().map(|k| k.in_flight).sum()
    }

    /// Every worker's zone sweep is complete.
    pub(super) fn all_swept(&self) -> bool {
        self.workers.iter().all(|k| k.swept)
    }

    /// Every LUN's verification together (`None` without verification).
    pub(super) fn verify_report(&self) -> Option<VerifyReport> {
        self.luns.iter().filter_map(|l| l.verify.as_ref()).fold(
            None,
            |acc: Option<VerifyReport>, v| {
                let mut r = acc.unwrap_or_default();
                r.checked_blocks += v.checked_blocks;
                r.mismatch_count += v.mismatch_count;
                r.mismatches.extend(v.mismatches.iter().cloned());
                Some(r)
            },
        )
    }

    /// The completion sources of a run of `w` over `targets` with this
    /// issuer's slots.
    pub(super) fn sources(&self, targets: &[LunTarget], w: &Workload) -> Result<Sources, String> {
        Sources::new(
            targets,
            self.slots.len(),
            w.max_size() as usize,
            &self.payload,
        )
    }

    /// Issues I/O until every worker has its queue depth in flight or is
    /// held back by its pacing; returns the earliest time a held-back
    /// worker may issue again. Completions come back through `sources`,
    /// tagged by slot.
    pub(super) async fn issue(
        &mut self,
        w: &Workload,
        now: Instant,
        sources: &mut Sources,
    ) -> Result<Option<Instant>, String> {
        let mut wake: Option<Instant> = None;
        for (wi, k) in self.workers.iter_mut().enumerate() {
            while k.in_flight < k.qd && !k.swept {
                let intended = match k.pace(now) {
                    Ok(t) => t,
                    Err(t) => {
                        wake = Some(wake.map_or(t, |x| x.min(t)));
                        break;
                    }
                };
                let Some(lun) = self.luns.get_mut(k.lun) else {
                    break;
                };
                let Some(slot) = self.free.pop() else { break };
                let logged = self.write_log.is_some();
                let (inflight, body) =
                    match next_io(w, k, wi as u32, lun, &self.payload, intended, logged) {
                        Ok(x) => x,
                        Err(e) => {
                            // Nothing was sent: the slot is free again.
                            self.free.push(slot);
                            return Err(format!("{}: {e}", lun.target.label));
                        }
                    };
                k.in_flight += 1;
                let io = Io {
                    tag: u64::from(slot),
                    inflight: &inflight,
                    body,
                    payload: &self.payload,
                    verify: lun.verify.is_some(),
                };
                let sent = submit(&lun.target, io, sources).await;
                if let Some(s) = self.slots.get_mut(slot as usize) {
                    *s = Some(inflight);
                }
                sent.map_err(|e| format!("{}: {e}", lun.target.label))?;
            }
        }
        sources.flush()?;
        Ok(wake)
    }

    /// Frees the slot of a completed I/O and checks its reply (and, when
    /// verifying, its data). `None`: the tag was not in flight.
    pub(super) fn complete(
        &mut self,
        tag: u64,
        result: Result<ScsiReply, ironlun_initiator::Error>,
    ) -> Option<Completed<'_>> {
        let io = self.slots.get_mut(tag as usize).and_then(Option::take)?;
        self.free.push(tag as u32);
        let k = self.workers.get_mut(io.worker as usize)?;
        k.in_flight -= 1;
        let lun = self.luns.get_mut(k.lun)?;
        let mut miscompare = false;
        let error = match result.and_then(scsi::check).map_err(|e| {
            miscompare = io.op == Op::CompareAndWrite && mix::is_miscompare(&e);
            e.to_string()
        }) {
            Ok(data) => {
                if let Some(v) = &mut lun.verify {
                    if io.read {
                        v.check_read(io.lba, &data, io.generation);
                    }
                }
                None
            }
            Err(_) if miscompare => None,
            Err(e) => Some(e),
        };
        if let (Some(v), false) = (&mut lun.verify, io.read) {
            v.end_write(io.lba, io.blocks, io.generation as u32, error.is_none());
            if let Some((log, numbers)) = &self.write_log {
                let n = numbers
                    .as_ref()
                    .and_then(|m| m.get(k.lun).copied())
                    .unwrap_or(k.lun);
                let logged = log.record(&Written {
                    issued_ns: io.issued_ns,
                    acked_ns: monotonic_ns(),
                    lun: n,
                    lba: io.lba,
                    blocks: io.blocks,
                    generation: io.generation,
                    ok: error.is_none(),
                });
                if let Err(e) = logged {
                    tracing::warn!("{e}");
                }
            }
        }
        Some(Completed {
            offset: io.lba * u64::from(lun.target.capacity.block_size),
            io,
            label: &lun.target.label,
            lun: k.lun,
            error,
            miscompare,
            range_start: k.range_start,
            range_len: k.range_len,
        })
    }
}

/// Each target as a LUN under test, once the workload's transfer sizes
/// and seek range are checked against it.
fn luns(w: &Workload, targets: &[LunTarget], verify: bool) -> Result<Vec<Lun>, String> {
    let mut luns = Vec::new();
    for t in targets {
        let bs = u64::from(t.capacity.block_size);
        for l in &w.lines {
            if u64::from(l.size) % bs != 0 {
                return Err(format!(
                    "{}: transfer size {} is not a multiple of the {bs}-byte block",
                    t.label, l.size
                ));
            }
        }
        let (start, len) = range(w, &t.capacity, t.slice)?;
        let verify = if verify {
            Some(VerifyMap::new(start / bs, len / bs, t.capacity.block_size)?)
        } else {
            None
        };
        luns.push(Lun {
            target: t.clone(),
            verify,
            naa: None,
        });
    }
    Ok(luns)
}

/// The workload's workers on every LUN (those of `share`, when given),
/// each with its own random stream: worker `k` of LUN `li` draws the same
/// stream whichever thread runs it.
fn workers(w: &Workload, luns: &[Lun], share: Option<&[Vec<u32>]>) -> Result<Vec<Worker>, String> {
    let mut workers = Vec::new();
    let all: Vec<u32> = (0..w.workers).collect();
    for (li, lun) in luns.iter().enumerate() {
        let (start, len) = range(w, &lun.target.capacity, lun.target.slice)?;
        let mine = match share {
            Some(s) => s.get(li).map_or(&[][..], Vec::as_slice),
            None => &all[..],
        };
        for &k in mine {
            let seed = 0x1b0d_5eed ^ ((li as u64) << 20) ^ u64::from(k);
            // Workers of one LUN start their sequential streams apart.
            let stagger = (len / u64::from(w.workers)) * u64::from(k);
            let bs = u64::from(lun.target.capacity.block_size);
            workers.push(Worker {
                lun: li,
                qd: w.queue_depth,
                in_flight: 0,
                rng: SmallRng::seed_from_u64(seed),
                range_start: start,
                range_len: len,
                last_end: start + stagger / bs * bs,
                line: 0,
                burst_left: 0,
                not_before: None,
                next_intended: None,
                interval: w.rate_iops.map(|r| Duration::from_secs_f64(1.0 / r)),
                swept: false,
                picker: None,
                data: w
                    .shape
                    .data()
                    .active()
                    .then(|| WriteData::new(w.shape.data(), seed)),
            });
        }
    }
    Ok(workers)
}

/// The seek range in bytes (start, length), whole blocks.
pub(super) fn range(w: &Workload, cap: &Capacity, slice: Slice) -> Result<(u64, u64), String> {
    let bs = u64::from(cap.block_size);
    let size = cap.bytes();
    let start = w.seek.start / bs * bs;
    if start >= size {
        return Err(format!(
            "seek range starts at {start}, beyond the LUN's {size} bytes"
        ));
    }
    let len = if w.seek.length == 0 {
        size - start
    } else {
        w.seek.length.min(size - start)
    } / bs
        * bs;
    let count = u64::from(slice.count.max(1));
    let index = u64::from(slice.index).min(count - 1);
    let part = len / count / bs * bs;
    let (start, len) = if count == 1 {
        (start, len)
    } else if index == count - 1 {
        (start + part * index, len - part * index)
    } else {
        (start + part * index, part)
    };
    if len < u64::from(w.max_size()) {
        return Err(format!(
            "seek range of {len} bytes{} is smaller than a {}-byte transfer",
            if count > 1 {
                format!(" (one of {count} sessions' slices)")
            } else {
                String::new()
            },
            w.max_size()
        ));
    }
    Ok((start, len))
}

/// Picks the next I/O of a worker by the IOMeter rules (its command by
/// the workload's mix, when it has one), with what it carries.
fn next_io(
    w: &Workload,
    k: &mut Worker,
    worker: u32,
    lun: &mut Lun,
    payload: &Bytes,
    start: Instant,
    logged: bool,
) -> Result<(InFlight, Body), String> {
    let line = k.next_line(w);
    let bs = u64::from(lun.target.capacity.block_size);
    let align = line.offset_align(bs);
    let size = u64::from(line.size);
    let read = k.rng.random_range(0..100) < line.read;
    let op = match &w.shape.mix {
        Some(m) => m.pick(&mut k.rng),
        None if read => Op::Read,
        None => Op::Write,
    };
    let random = k.rng.random_range(0..100) < line.random;
    let offset = k.next_offset(w, random, size, align, bs);
    let lba = offset / bs;
    let blocks = (size / bs) as u32;
    // Before the write's generation is taken and its data made.
    let issued_ns = if logged && op == Op::Write {
        monotonic_ns()
    } else {
        0
    };
    let (body, generation) = match op {
        Op::Read => (
            Body::Read,
            lun.verify.as_ref().map_or(0, VerifyMap::read_mark),
        ),
        Op::Write => {
            let (data, g) = match (&mut lun.verify, &mut k.data) {
                (Some(v), _) => {
                    let (data, g) = v.start_write(lba, blocks);
                    (Some(data), u64::from(g))
                }
                (None, Some(d)) => (Some(d.next(size as usize)), 0),
                (None, None) => (None, 0),
            };
            (Body::Write(data), g)
        }
        _ => {
            let dst_lba = if op == Op::Xcopy {
                k.next_offset(w, true, size, align, bs) / bs
            } else {
                0
            };
            let place = Place {
                lun: lun.target.lun,
                lba,
                blocks,
                block_size: lun.target.capacity.block_size,
                dst_lba,
                naa: lun.naa,
                payload,
            };
            (Body::Other(mix::command(op, &place)?), 0)
        }
    };
    let io = InFlight {
        worker,
        start,
        read: op == Op::Read,
        op,
        bytes: op.wire_bytes(line.size, bs as u32),
        len: line.size,
        lba,
        blocks,
        generation,
        issued_ns,
    };
    Ok((io, body))
}

/// What an I/O carries beyond its place.
enum Body {
    Read,
    /// A write's data: the verification's blocks or the workload's
    /// pattern (`None`: the shared payload).
    Write(Option<Bytes>),
    /// A command of the mix other than READ and WRITE, built.
    Other(ScsiRequest),
}

/// One I/O on its way to its target.
struct Io<'a> {
    tag: u64,
    inflight: &'a InFlight,
    body: Body,
    /// The shared write pattern.
    payload: &'a Bytes,
    verify: bool,
}

/// Sends `io` to `target`: as a SCSI command over its session(s), or to
/// the local engine.
async fn submit(target: &LunTarget, io: Io<'_>, sources: &mut Sources) -> Result<(), String> {
    let f = io.inflight;
    let bs = u64::from(target.capacity.block_size);
    if let Path::Local(dev) = &target.path {
        let write = match io.body {
            Body::Read => None,
            Body::Write(data) => Some(data),
            // Refused when the issuer is made (check_shape).
            Body::Other(_) => return Err("a SCSI command for a local target".into()),
        };
        return sources.submit_local(LocalIo {
            tag: io.tag,
            dev: dev.clone(),
            offset: f.lba * bs,
            len: f.len as usize,
            write,
            keep: io.verify,
        });
    }
    let req = match io.body {
        Body::Read => {
            let mut req = scsi::read(target.lun, f.lba, f.blocks, target.capacity.block_size);
            // Unverified reads are counted, not kept (as IOMeter does).
            req.discard_data = !io.verify;
            req
        }
        Body::Write(data) => {
            let data = data.unwrap_or_else(|| io.payload.slice(..f.len as usize));
            scsi::write(target.lun, f.lba, f.blocks, data)
        }
        Body::Other(req) => req,
    };
    let r = Responder::Stream {
        tx: sources.tx.clone(),
        tag: io.tag,
    };
    target.path.submit(req, r).await.map_err(|e| e.to_string())
}

/// Refuses what the workload's shape cannot do here: verification with
/// a data pattern or with commands that write other than WRITE, and
/// commands other than READ and WRITE on local files and devices (the
/// local engines speak no SCSI).
fn check_shape(w: &Workload, targets: &[LunTarget], verify: bool) -> Result<(), String> {
    let other = w.shape.mix.as_ref().is_some_and(|m| m.has_other());
    if verify && (w.shape.data().active() || other) {
        return Err(format!(
            "workload '{}': verification writes its own self-checking blocks and checks \
             every read; it cannot be combined with compress/dedupe patterns or with \
             UNMAP, WRITE SAME, COMPARE AND WRITE or EXTENDED COPY in the mix",
            w.name
        ));
    }
    if other && targets.iter().any(|t| matches!(t.path, Path::Local(_))) {
        return Err(format!(
            "workload '{}': UNMAP, WRITE SAME, COMPARE AND WRITE and EXTENDED COPY are SCSI \
             commands; the local engines (io_uring, psync) do reads and writes only",
            w.name
        ));
    }
    Ok(())
}

fn pick_line(lines: &[AccessLine], rng: &mut SmallRng) -> usize {
    let mut x = rng.random_range(0..100u32);
    for (i, l) in lines.iter().enumerate() {
        if x < l.share {
            return i;
        }
        x -= l.share;
    }
    lines.len().saturating_sub(1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A worker over the `len` bytes at `start`.
    fn worker(start: u64, len: u64) -> Worker {
        Worker {
            lun: 0,
            qd: 1,
            in_flight: 0,
            rng: SmallRng::seed_from_u64(7),
            range_start: start,
            range_len: len,
            last_end: start,
            line: 0,
            burst_left: 0,
            not_before: None,
            next_intended: None,
            interval: None,
            swept: false,
            picker: None,
            data: None,
        }
    }

    /// Every random offset is a multiple of the alignment on the LUN,
    /// inside the range, and every aligned place in the range is drawn:
    /// 4 KiB transfers aligned to themselves (the default) and to 512-byte
    /// sectors, over ranges that start on and off a 4 KiB boundary.
    #[test]
    fn random_offsets_are_aligned_and_cover_the_range() {
        let w = Workload::simple("t", "", AccessLine::simple(4096, 0, 100), 1);
        for (start, len, align) in [
            (0, 256 << 10, 4096),
            (1024, 256 << 10, 4096),
            (0, 64 << 10, 512),
            (3584, 64 << 10, 512),
            (512, 12 << 10, 8192),
        ] {
            let mut k = worker(start, len);
            let (first, slots) = random_offsets(start, len, 4096, align);
            let mut seen = vec![false; slots as usize];
            for _ in 0..(slots * 64) {
                let o = k.next_offset(&w, true, 4096, align, 512);
                assert_eq!(o % align, 0, "{o} at {start}+{len}, align {align}");
                assert!(o >= start && o + 4096 <= start + len, "{o} outside");
                seen[((o - first) / align) as usize] = true;
            }
            assert!(
                seen.iter().all(|s| *s),
                "{start}+{len} align {align}: {seen:?}"
            );
            // The last aligned place that holds a transfer is a slot.
            let last = first + (slots - 1) * align;
            assert!(last + 4096 <= start + len && last + align + 4096 > start + len);
        }
    }

    /// A range too small for one transfer on an aligned place takes
    /// offsets from its own start.
    #[test]
    fn a_small_range_aligns_from_its_start() {
        assert_eq!(random_offsets(1024, 5120, 4096, 4096), (1024, 1));
        assert_eq!(random_offsets(0, 4096, 4096, 4096), (0, 1));
        assert_eq!(random_offsets(4096, 16384, 4096, 4096), (4096, 4));
        assert_eq!(random_offsets(512, 16384, 4096, 4096), (4096, 3));
    }

    #[test]
    fn slices_split_the_seek_range_without_overlap() {
        let cap = Capacity {
            blocks: 1000,
            block_size: 512,
            lbppbe: 0,
            thin: false,
        };
        let mut w = Workload::simple("t", "", AccessLine::simple(4096, 50, 100), 1);
        w.seek.start = 1024;
        let whole = range(&w, &cap, Slice::WHOLE).unwrap();
        assert_eq!(whole, (1024, 998 * 512));
        let parts: Vec<(u64, u64)> = (0..7)
            .map(|index| range(&w, &cap, Slice { index, count: 7 }).unwrap())
            .collect();
        let mut at = whole.0;
        for (start, len) in &parts {
            assert_eq!(*start, at, "slices are contiguous: {parts:?}");
            assert_eq!(start % 512, 0);
            at += len;
        }
        assert_eq!(at, whole.0 + whole.1, "slices cover the range");
        // Too many slices for the transfer size.
        let err = range(
            &w,
            &cap,
            Slice {
                index: 0,
                count: 200,
            },
        )
        .unwrap_err();
        assert!(err.contains("one of 200 sessions' slices"), "{err}");
    }
}
