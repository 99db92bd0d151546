//! Validated ids: AWS regions and EC2 instance types, reservation, instance and account ids.
//! Parsing them once at the edge means the rest of the code never handles a string that could be
//! a typo.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A name kept as the text EC2 uses: parsed with `FromStr` (which checks it) whether it comes from
/// serde or a `String`, and written back as that text.
macro_rules! text_name {
    ($t:ident) => {
        impl TryFrom<String> for $t {
            type Error = IdError;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl From<$t> for String {
            fn from(n: $t) -> String {
                n.0
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

/// The longest region name accepted: the longest today, "ap-southeast-7", is 14 characters.
const MAX_REGION_LEN: usize = 32;

/// At most the first 64 characters of `s`, marked when cut: an error never echoes a whole
/// hostile input (a 20 MB name becomes a 20 MB message otherwise).
pub fn prefix(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{0:?} is not an AWS region name (expected e.g. \"us-east-1\", \"ap-southeast-2\", \"us-gov-west-1\")")]
    Region(String),
    #[error("{0:?} is not an EC2 instance type (expected e.g. \"p5.48xlarge\")")]
    InstanceType(String),
}

/// An AWS region code such as `us-east-1`: `<area>(-gov|-iso…)?-<direction>-<n>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Region(String);

impl Region {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the region is one AWS runs today (`KNOWN_REGIONS`). A well-formed name is not
    /// enough for a rule: each region costs every scan questions and every track a visit.
    pub fn is_known(&self) -> bool {
        KNOWN_REGIONS.contains(&self.0.as_str())
    }
}

/// The regions of the `aws` and `aws-us-gov` partitions as of the end of 2025 (AWS's "Region
/// billing codes" page). A rule naming another region needs `allow_unknown_regions = true`: a
/// region launched later, or a typo that is still a well-formed name.
pub const KNOWN_REGIONS: &[&str] = &[
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
    "ca-central-1",
    "ca-west-1",
    "mx-central-1",
    "sa-east-1",
    "af-south-1",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "eu-central-1",
    "eu-central-2",
    "eu-north-1",
    "eu-south-1",
    "eu-south-2",
    "il-central-1",
    "me-south-1",
    "me-central-1",
    "ap-east-1",
    "ap-east-2",
    "ap-south-1",
    "ap-south-2",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-northeast-3",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "ap-southeast-5",
    "ap-southeast-6",
    "ap-southeast-7",
    "us-gov-east-1",
    "us-gov-west-1",
];

impl FromStr for Region {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = s.split('-').collect();
        let lower = |p: &str| !p.is_empty() && p.bytes().all(|c| c.is_ascii_lowercase());
        let ok = s.len() <= MAX_REGION_LEN
            && parts.len() >= 3
            && parts.len() <= 4
            && parts[0].len() == 2
            && lower(parts[0])
            && parts[1..parts.len() - 1].iter().all(|p| lower(p))
            && parts.last().is_some_and(|n| !n.is_empty() && n.len() <= 2 && n.bytes().all(|c| c.is_ascii_digit()));
        if ok { Ok(Region(s.to_string())) } else { Err(IdError::Region(prefix(s))) }
    }
}

text_name!(Region);

/// `prefix` then lowercase hex digits, as many as one of `lengths`.
fn ec2_id(s: &str, prefix: &str, lengths: &[usize]) -> bool {
    s.strip_prefix(prefix).is_some_and(|hex| {
        lengths.contains(&hex.len()) && hex.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    })
}

/// EC2's capacity reservation ids: `cr-` and 17 hex digits. Checked where an event brings one,
/// so what is not one (a 300 KB string, Slack markup) never reaches the store or a message.
pub fn is_reservation_id(s: &str) -> bool {
    ec2_id(s, "cr-", &[17])
}

/// EC2's instance ids: `i-` and 8 (older instances) or 17 hex digits.
pub fn is_instance_id(s: &str) -> bool {
    ec2_id(s, "i-", &[8, 17])
}

/// An EC2 instance type such as `p5.48xlarge` or `p6-b200.48xlarge`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct InstanceType(String);

impl InstanceType {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for InstanceType {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let valid_part =
            |p: &str| !p.is_empty() && p.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
        match s.split_once('.') {
            Some((family, size))
                if valid_part(family)
                    && valid_part(size)
                    && family.as_bytes()[0].is_ascii_lowercase()
                    && s.len() <= 64 =>
            {
                Ok(InstanceType(s.to_string()))
            }
            _ => Err(IdError::InstanceType(prefix(s))),
        }
    }
}

text_name!(InstanceType);

/// Whether `s` can name a team: 1-64 characters of a-z, 0-9, '-' or '_' (as rule ids, so a
/// team reads the same in a rule, the stack's parameter, the table's keys and metrics).
/// A person's request (`domain::request`) by the key it is stored under: its id and the identity
/// (`aws:userid`) of its requester. A purchase for it names both, so that its reservation can
/// check the request item itself in the same transaction (a cancel that lands between the scan's
/// read and the reservation stops the purchase).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RequestKey {
    pub requester: String,
    pub id: String,
}

impl fmt::Display for RequestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}

pub fn is_team_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_')
}

