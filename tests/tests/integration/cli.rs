//! The `capblock` binary against the local stack: a fresh table and topics on moto, the test's
//! own simulator as EC2. Tables, `--json` output and exit codes are checked as an operator sees them.

use capblock_shared::domain::budget::{BudgetOwner, IntentState, Period};
use capblock_shared::domain::rule::Mode;
use capblock_shared::domain::stack::{StackSettings, StoredSettings};
use capblock_shared::ports::{BlockStore, Ledger, Observation, ObservationStore, RuleStore, SettingsStore};
use capblock_tests::runtime::{self, Outcome};
use capblock_tests::{
    Aws, RuleToml, ScenarioToml, Sim, T0, assert_slack_schema, auto_scaling_group, binary_env, eks_nodegroup,
    p5_offering, t0, usd,
};
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

/// One region, p5 at 2.75/GPU-hour, one start day (+2), one AZ: one offering per question.
fn market() -> String {
    ScenarioToml::new(5, T0).payment("succeed", None).p5("us-west-2", &[2], "2.75").build()
}

const NOW: &str = T0;
/// The stack the CLI runs beside (its functions' CAPBLOCK_STACK).
const STACK: &str = "capblock-cli-test";

/// A rule file for 1 x p5.48xlarge for a day in us-west-2, 10000 a month, 4 purchases.
fn rule(id: &str, mode: &str, threshold: &str) -> RuleToml {
    RuleToml::p5(id).mode(mode).regions(&["us-west-2"]).max_price(threshold).budget("10000").max_purchases_per_month(4)
}

fn rule_toml(id: &str, mode: &str, threshold: &str) -> String {
    rule(id, mode, threshold).toml()
}

/// What a command printed and how it ended (also the stand-in's tests', `stand_in.rs`).
pub(crate) struct Out {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Out {
    pub(crate) fn of(out: std::process::Output) -> Out {
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Asserts the command ended with `code`, showing what it printed otherwise.
    #[track_caller]
    pub(crate) fn exits(&self, code: i32) {
        assert_eq!(self.code, code, "{}{}", self.stdout, self.stderr);
    }

    /// Asserts stdout says each of `needles`, showing it otherwise.
    #[track_caller]
    pub(crate) fn says(&self, needles: &[&str]) {
        for needle in needles {
            assert!(self.stdout.contains(needle), "{needle:?} missing from {}", self.stdout);
        }
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.stdout, self.stderr))
    }
}

struct Cli {
    sim: Sim,
    aws: Aws,
    dir: std::path::PathBuf,
    /// The CloudFormation stack standing for the deployment, once `stack` or `deploy` made one:
    /// commands name it (CAPBLOCK_STACK_NAME), as an operator's do, so a purchase can check the
    /// table's settings against its parameters.
    deployed: std::sync::Mutex<Option<String>>,
}

impl Cli {
    async fn new(name: &str) -> Cli {
        Cli::on(name, &market()).await
    }

