//! The local stack's stand-in for a deployed stack (`infra/local/stack.sh deploy`,
//! `infra/local/deploy.py`): the CloudFormation stack the CLI reads and the settings the
//! functions store, so the README's commands, a purchase among them, work against the local
//! stack as against a deployed one.

use std::path::{Path, PathBuf};

use capblock_tests::runtime;
use capblock_tests::{Aws, RuleToml, ScenarioToml, Sim, T0, binary_env};

use super::cli::Out;

/// One region, p5 at 2.75/GPU-hour, one start day (+2), one zone: one offering per question.
fn market() -> String {
    ScenarioToml::new(5, T0).payment("succeed", None).p5("us-west-2", &[2], "2.75").build()
}

/// `out`, checked to have ended with exit 0.
fn ok(out: Out, what: &str) -> Out {
    assert_eq!(out.code, 0, "{what}: {}{}", out.stdout, out.stderr);
    out
}

/// One test's local stack: its own simulator, table and CloudFormation stack name, with the
/// environment `stack.sh up` exports on top.
struct Local {
    sim: Sim,
    aws: Aws,
    stack: String,
}

impl Local {
    fn env(&self) -> Vec<(String, String)> {
        let mut env = binary_env(&self.sim, &self.aws, &self.stack);
        env.push(("CAPBLOCK_WORKLOADS_TOPIC_ARN".into(), self.aws.workloads_topic.clone()));
        env
    }

    /// `infra/local/deploy.py args` in the local stack's Python, the functions built beside
    /// the test binaries.
    async fn deploy(&self, args: &[&str]) -> Out {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let cache = std::env::var("CAPBLOCK_CACHE")
            .unwrap_or_else(|_| format!("{}/.cache/capblock", std::env::var("HOME").unwrap_or_default()));
        let bins: PathBuf = runtime::binary("scan-offerings").parent().expect("the binaries' folder").to_path_buf();
        let out = tokio::process::Command::new(format!("{cache}/venv/bin/python"))
            .arg(repo.join("infra/local/deploy.py"))
            .args(args)
            .arg("--bin-dir")
            .arg(&bins)
            .envs(self.env())
            .output()
            .await
            .expect("the local stack's venv python");
        Out::of(out)
    }

    /// `capblock args` against the stand-in, named as an operator names a stack.
    async fn capblock(&self, args: &[&str]) -> Out {
        let out = tokio::process::Command::new(runtime::binary("capblock"))
            .envs(self.env())
            .env_remove("CAPBLOCK_TABLE")
            .env("CAPBLOCK_STACK_NAME", &self.stack)
            .env("CAPBLOCK_CONFIG", "/nonexistent/capblock-config.toml")
            .env_remove("CAPBLOCK_PROFILE")
            .env_remove("COLUMNS")
            .args(args)
            .output()
            .await
            .expect("run capblock");
        Out::of(out)
    }
}

/// The stand-in is dry-run until deployed live, then a purchase from the CLI goes through: the
/// stack's parameters and the settings its function stored say the same. A parameter not given
/// keeps its value, and a wrong one is refused with what to give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_stand_in_deploys_like_sam_and_the_cli_buys_through_it() {
    let local = Local {
        sim: Sim::start(&market()).await,
        aws: Aws::fresh("stand-in").await,
        stack: format!("capblock-local-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]),
    };
    let said = ok(local.deploy(&[]).await, "deploy with the defaults");
    assert!(said.stderr.contains("Mode=dry-run, AccountMonthlyBudget=0"), "{}", said.stderr);
    assert!(said.stderr.contains("stored the stack's settings"), "{}", said.stderr);
    let rule = RuleToml::p5("west").mode("live").regions(&["us-west-2"]).max_price("3.00").budget("10000").toml();
    let file = std::env::temp_dir().join(format!("{}-rule.toml", local.stack));
    std::fs::write(&file, rule).unwrap();
    ok(local.capblock(&["rules", "put", &file.to_string_lossy()]).await, "rules put");

    let shown =
        local.capblock(&["offerings", "--type", "p5.48xlarge", "--region", "us-west-2", "--days", "1", "--json"]).await;
    let answer = ok(shown, "offerings").json();
    let id = answer["offerings"][0]["offering"]["id"].as_str().expect("an offering").to_string();
    let dry = local.capblock(&["buy", &id, "--rule", "west", "--yes"]).await;
    assert_eq!(dry.code, 2, "a dry-run stand-in buys nothing: {}{}", dry.stdout, dry.stderr);
    assert!(dry.stderr.contains("is in mode dry-run"), "{}", dry.stderr);

    let refused = local.deploy(&["Mode=yes"]).await;
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("Mode=yes: the mode is dry-run or live"), "{}", refused.stderr);
    ok(local.deploy(&["Mode=live", "AccountMonthlyBudget=1000"]).await, "deploy live");
    let kept = ok(local.deploy(&["TeamBudgets="]).await, "deploy again");
    assert!(kept.stderr.contains("Mode=live, AccountMonthlyBudget=1000"), "kept: {}", kept.stderr);

    // A table named without its stack: refused, in one readable sentence.
    let table_only = tokio::process::Command::new(runtime::binary("capblock"))
        .envs(local.env())
        .env("CAPBLOCK_CONFIG", "/nonexistent/capblock-config.toml")
        .env_remove("CAPBLOCK_STACK_NAME")
        .args(["buy", &id, "--rule", "west", "--yes"])
        .output()
        .await
        .expect("run capblock");
    let table_only = Out::of(table_only);
    assert_eq!(table_only.code, 2, "{}", table_only.stderr);
    let said = table_only.stderr.lines().find(|l| l.contains("only a table was named")).unwrap_or_default();
    assert!(
        said.contains("against the deployed stack's CloudFormation parameters, and only a table was named")
            && !said.trim().contains("  "),
        "{}",
        table_only.stderr
    );

    ok(local.capblock(&["buy", &id, "--rule", "west", "--yes"]).await, "buy");
    assert_eq!(local.sim.purchases().await.len(), 1);
    let again = local.capblock(&["buy", &id, "--rule", "west", "--yes"]).await;
    assert_ne!(again.code, 0, "bought once: {}{}", again.stdout, again.stderr);
    assert_eq!(local.sim.purchases().await.len(), 1);
    let _ = std::fs::remove_file(file);
}
