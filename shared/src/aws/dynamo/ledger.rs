//! Purchase bookkeeping: intents (`RULE#<id>` / `INTENT#<offering>`), the rule guard, the
//! budgets (`BUDGET#<owner>` / `PERIOD#<yyyy-mm>`), dry-run and approval records, and the
//! block a purchase records, moved together in transactions. A closed intent keeps
//! `fee_released_at` once its failed payment gave the fee back: once per purchase, however
//! many UltraServers (block items) it made.

use super::*;
use crate::domain::settlement::held_after_close;

#[async_trait]
impl Ledger for DynamoStore {
    async fn guard(&self, rule_id: &str) -> Result<RuleGuard, StoreError> {
        let item = self.get(key(rule_pk(rule_id), "GUARD")).await?;
        Ok(match item {
            None => RuleGuard::default(),
            Some(i) => RuleGuard {
                open_intent: get_s(&i, "open_intent").map(str::to_string),
                seq: get_u64(&i, "seq")?.unwrap_or(0),
                released: released_holds(&i, rule_id)?,
            },
        })
    }

    async fn usage(&self, owner: &BudgetOwner, period: &Period) -> Result<Option<BudgetUsage>, StoreError> {
        let Some(item) = self.get(budget_key(owner, period)).await? else { return Ok(None) };
        let currency = get_s(&item, "currency").unwrap_or("USD");
        let money = |d: Option<Decimal>| {
            Money::parse(&d.unwrap_or_default().to_string(), currency)
                .map_err(|e| StoreError::Corrupt { key: format!("budget {}", owner.key()), message: e.to_string() })
        };
        Ok(Some(BudgetUsage {
            committed: money(get_decimal(&item, "committed")?)?,
            spent: money(get_decimal(&item, "spent")?)?,
            purchases: get_u64(&item, "purchases")?.unwrap_or(0) as u32,
        }))
    }