    /// A CLI against a simulator playing `scenario`.
    async fn on(name: &str, scenario: &str) -> Cli {
        let dir = std::env::temp_dir().join(format!("capblock-cli-{name}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        Cli { sim: Sim::start(scenario).await, aws: Aws::fresh(name).await, dir, deployed: Default::default() }
    }

    fn file(&self, name: &str, text: &str) -> String {
        let p = self.dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    }

    /// `capblock args`, as a script runs it: commands that spend money get `--yes` (without a
    /// terminal they refuse to buy otherwise; `unconfirmed` runs them without it).
    async fn run(&self, args: &[&str]) -> Out {
        let spends = args.first() == Some(&"approve") || (args.first() == Some(&"scan") && args.contains(&"live"));
        let mut args = args.to_vec();
        if spends {
            args.push("--yes");
        }
        self.unconfirmed(&args).await
    }

    async fn unconfirmed(&self, args: &[&str]) -> Out {
        self.unconfirmed_with(args, &[]).await
    }

    /// As `unconfirmed`, with `env` on top of the stack's.
    async fn unconfirmed_with(&self, args: &[&str], env: &[(&str, &str)]) -> Out {
        self.command(args, env, &[]).await
    }

    /// `capblock args` with `env` on top of the stack's and `removed` taken out of it.
    async fn command(&self, args: &[&str], env: &[(&str, &str)], removed: &[&str]) -> Out {
        let out = self.capblock(args, env, removed).output().await.expect("run capblock");
        Out::of(out)
    }

    /// `capblock args` with `input` on its stdin, as `... | capblock args` runs it.
    async fn piped(&self, args: &[&str], input: &str) -> Out {
        use std::process::Stdio;
        use tokio::io::AsyncWriteExt;
        let mut cmd = self.capblock(args, &[], &[]);
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(input.as_bytes()).await.unwrap();
        drop(stdin);
        Out::of(child.wait_with_output().await.expect("run capblock"))
    }

    /// The command `capblock args`, in the stack's environment with `env` on top and `removed`
    /// taken out.
    fn capblock(&self, args: &[&str], env: &[(&str, &str)], removed: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(capblock_tests::runtime::binary("capblock"));
        cmd.envs(binary_env(&self.sim, &self.aws, STACK));
        if let Some(name) = self.deployed.lock().unwrap().clone() {
            cmd.env("CAPBLOCK_STACK_NAME", name);
        }
        for r in removed {
            cmd.env_remove(r);
        }
        // Never the config file of whoever runs the tests, nor their terminal's width: a table is
        // wrapped only where a test asks for a width (COLUMNS).
        cmd.env("CAPBLOCK_CONFIG", self.dir.join("no-config.toml"))
            .env_remove("COLUMNS")
            .env_remove("CAPBLOCK_PROFILE");
        cmd.args(args)
            .envs(env.iter().copied())
            .env_remove("CAPBLOCK_MODE")
            .env_remove("CAPBLOCK_ACCOUNT_MONTHLY_BUDGET")
            .env_remove("CAPBLOCK_REMINDER_LEAD_MINUTES");
        cmd
    }

    /// The stack's settings in its table, as its functions store them (through the store's
    /// own adapter): mode `mode`, account budget `cap`; and a deployment that says the same.
    async fn stack(&self, mode: Mode, cap: Option<&str>) {
        self.stored_settings(mode, cap).await;
        self.deployed_as(mode.as_str(), cap.unwrap_or("0"), "").await;
    }

    /// The table's settings item alone (mode `mode`, account budget `cap`), whatever the
    /// deployment says: as the functions write it, or as anyone who may write the table could.
    async fn stored_settings(&self, mode: Mode, cap: Option<&str>) {
        let settings = StoredSettings {
            stack: StackSettings {
                name: STACK.into(),
                mode,
                account_budget: cap.map(usd),
                team_budgets: Default::default(),
            },
            alerts_topic: self.aws.alerts_topic.clone(),
            written_at: t0(),
        };
        self.aws.store().store_settings(&settings).await.unwrap();
    }

    /// A CloudFormation stack with these parameters stands for the deployment from now on.
    async fn deployed_as(&self, mode: &str, cap: &str, teams: &str) {
        let name = self.aws.deployed_stack(mode, cap, teams).await;
        *self.deployed.lock().unwrap() = Some(name);
    }

    /// Runs the stack's scan-offerings function once, configured with `mode` and an account
    /// budget of `cap` USD, as a deployed stack's schedule would: it stores the stack's settings.
    async fn deploy(&self, mode: &str, cap: &str) {
        let mut env = binary_env(&self.sim, &self.aws, STACK);
        env.extend(
            [("CAPBLOCK_MODE", mode), ("CAPBLOCK_ACCOUNT_MONTHLY_BUDGET", cap)].map(|(k, v)| (k.into(), v.into())),
        );
        let api = runtime::start().await;
        let mut child = runtime::spawn(&api, &runtime::binary("scan-offerings"), &env);
        let id = api.invoke(serde_json::json!({"source": "capblock.schedule"}));
        let out = api.wait_outcome(&id, std::time::Duration::from_secs(60)).await;
        child.kill().await.expect("stop the function");
        assert!(matches!(out, Some(Outcome::Response(_))), "{out:?}");
        self.deployed_as(mode, cap, "").await;
    }

    /// This CLI beside a stack in `mode` with an account budget of `cap` USD (as [`Cli::stack`]),
    /// holding rule `west` (live, up to 3.00 per GPU-hour): where the tests that buy start.
    async fn with_west(self, mode: Mode, cap: &str) -> Cli {
        self.stack(mode, Some(cap)).await;
        self.with_rule(&rule_toml("west", "live", "3.00")).await
    }

    /// This CLI once the rule file `toml` is put.
    async fn with_rule(self, toml: &str) -> Cli {
        self.put_rule(toml).await;
        self
    }

    async fn put_rule(&self, toml: &str) {
        let f = self.file("rule.toml", toml);
        let out = self.run(&["rules", "put", &f]).await;
        out.exits(0);
    }
}

impl Drop for Cli {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A rule's problems are listed one per line, as the CLI wrote them: the guard against control
/// characters from outside leaves the CLI's own line breaks alone (it printed `\u{a}`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_problems_print_one_per_line() {
    let c = Cli::new("cli-problem-lines").await;
    let bad = c.file("bad.toml", &rule("west", "live", "0").max_purchases_per_month(0).toml());
    for args in [["rules", "put", bad.as_str()], ["rules", "validate", bad.as_str()]] {
        let out = c.run(&args).await;
        assert_eq!(out.code, 2, "{args:?}: {}{}", out.stdout, out.stderr);
        let said = format!("{}{}", out.stdout, out.stderr);
        assert!(said.contains("problem(s):\n  - "), "{args:?}: {said}");
        assert!(!said.contains("\\u{a}"), "{args:?}: {said}");
    }
    // Nothing to put is a usage error, not a success.
    let none = c.run(&["rules", "put"]).await;
    none.exits(2);
}

/// Bad pacing or budget arguments are bad input (exit 2, the flag named), and nothing is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_scan_arguments_exit_2_naming_the_flag() {
    let c = Cli::new("cli-bad-scan-args").await;
    c.put_rule(&rule_toml("west", "dry-run", "3.00")).await;
    for (args, flag) in [
        (["--share", "2"], "--share"),
        (["--refill-seconds", "0"], "--refill-seconds"),
        (["--ask-seconds", "nan"], "--ask-seconds"),
    ] {
        let out = c.run(&["scan", args[0], args[1]]).await;
        assert_eq!(out.code, 2, "{args:?}: {}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains(flag), "{args:?}: {}", out.stderr);
    }
    assert!(c.sim.purchases().await.is_empty(), "nothing bought");
}

/// A live scan or an approval never runs at a `--time` off the clock: the budget month would be
/// the wrong one (issue 15: a month back bought a second block for a one-a-month rule).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_scan_or_approval_refuses_a_time_off_the_clock() {
    let c = Cli::new("cli-forged-time").await.with_west(Mode::Live, "100000").await;
    let month_back = "2026-11-01T00:00:00Z";
    let scan = c.run(&["scan", "--time", month_back, "--mode", "live"]).await;
    scan.exits(2);
    assert!(scan.stderr.contains("a live stack runs on its clock"), "{}", scan.stderr);
    assert!(c.sim.purchases().await.is_empty(), "nothing bought");
    let approve = c.run(&["approve", "west/cb-00000000000000000", "--time", month_back]).await;
    approve.exits(2);
    // A dry-run scan may replay another time: nothing to spend.
    assert_eq!(c.run(&["scan", "--time", month_back]).await.code, 0);
    // Live at the clock's time (the simulator's, as a deployed stack's is the wall clock): buys.
    let live = c.run(&["scan", "--mode", "live", "--json"]).await;
    live.exits(0);
    assert_eq!(live.json()["now"], "2026-12-01T00:00:00Z");
    assert_eq!(c.sim.purchases().await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_and_history_show_what_the_scan_bought_and_saw() {
    let c = Cli::new("cli-blocks").await;
    c.stack(Mode::Live, Some("100000")).await;
    // Nothing yet: said, exit 0.
    let none = c.run(&["blocks"]).await;
    assert_eq!((none.code, none.stdout.trim()), (0, "no open blocks"), "{}", none.stderr);
    let empty = c.run(&["history", "--region", "us-west-2", "--type", "p5.48xlarge"]).await;
    assert_eq!(empty.code, 3);
    assert!(empty.stderr.contains("in the stored history") && !empty.stderr.contains("1970"), "{}", empty.stderr);

    c.put_rule(&rule_toml("west", "live", "3.00")).await;
    let scan = c.run(&["scan", "--time", NOW, "--mode", "live", "--json"]).await;
    scan.exits(0);
    assert_eq!(scan.json()["outcomes"][0]["action"]["action"], "bought");
    assert_eq!(c.sim.purchases().await.len(), 1);

    let blocks = c.run(&["blocks", "--json", "--time", NOW]).await;
    assert_eq!(blocks.code, 0, "{}", blocks.stderr);
    let list = blocks.json();
    let b = &list[0];
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(b["state"], "payment-pending");
    assert_eq!(b["rule_id"], "west");
    assert_eq!(b["start"], "2026-12-03T11:30:00Z");
    assert_eq!(b["termination_time"], "2026-12-04T11:00:00Z");
    // Leads 1440, 120, 30 before the termination time: the first still ahead is a day before.
    assert_eq!(b["next_reminder"], "2026-12-03T11:00:00Z");
    // Machine output says how long in seconds (the table's phrase, "starts in 2d 11h", is for a
    // person): 2d 11h 30m to the start, 3d 11h 30m to the end.
    assert_eq!(b["starts_in_seconds"], 214_200);
    assert_eq!(b["seconds_left"], 300_600);
    assert!(b.get("time_left").is_none(), "{b}");

    let narrow = c.run(&["blocks", "--all", "--time", "2026-12-04T10:00:00Z"]).await;
    assert_eq!(narrow.code, 0);
    // Past its payment deadline (the simulator has not said it is paid), the narrow table says
    // so where the time left would be; -o wide has both.
    for needle in ["RESERVATION", "west", "1 x p5.48xlarge", "payment-pending", "payment overdue"] {
        assert!(narrow.stdout.contains(needle), "{needle:?} missing from\n{}", narrow.stdout);
    }
    assert!(!narrow.stdout.contains("NEXT REMINDER"), "the reminder is in -o wide: {}", narrow.stdout);
    let table = c.run(&["blocks", "--all", "--time", "2026-12-04T10:00:00Z", "-o", "wide"]).await;
    assert_eq!(table.code, 0);
    let text = &table.stdout;
    for needle in ["RESERVATION", "NEXT REMINDER", "west", "1 x p5.48xlarge", "payment-pending", "1h 30m left"] {
        assert!(text.contains(needle), "{needle:?} missing from\n{text}");
    }
    assert!(text.contains("2026-12-04 10:30"), "next reminder 30 min before termination:\n{text}");

    let history = c.run(&["history", "--region", "us-west-2", "--type", "p5.48xlarge", "--json"]).await;
    assert_eq!(history.code, 0, "{}", history.stderr);
    let rows = history.json();
    assert_eq!(rows.as_array().unwrap().len(), 1);
    assert_eq!(rows[0]["per_accelerator_hour"], "2.75");
    assert_eq!(rows[0]["length"], "1d");
    assert_eq!(rows[0]["seen_at"], NOW);

    let chart = c.dir.join("prices.svg");
    let rule = c.file("threshold.toml", &rule_toml("west", "live", "2.95"));
    let out = c
        .run(&[
            "history",
            "--region",
            "us-west-2",
            "--type",
            "p5.48xlarge",
            "--chart",
            chart.to_str().unwrap(),
            "--rule",
            &rule,
        ])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("SEEN AT (UTC)") && out.stdout.contains("2.7500"), "{}", out.stdout);
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("<polyline") && svg.contains("rule west: 2.95"), "{svg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_files_with_errors_exit_2_with_every_problem() {
    let c = Cli::new("cli-invalid").await;
    let bad = c.file("bad.toml", &rule("Bad Rule", "live", "-2").regions(&["us-west-2", "mars-1"]).toml());
    for args in [
        vec!["backtest", "--rule", bad.as_str()],
        vec!["history", "--region", "us-west-2", "--type", "p5.48xlarge", "--rule", bad.as_str()],
        vec!["rules", "validate", bad.as_str()],
    ] {
        let out = c.run(&args).await;
        assert_eq!(out.code, 2, "{args:?}: {}{}", out.stdout, out.stderr);
        for needle in ["id:", "max_price_per_accelerator_hour", "mars-1"] {
            assert!(out.stdout.contains(needle), "{args:?}: {needle:?} missing from {}", out.stdout);
        }
    }
    let out = c.run(&["approve", "no-slash"]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(c.run(&["approve", "nobody/cb-0"]).await.code, 3);
    let history = c.file("history.json", "{\"not\": \"an array\"}");
    let good = c.file("good.toml", &rule_toml("west", "live", "3.00"));
    assert_eq!(c.run(&["backtest", "--rule", &good, "--history", &history]).await.code, 2);
}

fn observation(id: &str, seen: DateTime<Utc>, start: DateTime<Utc>, per_gpu_hour: &str) -> Observation {
    let fee = per_gpu_hour.parse::<rust_decimal::Decimal>().unwrap() * rust_decimal::Decimal::from(192);
    Observation { offering: p5_offering("us-west-2", id, start, fee), accelerators_per_instance: 8, seen_at: seen }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backtest_on_a_fixed_history_has_a_known_answer() {
    let c = Cli::new("cli-backtest").await;
    let t0: DateTime<Utc> = NOW.parse().unwrap();
    let day = |d: i64| t0 + Duration::days(d);
    let start = |d: i64| day(d) + Duration::minutes(11 * 60 + 30);
    let history = vec![
        observation("cb-a", day(0), start(2), "3.50"),
        observation("cb-b", day(1), start(3), "2.90"),
        observation("cb-c", day(2), start(4), "2.50"), // held: cb-b's block until day 4
        observation("cb-d", day(5), start(7), "2.80"),
    ];
    let file = c.file("history.json", &serde_json::to_string(&history).unwrap());
    let rule = c.file("rule.toml", &rule_toml("west", "live", "3.00"));
    let out = c.run(&["backtest", "--rule", &rule, "--history", &file, "--json"]).await;
    out.exits(0);
    let r = out.json();
    let bought: Vec<(&str, &str)> = r["purchases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["offering"]["id"].as_str().unwrap(), p["at"].as_str().unwrap()))
        .collect();
    assert_eq!(bought, vec![("cb-b", "2026-12-02T00:00:00Z"), ("cb-d", "2026-12-06T00:00:00Z")]);
    assert_eq!(r["total"], "1094.40"); // (2.90 + 2.80) x 8 GPUs x 24 h
    assert_eq!(r["scans"], 4);
    assert_eq!(r["limited"].as_array().unwrap().len(), 1);

    let table = c.run(&["backtest", "--rule", &rule, "--history", &file, "-o", "wide"]).await;
    assert_eq!(table.code, 0);
    for needle in ["BOUGHT AT (UTC)", "cb-b", "cb-d", "2.9000", "total 1094.40 USD", "held back: holds 1 block"] {
        assert!(table.stdout.contains(needle), "{needle:?} missing from\n{}", table.stdout);
    }

    // One line per reason, with how many scans it held back.
    assert_eq!(table.stdout.matches("held back:").count(), 1, "{}", table.stdout);
    assert!(table.stdout.contains("(1 scan, at "), "{}", table.stdout);

    // Without --history it replays the stored observations (what the functions' scans store):
    // one observation at 2.75 buys once.
    c.put_rule(&rule_toml("west", "live", "3.00")).await;
    c.aws.store().record(&[observation("cb-seen", t0, start(2), "2.75")]).await.unwrap();
    let stored = c.run(&["backtest", "--rule", &rule, "--json"]).await;
    assert_eq!(stored.code, 0, "{}", stored.stderr);
    assert_eq!(stored.json()["purchases"].as_array().unwrap().len(), 1);
    assert_eq!(stored.json()["total"], "528.00");
}

async fn ask(c: &Cli) -> String {
    c.stack(Mode::Live, Some("100000")).await;
    c.put_rule(&rule_toml("west", "approval", "3.00")).await;
    let scan = c.run(&["scan", "--time", NOW, "--mode", "live", "--json"]).await;
    scan.exits(0);
    let action = &scan.json()["outcomes"][0]["action"];
    assert_eq!(action["action"], "awaiting-approval", "{action}");
    assert!(c.sim.purchases().await.is_empty(), "approval mode buys nothing by itself");
    let intent = action["intent"].as_str().unwrap().to_string();
    let alerts = c.aws.alerts().await;
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_slack_schema(&alerts[0].body);
    let steps = alerts[0].body["content"]["nextSteps"].to_string();
    assert!(
        steps.contains(&format!("approval needed: run `capblock approve {intent}` before Wed 2026-12-02 00:00 UTC")),
        "{steps}"
    );
    // A second scan does not ask again.
    c.run(&["scan", "--time", NOW, "--mode", "live"]).await;
    assert!(c.aws.alerts().await.is_empty());
    intent
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_buys_exactly_once_through_the_purchase_path() {
    let (c, intent) = asked(Cli::new("cli-approve").await).await;
    let out = c.run(&["approve", &intent, "--time", NOW]).await;
    out.exits(0);
    assert!(out.stdout.contains("bought 1 x p5.48xlarge"), "{}", out.stdout);
    // What was asked: the price per accelerator-hour and that a purchase cannot be undone.
    assert!(
        out.stderr.contains("per accelerator-hour") && out.stderr.contains("cannot be cancelled"),
        "{}",
        out.stderr
    );
    let bought = c.sim.purchases().await;
    assert_eq!(bought.len(), 1);
    assert_eq!(bought[0]["tags"]["capblock:intent"], intent.as_str());
    assert_eq!(bought[0]["tags"]["capblock:stack"], "capblock-cli-test");
    let alerts = c.aws.alerts().await;
    assert!(alerts.iter().any(|a| a.body["metadata"]["eventType"] == "purchased"), "{alerts:?}");
    // Approving again buys nothing more.
    let again = c.run(&["approve", &intent, "--time", NOW]).await;
    again.exits(2);
    assert_eq!(c.sim.purchases().await.len(), 1);
}

/// The team page lists the approval the scan stored (read back from the table by the rule's
/// approval records) with the line to copy, and once it is bought, the block instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_team_page_shows_an_approval_waiting_then_its_block() {
    let (c, intent) = asked(Cli::new("cli-page").await).await;
    let file = c.dir.join("team.html");
    let section = |html: &str, id: &str| {
        let start = html.find(&format!("<section id=\"{id}\"")).unwrap_or_else(|| panic!("no {id}"));
        html[start..start + html[start..].find("</section>").unwrap()].to_string()
    };
    let before = team_page(&c, &file).await;
    let waiting = section(&before, "approvals");
    assert!(waiting.contains(&format!("<code>capblock approve {intent}</code>")), "{waiting}");
    assert!(section(&before, "budgets").contains("Rule west"));
    assert!(section(&before, "calendar").contains("No blocks"), "nothing bought yet");
    assert!(!before.contains("http:") && !before.contains("https:"));

    let out = c.run(&["approve", &intent, "--time", NOW]).await;
    out.exits(0);
    let after = team_page(&c, &file).await;
    assert!(section(&after, "approvals").contains("No approvals waiting."), "a bought approval waits no more");
    let blocks = c.run(&["blocks", "--json", "--time", NOW]).await.json();
    let reservation = blocks[0]["reservation_id"].as_str().expect("the bought block").to_string();
    let calendar = section(&after, "calendar");
    assert!(calendar.contains(&reservation) && calendar.contains("west"), "{reservation}: {calendar}");
    assert!(section(&after, "prices").contains("bought "), "the purchase is marked on the rule's prices");
}

/// A CLI whose scan stored an approval waiting ([`ask`]), and the intent to approve.
async fn asked(c: Cli) -> (Cli, String) {
    let intent = ask(&c).await;
    (c, intent)
}

/// `capblock page --out FILE`, its text.
async fn team_page(c: &Cli, file: &std::path::Path) -> String {
    let out = c.run(&["page", "--out", file.to_str().unwrap()]).await;
    out.exits(0);
    assert!(out.stderr.contains("team page written to"), "{}", out.stderr);
    std::fs::read_to_string(file).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_of_a_vanished_offering_is_refused() {
    // The market reprices the block at noon: from then on the block decided on is no longer
    // sold at its fee (a block is known by what it is, its fee included), while the approval
    // still holds.
    let scenario = ScenarioToml::new(5, T0)
        .payment("succeed", None)
        .p5_priced("us-west-2", &[2], &[("2026-11-01T00:00:00Z", "2.75"), ("2026-12-01T12:00:00Z", "2.70")])
        .build();
    let (c, intent) = asked(Cli::on("cli-vanished", &scenario).await).await;
    c.sim.advance_hours(13).await;
    let out = c.run(&["approve", &intent, "--time", "2026-12-01T13:00:00Z"]).await;
    out.exits(2);
    assert!(out.stderr.contains("no longer on sale") && out.stderr.contains("nothing bought"), "{}", out.stderr);
    assert!(c.sim.purchases().await.is_empty());
    assert_eq!(c.sim.state().await["calls"]["PurchaseCapacityBlock"], 2, "only the two DryRun checks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_is_refused_when_the_price_rose_above_the_threshold() {
    let (c, intent) = asked(Cli::new("cli-dearer").await).await;
    // The operator lowered the threshold since: the same price is now above it.
    c.put_rule(&rule_toml("west", "approval", "2.50")).await;
    let out = c.run(&["approve", &intent, "--time", NOW]).await;
    out.exits(2);
    assert!(out.stderr.contains("above rule west's threshold 2.50"), "{}", out.stderr);
    assert!(c.sim.purchases().await.is_empty());
}

/// An approval buys only in a live stack (as stored), for a rule still enabled and in approval
/// mode, within a day of being asked (or before the offering's start): each refused, exit 2,
/// nothing bought; and once all hold again, it buys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approval_is_refused_unless_live_enabled_in_approval_mode_and_fresh() {
    let (c, intent) = asked(Cli::new("cli-approve-refused").await).await;
    let refused = |out: &Out, why: &str| {
        assert_eq!(out.code, 2, "{why}: {}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains(why) && out.stderr.contains("nothing bought"), "{why}: {}", out.stderr);
    };
    c.stack(Mode::DryRun, None).await;
    refused(&c.run(&["approve", &intent, "--time", NOW]).await, "is in mode dry-run");
    c.stack(Mode::Live, Some("100000")).await;
    c.put_rule(&rule("west", "approval", "3.00").extra("enabled = false").toml()).await;
    refused(&c.run(&["approve", &intent, "--time", NOW]).await, "rule west is disabled");
    c.put_rule(&rule_toml("west", "dry-run", "3.00")).await;
    refused(&c.run(&["approve", &intent, "--time", NOW]).await, "rule west is in mode dry-run now, not approval");
    c.put_rule(&rule_toml("west", "live", "3.00")).await;
    refused(&c.run(&["approve", &intent, "--time", NOW]).await, "rule west is in mode live now, not approval");
    c.put_rule(&rule_toml("west", "approval", "3.00")).await;
    // Asked at 00:00: valid until 00:00 the next day, whatever the market says then.
    c.sim.advance_hours(24).await;
    refused(
        &c.run(&["approve", &intent, "--time", "2026-12-02T00:00:00Z"]).await,
        "the approval expired at 2026-12-02 00:00 UTC",
    );
    assert!(c.sim.purchases().await.is_empty());
    assert_eq!(c.sim.state().await["calls"]["PurchaseCapacityBlock"], 2, "only the two scans' DryRun checks");
}

/// The table's settings item is writable by anyone who may write the table; the stack's
/// parameters only by whoever may deploy. A forged item (live, a cap of 50,000) in a stack deployed
/// dry-run with a cap of 1,000 buys nothing from the CLI (approve, buy, a live scan: each refused,
/// naming what differs), nor does a table named without its stack; once both say the same, the
/// approval buys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_buys_only_when_the_stored_settings_match_the_stacks_parameters() {
    let (c, intent) = asked(Cli::new("cli-forged-settings").await).await;
    c.deployed_as("dry-run", "1000", "").await;
    // The forged item: live, with a cap of 50,000.
    c.stored_settings(Mode::Live, Some("50000")).await;
    let refused = |out: &Out, why: &str| {
        assert_eq!(out.code, 2, "{why}: {}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains(why), "{why}: {}", out.stderr);
        assert!(!out.stderr.contains("Error {"), "no debug dump: {}", out.stderr);
    };
    let mismatch = "the stack's Mode parameter dry-run";
    refused(&c.run(&["approve", &intent, "--time", NOW]).await, mismatch);
    let approve = c.run(&["approve", &intent, "--time", NOW]).await;
    assert!(approve.stderr.contains("AccountMonthlyBudget parameter \"1000\""), "{}", approve.stderr);
    refused(&c.run(&["scan", "--time", NOW, "--mode", "live"]).await, mismatch);
    refused(&c.run(&["buy", "cb-0000000000000000f", "--rule", "west", "--yes"]).await, mismatch);
    assert_eq!(c.sim.state().await["calls"]["PurchaseCapacityBlock"], 2, "only the two scans' DryRun checks");

    // The stack's parameters say the same again, but the command names only a table.
    c.stack(Mode::Live, Some("100000")).await;
    let table_only = c
        .command(
            &["approve", &intent, "--time", NOW, "--yes"],
            &[("CAPBLOCK_TABLE", c.aws.table.as_str())],
            &["CAPBLOCK_STACK_NAME"],
        )
        .await;
    refused(&table_only, "only a table was named: name the stack with --stack NAME");
    assert!(c.sim.purchases().await.is_empty());

    let out = c.run(&["approve", &intent, "--time", NOW]).await;
    out.exits(0);
    assert_eq!(c.sim.purchases().await.len(), 1);
}

/// A live purchase from the CLI takes the stack's mode and account budget from the table: with
/// none stored it is refused (exit 2, saying what to do), in a stack stored as dry-run too, and
/// in a live stack stored without an account cap; a dry-run scan still runs without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_purchase_from_the_cli_needs_the_stacks_stored_live_settings() {
    let c = Cli::new("cli-no-settings").await.with_rule(&rule_toml("west", "live", "3.00")).await;
    let live = c.run(&["scan", "--mode", "live"]).await;
    live.exits(2);
    assert!(
        live.stderr.contains("the stack's settings are not in table")
            && live.stderr.contains("invoke the stack's scan-offerings function once"),
        "{}",
        live.stderr
    );
    let dry = c.run(&["scan", "--json"]).await;
    dry.exits(0);
    // A person's dry run writes nothing: what the rule would choose, as a replay shows it.
    assert_eq!(dry.json()["outcomes"][0]["action"]["action"], "replayed");
    assert!(dry.stderr.contains("a dry run as stack"), "{}", dry.stderr);

    c.deploy("dry-run", "0").await;
    let live = c.run(&["scan", "--mode", "live"]).await;
    live.exits(2);
    assert!(live.stderr.contains(&format!("stack {STACK} is in mode dry-run")), "{}", live.stderr);

    // A live stack stored without an account cap: the functions run it as deployed, the CLI
    // still buys nothing by hand (scan, buy or approve), saying how to set one.
    c.stack(Mode::Live, None).await;
    let live = c.run(&["scan", "--mode", "live"]).await;
    live.exits(2);
    assert!(live.stderr.contains("has no account-wide monthly cap"), "{}", live.stderr);
    let buy = c.run(&["buy", "cb-00000000000000000", "--rule", "west", "--yes"]).await;
    buy.exits(2);
    assert!(buy.stderr.contains("AccountMonthlyBudget"), "{}", buy.stderr);
    assert!(c.sim.purchases().await.is_empty(), "nothing bought");
}

/// The audit's reproduction: a stack deployed with a $1,000 account budget (the operator's shell
/// has no CAPBLOCK_ACCOUNT_MONTHLY_BUDGET), blocks at $480: a live scan buys one and asks about
/// another, the approval buys it ($960), and the next live scan buys nothing: $960 under the
/// cap, not $1,440.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_purchases_stop_at_the_stacks_account_budget() {
    let scenario = ScenarioToml::new(5, T0)
        .payment("succeed", None)
        .p5("us-west-2", &[2, 3], "2.50")
        .p5("us-east-1", &[2], "2.50")
        .build();
    let c = Cli::on("cli-account-cap", &scenario).await;
    c.deploy("live", "1000").await;
    c.put_rule(&rule("west", "live", "3.00").max_blocks_held(3).toml()).await;
    c.put_rule(&rule("ask", "approval", "3.00").regions(&["us-east-1"]).toml()).await;

    let scan = c.run(&["scan", "--mode", "live", "--json"]).await;
    scan.exits(0);
    let report = scan.json();
    let action = |rule: &str| {
        report["outcomes"].as_array().unwrap().iter().find(|o| o["rule_id"] == rule).unwrap()["action"].clone()
    };
    assert_eq!(action("west")["action"], "bought", "{}", scan.stdout);
    assert_eq!(action("ask")["action"], "awaiting-approval", "{}", scan.stdout);
    let intent = action("ask")["intent"].as_str().unwrap().to_string();
    let out = c.run(&["approve", &intent]).await;
    out.exits(0);
    assert_eq!(c.sim.purchases().await.len(), 2);

    let again = c.run(&["scan", "--mode", "live", "--json"]).await;
    again.exits(0);
    assert_eq!(c.sim.purchases().await.len(), 2, "a third block would pass the $1,000 cap: {}", again.stdout);
    let usage = c.aws.store().usage(&BudgetOwner::Account, &Period::of(t0())).await.unwrap().unwrap();
    assert_eq!((usage.committed, usage.purchases), (usd("960"), 2));

    // A deleted rule's spend keeps its row in `status`, so the rows still add up to the
    // account's; the watch's per-region lines wait for --verbose.
    assert_eq!(c.run(&["rules", "delete", "west"]).await.code, 0);
    let status = c.run(&["status", "--time", NOW]).await;
    status.exits(0);
    let row = status
        .stdout
        .lines()
        .find(|l| l.contains("west (deleted rule)"))
        .unwrap_or_else(|| panic!("{}", status.stdout));
    assert!(row.contains("480.00"), "{}", status.stdout);
    assert!(!status.stdout.contains("the watch, per region"), "{}", status.stdout);
    let verbose = c.run(&["status", "--time", NOW, "--verbose"]).await;
    verbose.says(&["the watch, per region", "us-east-1:"]);
}

/// `rules show` prints the rule as the file `rules put` takes: put back unchanged, it is the same
/// rule (said unchanged, no new version); `--json` has the same fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shown_rule_is_a_rule_file_that_puts_back_the_same_rule() {
    let c = Cli::new("cli-show").await;
    c.put_rule(&rule("west", "live", "3.00").extra("tags = { team = \"llm\" }").toml()).await;
    let shown = c.run(&["rules", "show", "west"]).await;
    shown.exits(0);
    assert!(shown.stdout.starts_with("# rule west, stored version 1"), "{}", shown.stdout);
    assert!(shown.stdout.contains("max_price_per_accelerator_hour = \"3.00\""), "{}", shown.stdout);
    assert!(!shown.stdout.contains("Currency(") && !shown.stdout.contains("TimeDelta"), "{}", shown.stdout);
    let before = c.aws.store().get_rule("west").await.unwrap().unwrap();
    // Put back unchanged: said so, and not written again.
    let again = c.run(&["rules", "put", &c.file("shown.toml", &shown.stdout)]).await;
    again.exits(0);
    assert_eq!(again.stdout.trim(), "rule \"west\" unchanged (version 1): nothing stored", "{}", again.stdout);
    let after = c.aws.store().get_rule("west").await.unwrap().unwrap();
    assert_eq!((after.rule, after.version), (before.rule, 1));
    let json = c.run(&["rules", "show", "west", "--json"]).await.json();
    assert_eq!(json["id"], "west");
    assert_eq!(json["tags"]["team"], "llm");
    assert_eq!(json["max_price_per_accelerator_hour"], "3.00");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_delete_removes_the_rule_only() {
    let c = Cli::new("cli-delete").await.with_rule(&rule_toml("west", "live", "3.00")).await;
    let out = c.run(&["rules", "delete", "west"]).await;
    out.exits(0);
    assert!(out.stdout.contains("deleted rule \"west\"; its blocks, intents and budgets are kept"), "{}", out.stdout);
    assert_eq!(c.run(&["rules", "show", "west"]).await.code, 3);
    assert_eq!(c.run(&["rules", "delete", "west"]).await.code, 3, "nothing to delete");
    let help = c.run(&["rules", "delete", "--help"]).await;
    help.says(&["blocks are still tracked", "budgets kept"]);
}

/// `group` sized as every group the launch tests make: 0 to 4 instances, in `region`'s first zone.
fn zero_to_four(
    group: aws_sdk_autoscaling::operation::create_auto_scaling_group::builders::CreateAutoScalingGroupFluentBuilder,
    region: &str,
) -> aws_sdk_autoscaling::operation::create_auto_scaling_group::builders::CreateAutoScalingGroupFluentBuilder {
    group.min_size(0).max_size(4).availability_zones(format!("{region}a"))
}

/// `rules validate` names bad hand-off actions: a group Auto Scaling does not know (asked of
/// moto in the rule's region), an empty document, a lead longer than the block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_validate_names_unknown_groups_empty_documents_and_leads_past_the_block() {
    let c = Cli::new("cli-handoff").await;
    let group = format!("trainers-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let actions = |group: &str, document: &str, lead: u32| {
        rule("handoff", "live", "3.00")
            .extra(&format!(
                "[[actions]]\nkind = \"scale_group\"\ngroup = \"{group}\"\ndesired = 1\ndown_lead_minutes = 45\n\
                 [[actions]]\nkind = \"run_command\"\ndocument = \"{document}\"\nlead_minutes = {lead}"
            ))
            .toml()
    };
    let missing = c.file("missing.toml", &actions(&group, "AWS-RunShellScript", 30));
    let out = c.run(&["rules", "validate", "--check-aws", &missing]).await;
    out.exits(2);
    let want = format!("actions[0].group: no Auto Scaling group \"{group}\" in us-west-2");
    assert!(out.stdout.contains(&want), "{}", out.stdout);
    // Offline by default (and with the older --offline): the group is not asked about.
    assert_eq!(c.run(&["rules", "validate", &missing]).await.code, 0);
    assert_eq!(c.run(&["rules", "validate", "--offline", &missing]).await.code, 0);
    // No file at all is a usage error, not a pass.
    assert_eq!(c.run(&["rules", "validate"]).await.code, 2);

    // A 1-day block has 23.5 hours before termination: 1440 minutes is longer.
    let bad = c.file("bad.toml", &actions(&group, "", 1440));
    let out = c.run(&["rules", "validate", &bad]).await;
    out.exits(2);
    for needle in [
        "actions[1].document: the document name is empty",
        "actions[1].lead_minutes: 1440 minutes is longer than the block",
    ] {
        assert!(out.stdout.contains(needle), "{needle:?} missing from {}", out.stdout);
    }

    auto_scaling_group(&c.aws.sdk, "us-west-2", &group).await;
    let out = c.run(&["rules", "validate", "--check-aws", &missing]).await;
    out.exits(0);
}

/// `rules validate --check-aws` warns of a group the rule scales that would launch nothing into
/// its blocks: a launch configuration, a launch template without the Capacity Block market, or
/// one that targets another reservation group. The group lives in moto's Auto Scaling (which
/// needs the template in moto's EC2 too); the template's launch data is what the simulated EC2
/// answers, as a deployed stack's EC2 would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_validate_warns_of_a_group_that_launches_nothing_into_the_block() {
    let c = Cli::new("cli-launch").await;
    let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
    let region = "us-west-2";
    let client = |url: String| {
        aws_sdk_ec2::Client::from_conf(
            aws_sdk_ec2::config::Builder::from(&c.aws.sdk)
                .region(aws_sdk_ec2::config::Region::new(region))
                .endpoint_url(url)
                .build(),
        )
    };
    // moto's EC2 (the launch template Auto Scaling reads) by the stack's own name for moto:
    // AWS_ENDPOINT_URL_EC2 is the simulator, and DynamoDB's endpoint is no one's EC2.
    let moto_ec2 = client(std::env::var("CAPBLOCK_MOTO_URL").expect("the local stack's moto (CAPBLOCK_MOTO_URL)"));
    let sim_ec2 = client(c.sim.url.clone());
    let asg = aws_sdk_autoscaling::Client::from_conf(
        aws_sdk_autoscaling::config::Builder::from(&c.aws.sdk)
            .region(aws_sdk_autoscaling::config::Region::new(region))
            .build(),
    );
    let rule_group = format!("capblock-{STACK}-launch");
    // A template (moto's, for Auto Scaling; the simulator's, for what it launches) and a group on it.
    let group_on = |template: String, market: Option<&'static str>, target: String| {
        let (moto_ec2, sim_ec2, asg) = (moto_ec2.clone(), sim_ec2.clone(), asg.clone());
        async move {
            let basic = aws_sdk_ec2::types::RequestLaunchTemplateData::builder()
                .image_id("ami-12c6146b")
                .instance_type(aws_sdk_ec2::types::InstanceType::P548xlarge);
            // The same template on both: moto's for Auto Scaling, the simulator's for EC2.
            let put_template = |ec2: &aws_sdk_ec2::Client, data: aws_sdk_ec2::types::RequestLaunchTemplateData| {
                ec2.create_launch_template().launch_template_name(&template).launch_template_data(data).send()
            };
            put_template(&moto_ec2, basic.clone().build()).await.unwrap();
            let mut data = basic.capacity_reservation_specification(
                aws_sdk_ec2::types::LaunchTemplateCapacityReservationSpecificationRequest::builder()
                    .capacity_reservation_target(
                        aws_sdk_ec2::types::CapacityReservationTarget::builder()
                            .capacity_reservation_resource_group_arn(format!(
                                "arn:aws:resource-groups:{region}:123456789012:group/{target}"
                            ))
                            .build(),
                    )
                    .build(),
            );
            if let Some(m) = market {
                data = data.instance_market_options(
                    aws_sdk_ec2::types::LaunchTemplateInstanceMarketOptionsRequest::builder()
                        .market_type(aws_sdk_ec2::types::MarketType::from(m))
                        .build(),
                );
            }
            put_template(&sim_ec2, data.build()).await.unwrap();
            let group = asg.create_auto_scaling_group().auto_scaling_group_name(&template).launch_template(
                aws_sdk_autoscaling::types::LaunchTemplateSpecification::builder()
                    .launch_template_name(&template)
                    .version("$Latest")
                    .build(),
            );
            zero_to_four(group, region).send().await.unwrap();
            template
        }
    };
    let validate = |group: String| {
        // A rule of UltraServers, whose launches must target its reservation group.
        let toml = rule("launch", "live", "3.00")
            .instance_types(&[])
            .instance_counts(&[])
            .extra(&format!(
                "ultraserver_types = [\"u-trn2x64\"]\nultraserver_counts = [1]\n\
                 [[actions]]\nkind = \"reservation_group\"\n\
                 [[actions]]\nkind = \"scale_group\"\ngroup = \"{group}\"\ndesired = 1\ndown_lead_minutes = 45"
            ))
            .toml();
        let f = c.file(&format!("{group}.toml"), &toml);
        let c = &c;
        async move {
            let out = c.run(&["rules", "validate", "--check-aws", &f]).await;
            assert_eq!(out.code, 0, "a warning, not a failure: {}{}", out.stdout, out.stderr);
            out.stdout
        }
    };

    // Lands: the Capacity Block market, the rule's reservation group.
    let good = group_on(format!("lands-{suffix}"), Some("capacity-block"), rule_group.clone()).await;
    let out = validate(good).await;
    assert!(!out.contains("warning"), "{out}");
    // The On-Demand market: nothing lands in the block.
    let on_demand = group_on(format!("ondemand-{suffix}"), None, rule_group.clone()).await;
    let out = validate(on_demand).await;
    assert!(
        out.contains("warning: actions[1].group:") && out.contains("MarketType is not set, not capacity-block"),
        "{out}"
    );
    // Another group's reservations.
    let elsewhere = group_on(format!("elsewhere-{suffix}"), Some("capacity-block"), "someone-else".into()).await;
    let out = validate(elsewhere).await;
    assert!(out.contains("it targets the group") && out.contains(&format!("`{rule_group}`")), "{out}");
    // A launch configuration cannot launch into a Capacity Block at all.
    let old = format!("config-{suffix}");
    auto_scaling_group(&c.aws.sdk, region, &old).await;
    let out = validate(old.clone()).await;
    assert!(out.contains(&format!("launches from launch configuration \"{old}\"")), "{out}");

    // A group that targets blocks itself: the rule's reservation group as its own Capacity
    // Reservation target and distribution segments that take Capacity Blocks, over a template
    // with no market type (and another group as its own target, which the group's replaces).
    let plain = group_on(format!("plain-{suffix}"), None, "someone-else".into()).await;
    let segmented = |name: String, types: &'static [&'static str]| {
        let (asg, plain) = (asg.clone(), plain.clone());
        let arn = format!("arn:aws:resource-groups:{region}:123456789012:group/{rule_group}");
        async move {
            use aws_sdk_autoscaling::types::{
                CapacityReservationPreference, CapacityReservationSpecification, CapacityReservationTarget,
                DistributionSegment, InstancesDistribution, LaunchTemplate, LaunchTemplateSpecification,
                MixedInstancesPolicy, TargetCapacityType,
            };
            let segment = types
                .iter()
                .fold(DistributionSegment::builder(), |b, t| b.target_capacity_types(TargetCapacityType::from(*t)));
            let template = LaunchTemplateSpecification::builder().launch_template_name(plain).version("$Latest");
            let group = asg
                .create_auto_scaling_group()
                .auto_scaling_group_name(&name)
                .mixed_instances_policy(
                    MixedInstancesPolicy::builder()
                        .launch_template(
                            LaunchTemplate::builder().launch_template_specification(template.build()).build(),
                        )
                        .instances_distribution(
                            InstancesDistribution::builder().distribution_segments(segment.build()).build(),
                        )
                        .build(),
                )
                .capacity_reservation_specification(
                    CapacityReservationSpecification::builder()
                        .capacity_reservation_preference(CapacityReservationPreference::CapacityReservationsOnly)
                        .capacity_reservation_target(
                            CapacityReservationTarget::builder().capacity_reservation_resource_group_arns(arn).build(),
                        )
                        .build(),
                );
            zero_to_four(group, region).send().await.unwrap();
            name
        }
    };
    let blocks = segmented(format!("segments-{suffix}"), &["capacity-block", "on-demand"]).await;
    let out = validate(blocks).await;
    assert!(!out.contains("warning"), "{out}");
    let odcr = segmented(format!("odcr-{suffix}"), &["on-demand-capacity-reservation"]).await;
    let out = validate(odcr).await;
    assert!(out.contains("distribution segments target on-demand-capacity-reservation only"), "{out}");
}

/// `rules validate --check-aws` asks EKS (moto, in the rule's region) for the node groups
/// `scale_nodegroup` actions name; offline it judges their names and sizes only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_validate_names_a_node_group_eks_does_not_know_and_sizes_out_of_order() {
    let c = Cli::new("cli-nodegroup").await;
    let cluster = format!("train-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
    let action = |desired: u32, min: u32| {
        rule("eks", "live", "3.00")
            .extra(&format!(
                "[[actions]]\nkind = \"scale_nodegroup\"\ncluster = \"{cluster}\"\nnodegroup = \"p5-nodes\"\n\
                 desired = {desired}\nmin = {min}\ndown_lead_minutes = 45"
            ))
            .toml()
    };
    let missing = c.file("missing.toml", &action(1, 0));
    let out = c.run(&["rules", "validate", "--check-aws", &missing]).await;
    out.exits(2);
    let want = format!("actions[0].nodegroup: no node group \"p5-nodes\" in EKS cluster \"{cluster}\" in us-west-2");
    assert!(out.stdout.contains(&want), "{}", out.stdout);
    assert_eq!(c.run(&["rules", "validate", &missing]).await.code, 0, "offline: not asked");

    let bad = c.file("bad.toml", &action(1, 2));
    let out = c.run(&["rules", "validate", &bad]).await;
    out.exits(2);
    assert!(out.stdout.contains("actions[0].min: 2 is above desired = 1"), "{}", out.stdout);

    eks_nodegroup(&c.aws.sdk, "us-west-2", &cluster, "p5-nodes", (0, 1, 0)).await;
    let out = c.run(&["rules", "validate", "--check-aws", &missing]).await;
    out.exits(0);
}

/// `offerings --ultraservers` asks EC2 for whole UltraServers and prices them over all their
/// chips; `rules validate` names the combinations EC2 refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offerings_search_ultraservers_and_validate_names_what_ec2_refuses() {
    let scenario = ScenarioToml::new(5, T0).trn2_ultra("us-east-1", &[1, 2], &[2], "2.00").build();
    let c = Cli::on("cli-ultra", &scenario).await;
    let args = ["offerings", "--ultraservers", "u-trn2x64", "--ultraserver-counts", "2", "--days", "1"];
    let out = c.run(&[&args[..], &["--regions", "us-east-1", "--from", NOW]].concat()).await;
    out.exits(0);
    assert!(out.stdout.contains("2 x u-trn2x64 (trn2u.48xlarge)"), "{}", out.stdout);
    assert!(out.stdout.contains("FEE (USD)") && out.stdout.contains("6144.00"), "{}", out.stdout);
    assert!(out.stdout.contains("USD/ACCEL-H") && out.stdout.contains("2.0000"), "{}", out.stdout);
    assert!(!out.stdout.contains("1 x u-trn2x64"), "only the count asked for: {}", out.stdout);
    // A date is a window's bound too: the day's first minute, the same offerings.
    let dated = c.run(&[&args[..], &["--regions", "us-east-1", "--from", &NOW[..10]]].concat()).await;
    dated.exits(0);
    assert!(dated.stdout.contains("2 x u-trn2x64 (trn2u.48xlarge)"), "{}", dated.stdout);
    // Instance types and UltraServers in one search: a usage error.
    let out =
        c.run(&["offerings", "--types", "p5.48xlarge", "--ultraservers", "u-trn2x64", "--regions", "us-east-1"]).await;
    out.exits(2);
    let both = c.file(
        "both.toml",
        &rule("both", "live", "2.00").extra("ultraserver_types = [\"u-trn2x64\"]\nultraserver_counts = [1]").toml(),
    );
    let out = c.run(&["rules", "validate", &both]).await;
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(out.stdout.contains("ultraserver_types: a rule asks for instances"), "{}", out.stdout);
    let ultra = c.file(
        "ultra.toml",
        &rule("ultra", "live", "2.00")
            .instance_types(&[])
            .instance_counts(&[])
            .extra("ultraserver_types = [\"u-trn2x64\"]\nultraserver_counts = [1, 2]")
            .toml(),
    );
    let out = c.run(&["rules", "validate", &ultra]).await;
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert!(out.stdout.contains("2 question(s) per scan"), "{}", out.stdout);
}

