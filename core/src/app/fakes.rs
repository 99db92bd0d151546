//! The table and the market in memory, for the workflows' unit tests: reads answer from what a
//! test put there, and every write is recorded by name (a test of a replay asserts there were
//! none; the local-stack tests in `tests/` run the same workflows on moto and the simulator).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};

use crate::domain::block::{Block, Reservation};
use crate::domain::budget::{BudgetOwner, BudgetUsage, Intent, IntentState, Period};
use crate::domain::extension::{ExtensionIntent, ExtensionOffer, ExtensionReceipt, ExtensionState};
use crate::domain::health::BlockHealth;
use crate::domain::lifecycle::Observed;
use crate::domain::money::Money;
use crate::domain::names::{InstanceType, Region};
use crate::domain::offering::Offering;
use crate::domain::plan::RegionMemory;
use crate::domain::rule::Rule;
use crate::domain::tags::INTENT_TAG;
use crate::ports::*;

pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
}

/// A rule for 1 x p5.48xlarge for a day in us-east-1, up to 3.00 per GPU-hour, 600 a month.
pub fn rule(id: &str, mode: &str) -> Rule {
    let text = format!(
        "id = \"{id}\"\nmode = \"{mode}\"\nregions = [\"us-east-1\"]\ninstance_types = [\"p5.48xlarge\"]\n\
         instance_counts = [1]\ndurations_days = [1]\nstart_window = {{ earliest_in_days = 1, latest_in_days = 14 }}\n\
         max_price_per_accelerator_hour = \"3\"\nmonthly_budget = \"600\"\nmax_purchases_per_month = 1\n"
    );
    Rule::from_toml(&text, t0()).unwrap()
}

/// 1 x p5.48xlarge (8 GPUs) in us-east-1a for the day from `start`, 480 USD (2.50 per GPU-hour).
pub fn offering(id: &str, start: DateTime<Utc>) -> Offering {
    crate::domain::offering::example(id, "us-east-1", start, Money::parse("480", "USD").unwrap())
}

/// `rule`'s intent for `offering`, sent to EC2 at `sent_at` (its answer lost).
pub fn sent_intent(rule: &Rule, offering: Offering, sent_at: DateTime<Utc>) -> Intent {
    let charges = crate::domain::budget::charges_for(rule, &Default::default(), &Period::of(sent_at))
        .expect("a fake rule names no team");
    let mut i = Intent::new(&rule.id, offering, 8, charges, sent_at);
    i.state = IntentState::Sent;
    i.sent_at = Some(sent_at);
    i
}

/// The reservation EC2 made for `intent`, carrying its tag.
pub fn reservation_of(intent: &Intent, id: &str) -> Reservation {
    let o = &intent.offering;
    Reservation {
        id: id.into(),
        arn: None,
        region: o.region.clone(),
        availability_zone: o.availability_zone.clone(),
        instance_type: o.instance_type.clone(),
        instance_count: o.instance_count,
        start: o.start,
        end: o.end,
        state: "scheduled".into(),
        reservation_type: Some("capacity-block".into()),
        tags: [(INTENT_TAG.to_string(), intent.id.clone())].into(),
        capacity_block_id: None,
    }
}

/// The table: what a test stored, and the name of every write a workflow made.
#[derive(Default)]
pub struct Table {
    pub rules: Vec<Rule>,
    pub intents: Vec<Intent>,
    pub blocks: Vec<Block>,
    pub extensions: Vec<ExtensionIntent>,
    pub memory: BTreeMap<Region, RegionMemory>,
    /// Region -> (run, until): which run asks it now.
    pub watch: Mutex<BTreeMap<Region, (String, DateTime<Utc>)>>,
    pub writes: Mutex<Vec<String>>,
}

impl Table {
    fn wrote(&self, what: impl Into<String>) {
        self.writes.lock().unwrap().push(what.into());
    }

    pub fn writes(&self) -> Vec<String> {
        self.writes.lock().unwrap().clone()
    }
}

#[async_trait]
impl RuleStore for Table {
    async fn put_rule(&self, rule: &Rule, _: Option<u64>) -> Result<u64, StoreError> {
        self.wrote(format!("put_rule {}", rule.id));
        Ok(1)
    }
    async fn get_rule(&self, id: &str) -> Result<Option<StoredRule>, StoreError> {
        Ok(self.rules.iter().find(|r| r.id == id).map(|r| StoredRule { rule: r.clone(), version: 1 }))
    }
    async fn list_rules(&self) -> Result<Vec<StoredRule>, StoreError> {
        Ok(self.rules.iter().map(|r| StoredRule { rule: r.clone(), version: 1 }).collect())
    }
    async fn delete_rule(&self, id: &str) -> Result<bool, StoreError> {
        self.wrote(format!("delete_rule {id}"));
        Ok(true)
    }
}

