//! ironlun-rbd against a real Ceph cluster (issue 25 item 2).
//!
//! Ignored by default: it needs Ceph's daemons and takes a minute. Run:
//!
//! ```text
//! cargo test -p ironlun-rbd --test rbd_cluster -- --ignored --nocapture
//! ```
//!
//! It starts a single-node cluster with `scripts/ceph-cluster` (or the
//! script `IRONLUN_CEPH_CLUSTER` names) in a temporary directory and stops
//! it at the end; `IRONLUN_CEPH_CONF=PATH` uses a running cluster instead
//! (pool `rbd`, or `IRONLUN_CEPH_POOL`). Only where Ceph is not installed
//! and cannot be does it skip (tests/support/skip.rs: a loud SKIPPED line
//! listed in scripts/test's summary, a failure under CI=true or
//! `--require-all`); a cluster that does not start fails it.
//!
//! One test runs every case in turn on one cluster, so the cluster starts
//! once; each case prints its name before it runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ironlun_rbd::{ClusterConfig, CompareOutcome, Image, Pool};
use tokio::task::JoinSet;

/// Objects of 64 KiB (order 16), so a few objects make a small image.
const ORDER: u8 = 16;
const OBJECT: u64 = 1 << ORDER;
const IMAGE_SIZE: u64 = 16 << 20;
/// A guard against a hang, not a timing: a resize is noticed in well under
/// a second; only a lost notification would reach this.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Deterministic contents for (write number, byte index).
fn pattern(n: u64, len: usize) -> Bytes {
    (0..len)
        .map(|i| (n.wrapping_mul(131) ^ (i as u64).wrapping_mul(7)) as u8)
        .collect::<Vec<_>>()
        .into()
}

struct Fixture {
    pool: Pool,
    names: Vec<String>,
}

impl Fixture {
    fn image(&mut self, tag: &str, size: u64) -> Image {
        let name = format!("ironlun-rbd-it-{}-{tag}", std::process::id());
        let _ = self.pool.remove_image(&name);
        self.pool.create_image(&name, size, Some(ORDER)).unwrap();
        self.names.push(name.clone());
        self.pool.open(&name).unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        for name in &self.names {
            if let Err(e) = self.pool.remove_image(name) {
                eprintln!("removing {name}: {e}");
            }
        }
    }
}

#[test]
#[ignore = "needs a Ceph cluster (started by scripts/ceph-cluster); run with --ignored"]
fn rbd_against_a_real_cluster() {
    let Some(cluster) = support::cluster() else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let pool = cluster.connect().pool(&cluster.pool).unwrap();
    let mut fx = Fixture {
        pool,
        names: Vec::new(),
    };
    let io = fx.image("io", IMAGE_SIZE);
    let extents = fx.image("extents", 1 << 20);
    let resized = fx.image("resize", 4 << 20);
    let resized_name = fx.names.last().cloned().unwrap();
    drop(fx.image("fenced", 1 << 20));
    let fenced_name = fx.names.last().cloned().unwrap();
    rt.block_on(async {
        case("size and geometry", size_and_geometry(&io)).await;
        case(
            "QD 32 writes then QD 32 reads, byte for byte",
            qd32_round_trip(&io),
        )
        .await;
        case("unwritten blocks read as zeros", unwritten_reads_zero(&io)).await;
        case(
            "a write whose future is dropped still lands",
            dropped_write_lands(&io),
        )
        .await;
        case("discard then read zeros", discard_reads_zero(&io)).await;
        case("write_same repeats its pattern", write_same(&io)).await;
        case(
            "compare_and_write: match writes, mismatch reports its offset",
            compare_and_write(&io),
        )
        .await;
        case("argument checks before librbd", refused_arguments(&io)).await;
        case(
            "allocated extents follow writes and discards",
            allocated_extents(&extents),
        )
        .await;
    });
    let other = cluster.connect().pool(&cluster.pool).unwrap();
    rt.block_on(case(
        "a resize from another client is noticed",
        resize_noticed(&resized, other, &resized_name),
    ));
    eprintln!("case: objects: versioned writes, watch, notify and ack");
    objects(&fx.pool, &cluster.connect().pool(&cluster.pool).unwrap());
    eprintln!("case: objects: versioned writes, watch, notify and ack: ok");
    eprintln!("case: a blocklisted address fails every request with ESHUTDOWN");
    blocklisted_address(&cluster, &rt, &fenced_name);
    eprintln!("case: a blocklisted address fails every request with ESHUTDOWN: ok");
    drop((io, extents, resized));
    drop(fx);
    eprintln!("case: defaults yield to ceph.conf, options win over both");
    defaults_yield_to_the_file(&cluster);
    eprintln!("case: defaults yield to ceph.conf, options win over both: ok");
}