/// `capblock preflight` on a live local stack with a rule: every check passes (the purchase
/// permissions reported as not checked), the findings are stored, and `status` shows them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_passes_on_a_live_local_stack_and_status_shows_it() {
    let c = Cli::new("cli-preflight-ok").await.with_west(Mode::Live, "1000").await;
    let out = c.run(&["preflight", "--pause-seconds", "0.05"]).await;
    out.exits(0);
    assert!(out.stdout.contains("preflight passed"), "{}", out.stdout);
    assert!(out.stdout.contains("market us-west-2 p5.48xlarge") && out.stdout.contains("answered"), "{}", out.stdout);
    assert!(out.stdout.contains("offering ids (us-west-2)"), "{}", out.stdout);
    assert!(out.stdout.contains("not checked"), "the purchase permissions are never claimed: {}", out.stdout);
    let status = c.run(&["status"]).await;
    assert!(status.stdout.contains("preflight: passed at"), "{}", status.stdout);
}

/// `market()` where the account's quota for `family` is 0: every search for it is refused.
fn quota_zero_market(family: &str) -> String {
    ScenarioToml::new(5, T0)
        .payment("succeed", None)
        .p5("us-west-2", &[2], "2.75")
        .raw(&format!("[[regions]]\nname = \"us-west-2\"\nzero_quota_families = [\"{family}\"]\n"))
        .build()
}