/// The member accounts that lend the watch their describe limit (`WatchAccounts`): 12-digit
/// account ids, each once, at most [`MAX_MEMBER_ACCOUNTS`]. The error says which entry is wrong.
pub fn parse_member_accounts(text: &str) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if entry.len() != 12 || !entry.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{entry:?} is not an account id (12 digits)"));
        }
        if !out.iter().any(|a| a == entry) {
            out.push(entry.to_string());
        }
    }
    if out.len() > MAX_MEMBER_ACCOUNTS {
        return Err(format!(
            "{} accounts: at most {MAX_MEMBER_ACCOUNTS} (each adds a lane per region to every scan)",
            out.len()
        ));
    }
    Ok(out)
}

/// Member accounts a scan may ask through: 8 lanes per region already ask a region's 64
/// questions in about a minute, and each lane costs an AssumeRole per container.
pub const MAX_MEMBER_ACCOUNTS: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_syntax() {
        for ok in ["us-east-1", "ap-southeast-2", "us-gov-west-1", "eu-central-2", "il-central-1"] {
            assert!(ok.parse::<Region>().is_ok(), "{ok}");
        }
        for bad in
            ["", "us-east", "US-EAST-1", "useast1", "us-east-1a", "us_east_1", "u-east-1", "us--1", "us-east-123"]
        {
            assert_eq!(bad.parse::<Region>(), Err(IdError::Region(bad.into())), "{bad}");
        }
        // A huge name is refused without being echoed whole.
        let huge = format!("us-{}-1", "e".repeat(1 << 20));
        let err = huge.parse::<Region>().unwrap_err().to_string();
        assert!(err.len() < 200 && err.contains('…'), "{err}");
        let err = format!("p5.{}", "x".repeat(1 << 20)).parse::<InstanceType>().unwrap_err().to_string();
        assert!(err.len() < 200, "{err}");
    }

    #[test]
    fn known_regions_are_well_formed_and_listed_once() {
        for (i, r) in KNOWN_REGIONS.iter().enumerate() {
            assert!(r.parse::<Region>().is_ok_and(|r| r.is_known()), "{r}");
            assert!(!KNOWN_REGIONS[..i].contains(r), "{r} listed twice");
        }
        assert!(!"us-east-9".parse::<Region>().unwrap().is_known());
    }

    #[test]
    fn ec2_ids_have_their_shape() {
        assert!(is_reservation_id("cr-0a1b2c3d4e5f60718"));
        assert!(is_instance_id("i-0abc1234def567890") && is_instance_id("i-0abc1234"));
        for bad in ["cr-0a1b", "cr-0A1B2C3D4E5F60718", "cr-0a1b2c3d4e5f607189", "i-0abc1234def567890", "cr-", ""] {
            assert!(!is_reservation_id(bad), "{bad}");
        }
        let huge = format!("i-{}", "0".repeat(300 * 1024));
        for bad in ["i-0abc123", "i-<!channel>", "i-0abc1234def56789g", "cr-0abc1234", &huge] {
            assert!(!is_instance_id(bad), "{bad}");
        }
    }

    #[test]
    fn instance_type_syntax() {
        for ok in ["p5.48xlarge", "p6-b200.48xlarge", "trn2.3xlarge", "p4de.24xlarge"] {
            assert!(ok.parse::<InstanceType>().is_ok(), "{ok}");
        }
        for bad in ["", "p5", ".48xlarge", "p5.", "P5.48xlarge", "p5 .48xlarge", "5p.large"] {
            assert!(bad.parse::<InstanceType>().is_err(), "{bad}");
        }
    }

    #[test]
    fn member_accounts_are_account_ids_each_once() {
        assert_eq!(
            parse_member_accounts(" 111111111111, 222222222222,111111111111,").unwrap(),
            ["111111111111", "222222222222"]
        );
        assert_eq!(parse_member_accounts("").unwrap(), Vec::<String>::new());
        assert!(parse_member_accounts("11111111111").unwrap_err().contains("12 digits"));
        assert!(parse_member_accounts("arn:aws:iam::111111111111:root").is_err());
        let nine: Vec<String> = (1..=9).map(|n| format!("{n:012}")).collect();
        assert!(parse_member_accounts(&nine.join(",")).unwrap_err().contains("at most 8"));
    }
}
