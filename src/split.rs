//! AWS's split cost allocation arithmetic for EKS pods (CUR 2.0 reference §3.3).
//!
//! For one parent instance and one hour, AWS divides the instance's amortized cost `C`
//! between the pods that ran on it, per resource (vCPU, GB, accelerator), with fixed weights.
//! The generator uses this to write split rows; ingest uses it to check them.

/// A resource AWS splits an instance by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    Accelerator,
    Vcpu,
    Memory,
}

impl Resource {
    /// The suffix of `line_item_usage_type` on split rows for this resource.
    pub fn usage_type_suffix(self) -> &'static str {
        match self {
            Resource::Accelerator => "EKS-EC2-Accelerator-Hours",
            Resource::Vcpu => "EKS-EC2-vCPU-Hours",
            Resource::Memory => "EKS-EC2-GB-Hours",
        }
    }

    /// The name gpuledger stores (`gpu`, `vcpu`, `memory`).
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Accelerator => "gpu",
            Resource::Vcpu => "vcpu",
            Resource::Memory => "memory",
        }
    }

    /// Recognises a split row's usage type by suffix, whatever its region prefix.
    pub fn from_usage_type(usage_type: &str) -> Option<Resource> {
        [Resource::Accelerator, Resource::Vcpu, Resource::Memory]
            .into_iter()
            .find(|r| usage_type.ends_with(r.usage_type_suffix()))
    }
}

/// Capacity of a parent instance: what AWS divides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capacity {
    pub accelerators: f64,
    pub vcpu: f64,
    pub memory_gib: f64,
}

impl Capacity {
    /// The resources split on this instance, in the order AWS lists them.
    pub fn resources(&self) -> &'static [Resource] {
        if self.accelerators > 0.0 {
            &[Resource::Accelerator, Resource::Vcpu, Resource::Memory]
        } else {
            &[Resource::Vcpu, Resource::Memory]
        }
    }

    pub fn of(&self, resource: Resource) -> f64 {
        match resource {
            Resource::Accelerator => self.accelerators,
            Resource::Vcpu => self.vcpu,
            Resource::Memory => self.memory_gib,
        }
    }

    /// Weight of a resource: 9:1 vCPU:GB, or 9:0.9:0.1 GPU:vCPU:GB on accelerated instances.
    pub fn weight(&self, resource: Resource) -> f64 {
        match (self.accelerators > 0.0, resource) {
            (true, Resource::Accelerator) => 9.0,
            (true, Resource::Vcpu) => 0.9,
            (true, Resource::Memory) => 0.1,
            (false, Resource::Vcpu) => 9.0,
            (false, Resource::Memory) => 1.0,
            (false, Resource::Accelerator) => 0.0,
        }
    }

    /// Cost of one unit-hour of `resource` when the instance-hour costs `cost`.
    pub fn rate(&self, resource: Resource, cost: f64) -> f64 {
        let weighted_capacity: f64 = self.resources().iter().map(|&r| self.weight(r) * self.of(r)).sum();
        self.weight(resource) * cost / weighted_capacity
    }
}

/// One pod's usage of one resource in the hour, in resource-hours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodUsage {
    /// Kubernetes request × hours the pod ran (`split_line_item_reserved_usage`).
    pub reserved: f64,
    /// What it actually used (`split_line_item_actual_usage`).
    pub actual: f64,
}

impl PodUsage {
    /// `split_line_item_split_usage` = max(reserved, actual).
    pub fn split_usage(&self) -> f64 {
        self.reserved.max(self.actual)
    }
}

/// The split of one resource for one pod: ratio, split cost and unused cost.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PodSplit {
    pub split_usage: f64,
    pub ratio: f64,
    pub split_cost: f64,
    pub unused_cost: f64,
}