/// A family whose quota is 0 and an alerts topic nobody confirmed: each a failed check that
/// says what to do, exit 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_names_a_quota_of_0_and_an_unheard_alerts_topic() {
    let c = Cli::on("cli-preflight-fail", &quota_zero_market("p5")).await;
    let sns = aws_sdk_sns::Client::new(&c.aws.sdk);
    let unheard = sns.create_topic().name(format!("unheard-{}", uuid::Uuid::new_v4().simple())).send().await.unwrap();
    let settings = StoredSettings {
        stack: StackSettings {
            name: STACK.into(),
            mode: Mode::Live,
            account_budget: Some(usd("1000")),
            team_budgets: Default::default(),
        },
        alerts_topic: unheard.topic_arn().unwrap().to_string(),
        written_at: t0(),
    };
    c.aws.store().store_settings(&settings).await.unwrap();
    c.put_rule(&rule_toml("west", "live", "3.00")).await;
    let out = c.run(&["preflight", "--pause-seconds", "0.05", "--json"]).await;
    out.exits(2);
    let findings = out.json()["findings"].as_array().unwrap().clone();
    let failed: Vec<&str> =
        findings.iter().filter(|f| f["verdict"] == "fail").map(|f| f["check"].as_str().unwrap()).collect();
    assert_eq!(failed, ["alerts topic", "market us-west-2 p5.48xlarge"], "{findings:#?}");
    let todo =
        |check: &str| findings.iter().find(|f| f["check"] == check).unwrap()["todo"].as_str().unwrap().to_string();
    assert!(todo("alerts topic").contains("subscribe"), "{findings:#?}");
    assert!(todo("market us-west-2 p5.48xlarge").contains("Service Quotas"), "{findings:#?}");
    assert!(c.run(&["status"]).await.stdout.contains("preflight: FAILED at"));
}

/// A one-shot search of a family whose quota is 0 ends: each refusal is said on stderr as it is
/// waited out, the family is given up with the finding and the quota to request, the family
/// that answered is still shown, and the exit code is 2. `--refill-seconds` (EC2's refill as
/// the search paces itself) makes its waits short here; the test's bound only stops a search
/// that would not end (before, it asked for an hour).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_search_of_a_quota_0_family_ends_with_the_finding() {
    let c = &Cli::on("cli-offerings-quota-0", &quota_zero_market("trn2")).await;
    let search = |types: &'static str, json: bool| {
        let mut args = vec!["offerings", "--types", types, "--regions", "us-west-2", "--days", "1", "--from", NOW];
        args.extend(["--refill-seconds", "0.05"]);
        if json {
            args.push("--json");
        }
        async move {
            let run = c.run(&args);
            tokio::time::timeout(std::time::Duration::from_secs(120), run).await.expect("the search ends")
        }
    };
    let out = search("p5.48xlarge,trn2.48xlarge", false).await;
    out.exits(2);
    assert!(out.stdout.contains("1 offering(s) from 2 question(s)"), "the p5 offering is shown: {}", out.stdout);
    let said: Vec<&str> = out.stderr.lines().collect();
    assert!(said[0].starts_with("asking 2 question(s) in 1 region(s), one call every 100ms"), "{}", out.stderr);
    let refused = "us-west-2 trn2.48xlarge: refused by EC2 (CapacityBlockDescribeLimitExceeded): describe limit or a \
                   quota of 0 for TRN2; retrying at one call every";
    for n in 1..=2 {
        let spell = format!("({n} of 3 refusals, then the family is given up)");
        assert!(said.iter().any(|l| l.starts_with(refused) && l.ends_with(&spell)), "refusal {n}: {}", out.stderr);
    }
    let finding = said.iter().position(|l| l.starts_with("error: us-west-2 trn2: EC2 refused every search")).unwrap();
    // The local stack's Service Quotas has no Capacity Block row: it cannot tell the two apart.
    assert!(said[finding].contains("quota for TRN2 is likely 0, or someone else"), "{}", out.stderr);
    assert!(
        said[finding + 1].starts_with("  what to do: if Service Quotas shows 0 for it, request \"Concurrent TRN2 Capacity Blocks per account\" in us-west-2"),
        "{}",
        out.stderr
    );
    assert!(said[finding + 1].contains("192 per trn2.48xlarge"), "{}", out.stderr);

    let json = search("p5.48xlarge,trn2.48xlarge", true).await;
    json.exits(2);
    let doc = json.json();
    assert_eq!(doc["offerings"].as_array().unwrap().len(), 1, "{doc:#}");
    assert_eq!((&doc["refused"][0]["region"], &doc["refused"][0]["family"]), (&"us-west-2".into(), &"trn2".into()));
    assert_eq!(doc["refused"][0]["quota_vcpus"], Value::Null, "{doc:#}");
    assert!(json.stderr.contains("refused by EC2") && json.stderr.contains("error: us-west-2 trn2"), "{}", json.stderr);

    // A single question: said from the start, and the same end.
    let one = search("trn2.48xlarge", false).await;
    one.exits(2);
    assert!(one.stderr.starts_with("asking 1 question(s) in 1 region(s)"), "{}", one.stderr);
    assert!(one.stderr.contains("error: us-west-2 trn2: EC2 refused every search"), "{}", one.stderr);
}

/// Preflight under each reading the simulator plays where the record is silent or contradicts
/// an earlier belief: offering ids repeated or minted per answer (it says which), and a block
/// not started showing its count or 0 with EC2's tag (read either way).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_reports_each_reading_of_the_market() {
    for (i, (ids, counts, says)) in
        [("stable", "zero", "kept their ids"), ("per_answer", "full", "minted per answer")].into_iter().enumerate()
    {
        let scenario = ScenarioToml::new(5, T0)
            .payment("succeed", None)
            .offering_ids(ids)
            .counts_before_start(counts)
            .p5("us-west-2", &[2], "2.75")
            .build();
        let c = Cli::on(&format!("cli-preflight-reading-{i}"), &scenario).await;
        c.stack(Mode::DryRun, None).await;
        c.put_rule(&rule_toml("west", "live", "3.00")).await;
        // A block bought by hand (through EC2's API), not started: its count as this reading
        // shows it.
        let conf = aws_sdk_ec2::config::Builder::from(&c.sim.sdk(capblock_tests::quick_timeouts()).await)
            .region(aws_sdk_ec2::config::Region::new("us-west-2"))
            .build();
        let ec2 = aws_sdk_ec2::Client::from_conf(conf);
        let offers = ec2
            .describe_capacity_block_offerings()
            .instance_type("p5.48xlarge")
            .instance_count(1)
            .capacity_duration_hours(24)
            .send()
            .await
            .unwrap();
        let id = offers.capacity_block_offerings()[0].capacity_block_offering_id().unwrap().to_string();
        let bought = ec2
            .purchase_capacity_block()
            .capacity_block_offering_id(id)
            .instance_platform(aws_sdk_ec2::types::CapacityReservationInstancePlatform::LinuxUnix)
            .send()
            .await
            .unwrap();
        let rid = bought.capacity_reservation().unwrap().capacity_reservation_id().unwrap().to_string();
        let out = c.run(&["preflight", "--pause-seconds", "0.05", "--json"]).await;
        assert_eq!(out.code, 0, "{ids}/{counts}: {}{}", out.stdout, out.stderr);
        let findings = out.json()["findings"].as_array().unwrap().clone();
        let seen = |prefix: &str| {
            findings.iter().find(|f| f["check"].as_str().unwrap().starts_with(prefix)).map(|f| f["seen"].to_string())
        };
        assert!(seen("offering ids").unwrap().contains(says), "{ids}: {findings:#?}");
        let block = seen(&format!("blocks us-west-2 {rid}")).unwrap_or_default();
        // Either way capblock reads its true count (from EC2's tag while EC2 shows 0).
        assert!(block.contains("reads as 1 instance(s)"), "{counts}: {findings:#?}");
    }
}

/// The stack's three functions behind the local Lambda API (each as its own role: its own access
/// key, which the simulator may refuse an action to), reachable by Lambda's Invoke through one
/// router: what `capblock preflight` invokes to have each function check its own role.
struct Functions {
    apis: Vec<runtime::RuntimeApi>,
    _children: Vec<tokio::process::Child>,
    router: runtime::InvokeRouter,
}

