//! The prices one run saw: the cheapest per region and type for the report, and the price
//! history for people.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rust_decimal::Decimal;

use super::{Scanner, SeenPrice};
use crate::domain::ids::{InstanceType, Region};
use crate::domain::offering::Offering;
use crate::domain::run_time::RunTime;
use crate::ports::{Observation, ObservationStore};

impl<M: ?Sized, S: ObservationStore + ?Sized, N: ?Sized> Scanner<'_, M, S, N> {
    /// The price history (for people): a failure here must not stop a purchase.
    /// Every answer's prices go to the report (and the metrics); the history only gets the
    /// answers of the questions in `history` (see `market_memory::HISTORY_EVERY`).
    pub(super) async fn record_prices(
        &self,
        answered: &BTreeMap<usize, Vec<Offering>>,
        history: &BTreeSet<usize>,
        at: RunTime,
    ) -> (usize, Vec<SeenPrice>) {
        let catalog = self.catalog.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut seen: HashMap<&str, &Offering> = HashMap::new();
        let mut kept: BTreeSet<&str> = BTreeSet::new();
        for (i, list) in answered {
            for o in list {
                seen.insert(o.id.as_str(), o);
                if history.contains(i) {
                    kept.insert(o.id.as_str());
                }
            }
        }
        let observations: Vec<Observation> = seen
            .values()
            .filter_map(|o| {
                Some(Observation {
                    accelerators_per_instance: catalog.accelerators(&o.instance_type)?,
                    offering: (*o).clone(),
                    seen_at: at.clock(),
                })
            })
            .collect();
        let mut cheapest: BTreeMap<(Region, InstanceType, Option<String>), Decimal> = BTreeMap::new();
        for o in &observations {
            let Some(rate) = o.offering.price_per_accelerator_hour(o.accelerators_per_instance) else { continue };
            let kind = o.offering.ultraservers.as_ref().map(|u| u.kind.as_str().to_string());
            let key = (o.offering.region.clone(), o.offering.instance_type.clone(), kind);
            cheapest.entry(key).and_modify(|p| *p = (*p).min(rate.per_unit)).or_insert(rate.per_unit);
        }
        let prices = cheapest
            .into_iter()
            .map(|((region, instance_type, ultraserver_type), per_accelerator_hour)| SeenPrice {
                region,
                instance_type,
                ultraserver_type,
                per_accelerator_hour,
            })
            .collect();
        if at.is_replay() {
            return (0, prices);
        }
        let observations: Vec<Observation> =
            observations.into_iter().filter(|o| kept.contains(o.offering.id.as_str())).collect();
        let written = match self.store.record(&observations).await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(event = "observations_failed", error = %e, "price history not written");
                0
            }
        };
        (written, prices)
    }
}