    async fn reserve(&self, intent: &Intent, seen_seq: u64) -> Result<(), ReserveError> {
        let fee = intent.offering.fee;
        let charges = &intent.charges;
        let items = vec![
            tx_put(
                Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(Self::intent_item(intent)))
                    .condition_expression("attribute_not_exists(pk)"),
            ),
            tx_update(
                self.update(
                    key(rule_pk(&intent.rule_id), "GUARD"),
                    "SET open_intent = :iid, seq = if_not_exists(seq, :zero) + :one",
                )
                .condition_expression(
                    "attribute_not_exists(open_intent) AND (attribute_not_exists(seq) OR seq = :seen)",
                )
                .expression_attribute_values(":iid", s(&intent.id))
                .expression_attribute_values(":zero", n(0))
                .expression_attribute_values(":one", n(1))
                .expression_attribute_values(":seen", n(seen_seq)),
            ),
        ];
        let mut approval = intent.approval.as_ref().map_or_else(Vec::new, |a| self.consume_approval(intent, a));
        let mut request = None;
        if let Some(key) = &intent.request {
            approval.push(self.consume_request(intent, &key.id));
            request = Some((key.id.clone(), self.request_still_open(key)));
        }
        self.reserve_charged(items, charges, fee, true, approval, request).await
    }

    async fn mark_sent(&self, intent_id: &str, rule_id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        let Some(mut intent) = self.get_intent(rule_id, intent_id).await? else {
            return Err(StoreError::NotFound { what: format!("intent {intent_id}") });
        };
        intent.state = IntentState::Sent;
        intent.sent_at = Some(at);
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(intent_key(rule_id, &intent.offering.id)))
            .update_expression("SET #s = :sent, #d = :data")
            .condition_expression("#s = :reserved")
            .expression_attribute_names("#s", "state")
            .expression_attribute_names("#d", "data")
            .expression_attribute_values(":sent", s(IntentState::Sent.as_str()))
            .expression_attribute_values(":reserved", s(IntentState::Reserved.as_str()))
            .expression_attribute_values(":data", json(&intent))
            .send()
            .await
            .map_err(|e| store_err(&format!("intent {intent_id} is no longer reserved"), e))?;
        Ok(())
    }

    async fn record_bought(&self, intent: &Intent, block: &Block, notices: &[Notice]) -> Result<(), StoreError> {
        let mut closed = intent.clone();
        closed.state = IntentState::Bought;
        closed.reservation_id = Some(block.reservation_id.clone());
        let put_block = tx_put(
            Put::builder()
                .table_name(&self.table)
                .set_item(Some(Self::block_item(block)))
                .condition_expression("attribute_not_exists(pk)"),
        );
        let mut puts = vec![put_block];
        puts.extend(notices.iter().map(|n| self.put_notice(n)));
        self.close_intent(intent, Some(closed), "SET spent = spent + :fee", puts, None).await
    }

    async fn record_rejected(&self, intent: &Intent, reason: &str, notice: Option<&Notice>) -> Result<(), StoreError> {
        let mut closed = intent.clone();
        closed.state = IntentState::Rejected;
        closed.reason = Some(reason.to_string());
        let mut extra: Vec<TransactWriteItem> = notice.map(|n| self.put_notice(n)).into_iter().collect();
        // EC2 said no: nothing was bought on a request's approval, which may buy another
        // offering (a rule's approval names this offering, which stays tried).
        extra.extend(intent.request.as_ref().map(|k| self.give_request_back(intent, &k.id)));
        self.close_intent(intent, Some(closed), RELEASE_FEE, extra, None).await
    }

    async fn release_by_person(&self, intent: &Intent, reason: &str) -> Result<(), StoreError> {
        let mut closed = intent.clone();
        closed.state = IntentState::Rejected;
        closed.reason = Some(reason.to_string());
        let hold = ReleasedHold::of(intent);
        self.close_intent(intent, Some(closed), RELEASE_FEE, vec![], Some(&hold)).await
    }

    async fn add_hold(&self, rule_id: &str, hold: &ReleasedHold) -> Result<(), StoreError> {
        // `contains` on a list compares whole elements: the same hold (same JSON) is not
        // appended twice, and a refused condition means it is there already.
        let held = json(hold);
        let added = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(rule_pk(rule_id), "GUARD")))
            .update_expression("SET released = list_append(if_not_exists(released, :none), :hold)")
            .condition_expression("attribute_not_exists(released) OR NOT contains(released, :one)")
            .expression_attribute_values(":none", AttributeValue::L(vec![]))
            .expression_attribute_values(":hold", AttributeValue::L(vec![held.clone()]))
            .expression_attribute_values(":one", held)
            .send()
            .await;
        match added.map_err(|e| store_err(&format!("hold {} on rule {rule_id}", hold.intent), e)) {
            Ok(_) | Err(StoreError::Conflict(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn record_given_back(&self, intent: &Intent, reason: &str) -> Result<(), StoreError> {
        tracing::info!(event = "intent_given_back", intent = %intent.id, %reason, "nothing reached EC2; the offering may be tried again");
        // Nothing was bought on the approval it consumed: it may be approved again.
        let mut approval = intent.approval.as_ref().map_or_else(Vec::new, |a| self.give_approval_back(intent, a));
        approval.extend(intent.request.as_ref().map(|k| self.give_request_back(intent, &k.id)));
        self.close_intent(intent, None, RELEASE_FEE, approval, None).await
    }

    async fn record_dry_run(&self, intent: &Intent) -> Result<bool, StoreError> {
        // Once per block, whatever id EC2 gave it in this answer.
        let mut item = key(rule_pk(&intent.rule_id), format!("DRYRUN#{}", intent.offering.block_key()));
        item.insert("data".into(), json(intent));
        item.insert("state".into(), s(IntentState::DryRun.as_str()));
        self.put_new(item, "dry-run record").await
    }

    async fn record_approval(&self, intent: &Intent) -> Result<bool, StoreError> {
        // The request by the offering's id (what `capblock approve` names), then the block's
        // marker, which decides: a block EC2 names anew in a later answer is asked about once.
        // A run that dies between the two writes leaves no marker, so the next one asks.
        let mut item = key(rule_pk(&intent.rule_id), format!("APPROVAL#{}", intent.offering.id));
        item.insert("data".into(), json(intent));
        item.insert("state".into(), s("awaiting-approval"));
        self.put_new(item, "approval record").await?;
        let marker = key(rule_pk(&intent.rule_id), format!("APPROVALBLOCK#{}", intent.offering.block_key()));
        self.put_new(marker, "approval marker").await
    }

    async fn get_approval(&self, rule_id: &str, offering_id: &str) -> Result<Option<Intent>, StoreError> {
        self.get(key(rule_pk(rule_id), format!("APPROVAL#{offering_id}"))).await?.map(|i| data(&i)).transpose()
    }

    async fn approvals_waiting(&self, rule_id: &str) -> Result<Vec<Intent>, StoreError> {
        // The records (`APPROVAL#`) and the blocks' markers (`APPROVALBLOCK#`): a record
        // consumed, or of a block consumed under another id EC2 gave it, waits no more.
        let of_rule = |prefix: &str| {
            self.client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk AND begins_with(sk, :p)")
                .expression_attribute_values(":pk", s(rule_pk(rule_id)))
                .expression_attribute_values(":p", s(prefix))
        };
        let consumed = |i: &&Item| i.contains_key("consumed_by");
        let markers = Self::all_items(of_rule("APPROVALBLOCK#"), "approval markers of rule").await?;
        let used_blocks: std::collections::BTreeSet<String> = markers
            .iter()
            .filter(consumed)
            .filter_map(|i| get_s(i, "sk")?.strip_prefix("APPROVALBLOCK#").map(str::to_string))
            .collect();
        let records = Self::all_items(of_rule("APPROVAL#"), "approvals of rule").await?;
        let waiting: Vec<Item> = records.iter().filter(|i| !consumed(i)).cloned().collect();
        let waiting = self.decode_each(&waiting, "approvals", data::<Intent>);
        Ok(waiting.into_iter().filter(|a| !used_blocks.contains(&a.offering.block_key())).collect())
    }

    async fn get_intent(&self, rule_id: &str, intent_id: &str) -> Result<Option<Intent>, StoreError> {
        let offering_id = intent_id.strip_prefix(&format!("{rule_id}/")).unwrap_or(intent_id);
        self.get(intent_key(rule_id, offering_id)).await?.map(|i| data(&i)).transpose()
    }

    async fn open_intents(&self) -> Result<Vec<Intent>, StoreError> {
        // One left out is never settled, but keeps its rule's guard (no purchase for that rule)
        // and its fee committed until it is repaired: the safe side.
        Ok(self.decode_each(&self.query_gsi(OPEN_INTENTS, None).await?, "open intents", data))
    }

    async fn release_failed_block(
        &self,
        block: &Block,
        intent: &Intent,
        restore_purchase: bool,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        let fee = n(intent.offering.fee.amount());
        // The mark that makes it once: on the intent, which a purchase of N UltraServers (N
        // block items, one fee) shares; a mark per block item would release the fee N times.
        let mut items = vec![
            tx_update(
                self.update(intent_key(&intent.rule_id, &intent.offering.id), "SET fee_released_at = :at")
                    .condition_expression("attribute_exists(pk) AND attribute_not_exists(fee_released_at)")
                    .expression_attribute_values(":at", s(at.to_rfc3339())),
            ),
            tx_update(
                self.update(key(block_pk(&block.reservation_id), "BLOCK"), "SET budget_released_at = :at")
                    .condition_expression("attribute_exists(pk)")
                    .expression_attribute_values(":at", s(at.to_rfc3339())),
            ),
        ];
        let expr = if restore_purchase {
            "SET committed = committed - :fee, spent = spent - :fee, purchases = purchases - :one"
        } else {
            "SET committed = committed - :fee, spent = spent - :fee"
        };
        for c in &intent.charges {
            let mut u = self
                .update(budget_key(&c.owner, &c.period), expr)
                // The fee must have been spent there: never drive a budget below zero.
                .condition_expression("spent >= :fee AND committed >= :fee")
                .expression_attribute_values(":fee", fee.clone());
            if restore_purchase {
                u = u.expression_attribute_values(":one", n(1));
            }
            items.push(tx_update(u));
        }
        let what = format!("releasing the budget of block {}", block.reservation_id);
        match self.transact(items).await {
            Ok(()) => Ok(true),
            // The intent's condition failed: released before, or no such intent (which never
            // held the fee: no answer of "released" for it). One read tells them apart.
            Err(TxError::Cancelled(codes)) if failed_at(&codes, 0) => {
                match self.get(intent_key(&intent.rule_id, &intent.offering.id)).await? {
                    Some(_) => Ok(false),
                    None => Err(StoreError::Conflict(format!("{what}: no intent"))),
                }
            }
            Err(e) => Err(cancelled(&what, e)),
        }
    }

    async fn recommit_released_fee(
        &self,
        block: &Block,
        intent: &Intent,
        count_purchase: bool,
    ) -> Result<bool, StoreError> {
        // Once per release: the intent's mark decides, as it did for the release.
        let mut items = vec![
            tx_update(
                self.update(intent_key(&intent.rule_id, &intent.offering.id), "REMOVE fee_released_at")
                    .condition_expression("attribute_exists(pk) AND attribute_exists(fee_released_at)"),
            ),
            tx_update(
                self.update(key(block_pk(&block.reservation_id), "BLOCK"), "REMOVE budget_released_at")
                    .condition_expression("attribute_exists(pk)"),
            ),
        ];
        items.extend(self.commit_again(intent, count_purchase));
        match self.transact(items).await {
            Ok(()) => Ok(true),
            // Not released, or no such intent (as the in-memory ledger answers: a conflict).
            Err(TxError::Cancelled(codes)) if failed_at(&codes, 0) => {
                match self.get(intent_key(&intent.rule_id, &intent.offering.id)).await? {
                    Some(_) => Ok(false),
                    None => Err(StoreError::Conflict(format!(
                        "recommitting the fee of block {}: no intent",
                        block.reservation_id
                    ))),
                }
            }
            Err(e) => Err(cancelled(&format!("recommitting the fee of block {}", block.reservation_id), e)),
        }
    }

    async fn record_held_after_close(&self, intent: &Intent, block: &Block) -> Result<bool, StoreError> {
        self.held_after_close(intent, block).await
    }
}

impl DynamoStore {
    /// The transaction steps that put `intent`'s fee back into `committed` and `spent` of every
    /// budget it charged, and count the purchase again when `count_purchase`. No limit in the
    /// condition: EC2 took the money, whatever the budget's limit says.
    fn commit_again(&self, intent: &Intent, count_purchase: bool) -> Vec<TransactWriteItem> {
        let fee = n(intent.offering.fee.amount());
        let expr = if count_purchase {
            "SET committed = if_not_exists(committed, :zero) + :fee, spent = if_not_exists(spent, :zero) + :fee, \
             purchases = if_not_exists(purchases, :zero) + :one"
        } else {
            "SET committed = if_not_exists(committed, :zero) + :fee, spent = if_not_exists(spent, :zero) + :fee"
        };
        intent
            .charges
            .iter()
            .map(|c| {
                let mut u = self
                    .update(budget_key(&c.owner, &c.period), expr)
                    .expression_attribute_values(":fee", fee.clone())
                    .expression_attribute_values(":zero", n(0));
                if count_purchase {
                    u = u.expression_attribute_values(":one", n(1));
                }
                tx_update(u)
            })
            .collect()
    }

    /// `Ledger::record_held_after_close`: the intent Rejected -> Bought (the condition that makes
    /// it once), the block put (absent), its id in the guard's `held`, the fee back in every
    /// budget with no limit, the purchase counted.
    pub(super) async fn held_after_close(&self, intent: &Intent, block: &Block) -> Result<bool, StoreError> {
        let bought = held_after_close(intent, &block.reservation_id);
        let mut items = vec![
            tx_update(
                self.update(intent_key(&intent.rule_id, &intent.offering.id), "SET #s = :bought, #d = :data")
                    .condition_expression("#s = :rejected")
                    .expression_attribute_names("#s", "state")
                    .expression_attribute_names("#d", "data")
                    .expression_attribute_values(":bought", s(IntentState::Bought.as_str()))
                    .expression_attribute_values(":rejected", s(IntentState::Rejected.as_str()))
                    .expression_attribute_values(":data", json(&bought)),
            ),
            tx_put(
                Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(Self::block_item(block)))
                    .condition_expression("attribute_not_exists(pk)"),
            ),
            tx_update(
                self.update(key(rule_pk(&intent.rule_id), "GUARD"), "ADD held :held")
                    .expression_attribute_values(":held", AttributeValue::Ss(vec![block.reservation_id.clone()])),
            ),
        ];
        items.extend(self.commit_again(intent, true));
        match self.transact(items).await {
            Ok(()) => Ok(true),
            // No longer rejected, or the block is stored: another run recorded it first.
            Err(TxError::Cancelled(codes)) if failed_at(&codes, 0) || failed_at(&codes, 1) => {
                match self.get(intent_key(&intent.rule_id, &intent.offering.id)).await? {
                    Some(_) => Ok(false),
                    None => Err(StoreError::Conflict(format!("recording block {}: no intent", block.reservation_id))),
                }
            }
            Err(e) => Err(cancelled(&format!("recording block {} of a closed intent", block.reservation_id), e)),
        }
    }

    /// The reservation's steps that consume approval `a`: its record (`APPROVAL#<offering>`,
    /// which must exist) and its block's marker (`APPROVALBLOCK#<block key>`), each marked
    /// `consumed_by` the intent unless a purchase consumed it before. By the block, so one
    /// approval buys once whatever id EC2 gave the block in the answer bought from.
    fn consume_approval(&self, intent: &Intent, a: &Approved) -> Vec<TransactWriteItem> {
        let pk = rule_pk(&intent.rule_id);
        let record = self
            .update(key(pk.clone(), format!("APPROVAL#{}", a.offering_id)), "SET consumed_by = :iid")
            .condition_expression("attribute_exists(pk) AND attribute_not_exists(consumed_by)");
        let marker = self
            .update(key(pk, format!("APPROVALBLOCK#{}", a.block)), "SET consumed_by = :iid")
            .condition_expression("attribute_not_exists(consumed_by)");
        [record, marker].into_iter().map(|u| tx_update(u.expression_attribute_values(":iid", s(&intent.id)))).collect()
    }

    /// The give-back's steps that un-consume approval `a`, consumed by `intent`'s reservation.
    fn give_approval_back(&self, intent: &Intent, a: &Approved) -> Vec<TransactWriteItem> {
        let pk = rule_pk(&intent.rule_id);
        [format!("APPROVAL#{}", a.offering_id), format!("APPROVALBLOCK#{}", a.block)]
            .into_iter()
            .map(|sk| {
                tx_update(
                    self.update(key(pk.clone(), sk), "REMOVE consumed_by")
                        .condition_expression("consumed_by = :iid")
                        .expression_attribute_values(":iid", s(&intent.id)),
                )
            })
            .collect()
    }
}

/// The guard's `released` holds (each a JSON string), strict: each bounds the rule's purchases.
fn released_holds(item: &Item, rule_id: &str) -> Result<Vec<ReleasedHold>, StoreError> {
    let Some(AttributeValue::L(list)) = item.get("released") else { return Ok(Vec::new()) };
    list.iter()
        .map(|v| {
            let text = v.as_s().map_err(|_| "not a string".to_string())?;
            serde_json::from_str(text).map_err(|e| e.to_string())
        })
        .collect::<Result<_, String>>()
        .map_err(|message| StoreError::Corrupt { key: format!("guard of rule {rule_id}"), message })
}
