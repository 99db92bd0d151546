//! Round trips through the runtime API: with an in-process HTTP client playing the function, and
//! with a real child process (a shell script calling curl) started by `RuntimeApi::spawn`.

use super::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WAIT: Duration = Duration::from_secs(20);

/// A keep-alive HTTP/1.1 client on one connection, like the function's own.
struct Client {
    r: BufReader<OwnedReadHalf>,
    w: tokio::net::tcp::OwnedWriteHalf,
}

/// A reply, read with the shared HTTP/1.1 reader.
struct Reply {
    status: u16,
    message: Message,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.message.header(&name.to_ascii_lowercase())
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.message.body).unwrap()
    }
}

impl Client {
    async fn connect(api: &RuntimeApi) -> Client {
        let (r, w) = TcpStream::connect(api.addr()).await.unwrap().into_split();
        Client { r: BufReader::new(r), w }
    }

    async fn send(&mut self, method: &str, path: &str, body: &[u8]) {
        let head = format!("{method} {path} HTTP/1.1\r\nHost: local\r\nContent-Length: {}\r\n\r\n", body.len());
        self.w.write_all(head.as_bytes()).await.unwrap();
        self.w.write_all(body).await.unwrap();
    }

    async fn reply(&mut self) -> Reply {
        let message = read_message(&mut self.r, false).await.unwrap().expect("a reply");
        Reply { status: message.status(), message }
    }

    async fn call(&mut self, method: &str, path: &str, body: &[u8]) -> Reply {
        self.send(method, path, body).await;
        tokio::time::timeout(WAIT, self.reply()).await.expect("a reply in time")
    }
}

fn next_path() -> String {
    format!("{RUNTIME_PATH}/invocation/next")
}

async fn api() -> RuntimeApi {
    RuntimeApi::start(Config::default()).await.unwrap()
}

/// Events received so far, without waiting.
fn drain(rx: &mut mpsc::UnboundedReceiver<Event>) -> Vec<Event> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

