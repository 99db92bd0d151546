//! Accelerators per instance type. Prices are compared per accelerator-hour, so every
//! offering needs this number. EC2's DescribeInstanceTypes is the source of truth (GpuInfo /
//! NeuronInfo); the built-in table keeps pricing working when that call is denied or throttled.

use std::collections::HashMap;

use super::ids::InstanceType;

/// Where an accelerator count came from, so an operator can tell a live answer from the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Ec2,
    BuiltIn,
}

/// Counts known to the project (capacity-blocks.md); used only when EC2 has not answered.
const BUILT_IN: &[(&str, u32)] = &[
    ("p6-b300.48xlarge", 8),
    ("p6-b200.48xlarge", 8),
    ("p6e-gb200.36xlarge", 4),
    ("p5.48xlarge", 8),
    ("p5e.48xlarge", 8),
    ("p5en.48xlarge", 8),
    ("p5.4xlarge", 1),
    ("p4d.24xlarge", 8),
    ("p4de.24xlarge", 8),
    ("trn1.32xlarge", 16),
    ("trn2.48xlarge", 16),
    ("trn2u.48xlarge", 16),
    ("trn2.3xlarge", 1),
];

/// The least one accelerator-hour of a Capacity Block is taken to sell for, in USD (EC2 prices
/// every block in USD): a cent. EC2 publishes no floor (its reservation rates move with supply
/// and demand), so this is a bound no price has come near: the rates in EC2's published
/// Capacity Block price table are dollars per accelerator-hour (about 0.97 USD for trn1 to 5.41
/// USD for p5e when capblock was written), and repricings moved them by tens of percent, never
/// a hundredfold. A rule whose `max_total_fee` is below what its shortest, smallest block costs
/// at a cent an accelerator-hour has a typo in it (digits missing), not a bet on the market: its
/// validation says so (`rule::Rule::least_fee`).
pub const PRICE_FLOOR_PER_ACCELERATOR_HOUR: rust_decimal::Decimal =
    rust_decimal::Decimal::from_parts(1, 0, 0, false, 2);

/// vCPUs per instance type, as the user guide publishes them. Capacity Block quotas are counted
/// in vCPUs (192 = one trn2.48xlarge), so an operator reads a quota as instances through this.
const VCPUS: &[(&str, u32)] = &[
    ("p6-b300.48xlarge", 192),
    ("p6-b200.48xlarge", 192),
    ("p6e-gb200.36xlarge", 144),
    ("p5.48xlarge", 192),
    ("p5e.48xlarge", 192),
    ("p5en.48xlarge", 192),
    ("p5.4xlarge", 16),
    ("p4d.24xlarge", 96),
    ("p4de.24xlarge", 96),
    ("trn1.32xlarge", 128),
    ("trn2.48xlarge", 192),
    ("trn2u.48xlarge", 192),
    ("trn2.3xlarge", 12),
];

/// The published vCPUs of `instance_type`, where the project knows them.
pub fn vcpus_of(instance_type: &str) -> Option<u32> {
    VCPUS.iter().find(|(name, _)| *name == instance_type).map(|(_, n)| *n)
}

/// A Capacity Block quota (in vCPUs) in words, with the whole instances of `instance_type` it
/// allows where the type's vCPUs are known: "192 vCPUs (1 x trn2.48xlarge)".
pub fn quota_in_words(vcpus: u32, instance_type: &str) -> String {
    match vcpus_of(instance_type) {
        Some(per) => format!("{vcpus} vCPUs ({} x {instance_type} of {per} vCPUs)", vcpus / per),
        None => format!("{vcpus} vCPUs"),
    }
}

/// What to ask Service Quotas for when the account's Capacity Block quota for `family` is 0:
/// the per-account quota by its name (its per-organization twin gates nothing), in `region`, in
/// vCPUs with the vCPUs of one `instance_type` where they are known.
pub fn quota_request(family: &str, region: &str, instance_type: &str) -> String {
    format!(
        "request \"Concurrent {} Capacity Blocks per account\" in {region} in Service Quotas (in vCPUs{})",
        family.to_uppercase(),
        vcpus_of(instance_type).map_or(String::new(), |n| format!(": {n} per {instance_type}"))
    )
}