/// Splits `rate × capacity` of one resource between pods, as AWS does.
///
/// Over-subscription divides by the total allocated instead of the capacity, and unused
/// capacity is charged back to the pods in proportion to their split usage.
pub fn split_resource(capacity: f64, rate: f64, pods: &[PodUsage]) -> Vec<PodSplit> {
    let total_split: f64 = pods.iter().map(PodUsage::split_usage).sum();
    let denominator = capacity.max(total_split);
    let unused_capacity = (capacity - total_split).max(0.0);
    pods.iter()
        .map(|pod| {
            let split_usage = pod.split_usage();
            let ratio = if denominator > 0.0 { split_usage / denominator } else { 0.0 };
            let unused_cost = if unused_capacity > 0.0 && total_split > 0.0 {
                split_usage / total_split * unused_capacity * rate
            } else {
                0.0
            };
            PodSplit { split_usage, ratio, split_cost: ratio * capacity * rate, unused_cost }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(actual: f64, expected: f64, digits: i32) -> bool {
        (actual - expected).abs() < 0.5 * 10f64.powi(-digits)
    }

    fn usage(pairs: &[(f64, f64)]) -> Vec<PodUsage> {
        pairs.iter().map(|&(reserved, actual)| PodUsage { reserved, actual }).collect()
    }

    /// AWS "Example of split cost allocation data": m5.xlarge, 4 vCPU, 16 GB, C = $1.00.
    #[test]
    fn aws_example_one_m5_xlarge() {
        let capacity = Capacity { accelerators: 0.0, vcpu: 4.0, memory_gib: 16.0 };
        // unit = 1 / (9·4 + 1·16) = 1/52
        assert!(close(capacity.rate(Resource::Vcpu, 1.0), 0.173077, 6));
        assert!(close(capacity.rate(Resource::Memory, 1.0), 0.019231, 6));
        let vcpu = split_resource(
            4.0,
            capacity.rate(Resource::Vcpu, 1.0),
            &usage(&[(1.0, 0.1), (1.0, 1.9), (1.0, 0.5), (1.0, 0.5)]),
        );
        let memory = split_resource(
            16.0,
            capacity.rate(Resource::Memory, 1.0),
            &usage(&[(4.0, 3.0), (4.0, 6.0), (2.0, 2.0), (2.0, 2.0)]),
        );
        let expected_ratio_vcpu = [0.204082, 0.387755, 0.204082, 0.204082];
        let expected_ratio_gb = [0.25, 0.375, 0.125, 0.125];
        let expected_split_vcpu = [0.141287, 0.268446, 0.141287, 0.141287];
        let expected_split_gb = [0.076923, 0.115385, 0.038462, 0.038462];
        let expected_unused_gb = [0.010989, 0.016484, 0.005495, 0.005495];
        let expected_total = [0.2292, 0.4003, 0.1852, 0.1852];
        for pod in 0..4 {
            assert!(close(vcpu[pod].ratio, expected_ratio_vcpu[pod], 6), "pod{pod} vcpu ratio");
            assert!(close(memory[pod].ratio, expected_ratio_gb[pod], 6), "pod{pod} gb ratio");
            assert!(close(vcpu[pod].split_cost, expected_split_vcpu[pod], 6));
            assert!(close(memory[pod].split_cost, expected_split_gb[pod], 6));
            // vCPU is over-subscribed (4.9 > 4): no unused vCPU cost.
            assert_eq!(vcpu[pod].unused_cost, 0.0);
            assert!(close(memory[pod].unused_cost, expected_unused_gb[pod], 6));
            let total = vcpu[pod].split_cost
                + memory[pod].split_cost
                + vcpu[pod].unused_cost
                + memory[pod].unused_cost;
            assert!(close(total, expected_total[pod], 4), "pod{pod} total {total}");
        }
        let sum: f64 = vcpu.iter().chain(&memory).map(|s| s.split_cost + s.unused_cost).sum();
        assert!(close(sum, 1.0, 9), "Σ split + unused = C, got {sum}");
    }

    /// AWS "Example … accelerated instances": p3.16xlarge, 8 GPU, 64 vCPU, 488 GB, C = $10.
    #[test]
    fn aws_example_two_p3_16xlarge() {
        let capacity = Capacity { accelerators: 8.0, vcpu: 64.0, memory_gib: 488.0 };
        // unit = 10 / (9·8 + 0.9·64 + 0.1·488) = 10/178.4
        assert!(close(capacity.rate(Resource::Accelerator, 10.0), 0.504484, 6));
        assert!(close(capacity.rate(Resource::Vcpu, 10.0), 0.050448, 6));
        assert!(close(capacity.rate(Resource::Memory, 10.0), 0.005605, 6));
        let gpu = split_resource(
            8.0,
            capacity.rate(Resource::Accelerator, 10.0),
            &usage(&[(1.0, 1.0), (2.0, 3.0), (2.0, 1.0), (2.0, 2.0)]),
        );
        let vcpu = split_resource(
            64.0,
            capacity.rate(Resource::Vcpu, 10.0),
            &usage(&[(16.0, 4.0), (16.0, 18.0), (16.0, 4.0), (16.0, 4.0)]),
        );
        let memory = split_resource(
            488.0,
            capacity.rate(Resource::Memory, 10.0),
            &usage(&[(100.0, 60.0), (100.0, 140.0), (100.0, 60.0), (100.0, 40.0)]),
        );
        let ratios = [
            [0.125, 0.242424, 0.204918],
            [0.375, 0.272727, 0.286885],
            [0.25, 0.242424, 0.204918],
            [0.25, 0.242424, 0.204918],
        ];
        let split_totals = [1.8477, 3.1788, 2.3522, 2.3522];
        let unused_totals = [0.0611, 0.0856, 0.0611, 0.0611];
        for pod in 0..4 {
            assert!(close(gpu[pod].ratio, ratios[pod][0], 6));
            assert!(close(vcpu[pod].ratio, ratios[pod][1], 6));
            assert!(close(memory[pod].ratio, ratios[pod][2], 6));
            let split = gpu[pod].split_cost + vcpu[pod].split_cost + memory[pod].split_cost;
            let unused = gpu[pod].unused_cost + vcpu[pod].unused_cost + memory[pod].unused_cost;
            assert!(close(split, split_totals[pod], 4), "pod{pod} split {split}");
            assert!(close(unused, unused_totals[pod], 4), "pod{pod} unused {unused}");
        }
        // 48 GB unused at 0.005605/GB-hour = $0.269, shared 100:140:100:100.
        let unused_memory: f64 = memory.iter().map(|s| s.unused_cost).sum();
        assert!(close(unused_memory, 0.269, 3));
        let sum: f64 = gpu.iter().chain(&vcpu).chain(&memory).map(|s| s.split_cost + s.unused_cost).sum();
        assert!(close(sum, 10.0, 9), "Σ split + unused = C, got {sum}");
    }

    #[test]
    fn usage_type_suffixes_match_any_region_prefix() {
        assert_eq!(Resource::from_usage_type("USW2-EKS-EC2-Accelerator-Hours"), Some(Resource::Accelerator));
        assert_eq!(Resource::from_usage_type("EKS-EC2-vCPU-Hours"), Some(Resource::Vcpu));
        assert_eq!(Resource::from_usage_type("EU-EKS-EC2-GB-Hours"), Some(Resource::Memory));
        assert_eq!(Resource::from_usage_type("BoxUsage:p5.48xlarge"), None);
    }
}
