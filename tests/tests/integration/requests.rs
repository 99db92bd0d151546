//! People's requests on the local stack: a requester files one with the CLI (under moto's STS
//! identity), a lead approves it with a typed `yes` on a terminal, the scan finds an offering in
//! the window and buys it once; each step is published in the request's own Slack thread and shown
//! on the team page (`capblock page`, the request's row and state); a second approval or a replayed
//! request item buys nothing, and an item stored under another requester's key is refused by name.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::AttributeValue;
use capblock_shared::app::purchase::Outcome;
use capblock_shared::domain::request::{TeamApproval, parse_team_approvals};
use capblock_shared::domain::rule::Mode;
use capblock_shared::domain::stack::{StackSettings, StoredSettings};
use capblock_shared::ports::{RequestStore, SettingsStore};
use capblock_tests::{Rig, ScenarioToml, T0, binary_env, usd};

const STACK: &str = "capblock-requests-test";

/// us-west-2 sells p5 at 2.75 per GPU-hour for the day from T0 + 2 days.
fn market() -> String {
    ScenarioToml::new(7, T0).payment("succeed", None).p5("us-west-2", &[2], "2.75").build()
}

struct Stack {
    rig: Rig,
    /// The CloudFormation stack the CLI reads its TeamApprovals from.
    deployed: String,
    teams: BTreeMap<String, TeamApproval>,
}

impl Stack {
    /// A live stack whose team research has 20,000 a month and whose approver is the caller
    /// moto's STS names (the lead, here the same credentials as the requester).
    async fn new(name: &str) -> Stack {
        Stack::led_by(name, None).await
    }

    /// The same stack whose research lead is `lead` (None: the caller moto's STS names).
    async fn led_by(name: &str, lead: Option<&str>) -> Stack {
        let mut rig = Rig::paced(name, &market(), T0, STACK).await;
        rig.scan.stack.team_budgets = [("research".to_string(), usd("20000"))].into();
        let settings = StoredSettings {
            stack: StackSettings {
                name: STACK.into(),
                mode: Mode::Live,
                account_budget: Some(usd("100000")),
                team_budgets: rig.scan.stack.team_budgets.clone(),
            },
            alerts_topic: rig.aws.alerts_topic.clone(),
            written_at: capblock_tests::t0(),
        };
        rig.store.store_settings(&settings).await.unwrap();
        let caller = capblock_shared::aws::identity::caller(&rig.aws.sdk).await.unwrap().arn;
        let lead = lead.map_or(caller, str::to_string);
        let approvals = format!("research=0 {lead}");
        let deployed = deploy(&rig, &approvals).await;
        Stack { teams: parse_team_approvals(&approvals).unwrap(), rig, deployed }
    }

    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(program);
        cmd.envs(binary_env(&self.rig.sim, &self.rig.aws, STACK))
            .env("CAPBLOCK_STACK_NAME", &self.deployed)
            .env("CAPBLOCK_CONFIG", "/nonexistent/capblock-config.toml")
            .env_remove("CAPBLOCK_PROFILE")
            .env_remove("COLUMNS");
        cmd
    }

    /// Files a request for a day of one p5.48xlarge in us-west-2 under 3 USD for team research
    /// through the CLI; its id and what the CLI said.
    async fn file(&self, reason: &str, more: &[&str]) -> (String, String) {
        let mut args = vec![
            "request",
            "--type",
            "p5.48xlarge",
            "--count",
            "1",
            "--days",
            "1",
            "--region",
            "us-west-2",
            "--from",
            "2026-12-02",
            "--until",
            "2026-12-06",
            "--max-price",
            "3",
            "--team",
            "research",
            "--reason",
            reason,
        ];
        args.extend_from_slice(more);
        let (code, out, err) = self.capblock(&args).await;
        assert_eq!(code, 0, "{out}{err}");
        let id = out.split_whitespace().find(|w| w.starts_with("rq-")).expect("the id").to_string();
        (id, out)
    }

    /// The request's item as DynamoDB holds it, every attribute.
    async fn raw_item(&self, id: &str) -> std::collections::HashMap<String, AttributeValue> {
        let requester = self.rig.store.requests().await.unwrap()[0].keyed_requester.clone();
        aws_sdk_dynamodb::Client::new(&self.rig.aws.sdk)
            .get_item()
            .table_name(&self.rig.aws.table)
            .key("pk", AttributeValue::S(format!("REQUEST#{requester}")))
            .key("sk", AttributeValue::S(format!("REQUEST#{id}")))
            .send()
            .await
            .unwrap()
            .item
            .expect("the request's item")
    }

    async fn capblock(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.command(capblock_tests::runtime::binary("capblock")).args(args).output().await.unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into(),
            String::from_utf8_lossy(&out.stderr).into(),
        )
    }

    /// `capblock args` on a terminal (util-linux `script` gives it one), `typed` on its input.
    async fn on_a_terminal(&self, args: &[&str], typed: &str) -> (i32, String) {
        use tokio::io::AsyncWriteExt;
        let line = std::iter::once(capblock_tests::runtime::binary("capblock").display().to_string())
            .chain(args.iter().map(|a| a.to_string()))
            .collect::<Vec<_>>()
            .join(" ");
        let mut child = self
            .command("script")
            .args(["-qec", &line, "/dev/null"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(typed.as_bytes()).await.unwrap();
        drop(stdin);
        let out = child.wait_with_output().await.unwrap();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into())
    }

    /// The team page as `capblock page` writes it now (the deployed stack's TeamApprovals judging
    /// each request, as the scan does): request `id`'s row in its Requests section, and the
    /// summary's line on requests.
    async fn page_row(&self, id: &str) -> (String, String) {
        let file = std::env::temp_dir().join(format!("{}-{id}.html", self.deployed));
        let (code, out, err) = self.capblock(&["page", "--out", file.to_str().unwrap()]).await;
        assert_eq!(code, 0, "{out}{err}");
        let page = std::fs::read_to_string(&file).unwrap();
        std::fs::remove_file(&file).ok();
        let requests = &page[page.find("<section id=\"requests\"").expect("a Requests section")..];
        let requests = &requests[..requests.find("</section>").unwrap()];
        let at = requests.find(&format!("<td>{id}</td>")).unwrap_or_else(|| panic!("no row of {id}: {requests}"));
        let row = &requests[requests[..at].rfind("<tr>").unwrap()..];
        let row = row[..row.find("</tr>").unwrap()].to_string();
        let glance = &page[page.find("<dt>Requests</dt>").expect("the summary's line")..];
        (row, glance[..glance.find("</dd>").unwrap()].to_string())
    }

    async fn scan(&self) -> capblock_shared::app::scan::ScanReport {
        let s = self.rig.scanner(&self.rig.market, &self.rig.notifier, &self.rig.scan);
        s.run_with_requests(self.rig.now().into(), None, &self.teams).await.unwrap()
    }
}

