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
        Client::to(api.addr()).await
    }

    async fn to(addr: SocketAddr) -> Client {
        let (r, w) = TcpStream::connect(addr).await.unwrap().into_split();
        Client { r: BufReader::new(r), w }
    }

    async fn send(&mut self, method: &str, path: &str, body: &[u8]) {
        self.send_with(method, path, &[], body).await
    }

    async fn send_with(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: local\r\nContent-Length: {}\r\n", body.len());
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        self.w.write_all(head.as_bytes()).await.unwrap();
        self.w.write_all(body).await.unwrap();
    }

    async fn reply(&mut self) -> Reply {
        let message = read_message(&mut self.r, false).await.unwrap().expect("a reply");
        Reply { status: message.status(), message }
    }

    async fn call(&mut self, method: &str, path: &str, body: &[u8]) -> Reply {
        self.call_with(method, path, &[], body).await
    }

    async fn call_with(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        self.send_with(method, path, headers, body).await;
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

// Lambda's Invoke path, on one RuntimeApi and through the router.

/// Plays the function in-process for `n` invocations: `answer` turns each event into what the
/// function posts. Returns the request ids it was handed.
async fn play(api: &RuntimeApi, n: usize, answer: impl Fn(Value) -> (Kind, Value)) -> Vec<String> {
    let mut f = Client::connect(api).await;
    let mut ids = Vec::new();
    for _ in 0..n {
        let next = f.call("GET", &next_path(), b"").await;
        let id = next.header("Lambda-Runtime-Aws-Request-Id").unwrap().to_string();
        let (kind, body) = answer(next.json());
        let endpoint = if kind == Kind::Response { "response" } else { "error" };
        let path = format!("{RUNTIME_PATH}/invocation/{id}/{endpoint}");
        assert_eq!(f.call("POST", &path, body.to_string().as_bytes()).await.status, 202);
        ids.push(id);
    }
    ids
}

/// Doubles `n`, or fails with a `Negative` error for a negative one.
fn double(event: Value) -> (Kind, Value) {
    let n = event["n"].as_i64().unwrap();
    if n < 0 {
        (Kind::Error, json!({"errorType": "Negative", "errorMessage": format!("{n}")}))
    } else {
        (Kind::Response, json!({"double": n * 2}))
    }
}

/// A RuntimeApi for function `name` in eu-west-1.
async fn named(name: &str) -> RuntimeApi {
    let config = Config { function_arn: function_arn("eu-west-1", name), ..Config::default() };
    RuntimeApi::start(config).await.unwrap()
}

const INVOCATION_TYPE: &str = "X-Amz-Invocation-Type";

#[test]
fn invoke_paths_are_percent_encoded() {
    assert_eq!(invoke::invoke_path("fn"), "/2015-03-31/functions/fn/invocations");
    assert_eq!(
        invoke::invoke_path("arn:aws:lambda:eu-west-1:123456789012:function:fn:$LATEST"),
        "/2015-03-31/functions/arn%3Aaws%3Alambda%3Aeu-west-1%3A123456789012%3Afunction%3Afn%3A%24LATEST/invocations"
    );
}

#[tokio::test]
async fn lambda_invoke_by_name_answers_the_response() {
    let api = named("fn").await;
    let caller = async {
        let mut c = Client::connect(&api).await;
        c.call("POST", &invoke::invoke_path("fn"), br#"{"n": 21}"#).await
    };
    let (ok, ids) = tokio::join!(caller, play(&api, 1, double));
    assert_eq!((ok.status, ok.json()), (200, json!({"double": 42})));
    assert_eq!(ok.header("X-Amz-Executed-Version"), Some("$LATEST"));
    assert_eq!(ok.header("X-Amz-Function-Error"), None);
    // The Invoke's request id is the invocation's, as the function saw it.
    assert_eq!(ok.header("x-amzn-RequestId"), Some(ids[0].as_str()));
}

#[tokio::test]
async fn lambda_invoke_accepts_the_arn_the_partial_arn_and_latest() {
    let api = named("fn").await;
    let arn = function_arn("eu-west-1", "fn");
    let paths = [
        invoke::invoke_path(&arn),
        invoke::invoke_path(&format!("{arn}:$LATEST")),
        invoke::invoke_path("fn:$LATEST"),
        invoke::invoke_path("123456789012:function:fn"),
        format!("{}?Qualifier=%24LATEST", invoke::invoke_path("fn")),
    ];
    let caller = async {
        let mut c = Client::connect(&api).await;
        let mut replies = Vec::new();
        for (i, path) in paths.iter().enumerate() {
            replies.push(c.call("POST", path, json!({"n": i}).to_string().as_bytes()).await);
        }
        replies
    };
    let (replies, _) = tokio::join!(caller, play(&api, paths.len(), double));
    for (i, (r, path)) in replies.iter().zip(&paths).enumerate() {
        assert_eq!((r.status, r.json()), (200, json!({"double": i * 2})), "{path}");
    }
}

#[tokio::test]
async fn lambda_invoke_of_another_function_is_resource_not_found() {
    let api = named("fn").await;
    let mut c = Client::connect(&api).await;
    let not_found = |arn: &str| json!({"Type": "User", "Message": format!("Function not found: {arn}")});
    for (name, arn) in [
        ("other", "arn:aws:lambda:eu-west-1:123456789012:function:other"),
        ("arn:aws:lambda:us-east-1:123456789012:function:fn", "arn:aws:lambda:us-east-1:123456789012:function:fn"),
        ("arn:aws:lambda:eu-west-1:210987654321:function:fn", "arn:aws:lambda:eu-west-1:210987654321:function:fn"),
        ("fn:1", "arn:aws:lambda:eu-west-1:123456789012:function:fn:1"),
        ("fn:live", "arn:aws:lambda:eu-west-1:123456789012:function:fn:live"),
    ] {
        let r = c.call("POST", &invoke::invoke_path(name), b"{}").await;
        assert_eq!(r.status, 404, "{name}");
        assert_eq!(r.header("x-amzn-ErrorType"), Some("ResourceNotFoundException"), "{name}");
        assert_eq!(r.json(), not_found(arn), "{name}");
    }
    let r = c.call("POST", &format!("{}?Qualifier=2", invoke::invoke_path("fn")), b"{}").await;
    assert_eq!((r.status, r.json()), (404, not_found("arn:aws:lambda:eu-west-1:123456789012:function:fn:2")));
    // A bare name is looked up in the region the request was signed for, as at Lambda's endpoint.
    let auth = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261203/us-west-2/lambda/aws4_request, \
                SignedHeaders=host;x-amz-date, Signature=abc";
    let r = c.call_with("POST", &invoke::invoke_path("other"), &[("Authorization", auth)], b"{}").await;
    assert_eq!((r.status, r.json()), (404, not_found("arn:aws:lambda:us-west-2:123456789012:function:other")));
    // Nothing was queued: a function asking now waits.
    let mut f = waiting(&api, 0).await;
    assert!(tokio::time::timeout(Duration::from_millis(200), f.reply()).await.is_err());
    assert!(api.handed_out().is_empty());
}

#[tokio::test]
async fn lambda_invoke_reports_a_function_error_with_200() {
    let api = named("fn").await;
    let caller = async {
        let mut c = Client::connect(&api).await;
        c.call("POST", &invoke::invoke_path("fn"), br#"{"n": -3}"#).await
    };
    let (r, _) = tokio::join!(caller, play(&api, 1, double));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("X-Amz-Function-Error"), Some("Unhandled"));
    assert_eq!(r.header("X-Amz-Executed-Version"), Some("$LATEST"));
    assert_eq!(r.json(), json!({"errorType": "Negative", "errorMessage": "-3"}));
}

#[tokio::test]
async fn lambda_invoke_times_out_like_lambda() {
    let config = Config {
        function_arn: function_arn("eu-west-1", "fn"),
        timeout: Duration::from_millis(300),
        ..Config::default()
    };
    let api = RuntimeApi::start(config).await.unwrap();
    let mut c = Client::connect(&api).await;
    let r = c.call("POST", &invoke::invoke_path("fn"), b"{}").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("X-Amz-Function-Error"), Some("Unhandled"));
    let id = r.header("x-amzn-RequestId").unwrap();
    assert_eq!(
        r.json(),
        json!({"errorType": "Sandbox.Timedout", "errorMessage": format!("RequestId: {id} Error: Task timed out after 0.30 seconds")})
    );
    // Withdrawn: a function that asks now gets nothing.
    let mut f = waiting(&api, 0).await;
    assert!(tokio::time::timeout(Duration::from_millis(300), f.reply()).await.is_err());
    assert!(api.handed_out().is_empty());
}

#[tokio::test]
async fn lambda_invoke_event_is_queued_and_answered_202() {
    let api = named("fn").await;
    let mut c = Client::connect(&api).await;
    let r = c.call_with("POST", &invoke::invoke_path("fn"), &[(INVOCATION_TYPE, "Event")], br#"{"n": 4}"#).await;
    assert_eq!(r.status, 202);
    assert!(r.message.body.is_empty());
    let id = r.header("x-amzn-RequestId").unwrap().to_string();
    // Answered before the function ran; it runs afterwards.
    assert!(api.handed_out().is_empty());
    assert_eq!(play(&api, 1, double).await, vec![id.clone()]);
    assert_eq!(api.wait_outcome(&id, WAIT).await, Some(Outcome::Response(json!({"double": 8}))));
}

#[tokio::test]
async fn lambda_invoke_dry_run_is_204_and_runs_nothing() {
    let api = named("fn").await;
    let mut c = Client::connect(&api).await;
    let r = c.call_with("POST", &invoke::invoke_path("fn"), &[(INVOCATION_TYPE, "DryRun")], b"{}").await;
    assert_eq!(r.status, 204);
    assert!(r.message.body.is_empty());
    // DryRun still checks the name.
    let r = c.call_with("POST", &invoke::invoke_path("nope"), &[(INVOCATION_TYPE, "DryRun")], b"{}").await;
    assert_eq!(r.status, 404);
    let r = c.call_with("POST", &invoke::invoke_path("fn"), &[(INVOCATION_TYPE, "Later")], b"{}").await;
    assert_eq!((r.status, r.header("x-amzn-ErrorType")), (400, Some("InvalidParameterValueException")));
    let mut f = waiting(&api, 0).await;
    assert!(tokio::time::timeout(Duration::from_millis(200), f.reply()).await.is_err());
    assert!(api.handed_out().is_empty());
}

#[tokio::test]
async fn the_router_forwards_each_function_to_its_runtime_api() {
    let (alpha, beta) = (named("alpha").await, named("beta").await);
    let routes = BTreeMap::from([("alpha".to_string(), alpha.url()), ("beta".to_string(), beta.url())]);
    let router = InvokeRouter::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), routes).await.unwrap();
    assert!(router.url().starts_with("http://127.0.0.1:"));
    let tag = |name: &'static str| move |event: Value| (Kind::Response, json!({"from": name, "event": event}));
    let caller = async {
        let mut c = Client::to(router.addr()).await;
        let a = c.call("POST", &invoke::invoke_path("alpha"), br#"{"n": 1}"#).await;
        let b = c.call("POST", &invoke::invoke_path(&function_arn("eu-west-1", "beta")), br#"{"n": 2}"#).await;
        let dry = c.call_with("POST", &invoke::invoke_path("beta"), &[(INVOCATION_TYPE, "DryRun")], b"{}").await;
        let event = c.call_with("POST", &invoke::invoke_path("alpha"), &[(INVOCATION_TYPE, "Event")], b"{}").await;
        // The route is by name; the function's own server still checks the region.
        let wrong = c.call("POST", &invoke::invoke_path(&function_arn("us-east-1", "beta")), b"{}").await;
        (a, b, dry, event, wrong)
    };
    let ((a, b, dry, event, wrong), alpha_ids, beta_ids) =
        tokio::join!(caller, play(&alpha, 2, tag("alpha")), play(&beta, 1, tag("beta")));
    assert_eq!((a.status, a.json()), (200, json!({"from": "alpha", "event": {"n": 1}})));
    assert_eq!(a.header("x-amzn-RequestId"), Some(alpha_ids[0].as_str()));
    assert_eq!(a.header("X-Amz-Executed-Version"), Some("$LATEST"));
    assert_eq!((b.status, b.json()), (200, json!({"from": "beta", "event": {"n": 2}})));
    assert_eq!(b.header("x-amzn-RequestId"), Some(beta_ids[0].as_str()));
    assert_eq!(dry.status, 204);
    assert_eq!(event.status, 202);
    assert_eq!(event.header("x-amzn-RequestId"), Some(alpha_ids[1].as_str()));
    assert_eq!((wrong.status, wrong.header("x-amzn-ErrorType")), (404, Some("ResourceNotFoundException")));
    assert_eq!(alpha.handed_out(), alpha_ids);
    assert_eq!(beta.handed_out(), beta_ids);
}

#[tokio::test]
async fn the_router_passes_a_function_error_through() {
    let api = named("fn").await;
    let routes = BTreeMap::from([("fn".to_string(), api.url())]);
    let router = InvokeRouter::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), routes).await.unwrap();
    let caller = async {
        let mut c = Client::to(router.addr()).await;
        c.call("POST", &invoke::invoke_path("fn"), br#"{"n": -1}"#).await
    };
    let (r, _) = tokio::join!(caller, play(&api, 1, double));
    assert_eq!((r.status, r.header("X-Amz-Function-Error")), (200, Some("Unhandled")));
    assert_eq!(r.json()["errorType"], json!("Negative"));
}

#[tokio::test]
async fn the_router_answers_unknown_names_and_paths_itself() {
    let api = named("fn").await;
    let gone = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let gone_url = format!("http://{}", gone.local_addr().unwrap());
    drop(gone);
    let routes = BTreeMap::from([("fn".to_string(), api.url()), ("gone".to_string(), gone_url)]);
    let router = InvokeRouter::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), routes).await.unwrap();
    let mut c = Client::to(router.addr()).await;
    let r = c.call("POST", &invoke::invoke_path("other"), b"{}").await;
    assert_eq!(r.status, 404);
    assert_eq!(r.header("x-amzn-ErrorType"), Some("ResourceNotFoundException"));
    assert_eq!(
        r.json(),
        json!({"Type": "User", "Message": "Function not found: arn:aws:lambda:us-east-1:123456789012:function:other"})
    );
    let r = c.call("POST", &invoke::invoke_path("123456789012:function:other:$LATEST"), b"{}").await;
    assert_eq!(
        r.json()["Message"],
        json!("Function not found: arn:aws:lambda:us-east-1:123456789012:function:other:$LATEST")
    );
    // A function whose server is gone: Lambda could not run it.
    let r = c.call("POST", &invoke::invoke_path("gone"), b"{}").await;
    assert_eq!((r.status, r.header("x-amzn-ErrorType")), (500, Some("ServiceException")));
    for (method, path) in
        [("GET", invoke::invoke_path("fn")), ("POST", "/invoke".to_string()), ("POST", "/".to_string())]
    {
        assert_eq!(c.call(method, &path, b"").await.status, 404, "{method} {path}");
    }
    assert!(api.handed_out().is_empty());
}
