//! Block health: what DescribeCapacityBlockStatus says about a block that is scheduled or
//! active (its interconnect and how many of its instances EC2 took out), and when that is worth
//! telling someone. Pure: the tracker feeds observations in and announces the changes.
//!
//! A change is announced once (Slack and the workloads topic, kind `health`), and so is the
//! recovery. `insufficient-data` alone is not a problem: EC2 reports it while it has nothing to
//! measure (e.g. right after the start).

use serde::{Deserialize, Serialize};

/// CapacityBlockInterconnectStatus, plus whatever EC2 may add later (kept as its text, and
/// treated as a problem: a status capblock cannot judge is one to look at).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Interconnect {
    Ok,
    Impaired,
    InsufficientData,
    Other(String),
}

impl Interconnect {
    pub fn from_ec2(s: &str) -> Interconnect {
        match s {
            "ok" => Interconnect::Ok,
            "impaired" => Interconnect::Impaired,
            "insufficient-data" => Interconnect::InsufficientData,
            other => Interconnect::Other(other.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Interconnect::Ok => "ok",
            Interconnect::Impaired => "impaired",
            Interconnect::InsufficientData => "insufficient-data",
            Interconnect::Other(s) => s,
        }
    }

    fn is_problem(&self) -> bool {
        matches!(self, Interconnect::Impaired | Interconnect::Other(_))
    }
}

impl std::fmt::Display for Interconnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One DescribeCapacityBlockStatus answer for a block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockHealth {
    pub interconnect: Interconnect,
    /// Instances in the block (TotalCapacity).
    pub total: u32,
    /// Instances EC2 took out of it (TotalUnavailableCapacity).
    pub unavailable: u32,
}

impl BlockHealth {
    /// The problems a person should look at; empty when the block is healthy.
    pub fn problems(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.interconnect.is_problem() {
            v.push(format!("interconnect {}", self.interconnect));
        }
        if self.unavailable > 0 {
            v.push(format!("{} of {} instances unavailable", self.unavailable, self.total));
        }
        v
    }

    pub fn is_healthy(&self) -> bool {
        self.problems().is_empty()
    }
}

/// A change worth announcing, the domain type workloads (and capblock's own events) consume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "change", rename_all = "kebab-case")]
pub enum HealthChange {
    /// New or different problems.
    Degraded { health: BlockHealth, problems: Vec<String> },
    /// The problems announced before are gone.
    Recovered { health: BlockHealth },
}

impl HealthChange {
    /// The `kind` of the workload notice.
    pub const KIND: &'static str = "health";

    pub fn health(&self) -> &BlockHealth {
        match self {
            HealthChange::Degraded { health, .. } | HealthChange::Recovered { health } => health,
        }
    }

    /// One line for a title: "interconnect impaired; 2 of 16 instances unavailable", or the
    /// recovery.
    pub fn summary(&self) -> String {
        match self {
            HealthChange::Degraded { problems, .. } => problems.join("; "),
            HealthChange::Recovered { health } => {
                format!("healthy again: interconnect {}, all {} instances available", health.interconnect, health.total)
            }
        }
    }
}

/// The outbox milestone of a block's `n`th announced health change: the count makes a problem
/// that comes back after a recovery news again; the problems in it keep a run that died
/// half-way and then saw something else from hiding the new change behind the old one.
pub fn milestone(n: u32, change: &HealthChange) -> String {
    let what: String = change.summary().chars().filter(char::is_ascii_alphanumeric).take(64).collect();
    format!("health-{n}-{what}")
}

/// What a new observation means, given the last one capblock acted on (None: never measured).
/// Only a change of the problems counts: the same impairment seen again, or a healthy block
/// seen for the first time, is no news.
pub fn change(previous: Option<&BlockHealth>, now: &BlockHealth) -> Option<HealthChange> {
    let before = previous.map(BlockHealth::problems).unwrap_or_default();
    let after = now.problems();
    if before == after {
        return None;
    }
    if after.is_empty() {
        Some(HealthChange::Recovered { health: now.clone() })
    } else {
        Some(HealthChange::Degraded { health: now.clone(), problems: after })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(interconnect: &str, unavailable: u32) -> BlockHealth {
        BlockHealth { interconnect: Interconnect::from_ec2(interconnect), total: 16, unavailable }
    }

    #[test]
    fn problems_read_like_the_messages() {
        assert!(h("ok", 0).is_healthy());
        assert!(h("insufficient-data", 0).is_healthy(), "nothing measured yet is not a problem");
        assert_eq!(h("impaired", 0).problems(), vec!["interconnect impaired"]);
        assert_eq!(h("ok", 2).problems(), vec!["2 of 16 instances unavailable"]);
        assert_eq!(h("degraded-later", 0).problems(), vec!["interconnect degraded-later"], "unknown is a problem");
    }

    #[test]
    fn only_changes_are_news() {
        // First sight: healthy is no news, a problem is.
        assert_eq!(change(None, &h("ok", 0)), None);
        let d = change(None, &h("impaired", 0)).unwrap();
        assert_eq!(d.summary(), "interconnect impaired");
        // The same again: nothing; counts moving: news; insufficient-data alone: no change.
        assert_eq!(change(Some(&h("impaired", 0)), &h("impaired", 0)), None);
        assert_eq!(change(Some(&h("ok", 0)), &h("insufficient-data", 0)), None);
        let more = change(Some(&h("impaired", 0)), &h("impaired", 2)).unwrap();
        assert_eq!(more.summary(), "interconnect impaired; 2 of 16 instances unavailable");
        // Recovery once.
        let r = change(Some(&h("impaired", 2)), &h("ok", 0)).unwrap();
        assert!(matches!(r, HealthChange::Recovered { .. }));
        assert_eq!(r.summary(), "healthy again: interconnect ok, all 16 instances available");
        assert_eq!(change(Some(&h("ok", 0)), &h("ok", 0)), None);
    }

    #[test]
    fn milestones() {
        let d = change(None, &h("impaired", 2)).unwrap();
        assert_eq!(milestone(1, &d), "health-1-interconnectimpaired2of16instancesunavailable");
        assert_ne!(milestone(1, &d), milestone(3, &d), "the same problem after a recovery is news again");
    }
}
