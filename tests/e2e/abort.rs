//! Task management from one session ending another session's writes:
//! with TAS=1 (the control page's default, SPC-5 §7.5.8) every command
//! of the other session gets a status, GOOD or TASK ABORTED (SAM-5
//! §5.6), the requester's response comes only after those statuses have
//! reached the other initiator (RFC 7143 §4.2.3.3), and no write reported
//! GOOD is lost. Two sessions of ironlun's initiator (two initiator names)
//! on one file LU opened with O_DIRECT; session B sends 16 writes of
//! 2 MiB, each solicited by R2Ts, while session A sends LOGICAL UNIT
//! RESET, CLEAR TASK SET or TARGET WARM RESET, on the thread pool and on
//! io_uring.
//!
//! B reaches the target through a relay. In the first round the relay
//! holds the target's R2Ts back, so every write is certainly in flight
//! (waiting for data) when A's request comes: all 16 must be answered
//! TASK ABORTED before A's response, and the held R2Ts are then let
//! through ahead of the first TASK ABORTED, so B sends Data-Out for
//! writes the target has ended (which it must discard, not wait for).
//! In the rounds after it nothing is held: the writes run, some on the
//! backend, when the request comes, and the same rules are checked for
//! whatever the request caught.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use crate::support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use ironlun_initiator::scsi::{self, check};
use ironlun_initiator::{
    DigestKind, Error, Offers, Responder, Result, ScsiReply, Session, SessionOptions,
};
use ironlun_wire::{TmfFunction, TmfResponse};
use support::Target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const NAME: &str = "iqn.2026-11.io.ironlun:e2e-abort";
const WRITES: u64 = 16;
const BLOCKS: u32 = 4096;
const BLOCK: usize = 512;
/// Rounds without held R2Ts after the first.
const FREE_ROUNDS: u32 = 3;
/// A hang guard, not a timing check: how long B's remaining answers may
/// take after A's response before the test gives up.
const HANG: Duration = Duration::from_secs(120);

fn options(name: &str, last: u8) -> SessionOptions {
    SessionOptions {
        initiator_name: name.to_owned(),
        isid: [0x80, 0, 0, 0, 0, last],
        ..SessionOptions::default()
    }
}

/// B's options: every byte of a write waits for an R2T (InitialR2T=Yes,
/// ImmediateData=No), in 256 KiB bursts, without digests (the relay
/// reads PDU boundaries).
fn options_b() -> SessionOptions {
    let mut o = options("iqn.2026-11.test:abort-b", 2);
    o.offers = Offers {
        header_digest: vec![DigestKind::None],
        data_digest: vec![DigestKind::None],
        initial_r2t: true,
        immediate_data: false,
        max_burst_length: 256 << 10,
        max_outstanding_r2t: 1,
        ..Offers::default()
    };
    o
}

/// A relay for one connection that, while `hold` is set, keeps the
/// target's R2Ts back and lets them go, ahead of it, when the first
/// TASK ABORTED status comes (then stops holding).
struct Relay {
    addr: SocketAddr,
    hold: Arc<AtomicBool>,
}

const OP_R2T: u8 = 0x31;
const OP_SCSI_RESPONSE: u8 = 0x21;

/// The length of the PDU at the head of `b`, without digests.
fn pdu_len(b: &[u8]) -> Option<usize> {
    let bhs = b.get(..48)?;
    let ahs = usize::from(bhs[4]) * 4;
    let data = u32::from_be_bytes([0, bhs[5], bhs[6], bhs[7]]) as usize;
    Some(48 + ahs + data.next_multiple_of(4))
}

