//! EC2 UltraServers: several instances joined by an accelerator interconnect, searched and
//! bought as a unit with `UltraserverType` + `UltraserverCount` (never with InstanceType or
//! InstanceCount). Their instances are terminated 60 minutes before the block's end, not 30.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::names::{InstanceType, NameError};

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
    pub fn instance_type(&self) -> Result<InstanceType, NameError> {
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
        assert!(serde_json::from_str::<UltraServerType>("\"u-nope\"").is_err());
    }
}
