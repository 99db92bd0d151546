//! The outbox: notices (`BLOCK#<thread>` / `NOTICE#<milestone>`), pending ones listed through
//! gsi1 `NOTICE#PENDING`.

use super::*;

const PENDING_NOTICES: &str = "NOTICE#PENDING";

fn notice_key(thread: &str, milestone: &str) -> Item {
    key(format!("BLOCK#{thread}"), format!("NOTICE#{milestone}"))
}

pub(super) fn notice_item(notice: &Notice) -> Item {
    let mut item = notice_key(&notice.thread, &notice.milestone);
    item.insert("data".into(), json(notice));
    item.insert("gsi1pk".into(), s(PENDING_NOTICES));
    item.insert(
        "gsi1sk".into(),
        s(format!("{}#{}", notice.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true), notice.id())),
    );
    item
}

impl DynamoStore {
    /// A new notice as one step of a transaction (a notice written with what it announces).
    pub(super) fn put_notice(&self, notice: &Notice) -> TransactWriteItem {
        tx_put(
            Put::builder()
                .table_name(&self.table)
                .set_item(Some(notice_item(notice)))
                .condition_expression("attribute_not_exists(pk)"),
        )
    }
}

#[async_trait]
impl Outbox for DynamoStore {
    async fn enqueue(&self, notice: &Notice) -> Result<bool, StoreError> {
        self.put_new(notice_item(notice), "enqueue notice").await
    }

    async fn pending(&self) -> Result<Vec<Notice>, StoreError> {
        Ok(self.decode_each(&self.query_gsi(PENDING_NOTICES, None).await?, "pending notices", data))
    }

    async fn lease(&self, notice: &Notice, now: DateTime<Utc>, until: DateTime<Utc>) -> Result<bool, StoreError> {
        match self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(notice_key(&notice.thread, &notice.milestone)))
            .update_expression("SET lease_until = :until")
            .condition_expression(
                "attribute_exists(gsi1pk) AND (attribute_not_exists(lease_until) OR lease_until < :now)",
            )
            .expression_attribute_values(":until", n(until.timestamp_millis()))
            .expression_attribute_values(":now", n(now.timestamp_millis()))
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(e) => match store_err("lease notice", e) {
                StoreError::Conflict(_) => Ok(false),
                other => Err(other),
            },
        }
    }

    async fn put_record(&self, notice: &Notice) -> Result<bool, StoreError> {
        // Not in the pending index: nothing publishes or runs it.
        let mut item = notice_item(notice);
        item.remove("gsi1pk");
        item.remove("gsi1sk");
        self.put_new(item, "write record").await
    }

    async fn records(&self, thread: &str, prefix: &str) -> Result<Vec<Notice>, StoreError> {
        self.query_prefix(&format!("BLOCK#{thread}"), &format!("NOTICE#{prefix}"), "records")
            .await?
            .iter()
            .map(data)
            .collect()
    }

    async fn mark_published(&self, notice: &Notice, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(notice_key(&notice.thread, &notice.milestone)))
            .update_expression("SET published_at = :at REMOVE gsi1pk, gsi1sk, lease_until")
            .expression_attribute_values(":at", s(at.to_rfc3339()))
            .send()
            .await
            .map_err(|e| store_err("mark notice published", e))?;
        Ok(())
    }
}
