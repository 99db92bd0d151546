//! What a function's own role may do, as the function itself found out when `capblock
//! preflight` invoked it with a [`PermissionsAsk`]: each IAM action its work needs, tried in a
//! way that has no effect (a `DryRun` call, a read, a write to a probe item of its own), or named
//! as not checked when no such way exists. Pure: the asking is `app::permissions`, the calls are
//! `aws::probe`, and the verdicts (`findings`) are here.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::catalog::vcpus_of;
use super::ids::{InstanceType, Region};
use super::plan::family;
use super::preflight::{Finding, Verdict};

/// The `source` of the payload that asks a function to check its own role instead of running.
/// Distinct from the schedules' `capblock.schedule` and from every AWS event source.
pub const PERMISSIONS_SOURCE: &str = "capblock.preflight";

/// What preflight asks a function to try: the regions the rules watch, each with an instance
/// type the rules ask there (a describe or purchase `DryRun` needs one EC2 sells).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionsAsk {
    pub source: String,
    pub asks: Vec<RegionAsk>,
    /// The questions each member account in `WatchAccounts` is asked through its watch role:
    /// one per region and instance family the rules ask (a quota is per family).
    #[serde(default)]
    pub members: Vec<MemberAsk>,
    /// Milliseconds between two questions to one member's region (EC2's describe refill).
    #[serde(default = "default_member_pause_ms")]
    pub member_pause_ms: u64,
}

/// The pause between a member's questions when the ask names none: EC2's refill as assumed.
fn default_member_pause_ms() -> u64 {
    4_000
}

/// The longest pause between a member's questions a function takes from an ask.
pub const MAX_MEMBER_PAUSE_MS: u64 = 10_000;
/// The most member questions a function asks each member for one ask.
pub const MAX_MEMBER_ASKS: usize = 16;

/// One question preflight has each member account ask: a rule's question in a region.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberAsk {
    pub region: Region,
    pub instance_type: InstanceType,
    pub instance_count: u32,
    pub duration_hours: u32,
    pub start_from: DateTime<Utc>,
    pub start_to: DateTime<Utc>,
}