#[async_trait]
impl Ledger for Table {
    async fn guard(&self, rule_id: &str) -> Result<RuleGuard, StoreError> {
        let open = self.intents.iter().find(|i| i.rule_id == rule_id && i.state.is_open()).map(|i| i.id.clone());
        Ok(RuleGuard { open_intent: open, seq: 1 })
    }
    async fn usage(&self, owner: &BudgetOwner, period: &Period) -> Result<Option<BudgetUsage>, StoreError> {
        let mine = |i: &&Intent| i.charges.iter().any(|c| &c.owner == owner && &c.period == period);
        let fees: Vec<Money> = self.intents.iter().filter(mine).map(|i| i.offering.fee).collect();
        let Some(first) = fees.first() else { return Ok(None) };
        let committed = fees[1..].iter().fold(*first, |a, b| a.checked_add(b).unwrap());
        Ok(Some(BudgetUsage { committed, spent: Money::zero(first.currency()), purchases: fees.len() as u32 }))
    }
    async fn reserve(&self, intent: &Intent, _: u64) -> Result<(), ReserveError> {
        self.wrote(format!("reserve {}", intent.id));
        Ok(())
    }
    async fn mark_sent(&self, intent_id: &str, _: &str, _: DateTime<Utc>) -> Result<(), StoreError> {
        self.wrote(format!("mark_sent {intent_id}"));
        Ok(())
    }
    async fn record_bought(&self, intent: &Intent, _: &Block, _: &[Notice]) -> Result<(), StoreError> {
        self.wrote(format!("record_bought {}", intent.id));
        Ok(())
    }
    async fn record_rejected(&self, intent: &Intent, _: &str, _: Option<&Notice>) -> Result<(), StoreError> {
        self.wrote(format!("record_rejected {}", intent.id));
        Ok(())
    }
    async fn record_given_back(&self, intent: &Intent, _: &str) -> Result<(), StoreError> {
        self.wrote(format!("record_given_back {}", intent.id));
        Ok(())
    }
    async fn record_dry_run(&self, intent: &Intent) -> Result<bool, StoreError> {
        self.wrote(format!("record_dry_run {}", intent.id));
        Ok(true)
    }
    async fn get_intent(&self, rule_id: &str, intent_id: &str) -> Result<Option<Intent>, StoreError> {
        Ok(self.intents.iter().find(|i| i.rule_id == rule_id && i.id == intent_id).cloned())
    }
    async fn open_intents(&self) -> Result<Vec<Intent>, StoreError> {
        Ok(self.intents.iter().filter(|i| i.state.is_open()).cloned().collect())
    }
    async fn release_failed_block(
        &self,
        block: &Block,
        _: &Intent,
        _: bool,
        _: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.wrote(format!("release_failed_block {}", block.reservation_id));
        Ok(true)
    }
}

#[async_trait]
impl BlockStore for Table {
    async fn open_blocks(&self, rule_id: Option<&str>) -> Result<Vec<Block>, StoreError> {
        let of_rule = |b: &&Block| rule_id.is_none_or(|r| b.rule_id.as_deref() == Some(r));
        Ok(self.blocks.iter().filter(|b| !b.state.is_final()).filter(of_rule).cloned().collect())
    }
    async fn get_block(&self, reservation_id: &str) -> Result<Option<Block>, StoreError> {
        Ok(self.blocks.iter().find(|b| b.reservation_id == reservation_id).cloned())
    }
    async fn adopt_block(&self, block: &Block) -> Result<bool, StoreError> {
        self.wrote(format!("adopt_block {}", block.reservation_id));
        Ok(true)
    }
    async fn update_block(&self, block: &Block, _: u64) -> Result<(), StoreError> {
        self.wrote(format!("update_block {}", block.reservation_id));
        Ok(())
    }
}

