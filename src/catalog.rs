//! Built-in table of EC2 instance types gpuledger knows: capacity, GPU model and
//! us-east-1 Linux on-demand prices. The generator prices its fleet from it; the engine
//! will use it for right-sizing.

/// One EC2 instance type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstanceType {
    pub name: &'static str,
    pub family: &'static str,
    pub vcpu: u32,
    pub memory_gib: u32,
    pub gpus: u32,
    /// Short GPU model as dashboards show it (`A100`), empty for CPU-only types.
    pub gpu_model: &'static str,
    /// The model name dcgm-exporter reports in `modelName`.
    pub gpu_model_name: &'static str,
    /// Framebuffer per GPU in MiB, as dcgm-exporter reports FB_USED + FB_FREE.
    pub gpu_memory_mib: u32,
    /// Public on-demand price per hour, USD, exact to the cent fraction AWS publishes.
    pub on_demand_hourly: f64,
    pub physical_processor: &'static str,
}

macro_rules! instance {
    ($name:literal, $family:literal, $vcpu:literal, $mem:literal, $gpus:literal, $model:literal,
     $model_name:literal, $fb:literal, $price:literal, $cpu:literal) => {
        InstanceType {
            name: $name,
            family: $family,
            vcpu: $vcpu,
            memory_gib: $mem,
            gpus: $gpus,
            gpu_model: $model,
            gpu_model_name: $model_name,
            gpu_memory_mib: $fb,
            on_demand_hourly: $price,
            physical_processor: $cpu,
        }
    };
}

/// Instance types with public specs. Prices: us-east-1 Linux on-demand.
pub const INSTANCE_TYPES: &[InstanceType] = &[
    instance!(
        "p5.48xlarge",
        "p5",
        192,
        2048,
        8,
        "H100",
        "NVIDIA H100 80GB HBM3",
        81559,
        98.32,
        "AMD EPYC 7R13 Processor"
    ),
    instance!(
        "p4de.24xlarge",
        "p4de",
        96,
        1152,
        8,
        "A100-80GB",
        "NVIDIA A100-SXM4-80GB",
        81920,
        40.9657,
        "Intel Xeon Platinum 8275L"
    ),
    instance!(
        "p4d.24xlarge",
        "p4d",
        96,
        1152,
        8,
        "A100",
        "NVIDIA A100-SXM4-40GB",
        40960,
        32.7726,
        "Intel Xeon Platinum 8275L"
    ),
    instance!(
        "g6e.12xlarge",
        "g6e",
        48,
        384,
        4,
        "L40S",
        "NVIDIA L40S",
        46068,
        10.4926,
        "AMD EPYC 7R13 Processor"
    ),
    instance!("g6.12xlarge", "g6", 48, 192, 4, "L4", "NVIDIA L4", 23034, 4.6016, "AMD EPYC 7R13 Processor"),
    instance!("g6.xlarge", "g6", 4, 16, 1, "L4", "NVIDIA L4", 23034, 0.8048, "AMD EPYC 7R13 Processor"),
    instance!("g5.48xlarge", "g5", 192, 768, 8, "A10G", "NVIDIA A10G", 23028, 16.288, "AMD EPYC 7R32"),
    instance!("g5.12xlarge", "g5", 48, 192, 4, "A10G", "NVIDIA A10G", 23028, 5.672, "AMD EPYC 7R32"),
    instance!("g5.xlarge", "g5", 4, 16, 1, "A10G", "NVIDIA A10G", 23028, 1.006, "AMD EPYC 7R32"),
    instance!("g4dn.xlarge", "g4dn", 4, 16, 1, "T4", "Tesla T4", 15360, 0.526, "Intel Xeon Family"),
    instance!("m6i.8xlarge", "m6i", 32, 128, 0, "", "", 0, 1.536, "Intel Xeon 8375C (Ice Lake)"),
    instance!("m5.4xlarge", "m5", 16, 64, 0, "", "", 0, 0.768, "Intel Xeon Platinum 8175"),
    instance!("m5.xlarge", "m5", 4, 16, 0, "", "", 0, 0.192, "Intel Xeon Platinum 8175"),
    instance!("c5.2xlarge", "c5", 8, 16, 0, "", "", 0, 0.34, "Intel Xeon Platinum 8124M"),
    instance!("r5.2xlarge", "r5", 8, 64, 0, "", "", 0, 0.504, "Intel Xeon Platinum 8175"),
];

/// Looks an instance type up by name (`p4d.24xlarge`).
pub fn instance_type(name: &str) -> Option<&'static InstanceType> {
    INSTANCE_TYPES.iter().find(|t| t.name == name)
}

/// The GPU count AWS reports for an instance type, 0 when unknown or CPU-only.
pub fn gpu_count(name: &str) -> u32 {
    instance_type(name).map_or(0, |t| t.gpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_counts_match_the_public_specs() {
        assert_eq!(gpu_count("p4d.24xlarge"), 8);
        assert_eq!(gpu_count("p5.48xlarge"), 8);
        assert_eq!(gpu_count("g5.12xlarge"), 4);
        assert_eq!(gpu_count("g6.xlarge"), 1);
        assert_eq!(gpu_count("m5.4xlarge"), 0);
        assert_eq!(gpu_count("x9.unknown"), 0);
    }
}
