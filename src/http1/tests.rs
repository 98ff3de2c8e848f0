//! The codec on scripted streams (every split of the bytes gives the same result), the framing
//! rules against the request-smuggling and limit cases, and a server-side upgrade handed to
//! tungstenite.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use super::framing::Framing;
use super::*;

const LIMITS: Limits = Limits {
    head: 64 * 1024,
    headers: 96,
    body: 1 << 20,
};

const SOON: Deadline = Deadline::NEVER;

/// The answer in `raw` (head and body), read with every split of its bytes: they must agree.
fn answer(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let results: Vec<Result<(u16, Vec<u8>), String>> = [1, 2, 7, usize::MAX]
        .iter()
        .map(|&step| {
            let mut conn = Conn::new(Script::new(raw, step));
            let head = conn
                .read_response(SOON, &LIMITS)
                .map_err(|e| e.to_string())?;
            let framing = head.framing().map_err(|e| e.to_string())?;
            let body = conn
                .read_body(framing, LIMITS.body, &LIMITS, SOON)
                .map_err(|e| e.to_string())?;
            Ok((head.code, body))
        })
        .collect();
    for r in &results[1..] {
        assert_eq!(r, &results[0], "the split changed the result");
    }
    results[0].clone()
}

fn body(raw: &[u8]) -> Vec<u8> {
    answer(raw).unwrap_or_else(|e| panic!("{e}")).1
}

