//! Blocks (`BLOCK#<reservation>` / `BLOCK`), open ones listed through gsi1 `BLOCK#OPEN`.

use std::collections::BTreeSet;

use super::*;

#[async_trait]
impl BlockArchive for DynamoStore {
    async fn all_blocks(&self) -> Result<Vec<Block>, StoreError> {
        let items = self
            .client
            .scan()
            .table_name(&self.table)
            .filter_expression("sk = :sk AND begins_with(pk, :pk)")
            .expression_attribute_values(":sk", s("BLOCK"))
            .expression_attribute_values(":pk", s("BLOCK#"))
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(|e| store_err("all blocks", e))?;
        Ok(self.decode_each(&items, "all blocks", data))
    }
}

#[async_trait]
impl BlockStore for DynamoStore {
    async fn open_blocks(&self, rule_id: Option<&str>) -> Result<Vec<Block>, StoreError> {
        match rule_id {
            // A rule's own blocks count against its `max_blocks_held`: one left out would let
            // it buy past the limit, so they are read strongly and a corrupt one is an error
            // (its purchases wait).
            Some(rule) => self.held_blocks(rule).await,
            None => {
                let items = self.query_gsi(OPEN_BLOCKS, None).await?;
                Ok(self.decode_each(&items, "open blocks", data))
            }
        }
    }

    async fn get_block(&self, reservation_id: &str) -> Result<Option<Block>, StoreError> {
        self.get(key(block_pk(reservation_id), "BLOCK")).await?.map(|i| data(&i)).transpose()
    }

    async fn adopt_block(&self, block: &Block) -> Result<bool, StoreError> {
        let Some(rule) = &block.rule_id else { return self.put_new(Self::block_item(block), "adopt block").await };
        // A rule's block joins its guard's `held` with it, as a purchase's does.
        let put = tx_put(
            Put::builder()
                .table_name(&self.table)
                .set_item(Some(Self::block_item(block)))
                .condition_expression("attribute_not_exists(pk)"),
        );
        let held = tx_update(
            self.update(key(rule_pk(rule), "GUARD"), "ADD held :held")
                .expression_attribute_values(":held", AttributeValue::Ss(vec![block.reservation_id.clone()])),
        );
        match self.transact(vec![put, held]).await {
            Ok(()) => Ok(true),
            Err(TxError::Cancelled(codes)) if codes.first().is_some_and(|c| c == "ConditionalCheckFailed") => Ok(false),
            Err(TxError::Cancelled(codes)) => {
                Err(StoreError::Conflict(format!("adopting block {}: {}", block.reservation_id, codes.join(","))))
            }
            Err(TxError::Store(e)) => Err(e),
        }
    }

    async fn update_block(&self, block: &Block, expected_version: u64) -> Result<(), StoreError> {
        self.update_block_item(block, expected_version).await?;
        if let (true, Some(rule)) = (block.state.is_final(), &block.rule_id) {
            // Best effort: an id left in `held` is read and found final, so it never counts.
            let prune = self
                .client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(key(rule_pk(rule), "GUARD")))
                .update_expression("DELETE held :held")
                .expression_attribute_values(":held", AttributeValue::Ss(vec![block.reservation_id.clone()]));
            if let Err(e) = prune.send().await {
                let error = aws_sdk_dynamodb::error::DisplayErrorContext(&e);
                tracing::warn!(rule, block = %block.reservation_id, %error, "a final block stays in its rule's held set");
            }
        }
        Ok(())
    }
}

impl DynamoStore {
    /// A rule's open blocks, read strongly: the ids the open-blocks index shows (eventually
    /// consistent on DynamoDB, so it may miss a block recorded a moment ago) and those the
    /// guard's `held` names (written in the transaction that records the block), each block
    /// then read by a consistent GetItem. Strict: a corrupt one is an error.
    async fn held_blocks(&self, rule: &str) -> Result<Vec<Block>, StoreError> {
        let prefix = format!("RULE#{rule}#");
        let indexed = self.query_gsi(OPEN_BLOCKS, Some(&prefix)).await?;
        let mut ids: BTreeSet<String> =
            indexed.iter().filter_map(|i| get_s(i, "pk")?.strip_prefix("BLOCK#").map(str::to_string)).collect();
        if let Some(guard) = self.get(key(rule_pk(rule), "GUARD")).await? {
            ids.extend(get_ss(&guard, "held"));
        }
        let mut out = Vec::new();
        for id in ids {
            let Some(item) = self.get(key(block_pk(&id), "BLOCK")).await? else { continue };
            let block: Block = data(&item)?;
            if !block.state.is_final() && block.rule_id.as_deref() == Some(rule) {
                out.push(block);
            }
        }
        Ok(out)
    }
}
