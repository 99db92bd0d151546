//! Rules (`RULE#<id>` / `RULE`), listed through gsi1 `RULES`.

use super::*;

#[async_trait]
impl RuleStore for DynamoStore {
    async fn put_rule(&self, rule: &Rule, expected_version: Option<u64>) -> Result<u64, StoreError> {
        let version = expected_version.unwrap_or(0) + 1;
        let mut item = key(rule_pk(&rule.id), "RULE");
        item.insert("data".into(), json(rule));
        item.insert("version".into(), n(version));
        item.insert("enabled".into(), AttributeValue::Bool(rule.enabled));
        item.insert("gsi1pk".into(), s(RULES));
        item.insert("gsi1sk".into(), s(&rule.id));
        let mut put = self.client.put_item().table_name(&self.table).set_item(Some(item));
        put = match expected_version {
            None => put,
            Some(0) => put.condition_expression("attribute_not_exists(pk)"),
            Some(v) => put.condition_expression("version = :v").expression_attribute_values(":v", n(v)),
        };
        // Only a failed condition is a version conflict: a refused item (too large) or an
        // unreachable table is not, and must not read like one.
        put.send().await.map_err(|e| match store_err(&format!("rule {}", rule.id), e) {
            StoreError::Conflict(what) => StoreError::Conflict(format!("{what} (version changed)")),
            other => other,
        })?;
        Ok(version)
    }

    async fn get_rule(&self, id: &str) -> Result<Option<StoredRule>, StoreError> {
        let Some(item) = self.get(key(rule_pk(id), "RULE")).await? else { return Ok(None) };
        Ok(Some(StoredRule { rule: data(&item)?, version: get_u64(&item, "version")?.unwrap_or(0) }))
    }

    async fn list_rules(&self) -> Result<Vec<StoredRule>, StoreError> {
        let items = self.query_gsi(RULES, None).await?;
        Ok(self.decode_each(&items, "rules", |item| {
            Ok(StoredRule { rule: data(item)?, version: get_u64(item, "version")?.unwrap_or(0) })
        }))
    }

    async fn delete_rule(&self, id: &str) -> Result<bool, StoreError> {
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key(rule_pk(id), "RULE")))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
            .send()
            .await
            .map_err(|e| store_err(&format!("rule {id}"), e))?;
        Ok(out.attributes.is_some_and(|a| !a.is_empty()))
    }
}
