//! A function checks its own role for `capblock preflight`: every action of the ports it
//! declares, tried without effect, in each region the rules watch where the action is regional.
//! The operator's credentials cannot show this (they are not the role's); only the function,
//! running as its role, can.

use std::time::Duration;

use futures::future::join_all;

use super::paced_asker::Helper;
use crate::domain::permissions::{MemberAsk, MemberAsked, MemberOutcome, PermissionsAsk, Probed, RoleCheck};
use crate::ports::{DESCRIBE_LIMIT, MarketError, OfferingQuery, PermissionProbe};

/// Calls a member's question gets before its refusals are taken as every call refused (a
/// quota of 0, or its limit spent by someone), each after a rest.
pub const MEMBER_TRIES: u32 = 3;

/// Tries each of `actions` (the function's, from its ports) as `ask` says, in order: regional
/// actions once per asked region, the others once.
pub async fn check_role(
    function: &str,
    actions: &[&str],
    ask: &PermissionsAsk,
    probe: &dyn PermissionProbe,
) -> RoleCheck {
    let mut probes = Vec::new();
    for &action in actions {
        let regions: Vec<Option<&crate::domain::permissions::RegionAsk>> =
            if probe.regional(action) { ask.asks.iter().map(Some).collect() } else { vec![None] };
        for a in regions {
            let started = std::time::Instant::now();
            let access = probe.try_action(action, a.map(|a| &a.region), a.map(|a| &a.instance_type)).await;
            tracing::debug!(event = "role_action_tried", action, region = ?a.map(|a| a.region.as_str()), ms = started.elapsed().as_millis() as u64, access = ?access, "tried");
            probes.push(Probed { action: action.to_string(), region: a.map(|a| a.region.clone()), access });
        }
    }
    RoleCheck { function: function.to_string(), probes, members: Vec::new() }
}