#[async_trait]
impl ExtensionLedger for Table {
    async fn reserve_extension(&self, intent: &ExtensionIntent) -> Result<(), ReserveError> {
        self.wrote(format!("reserve_extension {}", intent.id()));
        Ok(())
    }
    async fn advance_extension(
        &self,
        intent: &ExtensionIntent,
        to: ExtensionState,
        _: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.wrote(format!("advance_extension {} {}", intent.id(), to.as_str()));
        Ok(())
    }
    async fn close_extension(
        &self,
        intent: &ExtensionIntent,
        to: ExtensionState,
        _: Option<&str>,
    ) -> Result<(), StoreError> {
        self.wrote(format!("close_extension {} {}", intent.id(), to.as_str()));
        Ok(())
    }
    async fn extensions_of(&self, reservation_id: &str) -> Result<Vec<ExtensionIntent>, StoreError> {
        Ok(self.extensions.iter().filter(|x| x.reservation_id == reservation_id).cloned().collect())
    }
    async fn open_extensions(&self) -> Result<Vec<ExtensionIntent>, StoreError> {
        Ok(self.extensions.iter().filter(|x| x.state.is_open()).cloned().collect())
    }
}

#[async_trait]
impl ObservationStore for Table {
    async fn record(&self, observations: &[Observation]) -> Result<usize, StoreError> {
        self.wrote(format!("record {} observation(s)", observations.len()));
        Ok(observations.len())
    }
    async fn history(
        &self,
        _: &Region,
        _: &InstanceType,
        _: DateTime<Utc>,
        _: DateTime<Utc>,
    ) -> Result<Vec<Observation>, StoreError> {
        Ok(vec![])
    }
}

#[async_trait]
impl MarketMemory for Table {
    async fn region_memory(&self, region: &Region) -> Result<RegionMemory, StoreError> {
        Ok(self.memory.get(region).cloned().unwrap_or_default())
    }
    async fn save_region_memory(&self, region: &Region, _: &RegionMemory, _: &RegionMemory) -> Result<(), StoreError> {
        self.wrote(format!("save_region_memory {region}"));
        Ok(())
    }
    async fn claim_watch(
        &self,
        region: &Region,
        run: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let mut all = self.watch.lock().unwrap();
        if all.get(region).is_some_and(|(r, u)| r != run && *u >= now && *u <= now + crate::ports::MAX_WATCH_CLAIM) {
            return Ok(false);
        }
        all.insert(region.clone(), (run.to_string(), until));
        Ok(true)
    }
    async fn release_watch(&self, region: &Region, run: &str) -> Result<(), StoreError> {
        let mut all = self.watch.lock().unwrap();
        if all.get(region).is_some_and(|(r, _)| r == run) {
            all.remove(region);
        }
        Ok(())
    }
}

#[async_trait]
impl Outbox for Table {
    async fn enqueue(&self, notice: &Notice) -> Result<bool, StoreError> {
        self.wrote(format!("enqueue {}", notice.id()));
        Ok(true)
    }
    async fn pending(&self) -> Result<Vec<Notice>, StoreError> {
        Ok(vec![])
    }
    async fn lease(&self, notice: &Notice, _: DateTime<Utc>, _: DateTime<Utc>) -> Result<bool, StoreError> {
        self.wrote(format!("lease {}", notice.id()));
        Ok(true)
    }
    async fn mark_published(&self, notice: &Notice, _: DateTime<Utc>) -> Result<(), StoreError> {
        self.wrote(format!("mark_published {}", notice.id()));
        Ok(())
    }
    async fn put_record(&self, notice: &Notice) -> Result<bool, StoreError> {
        self.wrote(format!("put_record {}", notice.id()));
        Ok(true)
    }
    async fn records(&self, _: &str, _: &str) -> Result<Vec<Notice>, StoreError> {
        Ok(vec![])
    }
}

#[async_trait]
impl Notifier for Table {
    async fn publish(&self, topic: Topic, _: &Message) -> Result<(), NotifyError> {
        self.wrote(format!("publish to {topic:?}"));
        Ok(())
    }
}

#[async_trait]
impl Reminders for Table {
    async fn sync(&self, block: &Block, _: DateTime<Utc>) -> Result<(), ReminderError> {
        self.wrote(format!("reminders sync {}", block.reservation_id));
        Ok(())
    }
    async fn clear(&self, block: &Block) -> Result<(), ReminderError> {
        self.wrote(format!("reminders clear {}", block.reservation_id));
        Ok(())
    }
}

/// EC2: the offerings on sale and the reservations it made. `hang`: tag lookups never answer
/// (a throttle storm the SDK keeps retrying).
#[derive(Default)]
pub struct Market {
    pub offerings: Vec<Offering>,
    pub reservations: Vec<Reservation>,
    pub hang: bool,
    /// Every call that could buy or check a purchase, by name.
    pub purchases: Mutex<Vec<String>>,
    /// AvailableInstanceCount by reservation id (absent: EC2 leaves it out).
    pub available: Mutex<HashMap<String, u32>>,
}

