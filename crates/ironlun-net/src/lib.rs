//! # ironlun-net: socket reads for the async drivers
//!
//! **Owns:** [`read_marking_drained`], the one non-blocking read that both
//! the target's connection task and the initiator's session task make on
//! readiness.
//!
//! **Must not know:** iSCSI, PDUs or what the bytes mean; the caller says
//! how many bytes it has room for.
//!
//! ## Why a short read ends the wakeup
//!
//! A driver woken by readiness used to read until the socket answered
//! `EWOULDBLOCK`. At queue depth 1 that costs one `recvfrom` per I/O that
//! returns nothing: the target made 2.0 `recvfrom` calls per I/O, one
//! `epoll_wait` and one `writev` (`perf stat -e 'syscalls:sys_enter_*'`,
//! iscsi-perf at QD 1 against a tmpfs LUN). A read that returns fewer
//! bytes than were asked for has emptied the socket, so this read tells
//! tokio the socket is no longer readable, as an `EWOULDBLOCK` would
//! (nginx's `ngx_unix_recv` reasons the same way). Nothing is lost: tokio
//! clears readiness only if no readiness event arrived since it was
//! observed, and data that arrives later raises a new edge-triggered
//! event.

#![forbid(unsafe_code)]

use std::io;

use bytes::{BufMut, BytesMut};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// What one read got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read {
    /// Bytes were appended to the buffer. `drained`: fewer than asked for,
    /// so the socket is empty and readiness has been cleared.
    Bytes { drained: bool },
    /// The peer closed its side.
    Eof,
    /// Nothing to read (readiness cleared).
    Nothing,
}

/// Reads at most `most` bytes from `stream` onto the end of `buf`.
pub fn read_marking_drained(
    stream: &TcpStream,
    buf: &mut BytesMut,
    most: usize,
) -> io::Result<Read> {
    let mut got = 0;
    let r = stream.try_io(Interest::READABLE, || {
        got = stream.try_read_buf(&mut buf.limit(most))?;
        if got > 0 && got < most {
            // Clears readiness, as an EWOULDBLOCK from the socket would.
            Err(io::ErrorKind::WouldBlock.into())
        } else {
            Ok(got)
        }
    });
    match r {
        Ok(0) => Ok(Read::Eof),
        Ok(_) => Ok(Read::Bytes { drained: false }),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock && got > 0 => {
            Ok(Read::Bytes { drained: true })
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Read::Nothing),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).await.unwrap();
        let (b, _) = l.accept().await.unwrap();
        (a, b)
    }

    /// A connected pair where `bytes` were sent from the first and the
    /// second reports readable, with an empty buffer to read into.
    async fn pair_with(bytes: &[u8]) -> (TcpStream, TcpStream, BytesMut) {
        let (mut a, b) = pair().await;
        a.write_all(bytes).await.unwrap();
        b.readable().await.unwrap();
        (a, b, BytesMut::with_capacity(1 << 16))
    }

    /// True if `stream` reports readable within a short wait.
    async fn looks_readable(stream: &TcpStream) -> bool {
        tokio::time::timeout(Duration::from_millis(50), stream.readable())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_short_read_clears_readiness_and_later_data_sets_it_again() {
        let (mut a, b, mut buf) = pair_with(&[7u8; 100]).await;
        assert_eq!(
            read_marking_drained(&b, &mut buf, 4096).unwrap(),
            Read::Bytes { drained: true }
        );
        assert_eq!(&buf[..], &[7u8; 100][..]);
        // Without the clearing, readiness would still be set here (tokio
        // keeps it until a read returns EWOULDBLOCK).
        assert!(!looks_readable(&b).await, "readiness left set");
        // No wakeup is lost: new data makes the socket readable again.
        a.write_all(&[8u8; 10]).await.unwrap();
        assert!(looks_readable(&b).await, "new data not signalled");
        assert_eq!(
            read_marking_drained(&b, &mut buf, 4096).unwrap(),
            Read::Bytes { drained: true }
        );
        assert_eq!(buf.len(), 110);
    }

    #[tokio::test]
    async fn a_full_read_leaves_readiness_for_the_rest() {
        let (_a, b, mut buf) = pair_with(&[1u8; 300]).await;
        assert_eq!(
            read_marking_drained(&b, &mut buf, 200).unwrap(),
            Read::Bytes { drained: false }
        );
        assert!(looks_readable(&b).await);
        assert_eq!(
            read_marking_drained(&b, &mut buf, 200).unwrap(),
            Read::Bytes { drained: true }
        );
        assert_eq!(buf.len(), 300);
        // Nothing left: EWOULDBLOCK, reported as Nothing.
        assert_eq!(
            read_marking_drained(&b, &mut buf, 200).unwrap(),
            Read::Nothing
        );
    }

    #[tokio::test]
    async fn end_of_stream_is_eof() {
        let (a, b) = pair().await;
        drop(a);
        b.readable().await.unwrap();
        let mut buf = BytesMut::with_capacity(64);
        assert_eq!(read_marking_drained(&b, &mut buf, 64).unwrap(), Read::Eof);
    }
}
