//! The tracker's part of the store: block updates, the payment-failure release and extension
//! intents. A child module so it can use the table's private helpers.
//!
//! | item             | pk                    | sk                 | gsi1pk / gsi1sk         |
//! |------------------|-----------------------|--------------------|-------------------------|
//! | extension intent | `BLOCK#<reservation>` | `EXT#<offering>`   | `EXT#OPEN` while open   |
//!
//! The block item also carries `budget_released_at` (set once, by the release) and
//! `open_extension` (the block's extension guard).

use super::*;

const OPEN_EXTENSIONS: &str = "EXT#OPEN";

fn ext_key(reservation_id: &str, offering_id: &str) -> Item {
    key(block_pk(reservation_id), format!("EXT#{offering_id}"))
}

fn ext_item(x: &ExtensionIntent) -> Item {
    let mut item = ext_key(&x.reservation_id, &x.offer.id);
    item.insert("state".into(), s(x.state.as_str()));
    item.insert("data".into(), json(x));
    if x.state.is_open() {
        item.insert("gsi1pk".into(), s(OPEN_EXTENSIONS));
        item.insert("gsi1sk".into(), s(x.id()));
    }
    item
}

impl DynamoStore {
    pub(super) async fn update_block_item(&self, block: &Block, expected_version: u64) -> Result<(), StoreError> {
        let mut stored = block.clone();
        stored.version = expected_version + 1;
        // An UpdateItem, not a Put: the attributes other writers own (the release marker, the
        // extension guard) must survive.
        let expr = if stored.state.is_final() {
            "SET #s = :state, version = :new, #d = :data REMOVE gsi1pk, gsi1sk"
        } else {
            "SET #s = :state, version = :new, #d = :data, gsi1pk = :gpk, gsi1sk = :gsk"
        };
        let mut u = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key(block_pk(&block.reservation_id), "BLOCK")))
            .update_expression(expr)
            .condition_expression("version = :expected")
            .expression_attribute_names("#s", "state")
            .expression_attribute_names("#d", "data")
            .expression_attribute_values(":state", s(stored.state.as_str()))
            .expression_attribute_values(":new", n(stored.version))
            .expression_attribute_values(":data", json(&stored))
            .expression_attribute_values(":expected", n(expected_version));
        if !stored.state.is_final() {
            u = u.expression_attribute_values(":gpk", s(OPEN_BLOCKS)).expression_attribute_values(
                ":gsk",
                s(block_gsi_sk(stored.rule_id.as_deref(), &stored.reservation_id)),
            );
        }
        u.send().await.map_err(|e| {
            store_err(&format!("block {} changed since version {expected_version}", block.reservation_id), e)
        })?;
        Ok(())
    }

    pub(super) async fn reserve_extension_tx(&self, x: &ExtensionIntent) -> Result<(), ReserveError> {
        let fee = x.offer.fee;
        let items: Vec<TransactWriteItem> = vec![
            tx_put(
                Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(ext_item(x)))
                    .condition_expression("attribute_not_exists(pk)"),
            ),
            tx_update(
                self.update(key(block_pk(&x.reservation_id), "BLOCK"), "SET open_extension = :id")
                    .condition_expression("attribute_exists(pk) AND attribute_not_exists(open_extension)")
                    .expression_attribute_values(":id", s(x.id())),
            ),
        ];
        // Money only: an extension is not a purchase, so the purchase count stays.
        self.reserve_charged(items, &x.charges, fee, false, vec![], None).await
    }

    pub(super) async fn advance_extension_item(
        &self,
        x: &ExtensionIntent,
        to: ExtensionState,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let mut next = x.clone();
        next.state = to;
        if to == ExtensionState::Sent {
            next.sent_at = Some(at);
        }
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(ext_key(&x.reservation_id, &x.offer.id)))
            .update_expression("SET #s = :to, #d = :data")
            .condition_expression("#s = :from")
            .expression_attribute_names("#s", "state")
            .expression_attribute_names("#d", "data")
            .expression_attribute_values(":to", s(to.as_str()))
            .expression_attribute_values(":from", s(x.state.as_str()))
            .expression_attribute_values(":data", json(&next))
            .send()
            .await
            .map_err(|e| store_err(&format!("extension {} is no longer {}", x.id(), x.state.as_str()), e))?;
        Ok(())
    }

    pub(super) async fn close_extension_tx(
        &self,
        x: &ExtensionIntent,
        to: ExtensionState,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        let mut closed = x.clone();
        closed.state = to;
        closed.reason = reason.map(str::to_string);
        let budget_expr = match to {
            ExtensionState::Paid => "SET spent = spent + :fee",
            ExtensionState::Released => "SET committed = committed - :fee",
            other => {
                return Err(StoreError::Conflict(format!("extension {} cannot close as {}", x.id(), other.as_str())));
            }
        };
        let mut items = vec![
            tx_update(
                self.update(ext_key(&x.reservation_id, &x.offer.id), "SET #s = :to, #d = :data REMOVE gsi1pk, gsi1sk")
                    .condition_expression("#s IN (:r, :se, :b)")
                    .expression_attribute_names("#s", "state")
                    .expression_attribute_names("#d", "data")
                    .expression_attribute_values(":to", s(to.as_str()))
                    .expression_attribute_values(":data", json(&closed))
                    .expression_attribute_values(":r", s(ExtensionState::Reserved.as_str()))
                    .expression_attribute_values(":se", s(ExtensionState::Sent.as_str()))
                    .expression_attribute_values(":b", s(ExtensionState::Bought.as_str())),
            ),
            tx_update(
                self.update(key(block_pk(&x.reservation_id), "BLOCK"), "REMOVE open_extension")
                    .condition_expression("open_extension = :id")
                    .expression_attribute_values(":id", s(x.id())),
            ),
        ];
        for c in &x.charges {
            items.push(tx_update(
                self.update(budget_key(&c.owner, &c.period), budget_expr)
                    .condition_expression("attribute_exists(committed)")
                    .expression_attribute_values(":fee", n(x.offer.fee.amount())),
            ));
        }
        self.transact(items)
            .await
            .map_err(|e| cancelled(&format!("closing extension {} as {}", x.id(), to.as_str()), e))
    }

    /// Released -> Paid, conditional on Released, with the fee committed and spent again in
    /// every budget it charged: the memory table's `recommit_extension`, one transaction.
    pub(super) async fn recommit_extension_tx(&self, x: &ExtensionIntent, reason: &str) -> Result<(), StoreError> {
        let mut paid = x.clone();
        paid.state = ExtensionState::Paid;
        paid.reason = Some(reason.to_string());
        let mut items = vec![tx_update(
            self.update(ext_key(&x.reservation_id, &x.offer.id), "SET #s = :to, #d = :data")
                .condition_expression("#s = :released")
                .expression_attribute_names("#s", "state")
                .expression_attribute_names("#d", "data")
                .expression_attribute_values(":to", s(ExtensionState::Paid.as_str()))
                .expression_attribute_values(":data", json(&paid))
                .expression_attribute_values(":released", s(ExtensionState::Released.as_str())),
        )];
        for c in &x.charges {
            items.push(tx_update(
                self.update(budget_key(&c.owner, &c.period), "SET committed = committed + :fee, spent = spent + :fee")
                    .condition_expression("attribute_exists(committed)")
                    .expression_attribute_values(":fee", n(x.offer.fee.amount())),
            ));
        }
        self.transact(items).await.map_err(|e| cancelled(&format!("re-committing extension {}", x.id()), e))
    }

    pub(super) async fn extensions_of_block(&self, reservation_id: &str) -> Result<Vec<ExtensionIntent>, StoreError> {
        // Strict: paid extensions bound a block's extension days (`max_days`).
        self.query_prefix(&block_pk(reservation_id), "EXT#", "extensions of block").await?.iter().map(data).collect()
    }

    pub(super) async fn open_extension_intents(&self) -> Result<Vec<ExtensionIntent>, StoreError> {
        // One left out stays open with its fee committed: nothing is spent on it.
        Ok(self.decode_each(&self.query_gsi(OPEN_EXTENSIONS, None).await?, "open extensions", data))
    }
}

#[async_trait]
impl ExtensionLedger for DynamoStore {
    async fn reserve_extension(&self, intent: &ExtensionIntent) -> Result<(), ReserveError> {
        self.reserve_extension_tx(intent).await
    }

    async fn advance_extension(
        &self,
        intent: &ExtensionIntent,
        to: ExtensionState,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.advance_extension_item(intent, to, at).await
    }

    async fn close_extension(
        &self,
        intent: &ExtensionIntent,
        to: ExtensionState,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        self.close_extension_tx(intent, to, reason).await
    }

    async fn recommit_extension(&self, intent: &ExtensionIntent, reason: &str) -> Result<(), StoreError> {
        self.recommit_extension_tx(intent, reason).await
    }

    async fn extensions_of(&self, reservation_id: &str) -> Result<Vec<ExtensionIntent>, StoreError> {
        self.extensions_of_block(reservation_id).await
    }

    async fn open_extensions(&self) -> Result<Vec<ExtensionIntent>, StoreError> {
        self.open_extension_intents().await
    }
}
