//! What EC2 said of the regions in one run, kept in their memories and told once: a quota of
//! 0, a type not sold, a member account that does not lend its limit.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use super::{Findings, Plan, Scanner};
use crate::app::outbox::alert_notice;
use crate::domain::announce;
use crate::domain::message_kind::MessageKind;
use crate::domain::rule::Rule;
use crate::ports::{MarketMemory, Outbox, StoreError};

impl<M: ?Sized, S: MarketMemory + Outbox + ?Sized, N: ?Sized> Scanner<'_, M, S, N> {
    /// Saves each region's memory and queues one alert per market finding: a quota of 0 once
    /// per sighting, "not sold here" once per region and type.
    pub(super) async fn remember(
        &self,
        plan: &Plan,
        findings: &Findings,
        rules: &[Rule],
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        for (region, memory) in &plan.memories {
            let mut memory = memory.clone();
            memory.prune(now);
            let read = plan.read.get(region).cloned().unwrap_or_default();
            if let Err(e) = self.store.save_region_memory(region, &read, &memory).await {
                tracing::warn!(event = "market_memory_unsaved", %region, error = %e, "the next run plans without this one");
            }
        }
        for ((region, fam), (since, refused)) in &findings.quota_zero {
            let msg = announce::quota_zero(region, fam, refused, now);
            let milestone = MessageKind::QuotaZero.outbox_key(Some(&format!("{fam}-{}", since.timestamp())))?;
            self.store.enqueue(&alert_notice(&format!("market-{region}"), &milestone, &msg, now)).await?;
        }
        // Once per note: a member refused on every call of a family (cleared by an answer).
        for ((account, region, fam), refused) in &findings.member_refused {
            let msg = announce::member_quota_zero(account, region, fam, *refused);
            let milestone =
                MessageKind::MemberQuotaZero.outbox_key(Some(&format!("{account}-{fam}-{}", now.timestamp())))?;
            self.store.enqueue(&alert_notice(&format!("market-{region}"), &milestone, &msg, now)).await?;
        }
        // Once a day per member account while its watch role fails.
        for (account, error) in &findings.watch_failed {
            let msg = announce::member_account_failed(account, error, &self.settings.stack.name);
            let milestone =
                MessageKind::WatchAccountFailed.outbox_key(Some(&format!("{account}-{}", now.format("%Y-%m-%d"))))?;
            self.store.enqueue(&alert_notice("market-watch", &milestone, &msg, now)).await?;
        }
        for ((region, ty), message) in &findings.not_sold {
            let names: BTreeSet<String> =
                findings.not_sold_rules.iter().filter(|(t, _)| t == ty).map(|(_, r)| rules[*r].id.clone()).collect();
            let msg = announce::not_sold(region, ty, message, &names.into_iter().collect::<Vec<_>>());
            self.store
                .enqueue(&alert_notice(
                    &format!("market-{region}"),
                    &MessageKind::NotSold.outbox_key(Some(ty))?,
                    &msg,
                    now,
                ))
                .await?;
        }
        Ok(())
    }
}
