//! Where `now` comes from: the wall clock, or in simulations only (`make demo`, the tests that
//! run the real binaries) the market simulator's clock, `GET <url>` -> `{"now": "<RFC 3339>"}`
//! (the URL is `CAPBLOCK_SIMULATED_CLOCK_URL`, read by `config::time_source`; the template never
//! sets it). Whoever answers decides every wait and budget month, so the URL must name this
//! machine (a loopback host: 127.0.0.0/8, `localhost`, `[::1]`), in any mode: a simulation runs
//! its simulator beside the binaries, and a deployed function has none on its loopback.
//!
//! The request goes through hyper's client (already built for the AWS SDK's HTTP stack), not a
//! reader of our own.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;

use crate::ports::Clock;

/// How long the simulator may take to say what time it is.
const ANSWER_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeSource {
    Wall,
    /// `http://HOST:PORT/PATH`, plain HTTP on a local simulator.
    Simulated {
        url: String,
    },
}

/// Why a time source cannot be used: its URL (`Invalid`) or its answer (`Unanswered`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClockError {
    #[error("{problem}")]
    Invalid { url: String, problem: String },
    #[error("the simulated clock at {url} did not answer: {problem}")]
    Unanswered { url: String, problem: String },
}

impl TimeSource {
    /// The source a simulated clock's URL names (`None`: the wall clock).
    pub fn from_url(url: Option<&str>) -> Result<TimeSource, ClockError> {
        let Some(url) = url else { return Ok(TimeSource::Wall) };
        let invalid = |problem: &str| ClockError::Invalid { url: url.to_string(), problem: problem.into() };
        let rest = url.strip_prefix("http://").ok_or_else(|| invalid("expected http://HOST:PORT/PATH"))?;
        let host = rest.split_once('/').map_or(rest, |(h, _)| h);
        let (name, port) = host.rsplit_once(':').ok_or_else(|| invalid("expected http://HOST:PORT/PATH"))?;
        if name.is_empty() || port.parse::<u16>().is_err() || url.parse::<hyper::Uri>().is_err() {
            return Err(invalid("expected http://HOST:PORT/PATH"));
        }
        if !is_loopback(name) {
            return Err(invalid(
                "the simulated clock must be on this machine (127.0.0.1, localhost or [::1]); a deployed stack runs on the wall clock: unset it",
            ));
        }
        Ok(TimeSource::Simulated { url: url.to_string() })
    }

    /// The source's `now`; `clock` is the wall clock.
    pub async fn now(&self, clock: &dyn Clock) -> Result<DateTime<Utc>, ClockError> {
        match self {
            TimeSource::Wall => Ok(clock.now()),
            TimeSource::Simulated { url } => {
                simulated_now(url).await.map_err(|problem| ClockError::Unanswered { url: url.clone(), problem })
            }
        }
    }
}

/// Whether a URL's host names this machine: `localhost`, an address of 127.0.0.0/8, or `[::1]`.
fn is_loopback(name: &str) -> bool {
    if let Some(v6) = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        return v6.parse::<std::net::Ipv6Addr>().is_ok_and(|a| a.is_loopback());
    }
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::Ipv4Addr>().is_ok_and(|a| a.is_loopback())
}

async fn simulated_now(url: &str) -> Result<DateTime<Utc>, String> {
    let uri: hyper::Uri = url.parse().map_err(|e: hyper::http::uri::InvalidUri| e.to_string())?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let ask = async {
        let response = client.get(uri).await.map_err(|e| e.to_string())?;
        let status = response.status();
        let body = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok::<_, String>((status, body))
    };
    let (status, body) = tokio::time::timeout(ANSWER_WITHIN, ask).await.map_err(|_| "timed out".to_string())??;
    if !status.is_success() {
        return Err(format!("HTTP {status}"));
    }
    #[derive(Deserialize)]
    struct Now {
        now: DateTime<Utc>,
    }
    serde_json::from_slice::<Now>(&body).map(|n| n.now).map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulated_time_source_is_a_local_http_url() {
        let url = |v: &str| TimeSource::from_url(Some(v));
        assert_eq!(TimeSource::from_url(None).unwrap(), TimeSource::Wall);
        assert_eq!(
            url("http://127.0.0.1:9/_sim/clock").unwrap(),
            TimeSource::Simulated { url: "http://127.0.0.1:9/_sim/clock".into() }
        );
        assert!(url("https://example.com/now").is_err());
        assert!(url("http://no-port/now").is_err());
        for local in [
            "http://127.0.0.1:9/c",
            "http://127.8.9.10:9/c",
            "http://localhost:9/c",
            "http://LOCALHOST:9",
            "http://[::1]:9/c",
        ] {
            assert!(url(local).is_ok(), "{local}");
        }
        // Anything another machine could answer is refused.
        for remote in [
            "http://10.0.0.5:9/c",
            "http://169.254.169.254:80/latest",
            "http://example.com:80/now",
            "http://localhost.example.com:80/now",
            "http://127.0.0.1.nip.io:80/now",
            "http://[::ffff:10.0.0.5]:9/c",
            "http://[2001:db8::1]:9/c",
            "http://0.0.0.0:9/c",
            "http://127.0.0.1:notaport/c",
            "http://:9/c",
        ] {
            assert!(url(remote).is_err(), "{remote}");
        }
        let e = url("http://203.0.113.7:8080/_sim/clock").unwrap_err();
        assert!(e.to_string().contains("must be on this machine"), "{e}");
    }

    /// A clock that does not answer is named, with its URL; nothing waits past the bound.
    #[tokio::test]
    async fn an_unanswered_clock_is_named() {
        // A port nothing listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let source = TimeSource::from_url(Some(&format!("http://127.0.0.1:{port}/_sim/clock"))).unwrap();
        let e = source.now(&crate::ports::SystemClock).await.unwrap_err();
        assert!(matches!(&e, ClockError::Unanswered { url, .. } if url.ends_with("/_sim/clock")), "{e}");
    }
}
