//! EC2 UltraServers: several instances joined by an accelerator interconnect, searched and
//! bought as a unit with `UltraserverType` + `UltraserverCount` (never with InstanceType or
//! InstanceCount). Their instances are terminated 60 minutes before the block's end, not 30.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::ids::{IdError, InstanceType};

/// One UltraServer type: its instance type and how many instances it joins.
#[derive(Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Known {
    pub name: &'static str,
    pub instance_type: &'static str,
    pub instances: u32,
}

/// The UltraServer types capblock knows (capacity-blocks.md). 72 GPUs = 18 x p6e-gb200.36xlarge
/// of 4; the x36 half of it; 64 Trainium2 chips = 4 x trn2u.48xlarge of 16.
const KNOWN: &[Known] = &[
    Known { name: "u-p6e-gb200x72", instance_type: "p6e-gb200.36xlarge", instances: 18 },
    Known { name: "u-p6e-gb200x36", instance_type: "p6e-gb200.36xlarge", instances: 9 },
    Known { name: "u-trn2x64", instance_type: "trn2u.48xlarge", instances: 4 },
];

/// Most UltraServers one rule may ask for at once (72 GPUs each: 16 is a large cluster).
pub const MAX_COUNT: u32 = 16;

/// How EC2 takes an UltraServer search in a region. The API model says InstanceType is
/// required beside UltraserverType; EC2 has also been seen to refuse the pair
/// (InvalidParameterCombination). Nothing settles which holds, so capblock asks in the model's
/// form first, learns from EC2's refusal, and keeps what it learned in the region's market
/// memory: a new Lambda container asks in the form that worked, not the refused one first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchForm {
    /// InstanceType (the UltraServer's) with UltraserverType and UltraserverCount: the model's.
    #[default]
    WithInstanceType,
    /// UltraserverType and UltraserverCount alone.
    UltraserverOnly,
}

impl SearchForm {
    /// The form to try when EC2 refuses this one.
    pub fn other(self) -> SearchForm {
        match self {
            SearchForm::WithInstanceType => SearchForm::UltraserverOnly,
            SearchForm::UltraserverOnly => SearchForm::WithInstanceType,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown UltraServer type {0:?} (known: u-p6e-gb200x72, u-p6e-gb200x36, u-trn2x64)")]
pub struct UnknownUltraServer(pub String);

/// A known UltraServer type such as `u-p6e-gb200x72`: only names in the table can be built, so
/// its facts are always there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UltraServerType(&'static Known);

impl UltraServerType {
    pub fn as_str(&self) -> &'static str {
        self.0.name
    }

    /// The instance type its offerings and reservations name.
    pub fn instance_type(&self) -> Result<InstanceType, IdError> {
        self.0.instance_type.parse()
    }

    /// Instances in one UltraServer.
    pub fn instances(&self) -> u32 {
        self.0.instances
    }
}

impl FromStr for UltraServerType {
    type Err = UnknownUltraServer;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KNOWN
            .iter()
            .find(|k| k.name == s)
            .map(UltraServerType)
            .ok_or_else(|| UnknownUltraServer(s.chars().take(64).collect()))
    }
}

impl TryFrom<String> for UltraServerType {
    type Error = UnknownUltraServer;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<UltraServerType> for String {
    fn from(u: UltraServerType) -> String {
        u.0.name.to_string()
    }
}

impl fmt::Display for UltraServerType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.name)
    }
}

/// How many UltraServers of one type an offering (or a question) is: searched and bought as
/// `UltraserverType` + `UltraserverCount`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UltraServers {
    pub kind: UltraServerType,
    pub count: u32,
}

impl UltraServers {
    /// Instances in all of them: what EC2 reports as the offering's InstanceCount.
    pub fn instances(&self) -> u32 {
        self.kind.instances().saturating_mul(self.count)
    }
}

impl fmt::Display for UltraServers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} x {}", self.count, self.kind)
    }
}

/// Instances one account may hold in Capacity Blocks on a given date (capacity-blocks.md):
/// more UltraServers than this allows can never be bought at once.
pub const MAX_ACCOUNT_INSTANCES: u32 = 256;

/// Why EC2 would not take `count` UltraServers of `kind` in one search or purchase, if it would
/// not.
pub fn count_problem(kind: UltraServerType, count: u32) -> Option<String> {
    if !(1..=MAX_COUNT).contains(&count) {
        return Some(format!("{count} is not between 1 and {MAX_COUNT} UltraServers"));
    }
    let instances = kind.instances().saturating_mul(count);
    (instances > MAX_ACCOUNT_INSTANCES).then(|| {
        format!(
            "{count} x {kind} is {instances} instances, more than the {MAX_ACCOUNT_INSTANCES} an account may hold in \
             Capacity Blocks at once"
        )
    })
}

/// Whether an instance type is sold only inside UltraServers (never searched as instances).
pub fn only_in_ultraservers(instance_type: &str) -> Option<UltraServerType> {
    KNOWN.iter().find(|k| k.instance_type == instance_type).map(UltraServerType)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_types_and_their_instances() {
        let u: UltraServerType = "u-p6e-gb200x72".parse().unwrap();
        assert_eq!((u.instance_type().unwrap().as_str(), u.instances()), ("p6e-gb200.36xlarge", 18));
        let t: UltraServerType = "u-trn2x64".parse().unwrap();
        assert_eq!((t.instance_type().unwrap().as_str(), t.instances()), ("trn2u.48xlarge", 4));
        // Every entry names a valid instance type, and round-trips through serde.
        for k in KNOWN {
            let u: UltraServerType = k.name.parse().unwrap();
            assert!(u.instance_type().is_ok(), "{}", k.name);
            assert_eq!(serde_json::to_string(&u).unwrap(), format!("\"{}\"", k.name));
        }
        assert!("p5.48xlarge".parse::<UltraServerType>().is_err());
        assert_eq!(only_in_ultraservers("trn2u.48xlarge").map(|u| u.as_str()), Some("u-trn2x64"));
        assert!(only_in_ultraservers("trn2.48xlarge").is_none());
        assert!(serde_json::from_str::<UltraServerType>("\"u-nope\"").is_err());
    }

    #[test]
    fn counts_ec2_takes() {
        let x72: UltraServerType = "u-p6e-gb200x72".parse().unwrap();
        let trn: UltraServerType = "u-trn2x64".parse().unwrap();
        assert_eq!(count_problem(trn, 1), None);
        assert_eq!(count_problem(trn, 16), None);
        assert!(count_problem(trn, 0).unwrap().contains("between 1 and 16"));
        assert!(count_problem(trn, 17).is_some());
        // 14 x 18 = 252 instances fit the account's 256; 15 x 18 = 270 do not.
        assert_eq!(count_problem(x72, 14), None);
        assert!(count_problem(x72, 15).unwrap().contains("270 instances"));
        assert_eq!(UltraServers { kind: trn, count: 2 }.instances(), 8);
        assert_eq!(UltraServers { kind: trn, count: 2 }.to_string(), "2 x u-trn2x64");
    }
}