/// Each member in `WatchAccounts` asks `asks` through its watch role, the way the scan's lanes
/// would (its own describe limit per region): the members and regions at once, one question at
/// a time in each member's region, `pause` apart; a `CapacityBlockDescribeLimitExceeded` is
/// asked again after a rest, up to `MEMBER_TRIES` calls. Only the function can: the watch role
/// trusts the stack's roles, not the operator.
pub async fn ask_members(helpers: &[Helper<'_>], asks: &[MemberAsk], pause: Duration) -> Vec<MemberAsked> {
    let mut lanes: Vec<(&str, &dyn crate::ports::OfferingSource, Vec<&MemberAsk>)> = Vec::new();
    for &(account, market) in helpers {
        let regions: std::collections::BTreeSet<&crate::domain::ids::Region> = asks.iter().map(|a| &a.region).collect();
        for region in regions {
            lanes.push((account, market, asks.iter().filter(|a| &a.region == region).collect()));
        }
    }
    let answered = join_all(lanes.into_iter().map(|(account, market, list)| async move {
        let mut out = Vec::new();
        for (k, a) in list.into_iter().enumerate() {
            if k > 0 {
                tokio::time::sleep(pause).await;
            }
            let outcome = ask_member(market, a, pause).await;
            tracing::info!(event = "member_asked", account, region = %a.region, instance_type = %a.instance_type, outcome = ?outcome, "a member asked for preflight");
            out.push(MemberAsked {
                account: account.to_string(),
                region: a.region.clone(),
                instance_type: a.instance_type.clone(),
                outcome,
            });
        }
        out
    }))
    .await;
    answered.into_iter().flatten().collect()
}

async fn ask_member(market: &dyn crate::ports::OfferingSource, a: &MemberAsk, pause: Duration) -> MemberOutcome {
    let q = OfferingQuery {
        region: a.region.clone(),
        instance_type: a.instance_type.clone(),
        instance_count: a.instance_count,
        ultraservers: None,
        duration_hours: a.duration_hours,
        start_from: a.start_from,
        start_to: a.start_to,
        also_types: Vec::new(),
    };
    let mut calls = 0;
    loop {
        calls += 1;
        match market.offerings(&q).await {
            Ok(list) => return MemberOutcome::Answered { offerings: list.len() },
            Err(MarketError::Throttled { code, .. }) if code == DESCRIBE_LIMIT => {
                if calls >= MEMBER_TRIES {
                    return MemberOutcome::Refused { calls };
                }
                tokio::time::sleep(pause).await;
            }
            Err(e) => return MemberOutcome::Failed { message: e.to_string() },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::permissions::{Access, RegionAsk};
    use crate::memory::{Call, Failure, HookVerdict, Hooked, MemoryEc2, MemoryProbe, Script};

    #[tokio::test]
    async fn regional_actions_are_tried_in_every_asked_region_the_others_once() {
        let ask = PermissionsAsk::new(
            ["us-east-1", "us-west-2"]
                .iter()
                .map(|r| RegionAsk { region: r.parse().unwrap(), instance_type: "p5.48xlarge".parse().unwrap() })
                .collect(),
        );
        let probe = MemoryProbe::default().denying("ec2:PurchaseCapacityBlock", Some("us-west-2"));
        let check =
            check_role("scan-offerings", &["ec2:PurchaseCapacityBlock", "dynamodb:GetItem"], &ask, &probe).await;
        let tried = probe.tried();
        assert_eq!(
            tried,
            vec![
                ("ec2:PurchaseCapacityBlock".to_string(), Some("us-east-1".to_string())),
                ("ec2:PurchaseCapacityBlock".to_string(), Some("us-west-2".to_string())),
                ("dynamodb:GetItem".to_string(), None),
            ]
        );
        assert_eq!(check.function, "scan-offerings");
        assert!(matches!(check.probes[1].access, Access::Denied { .. }));
    }

    /// A member market with a quota of 0 for trn2 (every call refused), answering p5; the
    /// script counts the calls it got.
    fn member() -> Hooked<MemoryEc2, Script> {
        let trn2_refused = |call: &Call<'_>| match call.arg::<OfferingQuery>() {
            Some(q) if q.instance_type.as_str().starts_with("trn2") => {
                HookVerdict::Fail(Failure::Throttled(DESCRIBE_LIMIT))
            }
            _ => HookVerdict::Proceed,
        };
        Hooked::new(MemoryEc2::default(), Script::new().on("offerings", trn2_refused))
    }

    #[tokio::test(start_paused = true)]
    async fn each_member_asks_each_family_and_a_family_refused_every_time_is_named() {
        let ask = crate::domain::permissions::member_ask;
        let asks =
            [ask("us-east-1", "trn2.48xlarge"), ask("us-east-1", "p5.48xlarge"), ask("us-west-2", "p5.48xlarge")];
        let (a, b) = (member(), member());
        let helpers: [Helper<'_>; 2] = [("111111111111", &a), ("222222222222", &b)];
        let started = tokio::time::Instant::now();
        let asked = ask_members(&helpers, &asks, Duration::from_secs(4)).await;
        assert_eq!(asked.len(), 6, "{asked:?}");
        let of = |account: &str, ty: &str, region: &str| {
            asked
                .iter()
                .find(|x| x.account == account && x.instance_type.as_str() == ty && x.region.as_str() == region)
                .unwrap()
                .outcome
                .clone()
        };
        assert_eq!(of("111111111111", "trn2.48xlarge", "us-east-1"), MemberOutcome::Refused { calls: MEMBER_TRIES });
        assert_eq!(of("222222222222", "p5.48xlarge", "us-west-2"), MemberOutcome::Answered { offerings: 0 });
        assert_eq!(a.hook.count("offerings"), MEMBER_TRIES as usize + 2, "refusals asked again, the rest once");
        // Rested between calls in one member's region; members and regions at once.
        assert_eq!(started.elapsed(), Duration::from_secs(4 * MEMBER_TRIES as u64));
    }
}