impl Relay {
    async fn start(to: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hold = Arc::new(AtomicBool::new(false));
        let h = hold.clone();
        tokio::spawn(async move {
            let (client, _) = listener.accept().await.unwrap();
            let server = TcpStream::connect(to).await.unwrap();
            let _ = (client.set_nodelay(true), server.set_nodelay(true));
            let (mut crd, cwr) = client.into_split();
            let (srd, mut swr) = server.into_split();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut crd, &mut swr).await;
                let _ = swr.shutdown().await;
            });
            let _ = Self::downstream(srd, cwr, h).await;
        });
        Relay { addr, hold }
    }

    async fn downstream(
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
        hold: Arc<AtomicBool>,
    ) -> std::io::Result<()> {
        let mut buf = BytesMut::with_capacity(1 << 20);
        let mut held: Vec<Bytes> = Vec::new();
        while from.read_buf(&mut buf).await? > 0 {
            while let Some(len) = pdu_len(&buf).filter(|l| *l <= buf.len()) {
                let pdu = buf.split_to(len).freeze();
                let opcode = pdu[0] & 0x3f;
                if hold.load(Ordering::SeqCst) {
                    if opcode == OP_R2T {
                        held.push(pdu);
                        continue;
                    }
                    if opcode == OP_SCSI_RESPONSE && pdu[3] == 0x40 {
                        hold.store(false, Ordering::SeqCst);
                        for r2t in held.drain(..) {
                            to.write_all(&r2t).await?;
                        }
                    }
                }
                to.write_all(&pdu).await?;
            }
        }
        to.shutdown().await
    }
}

/// The bytes of write `i` in `round`: each block says where it belongs.
fn pattern(round: u32, i: u64) -> Bytes {
    let mut v = vec![0u8; BLOCKS as usize * BLOCK];
    for (b, block) in v.chunks_mut(BLOCK).enumerate() {
        let fill = (round as u8).wrapping_mul(31) ^ (i as u8).wrapping_mul(7) ^ b as u8;
        block.fill(fill);
        block[..4].copy_from_slice(&round.to_be_bytes());
        block[4..12].copy_from_slice(&i.to_be_bytes());
        block[12..16].copy_from_slice(&(b as u32).to_be_bytes());
    }
    Bytes::from(v)
}

/// What one of B's writes ended with.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Good,
    Aborted,
}

fn outcome(i: u64, r: Result<ScsiReply>) -> Outcome {
    match r.and_then(check) {
        Ok(_) => Outcome::Good,
        Err(Error::TaskAborted) => Outcome::Aborted,
        Err(e) => panic!("write {i}: neither GOOD nor TASK ABORTED: {e}"),
    }
}

type Answers = mpsc::UnboundedReceiver<(u64, Result<ScsiReply>)>;
type Ended = Vec<(u64, Outcome)>;

/// B's writes of `round`, each answered on the channel. Returns once
/// every one is a task at the target: the target takes commands in CmdSN
/// order, so a TEST UNIT READY sent after them is answered after.
async fn send_writes(b: &Session, round: u32) -> Answers {
    let (tx, rx) = mpsc::unbounded_channel();
    for i in 0..WRITES {
        let req = scsi::write(0, i * u64::from(BLOCKS), BLOCKS, pattern(round, i));
        let tx = tx.clone();
        b.submit(req, Responder::Stream { tx, tag: i })
            .await
            .unwrap();
    }
    check(b.execute(scsi::test_unit_ready(0)).await.unwrap()).unwrap();
    rx
}

/// B's answers: those its initiator had handed over when A's response
/// came (`early`), then the rest.
async fn answers(rx: &mut Answers, what: &str) -> (Ended, Ended) {
    let mut early = Vec::new();
    while let Ok((i, r)) = rx.try_recv() {
        early.push((i, outcome(i, r)));
    }
    let mut late = Vec::new();
    while early.len() + late.len() < WRITES as usize {
        let Ok(Some((i, r))) = tokio::time::timeout(HANG, rx.recv()).await else {
            panic!("{what}: writes left unanswered: early {early:?}, late {late:?}");
        };
        late.push((i, outcome(i, r)));
    }
    (early, late)
}

