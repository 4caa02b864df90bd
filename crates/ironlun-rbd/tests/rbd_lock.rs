//! librbd's exclusive lock in managed mode against a real cluster
//! (issue 37): what the gateway group builds ownership and fencing on.
//!
//! Ignored by default (needs Ceph's daemons). Run:
//!
//! ```text
//! cargo test -p ironlun-rbd --test rbd_lock -- --ignored --nocapture
//! ```
//!
//! `IRONLUN_CEPH_CONF=PATH` uses a running cluster; otherwise one is
//! started as in `rbd_cluster.rs` (support/mod.rs says when it skips).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use bytes::Bytes;

/// ESHUTDOWN: librados' answer once the cluster blocklisted the client.
const ESHUTDOWN: i32 = 108;
/// EROFS: a write through a client that does not hold a managed lock.
const EROFS: i32 = 30;

#[test]
#[ignore = "needs a Ceph cluster (started by scripts/ceph-cluster); run with --ignored"]
fn a_broken_lock_fences_its_owner_and_moves_to_the_breaker() {
    let Some(cluster) = support::cluster() else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    let name = format!("ironlun-rbd-lock-{}", std::process::id());
    let (a_cluster, b_cluster) = (cluster.connect(), cluster.connect());
    let a_pool = a_cluster.pool(&cluster.pool).unwrap();
    let _ = a_pool.remove_image(&name);
    a_pool.create_image(&name, 4 << 20, Some(16)).unwrap();
    let a = a_pool.open(&name).unwrap();
    let b = b_cluster.pool(&cluster.pool).unwrap().open(&name).unwrap();

    // Nobody holds it at first.
    assert!(b.lock_owners().unwrap().owners.is_empty());
    a.lock_acquire().unwrap();
    assert!(a.is_lock_owner().unwrap());
    let owners = b.lock_owners().unwrap();
    eprintln!("owners after A acquired: {owners:?}");
    assert!(owners.exclusive);
    assert_eq!(owners.owners.len(), 1);

    // A managed lock is not handed over on request: B's write fails.
    let refused = rt.block_on(b.write(0, Bytes::from(vec![1u8; 4096])));
    eprintln!("B's write while A owns: {refused:?}");
    assert_eq!(refused.unwrap_err().errno(), Some(EROFS));
    let t = std::time::Instant::now();
    let tried = b.lock_acquire();
    eprintln!(
        "B's acquire while A owns: {tried:?} after {:?}",
        t.elapsed()
    );
    assert!(tried.is_err());

    // B breaks A's lock (A is blocklisted), then takes it.
    let t = std::time::Instant::now();
    b.lock_break(&owners.owners[0]).unwrap();
    eprintln!("break took {:?}", t.elapsed());
    b.lock_acquire().unwrap();
    assert!(b.is_lock_owner().unwrap());
    rt.block_on(b.write(0, Bytes::from(vec![2u8; 4096])))
        .unwrap();
    rt.block_on(b.flush()).unwrap();

    // A is fenced: its write never lands.
    let stale = rt.block_on(a.write(0, Bytes::from(vec![3u8; 4096])));
    eprintln!("A's write after the break: {stale:?}");
    assert_eq!(stale.unwrap_err().errno(), Some(ESHUTDOWN));
    let got = rt.block_on(b.read(0, 4096)).unwrap();
    assert!(got.iter().all(|x| *x == 2), "the image holds B's data");

    // An orderly release lets another client take it.
    let owners_b = b.lock_owners().unwrap();
    b.lock_release().unwrap();
    assert!(!b.is_lock_owner().unwrap());
    assert!(b.lock_owners().unwrap().owners.is_empty());
    let c_cluster = cluster.connect();
    let c = c_cluster.pool(&cluster.pool).unwrap().open(&name).unwrap();
    c.lock_acquire().unwrap();
    assert_ne!(c.lock_owners().unwrap(), owners_b);
    drop((a, b, c));
    // A's client is blocklisted: the image goes through C's.
    c_cluster
        .pool(&cluster.pool)
        .unwrap()
        .remove_image(&name)
        .unwrap();
}
