//! DescribeCapacityBlockOfferings (the market's answers, priced) and DescribeInstanceTypes
//! (what a type carries).

use super::ahead_of_sdk::{self, AheadOfSdk};
use super::*;
use crate::domain::offering::RawSegment;

const OP: &str = "DescribeCapacityBlockOfferings";

/// Whether EC2's refusal may say the UltraServer search form (`SearchForm`) is not the one it
/// takes. Two codes have been seen (InvalidParameterCombination for the model's form,
/// MissingParameter for the other), but nothing in the record fixes the code, so any refusal of
/// the parameters counts (InvalidParameter, InvalidParameterValue, ..., MissingParameter,
/// UnknownParameter): the other form is tried once, and kept only if EC2 takes it.
fn refuses_the_form(e: &MarketError) -> bool {
    e.code().is_some_and(|c| c.starts_with("InvalidParameter") || c == "MissingParameter" || c == "UnknownParameter")
}

#[async_trait]
impl OfferingSource for Ec2Market {
    async fn offerings(&self, q: &OfferingQuery) -> Result<Vec<Offering>, MarketError> {
        if q.ultraservers.is_none() {
            return self.ask_instances(q).await;
        }
        let form = self.search_form(&q.region).unwrap_or_default();
        match self.ask_offerings(q, form, false).await {
            Err(e) if refuses_the_form(&e) => match self.ask_offerings(q, form.other(), false).await {
                // Refused in both forms: the parameters themselves are wrong; the first
                // refusal says so, and the region keeps its form.
                Err(again) if refuses_the_form(&again) => Err(e),
                Ok(list) => {
                    tracing::info!(region = %q.region, from = ?form, to = ?form.other(), error = %e, "EC2 takes UltraServer searches in the other form: switching for this region");
                    self.start_search_form(&q.region, form.other());
                    Ok(list)
                }
                // Throttled, failed: no evidence either way; the next search tries again.
                Err(other) => Err(other),
            },
            answer => answer,
        }
    }

    fn search_form(&self, region: &Region) -> Option<SearchForm> {
        self.search_forms.lock().unwrap_or_else(|p| p.into_inner()).get(region).copied()
    }

    fn start_search_form(&self, region: &Region, form: SearchForm) {
        self.search_forms.lock().unwrap_or_else(|p| p.into_inner()).insert(region.clone(), form);
    }
}

impl Ec2Market {
    /// An instance question: its types in one call (`InstanceTypePreferences`, up to 10) where
    /// EC2 takes them, which also answers the segmented offerings made of them; where EC2
    /// refuses the parameter as unknown (a region the 2026-11-17 model has not reached), one
    /// call per type with the legacy `InstanceType`, then and for the rest of this client's life.
    async fn ask_instances(&self, q: &OfferingQuery) -> Result<Vec<Offering>, MarketError> {
        let legacy = self.legacy_regions.lock().unwrap_or_else(|p| p.into_inner()).contains(&q.region);
        if !legacy {
            match self.ask_offerings(q, SearchForm::WithInstanceType, true).await {
                Err(e) if e.code() == Some("UnknownParameter") => {
                    tracing::info!(region = %q.region, error = %e, "EC2 does not take InstanceTypePreferences here: one type per call");
                    self.legacy_regions.lock().unwrap_or_else(|p| p.into_inner()).insert(q.region.clone());
                }
                answer => return answer,
            }
        }
        let mut out = Vec::new();
        for t in q.types() {
            let one = OfferingQuery { instance_type: t.clone(), also_types: Vec::new(), ..q.clone() };
            out.extend(self.ask_offerings(&one, SearchForm::WithInstanceType, false).await?);
        }
        Ok(out)
    }