/// A RADOS object as the shared reservations use it, from two clients:
/// a write conditional on the version read (or on absence) lands once
/// and is Stale for the one that read before it; a watch of one client
/// hears the other's notify, which waits for the acknowledgement; a
/// notify nobody acknowledges reports the watcher as timed out.
fn objects(a: &Pool, b: &Pool) {
    use ironlun_rbd::{WatchEvent, WriteOutcome};
    let name = format!("ironlun-rbd-it-{}-object", std::process::id());
    let (oa, ob) = (a.object(&name).unwrap(), b.object(&name).unwrap());
    assert_eq!(oa.read(64).unwrap(), None, "absent at first");
    let WriteOutcome::Written(v1) = oa.write_if(None, b"one").unwrap() else {
        panic!("the exclusive create failed")
    };
    assert_eq!(ob.write_if(None, b"two").unwrap(), WriteOutcome::Stale);
    let read = ob.read(64).unwrap().unwrap();
    assert_eq!((read.data.as_slice(), read.version), (&b"one"[..], v1));
    let WriteOutcome::Written(v2) = ob.write_if(Some(v1), b"two").unwrap() else {
        panic!("the write at the version read failed")
    };
    assert!(v2 > v1);
    assert_eq!(oa.write_if(Some(v1), b"late").unwrap(), WriteOutcome::Stale);
    assert_eq!(ob.read(64).unwrap().unwrap().data, b"two");
    assert!(
        ob.read(2).is_err(),
        "an object longer than asked is refused"
    );
    // Watch through B, notify through A.
    let watch = ob.watch(Duration::from_secs(10)).unwrap();
    let notifier = std::thread::spawn(move || oa.notify(b"pr", Duration::from_secs(30)));
    let Some(WatchEvent::Notify {
        notify_id, cookie, ..
    }) = watch.next(HANG_GUARD)
    else {
        panic!("no notification")
    };
    assert_eq!(cookie, watch.cookie());
    ob.ack(notify_id, cookie).unwrap();
    let heard = notifier.join().unwrap().unwrap();
    assert_eq!((heard.acks, heard.timeouts), (1, 0));
    assert!(watch.confirmed_ago().is_ok());
    // Nobody acknowledges: the watcher times out.
    let heard = ob.notify(b"pr", Duration::from_secs(1)).unwrap();
    assert_eq!((heard.acks, heard.timeouts), (0, 1));
    drop(watch);
}

/// `ClusterConfig::defaults` applies where ceph.conf left librados'
/// value, never over the file's own; `options` win over both.
fn defaults_yield_to_the_file(cluster: &support::TestCluster) {
    const KEY: &str = "librados_thread_count";
    let connect = |config: &ClusterConfig| ironlun_rbd::Cluster::connect(config).unwrap();
    let mut plain = cluster.config();
    plain.defaults = vec![(KEY.into(), "1".into())];
    assert_eq!(connect(&plain).option(KEY).unwrap(), "1");
    let conf = std::env::temp_dir().join(format!("ironlun-rbd-it-{}.conf", std::process::id()));
    let mut text = std::fs::read_to_string(&cluster.conf).unwrap();
    text.push_str("\n[client]\nlibrados_thread_count = 3\n");
    std::fs::write(&conf, text).unwrap();
    let mut filed = plain.clone();
    filed.conf = Some(conf.clone());
    let from_file = connect(&filed).option(KEY).unwrap();
    filed.options.push((KEY.into(), "4".into()));
    let from_options = connect(&filed).option(KEY).unwrap();
    let _ = std::fs::remove_file(&conf);
    assert_eq!((from_file.as_str(), from_options.as_str()), ("3", "4"));
}

