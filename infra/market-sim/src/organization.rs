//! The AWS Organization the simulated account belongs to: whom RAM lets it share a Capacity
//! Block with. EC2 User Guide, "Share Capacity Blocks": "An owner can share a Capacity Block with
//! specific AWS accounts inside their AWS Organization, an organizational unit inside their AWS
//! Organization, or the entire AWS Organization", and "Capacity Block sharing is not available to
//! new AWS accounts or AWS accounts that have a limited billing history".

use serde::{Deserialize, Serialize};

use crate::wire::error::ApiError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Organization {
    /// `o-` + 10 to 32 lowercase letters or digits (Organizations' id pattern).
    pub id: String,
    /// The management account, which the organization's and its OUs' ARNs name; absent: the
    /// scenario's `account_id` (the simulated account manages its organization).
    pub management_account: Option<String>,
    /// Member accounts besides the simulated account itself, which is always a member.
    pub accounts: Vec<String>,
    pub ous: Vec<OrgUnit>,
    /// The account "has a limited billing history": it cannot share Capacity Blocks at all.
    pub limited_billing_history: bool,
}

/// An organizational unit and the member accounts in it (directly or below it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrgUnit {
    /// `ou-` + 4 to 32 + `-` + 8 to 32 lowercase letters or digits.
    pub id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub accounts: Vec<String>,
}

impl Default for Organization {
    /// The simulated account plus two members, both in one OU.
    fn default() -> Self {
        let members = vec!["111111111111".to_string(), "222222222222".to_string()];
        Self {
            id: "o-capblock01".into(),
            management_account: None,
            accounts: members.clone(),
            ous: vec![OrgUnit { id: "ou-cb01-mlteams1".into(), name: "ml-teams".into(), accounts: members }],
            limited_billing_history: false,
        }
    }
}

/// A principal a resource share names, as RAM takes them (the kinds the simulator plays: IAM
/// roles and users and service principals are not modelled and refused as malformed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    Account(String),
    /// `arn:aws:organizations::MANAGEMENT:organization/o-...`
    Organization {
        management: String,
        id: String,
    },
    /// `arn:aws:organizations::MANAGEMENT:ou/o-.../ou-...`
    Unit {
        management: String,
        org: String,
        id: String,
    },
}

pub fn is_account(s: &str) -> bool {
    s.len() == 12 && s.bytes().all(|b| b.is_ascii_digit())
}

