//! Price observations (`OBS#<region>#<type>` / `<seen-at>#<offering>`), kept for
//! `OBSERVATION_TTL`.

use super::*;

fn obs_pk(region: &Region, instance_type: &InstanceType) -> String {
    format!("OBS#{region}#{instance_type}")
}

#[async_trait]
impl ObservationStore for DynamoStore {
    async fn record(&self, observations: &[Observation]) -> Result<usize, StoreError> {
        let mut written = 0;
        for chunk in observations.chunks(25) {
            let mut pending: Vec<WriteRequest> = chunk
                .iter()
                .map(|o| {
                    let mut item = key(
                        obs_pk(&o.offering.region, &o.offering.instance_type),
                        format!("{}#{}", o.seen_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true), o.offering.id),
                    );
                    item.insert("data".into(), json(o));
                    item.insert("ttl".into(), n((o.seen_at + OBSERVATION_TTL).timestamp()));
                    WriteRequest::builder()
                        .put_request(PutRequest::builder().set_item(Some(item)).build().expect("item set"))
                        .build()
                })
                .collect();
            // BatchWriteItem may hand back unprocessed items under load: retry them with backoff.
            for attempt in 0..8u32 {
                if pending.is_empty() {
                    break;
                }
                let n_sent = pending.len();
                let out = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, std::mem::take(&mut pending))
                    .send()
                    .await
                    .map_err(|e| store_err("observations batch", e))?;
                pending = out.unprocessed_items.and_then(|mut m| m.remove(&self.table)).unwrap_or_default();
                written += n_sent - pending.len();
                if !pending.is_empty() {
                    tokio::time::sleep(StdDuration::from_millis(50 << attempt)).await;
                }
            }
            if !pending.is_empty() {
                return Err(StoreError::Unavailable(format!("{} observations left unprocessed", pending.len())));
            }
        }
        Ok(written)
    }

    async fn history(
        &self,
        region: &Region,
        instance_type: &InstanceType,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Observation>, StoreError> {
        let fmt = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let q = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND sk BETWEEN :a AND :b")
            .expression_attribute_values(":pk", s(obs_pk(region, instance_type)))
            .expression_attribute_values(":a", s(fmt(from)))
            .expression_attribute_values(":b", s(format!("{}~", fmt(to))));
        Ok(self.decode_each(&Self::all_items(q, "history").await?, "price history", data))
    }
}