impl Functions {
    /// The three functions, with `extra` on top of the stack's environment.
    async fn start(c: &Cli, extra: &[(&str, &str)]) -> Functions {
        let mut env = binary_env(&c.sim, &c.aws, STACK);
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        env.extend(
            [
                ("CAPBLOCK_WORKLOADS_TOPIC_ARN", c.aws.workloads_topic.as_str()),
                ("CAPBLOCK_SCHEDULE_GROUP", "default"),
                ("CAPBLOCK_REMINDER_TARGET_ARN", "arn:aws:lambda:us-east-1:123456789012:function:on-capacity-event"),
                ("CAPBLOCK_REMINDER_ROLE_ARN", "arn:aws:iam::123456789012:role/capblock-reminder"),
                // The stack's HandoffClusters: track-blocks tries DescribeNodegroup in the first.
                ("CAPBLOCK_HANDOFF_CLUSTERS", "train,infer"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        let (mut apis, mut children, mut routes) = (Vec::new(), Vec::new(), std::collections::BTreeMap::new());
        for kind in ["scan-offerings", "track-blocks", "on-capacity-event"] {
            let config =
                runtime::Config { function_arn: runtime::function_arn("us-east-1", kind), ..Default::default() };
            let api = runtime::RuntimeApi::start(config).await.expect("start a local Lambda API");
            let mut own = env.clone();
            own.push(("AWS_ACCESS_KEY_ID".into(), format!("{kind}-role")));
            let function = runtime::Function::new(runtime::binary(kind))
                .name(kind)
                .env("RUST_LOG", std::env::var("CAPBLOCK_FUNCTION_LOG").unwrap_or_else(|_| "warn".into()))
                .envs(own.iter().map(|(k, v)| (k, v)));
            children.push(api.spawn(function).expect("start the function"));
            routes.insert(kind.to_string(), api.url());
            apis.push(api);
        }
        let router = runtime::InvokeRouter::start(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), routes)
            .await
            .expect("start the Invoke router");
        Functions { apis, _children: children, router }
    }
}

/// Each function checks its own role when preflight invokes it: a purchase the simulator refuses
/// to scan-offerings' key is a failed finding naming the action, the region and what to do; with
/// nothing refused every tried action is allowed, and what has an effect is named not checked.
/// scan-offerings is found by the name it recorded on its first run; the others by `--function`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_has_each_function_check_its_own_role() {
    for denied in [true, false] {
        let mut scenario = ScenarioToml::new(5, T0).payment("succeed", None).p5("us-west-2", &[2], "2.75");
        if denied {
            scenario = scenario.behaviour(
                "iam_denials = [{ access_key = \"scan-offerings-role\", action = \"PurchaseCapacityBlock\", regions = [\"us-west-2\"] }]",
            );
        }
        let c = Cli::on(&format!("cli-preflight-roles-{denied}"), &scenario.build()).await;
        c.stack(Mode::Live, Some("1000")).await;
        let f = Functions::start(&c, &[]).await;
        // The scan's first run (no rules yet: nothing to ask) records its name.
        let scan = f.apis[0].invoke(serde_json::json!({"source": "capblock.schedule"}));
        let ran = f.apis[0].wait_outcome(&scan, std::time::Duration::from_secs(60)).await;
        assert!(matches!(ran, Some(Outcome::Response(_))), "{ran:?}");
        c.put_rule(&rule_toml("west", "live", "3.00")).await;
        if !denied {
            // A rule whose hand-off runs in a member account: the member role is assumed there
            // (moto's STS), which is the role's check of sts:AssumeRole.
            let consumer = rule("consumer", "live", "3.00")
                .extra("share_with = [\"111111111111\"]\nhandoff_account = \"111111111111\"\n")
                .toml();
            c.put_rule(&consumer).await;
            // The rule shares its blocks: preflight asks Organizations whether RAM may share
            // with the Organization (moto's; the stack's account manages it here).
            let orgs = aws_sdk_organizations::Client::new(&c.aws.sdk);
            let made = orgs
                .create_organization()
                .feature_set(aws_sdk_organizations::types::OrganizationFeatureSet::All)
                .send()
                .await;
            if let Err(e) = made {
                let why = aws_sdk_organizations::error::DisplayErrorContext(&e).to_string();
                assert!(why.contains("AlreadyInOrganization"), "{why}");
            }
            orgs.enable_aws_service_access().service_principal("ram.amazonaws.com").send().await.unwrap();
        }
        let out = c
            .unconfirmed_with(
                &[
                    "preflight",
                    "--pause-seconds",
                    "0.05",
                    "--json",
                    "--function",
                    "track-blocks=track-blocks",
                    "--function",
                    "on-capacity-event=on-capacity-event",
                ],
                &[("AWS_ENDPOINT_URL_LAMBDA", f.router.url().as_str())],
            )
            .await;
        let findings = out.json()["findings"].as_array().unwrap().clone();
        let finding = |check: &str| {
            findings.iter().find(|x| x["check"] == check).unwrap_or_else(|| panic!("{check}: {findings:#?}")).clone()
        };
        let purchase = finding("role of scan-offerings: ec2:PurchaseCapacityBlock");
        if denied {
            out.exits(2);
            assert_eq!(purchase["verdict"], "fail", "{purchase:#}");
            assert!(purchase["seen"].as_str().unwrap().contains("us-west-2"), "{purchase:#}");
            assert!(purchase["seen"].as_str().unwrap().contains("not authorized"), "{purchase:#}");
            assert!(purchase["todo"].as_str().unwrap().contains("PurchaseRegions"), "{purchase:#}");
            // Tags ride on the purchase: not claimed when the purchase was refused.
            assert_eq!(finding("role of scan-offerings: ec2:CreateTags")["verdict"], "not-checked");
            // No rule names a member account: nothing to assume.
            assert_eq!(finding("role of track-blocks: sts:AssumeRole")["verdict"], "not-checked");
            // No rule shares: RAM's access to the Organization is not needed.
            assert_eq!(finding("RAM sharing with the Organization")["verdict"], "ok");
        } else {
            let assumed = finding("role of track-blocks: sts:AssumeRole");
            assert_eq!(assumed["verdict"], "ok", "{assumed:#}");
            let ram = finding("RAM sharing with the Organization");
            assert_eq!(ram["verdict"], "ok", "{ram:#}");
            assert!(ram["seen"].as_str().unwrap().contains("consumer"), "{ram:#}");
            out.exits(0);
            assert_eq!(purchase["verdict"], "ok", "{purchase:#}");
            assert_eq!(finding("role of scan-offerings: ec2:CreateTags")["verdict"], "ok");
        }
        for (check, verdict) in [
            ("role of scan-offerings: ec2:DescribeCapacityBlockOfferings", "ok"),
            ("role of scan-offerings: dynamodb:PutItem", "ok"),
            ("role of scan-offerings: sns:Publish", "not-checked"),
            ("role of track-blocks: ec2:DescribeCapacityReservations", "ok"),
            ("role of track-blocks: scheduler:GetSchedule", "ok"),
            ("role of track-blocks: autoscaling:SetDesiredCapacity", "not-checked"),
            ("role of track-blocks: resource-groups:GroupResources", "not-checked"),
            // A node group that is not there, asked of moto's EKS in a named cluster: allowed.
            ("role of track-blocks: eks:DescribeNodegroup", "ok"),
            ("role of track-blocks: eks:UpdateNodegroupConfig", "not-checked"),
            ("role of on-capacity-event: ec2:DescribeInstances", "ok"),
            ("role of on-capacity-event: events:PutEvents", "not-checked"),
        ] {
            assert_eq!(finding(check)["verdict"], verdict, "{check}: {:#}", finding(check));
        }
        // The probe items were written and removed again: the table holds none.
        let left = c
            .aws
            .store()
            .client()
            .query()
            .table_name(c.aws.table.as_str())
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", aws_sdk_dynamodb::types::AttributeValue::S("PREFLIGHT#PROBE".into()))
            .send()
            .await
            .unwrap();
        assert_eq!(left.count(), 0, "{:?}", left.items());
        assert!(c.sim.purchases().await.is_empty(), "a preflight buys nothing");
        if denied {
            // Lambda out of reach (nothing listens): the advice is the network's, never a
            // permission the operator already has.
            let out = c
                .unconfirmed_with(
                    &["preflight", "--pause-seconds", "0.05", "--json", "--function", "track-blocks=track-blocks"],
                    &[("AWS_ENDPOINT_URL_LAMBDA", "http://127.0.0.1:9")],
                )
                .await;
            let findings = out.json()["findings"].as_array().unwrap().clone();
            let track = findings.iter().find(|x| x["check"] == "role of track-blocks").expect("the finding");
            assert_eq!(track["verdict"], "fail", "{track:#}");
            let todo = track["todo"].as_str().unwrap();
            assert!(todo.contains("network") && !todo.contains("lambda:InvokeFunction"), "{track:#}");
            assert!(track["seen"].as_str().unwrap().contains("could not be reached"), "{track:#}");
        }
    }
}

/// Preflight has scan-offerings ask each watch member, through the member's watch role (which
/// trusts the stack's roles only), one question per region and family the rules ask: a member
/// whose p5 quota is 0 (every account starts at 0) is "quota 0 or busy" with the quota to request
/// there or the way out of WatchAccounts; a member with its quota answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_asks_each_watch_member_and_names_one_without_quota() {
    const ZERO: &str = "111111111111";
    const LENDS: &str = "222222222222";
    let scenario = ScenarioToml::new(5, T0)
        .payment("succeed", None)
        .p5("us-west-2", &[2], "2.75")
        .raw(&format!("[[accounts]]\nid = \"{ZERO}\"\nzero_quota_families = [\"p5\"]\n"))
        .build();
    let c = Cli::on("cli-preflight-members", &scenario).await;
    c.stack(Mode::Live, Some("1000")).await;
    let f = Functions::start(&c, &[("CAPBLOCK_WATCH_ACCOUNTS", &format!("{ZERO},{LENDS}"))]).await;
    c.put_rule(&rule_toml("west", "live", "3.00")).await;
    let out = c
        .unconfirmed_with(
            &["preflight", "--pause-seconds", "0.05", "--json", "--function", "scan-offerings=scan-offerings"],
            &[("AWS_ENDPOINT_URL_LAMBDA", f.router.url().as_str())],
        )
        .await;
    assert_ne!(out.code, 1, "{}{}", out.stdout, out.stderr);
    let findings = out.json()["findings"].as_array().unwrap().clone();
    let finding = |check: &str| {
        findings.iter().find(|x| x["check"] == check).unwrap_or_else(|| panic!("{check}: {findings:#?}")).clone()
    };
    let zero = finding(&format!("watch member {ZERO}"));
    assert_eq!(zero["verdict"], "warn", "{zero:#}");
    let seen = zero["seen"].as_str().unwrap();
    assert!(seen.contains("quota 0 or busy") && seen.contains("us-west-2 p5.48xlarge"), "{zero:#}");
    let todo = zero["todo"].as_str().unwrap();
    assert!(todo.contains("\"Concurrent P5 Capacity Blocks per account\" in us-west-2"), "{zero:#}");
    assert!(todo.contains(&format!("drop {ZERO} from WatchAccounts")), "{zero:#}");
    let lends = finding(&format!("watch member {LENDS}"));
    assert_eq!(lends["verdict"], "ok", "{lends:#}");
    assert!(lends["seen"].as_str().unwrap().contains("answered"), "{lends:#}");
    // Asked through the member's own credentials: the member's calls, refused for its quota.
    let state = c.sim.state().await;
    assert_eq!(state["faults_injected"]["quota_zero_by_account"][ZERO], 3, "{state}");
    // The buying account's own quota is not the member's: its question was answered.
    assert_eq!(finding("market us-west-2 p5.48xlarge")["verdict"], "ok");
    // The table shows each member's finding.
    let table = c
        .unconfirmed_with(
            &["preflight", "--pause-seconds", "0.05", "--function", "scan-offerings=scan-offerings"],
            &[("AWS_ENDPOINT_URL_LAMBDA", f.router.url().as_str())],
        )
        .await;
    assert!(table.stdout.contains(ZERO) && table.stdout.contains(LENDS), "{}", table.stdout);
}

/// `capblock buy` takes an offering `offerings` showed, for a rule, through the scan's path: not
/// without a yes, only in a live stack, only what the rule could buy itself, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buy_takes_one_shown_offering_once_within_the_rules_limits() {
    // Under both readings of offering ids: kept from answer to answer, or minted per answer
    // (the id shown is then bought as the same block under the id of the fresh answer).
    for ids in ["stable", "per_answer"] {
        buy_once_under(ids).await;
    }
}

async fn buy_once_under(ids: &str) {
    let scenario =
        ScenarioToml::new(5, T0).payment("succeed", None).offering_ids(ids).p5("us-west-2", &[2], "2.75").build();
    let c = Cli::on(&format!("cli-buy-{ids}"), &scenario).await.with_west(Mode::DryRun, "1000").await;
    c.put_rule(&rule_toml("cheap", "live", "2.00")).await;
    let shown = c.run(&["offerings", "--type", "p5.48xlarge", "--region", "us-west-2", "--days", "1", "--json"]).await;
    shown.exits(0);
    let id = shown.json()["offerings"][0]["offering"]["id"].as_str().unwrap().to_string();
    let table = c.run(&["offerings", "--types", "p5.48xlarge", "--regions", "us-west-2", "--days", "1"]).await;
    assert!(table.stdout.contains("capblock buy OFFERING-ID --rule RULE"), "{}", table.stdout);

    let refused = |out: &Out, why: &str| {
        assert_eq!(out.code, 2, "{why}: {}{}", out.stdout, out.stderr);
        assert!(out.stderr.contains(why), "{why}: {}", out.stderr);
    };
    // A dry-run stack buys nothing, whatever the operator says.
    refused(&c.run(&["buy", &id, "--rule", "west", "--yes"]).await, "dry-run");
    c.stack(Mode::Live, Some("1000")).await;
    // No terminal to ask on and no --yes: nothing bought.
    // The plan is said first: the block, its price against the threshold, each budget before
    // and after the fee, and that a purchase cannot be cancelled.
    let unasked = c.run(&["buy", &id, "--rule", "west"]).await;
    unasked.exits(2);
    let plan = &unasked.stderr;
    assert!(
        plan.contains("Buy 1 x p5.48xlarge in us-west-2")
            && plan.contains("per accelerator-hour; rule west's threshold 3.00"),
        "{plan}"
    );
    assert!(plan.contains("cannot be cancelled"), "{plan}");
    let row =
        |name: &str| plan.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name}: {plan}")).to_string();
    assert!(row("rule west").contains("0.00"), "{plan}");
    assert!(row("the account").contains("1000.00"), "the account's cap: {plan}");
    assert!(plan.contains("LEFT AFTER"), "{plan}");
    // Above the rule's threshold: refused before anything is reserved.
    refused(&c.run(&["buy", &id, "--rule", "cheap", "--yes"]).await, "above the rule's threshold");
    assert_eq!(c.run(&["buy", "cb-0000000000000000f", "--rule", "west", "--yes"]).await.code, 3);
    assert_eq!(c.run(&["buy", &id, "--rule", "nobody", "--yes"]).await.code, 3);
    assert!(c.sim.purchases().await.is_empty());

    // By the short id the table printed (cb- and 8 characters), as by the whole one; less than
    // that names nothing.
    let first = table.stdout.lines().nth(1).and_then(|l| l.split_whitespace().next()).unwrap_or_default();
    assert!(first.len() == 11 && first.starts_with("cb-"), "the table's short id: {}", table.stdout);
    assert_eq!(c.run(&["buy", &id[..8], "--rule", "west", "--yes"]).await.code, 3);
    let out = c.run(&["buy", &id[..11], "--rule", "west", "--yes"]).await;
    out.exits(0);
    assert!(out.stdout.contains("bought 1 x p5.48xlarge"), "{}", out.stdout);
    let purchases = c.sim.purchases().await;
    assert_eq!(purchases.len(), 1);
    assert_eq!(purchases[0]["tags"]["capblock:rule"], "west", "{purchases:#?}");
    // Again: the rule holds its one block; nothing more is bought.
    refused(&c.run(&["buy", &id, "--rule", "west", "--yes"]).await, "block");
    assert_eq!(c.sim.purchases().await.len(), 1);
    let usage = c.aws.store().usage(&BudgetOwner::Account, &Period::of(t0())).await.unwrap().unwrap();
    assert_eq!(usage.purchases, 1);
}

/// `--stack NAME` finds the table in the stack's CloudFormation outputs, with no CAPBLOCK_TABLE
/// set, and says so; the config file's `stack` does the same; a stack that does not exist is
/// named as such (exit 3), and with nothing named the error says how to name one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_finds_its_table_in_the_stacks_outputs() {
    let c = Cli::new("cli-stack").await;
    c.stack(Mode::Live, Some("1000")).await;
    let name = format!("capblock-cli-{}", uuid::Uuid::new_v4().simple());
    let template = serde_json::json!({
        "Resources": {"Alerts": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {"TableName": {"Value": c.aws.table.as_str()}},
    });
    aws_sdk_cloudformation::Client::new(&c.aws.sdk)
        .create_stack()
        .stack_name(&name)
        .template_body(template.to_string())
        .send()
        .await
        .unwrap();
    let out = c.command(&["--stack", &name, "status"], &[], &["CAPBLOCK_TABLE"]).await;
    out.exits(0);
    assert!(out.stdout.contains("in mode live"), "the stack's stored mode: {}", out.stdout);
    // A command that only reads says nothing of the stack on stderr (status shows it); one that
    // moves money says it once, on one line: `stack_said_once_where_money_moves`.
    assert_eq!(out.stderr, "", "{}", out.stderr);

    let config = c.file("config.toml", &format!("stack = \"{name}\"\n"));
    let out = c
        .command(
            &["rules", "list"],
            &[("CAPBLOCK_CONFIG", config.as_str())],
            &["CAPBLOCK_TABLE", "CAPBLOCK_STACK_NAME"],
        )
        .await;
    assert_eq!(out.code, 0, "the config file's stack: {}{}", out.stdout, out.stderr);

    let missing = c.command(&["--stack", "no-such-stack", "status"], &[], &["CAPBLOCK_TABLE"]).await;
    missing.exits(3);
    assert!(missing.stderr.contains("no stack \"no-such-stack\""), "{}", missing.stderr);
    let none = c.command(&["status"], &[], &["CAPBLOCK_TABLE", "CAPBLOCK_STACK_NAME"]).await;
    none.exits(1);
    assert!(none.stderr.contains("--stack NAME"), "{}", none.stderr);
    // A table that is not there is named as such, without the SDK's debug dump.
    let gone = c.command(&["status"], &[("CAPBLOCK_TABLE", "no-such-table")], &["CAPBLOCK_STACK_NAME"]).await;
    gone.exits(1);
    assert!(gone.stderr.contains("the stack's table does not exist here"), "{}", gone.stderr);
    assert!(!gone.stderr.contains("ServiceError("), "{}", gone.stderr);
}

/// Money never moves unasked: without a terminal to confirm on, a live scan and an approval
/// buy nothing unless the script says `--yes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_scan_or_an_approval_without_a_yes_buys_nothing() {
    let c = Cli::new("cli-confirm").await.with_west(Mode::Live, "100000").await;
    let out = c.unconfirmed(&["scan", "--mode", "live"]).await;
    out.exits(2);
    assert!(out.stderr.contains("pass --yes") && out.stderr.contains("nothing bought"), "{}", out.stderr);
    let out = c.unconfirmed(&["approve", "west/cb-00000000000000000"]).await;
    assert_ne!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(c.sim.purchases().await.is_empty());
    // Said yes to: bought.
    let out = c.run(&["scan", "--mode", "live"]).await;
    out.exits(0);
    assert_eq!(c.sim.purchases().await.len(), 1);
}

/// A live scan says what it would buy before it asks: the block (rule, type x count, zone, start,
/// length, fee, price per accelerator-hour), each budget before and after, and that a purchase
/// cannot be cancelled, on an 80-column terminal's width; without a terminal and without `--yes`
/// it then refuses (exit 2, saying how). With `--yes` it shows the same plan and buys that block.
/// With nothing to buy it says so and asks nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_scan_shows_its_plan_before_it_asks() {
    let c = Cli::new("cli-scan-plan").await.with_west(Mode::Live, "100000").await;
    let narrow = [("COLUMNS", "80")];
    let out = c.unconfirmed_with(&["scan", "--mode", "live"], &narrow).await;
    out.exits(2);
    let plan = &out.stderr;
    for needle in [
        "buys 1 block(s) now",
        "west",
        // At 80 columns the block's cell wraps after "1 x", as `offerings`' does.
        "1 x",
        "p5.48xlarge",
        "us-west-2a",
        "2026-12-03 11:30",
        "1d",
        "528.00",
        "2.7500",
        "rule west",
        "the account",
        "100000.00",
        "cannot be cancelled",
        "pass --yes",
        "nothing bought",
    ] {
        assert!(plan.contains(needle), "{needle:?} missing from the plan:\n{plan}");
    }
    for line in plan.lines().filter(|l| l.contains("  ")) {
        assert!(line.chars().count() <= 80, "a table line wider than the terminal: {line:?}\n{plan}");
    }
    assert!(c.sim.purchases().await.is_empty(), "nothing bought before a yes");
    assert!(c.aws.store().open_intents().await.unwrap().is_empty(), "the plan reserved nothing");

    let out = c.run(&["scan", "--mode", "live"]).await;
    out.exits(0);
    assert!(out.stderr.contains("buys 1 block(s) now") && out.stderr.contains("528.00"), "{}", out.stderr);
    assert_eq!(c.sim.purchases().await.len(), 1);

    // Nothing left to buy (the rule holds its one block): said, not asked, even without --yes.
    let out = c.unconfirmed(&["scan", "--mode", "live"]).await;
    out.exits(0);
    assert!(out.stderr.contains("would buy nothing now"), "{}", out.stderr);
    assert!(!out.stderr.contains("Type `yes`") && !out.stderr.contains("pass --yes"), "{}", out.stderr);
    // And why: the check that holds the rule back, in words.
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(said.contains("holds 1 block(s), its limit is 1"), "the reason is said: {said}");
    assert_eq!(c.sim.purchases().await.len(), 1);
}