#[tokio::test]
async fn next_and_response_round_trip() {
    let config =
        Config { function_arn: function_arn("eu-west-1", "fn"), timeout: Duration::from_secs(60), ..Config::default() };
    let api = RuntimeApi::start(config).await.unwrap();
    let mut events = api.events();
    let event = json!({"source": "capblock.schedule", "time": "2026-12-03T00:00:00Z"});
    let id = api.invoke(event.clone());

    let mut f = Client::connect(&api).await;
    let next = f.call("GET", &next_path(), b"").await;
    assert_eq!(next.status, 200);
    assert_eq!(next.json(), event);
    assert_eq!(next.header("Lambda-Runtime-Aws-Request-Id"), Some(id.as_str()));
    assert_eq!(
        next.header("Lambda-Runtime-Invoked-Function-Arn"),
        Some("arn:aws:lambda:eu-west-1:123456789012:function:fn")
    );
    let deadline: u128 = next.header("Lambda-Runtime-Deadline-Ms").unwrap().parse().unwrap();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis();
    assert!(deadline > now + 55_000 && deadline <= now + 60_000, "deadline {deadline}, now {now}");
    let trace = next.header("Lambda-Runtime-Trace-Id").unwrap();
    assert!(trace.starts_with("Root=1-") && trace.len() == "Root=1-".len() + 8 + 1 + 24, "{trace}");
    assert_eq!(api.handed_out(), vec![id.clone()]);
    assert!(api.answer(&id).is_none());

    let posted = f.call("POST", &format!("{RUNTIME_PATH}/invocation/{id}/response"), br#"{"bought":1}"#).await;
    assert_eq!(posted.status, 202);
    let a = api.wait_answer(&id, WAIT).await.expect("answered");
    assert_eq!((a.kind, a.json()), (Kind::Response, json!({"bought": 1})));
    assert_eq!(api.outcome(&id), Some(Outcome::Response(json!({"bought": 1}))));
    // Queued before the function asked: it took the invocation the moment it asked.
    assert_eq!(Some(a.taken_at), api.first_asked());
    assert!(a.answered_at >= a.taken_at);
    assert_eq!(a.handler_time(), a.answered_at - a.taken_at);

    let seen = drain(&mut events);
    assert!(
        matches!(&seen[..], [Event::Asked { at: asked }, Event::Taken { request_id, at: taken }, Event::Answered(b)]
        if request_id == &id && asked == taken && b.request_id == id && b.answered_at == a.answered_at),
        "{seen:?}"
    );
}

#[tokio::test]
async fn error_round_trip() {
    let api = api().await;
    let id = api.invoke(json!({"n": 1}));
    let mut f = Client::connect(&api).await;
    assert_eq!(f.call("GET", &next_path(), b"").await.status, 200);
    let doc = json!({"errorType": "Boom", "errorMessage": "it broke"});
    let posted = f.call("POST", &format!("{RUNTIME_PATH}/invocation/{id}/error"), doc.to_string().as_bytes()).await;
    assert_eq!(posted.status, 202);
    assert_eq!(api.wait_outcome(&id, WAIT).await, Some(Outcome::Error(doc)));
    assert_eq!(api.answer(&id).unwrap().kind, Kind::Error);
}

#[tokio::test]
async fn a_body_that_is_not_json_is_kept_as_text() {
    let api = api().await;
    let id = api.invoke_bytes("plain event");
    let mut f = Client::connect(&api).await;
    assert_eq!(f.call("GET", &next_path(), b"").await.message.body, b"plain event");
    f.call("POST", &format!("{RUNTIME_PATH}/invocation/{id}/response"), b"not json").await;
    assert_eq!(api.outcome(&id), Some(Outcome::Response(Value::String("not json".into()))));
}

#[tokio::test]
async fn init_error_is_recorded() {
    let api = api().await;
    let mut events = api.events();
    let mut f = Client::connect(&api).await;
    let posted = f.call("POST", &format!("{RUNTIME_PATH}/init/error"), br#"{"errorType":"Config"}"#).await;
    assert_eq!(posted.status, 202);
    assert_eq!(api.init_errors(), vec![r#"{"errorType":"Config"}"#.to_string()]);
    let seen = drain(&mut events);
    assert!(matches!(&seen[..], [Event::InitError { body, .. }] if body == r#"{"errorType":"Config"}"#), "{seen:?}");
}

/// A function that asked for its next invocation `ms` milliseconds ago, still waiting.
async fn waiting(api: &RuntimeApi, ms: u64) -> Client {
    let mut f = Client::connect(api).await;
    f.send("GET", &next_path(), b"").await;
    tokio::time::sleep(Duration::from_millis(ms)).await;
    f
}

#[tokio::test]
async fn next_waits_for_an_invocation() {
    let api = api().await;
    let mut f = waiting(&api, 200).await;
    assert!(api.handed_out().is_empty());
    let asked = api.first_asked().expect("the GET arrived");
    let id = api.invoke(json!({"late": true}));
    let next = tokio::time::timeout(WAIT, f.reply()).await.unwrap();
    assert_eq!((next.status, next.json()), (200, json!({"late": true})));
    f.call("POST", &format!("{RUNTIME_PATH}/invocation/{id}/response"), b"{}").await;
    let a = api.answer(&id).unwrap();
    // Taken when it was queued, not when the function asked.
    assert!(a.taken_at >= asked + Duration::from_millis(200), "{:?} after asking", a.taken_at - asked);
}

#[tokio::test]
async fn a_caller_that_hangs_up_takes_nothing() {
    let api = api().await;
    let dead = waiting(&api, 100).await;
    drop(dead); // e.g. the function was killed while it waited
    tokio::time::sleep(Duration::from_millis(100)).await;
    let id = api.invoke(json!({"n": 2}));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(api.handed_out().is_empty(), "{:?}", api.handed_out());
    let mut f = Client::connect(&api).await;
    let next = f.call("GET", &next_path(), b"").await;
    assert_eq!(next.header("Lambda-Runtime-Aws-Request-Id"), Some(id.as_str()));
    assert_eq!(api.handed_out(), vec![id]);
}

#[tokio::test]
async fn invocations_are_handed_out_in_order() {
    let api = api().await;
    let ids: Vec<String> = (0..3).map(|i| api.invoke(json!({"i": i}))).collect();
    let mut f = Client::connect(&api).await;
    for (i, id) in ids.iter().enumerate() {
        let next = f.call("GET", &next_path(), b"").await;
        assert_eq!((next.header("Lambda-Runtime-Aws-Request-Id"), next.json()), (Some(id.as_str()), json!({"i": i})));
        f.call("POST", &format!("{RUNTIME_PATH}/invocation/{id}/response"), format!("{i}").as_bytes()).await;
    }
    assert_eq!(api.handed_out(), ids);
    for (i, id) in ids.iter().enumerate() {
        assert_eq!(api.outcome(id), Some(Outcome::Response(json!(i))));
    }
}

#[tokio::test]
async fn a_chunked_answer_is_read_whole() {
    let api = api().await;
    let id = api.invoke(json!({}));
    let mut f = Client::connect(&api).await;
    f.call("GET", &next_path(), b"").await;
    let req = format!(
        "POST {RUNTIME_PATH}/invocation/{id}/response HTTP/1.1\r\nHost: local\r\nTransfer-Encoding: chunked\r\n\r\n\
         5\r\n{{\"a\":\r\n3\r\n42}}\r\n0\r\n\r\n"
    );
    f.w.write_all(req.as_bytes()).await.unwrap();
    assert_eq!(f.reply().await.status, 202);
    assert_eq!(api.outcome(&id), Some(Outcome::Response(json!({"a": 42}))));
}

#[tokio::test]
async fn invoke_endpoint_returns_the_answer() {
    let api = api().await;
    let function = async {
        let mut f = Client::connect(&api).await;
        for _ in 0..2 {
            let next = f.call("GET", &next_path(), b"").await;
            let id = next.header("Lambda-Runtime-Aws-Request-Id").unwrap().to_string();
            let n = next.json()["n"].as_i64().unwrap();
            if n < 0 {
                let doc = json!({"errorType": "Negative", "errorMessage": format!("{n}")});
                f.call("POST", &format!("{RUNTIME_PATH}/invocation/{id}/error"), doc.to_string().as_bytes()).await;
            } else {
                f.call(
                    "POST",
                    &format!("{RUNTIME_PATH}/invocation/{id}/response"),
                    json!({"double": n * 2}).to_string().as_bytes(),
                )
                .await;
            }
        }
    };
    let caller = async {
        let mut c = Client::connect(&api).await;
        let ok = c.call("POST", "/invoke", br#"{"n": 21}"#).await;
        let err = c.call("POST", "/invoke", br#"{"n": -1}"#).await;
        (ok, err)
    };
    let ((ok, err), ()) = tokio::join!(caller, function);
    assert_eq!((ok.status, ok.json()), (200, json!({"double": 42})));
    assert_eq!((err.status, err.json()["errorType"].clone()), (500, json!("Negative")));
    assert_eq!(api.handed_out().len(), 2);
}

#[tokio::test]
async fn invoke_endpoint_times_out_and_withdraws_the_invocation() {
    let config = Config { timeout: Duration::from_millis(300), ..Config::default() };
    let api = RuntimeApi::start(config).await.unwrap();
    let mut c = Client::connect(&api).await;
    let r = c.call("POST", "/invoke", b"{}").await;
    assert_eq!((r.status, r.json()["errorType"].clone()), (500, json!("Timeout")));
    // A function that asks now gets nothing (it waits).
    let mut f = waiting(&api, 0).await;
    assert!(tokio::time::timeout(Duration::from_millis(300), f.reply()).await.is_err());
    assert!(api.handed_out().is_empty());
}

#[tokio::test]
async fn unknown_paths_are_404() {
    let api = api().await;
    let mut c = Client::connect(&api).await;
    for (method, path) in [
        ("GET", "/".to_string()),
        ("GET", format!("{RUNTIME_PATH}/invocation/x/response")),
        ("POST", format!("{RUNTIME_PATH}/invocation/x/other")),
        ("POST", format!("{RUNTIME_PATH}/invocation//response")),
        ("GET", "/invoke".to_string()),
    ] {
        assert_eq!(c.call(method, &path, b"").await.status, 404, "{method} {path}");
    }
    assert!(api.handed_out().is_empty() && api.init_errors().is_empty());
}

#[tokio::test]
async fn dropping_the_api_closes_waiting_connections() {
    let api = api().await;
    let mut f = waiting(&api, 100).await;
    drop(api);
    let mut rest = Vec::new();
    let read = tokio::time::timeout(WAIT, f.r.read_to_end(&mut rest)).await.expect("closed");
    assert!(read.is_err() || rest.is_empty(), "{rest:?}");
}

/// A fake function: a shell script speaking the Runtime API with curl. It answers each event
/// with the event and what it saw in its environment, or with an error if the event says
/// `"fail"`; with `INIT_FAIL` set it reports an init error and exits instead.
const FAKE_FUNCTION: &str = r#"
set -eu
api="http://$AWS_LAMBDA_RUNTIME_API/2018-06-01/runtime"
if [ -n "${INIT_FAIL:-}" ]; then
    curl -sS -o /dev/null --data-binary '{"errorType":"Init","errorMessage":"no config"}' "$api/init/error"
    exit 3
fi
headers=$(mktemp)
while :; do
    event=$(curl -sS -D "$headers" "$api/invocation/next")
    id=$(grep -i '^lambda-runtime-aws-request-id:' "$headers" | cut -d: -f2 | tr -d ' \r')
    arn=$(grep -i '^lambda-runtime-invoked-function-arn:' "$headers" | cut -d: -f2- | tr -d ' \r')
    case "$event" in
    *fail*)
        curl -sS -o /dev/null --data-binary '{"errorType":"Asked","errorMessage":"asked to fail"}' "$api/invocation/$id/error"
        ;;
    *)
        curl -sS -o /dev/null --data-binary "{\"event\":$event,\"name\":\"$AWS_LAMBDA_FUNCTION_NAME\",\"memory\":\"$AWS_LAMBDA_FUNCTION_MEMORY_SIZE\",\"group\":\"$AWS_LAMBDA_LOG_GROUP_NAME\",\"extra\":\"${EXTRA:-}\",\"arg\":\"$1\",\"arn\":\"$arn\"}" "$api/invocation/$id/response"
        ;;
    esac
done
"#;

fn fake_function() -> Function {
    Function::new("/bin/sh").args(["-c", FAKE_FUNCTION, "fake", "the-arg"]).name("fake").stdout(Stdio::null())
}

#[tokio::test]
async fn a_spawned_function_round_trip() {
    let api = api().await;
    let mut events = api.events();
    let mut child = api.spawn(fake_function().memory_mb(512).env("EXTRA", "on top")).expect("sh");
    let ok = api.invoke(json!({"n": 1}));
    let fail = api.invoke(json!({"fail": true}));
    let a = api.wait_answer(&ok, WAIT).await.expect("an answer");
    assert_eq!(
        a.json(),
        json!({"event": {"n": 1}, "name": "fake", "memory": "512", "group": "/aws/lambda/fake", "extra": "on top",
               "arg": "the-arg", "arn": "arn:aws:lambda:us-east-1:123456789012:function:capblock-local"})
    );
    assert_eq!(
        api.wait_outcome(&fail, WAIT).await,
        Some(Outcome::Error(json!({"errorType": "Asked", "errorMessage": "asked to fail"})))
    );
    assert_eq!(api.handed_out(), vec![ok.clone(), fail.clone()]);
    let first = events.recv().await.unwrap();
    assert!(matches!(first, Event::Asked { at } if Some(at) == api.first_asked()), "{first:?}");
    child.kill().await.unwrap();
}

#[tokio::test]
async fn a_spawned_function_that_fails_init() {
    let api = api().await;
    let mut events = api.events();
    let mut child = api.spawn(fake_function().env("INIT_FAIL", "1")).expect("sh");
    let status = tokio::time::timeout(WAIT, child.wait()).await.unwrap().unwrap();
    assert_eq!(status.code(), Some(3));
    assert_eq!(api.init_errors(), vec![r#"{"errorType":"Init","errorMessage":"no config"}"#.to_string()]);
    assert!(matches!(events.recv().await, Some(Event::InitError { .. })));
}

#[tokio::test]
async fn env_clear_starts_from_nothing() {
    let api = api().await;
    // Only the Lambda variables and the function's own: HOME is not inherited.
    let script = "echo \"${HOME:-unset} $AWS_LAMBDA_FUNCTION_NAME $AWS_LAMBDA_FUNCTION_MEMORY_SIZE \
                  $AWS_LAMBDA_LOG_GROUP_NAME $AWS_LAMBDA_LOG_STREAM_NAME $MINE $AWS_LAMBDA_RUNTIME_API\"";
    let f = Function::new("/bin/sh")
        .args(["-c", script])
        .env_clear()
        .env("MINE", "mine")
        .log_group("bench")
        .log_stream("bench")
        .stdout(Stdio::piped());
    let out = api.spawn(f).expect("sh").wait_with_output().await.unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>().join(" "),
        format!("unset sh 128 bench bench mine {}", api.runtime_api())
    );
}
