//! When the market moves, end to end on the simulator: p5.48xlarge in us-east-1 at 3.00 USD per
//! accelerator-hour steps to 3.60 (+20 %, the July 2026 step outside the US) eight days in, and
//! a rule whose threshold is 2.80 buys nothing throughout. Scanning twice a day, the rule's
//! thread is told of its drought once (after its default 7 days of offerings over 2.80) and of
//! the step once (after the new level held three days), and nothing more on the next runs.

use capblock_shared::domain::rule::Rule;
use capblock_tests::{Rig, RuleToml, ScenarioToml, T0, event_types};
use chrono::Duration;

fn scenario() -> String {
    // The step is the scenario's price schedule: a step function of the simulated time
    // (infra/market-sim README, "Scenario file"), moved by the test's clock.
    ScenarioToml::new(11, T0)
        .p5_priced("us-east-1", &[2, 3], &[("2026-11-01T00:00:00Z", "3.00"), ("2026-12-09T00:00:00Z", "3.60")])
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_price_step_and_a_drought_are_told_once_each_in_the_rules_thread() {
    let h =
        Rig::start("market-move", &scenario(), capblock_tests::quick_timeouts(), T0.parse().unwrap(), "capblock-test")
            .await;
    let rule: Rule = RuleToml::p5("dry-p5").max_price("2.80").window(1, 5).rule(h.now());
    assert_eq!(rule.drought_days, 7);
    h.put_rules(std::slice::from_ref(&rule)).await;

    let mut told: Vec<(i64, String, serde_json::Value)> = Vec::new();
    // Twice a day for 20 days: the step on day 8 is sustained by day 11.
    for run in 0..40 {
        let report = h.scan().await;
        assert!(report.failed_regions.is_empty(), "{report:#?}");
        assert!(report.outcomes[0].action.is_none(), "nothing under 2.80 is ever bought: {report:#?}");
        for a in h.aws.alerts().await {
            let kind = a.body["metadata"]["eventType"].as_str().unwrap().to_string();
            told.push((run, kind, a.body.clone()));
        }
        h.advance_hours(12).await;
    }
    let kinds: Vec<&str> = told.iter().map(|(_, k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["drought", "market-stepped"], "{told:#?}");
    for (_, _, body) in &told {
        assert_eq!(body["metadata"]["threadId"], "rule-dry-p5");
    }

    // The drought: offerings from the first scan on, none at 2.80; told on day 7.
    let (run, _, body) = &told[0];
    assert_eq!(*run, 14, "the 7th day's scan");
    let text = body["content"]["description"].as_str().unwrap();
    assert!(text.contains("none at or under its threshold of 2.80"), "{text}");
    assert!(text.contains("The cheapest was 1 x p5.48xlarge in us-east-1 at 3.00"), "{text}");
    assert!(
        text.contains("At 3.00 (the cheapest seen, rounded up to the cent) the rule would have bought 1 block(s)"),
        "{text}"
    );
    let steps = body["content"]["nextSteps"].to_string();
    assert!(steps.contains("capblock backtest --rule dry-p5.toml --from 2026-12-01"), "{steps}");

    // The step: 3.00 -> 3.60 on 2026-12-09, told once it held three days.
    let (run, _, body) = &told[1];
    assert_eq!(*run, 20, "the first scan of the third day at 3.60");
    assert_eq!(body["content"]["title"], "Capacity Block prices rose +20.0% for p5.48xlarge in us-east-1");
    let text = body["content"]["description"].as_str().unwrap();
    assert!(text.contains("rose from 3.00 to 3.60 per accelerator-hour (+20.0%) on 2026-12-09"), "{text}");
    assert!(event_types(&h.aws.alerts().await).is_empty());
    assert_eq!(h.now() - capblock_tests::t0(), Duration::days(20));
}
