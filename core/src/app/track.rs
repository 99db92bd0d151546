//! One tracker run: settle unknown purchases, observe every open block in EC2, move it through
//! its life (announcing each milestone once, keeping reminders in step, releasing the budget of
//! a block whose payment failed), adopt reservations missing from the store, decide and settle
//! extensions, and publish what is pending.
//!
//! Order inside one block's move is what makes a crash harmless: the notices are enqueued (the
//! outbox dedups them), the budget released (guarded by the block item), the reminders synced
//! (idempotent) and only then the new state stored with a version condition. A run that dies
//! half-way leaves the old state, so the next run sees the same move and redoes each step as a
//! no-op where it already happened.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::time::Instant;

use super::block_kinds::{backfill, ultraserver_reservations};
use super::extend::{Extender, ExtensionAction};
use super::handoff::{self, ActionReport, ActionRunner};
use super::health;
use super::outbox::{FlushReport, alert_notice, flush};
use super::reconcile::{Settled, settle_open_intents, settling_until};
use super::usage;
use crate::domain::announce;
use crate::domain::block::{Block, NamedPart, Reservation, late_part};
use crate::domain::budget::{BudgetOwner, Intent, IntentState, Period, ReleasedHold};
use crate::domain::ids::Region;
use crate::domain::ledger_check::{self, LedgerVerdict};
use crate::domain::lifecycle::{BlockState, Observed, Transition};
use crate::domain::message_kind::MessageKind;
use crate::domain::metrics::{ACCOUNT_BUDGET, team_budget};
use crate::domain::milestone::{Milestone, milestones, warning_due};
use crate::domain::money::Money;
use crate::domain::outbox_key::OutboxKey;
use crate::domain::rule::Rule;
use crate::domain::run_time::RunTime;
use crate::domain::settlement::{held_after_close, held_after_close_of, part_failed};
use crate::domain::slack::SlackMessage;
use crate::domain::stack::StackSettings;
use crate::domain::tags::{INTENT_TAG, RULE_TAG, STACK_TAG};
use crate::domain::usage::{DEFAULT_IDLE_ALERT_MINUTES, Reading, idle_cost, utilization_so_far};
use crate::ports::{
    BlockKinds, BlockStatusSource, BlockStore, ExtensionHistory, ExtensionLedger, ExtensionMarket, InstanceSource,
    Ledger, MarketError, MarketMemory, Notifier, Outbox, ReminderError, Reminders, ReservationSource, RuleStore,
    StoreError,
};
use crate::sabotage::{self, Bug};