/// ESHUTDOWN: librados' EBLOCKLISTED.
const ESHUTDOWN: i32 = 108;

/// `Cluster::address` is the address the cluster fences: `ceph osd
/// blocklist add` of it turns the client's requests into ESHUTDOWN (a
/// write may still be acknowledged by librbd's write-around cache; its
/// flush then fails), which the gateway reads as "fenced"
/// (docs/rbd.md, "Blocklist and reconnect").
fn blocklisted_address(cluster: &support::TestCluster, rt: &tokio::runtime::Runtime, name: &str) {
    let own = cluster.connect();
    let address = own.address().unwrap();
    let img = own.pool(&cluster.pool).unwrap().open(name).unwrap();
    let write_and_flush = |n: u64| {
        rt.block_on(async {
            img.write(0, pattern(n, 4096)).await?;
            img.flush().await
        })
    };
    write_and_flush(1).unwrap();
    let ceph = |args: &[&str]| {
        let o = std::process::Command::new("ceph")
            .env("CEPH_CONF", &cluster.conf)
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "ceph {args:?}: {text}");
    };
    ceph(&["osd", "blocklist", "add", &address]);
    // The client learns of it from the OSD's answers: a bound, not a timing.
    let deadline = std::time::Instant::now() + HANG_GUARD;
    let mut n = 2;
    let err = loop {
        match write_and_flush(n) {
            Err(e) => break e,
            Ok(()) => assert!(std::time::Instant::now() < deadline, "never refused"),
        }
        n += 1;
        std::thread::sleep(Duration::from_millis(100));
    };
    ceph(&["osd", "blocklist", "rm", &address]);
    assert_eq!(err.errno(), Some(ESHUTDOWN), "{err}");
}

async fn case(name: &str, f: impl std::future::Future<Output = ()>) {
    eprintln!("case: {name}");
    f.await;
    eprintln!("case: {name}: ok");
}

async fn size_and_geometry(img: &Image) {
    assert_eq!(img.size().unwrap(), IMAGE_SIZE);
    let info = img.info_async().await.unwrap();
    assert_eq!(
        (info.size, info.object_size, info.order),
        (IMAGE_SIZE, OBJECT, ORDER)
    );
}

/// 256 writes of 4-32 KiB, each in its own 32 KiB slot of the image's
/// first half (so none overlaps another), 32 in flight at a time; then the
/// same reads 32 at a time, each compared byte for byte.
async fn qd32_round_trip(img: &Image) {
    let slot = OBJECT / 2;
    let ios: Vec<(u64, usize)> = (0..256u64)
        .map(|n| (n * slot, 4096 * (1 + (n % 8) as usize)))
        .collect();
    assert!(256 * slot <= IMAGE_SIZE / 2);
    let ios = Arc::new(ios);
    run_at_qd(32, ios.len(), |n| {
        let (img, ios) = (img.clone(), Arc::clone(&ios));
        async move {
            let (off, len) = ios[n];
            img.write(off, pattern(n as u64, len)).await.unwrap();
        }
    })
    .await;
    img.flush().await.unwrap();
    run_at_qd(32, ios.len(), |n| {
        let (img, ios) = (img.clone(), Arc::clone(&ios));
        async move {
            let (off, len) = ios[n];
            let got = img.read(off, len).await.unwrap();
            assert!(
                got == pattern(n as u64, len),
                "read {n} at {off} differs from what was written"
            );
        }
    })
    .await;
}

/// Runs `count` tasks made by `make`, at most `qd` at a time.
async fn run_at_qd<F, Fut>(qd: usize, count: usize, make: F)
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let mut set = JoinSet::new();
    let mut peak = 0;
    for n in 0..count {
        if set.len() == qd {
            set.join_next().await.unwrap().unwrap();
        }
        set.spawn(make(n));
        peak = peak.max(set.len());
    }
    while let Some(r) = set.join_next().await {
        r.unwrap();
    }
    assert_eq!(peak, qd.min(count));
}

