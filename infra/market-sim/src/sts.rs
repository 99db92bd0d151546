//! The account of a caller with temporary credentials, as AWS resolves it: STS GetCallerIdentity
//! with the caller's access key id (`--sts-endpoint`). In the local stack that STS is moto's,
//! which does not check signatures and knows every key its AssumeRole issued: for such a key it
//! answers the assumed role's ARN (`arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION`) and its
//! account; for a key it did not issue, its default user. Only an assumed role's answer makes
//! the caller another account; anything else is the simulated account.
//!
//! Asked outside the world's lock (it is network I/O), at most `TIMEOUT` a try and `ATTEMPTS`
//! tries when no answer comes; an answer is kept per key (a session's keys are its own), a
//! failure is not: it is logged and the call taken as the simulated account's, and the next
//! call with the key asks again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use capblock_http1::{Message, exchange};

/// How long one GetCallerIdentity may take, connection included. Generous: on a loaded machine
/// (2 cores, a build beside the tests, the date-ahead run under libfaketime) moto answered
/// after more than 2 s, and a caller taken as the simulated account then spent the wrong bucket
/// and met the wrong quota, so a test's verdict hung on the machine's speed.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// How many times a question that got no answer (a timeout, a refused connection) is asked
/// before the caller is taken as the simulated account. An answer, even an error, is final.
pub const ATTEMPTS: u32 = 3;

/// What STS said of a key: the account of the role it assumed, or `None` (not an assumed role).
type Answer = Option<String>;

pub struct Sts {
    /// `HOST:PORT` and the path GetCallerIdentity is posted to.
    host: String,
    path: String,
    timeout: Duration,
    /// One slot per key asked: its answer once STS gave one. The slot's own (async) lock makes
    /// the first calls of a key that come together wait for one question instead of each asking.
    answers: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Answer>>>>>,
}

impl Sts {
    /// `endpoint`: `http://HOST:PORT`, optionally with a path (no TLS: a local STS).
    pub fn new(endpoint: &str) -> Result<Self, String> {
        let bad = || format!("STS endpoint {endpoint:?} must be http://HOST:PORT[/PATH]");
        let rest = endpoint.strip_prefix("http://").ok_or_else(bad)?;
        let (host, path) = rest.find('/').map_or((rest, "/"), |i| rest.split_at(i));
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(bad());
        }
        Ok(Self { host: host.to_string(), path: path.to_string(), timeout: TIMEOUT, answers: Mutex::default() })
    }

    /// The same with another time limit (tests).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The account of the role `key` is a session of; `None` when STS says it is not an assumed
    /// role's, or cannot say (a warning is logged): the simulated account.
    pub async fn account_of(&self, key: &str) -> Option<String> {
        let slot = self.answers.lock().unwrap_or_else(|e| e.into_inner()).entry(key.to_string()).or_default().clone();
        let mut slot = slot.lock().await;
        if let Some(answer) = slot.as_ref() {
            return answer.clone();
        }
        match self.ask_patiently(key).await {
            Ok(answer) => {
                tracing::info!(
                    key,
                    account = answer.as_deref().unwrap_or("(the simulated account)"),
                    "caller's account from STS"
                );
                *slot = Some(answer.clone());
                answer
            }
            Err(e) => {
                tracing::warn!(key, error = %e, "STS GetCallerIdentity failed; the caller is taken as the simulated account");
                None
            }
        }
    }

    /// `ask`, again after no answer (up to `ATTEMPTS`): STS slow or not yet listening is the
    /// local stack's hiccup, not an answer about the key.
    async fn ask_patiently(&self, key: &str) -> Result<Answer, String> {
        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            match self.ask(key).await {
                Ok(answer) => return Ok(answer),
                Err(Asked::Answered(e)) => return Err(e),
                Err(Asked::NoAnswer(e)) => {
                    tracing::info!(key, attempt, error = %e, "STS GetCallerIdentity got no answer; asking again");
                    last = e;
                }
            }
        }
        Err(format!("{last} ({ATTEMPTS} attempts)"))
    }

    async fn ask(&self, key: &str) -> Result<Answer, Asked> {
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential={key}/20260101/us-east-1/sts/aws4_request, SignedHeaders=host, Signature=0"
        );
        let req = Message {
            start: format!("POST {} HTTP/1.1", self.path),
            headers: vec![
                ("host".into(), self.host.clone()),
                ("content-type".into(), "application/x-www-form-urlencoded; charset=utf-8".into()),
                ("authorization".into(), authorization),
            ],
            body: b"Action=GetCallerIdentity&Version=2011-06-15".to_vec(),
        };
        let resp = tokio::time::timeout(self.timeout, exchange(&self.host, &req))
            .await
            .map_err(|_| Asked::NoAnswer(format!("no answer from {} within {:?}", self.host, self.timeout)))?
            .map_err(|e| Asked::NoAnswer(format!("{}: {e}", self.host)))?;
        let body = String::from_utf8_lossy(&resp.body);
        if resp.status() != 200 {
            let head: String = body.chars().take(200).collect();
            return Err(Asked::Answered(format!("HTTP {} from {}: {head}", resp.status(), self.host)));
        }
        parse_identity(&body).map_err(Asked::Answered)
    }
}

