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
    it("trn1.32xlarge", 128, 512, TRAINIUM, 16),
    it("trn2.3xlarge", 12, 128, TRAINIUM2, 1),
    it("trn2.48xlarge", 192, 2048, TRAINIUM2, 16),
];

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
    }
}