#[async_trait]
impl QuotaSource for Market {
    async fn capacity_block_quota(&self, _: &Region, _: &str) -> Option<u32> {
        None
    }
}

#[async_trait]
impl OfferingSource for Market {
    async fn offerings(&self, q: &OfferingQuery) -> Result<Vec<Offering>, MarketError> {
        Ok(self
            .offerings
            .iter()
            .filter(|o| {
                o.region == q.region && o.instance_type == q.instance_type && o.instance_count == q.instance_count
            })
            .cloned()
            .collect())
    }
}

#[async_trait]
impl InstanceTypeSource for Market {
    async fn accelerators(&self, _: &Region, types: &[InstanceType]) -> Result<Vec<(InstanceType, u32)>, MarketError> {
        Ok(types.iter().map(|t| (t.clone(), 8)).collect())
    }
}

#[async_trait]
impl Purchaser for Market {
    async fn purchase(&self, req: &PurchaseRequest) -> Result<PurchaseOutcome, MarketError> {
        self.purchases.lock().unwrap().push(format!("purchase {} dry_run={}", req.offering.id, req.dry_run));
        if req.dry_run {
            return Ok(PurchaseOutcome::WouldSucceed);
        }
        Err(MarketError::Rejected {
            operation: "PurchaseCapacityBlock",
            region: req.offering.region.to_string(),
            code: "Unsupported".into(),
            message: "the fake market sells nothing".into(),
        })
    }
}

#[async_trait]
impl ReservationSource for Market {
    async fn reservations_tagged(&self, region: &Region, key: &str, value: &str) -> Result<Tagged, MarketError> {
        if self.hang {
            std::future::pending::<()>().await;
        }
        let tagged = |r: &&Reservation| &r.region == region && r.tags.get(key).is_some_and(|v| v == value);
        Ok(Tagged { reservations: self.reservations.iter().filter(tagged).cloned().collect(), unreadable: vec![] })
    }
    async fn observe(&self, _: &Region, ids: &[String]) -> Result<Vec<(String, Observed)>, MarketError> {
        Ok(ids
            .iter()
            .map(|id| {
                let seen = self.reservations.iter().find(|r| &r.id == id);
                let o = seen.map_or(Observed::NotFound, |r| Observed::Found {
                    state: r.state.clone(),
                    end: r.end,
                    capacity_block_id: None,
                    instance_count: r.instance_count,
                    available: self.available.lock().unwrap().get(id).copied(),
                });
                (id.clone(), o)
            })
            .collect())
    }
    async fn capacity_blocks(&self, region: &Region) -> Result<Vec<Reservation>, MarketError> {
        Ok(self.reservations.iter().filter(|r| &r.region == region).cloned().collect())
    }
}

#[async_trait]
impl ExtensionMarket for Market {
    async fn extension_offerings(&self, _: &Region, _: &str, _: u32) -> Result<Vec<ExtensionOffer>, MarketError> {
        Ok(vec![])
    }
    async fn purchase_extension(
        &self,
        _: &Region,
        offering_id: &str,
        _: &str,
    ) -> Result<ExtensionReceipt, MarketError> {
        self.purchases.lock().unwrap().push(format!("purchase_extension {offering_id}"));
        Err(MarketError::Rejected {
            operation: "PurchaseCapacityBlockExtension",
            region: "us-east-1".into(),
            code: "Unsupported".into(),
            message: "the fake market sells nothing".into(),
        })
    }
    async fn check_extension(&self, _: &Region, offering_id: &str, _: &str) -> Result<(), MarketError> {
        self.purchases.lock().unwrap().push(format!("check_extension {offering_id}"));
        Ok(())
    }
}

#[async_trait]
impl BlockKinds for Market {
    async fn capacity_blocks_by_id(&self, _: &Region, _: &[String]) -> Result<Vec<CapacityBlockFacts>, MarketError> {
        Ok(vec![])
    }
}

#[async_trait]
impl BlockStatusSource for Market {
    async fn block_status(&self, _: &Region, _: &[String]) -> Result<Vec<(String, BlockHealth)>, MarketError> {
        Ok(vec![])
    }
}

#[async_trait]
impl ExtensionHistory for Market {
    async fn extension_history(&self, _: &Region, _: &[String]) -> Result<Vec<ExtensionRecord>, MarketError> {
        Ok(vec![])
    }
}
