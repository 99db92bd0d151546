//! `capblock preflight`: what an operator checks in the real account before switching a stack
//! to live. It spends nothing and writes nothing but its own report (and the market answers it
//! reads count against the account's describe limit, paced as a scan's). The functions' own
//! roles are checked by the functions themselves (`app::permissions`), asked through
//! `RoleChecks`. The verdicts are `domain::preflight`'s and `domain::permissions`'; this module asks.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::scan::questions_for;
use crate::domain::catalog::{quota_in_words, quota_request};
use crate::domain::ids::Region;
use crate::domain::list_price::RateBook;
use crate::domain::permissions::{MemberAsk, PermissionsAsk, RegionAsk, findings as role_findings, member_findings};
use crate::domain::plan::family;
use crate::domain::preflight::{Finding, Preflight, Verdict, id_stability, ram_sharing, scheduled_block};
use crate::domain::rule::Rule;
use crate::domain::tags::REQUESTED_QUANTITY_TAG;
use crate::ports::{
    DESCRIBE_LIMIT, MarketError, OfferingQuery, OfferingSource, OrganizationSharing, PreflightStore, QuotaSource,
    RateStore, ReservationSource, RoleChecks, RuleStore, SettingsStore, StoreError, Subscriptions,
};

/// The ports preflight reads, and how long it waits between two questions to one region.
pub struct Preflighter<'a, M: ?Sized, S: ?Sized, T: ?Sized> {
    pub market: &'a M,
    pub store: &'a S,
    pub topics: &'a T,
    /// EC2's describe refill: preflight asks one region no faster.
    pub pause: Duration,
    /// Told each finding as it is made (a person waits seconds per region): progress.
    pub tell: &'a (dyn Fn(&Finding) + Sync),
    /// The functions, asked to check their own roles.
    pub roles: &'a dyn RoleChecks,
    /// Whether RAM may share with the Organization (asked when a rule shares its blocks).
    pub organization: &'a dyn OrganizationSharing,
}

/// What preflight asks the functions to try with their roles: each region once, with a type the
/// rules ask there, and each watch member's question per region and family (`first`).
fn permissions_ask(first: &BTreeMap<(Region, String), OfferingQuery>, pause: Duration) -> PermissionsAsk {
    // Each region once, with a type the rules ask there.
    let mut asks: BTreeMap<Region, RegionAsk> = BTreeMap::new();
    for ((region, _), q) in first {
        asks.entry(region.clone())
            .or_insert_with(|| RegionAsk { region: region.clone(), instance_type: q.instance_type.clone() });
    }
    // Each watch member is asked, by scan-offerings through its watch role (which trusts the
    // stack's roles only), one question per region and family: a member's quota is its own.
    let mut ask = PermissionsAsk::new(asks.into_values().collect());
    ask.members = first
        .values()
        .map(|q| MemberAsk {
            region: q.region.clone(),
            instance_type: q.instance_type.clone(),
            instance_count: q.instance_count,
            duration_hours: q.duration_hours,
            start_from: q.start_from,
            start_to: q.start_to,
        })
        .collect();
    ask.member_pause_ms = pause.as_millis() as u64;
    ask
}

/// The findings so far; each one is told as it is added.
struct Findings<'t> {
    list: Vec<Finding>,
    tell: &'t (dyn Fn(&Finding) + Sync),
}

impl Findings<'_> {
    fn push(&mut self, f: Finding) {
        (self.tell)(&f);
        self.list.push(f);
    }
}

