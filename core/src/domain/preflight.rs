//! `capblock preflight`'s findings: what an operator checks in the real account before
//! switching a stack to live, each a verdict with what to do. Pure: the checks' judgements on
//! what EC2 and the stack answered; the asking is `app::preflight`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::block::Reservation;
use super::offering::Offering;

/// A check's verdict. `NotChecked` is never a pass: what could not be tried without effect
/// (a function role's purchase permission) is named as such.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Ok,
    Warn,
    Fail,
    NotChecked,
}

impl Verdict {
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Warn => "warn",
            Verdict::Fail => "fail",
            Verdict::NotChecked => "not checked",
        }
    }
}

/// One check: what was checked, its verdict, what was seen and, unless ok, what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub check: String,
    pub verdict: Verdict,
    pub seen: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub todo: Option<String>,
}

impl Finding {
    pub fn ok(check: impl Into<String>, seen: impl Into<String>) -> Finding {
        Finding { check: check.into(), verdict: Verdict::Ok, seen: seen.into(), todo: None }
    }

    pub fn flagged(
        check: impl Into<String>,
        verdict: Verdict,
        seen: impl Into<String>,
        todo: impl Into<String>,
    ) -> Finding {
        Finding { check: check.into(), verdict, seen: seen.into(), todo: Some(todo.into()) }
    }
}

/// The check that AWS RAM may share with the Organization, for rules that share blocks
/// (`sharing`: the ids of the enabled rules with `share_with`). `enabled`: what Organizations
/// answered (`Err`: its refusal or failure, which says nothing either way).
pub fn ram_sharing(sharing: &[&str], enabled: Result<bool, String>) -> Finding {
    const CHECK: &str = "RAM sharing with the Organization";
    if sharing.is_empty() {
        return Finding::ok(CHECK, "no rule shares its blocks (share_with): not needed");
    }
    let rules = sharing.join(", ");
    match enabled {
        Ok(true) => Finding::ok(CHECK, format!("enabled (rules sharing: {rules})")),
        Ok(false) => Finding::flagged(
            CHECK,
            Verdict::Fail,
            format!("not enabled, and rules share their blocks: {rules}"),
            "in the Organization's management account: aws ram enable-sharing-with-aws-organization \
             (without it RAM shares with no account of the Organization)",
        ),
        Err(why) if why.contains("AWSOrganizationsNotInUseException") => Finding::flagged(
            CHECK,
            Verdict::Fail,
            format!("this account is in no AWS Organization, and rules share their blocks: {rules}"),
            "share only inside an Organization (EC2 User Guide): remove share_with, or deploy in an Organization's account",
        ),
        Err(why) if ["AccessDenied", "UnauthorizedOperation", "AuthorizationError"].iter().any(|c| why.contains(c)) => {
            Finding::flagged(
                CHECK,
                Verdict::NotChecked,
                format!("only the management account or a delegated administrator may look: {why}"),
                "in the management account: aws organizations list-aws-service-access-for-organization \
             (ram.amazonaws.com must be listed), or run preflight there",
            )
        }
        Err(why) => Finding::flagged(CHECK, Verdict::NotChecked, format!("not read: {why}"), "run preflight again"),
    }
}

/// A preflight run: when, and every finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preflight {
    pub at: DateTime<Utc>,
    pub findings: Vec<Finding>,
}

impl Preflight {
    /// Passed: nothing failed (warnings and checks not made are reported, not blocking).
    pub fn passed(&self) -> bool {
        self.findings.iter().all(|f| f.verdict != Verdict::Fail)
    }

    /// The count of findings with `verdict`.
    pub fn count(&self, verdict: Verdict) -> usize {
        self.findings.iter().filter(|f| f.verdict == verdict).count()
    }
}

/// Whether EC2 repeats an offering's id from one answer to the next: the same question asked
/// twice, a refill apart. Either reading is one capblock works under (it re-checks an offering
/// by what it is); the finding says which one this account shows.
pub fn id_stability(check: &str, first: &[Offering], second: &[Offering]) -> Finding {
    if first.is_empty() || second.is_empty() {
        return Finding::flagged(
            check,
            Verdict::NotChecked,
            "no offering in one of the two answers",
            "run preflight again when the question has offerings",
        );
    }
    let same_ids = first.iter().filter(|a| second.iter().any(|b| b.id == a.id)).count();
    let same_blocks = first.iter().filter(|a| second.iter().any(|b| a.same_block(b))).count();
    if same_ids > 0 {
        Finding::ok(check, format!("{same_ids} of {} offerings kept their ids in a second answer", first.len()))
    } else if same_blocks > 0 {
        Finding::ok(
            check,
            format!(
                "ids are minted per answer ({same_blocks} same blocks, new ids): capblock buys them by what they are"
            ),
        )
    } else {
        Finding::flagged(
            check,
            Verdict::Warn,
            "the two answers share no block",
            "the market moved between the answers; run preflight again",
        )
    }
}

/// What capblock reads of a block that has not started: its instances, and whether EC2 tags it
/// with the requested quantity. Before the start EC2 shows the counts as 0 (the user guide)
/// and capblock reads the tag; a block with neither leaves capblock the offering's count only.
pub fn scheduled_block(check: &str, r: &Reservation, requested_tag: &str) -> Finding {
    let tag = r.tags.get(requested_tag).map_or("absent".to_string(), |q| format!("{requested_tag} = {q}"));
    let seen = format!("{} reads as {} instance(s); {tag}", r.id, r.instance_count);
    if r.instance_count > 0 {
        Finding::ok(check, seen)
    } else {
        Finding::flagged(
            check,
            Verdict::Warn,
            seen,
            "capblock takes a bought block's count from its offering; an adopted one reads 0 until it starts",
        )
    }
}

#[cfg(test)]
mod tests;
