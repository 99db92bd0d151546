//! When a person's approval may be acted on. A decision awaiting approval is what the market and
//! the rule said at one moment: after a day, or once the offering's start is reached, it says too
//! little to spend money on; and only a live stack, with the rule still enabled and in approval
//! mode, buys on one.

use chrono::{DateTime, Duration, Utc};

use super::budget::Intent;
use super::rule::{Mode, Rule};

/// How long after the scan asked a person an approval may be acted on (at most: the offering's
/// start comes first when it is sooner).
pub const APPROVAL_VALIDITY: Duration = Duration::hours(24);

/// When the decision `intent` (stored by the scan that asked) can no longer be approved: 24 h
/// after it was asked or the offering's start, whichever is first.
pub fn expires_at(intent: &Intent) -> DateTime<Utc> {
    (intent.created_at + APPROVAL_VALIDITY).min(intent.offering.start)
}

/// Why approving `intent` for `rule` at `now` (the clock's time) in a stack of `stack_mode`
/// must buy nothing, if it must not.
pub fn refusal(rule: &Rule, intent: &Intent, stack_mode: Mode, now: DateTime<Utc>) -> Option<String> {
    if stack_mode != Mode::Live {
        return Some(format!(
            "the stack is in mode {}: nothing is bought in it, approved or not (deploy it with Mode=live first)",
            stack_mode.as_str()
        ));
    }
    if !rule.enabled {
        return Some(format!("rule {} is disabled (enable it with `capblock rules put` first)", rule.id));
    }
    if rule.mode != Mode::Approval {
        return Some(format!(
            "rule {} is in mode {} now, not approval: only a rule in approval mode buys on an approval",
            rule.id,
            rule.mode.as_str()
        ));
    }
    let expires = expires_at(intent);
    if now >= expires {
        return Some(format!(
            "the approval expired at {} (approvals hold 24 h from when they were asked, and never past the offering's start)",
            expires.format("%Y-%m-%d %H:%M UTC")
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::offering::Offering;
    use crate::domain::offering::tests::raw;
    use chrono::TimeZone;

    fn at(d: u32, h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, d, h, 0, 0).unwrap()
    }

    fn rule(mode: &str, enabled: bool) -> Rule {
        Rule::from_toml(
            &format!(
                "id = \"p5\"\nmode = \"{mode}\"\nenabled = {enabled}\nregions = [\"us-east-1\"]\n\
                 instance_types = [\"p5.48xlarge\"]\ninstance_counts = [2]\ndurations_days = [2]\n\
                 max_price_per_accelerator_hour = \"3.00\"\nmonthly_budget = \"5000\"\n\
                 start_window = {{ earliest_in_days = 1, latest_in_days = 10 }}\n"
            ),
            at(1, 0),
        )
        .unwrap()
    }

    /// Asked at `asked` for the offering of `raw` (2 x p5 from Thu 12-03 11:30).
    fn intent(asked: DateTime<Utc>) -> Intent {
        let o = Offering::parse(&"us-east-1".parse().unwrap(), raw("2304.00", "USD")).unwrap();
        Intent::new("p5", o, 8, vec![], asked)
    }

    #[test]
    fn approvals_expire_after_a_day_or_at_the_offerings_start() {
        // Asked Tue 00:00 for Thu 11:30: a day.
        assert_eq!(expires_at(&intent(at(1, 0))), at(2, 0));
        // Asked Wed 20:00: the start (Thu 11:30) comes before Thu 20:00.
        assert_eq!(expires_at(&intent(at(2, 20))), Utc.with_ymd_and_hms(2026, 12, 3, 11, 30, 0).unwrap());
    }

    #[test]
    fn only_a_live_stack_an_enabled_approval_rule_and_a_fresh_approval_buy() {
        let asked = intent(at(1, 0));
        let ok = rule("approval", true);
        assert_eq!(refusal(&ok, &asked, Mode::Live, at(1, 23)), None);
        let why = |r: &Rule, mode, now| refusal(r, &asked, mode, now).unwrap();
        assert!(why(&ok, Mode::DryRun, at(1, 1)).contains("the stack is in mode dry-run"));
        assert!(why(&rule("approval", false), Mode::Live, at(1, 1)).contains("rule p5 is disabled"));
        assert!(why(&rule("dry-run", true), Mode::Live, at(1, 1)).contains("rule p5 is in mode dry-run now"));
        assert!(why(&rule("live", true), Mode::Live, at(1, 1)).contains("in mode live now, not approval"));
        // At the expiry itself and after it.
        for now in [at(2, 0), at(2, 1)] {
            assert!(why(&ok, Mode::Live, now).contains("the approval expired at 2026-12-02 00:00 UTC"), "{now}");
        }
    }
}