fn lower_alnum(s: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

pub fn is_org_id(s: &str) -> bool {
    s.strip_prefix("o-").is_some_and(|r| lower_alnum(r, 10, 32))
}

pub fn is_ou_id(s: &str) -> bool {
    s.strip_prefix("ou-")
        .and_then(|r| r.split_once('-'))
        .is_some_and(|(root, ou)| lower_alnum(root, 4, 32) && lower_alnum(ou, 8, 32))
}

impl Principal {
    /// None for anything that is not an account id, an organization ARN or an OU ARN.
    pub fn parse(p: &str) -> Option<Self> {
        if is_account(p) {
            return Some(Self::Account(p.to_string()));
        }
        let rest = p.strip_prefix("arn:aws:organizations::")?;
        let (management, resource) = rest.split_once(':')?;
        if !is_account(management) {
            return None;
        }
        let management = management.to_string();
        if let Some(id) = resource.strip_prefix("organization/") {
            return is_org_id(id).then(|| Self::Organization { management, id: id.to_string() });
        }
        let (org, id) = resource.strip_prefix("ou/")?.split_once('/')?;
        (is_org_id(org) && is_ou_id(id)).then(|| Self::Unit { management, org: org.to_string(), id: id.to_string() })
    }
}

impl Organization {
    pub fn management(&self, owner: &str) -> String {
        self.management_account.clone().unwrap_or_else(|| owner.to_string())
    }

    pub fn arn(&self, owner: &str) -> String {
        format!("arn:aws:organizations::{}:organization/{}", self.management(owner), self.id)
    }

    pub fn ou_arn(&self, owner: &str, ou: &str) -> String {
        format!("arn:aws:organizations::{}:ou/{}/{ou}", self.management(owner), self.id)
    }

    /// Whether `p` is inside the organization. An account outside it is `Ok(false)` (RAM could
    /// share other resource types with it); an organization or OU that is not this one's is
    /// unknown to RAM, as it is to Organizations.
    pub fn contains(&self, owner: &str, p: &Principal) -> Result<bool, ApiError> {
        let ours = |management: &str, org: &str| management == self.management(owner) && org == self.id;
        match p {
            Principal::Account(a) => Ok(a == owner || self.accounts.contains(a)),
            Principal::Organization { management, id } if ours(management, id) => Ok(true),
            Principal::Organization { id, .. } => {
                Err(ApiError::client("UnknownResourceException", format!("Organization {id} could not be found.")))
            }
            Principal::Unit { management, org, id }
                if ours(management, org) && self.ous.iter().any(|u| u.id == *id) =>
            {
                Ok(true)
            }
            Principal::Unit { id, .. } => Err(ApiError::client(
                "UnknownResourceException",
                format!("OrganizationalUnit {id} could not be found."),
            )),
        }
    }

    /// The ids' shapes, and every OU account a member (`owner`, the simulated account, or one of
    /// `accounts`).
    pub fn validate(&self, owner: &str) -> Result<(), String> {
        if !is_org_id(&self.id) {
            return Err(format!("organization id {:?} must be o- and 10 to 32 lowercase letters or digits", self.id));
        }
        if let Some(m) = self.management_account.as_deref().filter(|m| !is_account(m)) {
            return Err(format!("organization management_account {m:?} must be 12 digits"));
        }
        if let Some(a) = self.accounts.iter().find(|a| !is_account(a)) {
            return Err(format!("organization accounts entry {a:?} must be 12 digits"));
        }
        for (i, u) in self.ous.iter().enumerate() {
            let at = format!("organization ous[{i}] ({})", u.id);
            if !is_ou_id(&u.id) {
                return Err(format!("{at}: the id must be ou-, 4 to 32, -, 8 to 32 lowercase letters or digits"));
            }
            if self.ous[..i].iter().any(|o| o.id == u.id) {
                return Err(format!("{at}: the id is already taken"));
            }
            if let Some(a) = u.accounts.iter().find(|a| *a != owner && !self.accounts.contains(a)) {
                return Err(format!("{at}: account {a:?} is not one of the organization's accounts"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNER: &str = "111122223333";

    #[test]
    fn principals_parse_as_ram_takes_them() {
        assert_eq!(Principal::parse("111111111111"), Some(Principal::Account("111111111111".into())));
        let org = Principal::parse("arn:aws:organizations::111122223333:organization/o-capblock01").unwrap();
        assert_eq!(org, Principal::Organization { management: OWNER.into(), id: "o-capblock01".into() });
        let ou = Principal::parse("arn:aws:organizations::111122223333:ou/o-capblock01/ou-cb01-mlteams1").unwrap();
        assert_eq!(
            ou,
            Principal::Unit { management: OWNER.into(), org: "o-capblock01".into(), id: "ou-cb01-mlteams1".into() }
        );
        for bad in [
            "11111111111",
            "arn:aws:iam::111111111111:root",
            "arn:aws:iam::111111111111:role/x",
            "ec2.amazonaws.com",
            "o-capblock01",
            "arn:aws:organizations::111122223333:organization/o-short",
            "arn:aws:organizations::1111:organization/o-capblock01",
            "arn:aws:organizations::111122223333:ou/o-capblock01/ou-x-y",
            "",
        ] {
            assert_eq!(Principal::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_default_organization_holds_the_owner_and_two_members() {
        let o = Organization::default();
        o.validate(OWNER).unwrap();
        let has = |p: &str| o.contains(OWNER, &Principal::parse(p).unwrap());
        assert_eq!(has("111111111111"), Ok(true));
        assert_eq!(has("222222222222"), Ok(true));
        assert_eq!(has(OWNER), Ok(true), "the owner is always a member");
        assert_eq!(has("999999999999"), Ok(false), "outside: a principal RAM knows, outside the organization");
        assert_eq!(has(&o.arn(OWNER)), Ok(true));
        assert_eq!(has(&o.ou_arn(OWNER, "ou-cb01-mlteams1")), Ok(true));
        let e = has("arn:aws:organizations::111122223333:organization/o-otherorg00").unwrap_err();
        assert_eq!(
            (e.code.as_str(), e.message.as_str()),
            ("UnknownResourceException", "Organization o-otherorg00 could not be found.")
        );
        let e = has(&o.ou_arn(OWNER, "ou-cb01-nothere1")).unwrap_err();
        assert_eq!(e.message, "OrganizationalUnit ou-cb01-nothere1 could not be found.");
        // The ARN of this organization under another management account is another organization.
        assert!(has("arn:aws:organizations::999999999999:organization/o-capblock01").is_err());
    }

    #[test]
    fn organizations_are_validated() {
        let bad = |f: fn(&mut Organization)| {
            let mut o = Organization::default();
            f(&mut o);
            o.validate(OWNER).unwrap_err()
        };
        assert!(bad(|o| o.id = "o-x".into()).contains("organization id"));
        assert!(bad(|o| o.management_account = Some("12".into())).contains("management_account"));
        assert!(bad(|o| o.accounts.push("abc".into())).contains("accounts entry \"abc\""));
        assert!(bad(|o| o.ous[0].id = "ou-bad".into()).contains("ous[0] (ou-bad)"));
        assert!(bad(|o| o.ous.push(o.ous[0].clone())).contains("already taken"));
        assert!(
            bad(|o| o.ous[0].accounts.push("333333333333".into())).contains("not one of the organization's accounts")
        );
        let mut o = Organization::default();
        o.ous[0].accounts.push(OWNER.into());
        assert_eq!(o.validate(OWNER), Ok(()), "the owner may be in an OU");
    }
}
