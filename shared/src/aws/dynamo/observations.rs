//! Price observations (`OBS#<region>#<type>` / `<seen-at>#<offering>`), kept for
//! `OBSERVATION_TTL`.

use super::*;

fn obs_pk(region: &Region, instance_type: &InstanceType) -> String {
    format!("OBS#{region}#{instance_type}")
}

#[async_trait]
impl ObservationStore for DynamoStore {
    async fn record(&self, observations: &[Observation]) -> Result<usize, StoreError> {
        let items = observations
            .iter()
            .map(|o| {
                let mut item = key(
                    obs_pk(&o.offering.region, &o.offering.instance_type),
                    format!("{}#{}", o.seen_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true), o.offering.id),
                );
                item.insert("data".into(), json(o));
                item.insert("ttl".into(), n((o.seen_at + OBSERVATION_TTL).timestamp()));
                item
            })
            .collect();
        self.batch_put(items, "observations").await
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