#[test]
fn answers_are_framed_by_length_chunks_or_close() {
    assert_eq!(
        body(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}extra"),
        b"{}"
    );
    assert_eq!(
        body(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{\"\r\n3;ext=1\r\na\":\r\nA\r\n1234567890\r\n0\r\n\r\nnext answer"),
        b"{\"a\":1234567890"
    );
    // Transfer-Encoding wins over Content-Length; identical lengths are one.
    assert_eq!(
        body(b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\nX-Trailer: 1\r\n\r\n"),
        b"x"
    );
    assert_eq!(
        body(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1, 1\r\n\r\nx"),
        b"x"
    );
    assert_eq!(body(b"HTTP/1.0 200 OK\r\n\r\nuntil close"), b"until close");
    assert_eq!(
        body(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nraw"),
        b"raw"
    );
    // 1xx interim answers are skipped; 204 and 304 have no body; bare LF ends lines of a head.
    assert_eq!(
        body(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx"),
        b"x"
    );
    assert_eq!(body(b"HTTP/1.1 204 No Content\r\n\r\nignored"), b"");
    assert_eq!(body(b"HTTP/1.1 200 OK\nContent-Length: 1\n\nx"), b"x");
    let mut conn = Conn::new(Script::new(
        b"HTTP/1.1 404 Not Found\r\nX-A:  b \r\nContent-Length: 0\r\n\r\n",
        3,
    ));
    let head = conn.read_response(SOON, &LIMITS).unwrap();
    assert_eq!((head.code, head.status.as_str()), (404, "404 Not Found"));
    assert_eq!(head.header("x-a"), Some("b"));
}

#[test]
fn a_chunked_message_ends_at_its_last_chunk_and_what_follows_is_kept() {
    // The stream would fail if read past the message: the last chunk ends it.
    let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
    let mut conn = Conn::new(Script::hanging(raw));
    let head = conn.read_response(SOON, &LIMITS).unwrap();
    let framing = head.framing().unwrap();
    assert_eq!(framing, Framing::Chunked);
    assert_eq!(conn.read_body(framing, 100, &LIMITS, SOON).unwrap(), b"{}");
    // An upgrade's answer: the bytes after its head are the new protocol's.
    let raw = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x02hi";
    let mut conn = Conn::new(Script::new(raw, 5));
    assert_eq!(conn.read_response(SOON, &LIMITS).unwrap().code, 101);
    let (_, leftover) = conn.into_parts();
    assert!(b"\x81\x02hi".starts_with(&leftover));
}

#[test]
fn broken_answers_say_what_is_wrong() {
    let err = |raw: &[u8]| answer(raw).expect_err("an error");
    for (raw, says) in [
        (
            &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"[..],
            "invalid chunk size",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
            "without a size",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}x\r\n0\r\n\r\n",
            "longer than its size",
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{}",
            "closed in the middle of the body",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}",
            "closed in the middle of the body",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            "invalid Content-Length",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx",
            "conflicting Content-Length",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent",
            "closed in the middle of the head",
        ),
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "not HTTP/1.1"),
        (b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", "not HTTP/1.1"),
    ] {
        let e = err(raw);
        assert!(e.contains(says), "{}: {e}", String::from_utf8_lossy(raw));
    }
    let many: String = (0..=LIMITS.headers)
        .map(|i| format!("X-{i}: v\r\n"))
        .collect();
    let e = err(format!("HTTP/1.1 200 OK\r\n{many}\r\n").as_bytes());
    assert!(e.contains("more than 96 header lines"), "{e}");
    let long = "x".repeat(LIMITS.head + 10);
    let e = err(format!("HTTP/1.1 200 OK\r\nX-Long: {long}").as_bytes());
    assert!(e.contains("head is larger than 64 KiB"), "{e}");
    // A deadline that passes is a time-out of the part being read, with the bytes so far.
    let mut conn = Conn::new(Script::hanging(
        b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n12",
    ));
    let head = conn.read_response(SOON, &LIMITS).unwrap();
    let e = conn
        .read_body(head.framing().unwrap(), 100, &LIMITS, SOON)
        .unwrap_err();
    assert!(
        matches!(
            e,
            HttpError::TimedOut {
                part: Part::Body,
                read: 40
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.status(), Some(408));
}

#[test]
fn bodies_past_the_cap_are_refused_and_at_the_cap_accepted() {
    let max = LIMITS.body;
    let full = vec![b'x'; max];
    let with_length = |n: usize| {
        let mut raw = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n").into_bytes();
        raw.extend_from_slice(&vec![b'x'; n]);
        raw
    };
    let chunked = |sizes: &[usize]| {
        let mut raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for &n in sizes {
            raw.extend_from_slice(format!("{n:x}\r\n").as_bytes());
            raw.extend_from_slice(&vec![b'x'; n]);
            raw.extend_from_slice(b"\r\n");
        }
        raw.extend_from_slice(b"0\r\n\r\n");
        raw
    };
    let until_close = |n: usize| {
        let mut raw = b"HTTP/1.1 200 OK\r\n\r\n".to_vec();
        raw.extend_from_slice(&vec![b'x'; n]);
        raw
    };
    let read = |raw: Vec<u8>| {
        let mut conn = Conn::new(Script::new(&raw, usize::MAX));
        let head = conn
            .read_response(SOON, &LIMITS)
            .map_err(|e| e.to_string())?;
        conn.read_body(head.framing().unwrap(), max, &LIMITS, SOON)
            .map_err(|e| e.to_string())
    };
    assert_eq!(read(with_length(max)).unwrap(), full);
    assert_eq!(read(chunked(&[max / 2, max / 2])).unwrap(), full);
    assert_eq!(read(until_close(max)).unwrap(), full);
    for raw in [
        with_length(max + 1),
        chunked(&[max / 2, max / 2, 1]),
        until_close(max + 1),
        // A chunk that announces too much is refused before anything of it is read.
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffff\r\n".to_vec(),
    ] {
        let e = read(raw).expect_err("over the cap");
        assert!(e.contains("larger than 1 MiB"), "{e}");
    }
}

/// A request head and body as a server reads them from `raw`, with every split of the bytes.
fn request(raw: &[u8]) -> Result<(RequestHead, Vec<u8>), HttpError> {
    let results: Vec<_> = [1, 3, usize::MAX]
        .iter()
        .map(|&step| {
            let mut conn = Conn::new(Script::new(raw, step));
            let head = conn.read_request(SOON, None, &LIMITS)?.expect("a head");
            let body = conn.read_body(head.framing()?, LIMITS.body, &LIMITS, SOON)?;
            Ok::<_, HttpError>((head, body))
        })
        .collect();
    let shown: Vec<String> = results
        .iter()
        .map(|r| match r {
            Ok((h, b)) => format!("{} {} {b:?}", h.method, h.target),
            Err(e) => format!("{:?}: {e}", e.status()),
        })
        .collect();
    assert!(shown.iter().all(|s| s == &shown[0]), "{shown:?}");
    results.into_iter().next().expect("one result")
}

#[test]
fn pipelined_requests_are_read_one_by_one() {
    let raw = b"POST /mcp?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}\
                POST /mcp HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
                3\r\n[1,\r\n2;ext=1\r\n2]\r\n0\r\nX-Trailer: t\r\n\r\n\
                GET / HTTP/1.0\r\n\r\n";
    for step in [1, 5, usize::MAX] {
        let mut conn = Conn::new(Script::new(raw, step));
        let h = conn.read_request(SOON, None, &LIMITS).unwrap().unwrap();
        assert_eq!((h.method.as_str(), h.path()), ("POST", "/mcp"));
        assert!(h.keep_alive());
        assert_eq!(
            conn.read_body(h.framing().unwrap(), 100, &LIMITS, SOON)
                .unwrap(),
            b"{}"
        );
        let h = conn.read_request(SOON, None, &LIMITS).unwrap().unwrap();
        assert_eq!(
            conn.read_body(h.framing().unwrap(), 100, &LIMITS, SOON)
                .unwrap(),
            b"[1,2]"
        );
        let h = conn.read_request(SOON, None, &LIMITS).unwrap().unwrap();
        assert!(!h.http11 && !h.keep_alive() && !h.has_body());
        assert!(conn.read_request(SOON, None, &LIMITS).unwrap().is_none());
    }
}

#[test]
fn requests_that_two_readers_could_read_differently_are_refused() {
    let ok = request(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}").unwrap();
    assert_eq!(ok.1, b"{}");
    // (the request, the status it gets, what the error says)
    let cases: [(&[u8], u16, &str); 28] = [
        (b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", 400, "more than one Content-Length"),
        (b"POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\nx", 400, "not a number"),
        (b"POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\nx", 400, "not a number"),
        (b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\nx", 400, "not a number"),
        (b"POST / HTTP/1.1\r\nContent-Length: 0x1\r\n\r\nx", 400, "not a number"),
        (b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\nx", 400, "not a number"),
        (b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n", 400, "both"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n", 400, "more than one Transfer-Encoding"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 400, "other than chunked"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400, "other than chunked"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: \xffchunked\r\nContent-Length: 1\r\n\r\nx", 400, "both"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: \xffchunked\r\n\r\n", 400, "other than chunked"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n+1\r\nx\r\n0\r\n\r\n", 400, "invalid chunk size"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n 1\r\nx\r\n0\r\n\r\n", 400, "invalid chunk size"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1 \r\nx\r\n0\r\n\r\n", 400, "invalid chunk size"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0x1\r\nx\r\n0\r\n\r\n", 400, "invalid chunk size"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\nx\r\n0\r\n\r\n", 400, "not ended by CRLF"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;a\nb\r\nx\r\n0\r\n\r\n", 400, "not ended by CRLF"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;\x01\r\nx\r\n0\r\n\r\n", 400, "invalid chunk extension"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n0\r\n\r\n", 400, "longer than its size"),
        (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n11111111111111111\r\n", 400, "too large"),
        (b"POST / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "more than one Host"),
        (b"POST / HTTP/1.1\r\nOrigin: http://a\r\nOrigin: http://b\r\n\r\n", 400, "more than one Origin"),
        (b"POST / HTTP/1.1\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n", 400, "more than one Authorization"),
        (b"POST / HTTP/1.1\r\nContent-Type: a/b\r\ncontent-type: c/d\r\n\r\n", 400, "more than one Content-Type"),
        // obs-fold and a space before the colon: no header at all.
        (b"POST / HTTP/1.1\r\nX-A: a\r\n b\r\n\r\n", 400, "not HTTP/1.1"),
        (b"POST / HTTP/1.1\r\nHost : a\r\n\r\n", 400, "not HTTP/1.1"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400, "not HTTP/1.1"),
    ];
    for (raw, status, says) in cases {
        let e = request(raw)
            .map(|(h, _)| h.target)
            .expect_err(&String::from_utf8_lossy(raw));
        assert_eq!(
            e.status(),
            Some(status),
            "{}: {e}",
            String::from_utf8_lossy(raw)
        );
        assert!(
            e.to_string().contains(says),
            "{}: {e}",
            String::from_utf8_lossy(raw)
        );
    }
    // Bare LF line ends in a head are read (RFC 9112 §2.2), as is an empty line before it.
    let (h, b) = request(b"\r\nPOST / HTTP/1.1\nHost: a\nContent-Length: 1\n\nx").unwrap();
    assert_eq!((h.text("host"), b.as_slice()), (Some("a"), &b"x"[..]));
}

#[test]
fn heads_and_bodies_past_their_caps_are_refused_with_their_status() {
    let mut big = b"GET / HTTP/1.1\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'a', LIMITS.head + 10));
    assert_eq!(request(&big).unwrap_err().status(), Some(431));
    let many: String = (0..=LIMITS.headers)
        .map(|i| format!("X-{i}: v\r\n"))
        .collect();
    let e = request(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes()).unwrap_err();
    assert_eq!(e.status(), Some(431));
    let too_long = format!(
        "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
        LIMITS.body + 1
    );
    assert_eq!(
        request(too_long.as_bytes()).unwrap_err().status(),
        Some(413)
    );
    let chunk = format!(
        "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
        LIMITS.body + 1
    );
    assert_eq!(request(chunk.as_bytes()).unwrap_err().status(), Some(413));
    // A head whose deadline passes is a 408 of the head; an idle connection simply ends.
    let mut conn = Conn::new(Script::hanging(b"POST / HTTP/1.1\r\nHo"));
    let e = conn.read_request(SOON, None, &LIMITS).unwrap_err();
    assert!(
        matches!(
            e,
            HttpError::TimedOut {
                part: Part::Head,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.status(), Some(408));
    let mut conn = Conn::new(Script::hanging(b""));
    assert!(conn.read_request(SOON, None, &LIMITS).unwrap().is_none());
}

#[test]
fn a_head_is_parsed_when_it_may_be_whole_not_once_per_byte() {
    assert!(!may_end_head(b"GET / HTTP/1.1\r\nHost: a\r\n", 0));
    assert!(may_end_head(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 0));
    assert!(may_end_head(b"GET / HTTP/1.1\nHost: a\n\n", 20));
    // The end straddles what was looked at and what came.
    assert!(may_end_head(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 26));
    assert!(!may_end_head(b"GET / HTTP/1.1\r\n\r\n", 18));
}

#[test]
fn a_status_line_is_made_safe_for_a_message() {
    let full = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(status_line(full), "408 Request Timeout");
    assert_eq!(status_line(b"HTTP/1.0 503\r\n"), "503");
    assert_eq!(status_line(b"HTTP/1.1"), "HTTP/1.1");
    assert_eq!(status_line(b"HTTP/1.1 400 \x1b[31mx\xff\n"), "400 [31mx");
}

#[test]
fn what_we_send_is_framed() {
    let a = Response::json(200, "{}".into()).with("Mcp-Session-Id", "abc");
    let text = String::from_utf8(a.bytes(false)).unwrap();
    assert_eq!(
        text,
        "HTTP/1.1 200 OK\r\nMcp-Session-Id: abc\r\nContent-Type: application/json\r\n\
         Content-Length: 2\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n{}"
    );
    assert_eq!(
        Response::empty(100).bytes(true),
        b"HTTP/1.1 100 Continue\r\n\r\n"
    );
    let no_content = String::from_utf8(Response::empty(204).bytes(true)).unwrap();
    assert!(!no_content.contains("Content-Length"), "{no_content}");
    // No value can end its line.
    let r = Request::get("/json/version")
        .with("Host", "h:1")
        .with("X", "a\r\nInjected: 1");
    assert_eq!(
        r.bytes(),
        b"GET /json/version HTTP/1.1\r\nHost: h:1\r\nX: aInjected: 1\r\n\r\n"
    );
    assert_eq!(chunk(b"{\"a\":1}"), b"7\r\n{\"a\":1}\r\n");
    let mut s = Script::new(b"", 1);
    write_all(&mut s, b"abc", Duration::from_secs(1), Deadline::NEVER).unwrap();
    assert_eq!(s.written, b"abc");
}

/// A loopback socket whose reads and writes end at their deadline (socket time-outs are good
/// enough for a test; the crate's own streams wait with `poll`).
struct Loopback(TcpStream);

impl Read for Loopback {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Loopback {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl Timed for Loopback {
    fn set_deadline(&mut self, deadline: Deadline) {
        let left = deadline
            .remaining()
            .map(|d| d.max(Duration::from_millis(1)));
        let _ = self.0.set_read_timeout(left);
        let _ = self.0.set_write_timeout(left);
    }
}

#[test]
fn a_server_upgrades_a_request_and_hands_the_socket_to_tungstenite() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    // The client's upgrade request with its first frame right behind it (a masked "hi").
    let key = "dGhlIHNhbXBsZSBub25jZQ==";
    let mut sent = format!(
        "GET /devtools/page/X HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n\
         Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: {key}\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n"
    )
    .into_bytes();
    let mask = [1u8, 2, 3, 4];
    sent.extend_from_slice(&[0x81, 0x82]);
    sent.extend_from_slice(&mask);
    sent.extend(b"hi".iter().zip(mask.iter().cycle()).map(|(b, m)| b ^ m));
    client.write_all(&sent).unwrap();

    let wait = Deadline::after(Duration::from_secs(10));
    let mut conn = Conn::new(Loopback(server));
    let head = conn.read_request(wait, None, &LIMITS).unwrap().unwrap();
    assert!(head.has_token("connection", "upgrade") && head.has_token("upgrade", "websocket"));
    let accept =
        tungstenite::handshake::derive_accept_key(head.header("sec-websocket-key").unwrap());
    let switch = Response::empty(101)
        .with("Upgrade", "websocket")
        .with("Connection", "Upgrade")
        .with("Sec-WebSocket-Accept", accept.as_str());
    let (mut stream, leftover) = conn.into_parts();
    write_all(
        &mut stream,
        &switch.bytes(true),
        Duration::from_secs(5),
        wait,
    )
    .unwrap();
    stream.set_deadline(wait);
    let mut ws = tungstenite::WebSocket::from_partially_read(
        stream,
        leftover,
        tungstenite::protocol::Role::Server,
        None,
    );
    assert_eq!(ws.read().unwrap(), tungstenite::Message::text("hi"));
    ws.send(tungstenite::Message::text("ho")).unwrap();

    client
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 512];
    while !got.ends_with(b"\x81\x02ho") {
        let n = client.read(&mut chunk).unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"),
        "{text}"
    );
    assert!(
        text.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"),
        "{text}"
    );
    assert!(!text.contains("Content-Length"), "{text}");
}