/// Why a question to STS came to nothing: no answer (asked again), or an answer that says
/// nothing of the key (final).
enum Asked {
    NoAnswer(String),
    Answered(String),
}

/// GetCallerIdentity's XML answer: `Some(account)` when its `Arn` is an assumed role's, `None`
/// for any other identity (a user, a root, moto's default user).
pub fn parse_identity(xml: &str) -> Result<Answer, String> {
    let account = element(xml, "Account").ok_or("no <Account> in GetCallerIdentity's answer")?;
    let arn = element(xml, "Arn").ok_or("no <Arn> in GetCallerIdentity's answer")?;
    if !crate::organization::is_account(account) {
        return Err(format!("GetCallerIdentity answered the account {account:?}, not 12 digits"));
    }
    // arn:PARTITION:sts::ACCOUNT:assumed-role/ROLE/SESSION
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let assumed = parts.len() == 6 && parts[2] == "sts" && parts[5].starts_with("assumed-role/");
    Ok(assumed.then(|| account.to_string()))
}

/// The text of the first `<name>` element.
fn element<'a>(xml: &'a str, name: &str) -> Option<&'a str> {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    let start = xml.find(&open)? + open.len();
    let len = xml[start..].find(&close)?;
    Some(xml[start..start + len].trim())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// GetCallerIdentity's answer as moto writes it.
    pub fn identity(account: &str, arn: &str) -> String {
        format!(
            "<GetCallerIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n  \
             <GetCallerIdentityResult>\n    <UserId>AROA123456789EXAMPLE:scan</UserId>\n    \
             <Account>{account}</Account>\n    <Arn>{arn}</Arn>\n  </GetCallerIdentityResult>\n  \
             <ResponseMetadata><RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ResponseMetadata>\n\
             </GetCallerIdentityResponse>"
        )
    }

    #[test]
    fn only_an_assumed_role_is_another_account() {
        let role = identity("444455556666", "arn:aws:sts::444455556666:assumed-role/capblock-watch-dev/scan");
        assert_eq!(parse_identity(&role), Ok(Some("444455556666".into())));
        let china = identity("444455556666", "arn:aws-cn:sts::444455556666:assumed-role/r/s");
        assert_eq!(parse_identity(&china), Ok(Some("444455556666".into())));
        for other in [
            "arn:aws:sts::123456789012:user/moto",
            "arn:aws:iam::123456789012:user/alice",
            "arn:aws:iam::123456789012:root",
            "arn:aws:iam::123456789012:assumed-role/not-sts/s",
            "arn:aws:sts::123456789012:federated-user/bob",
        ] {
            assert_eq!(parse_identity(&identity("123456789012", other)), Ok(None), "{other}");
        }
        for (bad, says) in [
            (identity("12345", "arn:aws:sts::12345:assumed-role/r/s"), "not 12 digits"),
            ("<Arn>arn:aws:sts::444455556666:assumed-role/r/s</Arn>".to_string(), "no <Account>"),
            ("<Account>444455556666</Account>".to_string(), "no <Arn>"),
            ("<ErrorResponse><Error><Code>InvalidClientTokenId</Code></Error></ErrorResponse>".into(), "no <Account>"),
        ] {
            let e = parse_identity(&bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn the_endpoint_is_a_plain_http_url() {
        let s = Sts::new("http://127.0.0.1:5000").unwrap();
        assert_eq!((s.host.as_str(), s.path.as_str(), s.timeout), ("127.0.0.1:5000", "/", TIMEOUT));
        let s = Sts::new("http://localhost:5000/sts/").unwrap();
        assert_eq!((s.host.as_str(), s.path.as_str()), ("localhost:5000", "/sts/"));
        for bad in ["https://sts.amazonaws.com", "127.0.0.1:5000", "http://", "http:///x", ""] {
            assert!(Sts::new(bad).is_err(), "{bad}");
        }
    }
}