impl<M, S, T> Preflighter<'_, M, S, T>
where
    M: OfferingSource + ReservationSource + QuotaSource + ?Sized,
    S: SettingsStore + RuleStore + PreflightStore + RateStore + ?Sized,
    T: Subscriptions + ?Sized,
{
    /// Every check, stored as the stack's last preflight.
    pub async fn run(&self, now: DateTime<Utc>) -> Result<Preflight, StoreError> {
        let mut findings = Findings { list: Vec::new(), tell: self.tell };
        self.stack(&mut findings).await?;
        let rules: Vec<Rule> =
            self.store.list_rules().await?.into_iter().map(|s| s.rule).filter(|r| r.enabled).collect();
        if rules.is_empty() {
            findings.push(Finding::flagged(
                "rules",
                Verdict::Warn,
                "no enabled rule",
                "put a rule (capblock rules put FILE): a stack without rules watches nothing",
            ));
        } else {
            findings.push(Finding::ok("rules", format!("{} enabled", rules.len())));
        }
        let book = RateBook::with_announced(self.store.announced_rates().await?);
        for rule in &rules {
            list_rate_findings(&mut findings, &book, rule, now);
        }
        let sharing: Vec<&str> = rules.iter().filter(|r| !r.share_with.is_empty()).map(|r| r.id.as_str()).collect();
        let enabled = if sharing.is_empty() {
            Ok(false)
        } else {
            self.organization.ram_sharing_enabled().await.map_err(|e| e.to_string())
        };
        findings.push(ram_sharing(&sharing, enabled));
        // One question per region and instance family (Capacity Block quotas are per family):
        // the first the rules ask there.
        let mut first: BTreeMap<(Region, String), OfferingQuery> = BTreeMap::new();
        for rule in &rules {
            for q in questions_for(rule, now) {
                let fam = family(q.query.instance_type.as_str()).to_string();
                first.entry((q.query.region.clone(), fam)).or_insert(q.query);
            }
        }
        let regions: std::collections::BTreeSet<Region> = first.keys().map(|(r, _)| r.clone()).collect();
        self.markets(&first, &mut findings).await;
        for region in &regions {
            self.blocks_in(region, &mut findings).await;
        }
        let ask = permissions_ask(&first, self.pause);
        // The functions' own describe tries come after preflight's questions: a refill's rest first.
        tokio::time::sleep(self.pause).await;
        self.roles_of_functions(&ask, &mut findings).await;
        let report = Preflight { at: now, findings: findings.list };
        self.store.save_preflight(&report).await?;
        Ok(report)
    }

    /// The first question of each region and family (`first`) asked of EC2, and once, on the
    /// first that holds offerings, asked again after a pause: whether EC2 keeps its offering ids.
    async fn markets(&self, first: &BTreeMap<(Region, String), OfferingQuery>, findings: &mut Findings<'_>) {
        let mut stability_asked = false;
        for ((region, _), q) in first {
            let answered = self.market_in(region, q, findings).await;
            if !stability_asked && answered.as_ref().is_some_and(|a| !a.is_empty()) {
                stability_asked = true;
                tokio::time::sleep(self.pause).await;
                let check = format!("offering ids ({region})");
                match self.market.offerings(q).await {
                    Ok(second) => findings.push(id_stability(&check, answered.as_deref().unwrap_or(&[]), &second)),
                    Err(e) => findings.push(Finding::flagged(
                        check,
                        Verdict::NotChecked,
                        format!("the second answer failed: {e}"),
                        "run preflight again",
                    )),
                }
            }
        }
    }

    /// Every function checks its own role; a function that cannot be asked is a finding too.
    async fn roles_of_functions(&self, ask: &PermissionsAsk, findings: &mut Findings<'_>) {
        for (kind, name) in self.roles.kinds() {
            let check = format!("role of {kind}");
            let name = match name {
                Ok(name) => name,
                Err(why) => {
                    findings.push(Finding::flagged(
                        check,
                        Verdict::NotChecked,
                        why,
                        format!("invoke {kind} once (or wait for its schedule), or name it: --function {kind}=NAME"),
                    ));
                    continue;
                }
            };
            match self.roles.check_role(&kind, ask).await {
                Ok(role) => {
                    for f in role_findings(&role).into_iter().chain(member_findings(&role.members)) {
                        findings.push(f);
                    }
                }
                Err(unasked) => findings.push(Finding::flagged(
                    check,
                    Verdict::Fail,
                    format!("{name} could not be asked: {}", unasked.why),
                    unasked.todo,
                )),
            }
        }
    }

    /// The stack's stored settings and who hears its alerts.
    async fn stack(&self, findings: &mut Findings<'_>) -> Result<(), StoreError> {
        let Some(s) = self.store.stored_settings().await? else {
            findings.push(Finding::flagged(
                "stack settings",
                Verdict::Fail,
                "not in the table",
                "invoke the stack's scan-offerings function once (or wait for its schedule), then run preflight again",
            ));
            return Ok(());
        };
        let cap = s.stack.account_budget.map_or("no account cap".to_string(), |m| format!("account cap {m}"));
        findings
            .push(Finding::ok("stack settings", format!("{} in mode {}, {cap}", s.stack.name, s.stack.mode.as_str())));
        findings.push(match self.topics.confirmed_subscriptions(&s.alerts_topic).await {
            Ok(0) => Finding::flagged(
                "alerts topic",
                Verdict::Fail,
                format!("{} has no confirmed subscription", s.alerts_topic),
                "subscribe Slack (AWS Chatbot) or an e-mail address to the alerts topic and confirm it: nobody hears capblock",
            ),
            Ok(n) => Finding::ok("alerts topic", format!("{n} confirmed subscription(s)")),
            Err(e) => Finding::flagged(
                "alerts topic",
                Verdict::Warn,
                format!("subscriptions not read: {e}"),
                "allow sns:ListSubscriptionsByTopic to the operator, or check the topic in the console",
            ),
        });
        Ok(())
    }

    /// One question to the region: sold, a quota of 0, or what an answer holds. A refusal is
    /// asked again after a rest; refused every time, the family's quota is taken to be 0 unless
    /// Service Quotas says otherwise.
    async fn market_in(
        &self,
        region: &Region,
        q: &OfferingQuery,
        findings: &mut Findings<'_>,
    ) -> Option<Vec<crate::domain::offering::Offering>> {
        let check = format!("market {region} {}", q.instance_type);
        let fam = family(q.instance_type.as_str()).to_string();
        let mut refused = 0;
        let answer = loop {
            match self.market.offerings(q).await {
                Err(MarketError::Throttled { code, .. }) if code == DESCRIBE_LIMIT && refused < 2 => {
                    refused += 1;
                    tokio::time::sleep(self.pause).await;
                }
                other => break other,
            }
        };
        match answer {
            Ok(list) => {
                findings.push(Finding::ok(check, format!("answered: {} offering(s)", list.len())));
                Some(list)
            }
            Err(MarketError::Throttled { code, .. }) if code == DESCRIBE_LIMIT => {
                findings.push(match self.market.capacity_block_quota(region, &fam).await {
                    Some(n) if n > 0 => Finding::flagged(
                        check,
                        Verdict::Warn,
                        format!(
                            "refused 3 times, rested; Service Quotas allows {} of {} Capacity Blocks",
                            quota_in_words(n, q.instance_type.as_str()),
                            fam.to_uppercase()
                        ),
                        "someone else in the account spends the describe limit: find them in CloudTrail",
                    ),
                    _ => Finding::flagged(
                        check,
                        Verdict::Fail,
                        format!("refused 3 times, rested: the {fam} Capacity Block quota looks like 0"),
                        quota_request(&fam, region.as_str(), q.instance_type.as_str()),
                    ),
                });
                None
            }
            // The rule still buys elsewhere: said, not failed.
            Err(e @ (MarketError::NotSold { .. } | MarketError::Unsupported { .. })) => {
                findings.push(Finding::flagged(
                    check,
                    Verdict::Warn,
                    e.to_string(),
                    "remove the type or the region from the rules that ask for it: nothing is bought there",
                ));
                None
            }
            Err(e) => {
                findings.push(Finding::flagged(check, Verdict::Warn, e.to_string(), "run preflight again"));
                None
            }
        }
    }

    /// The region's Capacity Blocks as the tracker lists them (with the `reservation-type`
    /// filter), and what EC2 shows of each one not started yet.
    async fn blocks_in(&self, region: &Region, findings: &mut Findings<'_>) {
        let check = format!("blocks {region}");
        match self.market.capacity_blocks(region).await {
            Ok(blocks) => {
                findings.push(Finding::ok(
                    check.clone(),
                    format!("listed with the reservation-type filter: {} block(s)", blocks.len()),
                ));
                for r in blocks.iter().filter(|r| matches!(r.state.as_str(), "scheduled" | "payment-pending")) {
                    findings.push(scheduled_block(&format!("{check} {}", r.id), r, REQUESTED_QUANTITY_TAG));
                }
            }
            Err(e) => findings.push(Finding::flagged(
                check,
                Verdict::Fail,
                e.to_string(),
                "the tracker lists a region's blocks this way: check the role and the region",
            )),
        }
    }
}

/// A rule whose threshold is below today's list (published or announced in effect), or will be
/// below a rate announced for a later day: a warning each, the first type said.
fn list_rate_findings(findings: &mut Findings, book: &RateBook, rule: &Rule, now: DateTime<Utc>) {
    use crate::domain::list_price::{says, says_ahead};
    let threshold = rule.max_price_per_accelerator_hour;
    if let Some(said) = says(&book.below(rule, now), threshold).first() {
        findings.push(Finding::flagged(
            format!("rule {} threshold", rule.id),
            Verdict::Warn,
            said.clone(),
            "raise max_price_per_accelerator_hour to the list, or keep it and expect to wait for a dip",
        ));
    }
    if let Some(said) = says_ahead(&book.ahead(rule, now), threshold).first() {
        findings.push(Finding::flagged(
            format!("rule {} threshold ahead", rule.id),
            Verdict::Warn,
            said.clone(),
            "raise max_price_per_accelerator_hour before the announced day (capblock rates list shows it)",
        ));
    }
}