async fn unwritten_reads_zero(img: &Image) {
    // The last object is never written by the other cases.
    let got = img
        .read(IMAGE_SIZE - OBJECT, OBJECT as usize)
        .await
        .unwrap();
    assert_eq!(got.len(), OBJECT as usize);
    assert!(got.iter().all(|&b| b == 0));
}

/// The write is submitted (first poll) and its future dropped at once;
/// librbd still owns the buffer, so after a flush the data is there.
async fn dropped_write_lands(img: &Image) {
    let off = 3 * OBJECT + 512;
    for n in 0..8u64 {
        let fut = img.write(off + n * 4096, pattern(1000 + n, 4096));
        tokio::select! {
            biased;
            _ = fut => {}
            _ = std::future::ready(()) => {}
        }
    }
    img.flush().await.unwrap();
    for n in 0..8u64 {
        let got = img.read(off + n * 4096, 4096).await.unwrap();
        assert!(
            got == pattern(1000 + n, 4096),
            "dropped write {n} did not land"
        );
    }
}

async fn discard_reads_zero(img: &Image) {
    let off = 5 * OBJECT;
    img.write(off, pattern(7, 2 * OBJECT as usize))
        .await
        .unwrap();
    // Two whole objects: librbd removes them.
    img.discard(off, 2 * OBJECT).await.unwrap();
    let got = img.read(off, 2 * OBJECT as usize).await.unwrap();
    assert!(got.iter().all(|&b| b == 0), "discarded range is not zero");
}

async fn write_same(img: &Image) {
    let off = 8 * OBJECT;
    let unit = pattern(9, 512);
    img.write_same(off, OBJECT, unit.clone()).await.unwrap();
    let got = img.read(off, OBJECT as usize).await.unwrap();
    for (i, chunk) in got.chunks(512).enumerate() {
        assert!(chunk == &unit[..], "write_same copy {i} differs");
    }
    // An all-zero pattern (librbd turns it into a discard) reads as zeros.
    img.write_same(off, OBJECT, Bytes::from(vec![0u8; 512]))
        .await
        .unwrap();
    let got = img.read(off, OBJECT as usize).await.unwrap();
    assert!(got.iter().all(|&b| b == 0), "zero write_same left data");
}

async fn compare_and_write(img: &Image) {
    let off = 9 * OBJECT + 4096;
    let old = pattern(11, 512);
    let new = pattern(12, 512);
    img.write(off, old.clone()).await.unwrap();
    let r = img
        .compare_and_write(off, old.clone(), new.clone())
        .await
        .unwrap();
    assert_eq!(r, CompareOutcome::Written);
    assert!(img.read(off, 512).await.unwrap() == new);
    // The image holds `new` now: compare against a copy of it that differs
    // at byte 100; the offset is reported into the request.
    let mut wrong = new.to_vec();
    wrong[100] ^= 0xff;
    let r = img
        .compare_and_write(off, Bytes::from(wrong), old.clone())
        .await
        .unwrap();
    assert_eq!(r, CompareOutcome::Mismatch { offset: 100 });
    assert!(
        img.read(off, 512).await.unwrap() == new,
        "a failed compare wrote"
    );
    // 512 bytes into an object, 4096 long, differing at byte 1000: the
    // object-relative report (object start + 1000) would also read as byte
    // 488, so the wrapper must tell them apart. Ceph 16 refuses any
    // compare-and-write that leaves one 512-byte sector (EINVAL); later
    // librbd takes it.
    let off = 10 * OBJECT + 512;
    let held = pattern(13, 4096);
    img.write(off, held.clone()).await.unwrap();
    let mut wrong = held.to_vec();
    wrong[1000] ^= 0x01;
    match img
        .compare_and_write(off, Bytes::from(wrong), pattern(14, 4096))
        .await
    {
        Ok(r) => assert_eq!(r, CompareOutcome::Mismatch { offset: 1000 }),
        Err(e) if e.errno() == Some(22) => {
            eprintln!("  librbd refuses a 4096-byte compare_and_write: {e}")
        }
        Err(e) => panic!("4096-byte compare_and_write: {e}"),
    }
    assert!(
        img.read(off, 4096).await.unwrap() == held,
        "a failed compare wrote"
    );
}

