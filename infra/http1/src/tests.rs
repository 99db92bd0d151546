use super::*;

async fn read(bytes: &[u8], until_eof: bool) -> io::Result<Option<Message>> {
    read_message(&mut BufReader::new(bytes), until_eof).await
}

#[tokio::test]
async fn a_body_by_content_length_then_the_next_message() {
    let text = b"POST /a?x=1 HTTP/1.1\r\nContent-Length: 3\r\nX-Y: z\r\n\r\nabcGET /b HTTP/1.1\r\n\r\n";
    let mut r = BufReader::new(&text[..]);
    let m = read_message(&mut r, false).await.unwrap().unwrap();
    assert_eq!((m.method(), m.path(), m.body.as_slice(), m.header("x-y")), ("POST", "/a", &b"abc"[..], Some("z")));
    let next = read_message(&mut r, false).await.unwrap().unwrap();
    assert_eq!((next.method(), next.path(), next.body.len()), ("GET", "/b", 0));
    assert_eq!(read_message(&mut r, false).await.unwrap(), None);
}

#[tokio::test]
async fn a_chunked_body_is_joined_and_its_trailers_skipped() {
    let text = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n";
    let m = read(text, true).await.unwrap().unwrap();
    assert_eq!((m.status(), m.body.as_slice(), m.header("transfer-encoding")), (200, &b"abcde"[..], None));
}

#[tokio::test]
async fn a_response_without_length_runs_to_the_end_unless_it_has_no_body() {
    let m = read(b"HTTP/1.1 200 OK\r\n\r\nall of it", true).await.unwrap().unwrap();
    assert_eq!(m.body, b"all of it");
    let m = read(b"HTTP/1.1 204 No Content\r\n\r\nnext", true).await.unwrap().unwrap();
    assert!(m.body.is_empty());
    // A request without a length has no body.
    let m = read(b"GET / HTTP/1.1\r\n\r\nGET", false).await.unwrap().unwrap();
    assert!(m.body.is_empty());
}

#[tokio::test]
async fn malformed_messages_are_errors_not_guesses() {
    for text in [
        &b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n"[..],
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nshort",
        b"POST / HTTP/1.1\r\nHost: a",
        b"POST / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n",
    ] {
        assert!(read(text, false).await.is_err(), "{}", String::from_utf8_lossy(text));
    }
}

#[tokio::test]
async fn a_written_message_reads_back_with_its_own_length_and_connection() {
    let m = Message::response(404, b"{}").with_header("Connection", "whatever").with_header("X-Id", "7");
    let mut out = Vec::new();
    write_message(&mut out, &m, true).await.unwrap();
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"), "{text}");
    assert_eq!(text.matches("connection:").count(), 1, "{text}");
    let back = read(&out, false).await.unwrap().unwrap();
    assert_eq!(
        (back.status(), back.header("x-id"), back.header("connection"), back.body.as_slice()),
        (404, Some("7"), Some("keep-alive"), &b"{}"[..])
    );
}

#[tokio::test]
async fn a_client_request_round_trips_through_a_server() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (sock, _) = listener.accept().await.unwrap();
        let (r, mut w) = sock.into_split();
        let req = read_message(&mut BufReader::new(r), false).await.unwrap().unwrap();
        let body = format!("{} {} {}", req.method(), req.path(), String::from_utf8_lossy(&req.body));
        write_message(&mut w, &Message::response(200, body.as_bytes()), false).await.unwrap();
    });
    assert_eq!(request(&base, "POST", "/x", b"hi").await.unwrap(), (200, b"POST /x hi".to_vec()));
}

#[test]
fn the_blocking_client_works_inside_a_runtime_too() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let (r, mut w) = sock.split();
        read_message(&mut BufReader::new(r), false).await.unwrap();
        write_message(&mut w, &Message::response(202, b"ok"), false).await.unwrap();
    });
    // Called from inside a runtime (where a runtime of its own in the same thread would panic).
    let got = rt.block_on(async { blocking::request(&base, "GET", "/", b"") });
    assert_eq!(got.unwrap(), (202, b"ok".to_vec()));
}