/// `capblock rules validate` of a file holding rule `west` (live, up to 3.00) with a
/// `max_total_fee` of `fee`.
async fn validate_fee_cap(c: &Cli, fee: &str) -> Out {
    let text = rule("west", "live", "3.00").extra(&format!("max_total_fee = \"{fee}\"")).toml();
    let file = c.file(&format!("max-total-fee-{fee}.toml"), &text);
    c.run(&["rules", "validate", &file]).await
}

/// A `max_total_fee` no block of the rule could cost is a validation error naming the field, the
/// figures and what would work: 1 x p5.48xlarge for a day less the 12 h tolerance is 12 h x 8
/// GPUs, 0.96 USD at a cent a GPU-hour.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_validate_refuses_a_max_total_fee_that_can_never_buy() {
    let c = Cli::new("cli-never-buys").await;
    let out = validate_fee_cap(&c, "0.5").await;
    out.exits(2);
    out.says(&["max_total_fee", "0.50 USD can never buy anything", "0.96 USD", "at least 0.96"]);
    let out = validate_fee_cap(&c, "0.96").await;
    out.exits(0);
}

/// The id of the first offering `capblock offerings` shows for one p5.48xlarge for a day in
/// us-west-2 (remembered for `capblock buy`).
async fn shown_offering(c: &Cli) -> String {
    let shown = c.run(&["offerings", "--type", "p5.48xlarge", "--region", "us-west-2", "--days", "1", "--json"]).await;
    shown.exits(0);
    shown.json()["offerings"][0]["offering"]["id"].as_str().unwrap().to_string()
}

/// A hand purchase for `rule` whose answer is lost, after EC2 made it (`made`) or on its way
/// there (the simulator holds the call, then loses it): its intent stays Sent.
async fn bought_answer_lost(c: &Cli, rule: &str, made: bool) {
    let id = shown_offering(c).await;
    let before = c.sim.purchases().await.len();
    let out = if made {
        c.sim.behaviour(r#"{"drop_purchase_response": true, "timeout_secs": 1}"#).await;
        c.run(&["buy", &id, "--rule", rule, "--yes"]).await
    } else {
        c.sim.behaviour(r#"{"hold_actions": ["PurchaseCapacityBlock"]}"#).await;
        let lose = async {
            // Bounded for a slow machine only: the simulator holds the call until told.
            for _ in 0..12000 {
                if c.sim.held().await["PurchaseCapacityBlock"].as_u64() == Some(1) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            c.sim.release(false).await;
        };
        let args = ["buy", &id, "--rule", rule, "--yes"];
        tokio::join!(c.run(&args), lose).0
    };
    c.sim.behaviour(r#"{"drop_purchase_response": false, "hold_actions": []}"#).await;
    assert_eq!(out.code, 1, "an unknown outcome: {}{}", out.stdout, out.stderr);
    // A received purchase is done even if the client gave up first: wait for it, bounded.
    for _ in 0..(if made { 12000 } else { 0 }) {
        if c.sim.purchases().await.len() > before {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(c.sim.purchases().await.len(), before + usize::from(made));
    let open = c.aws.store().open_intents().await.unwrap();
    assert!(open.iter().any(|i| i.rule_id == rule && i.state == IntentState::Sent), "{open:#?}");
}

/// A clock for the CLI alone (its CAPBLOCK_SIMULATED_CLOCK_URL), `offset_minutes` off the
/// stack's: a second simulator whose clock starts there.
async fn machine_clock(offset_minutes: i64) -> (Sim, String) {
    let at = (t0() + Duration::minutes(offset_minutes)).to_rfc3339();
    let sim = Sim::start(&ScenarioToml::new(1, &at).build()).await;
    let url = format!("{}/_sim/clock", sim.url.trim_end_matches('/'));
    (sim, url)
}

/// A person's dry-run scan of a live stack, on a machine whose clock is an hour ahead of AWS's,
/// settles, stores and announces nothing: the purchase in flight stays open for the stack's
/// function (a scan that settled it on such a clock freed its fee and bought again), and no
/// price or decision is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_scan_from_the_cli_settles_stores_and_announces_nothing() {
    let c = Cli::new("cli-scan-look").await.with_west(Mode::Live, "1000").await;
    bought_answer_lost(&c, "west", true).await;
    c.aws.alerts().await;
    let (_ahead, clock) = machine_clock(60).await;
    let out = c.unconfirmed_with(&["scan", "--ask-seconds", "2"], &[("CAPBLOCK_SIMULATED_CLOCK_URL", &clock)]).await;
    out.exits(0);
    assert!(out.stdout.contains("nothing settled, stored or announced"), "{}", out.stdout);
    assert!(!out.stdout.contains("settled:"), "{}", out.stdout);
    let store = c.aws.store();
    let open = store.open_intents().await.unwrap();
    assert_eq!(open.iter().map(|i| i.state).collect::<Vec<_>>(), [IntentState::Sent], "left to the function");
    assert!(store.open_blocks(None).await.unwrap().is_empty(), "nothing recorded by the person's scan");
    assert!(c.aws.alerts().await.is_empty(), "nothing announced");
    let (region, kind) = ("us-west-2".parse().unwrap(), "p5.48xlarge".parse().unwrap());
    let far = Duration::days(365);
    assert!(store.history(&region, &kind, t0() - far, t0() + far).await.unwrap().is_empty(), "no price stored");
    assert_eq!(c.sim.purchases().await.len(), 1);
}

/// A hand purchase takes its time from AWS: a machine whose clock is 20 minutes behind (or an
/// hour ahead) is refused before anything is reserved, with what to do; within a minute, it
/// buys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_purchase_is_refused_on_a_machine_whose_clock_is_off() {
    let c = Cli::new("cli-skew").await.with_west(Mode::Live, "1000").await;
    let id = shown_offering(&c).await;
    for (minutes, side, said) in [(-20, "behind", "20m"), (60, "ahead of", "1h")] {
        let (_clock_sim, clock) = machine_clock(minutes).await;
        let env = [("CAPBLOCK_SIMULATED_CLOCK_URL", clock.as_str())];
        let out = c.unconfirmed_with(&["buy", &id, "--rule", "west", "--yes"], &env).await;
        out.exits(2);
        let want = format!("{said} {side} AWS's");
        assert!(out.stderr.contains(&want) && out.stderr.contains("NTP"), "{}", out.stderr);
        let live = c.unconfirmed_with(&["scan", "--mode", "live", "--yes"], &env).await;
        live.exits(2);
        assert!(live.stderr.contains(&want), "{}", live.stderr);
    }
    assert!(c.aws.store().open_intents().await.unwrap().is_empty(), "nothing reserved");
    assert!(c.sim.purchases().await.is_empty());
    let out = c.run(&["buy", &id, "--rule", "west", "--yes"]).await;
    out.exits(0);
    assert_eq!(c.sim.purchases().await.len(), 1);
}

/// `capblock intents`: a purchase whose answer was lost is listed; its release is refused while
/// EC2 lists a reservation carrying its tag (the next scan records it as bought), and granted,
/// confirmed, when EC2 holds nothing tagged with it: its fee goes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_purchase_is_released_by_a_person_only_when_ec2_holds_nothing() {
    let c = Cli::new("cli-intents").await.with_west(Mode::Live, "10000").await;
    c.put_rule(&rule_toml("made", "live", "3.00")).await;
    let intent_of = |rule: &'static str| {
        let store = c.aws.store();
        async move { store.open_intents().await.unwrap().into_iter().find(|i| i.rule_id == rule).unwrap().id }
    };
    // Lost on its way to EC2: EC2 holds nothing.
    bought_answer_lost(&c, "west", false).await;
    let lost = intent_of("west").await;
    let list = c.run(&["intents", "list"]).await;
    list.exits(0);
    assert!(list.stdout.contains(&lost) && list.stdout.contains("sent"), "{}", list.stdout);
    // An hour on (`RELEASE_MIN_AGE`): EC2 lists a purchase late.
    c.sim.advance_secs(61 * 60).await;
    let unasked = c.unconfirmed(&["intents", "release", &lost]).await;
    assert_eq!(unasked.code, 2, "no terminal and no --yes: {}{}", unasked.stdout, unasked.stderr);
    assert_eq!(c.run(&["intents", "release", "west/cb-nothing", "--yes"]).await.code, 3);
    let out = c.run(&["intents", "release", &lost, "--yes"]).await;
    out.exits(0);
    assert!(out.stdout.contains("released intent"), "{}", out.stdout);
    let usage = c.aws.store().usage(&BudgetOwner::Rule("west".into()), &Period::of(t0())).await.unwrap().unwrap();
    assert_eq!(usage.committed.amount(), rust_decimal::Decimal::ZERO, "the fee given back");
    // Made by EC2, its answer lost: EC2 lists it, so no person may release it.
    bought_answer_lost(&c, "made", true).await;
    let made = intent_of("made").await;
    c.sim.advance_secs(61 * 60).await;
    let out = c.run(&["intents", "release", &made, "--yes"]).await;
    out.exits(2);
    assert!(out.stderr.contains("the purchase went through"), "{}", out.stderr);
    let open = c.aws.store().open_intents().await.unwrap();
    assert_eq!(open.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), [made.as_str()], "still open");
}

/// Two p5 blocks on sale in us-west-2 (days +2 and +3), a purchase listed `lag_minutes` after
/// it was made: a second block a released purchase could be joined by.
fn two_blocks_listed_late(lag_minutes: i64) -> String {
    ScenarioToml::new(5, T0)
        .payment("succeed", None)
        .behaviour(&format!("listing_lag_secs = {}", lag_minutes * 60))
        .p5("us-west-2", &[2, 3], "2.75")
        .build()
}

/// A live scan from the CLI at the clock's time `minutes` after T0; how many blocks EC2 sold.
async fn live_scan_at(c: &Cli, minutes: i64) -> usize {
    let at = (t0() + Duration::minutes(minutes)).to_rfc3339();
    let out = c.run(&["scan", "--time", &at, "--mode", "live"]).await;
    out.exits(0);
    c.sim.purchases().await.len()
}

/// A person's release while EC2 begins listing the purchase (answer lost, listed 90 minutes
/// after it was made): EC2 lists nothing when asked before the typed yes, and lists it when
/// asked again right before the write, so nothing is released and the purchase stays one block.
/// The simulator holds each DescribeCapacityReservations (AWS's clock is read from one too)
/// and the test moves the clock only once the check before the prompt was answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_while_ec2_starts_listing_the_purchase_ends_with_one_block() {
    let c = Cli::on("cli-release-listing", &two_blocks_listed_late(90)).await.with_west(Mode::Live, "100000").await;
    bought_answer_lost(&c, "west", true).await;
    let intent = c.aws.store().open_intents().await.unwrap()[0].id.clone();
    c.sim.advance_secs(61 * 60).await;
    c.sim.behaviour(r#"{"hold_actions": ["DescribeCapacityReservations"]}"#).await;
    let done = std::sync::atomic::AtomicBool::new(false);
    let release = async {
        let out = c.run(&["intents", "release", &intent, "--yes"]).await;
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        out
    };
    let network = async {
        let mut answered = 0;
        // Bounded for a slow machine only; ends with the command.
        for _ in 0..12000 {
            if done.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            if c.sim.held().await["DescribeCapacityReservations"].as_u64() == Some(1) {
                if answered == 3 {
                    // AWS's clock and the check before the prompt, then AWS's clock after the
                    // yes are answered: EC2 lists it now, for the check right before the write.
                    c.sim.advance_secs(30 * 60).await;
                }
                c.sim.release(true).await;
                answered += 1;
                continue;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    let out = tokio::join!(release, network).0;
    c.sim.behaviour(r#"{"hold_actions": []}"#).await;
    out.exits(2);
    assert!(out.stderr.contains("the purchase went through"), "{}", out.stderr);
    let open = c.aws.store().open_intents().await.unwrap();
    assert_eq!(open.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(), [intent.as_str()], "not released");
    assert_eq!(live_scan_at(&c, 91).await, 1, "one block for a one-block rule");
}

/// A release of an intent sent a minute ago is refused, saying from when it may be released
/// (EC2 lists purchases late); an hour on it is released, and the released purchase still
/// counts against the rule's one block until its start: a later scan buys no second block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_of_a_minute_old_intent_is_refused_and_a_released_one_still_counts() {
    let c = Cli::on("cli-release-young", &two_blocks_listed_late(0)).await.with_west(Mode::Live, "100000").await;
    bought_answer_lost(&c, "west", false).await;
    let intent = c.aws.store().open_intents().await.unwrap()[0].id.clone();
    c.sim.advance_secs(60).await;
    let out = c.run(&["intents", "release", &intent, "--yes"]).await;
    out.exits(2);
    assert!(out.stderr.contains("it may be released from 2026-12-01 01:00 UTC"), "{}", out.stderr);
    assert_eq!(c.aws.store().open_intents().await.unwrap().len(), 1, "still open");
    c.sim.advance_secs(60 * 60).await;
    let out = c.run(&["intents", "release", &intent, "--yes"]).await;
    out.exits(0);
    assert_eq!(live_scan_at(&c, 61).await, 0, "the released purchase holds the rule's one block");
}

/// One approval buys once when EC2 names the block anew in every answer: approving it again,
/// and scanning in between, buys nothing more, and the team page shows the approved record
/// waiting no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_approval_buys_once_under_per_answer_offering_ids() {
    let scenario = ScenarioToml::new(5, T0)
        .payment("succeed", None)
        .offering_ids("per_answer")
        .p5("us-west-2", &[2], "2.75")
        .build();
    let c = Cli::on("cli-approve-renamed", &scenario).await;
    c.stack(Mode::Live, Some("100000")).await;
    c.put_rule(&rule("west", "approval", "3.00").max_blocks_held(3).toml()).await;
    let scan = c.run(&["scan", "--time", NOW, "--mode", "live", "--json"]).await;
    scan.exits(0);
    let intent = scan.json()["outcomes"][0]["action"]["intent"].as_str().unwrap().to_string();
    let out = c.run(&["approve", &intent, "--time", NOW]).await;
    out.exits(0);
    for _ in 0..2 {
        c.run(&["scan", "--time", NOW, "--mode", "live"]).await;
        let again = c.run(&["approve", &intent, "--time", NOW]).await;
        again.exits(2);
    }
    assert_eq!(c.sim.purchases().await.len(), 1, "one approval, one block");
    let page = team_page(&c, &c.dir.join("team.html")).await;
    let approve_line = format!("<code>capblock approve {intent}</code>");
    assert!(!page.contains(&approve_line), "the consumed approval waits no more");
    assert!(!page.contains("capblock approve "), "nor any record of its block under another id");
}

/// Every line of `text` fits `width` columns.
fn fits(text: &str, width: usize) -> bool {
    text.lines().all(|l| l.chars().count() <= width)
}

/// At 80 columns (COLUMNS=80, as a terminal of 80 says) `offerings` fits: no line is wider, the
/// fee's header names the currency, the id a purchase takes is whole. Piped without a width,
/// a row is one line (for grep and awk); `-o wide` adds the region, the end and the price per
/// instance-hour; `-o yaml` and `-o json` carry the same offering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offerings_fit_80_columns_and_wide_shows_every_column() {
    let c = Cli::new("cli-80-offerings").await;
    let args = ["offerings", "--types", "p5.48xlarge", "--regions", "us-west-2", "--days", "1", "--from", NOW];
    let json = c.run(&[&args[..], &["-o", "json"]].concat()).await;
    json.exits(0);
    let id = json.json()["offerings"][0]["offering"]["id"].as_str().unwrap().to_string();
    assert_eq!(c.run(&[&args[..], &["--json"]].concat()).await.json(), json.json(), "--json is -o json");

    let narrow = c.unconfirmed_with(&args, &[("COLUMNS", "80")]).await;
    narrow.exits(0);
    assert!(fits(&narrow.stdout, 80), "wider than 80:\n{}", narrow.stdout);
    let header = narrow.stdout.lines().next().unwrap();
    for column in ["OFFERING", "AZ", "BLOCK", "START", "LENGTH", "USD/ACCEL-H"] {
        assert!(header.contains(column), "{column} missing from the header: {}", narrow.stdout);
    }
    assert!(!header.contains("REGION") && !header.contains("INSTANCE-H"), "wide columns: {}", narrow.stdout);
    // The fee is left out to keep a row a line at 80 columns, and the table says so.
    assert!(!header.contains("FEE"), "{}", narrow.stdout);
    assert!(
        narrow.stdout.contains("left out to fit 80 columns: FEE (USD); -o wide shows every column"),
        "{}",
        narrow.stdout
    );
    // The short id first and whole (cb- and 8 characters: what `buy` takes), and each offering
    // on one line: a header, a line per offering, the count and what to do.
    let short = &id[..11];
    let row = narrow.stdout.lines().find(|l| l.starts_with(&format!("{short} "))).unwrap_or_else(|| {
        panic!("the short id first and whole: {}", narrow.stdout);
    });
    for cell in ["us-west-2a", "1 x p5.48xlarge", "2026-12-03 11:30", "1d", "2.7500"] {
        assert!(row.contains(cell), "{cell} missing from the row {row:?}:\n{}", narrow.stdout);
    }
    let offered = json.json()["offerings"].as_array().unwrap().len();
    // A header, a line per offering, the column left out, the count and how to buy.
    assert_eq!(narrow.stdout.lines().filter(|l| l.starts_with("cb-")).count(), offered, "{}", narrow.stdout);
    assert_eq!(narrow.stdout.lines().count(), 1 + offered + 3, "a row a line:\n{}", narrow.stdout);
    assert!(!narrow.stdout.contains('…'), "{}", narrow.stdout);

    // Piped, without a width: one line per offering, every cell whole.
    let piped = c.run(&args).await;
    let row = piped.stdout.lines().find(|l| l.starts_with(&id[..11])).unwrap_or_else(|| panic!("{}", piped.stdout));
    for cell in ["us-west-2a", "1 x p5.48xlarge", "2026-12-03 11:30", "1d", "528.00", "2.7500"] {
        assert!(row.contains(cell), "{cell} missing from the row {row:?}");
    }

    let wide = c.unconfirmed_with(&[&args[..], &["-o", "wide"]].concat(), &[("COLUMNS", "80")]).await;
    wide.exits(0);
    let header = wide.stdout.lines().next().unwrap();
    for column in ["REGION", "AZ", "END (UTC)", "USD/INSTANCE-H"] {
        assert!(header.contains(column), "{column} missing from -o wide: {}", wide.stdout);
    }
    let row =
        wide.stdout.lines().find(|l| l.starts_with(&id)).unwrap_or_else(|| panic!("the whole id: {}", wide.stdout));
    assert!(row.contains("us-west-2 ") && row.contains("2026-12-04 11:30"), "-o wide is not wrapped: {row}");

    let yaml = c.run(&[&args[..], &["-o", "yaml"]].concat()).await;
    yaml.exits(0);
    assert!(
        yaml.stdout.lines().any(|l| l == "offerings:") && yaml.stdout.contains(&format!("id: {id}")),
        "{}",
        yaml.stdout
    );
    let clash = c.run(&[&args[..], &["--json", "-o", "yaml"]].concat()).await;
    assert_eq!(clash.code, 2, "two formats: {}{}", clash.stdout, clash.stderr);
}

/// At 80 columns (COLUMNS=80) every table fits and keeps each row on one line (their cells are
/// ids, states, times and money, which fit): the same lines as piped without a width.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_table_fits_80_columns_a_row_a_line() {
    let c = Cli::new("cli-80-tables").await.with_west(Mode::Live, "100000").await;
    c.put_rule(&rule_toml("west-approval", "approval", "3.00")).await;
    let scan = c.run(&["scan", "--time", NOW, "--mode", "live", "--json"]).await;
    scan.exits(0);
    let rule = c.file("backtest.toml", &rule_toml("west", "live", "3.00"));
    let commands: [&[&str]; 9] = [
        &["offerings", "--types", "p5.48xlarge", "--regions", "us-west-2", "--days", "1", "--from", NOW],
        &["blocks", "--time", NOW],
        &["blocks", "--all", "--time", NOW],
        &["history", "--region", "us-west-2", "--type", "p5.48xlarge"],
        &["backtest", "--rule", &rule],
        &["report", "--month", "2026-12"],
        &["status", "--time", NOW],
        &["rules", "list"],
        &["intents", "list"],
    ];
    for args in commands {
        let piped = c.run(args).await;
        assert_eq!(piped.code, 0, "{args:?}: {}{}", piped.stdout, piped.stderr);
        let narrow = c.unconfirmed_with(args, &[("COLUMNS", "80")]).await;
        assert_eq!(narrow.code, 0, "{args:?}: {}{}", narrow.stdout, narrow.stderr);
        // backtest's first line and status's sentences are text the terminal wraps; their tables
        // (status's indented) are checked.
        let table: String = narrow
            .stdout
            .lines()
            .skip(usize::from(args[0] == "backtest"))
            .filter(|l| args[0] != "status" || l.starts_with("  "))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(fits(&table, 80), "{args:?} wider than 80:\n{}", narrow.stdout);
        // A table that leaves a column out to fit (and says so on a line of its own) has as
        // many lines as piped besides; the others are the same lines.
        let kept: Vec<&str> = narrow.stdout.lines().filter(|l| !l.starts_with("left out to fit 80")).collect();
        if kept.len() < narrow.stdout.lines().count() {
            assert_eq!(kept.len(), piped.stdout.lines().count(), "{args:?}: a row a line:\n{}", narrow.stdout);
        } else {
            assert_eq!(narrow.stdout, piped.stdout, "{args:?}: a row a line at 80 columns, as piped");
        }
    }
}

/// `--tz` shows the local time (TZ) beside the UTC one in the scan's lines and in the plan `buy`
/// prints before it asks, as in the tables.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_zone_reaches_the_scan_and_the_purchase_plan() {
    let c = Cli::new("cli-tz").await.with_west(Mode::Live, "1000").await;
    let tokyo = [("TZ", "Asia/Tokyo")];
    let scan = c.unconfirmed_with(&["--tz", "scan", "--time", NOW], &tokyo).await;
    scan.exits(0);
    assert!(scan.stdout.contains("scan at 2026-12-01 00:00 UTC (09:00 +09:00):"), "{}", scan.stdout);
    assert!(scan.stdout.contains("from 2026-12-03 11:30 UTC (20:30 +09:00)), threshold"), "{}", scan.stdout);
    let id = shown_offering(&c).await;
    let plan = c.unconfirmed_with(&["--tz", "buy", &id, "--rule", "west"], &tokyo).await;
    assert_eq!(plan.code, 2, "no terminal, no --yes: {}{}", plan.stdout, plan.stderr);
    assert!(
        plan.stderr.contains("2026-12-03 11:30 UTC (20:30 +09:00) to 2026-12-04 11:30 UTC (20:30 +09:00), for"),
        "{}",
        plan.stderr
    );
    assert!(c.sim.purchases().await.is_empty());
}

