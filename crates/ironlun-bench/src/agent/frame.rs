//! Frames: a 4-byte big-endian length, then that many bytes of JSON.
//! A frame longer than the reader's limit is refused before anything of
//! it is read or allocated.

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Writes `msg` as one frame.
pub async fn write<W, T>(w: &mut W, msg: &T) -> Result<(), String>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    let body = serde_json::to_vec(msg).map_err(|e| format!("encoding a message: {e}"))?;
    let len = u32::try_from(body.len()).map_err(|_| "a message over 4 GiB".to_owned())?;
    let mut buf = Vec::with_capacity(body.len() + 4);
    buf.extend_from_slice(&len.to_be_bytes());
    buf.extend_from_slice(&body);
    w.write_all(&buf)
        .await
        .map_err(|e| format!("sending: {e}"))?;
    w.flush().await.map_err(|e| format!("sending: {e}"))
}

/// Reads one frame of at most `limit` bytes; `None` when the peer closed
/// the connection between frames.
pub async fn read<R, T>(r: &mut R, limit: usize) -> Result<Option<T>, String>
where
    R: AsyncRead + Unpin,
    T: DeserializeOwned,
{
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(format!("receiving: {e}")),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > limit {
        return Err(format!(
            "a message of {len} bytes, over the limit of {limit}"
        ));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)
        .await
        .map_err(|e| format!("receiving: {e}"))?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| format!("a malformed message: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_an_oversized_one_is_refused_unread() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        write(&mut a, &vec![1u32, 2, 3]).await.unwrap();
        let got: Option<Vec<u32>> = read(&mut b, 100).await.unwrap();
        assert_eq!(got, Some(vec![1, 2, 3]));
        // A length of 1 GiB announced with no body: refused at once.
        a.write_all(&(1u32 << 30).to_be_bytes()).await.unwrap();
        let e = read::<_, Vec<u32>>(&mut b, 100).await.unwrap_err();
        assert!(e.contains("over the limit of 100"), "{e}");
        drop(a);
        assert_eq!(read::<_, Vec<u32>>(&mut b, 100).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_malformed_or_cut_frame_is_an_error() {
        let (mut a, mut b) = tokio::io::duplex(1 << 16);
        a.write_all(&3u32.to_be_bytes()).await.unwrap();
        a.write_all(b"{x}").await.unwrap();
        let e = read::<_, Vec<u32>>(&mut b, 100).await.unwrap_err();
        assert!(e.contains("malformed"), "{e}");
        a.write_all(&10u32.to_be_bytes()).await.unwrap();
        a.write_all(b"[1,").await.unwrap();
        drop(a);
        assert!(read::<_, Vec<u32>>(&mut b, 100).await.is_err());
    }
}
