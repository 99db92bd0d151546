//! Other accounts' Capacity Block quotas (`[[accounts]]`): a member account of the organization
//! that asks the market with its own credentials (see `world::World::take_describe_token`) has
//! quotas of its own. Each family an entry lists has a quota of 0 for that account, in every
//! region or only in the entry's `regions`; every family it does not list has a quota. The
//! simulated account's own quotas are `[[regions]] zero_quota_families` (see README.md).

use serde::{Deserialize, Serialize};

/// One other account's quotas of 0.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountCfg {
    /// The account (12 digits), as the caller's credentials resolve to it.
    pub id: String,
    /// Instance families (the part of a type before the first '.') whose Capacity Block quota is
    /// 0 for this account: DescribeCapacityBlockOfferings for them answers
    /// CapacityBlockDescribeLimitExceeded on every call of the account.
    #[serde(default)]
    pub zero_quota_families: Vec<String>,
    /// The regions the quotas of 0 hold in; empty: every region.
    #[serde(default)]
    pub regions: Vec<String>,
}

/// The entries' problems: an id not 12 digits or listed twice, the simulated account's own id
/// (its quotas are the regions'), a family that is not one, an empty region name.
pub fn validate(accounts: &[AccountCfg], simulated: &str, is_family: impl Fn(&str) -> bool) -> Result<(), String> {
    for (i, a) in accounts.iter().enumerate() {
        let at = format!("accounts[{i}] ({})", a.id);
        if a.id.len() != 12 || !a.id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{at}: id {:?} must be 12 digits", a.id));
        }
        if a.id == simulated {
            return Err(format!(
                "{at}: the simulated account's quotas of 0 are [[regions]] zero_quota_families, not [[accounts]]"
            ));
        }
        if accounts[..i].iter().any(|b| b.id == a.id) {
            return Err(format!("{at}: listed twice"));
        }
        if let Some(f) = a.zero_quota_families.iter().find(|f| !is_family(f)) {
            return Err(format!(
                "{at}: zero_quota_families entry {f:?} is not an instance family (the part of a type before the '.', e.g. \"trn2\")"
            ));
        }
        if a.regions.iter().any(|r| r.trim().is_empty()) {
            return Err(format!("{at}: regions entries must be region names, got an empty one"));
        }
    }
    Ok(())
}

/// Whether `account`'s Capacity Block quota for `family` is 0 in `region`, as `accounts` says
/// (an account not listed has every quota).
pub fn zero_quota(accounts: &[AccountCfg], account: &str, region: &str, family: &str) -> bool {
    accounts.iter().filter(|a| a.id == account).any(|a| {
        (a.regions.is_empty() || a.regions.iter().any(|r| r == region))
            && a.zero_quota_families.iter().any(|f| f.eq_ignore_ascii_case(family))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn account(id: &str, families: &[&str], regions: &[&str]) -> AccountCfg {
        AccountCfg {
            id: id.into(),
            zero_quota_families: families.iter().map(|f| f.to_string()).collect(),
            regions: regions.iter().map(|r| r.to_string()).collect(),
        }
    }

    #[test]
    fn an_accounts_quotas_of_0_hold_for_it_alone_in_its_regions() {
        let accounts = [account("111111111111", &["P5"], &[]), account("222222222222", &["trn2"], &["us-west-2"])];
        assert!(zero_quota(&accounts, "111111111111", "us-east-1", "p5"));
        assert!(zero_quota(&accounts, "111111111111", "eu-west-1", "p5"), "every region");
        assert!(!zero_quota(&accounts, "111111111111", "us-east-1", "trn2"));
        assert!(zero_quota(&accounts, "222222222222", "us-west-2", "trn2"));
        assert!(!zero_quota(&accounts, "222222222222", "us-east-1", "trn2"), "only its regions");
        assert!(!zero_quota(&accounts, "333333333333", "us-east-1", "p5"), "not listed: every quota");
    }

    #[test]
    fn bad_entries_are_named() {
        let family = |f: &str| !f.is_empty() && !f.contains('.');
        let check = |a: AccountCfg| validate(&[a], "999999999999", family).unwrap_err();
        assert!(check(account("11111111111", &[], &[])).contains("must be 12 digits"));
        assert!(check(account("999999999999", &["p5"], &[])).contains("[[regions]] zero_quota_families"));
        assert!(check(account("111111111111", &["p5.48xlarge"], &[])).contains("is not an instance family"));
        assert!(check(account("111111111111", &["p5"], &[""])).contains("region names"));
        let twice = [account("111111111111", &[], &[]), account("111111111111", &["p5"], &[])];
        assert!(
            validate(&twice, "999999999999", family).unwrap_err().contains("accounts[1] (111111111111): listed twice")
        );
        assert!(validate(&[account("111111111111", &["p5"], &["us-east-1"])], "999999999999", family).is_ok());
    }
}