/// At 80 columns preflight's advice is wrapped, never cut: every word of each finding's "what
/// to do" (as `--json` has it) is in the table, in order, and no line passes 80.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_at_80_columns_wraps_the_advice_and_cuts_nothing() {
    let c = Cli::on("cli-80-preflight", &quota_zero_market("p5")).await.with_west(Mode::Live, "1000").await;
    let json = c.run(&["preflight", "--pause-seconds", "0.05", "-o", "json"]).await;
    json.exits(2);
    let findings = json.json()["findings"].as_array().unwrap().clone();
    let out = c.unconfirmed_with(&["preflight", "--pause-seconds", "0.05"], &[("COLUMNS", "80")]).await;
    out.exits(2);
    assert!(fits(&out.stdout, 80), "wider than 80:\n{}", out.stdout);
    assert!(!out.stdout.contains('…'), "{}", out.stdout);
    let words: Vec<&str> = out.stdout.split_whitespace().collect();
    let mut advised = 0;
    for f in &findings {
        let Some(todo) = f["todo"].as_str() else { continue };
        let want: Vec<&str> = todo.split_whitespace().collect();
        assert!(want.len() > 3, "{todo}");
        // The advice's words appear in order (a wrapped cell puts other columns between its lines).
        let mut at = 0;
        for w in &want {
            at += words[at..]
                .iter()
                .position(|x| x == w)
                .unwrap_or_else(|| panic!("{w:?} of {todo:?} missing:\n{}", out.stdout));
        }
        advised += 1;
    }
    assert!(advised >= 2, "{findings:#?}");
    let piped = c.run(&["preflight", "--pause-seconds", "0.05"]).await;
    let longest = piped.stdout.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(longest > 80, "piped, a finding is one line whatever its length: {}", piped.stdout);
}

/// `status -o json` (and `--json`) carries what the screen shows: the stack's mode, the spend per
/// budget with its currency, the preflight; `-o yaml` the same; the table's money columns name
/// the currency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_prints_json_and_yaml_and_money_with_its_currency() {
    let c = Cli::new("cli-status-json").await.with_west(Mode::Live, "100000").await;
    let scan = c.run(&["scan", "--time", NOW, "--mode", "live", "--json"]).await;
    scan.exits(0);
    let out = c.run(&["status", "--time", NOW, "-o", "json"]).await;
    out.exits(0);
    let s = out.json();
    assert_eq!(s["settings"]["stack"]["mode"], "live", "{s:#}");
    assert_eq!((s["rules"].as_u64(), s["rules_enabled"].as_u64()), (Some(1), Some(1)), "{s:#}");
    assert_eq!(s["blocks"]["payment-pending"], 1, "{s:#}");
    let rule = s["spend"].as_array().unwrap().iter().find(|x| x["kind"] == "rule").unwrap().clone();
    assert_eq!(rule["name"], "west");
    assert_eq!(rule["purchases"], 1);
    assert_eq!(rule["committed"]["currency"], "USD", "{rule:#}");
    assert!(s["dashboard"].as_str().unwrap().starts_with("https://"), "{s:#}");
    assert_eq!(c.run(&["status", "--time", NOW, "--json"]).await.json(), s, "--json is -o json");
    let yaml = c.run(&["status", "--time", NOW, "-o", "yaml"]).await;
    yaml.exits(0);
    assert!(yaml.stdout.contains("\nspend:\n") && yaml.stdout.contains("kind: rule"), "{}", yaml.stdout);
    let table = c.run(&["status", "--time", NOW]).await;
    assert!(table.stdout.contains("SPENT (USD)") && table.stdout.contains("LIMIT (USD)"), "{}", table.stdout);
    assert!(table.stdout.contains("(2026-12-01 00:00 UTC; settings"), "{}", table.stdout);
    // --tz: the local time (TZ) after the UTC one.
    let tokyo = c.unconfirmed_with(&["--tz", "status", "--time", NOW], &[("TZ", "Asia/Tokyo")]).await;
    assert!(tokyo.stdout.contains("(2026-12-01 00:00 UTC (09:00 +09:00); settings"), "{}", tokyo.stdout);
    let blocks = c.unconfirmed_with(&["--tz", "blocks", "-o", "wide", "--time", NOW], &[("TZ", "Asia/Tokyo")]).await;
    assert!(blocks.stdout.contains("2026-12-03 11:30 (20:30 +09:00)"), "{}", blocks.stdout);
}

/// `rules put -` reads the rule from stdin; putting the stored rule back says it is unchanged and
/// stores nothing; a changed rule is stored with a diff of what changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_put_reads_stdin_and_says_what_changed() {
    let c = Cli::new("cli-put-stdin").await;
    let text = rule_toml("west", "live", "3.00");
    let created = c.piped(&["rules", "put", "-"], &text).await;
    created.exits(0);
    assert!(created.stdout.starts_with("created rule \"west\" (version 1"), "{}", created.stdout);
    let same = c.piped(&["rules", "put", "-"], &text).await;
    assert_eq!(same.stdout.trim(), "rule \"west\" unchanged (version 1): nothing stored", "{}", same.stdout);
    let changed = c.piped(&["rules", "put", "-"], &rule_toml("west", "live", "2.50")).await;
    changed.exits(0);
    let diff = &changed.stdout;
    assert!(diff.contains("--- rule west (stored)") && diff.contains("+++ rule file"), "{diff}");
    assert!(
        diff.contains("-max_price_per_accelerator_hour = \"3.00\"")
            && diff.contains("+max_price_per_accelerator_hour = \"2.50\""),
        "{diff}"
    );
    assert!(diff.contains("updated rule \"west\" (version 2"), "{diff}");
    assert_eq!(c.aws.store().get_rule("west").await.unwrap().unwrap().version, 2);
    // A bad rule on stdin is named as such, and nothing is stored.
    let bad = c.piped(&["rules", "put", "-"], "id = \"x\"\n").await;
    bad.exits(2);
    assert!(bad.stdout.contains("(stdin)"), "{}{}", bad.stdout, bad.stderr);
    assert!(c.aws.store().get_rule("x").await.unwrap().is_none());
}

/// `--profile NAME` (or CAPBLOCK_PROFILE) takes the stack and the region from the config file's
/// `[profile.NAME]`; a profile the file lacks is a usage error naming the file and its profiles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_of_the_config_file_names_the_stack_and_the_region() {
    let c = Cli::new("cli-profile").await;
    c.stack(Mode::Live, Some("1000")).await;
    let stack = c.deployed.lock().unwrap().clone().unwrap();
    let config = c.file(
        "config.toml",
        &format!(
            "[profile.local]\nstack = \"{stack}\"\n\n[profile.elsewhere]\nstack = \"{stack}\"\nregion = \"eu-west-1\"\n"
        ),
    );
    let env = [("CAPBLOCK_CONFIG", config.as_str())];
    // Neither the stack's name nor its table in the environment: the profile names the stack.
    let unnamed = ["CAPBLOCK_STACK_NAME", "CAPBLOCK_TABLE"];
    let out = c.command(&["--profile", "local", "status", "--time", NOW], &env, &unnamed).await;
    out.exits(0);
    assert!(out.stdout.contains("in mode live"), "{}", out.stdout);
    let by_env = c.command(&["status", "--time", NOW], &[env[0], ("CAPBLOCK_PROFILE", "local")], &unnamed).await;
    by_env.exits(0);
    // The profile's region is the one asked: the stack is not there.
    let away = c.command(&["--profile", "elsewhere", "status"], &env, &unnamed).await;
    away.exits(3);
    assert!(away.stderr.contains(&format!("no stack \"{stack}\" in eu-west-1")), "{}", away.stderr);
    let missing = c.command(&["--profile", "prod", "status"], &env, &unnamed).await;
    missing.exits(2);
    assert!(
        missing.stderr.contains(&format!("profile \"prod\" is not in {config}: its profiles are elsewhere, local")),
        "{}",
        missing.stderr
    );
}

/// A profile's region is the region `offerings` and `history` ask about when none is given, over
/// AWS_REGION (as for every other command); `--regions` still wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profiles_region_is_the_one_searched_when_none_is_given() {
    let c = Cli::new("cli-profile-region").await;
    // The market sells in us-west-2 only; the stack's environment says AWS_REGION=us-east-1.
    let config = c.file("config.toml", "[profile.west]\nregion = \"us-west-2\"\n");
    let env = [("CAPBLOCK_CONFIG", config.as_str())];
    // No table: the profile's region has none (the stack's is elsewhere on the local stack).
    let unnamed = ["CAPBLOCK_STACK_NAME", "CAPBLOCK_TABLE"];
    let search = ["offerings", "--types", "p5.48xlarge", "--days", "1", "--from", NOW, "-o", "json"];
    let out = c.command(&[&["--profile", "west"], &search[..]].concat(), &env, &unnamed).await;
    out.exits(0);
    let offerings = out.json()["offerings"].as_array().unwrap().clone();
    assert!(
        !offerings.is_empty() && offerings.iter().all(|o| o["offering"]["region"] == "us-west-2"),
        "{offerings:#?}"
    );
    // Without the profile: AWS_REGION's, where nothing is sold.
    let east = c.command(&search, &env, &unnamed).await;
    east.exits(3);
    // Named, the regions given win over the profile's.
    let given =
        c.command(&[&["--profile", "west"], &search[..], &["--regions", "us-east-1"]].concat(), &env, &unnamed).await;
    given.exits(3);
    // No region anywhere: bad input, saying what to give.
    let nowhere =
        c.command(&search, &env, &["CAPBLOCK_STACK_NAME", "CAPBLOCK_TABLE", "AWS_REGION", "AWS_DEFAULT_REGION"]).await;
    nowhere.exits(2);
    assert!(nowhere.stderr.contains("--regions"), "{}", nowhere.stderr);
}

/// The completion scripts and the manual page come from the binary, generated from its own
/// command line: they name its commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_and_the_manual_page_name_the_commands() {
    let c = Cli::new("cli-completions").await;
    for shell in ["bash", "zsh", "fish"] {
        let out = c.run(&["completions", shell]).await;
        assert_eq!(out.code, 0, "{shell}: {}", out.stderr);
        // (fish names a long option `-l profile`)
        for command in ["offerings", "preflight", "intents", "profile", "output"] {
            assert!(out.stdout.contains(command), "{shell}: {command} missing");
        }
    }
    let man = c.run(&["man"]).await;
    assert_eq!(man.code, 0, "{}", man.stderr);
    assert!(man.stdout.contains(".TH capblock 1") && man.stdout.contains("capblock\\-offerings(1)"), "{}", man.stdout);
    // A profile that does not exist does not stand in the way of the documents.
    let out = c.unconfirmed_with(&["completions", "bash"], &[("CAPBLOCK_PROFILE", "nope")]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let help = c.run(&["offerings", "--help"]).await;
    assert!(help.stdout.contains("Examples:") && help.stdout.contains("-o wide"), "{}", help.stdout);
    let short = c.run(&["offerings", "-h"]).await;
    let stack_line = short.stdout.lines().find(|l| l.contains("--stack")).unwrap().to_string();
    assert!(stack_line.len() < 100, "a short --stack help: {stack_line}");
}