/// A CloudFormation stack standing for the deployment: its table and its TeamApprovals.
async fn deploy(rig: &Rig, approvals: &str) -> String {
    let name = format!("capblock-rq-{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    let template = serde_json::json!({
        "Parameters": {
            "Mode": {"Type": "String", "Default": "live"},
            "AccountMonthlyBudget": {"Type": "String", "Default": "100000"},
            "TeamBudgets": {"Type": "String", "Default": "research=20000"},
            "TeamApprovals": {"Type": "String", "Default": ""},
        },
        "Resources": {"Alerts": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {"TableName": {"Value": rig.aws.table.as_str()}},
    });
    let param = |k: &str, v: &str| {
        aws_sdk_cloudformation::types::Parameter::builder().parameter_key(k).parameter_value(v).build()
    };
    aws_sdk_cloudformation::Client::new(&rig.aws.sdk)
        .create_stack()
        .stack_name(&name)
        .template_body(template.to_string())
        .parameters(param("TeamApprovals", approvals))
        .send()
        .await
        .expect("a CloudFormation stack on moto");
    name
}

/// The request's thread as Slack got it: each message's milestone, in order.
async fn thread(rig: &Rig, id: &str) -> Vec<String> {
    rig.aws
        .alerts()
        .await
        .into_iter()
        .filter(|m| m.attributes.get("capblock_thread").map(String::as_str) == Some(id))
        .map(|m| m.body["content"]["title"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_filed_approved_with_a_typed_yes_is_bought_once() {
    let s = Stack::new("requests-flow").await;
    let (id, out) = s.file("the ablation the reviewers asked for", &["--slack", "@ada"]).await;
    let filed = s.raw_item(&id).await;
    assert!(out.contains("At the list price (5.970 USD per accelerator-hour"), "{out}");
    assert!(out.contains("Team research's budget") && out.contains("room for the most it may cost"), "{out}");
    let requester = s.rig.store.requests().await.unwrap()[0].keyed_requester.clone();
    let lead = s.teams["research"].approvers[0].clone();
    // `capblock status` says who approves the team's requests, from the deployed TeamApprovals.
    let (code, out, err) = s.capblock(&["status"]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(&format!(
            "requests (TeamApprovals):\n  team research: approved on its own up to 0.00 USD; beyond it by {lead}\n"
        )),
        "{out}"
    );
    assert!(!out.contains("WARNING"), "{out}");
    // The page: filed, by Ada under her identity, for her reason, waiting for the team's lead.
    let (row, glance) = s.page_row(&id).await;
    assert!(row.contains(&format!("<td>@ada ({requester})</td>")), "{row}");
    assert!(row.contains("<td>the ablation the reviewers asked for</td>"), "{row}");
    assert!(row.contains("<span class=\"state r-filed\">filed</span>"), "{row}");
    assert!(row.contains(&format!("Waits for an approver of team research: {lead}.")), "{row}");
    assert!(glance.ends_with("1 open</a>: 1 waiting for approval, 0 approved and looked for; 0 closed: 0 bought, 0 expired, 0 rejected or cancelled"), "{glance}");

    // Without a terminal and without --yes, approving is refused; on one, `no` approves nothing.
    let (code, _, err) = s.capblock(&["requests", "approve", &id]).await;
    assert_eq!(code, 2, "{err}");
    let (code, said) = s.on_a_terminal(&["requests", "approve", &id], "no\n").await;
    assert_ne!(code, 0, "{said}");
    assert!(s.rig.store.decision(&id).await.unwrap().is_none());
    let (code, said) = s.on_a_terminal(&["requests", "approve", &id], "yes\n").await;
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("Fee: from about") && said.contains("TEAM#research"), "{said}");
    assert!(said.contains("Type `yes` to go on"), "{said}");
    let (row, _) = s.page_row(&id).await;
    assert!(row.contains("<span class=\"state r-approved\">approved</span>"), "{row}");
    assert!(row.contains(&format!("Approved by {lead}; the scan buys the first block")), "{row}");

    // A person's live scan leaves the request to the scheduled scan, and says so: one scan
    // buys requests, so a person's and the schedule's never both act on one approval.
    let (code, out, err) = s.capblock(&["scan", "--mode", "live", "--yes"]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("1 approved request(s) are not in this scan: people's requests are bought only by the stack's scheduled scan"), "{err}");
    assert!(s.rig.sim.purchases().await.is_empty(), "a person's scan buys no request");

    let report = s.scan().await;
    let bought = report.outcomes.iter().find(|o| o.rule_id.starts_with("request-")).expect("asked");
    assert!(matches!(bought.action, Some(Outcome::Bought { .. })), "{:?}", bought.action);
    assert_eq!(s.rig.sim.purchases().await.len(), 1);
    let reservation = s.rig.sim.purchases().await[0]["reservation_id"].as_str().unwrap().to_string();
    let (row, glance) = s.page_row(&id).await;
    assert!(row.contains("<span class=\"state r-bought\">bought</span>"), "{row}");
    assert!(row.contains(&format!("Bought {reservation} (1 × p5.48xlarge in us-west-2, 528.00 USD)")), "{row}");
    assert!(glance.ends_with("0 open</a>: 0 waiting for approval, 0 approved and looked for; 1 closed: 1 bought, 0 expired, 0 rejected or cancelled"), "{glance}");
    // The next request's quota line counts the block bought as held in us-west-2's p5 quota
    // (moto's Service Quotas names no Capacity Block quota: the line says so, and what is held).
    let (_, next) = s.file("the next one", &[]).await;
    assert!(next.contains("Quota: Service Quotas does not say for p5 in us-west-2 (EC2's refusals will); 192 vCPUs held (1 block(s) held or being bought) there; this request needs 192 vCPUs"), "{next}");

    // A second approval is refused; the request's item replayed (written back as it was filed)
    // buys nothing: its approval was consumed by the purchase.
    let (code, said) = s.on_a_terminal(&["requests", "approve", &id], "yes\n").await;
    assert_ne!(code, 0, "{said}");
    aws_sdk_dynamodb::Client::new(&s.rig.aws.sdk)
        .put_item()
        .table_name(&s.rig.aws.table)
        .set_item(Some(filed))
        .send()
        .await
        .unwrap();
    s.rig.advance_minutes(10).await;
    s.scan().await;
    assert_eq!(s.rig.sim.purchases().await.len(), 1, "one approval buys once");
    assert!(s.page_row(&id).await.0.contains("r-bought"), "still bought once");
    let titles = thread(&s.rig, &id).await;
    for step in ["asks for capacity", "is approved", "is bought"] {
        assert!(titles.iter().any(|t| t.contains(step)), "{step}: {titles:?}");
    }
    assert!(titles.iter().all(|t| t.starts_with("@ada") || t.contains(&id)), "{titles:?}");
}

/// An item written under another requester's key (what a writer without the requesters'
/// policy could put there) is refused by name, and nothing is decided or bought for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_item_under_another_requesters_key_is_refused_by_name() {
    let s = Stack::new("requests-forged").await;
    let (id, _) = s.file("forged below", &[]).await;
    let ddb = aws_sdk_dynamodb::Client::new(&s.rig.aws.sdk);
    let mut item = s.raw_item(&id).await;
    // Moved under Eve's key, still naming the filer: the index shows both.
    item.insert("pk".into(), AttributeValue::S("REQUEST#AROAEVE:eve".into()));
    ddb.delete_item()
        .table_name(&s.rig.aws.table)
        .key("pk", AttributeValue::S(format!("REQUEST#{}", s.rig.store.requests().await.unwrap()[0].keyed_requester)))
        .key("sk", AttributeValue::S(format!("REQUEST#{id}")))
        .send()
        .await
        .unwrap();
    ddb.put_item().table_name(&s.rig.aws.table).set_item(Some(item)).send().await.unwrap();
    let report = s.scan().await.requests.unwrap();
    let refused = &report.refused[&id];
    assert!(refused.contains("is stored under \"AROAEVE:eve\": forged"), "{refused}");
    assert!(s.rig.store.decision(&id).await.unwrap().is_none());
    assert!(s.rig.sim.purchases().await.is_empty());
    // The page shows it refused, and why, as the scan read it.
    let (row, glance) = s.page_row(&id).await;
    assert!(row.contains("<span class=\"state r-refused\">refused</span>"), "{row}");
    assert!(row.contains("The scan refuses its item and buys nothing for it: request"), "{row}");
    assert!(row.contains("is stored under &quot;AROAEVE:eve&quot;: forged"), "{row}");
    assert!(glance.ends_with("1 closed: 0 bought, 0 expired, 0 rejected or cancelled, 1 refused"), "{glance}");
}

/// A requester whom TeamApprovals does not name lists and shows her own requests only (read by
/// her own key, which is all the requesters' policy lets her read; infra/deploy/
/// test_requests_policy.py shows what it allows and refuses), and cannot approve; `--all` lists
/// everyone's for an operator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requester_lists_and_shows_her_own_requests_only() {
    let s = Stack::led_by("requests-own", Some("arn:aws:iam::123456789012:role/ResearchLead")).await;
    let (mine, _) = s.file("my own ablation", &[]).await;
    let me = s.rig.store.requests().await.unwrap()[0].keyed_requester.clone();
    let (theirs, _) = s.file("Bob's sweep", &[]).await;
    // Bob's, moved under his own key (as he would have filed it).
    let mut bob = s.rig.store.requests().await.unwrap().into_iter().find(|r| r.request.id == theirs).unwrap().request;
    let ddb = aws_sdk_dynamodb::Client::new(&s.rig.aws.sdk);
    ddb.delete_item()
        .table_name(&s.rig.aws.table)
        .key("pk", AttributeValue::S(format!("REQUEST#{me}")))
        .key("sk", AttributeValue::S(format!("REQUEST#{theirs}")))
        .send()
        .await
        .unwrap();
    bob.requester = "AROABOB:bob".into();
    s.rig.store.file_request(&bob).await.unwrap();

    let (code, out, err) = s.capblock(&["requests", "list"]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains(&format!("Your requests (filed as {me}): you approve for no team")), "{err}");
    assert!(out.contains(&mine) && !out.contains(&theirs), "{out}");
    assert!(out.contains("1 request(s) of yours; withdraw one with: capblock requests cancel ID"), "{out}");
    let (code, out, _) = s.capblock(&["requests", "show", &mine]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("Request {mine} (filed)")), "{out}");
    let (code, out, err) = s.capblock(&["requests", "show", &theirs]).await;
    assert_eq!(code, 3, "{out}{err}");
    assert!(err.contains(&format!("you ({me}) have no request \"{theirs}\"")), "{err}");
    let (code, _, err) = s.capblock(&["requests", "approve", &mine, "--yes"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("approves for no team"), "{err}");
    assert!(s.rig.store.decision(&mine).await.unwrap().is_none());

    let (code, out, err) = s.capblock(&["requests", "list", "--all"]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&mine) && out.contains(&theirs) && out.contains("2 request(s); approve one"), "{out}");
}
