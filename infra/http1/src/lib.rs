//! Just enough HTTP/1.1 for capblock's local tools, one copy for all of them: the local Lambda
//! Runtime API (infra/local-lambda), the bench's counting proxy and its simulator client
//! (infra/bench), the crash test's SNS proxy and the tests' control client (tests/). Loopback
//! only: no TLS, no redirects, no pipelining beyond reading one message after another.
//!
//! - [`read_message`]: one request or response, its body by Content-Length, chunked, or (for a
//!   response that says neither) up to the end of the stream.
//! - [`write_message`]: with an exact Content-Length, hop-by-hop headers replaced.
//! - [`exchange`]: one request on a fresh connection, its response read (proxies).
//! - [`request`] and [`blocking::request`]: a one-shot client, (status, body).

use std::io;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The largest body read (the Lambda payload limit is far below it).
pub const MAX_BODY: usize = 64 << 20;

/// One request or response: the start line, the headers (names lower-cased, in order) and the
/// body.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Message {
    pub start: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Message {
    /// A request for `path` at `host`, with a JSON body.
    pub fn request(method: &str, path: &str, host: &str, body: &[u8]) -> Message {
        Message {
            start: format!("{method} {path} HTTP/1.1"),
            headers: vec![("host".into(), host.into()), ("content-type".into(), "application/json".into())],
            body: body.to_vec(),
        }
    }

    /// A JSON response.
    pub fn response(status: u16, body: &[u8]) -> Message {
        Message {
            start: format!("HTTP/1.1 {status} {}", reason(status)),
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_vec(),
        }
    }

    /// Adds a header (its name lower-cased).
    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Message {
        self.headers.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// A request's method.
    pub fn method(&self) -> &str {
        self.start.split_whitespace().next().unwrap_or_default()
    }

    /// A request's path, without the query.
    pub fn path(&self) -> &str {
        let target = self.start.split_whitespace().nth(1).unwrap_or_default();
        target.split('?').next().unwrap_or_default()
    }

    /// A response's status code (0 if the start line has none).
    pub fn status(&self) -> u16 {
        self.start.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        404 => "Not Found",
        502 => "Bad Gateway",
        _ => "Internal Server Error",
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// Reads one message; `None` at a clean end of the stream before it starts. `until_eof`: a
/// message that gives neither a length nor chunks has a body up to the end of the stream (a
/// response; a request without a length has none).
pub async fn read_message<R: AsyncBufRead + Unpin>(r: &mut R, until_eof: bool) -> io::Result<Option<Message>> {
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let mut m = Message { start: line.trim_end().to_string(), ..Default::default() };
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).await? == 0 {
            return Err(bad("end of stream in the headers"));
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            m.headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let chunked = m.header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        read_chunks(r, &mut m.body).await?;
        m.headers.retain(|(k, _)| k != "transfer-encoding");
    } else if let Some(v) = m.header("content-length") {
        let n: usize = v.parse().map_err(|_| bad("bad content-length"))?;
        if n > MAX_BODY {
            return Err(bad("body too large"));
        }
        m.body.resize(n, 0);
        r.read_exact(&mut m.body).await?;
    } else if until_eof && !matches!(m.status(), 204 | 304) {
        r.take(MAX_BODY as u64).read_to_end(&mut m.body).await?;
    }
    Ok(Some(m))
}

async fn read_chunks<R: AsyncBufRead + Unpin>(r: &mut R, body: &mut Vec<u8>) -> io::Result<()> {
    loop {
        let mut size = String::new();
        r.read_line(&mut size).await?;
        let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or_default(), 16)
            .map_err(|_| bad("bad chunk size"))?;
        if n == 0 {
            // trailers, up to the blank line
            loop {
                let mut t = String::new();
                if r.read_line(&mut t).await? == 0 || t.trim().is_empty() {
                    return Ok(());
                }
            }
        }
        if body.len() + n > MAX_BODY {
            return Err(bad("body too large"));
        }
        let start = body.len();
        body.resize(start + n, 0);
        r.read_exact(&mut body[start..]).await?;
        let mut crlf = String::new();
        r.read_line(&mut crlf).await?;
    }
}

/// Writes `m` with an exact Content-Length and `Connection: keep-alive` or `close` (the
/// message's own hop-by-hop headers are dropped), in one write.
pub async fn write_message<W: AsyncWrite + Unpin>(w: &mut W, m: &Message, keep_alive: bool) -> io::Result<()> {
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
    w.write_all(&out).await?;
    w.flush().await
}

/// Sends `req` to `host` ("127.0.0.1:PORT") on a fresh connection and reads the response.
pub async fn exchange(host: &str, req: &Message) -> io::Result<Message> {
    let mut up = TcpStream::connect(host).await?;
    write_message(&mut up, req, false).await?;
    read_message(&mut BufReader::new(up), true)
        .await?
        .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "no response"))
}

/// One request to `url` (`http://host:port/path`, or a base with `path` given apart);
/// returns (status, body).
pub async fn request(base: &str, method: &str, path: &str, body: &[u8]) -> io::Result<(u16, Vec<u8>)> {
    let host = base.trim_start_matches("http://").trim_end_matches('/');
    let resp = exchange(host, &Message::request(method, path, host, body)).await?;
    Ok((resp.status(), resp.body))
}

/// The client for code that is not async (the bench's drivers): each call runs on a runtime of
/// its own, on a thread of its own, so it may also be called from inside another runtime.
pub mod blocking {
    pub fn request(base: &str, method: &str, path: &str, body: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
        std::thread::scope(|s| {
            s.spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?
                    .block_on(super::request(base, method, path, body))
            })
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the request thread panicked")))
        })
    }
}

#[cfg(test)]
mod tests;