/// What a member account's watch role got for one [`MemberAsk`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberAsked {
    pub account: String,
    pub region: Region,
    pub instance_type: InstanceType,
    #[serde(flatten)]
    pub outcome: MemberOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum MemberOutcome {
    /// EC2 answered (its offerings counted).
    Answered { offerings: usize },
    /// `CapacityBlockDescribeLimitExceeded` on every call, each after a rest.
    Refused { calls: u32 },
    /// Anything else (the watch role refused, EC2 failing): its words.
    Failed { message: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionAsk {
    pub region: Region,
    pub instance_type: InstanceType,
}

impl PermissionsAsk {
    pub fn new(asks: Vec<RegionAsk>) -> PermissionsAsk {
        PermissionsAsk {
            source: PERMISSIONS_SOURCE.to_string(),
            asks,
            members: Vec::new(),
            member_pause_ms: default_member_pause_ms(),
        }
    }

    /// What a function tries of this ask: the regions `watched` (the stored rules' regions, which
    /// are what preflight asks), each once, with the first instance type asked for it. Anyone
    /// allowed to invoke the function can send an ask; one of 200 regions made 200 describe
    /// calls and 200 DryRun purchases. Returns the ask kept and how many asks were left out.
    pub fn bounded_to(&self, watched: &std::collections::BTreeSet<Region>) -> (PermissionsAsk, usize) {
        let mut seen = std::collections::BTreeSet::new();
        let asks: Vec<RegionAsk> = self
            .asks
            .iter()
            .filter(|a| watched.contains(&a.region) && seen.insert(a.region.clone()))
            .cloned()
            .collect();
        // The members' questions: one per watched region and family, at most `MAX_MEMBER_ASKS`.
        let mut families = std::collections::BTreeSet::new();
        let members: Vec<MemberAsk> = self
            .members
            .iter()
            .filter(|m| {
                watched.contains(&m.region)
                    && families.insert((m.region.clone(), family(m.instance_type.as_str()).to_string()))
            })
            .take(MAX_MEMBER_ASKS)
            .cloned()
            .collect();
        let dropped = self.asks.len() - asks.len() + self.members.len() - members.len();
        let member_pause_ms = self.member_pause_ms.min(MAX_MEMBER_PAUSE_MS);
        (PermissionsAsk { source: self.source.clone(), asks, members, member_pause_ms }, dropped)
    }

    /// The ask in `payload`, if it is one; `None` for any other payload (the function's work).
    pub fn of(payload: &serde_json::Value) -> Option<Result<PermissionsAsk, String>> {
        (payload.get("source").and_then(|s| s.as_str()) == Some(PERMISSIONS_SOURCE))
            .then(|| serde_json::from_value(payload.clone()).map_err(|e| format!("a preflight payload: {e}")))
    }
}

/// What one try showed about one action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "access", rename_all = "kebab-case")]
pub enum Access {
    /// The call was allowed (answered, or `DryRunOperation`).
    Allowed,
    /// The role may not: AWS's own words.
    Denied { message: String },
    /// Not tried, or the answer did not say (why, in words).
    NotChecked { why: String },
}

impl Access {
    pub fn not_checked(why: impl Into<String>) -> Access {
        Access::NotChecked { why: why.into() }
    }

    /// The access an AWS error answer shows: a denial by its code, anything else says nothing
    /// about the permission (the call failed before or after IAM judged it).
    pub fn from_error(code: Option<&str>, message: &str) -> Access {
        match code {
            Some("DryRunOperation") => Access::Allowed,
            Some(c) if is_denial(c) => Access::Denied { message: message.to_string() },
            Some(c) => Access::not_checked(format!("AWS answered {c} before judging the permission: {message}")),
            None => Access::not_checked(format!("no answer: {message}")),
        }
    }
}

/// Whether `action` is tried once per region the rules watch (EC2 and the other regional
/// services a function calls in the block's region) or once in the function's own region.
pub fn is_regional(action: &str) -> bool {
    matches!(
        action.split_once(':').map(|(s, _)| s),
        Some("ec2" | "servicequotas" | "autoscaling" | "ssm" | "resource-groups" | "eks" | "ram")
    )
}

/// The error codes AWS services answer a call the caller's policies do not allow with (EC2's
/// `UnauthorizedOperation`, the JSON services' `AccessDeniedException`, the Query services'
/// `AccessDenied`/`AuthorizationError`).
pub fn is_denial(code: &str) -> bool {
    matches!(
        code,
        "UnauthorizedOperation" | "AccessDenied" | "AccessDeniedException" | "AuthorizationError" | "Forbidden"
    )
}

/// One action tried in one region (`None`: the function's own region, for the regionless
/// table, topics, bus and schedules).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probed {
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<Region>,
    #[serde(flatten)]
    pub access: Access,
}

/// A function's answer to a [`PermissionsAsk`]: its name and every try.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleCheck {
    pub function: String,
    pub probes: Vec<Probed>,
    /// What each member account in `WatchAccounts` got for the ask's member questions
    /// (scan-offerings' answer only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberAsked>,
}

impl RoleCheck {
    /// Whether `body` (a function's answer) is a role check rather than a run's report.
    pub fn from_answer(body: &serde_json::Value) -> Option<RoleCheck> {
        body.get("probes")?;
        serde_json::from_value(body.clone()).ok()
    }
}