/// A cache of accelerator counts: EC2 answers first, the built-in table as a fallback.
#[derive(Debug, Clone, Default)]
pub struct AcceleratorCatalog {
    learned: HashMap<InstanceType, u32>,
}

impl AcceleratorCatalog {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records what DescribeInstanceTypes said. A zero count (a type with no accelerator) is
    /// kept out, so it never becomes a divisor.
    pub fn learn(&mut self, instance_type: InstanceType, accelerators: u32) {
        if accelerators > 0 {
            self.learned.insert(instance_type, accelerators);
        }
    }

    pub fn is_learned(&self, instance_type: &InstanceType) -> bool {
        self.learned.contains_key(instance_type)
    }

    pub fn lookup(&self, instance_type: &InstanceType) -> Option<(u32, Source)> {
        if let Some(n) = self.learned.get(instance_type) {
            return Some((*n, Source::Ec2));
        }
        BUILT_IN.iter().find(|(name, _)| *name == instance_type.as_str()).map(|(_, n)| (*n, Source::BuiltIn))
    }

    pub fn accelerators(&self, instance_type: &InstanceType) -> Option<u32> {
        self.lookup(instance_type).map(|(n, _)| n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> InstanceType {
        s.parse().unwrap()
    }

    /// Quotas are vCPUs: 192 is one trn2.48xlarge, 0 none, 383 still one p5.48xlarge; a type
    /// whose vCPUs are unknown gets the vCPUs alone.
    #[test]
    fn a_quota_reads_as_instances_of_the_rules_type() {
        assert_eq!(quota_in_words(192, "trn2.48xlarge"), "192 vCPUs (1 x trn2.48xlarge of 192 vCPUs)");
        assert_eq!(quota_in_words(0, "p5.48xlarge"), "0 vCPUs (0 x p5.48xlarge of 192 vCPUs)");
        assert_eq!(quota_in_words(383, "p5.48xlarge"), "383 vCPUs (1 x p5.48xlarge of 192 vCPUs)");
        assert_eq!(quota_in_words(48, "trn2.3xlarge"), "48 vCPUs (4 x trn2.3xlarge of 12 vCPUs)");
        assert_eq!(quota_in_words(100, "x9.metal"), "100 vCPUs");
    }

    /// The request names the per-account quota (never its per-organization twin) and its unit.
    #[test]
    fn a_quota_request_names_the_account_quota_in_vcpus() {
        assert_eq!(
            quota_request("trn2", "us-east-1", "trn2.48xlarge"),
            "request \"Concurrent TRN2 Capacity Blocks per account\" in us-east-1 in Service Quotas (in vCPUs: 192 per trn2.48xlarge)"
        );
        assert!(quota_request("x9", "us-east-1", "x9.metal").ends_with("Service Quotas (in vCPUs)"));
    }

    #[test]
    fn built_in_fallback_and_learned_override() {
        let mut c = AcceleratorCatalog::new();
        assert_eq!(c.lookup(&t("p5.48xlarge")), Some((8, Source::BuiltIn)));
        assert_eq!(c.lookup(&t("trn1.32xlarge")), Some((16, Source::BuiltIn)));
        assert_eq!(c.lookup(&t("p5.4xlarge")), Some((1, Source::BuiltIn)));
        assert_eq!(c.lookup(&t("m5.large")), None);
        c.learn(t("p5.48xlarge"), 8);
        c.learn(t("g7.12xlarge"), 4);
        c.learn(t("m5.large"), 0);
        assert_eq!(c.lookup(&t("p5.48xlarge")), Some((8, Source::Ec2)));
        assert_eq!(c.accelerators(&t("g7.12xlarge")), Some(4));
        assert_eq!(c.accelerators(&t("m5.large")), None);
    }
}