/// Settings read once from the environment by the function's `main`.
#[derive(Debug, Clone)]
pub struct TrackSettings {
    /// Stack name, mode and account budget.
    pub stack: StackSettings,
    /// Hours before the payment deadline at which a still-pending payment is announced.
    pub payment_warning_hours: Vec<u32>,
    /// Adopt every capacity block of the regions, not only this stack's.
    pub adopt_untagged: bool,
    /// Regions to reconcile besides those of the stored rules and blocks.
    pub regions: Vec<Region>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Moved {
    pub reservation_id: String,
    pub from: BlockState,
    pub to: BlockState,
    pub end: DateTime<Utc>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct TrackReport {
    /// A replay of another moment than the clock's: nothing was settled, moved or sent.
    pub replay: bool,
    pub blocks: usize,
    pub moved: Vec<Moved>,
    pub warnings: Vec<String>,
    pub anomalies: Vec<String>,
    /// Blocks announced in a state off their path (`reservation#state`).
    pub checks: Vec<String>,
    pub released_budgets: Vec<String>,
    pub adopted: Vec<String>,
    pub settled: Vec<Settled>,
    /// Health changes announced (`reservation#summary`).
    pub health: Vec<String>,
    /// Idle episodes announced, alerted or over (`reservation#idle-<n>[-over]`).
    pub idle: Vec<String>,
    /// The month whose summary this run posted (the monthly schedule's run only).
    pub summary: Option<String>,
    pub extensions: Vec<ExtensionAction>,
    pub failed_regions: BTreeMap<String, String>,
    /// Hand-off actions planned and run this run (`app::handoff`).
    pub handoff: ActionReport,
    /// Per-block failures: the block is left as it was and looked at again next run.
    pub errors: Vec<String>,
    /// What the ledger check found this run (`app::track::ledger`): a block EC2 holds that the
    /// ledger had as final (`reservation#stored->ec2`), a rule over its limit at EC2
    /// (`rule#held-N-of-M`).
    pub ledger_mismatches: Vec<String>,
    /// Blocks whose released fee was committed again because EC2 holds them.
    pub recommitted_budgets: Vec<String>,
    pub notices: FlushReport,
    /// What is held after this run (the tracker's metrics).
    pub holdings: Holdings,
    /// The team page, after the run (`app::publish`): `None` when the stack publishes none or
    /// the run is a replay.
    pub page: Option<crate::app::publish::PageReport>,
}

/// The open blocks by state, this month's budgets, and the next deadlines, as of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Holdings {
    pub now: Option<DateTime<Utc>>,
    pub by_state: BTreeMap<String, usize>,
    pub budgets: Vec<BudgetLine>,
    pub next_payment_deadline: Option<DateTime<Utc>>,
    pub next_termination: Option<DateTime<Utc>>,
    /// What each active block's instances are used for, as of its last sample.
    pub in_use: Vec<BlockUse>,
}

/// One active block's use and health, for the tracker's metrics.
#[derive(Debug, Clone, Serialize)]
pub struct BlockUse {
    pub reservation_id: String,
    pub idle: u32,
    /// What its idle time cost so far at its own price; None when the fee is unknown.
    pub idle_cost: Option<Money>,
    pub utilization_percent: Option<rust_decimal::Decimal>,
    /// Its failed instances as the health check judged them (`BlockHealth::unavailable`).
    pub unavailable: u32,
}

/// One budget this month: the account's (owner `account`) or a rule's (owner: its id).
#[derive(Debug, Clone, Serialize)]
pub struct BudgetLine {
    pub owner: String,
    pub committed: Money,
    pub spent: Money,
    pub limit: Money,
}

/// Why one block could not be handled this run.
#[derive(Debug, thiserror::Error)]
pub enum TrackError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Reminders(#[from] ReminderError),
    #[error(transparent)]
    Market(#[from] MarketError),
}

/// The EC2 side a [`Tracker`] reads and acts on, named once so each of its `impl` blocks says
/// `M: TrackerMarket` rather than the six ports again.
pub trait TrackerMarket:
    ReservationSource + ExtensionMarket + BlockKinds + BlockStatusSource + InstanceSource + ExtensionHistory
{
}

impl<T> TrackerMarket for T where
    T: ReservationSource
        + ExtensionMarket
        + BlockKinds
        + BlockStatusSource
        + InstanceSource
        + ExtensionHistory
        + ?Sized
{
}

/// The store side of a [`Tracker`]: every table it reads and writes, named once (see
/// [`TrackerMarket`]).
pub trait TrackerStore: RuleStore + Ledger + BlockStore + Outbox + ExtensionLedger + MarketMemory {}

impl<T> TrackerStore for T where T: RuleStore + Ledger + BlockStore + Outbox + ExtensionLedger + MarketMemory + ?Sized {}

pub struct Tracker<'a, M: ?Sized, S: ?Sized, N: ?Sized, R: ?Sized> {
    pub market: &'a M,
    pub store: &'a S,
    pub notifier: &'a N,
    pub reminders: &'a R,
    pub settings: &'a TrackSettings,
    /// Where rules' hand-off actions act; `None` runs none (they wait in the outbox).
    pub action_runner: Option<ActionRunner<'a>>,
}

impl<M: TrackerMarket + ?Sized, S: TrackerStore + ?Sized, N: Notifier + ?Sized, R: Reminders + ?Sized>
    Tracker<'_, M, S, N, R>
{
    pub async fn run(&self, at: impl Into<RunTime>) -> Result<TrackReport, StoreError> {
        self.run_until(at.into(), None).await
    }

    /// [`Tracker::run`] within a run's time: `until` is when the run must be done by (the
    /// function's deadline), which bounds how long settlement waits for EC2. Every move, wait
    /// and deadline is judged on the clock; a replay of another moment moves nothing.
    pub async fn run_until(&self, at: RunTime, until: Option<Instant>) -> Result<TrackReport, StoreError> {
        if at.is_replay() {
            return self.replay(at).await;
        }
        let now = at.clock();
        let mut report = TrackReport {
            // A purchase whose recording was lost must be on the books before anything else.
            settled: settle_open_intents(self.store, self.market, at, settling_until(until)).await?,
            ..Default::default()
        };
        let rules: HashMap<String, Rule> =
            self.store.list_rules().await?.into_iter().map(|s| (s.rule.id.clone(), s.rule)).collect();
        let blocks = self.store.open_blocks(None).await?;
        report.blocks = blocks.len();

        // Blocks whose stored state and end are EC2's as of this run.
        let mut observed_now: HashSet<String> = HashSet::new();
        let mut by_region: BTreeMap<Region, Vec<Block>> = BTreeMap::new();
        for b in blocks {
            by_region.entry(b.region.clone()).or_default().push(b);
        }
        for (region, blocks) in &by_region {
            self.track_region(region, blocks, &rules, now, &mut observed_now, &mut report).await;
        }

        // A disabled rule buys nothing, so nothing of it can be missing from the store: its
        // regions cost a visit each and are not worth it (a rule may name many).
        let mut regions: BTreeSet<Region> = self.settings.regions.iter().cloned().collect();
        regions.extend(rules.values().filter(|r| r.enabled).flat_map(|r| r.regions.iter().cloned()));
        regions.extend(by_region.keys().cloned());
        for region in &regions {
            if let Err(e) = self.reconcile(region, &rules, now, &mut report).await {
                tracing::warn!(event = "reconcile_failed", %region, error = %e, "reservations not reconciled this run");
                report.failed_regions.entry(region.to_string()).or_insert_with(|| e.to_string());
            }
        }

        let extender = Extender {
            market: self.market,
            store: self.store,
            stack_mode: self.settings.stack.mode,
            budgets: self.settings.stack.budgets(),
        };
        report.extensions = extender.run(&rules, &observed_now, now).await?;

        if let Some(action_runner) = &self.action_runner {
            report.handoff = handoff::tracker_pass(self.store, action_runner, &rules, &self.settings.stack, now).await;
        }

        report.notices = flush(self.store, self.notifier, now).await?;
        report.holdings = self.holdings(&rules, now).await?;
        Ok(report)
    }

    /// Observes `region`'s open blocks in EC2 and tracks each (`track_block`): the blocks whose
    /// stored state and end are EC2's as of this run go into `observed_now`. A region EC2 does
    /// not answer for is left as it was, its failure in the report.
    async fn track_region(
        &self,
        region: &Region,
        blocks: &[Block],
        rules: &HashMap<String, Rule>,
        now: DateTime<Utc>,
        observed_now: &mut HashSet<String>,
        report: &mut TrackReport,
    ) {
        let ids: Vec<String> = blocks.iter().map(|b| b.reservation_id.clone()).collect();
        let observed: HashMap<String, Observed> = match self.market.observe(region, &ids).await {
            Ok(o) => o.into_iter().collect(),
            Err(e) => {
                tracing::warn!(event = "region_failed", %region, error = %e, "blocks of this region not observed this run");
                report.failed_regions.insert(region.to_string(), e.to_string());
                return;
            }
        };
        for b in blocks {
            let Some(obs) = observed.get(&b.reservation_id) else {
                continue;
            };
            if let Observed::Unreadable(why) = obs {
                // Logged every run (the alarm stays on) until EC2 describes it readably; the
                // block is not "observed": its extensions are not settled on it either.
                tracing::error!(event = "reservation_unreadable", reservation = %b.reservation_id, error = %why,
                    "EC2 describes this block in a way capblock cannot read; it is kept as it is, its money too");
                if let Err(e) = self.track_block(b, obs, rules, now, report).await {
                    report.errors.push(format!("{}: {e}", b.reservation_id));
                }
                continue;
            }
            // Only a block EC2 showed on its path has its stored end made EC2's by this run:
            // one shown off it (unavailable, ...) or not at all keeps a stored end that may be
            // stale, and its extensions are not settled on it.
            let on_path = shown_on_path(b, obs, now);
            let raised = self.raise_count(b, obs).await;
            let b = raised.as_ref().unwrap_or(b);
            match self.track_block(b, obs, rules, now, report).await {
                Ok(()) if on_path => {
                    observed_now.insert(b.reservation_id.clone());
                }
                Ok(()) => {}
                Err(e) => {
                    tracing::error!(event = "block_failed", reservation = %b.reservation_id, error = %e, "left as it was; next run retries");
                    report.errors.push(format!("{}: {e}", b.reservation_id));
                }
            }
        }
        self.block_view(region, blocks, &observed, rules, now, report).await;
    }

    /// A replay: what is open, and that it was left so. Payment deadlines, the graces of
    /// unknown purchases and extensions' deadlines are the clock's, so a replayed moment settles,
    /// moves, announces and releases nothing (the next run on the clock does what is due).
    async fn replay(&self, at: RunTime) -> Result<TrackReport, StoreError> {
        let why = format!("a replay of {} settles nothing; the next run on the clock does", at.view());
        let rules: HashMap<String, Rule> =
            self.store.list_rules().await?.into_iter().map(|s| (s.rule.id.clone(), s.rule)).collect();
        let extensions = self
            .store
            .open_extensions()
            .await?
            .into_iter()
            .map(|x| ExtensionAction::Skipped { reservation_id: x.reservation_id, reason: why.clone() })
            .collect();
        Ok(TrackReport {
            replay: true,
            settled: settle_open_intents(self.store, self.market, at, None).await?,
            blocks: self.store.open_blocks(None).await?.len(),
            extensions,
            holdings: self.holdings(&rules, at.clock()).await?,
            ..Default::default()
        })
    }

    /// What the block view adds once a region's blocks are tracked. First, blocks stored before
    /// capblock kept their CapacityBlockId get it, and their kind, from EC2 (an UltraServer found
    /// so has its reminders moved to the 60-minute lead). Then the health of the blocks EC2
    /// calls active (or unavailable) is checked. A failure is reported and retried next run,
    /// never fatal to the rest.
    async fn block_view(
        &self,
        region: &Region,
        blocks: &[Block],
        observed: &HashMap<String, Observed>,
        rules: &HashMap<String, Rule>,
        now: DateTime<Utc>,
        report: &mut TrackReport,
    ) {
        let mut now_blocks = blocks.to_vec();
        match backfill(self.market, region, blocks, observed).await {
            Ok(changed) => self.store_kinds(changed, &mut now_blocks, now, report).await,
            Err(e) => {
                tracing::warn!(event = "kinds_failed", %region, error = %e, "block kinds not read this run");
                report.errors.push(format!("kinds in {region}: {e}"));
            }
        }
        let with_status: Vec<&Block> = now_blocks
            .iter()
            .filter(|b| {
                matches!(observed.get(&b.reservation_id), Some(Observed::Found { state, .. }) if state == "active" || state == "unavailable")
            })
            .collect();
        let checked = match health::changes(self.market, region, &with_status, now).await {
            Ok(checked) => checked,
            Err(e) => {
                tracing::warn!(event = "health_failed", %region, error = %e, "block health not checked this run");
                report.errors.push(format!("health in {region}: {e}"));
                return;
            }
        };
        for (b, e) in checked.unread {
            tracing::warn!(event = "usage_failed", reservation = %b.reservation_id, error = %e, "instances in use not read: health not judged this run");
            report.errors.push(format!("usage of {}: {e}", b.reservation_id));
        }
        for (b, watch) in checked.watched {
            if let Some(w) = watch {
                tracing::info!(event = "health_held", reservation = %b.reservation_id, since = %w.since, "a rise in failures waits: instances still stopping look the same");
            }
            if let Err(e) = health::store_watch(self.store, b, watch).await {
                report.errors.push(format!("{}: {e}", b.reservation_id));
            }
        }
        for (b, change, settled) in checked.found {
            let to = handoff::EventTo::of(b.rule_id.as_ref().and_then(|r| rules.get(r)));
            match health::announce_change(self.store, b, &change, &settled, to, now).await {
                Ok(true) => {
                    tracing::warn!(event = "block_health_changed", reservation = %b.reservation_id, change = %change.summary(), "announced");
                    report.health.push(format!("{}#{}", b.reservation_id, change.summary()));
                }
                Ok(false) => {}
                Err(e) => report.errors.push(format!("{}: {e}", b.reservation_id)),
            }
        }
    }

    /// Stores each learned id and kind, and puts the stored block in `out`.
    async fn store_kinds(&self, changed: Vec<Block>, out: &mut [Block], now: DateTime<Utc>, report: &mut TrackReport) {
        for learned in changed {
            match self.store_kind(&learned, now).await {
                Ok(Some(b)) => {
                    if let Some(slot) = out.iter_mut().find(|x| x.reservation_id == b.reservation_id) {
                        *slot = b;
                    }
                }
                Ok(None) => {}
                Err(e) => report.errors.push(format!("{}: {e}", learned.reservation_id)),
            }
        }
    }

    /// Stores what `learned` says of the block's id and kind on the block as stored now.
    async fn store_kind(&self, learned: &Block, now: DateTime<Utc>) -> Result<Option<Block>, TrackError> {
        let Some(current) = self.store.get_block(&learned.reservation_id).await? else {
            return Ok(None);
        };
        let next = Block { capacity_block_id: learned.capacity_block_id.clone(), ..current.clone() }
            .with_kind(learned.ultraserver);
        if next.ultraserver != current.ultraserver && matches!(next.state, BlockState::Scheduled | BlockState::Active) {
            self.reminders.sync(&next, now).await?;
        }
        match self.store.update_block(&next, current.version).await {
            Ok(()) => {
                tracing::info!(event = "block_kind_learned", reservation = %next.reservation_id, ultraserver = next.ultraserver, "CapacityBlockId stored");
                Ok(Some(Block { version: current.version + 1, ..next }))
            }
            Err(StoreError::Conflict(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The blocks still open after this run, and each budget of the month.
    async fn holdings(&self, rules: &HashMap<String, Rule>, now: DateTime<Utc>) -> Result<Holdings, StoreError> {
        // Every open state is reported, 0 included, so a graph falls to 0 instead of stopping.
        let open = [BlockState::PaymentPending, BlockState::Scheduled, BlockState::Active];
        let by_state = open.iter().map(|s| (s.as_str().to_string(), 0)).collect();
        let mut h = Holdings { now: Some(now), by_state, ..Default::default() };
        for b in self.store.open_blocks(None).await? {
            *h.by_state.entry(b.state.as_str().to_string()).or_default() += 1;
            if b.state == BlockState::PaymentPending {
                h.next_payment_deadline = h.next_payment_deadline.into_iter().chain(b.payment_deadline).min();
            }
            let t = b.termination_time();
            if t > now {
                h.next_termination = Some(h.next_termination.map_or(t, |n| n.min(t)));
            }
            if b.state == BlockState::Active {
                let total = usage::total_paid(self.store, &b).await?;
                h.in_use.push(BlockUse {
                    reservation_id: b.reservation_id.clone(),
                    idle: b.usage.idle,
                    idle_cost: idle_cost(&b.span(), total, b.usage.idle_instance_minutes),
                    utilization_percent: utilization_so_far(&b.span(), &b.usage),
                    unavailable: b.health.as_ref().map_or(0, |x| x.unavailable),
                });
            }
        }
        let period = Period::budget_month(now);
        let mut owners: Vec<(BudgetOwner, Money)> =
            self.settings.stack.account_budget.map(|limit| (BudgetOwner::Account, limit)).into_iter().collect();
        owners.extend(self.settings.stack.team_budgets.iter().map(|(t, limit)| (BudgetOwner::Team(t.clone()), *limit)));
        let mut ids: Vec<&String> = rules.keys().collect();
        ids.sort();
        owners.extend(ids.into_iter().map(|id| (BudgetOwner::Rule(id.clone()), rules[id].monthly_budget)));
        for (owner, limit) in owners {
            let zero = Money::zero(limit.currency());
            let usage = self.store.usage(&owner, &period).await?;
            h.budgets.push(BudgetLine {
                owner: match owner {
                    BudgetOwner::Account => ACCOUNT_BUDGET.to_string(),
                    BudgetOwner::Team(team) => team_budget(&team),
                    BudgetOwner::Rule(id) => id,
                },
                committed: usage.as_ref().map_or(zero, |u| u.committed),
                spent: usage.as_ref().map_or(zero, |u| u.spent),
                limit,
            });
        }
        Ok(h)
    }

    async fn enqueue(
        &self,
        b: &Block,
        milestone: &str,
        msg: &SlackMessage,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.store.enqueue(&alert_notice(&b.reservation_id, &OutboxKey::notice(milestone)?, msg, now)).await
    }

    /// The block with the count EC2 shows now when it is higher than the stored one (a block
    /// adopted before its start, while EC2 showed 0), stored; `None` when nothing changes. A
    /// count is never lowered: instances that stop running do not shrink what was bought.
    async fn raise_count(&self, b: &Block, obs: &Observed) -> Option<Block> {
        let Observed::Found { instance_count, .. } = obs else { return None };
        if *instance_count <= b.instance_count {
            return None;
        }
        let raised = Block { instance_count: *instance_count, ..b.clone() };
        match self.store.update_block(&raised, b.version).await {
            Ok(()) => {
                tracing::info!(event = "block_count_raised", reservation = %b.reservation_id, from = b.instance_count, to = instance_count, "EC2 shows more instances than stored");
                Some(Block { version: b.version + 1, ..raised })
            }
            Err(e) => {
                tracing::warn!(event = "block_count_not_raised", reservation = %b.reservation_id, error = %e, "next run tries again");
                None
            }
        }
    }

    async fn track_block(
        &self,
        b: &Block,
        obs: &Observed,
        rules: &HashMap<String, Rule>,
        now: DateTime<Utc>,
        report: &mut TrackReport,
    ) -> Result<(), TrackError> {
        match b.transition(obs, now) {
            Transition::Stay => {
                match b.state {
                    BlockState::PaymentPending => self.warn_payment(b, rules, now, report).await?,
                    // A failed sample is the next run's to take: the block itself was tracked.
                    BlockState::Active => match self.sample_usage(b, obs, rules, now).await {
                        Ok(idle) => report.idle.extend(idle),
                        Err(e) => {
                            tracing::warn!(event = "usage_not_sampled", reservation = %b.reservation_id, error = %e, "next run samples again");
                            report.errors.push(format!("{}: {e}", b.reservation_id));
                        }
                    },
                    _ => {}
                }
                Ok(())
            }
            Transition::Anomaly(why) => {
                if *obs == Observed::NotFound {
                    // Every run it lasts (the alarm's count): the fee stays committed.
                    tracing::error!(event = "ledger_mismatch", reservation = %b.reservation_id, state = %b.state,
                        "EC2 does not list a block the ledger holds; its fee stays committed");
                }
                tracing::warn!(event = "block_anomaly", reservation = %b.reservation_id, %why, "EC2 disagrees with the store");
                if self.enqueue(b, MessageKind::Anomaly.key(), &announce::anomaly(b, &why), now).await? {
                    report.anomalies.push(b.reservation_id.clone());
                }
                Ok(())
            }
            Transition::Check { ec2_state } => {
                // Once per (state, capblock's state): a block that goes unavailable while
                // scheduled and again once active is announced twice, a state seen on every
                // run once.
                let milestone = MessageKind::Ec2State.key_with(Some(&format!("{ec2_state}-while-{}", b.state)));
                if self.enqueue(b, &milestone, &announce::ec2_state(b, &ec2_state), now).await? {
                    tracing::warn!(event = "block_state_check", reservation = %b.reservation_id, state = %ec2_state, "EC2 reports a state off the block's path");
                    report.checks.push(format!("{}#{ec2_state}", b.reservation_id));
                }
                Ok(())
            }
            Transition::Move { to, end } => {
                let ec2_state = match obs {
                    Observed::Found { state, .. } => state.as_str(),
                    Observed::NotFound => "not found",
                    Observed::Unreadable(_) => "unreadable",
                };
                self.apply_move(b, to, end, ec2_state, rules, now, report).await
            }
        }
    }

    /// Samples what an active block's instances are doing, for a block that stays active this
    /// run (one that moved was stored anew, and its next run samples it), and announces an idle
    /// episode once (`app::usage`): the episode's `<reservation>#<milestone>` when one is.
    async fn sample_usage(
        &self,
        b: &Block,
        obs: &Observed,
        rules: &HashMap<String, Rule>,
        now: DateTime<Utc>,
    ) -> Result<Option<String>, StoreError> {
        let Observed::Found { state, available: Some(available), .. } = obs else {
            return Ok(None);
        };
        if state != "active" {
            return Ok(None);
        }
        let rule = b.rule_id.as_ref().and_then(|r| rules.get(r));
        // The failures as the health check judged them last (never running instances).
        let sample = Reading {
            at: now,
            instances: b.instance_count,
            available: *available,
            failed: b.health.as_ref().map_or(0, |h| h.unavailable),
        };
        let alert_after = rule.map_or(DEFAULT_IDLE_ALERT_MINUTES, |r| r.idle_alert_minutes);
        let to = handoff::EventTo::of(rule);
        let news = usage::sample(self.store, b, &sample, alert_after, to, now).await?;
        Ok(news.map(|news| {
            tracing::warn!(event = "block_idle_news", reservation = %b.reservation_id, milestone = %news.milestone(), "announced");
            format!("{}#{}", b.reservation_id, news.milestone())
        }))
    }

    async fn warn_payment(
        &self,
        b: &Block,
        rules: &HashMap<String, Rule>,
        now: DateTime<Utc>,
        report: &mut TrackReport,
    ) -> Result<(), StoreError> {
        let Some(deadline) = b.payment_deadline else {
            return Ok(());
        };
        let Some(h) = warning_due(b.purchased_at, deadline, &self.settings.payment_warning_hours, now) else {
            return Ok(());
        };
        let msg = announce::payment_warning(b, deadline, h, rebuys(b, rules), now);
        if self.enqueue(b, &Milestone::PaymentWarning(h).name(), &msg, now).await? {
            tracing::warn!(event = "payment_pending_warning", reservation = %b.reservation_id, hours = h, %deadline, "payment still pending");
            report.warnings.push(format!("{}#{h}h", b.reservation_id));
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    async fn apply_move(
        &self,
        b: &Block,
        to: BlockState,
        end: DateTime<Utc>,
        ec2_state: &str,
        rules: &HashMap<String, Rule>,
        now: DateTime<Utc>,
        report: &mut TrackReport,
    ) -> Result<(), TrackError> {
        let mut next = b.clone();
        next.state = to;
        next.end = end;
        if to.is_final() {
            // The last sample's count held to the termination (or to now, for a block released
            // early): what the end-of-block line tells.
            next.usage = next.usage.closed(&next.span(), now);
        }
        let f = &next;
        let moved = milestones(b.state, to, b.end, end);
        for m in &moved {
            let msg = match m {
                Milestone::PaymentSucceeded => announce::payment_succeeded(f),
                Milestone::Scheduled => announce::scheduled(f),
                Milestone::Active => announce::active(f),
                Milestone::Expired => {
                    let total = usage::total_paid(self.store, &next).await?;
                    announce::expired(f, total, total.and_then(|t| next.per_accelerator_hour(t)))
                }
                Milestone::PaymentFailed => announce::payment_failed(f, rebuys(b, rules), now),
                Milestone::Released => announce::released(f, ec2_state),
                Milestone::Extended(new_end) => {
                    let fee = self
                        .store
                        .extensions_of(&b.reservation_id)
                        .await?
                        .into_iter()
                        .find(|x| x.offer.end == *new_end)
                        .map(|x| x.offer.fee);
                    announce::extended(f, b.end, fee)
                }
                Milestone::EndMovedBack(_) => announce::end_moved_back(f, b.end),
                Milestone::PaymentWarning(_) => continue,
            };
            self.enqueue(b, &m.name(), &msg, now).await?;
        }
        let rule = b.rule_id.as_ref().and_then(|r| rules.get(r));
        handoff::at_move(self.store, b, &next, &moved, rule, &self.settings.stack, now).await?;

        if to == BlockState::PaymentFailed && self.release_budget(b, rules, now).await? {
            report.released_budgets.push(b.reservation_id.clone());
        }

        if to.is_final() {
            self.reminders.clear(&next).await?;
        } else if (to != b.state || end != b.end) && matches!(to, BlockState::Scheduled | BlockState::Active) {
            self.reminders.sync(&next, now).await?;
        }

        match self.store.update_block(&next, b.version).await {
            Ok(()) => {
                tracing::info!(event = "block_moved", reservation = %b.reservation_id, from = %b.state, to = %to, %end, "block state stored");
                report.moved.push(Moved { reservation_id: b.reservation_id.clone(), from: b.state, to, end });
                Ok(())
            }
            // Another run stored this move (or a later one) first: it did the same steps.
            Err(StoreError::Conflict(why)) => {
                tracing::info!(event = "block_move_lost_race", reservation = %b.reservation_id, %why, "another run got there first");
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Gives the never-charged fee back to the budgets, once per purchase, and only when EC2
    /// holds none of its blocks: a purchase of N UltraServers is N blocks for one fee, so the
    /// fee goes back when the last of them has failed its payment, never per part. Adopted
    /// blocks charged no budget.
    async fn release_budget(
        &self,
        b: &Block,
        rules: &HashMap<String, Rule>,
        now: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let (Some(rule_id), Some(intent_id)) = (&b.rule_id, &b.intent_id) else {
            return Ok(false);
        };
        let Some(intent) = self.store.get_intent(rule_id, intent_id).await? else {
            tracing::error!(event = "intent_missing", reservation = %b.reservation_id, intent = %intent_id, "cannot release the budget of a failed payment");
            return Ok(false);
        };
        if let Some(held) = self.part_still_held(b, &intent).await? {
            tracing::warn!(event = "budget_kept", reservation = %b.reservation_id, intent = %intent_id, part = %held,
                "payment failed for this part; the purchase's fee stays committed while EC2 may hold another part");
            // Once per (part, part held): a part EC2 never shows failed keeps the fee for good,
            // and only a person can look at why.
            let msg = if held == UNSHOWN_PART { announce::fee_kept_unshown(b) } else { announce::fee_kept(b, &held) };
            self.enqueue(b, &MessageKind::FeeKept.key_with(Some(&held)), &msg, now).await?;
            if let Some(hold) = kept_fee_hold(&intent) {
                self.store.add_hold(rule_id, &hold).await?;
            }
            return Ok(false);
        }
        // Without rebuy the failed attempt still counts as the month's purchase, so a rule
        // limited to one purchase a month does not buy again; the money is released either way.
        let released = self.store.release_failed_block(b, &intent, rebuys(b, rules), now).await?;
        if released {
            tracing::info!(event = "budget_released", reservation = %b.reservation_id, fee = %intent.offering.fee, "payment failed; fee released");
        }
        Ok(released)
    }

    /// What the store and EC2 say of the purchase's other parts, for `part_still_held`: each
    /// part's stored block and, unless the store has it failed, EC2's word; it stops at the
    /// first part that may be held (the rest cannot change the answer).
    async fn other_parts(&self, b: &Block, intent: &Intent) -> Result<Vec<PartSeen>, StoreError> {
        let mut seen_parts = Vec::new();
        for part in intent.parts.iter().filter(|p| **p != b.reservation_id) {
            let stored = self.store.get_block(part).await?;
            let mut p = PartSeen {
                id: part.clone(),
                stored: stored.as_ref().map(|s| s.state),
                instances: stored.as_ref().map(|s| s.instance_count),
                seen: None,
            };
            if !part_failed(p.stored, None) {
                let shown = self.market.observe(&b.region, std::slice::from_ref(part)).await;
                p.seen = match shown {
                    Ok(mut answer) if answer.len() == 1 => answer.pop().map(|(_, observed)| observed),
                    _ => None,
                };
            }
            let held = part_may_be_held(p.stored, p.seen.as_ref());
            seen_parts.push(p);
            if held {
                break;
            }
        }
        Ok(seen_parts)
    }

    async fn part_still_held(&self, b: &Block, intent: &Intent) -> Result<Option<String>, StoreError> {
        Ok(part_still_held(b, intent, &self.other_parts(b, intent).await?))
    }

    /// Adopts this stack's (or, with adopt_untagged, any) capacity blocks the store lacks, and
    /// checks the ledger against them (`ledger`): a block stored final that EC2 holds is held
    /// again, a rule over its `max_blocks_held` at EC2 is told. capblock's purchases always
    /// carry the stack's tag (the purchase's own TagSpecifications), so the tagged listing holds
    /// every block capblock bought; an untagged one can be in the ledger only when adopted.
    async fn reconcile(
        &self,
        region: &Region,
        rules: &HashMap<String, Rule>,
        now: DateTime<Utc>,
        report: &mut TrackReport,
    ) -> Result<(), TrackError> {
        let ours = self.market.reservations_tagged(region, STACK_TAG, &self.settings.stack.name).await?;
        self.check_held_per_rule(&ours.reservations, rules, now, report).await?;
        for u in &ours.unreadable {
            // Logged every run (the alarm stays on) until EC2 describes it readably.
            tracing::error!(event = "reservation_unreadable", %region, reservation = ?u.id, error = %u.reason,
                "a reservation carries this stack's tag but cannot be read; it is not tracked");
        }
        let listed = ours.reservations.clone();
        let mut found: Vec<(Reservation, bool)> = ours.reservations.into_iter().map(|r| (r, true)).collect();
        if self.settings.adopt_untagged {
            let known: BTreeSet<String> = found.iter().map(|(r, _)| r.id.clone()).collect();
            for r in self.market.capacity_blocks(region).await? {
                if !known.contains(&r.id) {
                    found.push((r, false));
                }
            }
        }
        let mut missing = Vec::new();
        for (r, tagged) in found {
            let stored = self.store.get_block(&r.id).await?;
            match (ledger_check::check(stored.as_ref(), &r), &stored) {
                (LedgerVerdict::HeldAgain { to }, Some(b)) => {
                    self.hold_again(b, &r, to, rules, now, report).await?;
                    continue;
                }
                (_, Some(_)) => continue,
                _ => {}
            }
            // Finished reservations are history, not something to track.
            if BlockState::from_ec2(&r.state).is_none_or(BlockState::is_final) {
                continue;
            }
            let of_intent =
                if tagged { self.settle_by_intent(&r, &listed, now, report).await? } else { OfIntent::None };
            match of_intent {
                OfIntent::Settled => continue,
                OfIntent::None => missing.push((r, tagged, None)),
                OfIntent::Duplicate(intent) => missing.push((r, tagged, Some(intent))),
            }
        }
        // The kind from EC2, for all of them at once: an UltraServer's reminders count from 60
        // minutes before the end.
        let ultra =
            ultraserver_reservations(self.market, region, &missing.iter().map(|(r, ..)| r).collect::<Vec<_>>()).await?;
        for (r, tagged, duplicate_of) in missing {
            let block = Block::adopted(&r, tagged, now).with_kind(ultra.contains(&r.id));
            // Enqueue first: if this run dies before the adoption, the next one adopts and the
            // notice is already there (a duplicate enqueue is a no-op). A second purchase is
            // announced as such, in its own thread, once.
            let msg = match &duplicate_of {
                Some(intent) => {
                    tracing::error!(event = "duplicate_purchase", reservation = %r.id, intent = %intent,
                        "a reservation carries a recorded purchase's intent but is not one of its parts; tracked uncharged");
                    announce::duplicate_purchase(&block, &r.state, intent)
                }
                None => announce::tracking(&block, &r.state, tagged),
            };
            self.enqueue(&block, MessageKind::Tracking.key(), &msg, now).await?;
            if matches!(block.state, BlockState::Scheduled | BlockState::Active) {
                self.reminders.sync(&block, now).await?;
            }
            if self.store.adopt_block(&block).await? {
                tracing::info!(event = "block_adopted", reservation = %r.id, tagged, state = %r.state, "now tracking");
                report.adopted.push(r.id.clone());
            }
        }
        Ok(())
    }

    /// A reservation carrying an intent of ours: one of a recorded purchase's parts (named by
    /// it, or listed late, `listed` being what EC2 lists with the stack's tag) is adopted with
    /// its part of the fee (no money moves again); one that is not is a second purchase.
    async fn settle_by_intent(
        &self,
        r: &Reservation,
        listed: &[Reservation],
        now: DateTime<Utc>,
        report: &mut TrackReport,
    ) -> Result<OfIntent, TrackError> {
        let Some(intent_id) = r.tags.get(INTENT_TAG) else {
            return Ok(OfIntent::None);
        };
        let rule_id = r.tags.get(RULE_TAG).cloned().or_else(|| intent_id.split('/').next().map(str::to_string));
        let Some(rule_id) = rule_id else {
            return Ok(OfIntent::None);
        };
        let Some(intent) = self.store.get_intent(&rule_id, intent_id).await? else {
            return Ok(OfIntent::None);
        };
        if intent.state == IntentState::Bought
            && (intent.is_part(&r.id) || self.listed_late(&intent, r, listed).await?)
        {
            // Another reservation of the same purchase (one per UltraServer): its part of the
            // fee, no money moved again (the intent's purchase was recorded once).
            let block = Block::bought(&intent, r, now);
            self.enqueue(&block, MessageKind::Tracking.key(), &announce::tracking(&block, &r.state, true), now).await?;
            if matches!(block.state, BlockState::Scheduled | BlockState::Active) {
                self.reminders.sync(&block, now).await?;
            }
            if self.store.adopt_block(&block).await? {
                tracing::info!(event = "purchase_part_adopted", reservation = %r.id, intent = %intent_id, "another reservation of a recorded purchase");
                report.adopted.push(r.id.clone());
            }
            return Ok(OfIntent::Settled);
        }
        if intent.state == IntentState::Bought {
            return Ok(OfIntent::Duplicate(intent.id));
        }
        if intent.state.is_open() {
            // Its settlement (every run, by the intent's tag) records the purchase with all its
            // parts and tells any duplicate apart; adopting one reservation here, uncharged,
            // would leave the intent's fee to be released.
            tracing::info!(event = "reservation_awaits_settlement", reservation = %r.id, intent = %intent_id, "left to the intent's settlement");
            return Ok(OfIntent::Settled);
        }
        if held_after_close_of(intent.state, &r.state) {
            return self.hold_after_close(&intent, r, now, report).await;
        }
        tracing::error!(event = "reservation_after_intent_closed", reservation = %r.id, intent = %intent_id, state = intent.state.as_str(),
            "a reservation appeared for an intent already closed; adopting it without a fee");
        Ok(OfIntent::None)
    }
}

impl<M: TrackerMarket + ?Sized, S: TrackerStore + ?Sized, N: Notifier + ?Sized, R: Reminders + ?Sized>
    Tracker<'_, M, S, N, R>
{
    /// EC2 holds `r`, tagged with `intent`, which was closed unbought (a person released it, or
    /// EC2 refused the purchase and made it after all): the purchase is recorded as bought and
    /// its fee committed again, with no limit, once (`Ledger::record_held_after_close`); a
    /// person is told, and the block is tracked from now on.
    async fn hold_after_close(
        &self,
        intent: &Intent,
        r: &Reservation,
        now: DateTime<Utc>,
        report: &mut TrackReport,
    ) -> Result<OfIntent, TrackError> {
        tracing::error!(event = "ledger_mismatch", reservation = %r.id, intent = %intent.id, state = intent.state.as_str(),
            "EC2 holds a reservation of an intent closed unbought; recorded as bought, its fee committed again");
        report.ledger_mismatches.push(format!("{}#{}->{}", r.id, intent.state.as_str(), r.state));
        let block = Block::bought(&held_after_close(intent, &r.id), r, now);
        let from = format!("{} (its purchase closed unbought)", intent.state.as_str());
        self.enqueue(&block, "held-after-close", &announce::held_again(&block, &from, &r.state), now).await?;
        if matches!(block.state, BlockState::Scheduled | BlockState::Active) {
            self.reminders.sync(&block, now).await?;
        }
        if self.store.record_held_after_close(intent, &block).await? {
            tracing::warn!(event = "budget_recommitted", reservation = %r.id, intent = %intent.id, fee = %intent.offering.fee,
                "EC2 holds the purchase: its fee counts in the budgets again");
            report.recommitted_budgets.push(r.id.clone());
            report.adopted.push(r.id.clone());
        }
        Ok(OfIntent::Settled)
    }

    /// Whether `r`, carrying recorded `intent`'s tag but not named by it, is a part of its
    /// purchase EC2 listed late (`late_part`), judged by the named parts as EC2 lists them this
    /// run (`listed`) or as stored. A named part neither listed nor stored cannot be measured:
    /// `r` is then taken for a second purchase, tracked uncharged and alarmed, never a part
    /// that would hide one.
    async fn listed_late(&self, intent: &Intent, r: &Reservation, listed: &[Reservation]) -> Result<bool, StoreError> {
        let named: BTreeSet<&String> =
            intent.parts.iter().chain(&intent.reservation_id).filter(|id| **id != r.id).collect();
        let mut stored = Vec::new();
        for id in named.iter().filter(|id| !listed.iter().any(|l| l.id == ***id)) {
            match self.store.get_block(id).await? {
                Some(b) => stored.push(b),
                None => return Ok(false),
            }
        }
        let shown = listed.iter().filter(|l| named.contains(&l.id)).map(NamedPart::from);
        let parts: Vec<NamedPart<'_>> = shown.chain(stored.iter().map(NamedPart::from)).collect();
        let late = late_part(&intent.offering, &parts, r);
        if late {
            tracing::info!(event = "purchase_part_listed_late", reservation = %r.id, intent = %intent.id,
                "a reservation of a recorded purchase EC2 listed after it was recorded");
        }
        Ok(late)
    }
}

/// What a stack-tagged reservation missing from the store is to its intent.
enum OfIntent {
    /// No intent of ours (or one closed unbought): adopted as found, without a fee.
    None,
    /// Recorded as a part of its purchase, or left to its open intent's settlement.
    Settled,
    /// Not a part of the recorded purchase of this intent: a second purchase.
    Duplicate(String),
}

fn rebuys(b: &Block, rules: &HashMap<String, Rule>) -> bool {
    b.rule_id.as_ref().and_then(|r| rules.get(r)).is_some_and(|r| r.rebuy_on_payment_failure)
}

/// Whether EC2 showed `b` in a state on a block's path, so that tracking it makes its stored
/// state and end EC2's (`lifecycle::step` stays or moves): not an off-path state, not
/// NotFound, not an unreadable answer.
fn shown_on_path(b: &Block, obs: &Observed, now: DateTime<Utc>) -> bool {
    matches!(obs, Observed::Found { .. })
        && matches!(
            crate::domain::lifecycle::step(b.state, b.end, obs, now),
            Transition::Stay | Transition::Move { .. }
        )
}

mod ledger;

/// One other part of a failed purchase, as the store has it and EC2 shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PartSeen {
    pub id: String,
    /// Its block's state in the store (None: not tracked yet).
    pub stored: Option<BlockState>,
    /// Its instances, from its stored block (None: not tracked yet).
    pub instances: Option<u32>,
    /// What EC2 says of it (None: not asked, or not answered).
    pub seen: Option<Observed>,
}

/// What `part_still_held` answers when every part the intent names has failed but they hold
/// fewer instances than its offering: EC2 made a part the intent does not name (an UltraServer
/// it had not listed when the purchase was recorded by tag), which may be held.
pub const UNSHOWN_PART: &str = "unshown-part";

/// The first of a failed purchase's other parts (UltraServers) that EC2 may still hold, the
/// failing block being `b`: one the store does not have as payment-failed and EC2 does not show
/// as payment-failed either (waiting, paid, not shown, or not answered), or `UNSHOWN_PART`.
/// `None`: every part of the purchase has failed its payment, and the fee may go back. Only
/// EC2's word or the store's counts: a part not shown is not evidence that it is not held. The
/// model checker asks it when its tracker releases a failed payment's fee.
pub fn part_still_held(b: &Block, intent: &Intent, others: &[PartSeen]) -> Option<String> {
    // The bug put back (`sabotage`): a segment's payment judged as a purchase of its own.
    if sabotage::on(Bug::SegmentPaidAlone) && !intent.offering.segments.is_empty() {
        return None;
    }
    let mut instances = u64::from(b.instance_count);
    for p in others {
        if part_may_be_held(p.stored, p.seen.as_ref()) {
            return Some(p.id.clone());
        }
        let shown = match &p.seen {
            Some(Observed::Found { instance_count, .. }) => Some(*instance_count),
            _ => None,
        };
        instances += u64::from(p.instances.or(shown).unwrap_or(0));
    }
    // The parts named hold fewer instances than the purchase bought: one EC2 made is unnamed.
    (instances < u64::from(intent.offering.instance_count)).then(|| UNSHOWN_PART.to_string())
}

/// What a failed payment's kept fee leaves on the rule's guard (`Ledger::add_hold`): the part
/// that may be held has no held block in the table (it failed while another is not shown, or
/// shown but not adopted yet), so without the hold `max_blocks_held` would count the purchase
/// as nothing held and a scan would buy a second block beside it. The model checker writes
/// what it answers when its tracker keeps a fee.
pub fn kept_fee_hold(intent: &Intent) -> Option<ReleasedHold> {
    // The bug put back (`sabotage`): a kept fee leaves the rule free to buy.
    if sabotage::on(Bug::KeptFeeNotHeld) {
        return None;
    }
    Some(ReleasedHold::kept(intent))
}

/// Whether another part of a failed purchase (an UltraServer of N) may still be held, as the
/// store has it (`stored`) and EC2 shows it (`seen`; None: not asked, or not answered): the
/// purchase's fee stays committed while one may. The model checker asks it when its tracker
/// releases a failed payment's fee.
pub fn part_may_be_held(stored: Option<BlockState>, seen: Option<&Observed>) -> bool {
    // The bug put back (`sabotage`): a part EC2 does not list taken for a failed one.
    if sabotage::on(Bug::UnlistedPartFailed) && matches!(seen, Some(Observed::NotFound)) {
        return false;
    }
    !part_failed(stored, seen)
}

#[cfg(test)]
mod tests;