/// One finding per action the role needs: ok when every try allowed it, fail when any region
/// denied it (naming those regions), not checked when it could not be tried. Denials say what to
/// do: the role is the template's, so a denial means a changed template, a permissions boundary,
/// an SCP, or a region missing from `PurchaseRegions`.
pub fn findings(check: &RoleCheck) -> Vec<Finding> {
    let mut by_action: BTreeMap<&str, Vec<&Probed>> = BTreeMap::new();
    for p in &check.probes {
        by_action.entry(p.action.as_str()).or_default().push(p);
    }
    by_action
        .into_iter()
        .map(|(action, tries)| {
            let name = format!("role of {}: {action}", check.function);
            let where_ = |ps: &[&&Probed]| {
                ps.iter()
                    .map(|p| p.region.as_ref().map_or("its region".to_string(), |r| r.to_string()))
                    .collect::<Vec<_>>()
            };
            let denied: Vec<&&Probed> = tries.iter().filter(|p| matches!(p.access, Access::Denied { .. })).collect();
            if let Some(first) = denied.first() {
                let Access::Denied { message } = &first.access else { unreachable!("filtered on Denied") };
                return Finding::flagged(
                    name,
                    Verdict::Fail,
                    format!("denied in {}: {message}", where_(&denied).join(", ")),
                    format!(
                        "allow {action} to the role of {} (deploy template.yaml unchanged; check permissions \
                         boundaries and SCPs; a purchase region must be in PurchaseRegions)",
                        check.function
                    ),
                );
            }
            let unchecked: Vec<&&Probed> =
                tries.iter().filter(|p| matches!(p.access, Access::NotChecked { .. })).collect();
            if let Some(first) = unchecked.first() {
                let Access::NotChecked { why } = &first.access else { unreachable!("filtered on NotChecked") };
                let allowed = tries.len() - unchecked.len();
                let seen = if allowed > 0 {
                    format!("allowed in {allowed} region(s); not checked in {}: {why}", where_(&unchecked).join(", "))
                } else {
                    why.clone()
                };
                return Finding::flagged(
                    name,
                    Verdict::NotChecked,
                    seen,
                    "deploy template.yaml unchanged: its role allows this action",
                );
            }
            Finding::ok(name, format!("allowed ({})", where_(&tries.iter().collect::<Vec<_>>()).join(", ")))
        })
        .collect()
}