async fn refused_arguments(img: &Image) {
    assert!(img.write_same(0, 1000, pattern(1, 512)).await.is_err());
    assert!(img
        .compare_and_write(0, pattern(1, 512), pattern(1, 1024))
        .await
        .is_err());
    assert!(img.read(u64::MAX - 10, 4096).await.is_err());
    // librbd's own refusal comes back as an error, not a hang.
    let past_end = img.write(IMAGE_SIZE + OBJECT, pattern(1, 4096)).await;
    assert!(past_end.is_err(), "a write past the end succeeded");
}

fn overlaps(ranges: &[Range<u64>], r: &Range<u64>) -> bool {
    ranges.iter().any(|e| e.start < r.end && r.start < e.end)
}

fn covers(ranges: &[Range<u64>], r: &Range<u64>) -> bool {
    ranges.iter().any(|e| e.start <= r.start && r.end <= e.end)
}

/// Objects 0, 2 and 4 written; object 2 then discarded whole. Whatever the
/// granularity, object 0's and 4's writes are allocated, objects 1, 2, 3
/// and 5.. are not.
async fn allocated_extents(img: &Image) {
    let size = img.size().unwrap();
    assert!(img
        .allocated_extents(0..size, false, 64)
        .await
        .unwrap()
        .ranges
        .is_empty());
    let written = [
        0..4096,
        2 * OBJECT..2 * OBJECT + 8192,
        4 * OBJECT + 512..4 * OBJECT + 1024,
    ];
    for (n, r) in written.iter().enumerate() {
        img.write(r.start, pattern(n as u64, (r.end - r.start) as usize))
            .await
            .unwrap();
    }
    img.discard(2 * OBJECT, OBJECT).await.unwrap();
    for whole_object in [false, true] {
        let e = img
            .allocated_extents(0..size, whole_object, 64)
            .await
            .unwrap();
        eprintln!("  whole_object={whole_object}: {:?}", e.ranges);
        assert!(!e.truncated);
        assert!(
            covers(&e.ranges, &written[0]) && covers(&e.ranges, &written[2]),
            "{e:?}"
        );
        for hole in [
            OBJECT..2 * OBJECT,
            2 * OBJECT..3 * OBJECT,
            3 * OBJECT..4 * OBJECT,
            5 * OBJECT..size,
        ] {
            assert!(
                !overlaps(&e.ranges, &hole),
                "{hole:?} reported allocated: {e:?}"
            );
        }
    }
    // A walk that starts inside an object (fast-diff once reported such
    // offsets shifted: Ceph PR 44483) still finds object 4 where it is.
    for whole_object in [false, true] {
        let e = img
            .allocated_extents(OBJECT / 2 + 100..size, whole_object, 64)
            .await
            .unwrap();
        eprintln!(
            "  from {}: whole_object={whole_object}: {:?}",
            OBJECT / 2 + 100,
            e.ranges
        );
        assert!(covers(&e.ranges, &written[2]), "{e:?}");
        for hole in [OBJECT..4 * OBJECT, 5 * OBJECT..size] {
            assert!(
                !overlaps(&e.ranges, &hole),
                "{hole:?} reported allocated: {e:?}"
            );
        }
    }
    // A sub-range is clipped to what was asked; a limit of one truncates.
    let e = img.allocated_extents(512..2048, false, 64).await.unwrap();
    assert_eq!(e.ranges, vec![512..2048]);
    let e = img.allocated_extents(0..size, false, 1).await.unwrap();
    assert!(e.truncated && e.ranges.len() == 1, "{e:?}");
}

async fn resize_noticed(img: &Image, other: Pool, name: &str) {
    let mut watch = img.on_resize().unwrap();
    assert_eq!(watch.size(), 4 << 20);
    let name = name.to_owned();
    tokio::task::spawn_blocking(move || {
        let outside = other.open(&name).unwrap();
        outside.resize(8 << 20).unwrap();
    })
    .await
    .unwrap();
    let size = tokio::time::timeout(HANG_GUARD, watch.changed())
        .await
        .expect("resize never noticed")
        .unwrap();
    assert_eq!(size, 8 << 20);
    assert_eq!(img.info_async().await.unwrap().size, 8 << 20);
}