/// p5 for a day in us-east-1 (zone us-east-1a) and in two zones of us-west-2, alike but for
/// where: rows that do not say where read the same.
fn three_zones_market() -> String {
    ScenarioToml::new(5, T0)
        .payment("succeed", None)
        .p5("us-east-1", &[2], "2.75")
        .raw(
            r#"[[market]]
region = "us-west-2"
instance_type = "p5.48xlarge"
azs = ["us-west-2a", "us-west-2b"]
counts = [1]
durations_days = [1]
start_days = [2]
price = [ { from = "2026-11-01T00:00:00Z", usd_per_accelerator_hour = "2.75" } ]
"#,
        )
        .build()
}

const THREE_ZONES: [&str; 9] =
    ["offerings", "--types", "p5.48xlarge", "--regions", "us-east-1,us-west-2", "--days", "1", "--from", NOW];

/// At 80 columns and piped, the narrow `offerings` says where each block is: the zone (which
/// names its region), so the rows of two regions or two zones of one differ beyond their ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offerings_at_80_columns_and_piped_tell_zones_and_regions_apart() {
    let c = Cli::on("cli-80-zones", &three_zones_market()).await;
    let narrow = c.unconfirmed_with(&THREE_ZONES, &[("COLUMNS", "80")]).await;
    assert!(fits(&narrow.stdout, 80), "wider than 80:\n{}", narrow.stdout);
    for out in [narrow, c.run(&THREE_ZONES).await] {
        out.exits(0);
        let rows: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("cb-")).collect();
        assert_eq!(rows.len(), 3, "{}", out.stdout);
        for zone in ["us-east-1a", "us-west-2a", "us-west-2b"] {
            let with = rows.iter().filter(|r| r.split_whitespace().any(|w| w == zone)).count();
            assert_eq!(with, 1, "{zone} in one row each:\n{}", out.stdout);
        }
        let without_ids: std::collections::BTreeSet<&str> =
            rows.iter().map(|r| r.split_once(' ').map_or("", |(_, rest)| rest.trim())).collect();
        assert_eq!(without_ids.len(), 3, "rows that read the same:\n{}", out.stdout);
    }
}

/// The words of `text`, as a set.
fn words(text: &str) -> std::collections::BTreeSet<&str> {
    text.split_whitespace().collect()
}

/// At 80 columns no list command cuts a word in two: every word it prints (instance types,
/// regions, zones, ids, the commands preflight gives to copy) is a word of the same command's
/// output piped, where nothing is wrapped. A rule of 3 types and 4 regions makes cells wider
/// than their columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_list_at_80_columns_breaks_a_word() {
    let c = Cli::on("cli-80-words", &three_zones_market()).await;
    c.stack(Mode::Live, Some("100000")).await;
    let wide = RuleToml::p5("many-places")
        .mode("approval")
        .instance_types(&["p4d.24xlarge", "p5.48xlarge", "p5e.48xlarge"])
        .regions(&["us-east-1", "us-west-2", "eu-north-1", "ap-southeast-2"])
        .max_price("3.00")
        .budget("10000")
        .max_purchases_per_month(4);
    c.put_rule(&wide.toml()).await;
    c.put_rule(&rule_toml("west", "live", "3.00")).await;
    let scan = c.run(&["scan", "--time", NOW, "--mode", "live", "--json"]).await;
    scan.exits(0);
    let commands: [&[&str]; 9] = [
        &THREE_ZONES,
        &["blocks", "--all", "--time", NOW],
        &["rules", "list"],
        &["intents", "list"],
        &["approvals", "--time", NOW],
        &["report", "--month", "2026-12"],
        &["status", "--time", NOW],
        &["history", "--region", "us-west-2", "--type", "p5.48xlarge"],
        &["preflight", "--pause-seconds", "0.05"],
    ];
    for args in commands {
        let piped = c.run(args).await;
        let narrow = c.unconfirmed_with(args, &[("COLUMNS", "80")]).await;
        assert_eq!(narrow.code, piped.code, "{args:?}: {}{}", narrow.stdout, narrow.stderr);
        let whole = words(&piped.stdout);
        // The last line names the columns left out to fit: its words are its own.
        let shown: Vec<&str> = narrow.stdout.lines().filter(|l| !l.starts_with("left out to fit")).collect();
        for w in words(&shown.join("\n")) {
            assert!(whole.contains(w), "{args:?}: {w:?} is a piece of a word:\n{}", narrow.stdout);
        }
    }
}

/// The narrow `blocks` (80 columns and piped) says, for a block whose payment EC2 waits for,
/// the time left to pay; `-o wide` has the deadline in PAY BY.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn narrow_blocks_say_the_time_left_to_pay_a_pending_block() {
    let c = Cli::new("cli-pay-by").await.with_west(Mode::Live, "100000").await;
    let scan = c.run(&["scan", "--time", NOW, "--mode", "live", "--json"]).await;
    scan.exits(0);
    let json = c.run(&["blocks", "--json", "--time", NOW]).await.json();
    assert_eq!(json[0]["state"], "payment-pending");
    let deadline: DateTime<Utc> = json[0]["payment_deadline"].as_str().expect("a payment deadline").parse().unwrap();
    let at = (deadline - Duration::minutes(90)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let args = ["blocks", "--time", &at];
    for out in [c.unconfirmed_with(&args, &[("COLUMNS", "80")]).await, c.run(&args).await] {
        out.exits(0);
        let row =
            out.stdout.lines().find(|l| l.contains("payment-pending")).unwrap_or_else(|| panic!("{}", out.stdout));
        assert!(row.contains("pay within 1h 30m"), "the time left to pay, in {row:?}:\n{}", out.stdout);
        assert!(fits(&out.stdout, 80), "{}", out.stdout);
    }
    let late = (deadline + Duration::minutes(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let out = c.run(&["blocks", "--time", &late]).await;
    assert!(out.stdout.contains("payment overdue"), "{}", out.stdout);
    let wide = c.run(&["blocks", "--time", &at, "-o", "wide"]).await;
    assert!(
        wide.stdout.contains("PAY BY (UTC)") && wide.stdout.contains(&deadline.format("%Y-%m-%d %H:%M").to_string())
    );
}

/// `capblock approvals` lists the decisions waiting, with the intent `approve` takes whole, at
/// 80 columns and piped, and in `-o json`; once approved (bought), it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_lists_what_waits_with_the_intent_to_approve() {
    let c = Cli::new("cli-approvals").await;
    let none = c.run(&["approvals", "--time", NOW]).await;
    assert_eq!((none.code, none.stdout.trim()), (0, "no approvals waiting"), "{}", none.stderr);
    let intent = ask(&c).await;
    let narrow = c.unconfirmed_with(&["approvals", "--time", NOW], &[("COLUMNS", "80")]).await;
    let piped = c.run(&["approvals", "--time", NOW]).await;
    for out in [&narrow, &piped] {
        out.exits(0);
        let header = out.stdout.lines().next().unwrap();
        for column in ["INTENT", "BLOCK", "START (UTC)", "EXPIRES IN"] {
            assert!(header.contains(column), "{column}: {}", out.stdout);
        }
        let row = out.stdout.lines().nth(1).unwrap();
        assert!(row.starts_with(&format!("{intent} ")), "the intent whole, first: {}", out.stdout);
        // Asked at NOW, valid 24 h.
        assert!(row.contains("1 x p5.48xlarge") && row.contains("1d"), "{row}");
        assert!(out.stdout.contains("capblock approve INTENT"), "{}", out.stdout);
    }
    assert!(fits(&narrow.stdout, 80), "{}", narrow.stdout);
    assert!(piped.stdout.contains("528.00"), "piped, the fee: {}", piped.stdout);
    let json = c.run(&["approvals", "--time", NOW, "-o", "json"]).await.json();
    assert_eq!(json[0]["intent"], intent.as_str());
    assert_eq!(json[0]["expires_at"], "2026-12-02T00:00:00Z");
    assert_eq!(json[0]["expires_in_seconds"], 86_400);
    assert_eq!(json[0]["decision"]["offering"]["fee"]["amount"], "528.00");
    let out = c.run(&["approve", &intent, "--time", NOW]).await;
    out.exits(0);
    let after = c.run(&["approvals", "--time", NOW]).await;
    assert_eq!(after.stdout.trim(), "no approvals waiting", "{}", after.stdout);
}

/// The subcommands a help page lists under "Commands:" (`help` aside).
fn listed_commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A command's name at column 2; a description's wrapped rest is indented further.
        .filter(|l| !l[2..].starts_with(' '))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// Every `--help` page at 80 columns (and piped): an example on each, each example line
/// indented (one too long goes on indented lines, never from column 0), no line past 80; the
/// global options on the top page only, the others pointing to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_help_page_has_examples_indented_and_the_globals_once() {
    let c = Cli::new("cli-help").await;
    let top = c.unconfirmed_with(&["--help"], &[("COLUMNS", "80")]).await;
    assert_eq!(top.code, 0, "{}", top.stderr);
    assert!(top.stdout.contains("--profile <NAME>") && top.stdout.contains("--tz"), "{}", top.stdout);
    let mut pages: Vec<Vec<String>> = listed_commands(&top.stdout).into_iter().map(|c| vec![c]).collect();
    assert!(pages.len() >= 15, "{}", top.stdout);
    let mut seen = 0;
    while let Some(page) = pages.pop() {
        let args: Vec<&str> = page.iter().map(String::as_str).chain(["--help"]).collect();
        for out in [c.unconfirmed_with(&args, &[("COLUMNS", "80")]).await, c.run(&args).await] {
            assert_eq!(out.code, 0, "{page:?}: {}", out.stderr);
            let help = &out.stdout;
            pages.extend(listed_commands(help).into_iter().map(|c| [page.clone(), vec![c]].concat()));
            if !listed_commands(help).is_empty() {
                continue;
            }
            assert!(help.contains("Examples:"), "{page:?} has no example:\n{help}");
            let examples: Vec<&str> = help
                .lines()
                .skip_while(|l| l.trim_end() != "Examples:")
                .skip(1)
                .take_while(|l| !l.trim().is_empty())
                .collect();
            for line in &examples {
                assert!(line.starts_with("  "), "{page:?}: an example's line from column 0: {line:?}\n{help}");
            }
            assert!(!help.contains("--profile <NAME>"), "{page:?} repeats the global options:\n{help}");
            assert!(help.contains("capblock --help"), "{page:?} does not point to the global options:\n{help}");
        }
        let narrow = c.unconfirmed_with(&args, &[("COLUMNS", "80")]).await;
        assert!(fits(&narrow.stdout, 80), "{page:?} wider than 80:\n{}", narrow.stdout);
        seen += 1;
    }
    assert!(seen >= 20, "{seen} pages");
}

/// The example `capblock rules validate infra/examples/rules/*.toml` (and `rules put` of the
/// same) succeeds: every rule the glob matches is valid (the invalid example lives elsewhere).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_rules_glob_is_all_valid() {
    let c = Cli::new("cli-example-rules").await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra/examples/rules");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    let args: Vec<&str> = ["rules", "validate"].into_iter().chain(files.iter().map(String::as_str)).collect();
    let out = c.run(&args).await;
    out.exits(0);
    let args: Vec<&str> = ["rules", "put"].into_iter().chain(files.iter().map(String::as_str)).collect();
    let out = c.run(&args).await;
    out.exits(0);
}

/// `rules validate` says when `max_total_fee` is far below one block at the rule's threshold:
/// 1 x p5.48xlarge for a day less the 12 h tolerance is 96 GPU-hours, 288.00 USD at 3.00, so a
/// cap of 100 buys only at 1.04 USD per GPU-hour or less. Valid (exit 0), with the figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_validate_warns_of_a_fee_cap_below_one_block_at_the_threshold() {
    let c = Cli::new("cli-cap-threshold").await;
    let out = validate_fee_cap(&c, "100").await;
    out.exits(0);
    out.says(&[
        "warning: max_total_fee: 100.00 USD is below one block at the threshold",
        "288.00 USD",
        "1.04 USD per accelerator-hour or less",
    ]);
    let out = validate_fee_cap(&c, "288").await;
    assert!(!out.stdout.contains("below one block at the threshold"), "{}", out.stdout);
}

/// Which stack a command acts on is said where it matters, once, on one line of stderr: by the
/// commands that move money (a scan, a purchase, an approval), never by the ones that only read
/// (status shows it on stdout); stdout stays the data alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stack_said_once_where_money_moves() {
    let c = Cli::new("cli-stack-line").await.with_west(Mode::DryRun, "1000").await;
    for args in [&["blocks"][..], &["rules", "list"], &["intents", "list"], &["approvals"], &["report"]] {
        let out = c.run(args).await;
        assert_eq!(out.code, 0, "{args:?}: {}{}", out.stdout, out.stderr);
        assert_eq!(out.stderr, "", "{args:?} says nothing of the stack");
        assert!(!out.stdout.contains(STACK), "{args:?}: {}", out.stdout);
    }
    let scan = c.run(&["scan", "--time", NOW, "--json"]).await;
    scan.exits(0);
    let said: Vec<&str> = scan.stderr.lines().filter(|l| l.contains(STACK)).collect();
    assert_eq!(said, [format!("stack {STACK}: dry-run, account cap 1000.00 USD a month")], "{}", scan.stderr);
    scan.json();
}

/// A rate the operator records from AWS's announcement: `rates announce` names the stored rule it
/// will put below, `rates list` shows it beside the published table, `rules put` and preflight
/// tell the rule before the day; withdrawn once, then it is not found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_announced_rate_is_told_to_the_rules_it_will_put_below() {
    let c = Cli::new("cli-rates").await;
    c.stack(Mode::Live, Some("100000")).await;
    c.put_rule(&rule_toml("west", "live", "6.20")).await;
    // Thirty days after the simulator's clock: ahead, whatever day the machine thinks it is.
    let day = (t0() + Duration::days(30)).date_naive().to_string();
    let out = c.run(&["rates", "announce", "p5.48xlarge", "6.50", "--from", &day, "--source", "AWS email"]).await;
    out.exits(0);
    let ahead =
        format!("from {day} the list for p5.48xlarge will be 6.5 USD per accelerator-hour (announced: AWS email)");
    assert!(
        out.stdout.contains(&format!("Recorded: p5 at 6.5 USD per accelerator-hour from {day} (AWS email).")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(&format!("rule west: {ahead}: 6.20 will be below it")), "{}", out.stdout);

    let list = c.run(&["rates", "list"]).await;
    list.exits(0);
    assert!(list.stdout.contains("announced, ahead") && list.stdout.contains("published"), "{}", list.stdout);
    let json = c.run(&["rates", "list", "-o", "json"]).await.json();
    let announced: Vec<&Value> = json.as_array().unwrap().iter().filter(|r| r["announced"] == true).collect();
    assert_eq!(announced.len(), 1, "{json}");
    assert_eq!((announced[0]["family"].as_str(), announced[0]["usd"].as_str()), (Some("p5"), Some("6.50")));

    let file = c.file("west.toml", &rule_toml("west", "live", "6.25"));
    let put = c.run(&["rules", "put", &file]).await;
    put.exits(0);
    assert!(put.stderr.contains(&format!("warning: max_price_per_accelerator_hour: {ahead}: 6.25")), "{}", put.stderr);
    let preflight = c.run(&["preflight", "--pause-seconds", "0.05"]).await;
    assert!(preflight.stdout.contains("rule west threshold ahead"), "{}", preflight.stdout);

    let bad = c.run(&["rates", "announce", "p5", "0", "--from", &day, "--source", "x"]).await;
    assert_eq!(bad.code, 2, "a rate of 0 is refused: {}{}", bad.stdout, bad.stderr);
    let gone = c.run(&["rates", "withdraw", "p5", "--from", &day]).await;
    gone.exits(0);
    let again = c.run(&["rates", "withdraw", "p5", "--from", &day]).await;
    assert_eq!(again.code, 3, "withdrawn once: {}{}", again.stdout, again.stderr);
    let put = c.run(&["rules", "put", &c.file("west2.toml", &rule_toml("west", "live", "6.30"))]).await;
    assert!(!put.stderr.contains("will be"), "nothing ahead once withdrawn: {}", put.stderr);
}