/// One finding per member account: answered, refused on every call of some family ("quota 0 or
/// busy", with the quota to request in that member or the way out of `WatchAccounts`), or not
/// asked. A member that lends nothing costs the stack speed, never money: a warning.
pub fn member_findings(asked: &[MemberAsked]) -> Vec<Finding> {
    let mut by_account: BTreeMap<&str, Vec<&MemberAsked>> = BTreeMap::new();
    for a in asked {
        by_account.entry(a.account.as_str()).or_default().push(a);
    }
    by_account
        .into_iter()
        .map(|(account, answers)| {
            let check = format!("watch member {account}");
            let refused: Vec<&MemberAsked> =
                answers.iter().copied().filter(|a| matches!(a.outcome, MemberOutcome::Refused { .. })).collect();
            if !refused.is_empty() {
                let quotas = refused
                    .iter()
                    .map(|a| {
                        let ty = a.instance_type.as_str();
                        let per = vcpus_of(ty).map_or(String::new(), |n| format!(", {n} vCPUs per {ty}"));
                        format!(
                            "\"Concurrent {} Capacity Blocks per account\" in {} (in vCPUs{per})",
                            family(ty).to_uppercase(),
                            a.region
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(" and ");
                return Finding::flagged(
                    check,
                    Verdict::Warn,
                    format!(
                        "quota 0 or busy: every call refused with CapacityBlockDescribeLimitExceeded: {}",
                        said(&refused)
                    ),
                    format!(
                        "in account {account}'s Service Quotas request {quotas} (every account starts at 0), \
                         or drop {account} from WatchAccounts: until then it lends the scan nothing there"
                    ),
                );
            }
            let failed: Vec<&MemberAsked> =
                answers.iter().copied().filter(|a| matches!(a.outcome, MemberOutcome::Failed { .. })).collect();
            if !failed.is_empty() {
                return Finding::flagged(
                    check,
                    Verdict::Warn,
                    format!("not asked: {}", said(&failed)),
                    format!(
                        "check that the member stack (member.yaml) is deployed in {account} for this stack, \
                         or drop {account} from WatchAccounts"
                    ),
                );
            }
            Finding::ok(check, format!("answered through its watch role: {}", said(&answers)))
        })
        .collect()
}

/// Each question and what its member got, in words.
fn said(asked: &[&MemberAsked]) -> String {
    let one = |a: &MemberAsked| {
        let what = format!("{} {}", a.region, a.instance_type);
        match &a.outcome {
            MemberOutcome::Answered { offerings } => format!("{what} ({offerings} offering(s))"),
            MemberOutcome::Refused { calls } => format!("{what} ({calls} of {calls} calls refused)"),
            MemberOutcome::Failed { message } => format!("{what}: {message}"),
        }
    };
    asked.iter().map(|a| one(a)).collect::<Vec<_>>().join(", ")
}

/// A member's question for tests: `ty` in `region`, one instance for a day, in the week from
/// 2026-12-01.
#[cfg(test)]
pub(crate) fn member_ask(region: &str, ty: &str) -> MemberAsk {
    let t = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 12, 1, 0, 0, 0).unwrap();
    MemberAsk {
        region: region.parse().unwrap(),
        instance_type: ty.parse().unwrap(),
        instance_count: 1,
        duration_hours: 24,
        start_from: t,
        start_to: t + chrono::Duration::days(7),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(action: &str, region: Option<&str>, access: Access) -> Probed {
        Probed { action: action.into(), region: region.map(|r| r.parse().unwrap()), access }
    }

    #[test]
    fn an_ask_is_bounded_to_the_rules_regions_each_once() {
        let ask =
            |region: &str, t: &str| RegionAsk { region: region.parse().unwrap(), instance_type: t.parse().unwrap() };
        let mut asks =
            vec![ask("us-east-1", "p5.48xlarge"), ask("us-east-1", "p4d.24xlarge"), ask("us-west-2", "p5.48xlarge")];
        asks.extend((0..200).map(|_| ask("eu-west-1", "p5.48xlarge")));
        let watched = ["us-east-1", "us-west-2"].iter().map(|r| r.parse().unwrap()).collect();
        let (kept, dropped) = PermissionsAsk::new(asks).bounded_to(&watched);
        assert_eq!(kept.asks, [ask("us-east-1", "p5.48xlarge"), ask("us-west-2", "p5.48xlarge")]);
        assert_eq!(dropped, 201);
        assert_eq!(kept.source, PERMISSIONS_SOURCE);
    }

    #[test]
    fn the_ask_is_told_from_a_run_by_its_source() {
        let ask = PermissionsAsk::new(vec![RegionAsk {
            region: "us-east-1".parse().unwrap(),
            instance_type: "p5.48xlarge".parse().unwrap(),
        }]);
        let json = serde_json::to_value(&ask).unwrap();
        assert_eq!(PermissionsAsk::of(&json), Some(Ok(ask)));
        assert_eq!(PermissionsAsk::of(&serde_json::json!({"source": "capblock.schedule"})), None);
        assert_eq!(PermissionsAsk::of(&serde_json::json!({"detail-type": "x"})), None);
        let bad = PermissionsAsk::of(&serde_json::json!({"source": PERMISSIONS_SOURCE, "asks": 3})).unwrap();
        assert!(bad.unwrap_err().contains("a preflight payload"));
    }

    #[test]
    fn an_error_code_says_denied_allowed_or_nothing() {
        assert_eq!(Access::from_error(Some("DryRunOperation"), "would have succeeded"), Access::Allowed);
        assert!(matches!(Access::from_error(Some("UnauthorizedOperation"), "no"), Access::Denied { .. }));
        assert!(matches!(Access::from_error(Some("AccessDeniedException"), "no"), Access::Denied { .. }));
        let other = Access::from_error(Some("InvalidParameterValue"), "bad");
        assert!(matches!(&other, Access::NotChecked { why } if why.contains("InvalidParameterValue")));
    }

    #[test]
    fn a_denial_in_one_region_fails_the_action_and_names_the_region() {
        let check = RoleCheck {
            function: "scan-offerings".into(),
            probes: vec![
                probe("ec2:PurchaseCapacityBlock", Some("us-east-1"), Access::Allowed),
                probe(
                    "ec2:PurchaseCapacityBlock",
                    Some("us-west-2"),
                    Access::Denied { message: "not authorized".into() },
                ),
                probe("dynamodb:GetItem", None, Access::Allowed),
                probe("sns:Publish", None, Access::not_checked("it would reach the subscribers")),
            ],
            members: Vec::new(),
        };
        let f = findings(&check);
        assert_eq!(f.len(), 3);
        let by = |a: &str| f.iter().find(|x| x.check.ends_with(a)).unwrap();
        let purchase = by("ec2:PurchaseCapacityBlock");
        assert_eq!(purchase.verdict, Verdict::Fail);
        assert!(purchase.seen.contains("us-west-2") && !purchase.seen.contains("us-east-1"), "{}", purchase.seen);
        assert!(purchase.todo.as_deref().unwrap().contains("PurchaseRegions"));
        assert_eq!(by("dynamodb:GetItem").verdict, Verdict::Ok);
        assert_eq!(by("sns:Publish").verdict, Verdict::NotChecked);
        assert!(by("sns:Publish").check.starts_with("role of scan-offerings"));
    }

    #[test]
    fn a_role_check_round_trips_and_is_told_from_a_report() {
        let check = RoleCheck {
            function: "track-blocks".into(),
            probes: vec![probe("ec2:DescribeCapacityReservations", Some("us-east-1"), Access::Allowed)],
            members: Vec::new(),
        };
        let json = serde_json::to_value(&check).unwrap();
        assert_eq!(json["probes"][0]["access"], "allowed");
        assert_eq!(RoleCheck::from_answer(&json), Some(check));
        assert_eq!(RoleCheck::from_answer(&serde_json::json!({"asked": 3})), None);
    }

    fn member(account: &str, region: &str, ty: &str, outcome: MemberOutcome) -> MemberAsked {
        MemberAsked {
            account: account.into(),
            region: region.parse().unwrap(),
            instance_type: ty.parse().unwrap(),
            outcome,
        }
    }

    #[test]
    fn a_member_refused_on_every_call_is_quota_0_or_busy_with_the_quota_to_request() {
        let asked = [
            member("111111111111", "us-west-2", "p5.48xlarge", MemberOutcome::Refused { calls: 3 }),
            member("111111111111", "us-east-1", "trn2.48xlarge", MemberOutcome::Answered { offerings: 2 }),
            member("222222222222", "us-west-2", "p5.48xlarge", MemberOutcome::Answered { offerings: 1 }),
            member(
                "333333333333",
                "us-west-2",
                "p5.48xlarge",
                MemberOutcome::Failed { message: "AccessDenied".into() },
            ),
        ];
        let f = member_findings(&asked);
        let checks: Vec<&str> = f.iter().map(|x| x.check.as_str()).collect();
        assert_eq!(checks, ["watch member 111111111111", "watch member 222222222222", "watch member 333333333333"]);
        let zero = &f[0];
        assert_eq!(zero.verdict, Verdict::Warn);
        assert!(zero.seen.starts_with("quota 0 or busy: every call refused"), "{}", zero.seen);
        assert!(
            zero.seen.contains("us-west-2 p5.48xlarge (3 of 3 calls refused)") && !zero.seen.contains("trn2"),
            "{}",
            zero.seen
        );
        let todo = zero.todo.as_deref().unwrap();
        assert!(
            todo.contains(
                "\"Concurrent P5 Capacity Blocks per account\" in us-west-2 (in vCPUs, 192 vCPUs per p5.48xlarge)"
            ),
            "{todo}"
        );
        assert!(todo.contains("drop 111111111111 from WatchAccounts"), "{todo}");
        assert_eq!(f[1].verdict, Verdict::Ok);
        assert!(f[1].seen.contains("us-west-2 p5.48xlarge (1 offering(s))"), "{}", f[1].seen);
        assert_eq!(f[2].verdict, Verdict::Warn);
        assert!(f[2].seen.contains("AccessDenied") && f[2].todo.as_deref().unwrap().contains("member.yaml"));
        assert!(member_findings(&[]).is_empty(), "no member, no finding");
    }

    #[test]
    fn the_members_questions_are_bounded_to_watched_regions_one_per_family() {
        let ask = member_ask;
        let mut all = PermissionsAsk::new(Vec::new());
        all.members =
            vec![ask("us-east-1", "p5.48xlarge"), ask("us-east-1", "p5.4xlarge"), ask("eu-west-1", "p5.48xlarge")];
        all.members.extend((0..40).map(|_| ask("us-west-2", "trn2.48xlarge")));
        all.member_pause_ms = 3_600_000;
        let watched = ["us-east-1", "us-west-2"].iter().map(|r| r.parse().unwrap()).collect();
        let (kept, dropped) = all.bounded_to(&watched);
        assert_eq!(kept.members, [ask("us-east-1", "p5.48xlarge"), ask("us-west-2", "trn2.48xlarge")]);
        assert_eq!(dropped, 41);
        assert_eq!(kept.member_pause_ms, MAX_MEMBER_PAUSE_MS);
        // An ask from a capblock without members' questions reads as none, at EC2's refill.
        let old: PermissionsAsk =
            serde_json::from_value(serde_json::json!({"source": PERMISSIONS_SOURCE, "asks": []})).unwrap();
        assert_eq!((old.members.len(), old.member_pause_ms), (0, 4_000));
    }
}
