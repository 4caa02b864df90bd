//! The client against a scripted server on a Unix socket or TCP: what
//! it sends, keep-alive, reconnection, and the limits on an answer.

use std::io::{BufRead, BufReader, Write};

use std::os::unix::net::UnixListener;

use super::*;

/// Reads one request (head and Content-Length body) from `r`; `None` at
/// the connection's end.
fn read_request(r: &mut impl BufRead) -> Option<String> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let len = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(head + &String::from_utf8(body).unwrap())
}

fn answer(status: u16, body: &str) -> String {
    format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A server on a fresh Unix socket answering each request of each
/// connection with `reply(request)`; the requests seen, per connection,
/// come back when the server's thread is joined.
fn unix_server(
    connections: usize,
    reply: fn(&str) -> String,
) -> (
    tempfile::TempDir,
    Endpoint,
    std::thread::JoinHandle<Vec<Vec<String>>>,
) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("admin.sock");
    let l = UnixListener::bind(&path).unwrap();
    let h = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for _ in 0..connections {
            let (s, _) = l.accept().unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            let mut reqs = Vec::new();
            while let Some(req) = read_request(&mut r) {
                let _ = w.write_all(reply(&req).as_bytes());
                reqs.push(req);
            }
            seen.push(reqs);
        }
        seen
    });
    (dir, Endpoint::Socket(path), h)
}

#[test]
fn requests_share_one_kept_alive_connection() {
    let (_d, ep, h) = unix_server(1, |req| {
        if req.starts_with("POST /v1/ops ") {
            answer(200, r#"{"ok":true}"#)
        } else {
            answer(404, "no such path")
        }
    });
    let mut c = Client::connect(ep).unwrap();
    let a = c.call("GET", "/v1/nothing", None).unwrap();
    assert_eq!(
        a,
        Answer {
            status: 404,
            body: "no such path".into()
        }
    );
    let v = c.op(&serde_json::json!({"op": "x"})).unwrap();
    assert_eq!(v, serde_json::json!({"ok": true}));
    drop(c);
    let seen = h.join().unwrap();
    assert_eq!(seen.len(), 1, "one connection for both requests");
    let post = &seen[0][1];
    assert!(post.contains("content-type: application/json"), "{post}");
    assert!(post.ends_with(r#"{"op":"x"}"#), "{post}");
    assert!(
        !post.to_ascii_lowercase().contains("authorization"),
        "{post}"
    );
}

#[test]
fn a_refused_op_says_the_status_and_the_daemons_words() {
    let (_d, ep, _h) = unix_server(1, |_| answer(409, "target in use\n"));
    let e = Client::connect(ep)
        .unwrap()
        .op(&serde_json::json!({"op": "y"}))
        .unwrap_err();
    assert!(e.contains("HTTP 409: target in use"), "{e}");
}

#[test]
fn a_closed_connection_is_opened_again_on_the_next_call() {
    // The first connection ends after one answer (the server reads one
    // request, answers, and drops it); the next call fails on it and the
    // one after that connects again.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("admin.sock");
    let l = UnixListener::bind(&path).unwrap();
    let h = std::thread::spawn(move || {
        for _ in 0..2 {
            let (s, _) = l.accept().unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            read_request(&mut r).unwrap();
            w.write_all(answer(200, "{}").as_bytes()).unwrap();
        }
    });
    let mut c = Client::connect(Endpoint::Socket(path)).unwrap();
    assert_eq!(c.call("GET", "/a", None).unwrap().status, 200);
    // The server may or may not have closed by now: at most one failure.
    let second = c.call("GET", "/b", None);
    if second.is_err() {
        assert_eq!(c.call("GET", "/b", None).unwrap().status, 200);
    }
    h.join().unwrap();
}

#[test]
fn an_answer_over_the_limit_is_an_error_not_a_buffer() {
    let (_d, ep, _h) = unix_server(1, |_| {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY + 1
        )
    });
    let e = Client::connect(ep)
        .unwrap()
        .call("GET", "/v1/state", None)
        .unwrap_err();
    assert!(e.contains("at most"), "{e}");
}

#[test]
fn http_sends_the_bearer_token() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut w = s.try_clone().unwrap();
        let req = read_request(&mut BufReader::new(s)).unwrap();
        w.write_all(answer(200, "{}").as_bytes()).unwrap();
        req
    });
    let ep = Endpoint::Http {
        addr,
        token: Some("s3cret".into()),
    };
    assert_eq!(
        Client::connect(ep)
            .unwrap()
            .call("GET", "/v1/state", None)
            .unwrap()
            .status,
        200
    );
    let req = h.join().unwrap();
    assert!(
        req.to_ascii_lowercase()
            .contains("authorization: bearer s3cret"),
        "{req}"
    );
}

#[test]
fn no_daemon_names_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent.sock");
    let e = Client::connect(Endpoint::Socket(path.clone()))
        .err()
        .unwrap();
    assert!(e.contains(&path.display().to_string()), "{e}");
}