    /// One question, every page followed; with `preferences` its types are sent as
    /// `InstanceTypePreferences` instead of `InstanceType`. Either way the raw answer is read
    /// for the offerings' segments (`ahead_of_sdk`).
    async fn ask_offerings(
        &self,
        q: &OfferingQuery,
        form: SearchForm,
        preferences: bool,
    ) -> Result<Vec<Offering>, MarketError> {
        let hours = int_param(OP, &q.region, "CapacityDurationHours", q.duration_hours)?;
        // An UltraServer search never names InstanceCount; InstanceType only in the form EC2
        // takes (`SearchForm`).
        let (instance_type, count, ultraserver_type, ultraserver_count) = match &q.ultraservers {
            Some(u) => (
                (form == SearchForm::WithInstanceType).then_some(q.instance_type.as_str()),
                None,
                Some(u.kind.as_str()),
                Some(int_param(OP, &q.region, "UltraserverCount", u.count)?),
            ),
            None => (
                (!preferences).then_some(q.instance_type.as_str()),
                Some(int_param(OP, &q.region, "InstanceCount", q.instance_count)?),
                None,
                None,
            ),
        };
        let types: Vec<&str> =
            if preferences { q.types().into_iter().map(|t| t.as_str()).collect() } else { Vec::new() };
        let mut out = Vec::new();
        let mut next_token: Option<String> = None;
        loop {
            let ahead = AheadOfSdk::with_preferences(&types);
            // One attempt: the scan's paced asker (app::paced_asker) paces and retries this read
            // per region, which the SDK's per-call backoff cannot do.
            let page = self
                .once(&q.region)
                .describe_capacity_block_offerings()
                .capacity_duration_hours(hours)
                .set_instance_type(instance_type.map(str::to_string))
                .set_instance_count(count)
                .set_ultraserver_type(ultraserver_type.map(str::to_string))
                .set_ultraserver_count(ultraserver_count)
                .start_date_range(to_smithy(q.start_from))
                // EndDateRange bounds the end of the block: the latest start plus its duration,
                // plus the day a same-day closest match may run longer than asked.
                .end_date_range(to_smithy(
                    q.start_to
                        .checked_add_signed(
                            chrono::Duration::hours(i64::from(q.duration_hours)) + chrono::Duration::days(1),
                        )
                        .unwrap_or(DateTime::<Utc>::MAX_UTC),
                ))
                // Offerings in Local Zones (P6e-GB200 in Dallas) come back only when asked for;
                // the decision then takes them only for rules that allow them.
                .all_availability_zones(true)
                .max_results(100)
                .set_next_token(next_token.take())
                .customize()
                .interceptor(ahead.clone())
                .send()
                .await
                .map_err(|e| classify(OP, &q.region, e))?;
            let mut segments = ahead.body().map(|b| ahead_of_sdk::offering_segments(&b)).unwrap_or_default();
            for o in page.capacity_block_offerings() {
                let of_it = o.capacity_block_offering_id().and_then(|id| segments.remove(id)).unwrap_or_default();
                let raw = raw_offering(o, of_it);
                match Offering::parse(&q.region, raw) {
                    Ok(offering) => out.push(offering),
                    Err(e) => {
                        tracing::warn!(region = %q.region, error = %e, "skipping an offering EC2 described badly")
                    }
                }
            }
            match page.next_token() {
                Some(token) if !token.is_empty() => next_token = Some(token.to_string()),
                _ => return Ok(out),
            }
        }
    }
}

/// The SDK's offering field by field, with the segments the raw answer gave it.
fn raw_offering(o: &aws_sdk_ec2::types::CapacityBlockOffering, segments: Vec<RawSegment>) -> RawOffering {
    RawOffering {
        offering_id: o.capacity_block_offering_id().map(str::to_string),
        instance_type: o.instance_type().map(str::to_string),
        availability_zone: o.availability_zone().map(str::to_string),
        instance_count: o.instance_count(),
        start_date: o.start_date().and_then(to_chrono),
        end_date: o.end_date().and_then(to_chrono),
        duration_hours: o.capacity_block_duration_hours(),
        duration_minutes: o.capacity_block_duration_minutes(),
        zone_type: o.zone_type().map(str::to_string),
        upfront_fee: o.upfront_fee().map(str::to_string),
        currency_code: o.currency_code().map(str::to_string),
        ultraserver_type: o.ultraserver_type().map(str::to_string),
        ultraserver_count: o.ultraserver_count(),
        segments,
    }
}

#[async_trait]
impl InstanceTypeSource for Ec2Market {
    async fn accelerators(
        &self,
        region: &Region,
        types: &[InstanceType],
    ) -> Result<Vec<(InstanceType, u32)>, MarketError> {
        const OP: &str = "DescribeInstanceTypes";
        let mut req = self.client(region).describe_instance_types();
        for t in types {
            req = req.instance_types(aws_sdk_ec2::types::InstanceType::from(t.as_str()));
        }
        let out = req.send().await.map_err(|e| classify(OP, region, e))?;
        Ok(out
            .instance_types()
            .iter()
            .filter_map(|info| {
                let name: InstanceType = info.instance_type()?.as_str().parse().ok()?;
                let gpus: i32 = info.gpu_info().map(|g| g.gpus().iter().filter_map(|d| d.count()).sum()).unwrap_or(0);
                let neuron: i32 =
                    info.neuron_info().map(|n| n.neuron_devices().iter().filter_map(|d| d.count()).sum()).unwrap_or(0);
                Some((name, u32::try_from(gpus.max(neuron)).unwrap_or(0)))
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(code: &str) -> MarketError {
        MarketError::Rejected {
            operation: OP,
            region: "us-east-1".into(),
            code: code.into(),
            message: "refused".into(),
        }
    }

    /// Any refusal of the search's parameters may mean "the other form": the two codes seen and
    /// their siblings; a throttle, a server error or a code about something else never does.
    #[test]
    fn any_refusal_of_the_parameters_may_mean_the_other_form() {
        for code in [
            "InvalidParameterCombination",
            "MissingParameter",
            "InvalidParameterValue",
            "InvalidParameter",
            "UnknownParameter",
        ] {
            assert!(refuses_the_form(&rejected(code)), "{code}");
        }
        for code in ["InternalError", "UnauthorizedOperation", "InvalidCapacityBlockOfferingIdExpired"] {
            assert!(!refuses_the_form(&rejected(code)), "{code}");
        }
        let throttled = MarketError::Throttled { operation: OP, region: "us-east-1".into(), code: DESCRIBE_LIMIT };
        assert!(!refuses_the_form(&throttled));
    }
}