/// One round: B's writes in flight, A's task management, B's answers.
/// Returns how many of B's writes were aborted.
async fn round(
    a: &Session,
    b: &Session,
    relay: &Relay,
    function: TmfFunction,
    round: u32,
) -> usize {
    a.clear_unit_attention(0).await.unwrap();
    b.clear_unit_attention(0).await.unwrap();
    let held = round == 0;
    relay.hold.store(held, Ordering::SeqCst);
    let mut rx = send_writes(b, round).await;
    let response = a.task_mgmt(function, 0, u32::MAX).await.unwrap();
    assert_eq!(response, TmfResponse::FUNCTION_COMPLETE, "{function}");
    let what = format!("round {round}, {function}");
    let (early, late) = answers(&mut rx, &what).await;
    let aborted = early.iter().filter(|(_, o)| *o == Outcome::Aborted).count();
    // An aborted write answered after A's response: the response did not
    // wait for it. If any was aborted, every status B was sent before the
    // abort reached B before A's response did.
    assert!(
        !late.iter().any(|(_, o)| *o == Outcome::Aborted) && (aborted == 0 || late.is_empty()),
        "{what}: answered before B's statuses: early {early:?}, late {late:?}"
    );
    if held {
        // No write could get its data: every one was in flight.
        assert_eq!(aborted, WRITES as usize, "{what}, R2Ts held: {early:?}");
        assert!(
            !relay.hold.load(Ordering::SeqCst),
            "no TASK ABORTED passed the relay"
        );
    }
    verify_good(a, round, early.iter().chain(&late)).await;
    aborted
}

/// Reads back every write B was told GOOD.
async fn verify_good<'a>(
    a: &Session,
    round: u32,
    writes: impl Iterator<Item = &'a (u64, Outcome)>,
) {
    for (i, _) in writes.filter(|(_, o)| *o == Outcome::Good) {
        let lba = *i * u64::from(BLOCKS);
        let data = check(
            a.execute(scsi::read(0, lba, BLOCKS, BLOCK as u32))
                .await
                .unwrap(),
        )
        .unwrap();
        assert!(
            data == pattern(round, *i),
            "round {round}: write {i} was reported GOOD but its data is not on the LU"
        );
    }
}

fn scenario(function: TmfFunction, engine: &str) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let size = WRITES * u64::from(BLOCKS) * BLOCK as u64;
    let lu = format!(
        "file:{},size={size},direct",
        dir.path().join("lu").display()
    );
    let t = Target::start(&["--name", NAME, "--lun", &lu, "--io-engine", engine]);
    let portal = t.addr.to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let aborted = rt.block_on(async {
        let relay = Relay::start(t.addr).await;
        let a = Session::connect(&portal, Some(NAME), &options("iqn.2026-11.test:abort-a", 1))
            .await
            .unwrap();
        let b = Session::connect(&relay.addr.to_string(), Some(NAME), &options_b())
            .await
            .unwrap();
        let mut aborted = Vec::new();
        for r in 0..=FREE_ROUNDS {
            aborted.push(round(&a, &b, &relay, function, r).await);
        }
        a.logout().await.unwrap();
        b.logout().await.unwrap();
        aborted
    });
    eprintln!("{function} ({engine}): writes aborted per round {aborted:?}");
    let log = t.log();
    assert!(
        !log.contains("task management response sent before"),
        "{log}"
    );
}

#[test]
fn lu_reset_answers_the_other_sessions_writes() {
    scenario(TmfFunction::LOGICAL_UNIT_RESET, "pool");
}

#[test]
fn clear_task_set_answers_the_other_sessions_writes() {
    scenario(TmfFunction::CLEAR_TASK_SET, "uring");
}

#[test]
fn target_warm_reset_answers_the_other_sessions_writes() {
    scenario(TmfFunction::TARGET_WARM_RESET, "pool");
}
