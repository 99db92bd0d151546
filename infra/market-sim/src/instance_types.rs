//! Built-in instance type table: accelerator counts drive pricing and DescribeInstanceTypes.
//! Memory and vCPU figures are the published ones, close enough for a simulator.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accelerator {
    Gpu { name: &'static str, manufacturer: &'static str, memory_mib: u64 },
    Neuron { name: &'static str, core_count: u32, core_version: u32, memory_mib: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceTypeInfo {
    pub name: &'static str,
    pub vcpus: u32,
    pub memory_mib: u64,
    pub accelerator: Accelerator,
    pub accelerator_count: u32,
}

const fn gpu(name: &'static str, memory_mib: u64) -> Accelerator {
    Accelerator::Gpu { name, manufacturer: "NVIDIA", memory_mib }
}

const TRAINIUM: Accelerator =
    Accelerator::Neuron { name: "Trainium", core_count: 2, core_version: 2, memory_mib: 32_768 };
const TRAINIUM2: Accelerator =
    Accelerator::Neuron { name: "Trainium2", core_count: 8, core_version: 3, memory_mib: 98_304 };

const fn it(
    name: &'static str,
    vcpus: u32,
    memory_gib: u64,
    accelerator: Accelerator,
    accelerator_count: u32,
) -> InstanceTypeInfo {
    InstanceTypeInfo { name, vcpus, memory_mib: memory_gib * 1024, accelerator, accelerator_count }
}

pub const TABLE: &[InstanceTypeInfo] = &[
    it("p4d.24xlarge", 96, 1152, gpu("A100", 40_960), 8),
    it("p4de.24xlarge", 96, 1152, gpu("A100", 81_920), 8),
    it("p5.4xlarge", 16, 256, gpu("H100", 81_920), 1),
    it("p5.48xlarge", 192, 2048, gpu("H100", 81_920), 8),
    it("p5e.48xlarge", 192, 2048, gpu("H200", 144_384), 8),
    it("p5en.48xlarge", 192, 2048, gpu("H200", 144_384), 8),
    it("p6-b200.48xlarge", 192, 2048, gpu("B200", 183_359), 8),
    it("p6-b300.48xlarge", 192, 4096, gpu("B300", 275_040), 8),
    // Sold only as UltraServers (see ULTRASERVERS): 4 Blackwell GPUs per Grace-Blackwell node.
    it("p6e-gb200.36xlarge", 144, 960, gpu("B200", 188_416), 4),
    it("trn1.32xlarge", 128, 512, TRAINIUM, 16),
    it("trn2.3xlarge", 12, 128, TRAINIUM2, 1),
    it("trn2.48xlarge", 192, 2048, TRAINIUM2, 16),
    it("trn2u.48xlarge", 192, 2048, TRAINIUM2, 16),
];

/// An EC2 UltraServer type: a fixed number of instances of one type joined by an accelerator
/// interconnect (NVLink / NeuronLink), bought as a unit with `UltraserverType` +
/// `UltraserverCount`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UltraServerInfo {
    pub name: &'static str,
    pub instance_type: &'static str,
    pub instances: u32,
}

/// u-p6e-gb200x72: 72 GPUs = 18 x p6e-gb200.36xlarge; x36 half of it; u-trn2x64: 64 Trainium2
/// chips = 4 x trn2u.48xlarge (see README, "UltraServers").
pub const ULTRASERVERS: &[UltraServerInfo] = &[
    UltraServerInfo { name: "u-p6e-gb200x72", instance_type: "p6e-gb200.36xlarge", instances: 18 },
    UltraServerInfo { name: "u-p6e-gb200x36", instance_type: "p6e-gb200.36xlarge", instances: 9 },
    UltraServerInfo { name: "u-trn2x64", instance_type: "trn2u.48xlarge", instances: 4 },
];

pub fn ultraserver(name: &str) -> Option<&'static UltraServerInfo> {
    ULTRASERVERS.iter().find(|u| u.name == name)
}

pub fn lookup(name: &str) -> Option<&'static InstanceTypeInfo> {
    TABLE.iter().find(|t| t.name == name)
}

pub fn accelerators(name: &str) -> Option<u32> {
    lookup(name).map(|t| t.accelerator_count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_the_reference() {
        for t in [
            "p5.48xlarge",
            "p5e.48xlarge",
            "p5en.48xlarge",
            "p4d.24xlarge",
            "p4de.24xlarge",
            "p6-b200.48xlarge",
            "p6-b300.48xlarge",
        ] {
            assert_eq!(accelerators(t), Some(8), "{t}");
        }
        assert_eq!(accelerators("p5.4xlarge"), Some(1));
        assert_eq!(accelerators("trn1.32xlarge"), Some(16));
        assert_eq!(accelerators("trn2.48xlarge"), Some(16));
        assert_eq!(accelerators("trn2.3xlarge"), Some(1));
        assert_eq!(accelerators("m5.large"), None);
        assert_eq!(accelerators("p6e-gb200.36xlarge"), Some(4));
        assert_eq!(accelerators("trn2u.48xlarge"), Some(16));
        // Every UltraServer names a type of the table, and its accelerators add up to its name.
        for (name, total) in [("u-p6e-gb200x72", 72), ("u-p6e-gb200x36", 36), ("u-trn2x64", 64)] {
            let u = ultraserver(name).unwrap();
            assert_eq!(accelerators(u.instance_type).unwrap() * u.instances, total, "{name}");
        }
    }
}
