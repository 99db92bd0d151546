//! Just enough HTTP/1.1 for the bench: reading one message (Content-Length, chunked or
//! until EOF), a one-shot client, and writing a response. Loopback only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One request or response: the start line, the headers (names lower-cased) and the body.
#[derive(Debug, Default, Clone)]
pub struct Message {
    pub start: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Message {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Reads one message; `None` at a clean end of the stream. `until_eof_ok`: a response without
/// a length is read to the end of the stream.
pub fn read_message<R: Read>(r: &mut BufReader<R>, until_eof_ok: bool) -> std::io::Result<Option<Message>> {
    let mut start = String::new();
    loop {
        start.clear();
        if r.read_line(&mut start)? == 0 {
            return Ok(None);
        }
        if !start.trim().is_empty() {
            break;
        }
    }
    let mut m = Message { start: start.trim_end().to_string(), ..Default::default() };
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            m.headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let chunked = m.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    if chunked {
        loop {
            let mut size = String::new();
            r.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
            if n == 0 {
                let mut end = String::new();
                while r.read_line(&mut end)? > 0 && !end.trim().is_empty() {
                    end.clear();
                }
                break;
            }
            let mut chunk = vec![0; n];
            r.read_exact(&mut chunk)?;
            m.body.extend_from_slice(&chunk);
            let mut crlf = String::new();
            r.read_line(&mut crlf)?;
        }
        m.headers.retain(|(k, _)| k != "transfer-encoding");
    } else if let Some(n) = m.header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        m.body = vec![0; n];
        r.read_exact(&mut m.body)?;
    } else if until_eof_ok && !m.start.starts_with("HTTP/1.1 204") && !m.start.starts_with("HTTP/1.1 304") {
        r.read_to_end(&mut m.body)?;
    }
    Ok(Some(m))
}

/// Writes a message with an exact Content-Length (hop-by-hop headers dropped).
pub fn write_message<W: Write>(w: &mut W, m: &Message, keep_alive: bool) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(m.body.len() + 512);
    out.extend_from_slice(m.start.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (k, v) in &m.headers {
        if matches!(k.as_str(), "content-length" | "connection" | "transfer-encoding" | "keep-alive") {
            continue;
        }
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    let conn = if keep_alive { "keep-alive" } else { "close" };
    out.extend_from_slice(format!("content-length: {}\r\nconnection: {conn}\r\n\r\n", m.body.len()).as_bytes());
    out.extend_from_slice(&m.body);
    w.write_all(&out)?;
    w.flush()
}

/// A response with a status line and a body.
pub fn response(status: u16, reason: &str, content_type: &str, body: Vec<u8>) -> Message {
    Message {
        start: format!("HTTP/1.1 {status} {reason}"),
        headers: vec![("content-type".into(), content_type.into())],
        body,
    }
}

/// One request on a fresh connection; returns (status, body).
pub fn request(base: &str, method: &str, path: &str, body: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
    let host = base.trim_start_matches("http://").trim_end_matches('/');
    let mut s = TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let m = Message {
        start: format!("{method} {path} HTTP/1.1"),
        headers: vec![("host".into(), host.into()), ("content-type".into(), "application/json".into())],
        body: body.to_vec(),
    };
    write_message(&mut s, &m, false)?;
    let mut r = BufReader::new(s);
    let resp = read_message(&mut r, true)?
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "no response"))?;
    let status = resp.start.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, resp.body))
}
