//! Blocks (`BLOCK#<reservation>` / `BLOCK`), open ones listed through gsi1 `BLOCK#OPEN`.

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
        let prefix = rule_id.map(|r| format!("RULE#{r}#"));
        let items = self.query_gsi(OPEN_BLOCKS, prefix.as_deref()).await?;
        match rule_id {
            // A rule's own blocks count against its `max_blocks_held`: one left out would let
            // it buy past the limit, so a corrupt one is an error (its purchases wait).
            Some(_) => items.iter().map(data).collect(),
            None => Ok(self.decode_each(&items, "open blocks", data)),
        }
    }

    async fn get_block(&self, reservation_id: &str) -> Result<Option<Block>, StoreError> {
        self.get(key(block_pk(reservation_id), "BLOCK")).await?.map(|i| data(&i)).transpose()
    }

    async fn adopt_block(&self, block: &Block) -> Result<bool, StoreError> {
        self.put_new(Self::block_item(block), "adopt block").await
    }

    async fn update_block(&self, block: &Block, expected_version: u64) -> Result<(), StoreError> {
        self.update_block_item(block, expected_version).await
    }
}
