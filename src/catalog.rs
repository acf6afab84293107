//! Built-in tables of the instance types gpuledger knows: EC2's (capacity, GPU model and
//! us-east-1 Linux on-demand prices; the generator prices its fleet from it, the engine
//! right-sizes with it), and the GPU types of Azure, Google Cloud and Oracle Cloud, with how
//! each provider's bill names a GPU instance's lines ([`gpu_charge`]).

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

/// Looks an instance type up by name (`p4d.24xlarge`): the built-in ones, then the operator's
/// ([`load_operator_catalog`]).
pub fn instance_type(name: &str) -> Option<&'static InstanceType> {
    INSTANCE_TYPES
        .iter()
        .chain(OPERATOR_INSTANCE_TYPES.get().map_or(&[][..], Vec::as_slice))
        .find(|t| t.name == name)
}

/// The GPU count AWS reports for an instance type, 0 when unknown or CPU-only.
pub fn gpu_count(name: &str) -> u32 {
    instance_type(name).map_or(0, |t| t.gpus)
}

/// A GPU virtual machine or bare-metal shape of another cloud, as its bill names it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CloudGpuType {
    /// `azure`, `gcp` or `oci`.
    pub provider: &'static str,
    /// The provider's own name: Azure's VM size (`Standard_NC24ads_A100_v4`), Google's
    /// machine type (`a2-highgpu-1g`), Oracle's shape (`BM.GPU.A10.4`).
    pub name: &'static str,
    pub vcpu: u32,
    pub memory_gib: u32,
    pub gpus: u32,
    /// Short GPU model, as for EC2 types (`A100-80GB`).
    pub gpu_model: &'static str,
    /// Public on-demand price per hour in USD, as the provider lists it (Azure: West Europe
    /// Linux; Google: us-central1; Oracle: every region).
    pub on_demand_hourly: f64,
}

macro_rules! cloud_gpu {
    ($provider:literal, $name:literal, $vcpu:literal, $mem:literal, $gpus:literal, $model:literal, $price:literal) => {
        CloudGpuType {
            provider: $provider,
            name: $name,
            vcpu: $vcpu,
            memory_gib: $mem,
            gpus: $gpus,
            gpu_model: $model,
            on_demand_hourly: $price,
        }
    };
}

/// GPU types of Azure, Google Cloud and Oracle Cloud with public specs.
pub const CLOUD_GPU_TYPES: &[CloudGpuType] = &[
    cloud_gpu!("azure", "Standard_NC24ads_A100_v4", 24, 220, 1, "A100-80GB", 3.673),
    cloud_gpu!("azure", "Standard_NC48ads_A100_v4", 48, 440, 2, "A100-80GB", 7.346),
    cloud_gpu!("azure", "Standard_NC96ads_A100_v4", 96, 880, 4, "A100-80GB", 14.692),
    cloud_gpu!("azure", "Standard_ND96asr_v4", 96, 900, 8, "A100", 27.197),
    cloud_gpu!("azure", "Standard_ND96amsr_A100_v4", 96, 1900, 8, "A100-80GB", 32.77),
    cloud_gpu!("azure", "Standard_ND96isr_H100_v5", 96, 1900, 8, "H100", 98.32),
    cloud_gpu!("azure", "Standard_NC40ads_H100_v5", 40, 320, 1, "H100", 6.98),
    cloud_gpu!("azure", "Standard_NC4as_T4_v3", 4, 28, 1, "T4", 0.526),
    cloud_gpu!("azure", "Standard_NC64as_T4_v3", 64, 440, 4, "T4", 4.352),
    cloud_gpu!("gcp", "a2-highgpu-1g", 12, 85, 1, "A100", 3.673),
    cloud_gpu!("gcp", "a2-highgpu-8g", 96, 680, 8, "A100", 29.387),
    cloud_gpu!("gcp", "a2-ultragpu-1g", 12, 170, 1, "A100-80GB", 5.069),
    cloud_gpu!("gcp", "a2-ultragpu-8g", 96, 1360, 8, "A100-80GB", 40.55),
    cloud_gpu!("gcp", "a3-highgpu-8g", 208, 1872, 8, "H100", 88.49),
    cloud_gpu!("gcp", "g2-standard-4", 4, 16, 1, "L4", 0.707),
    cloud_gpu!("gcp", "g2-standard-8", 8, 32, 1, "L4", 0.854),
    cloud_gpu!("gcp", "g2-standard-48", 48, 192, 4, "L4", 4.0),
    cloud_gpu!("oci", "VM.GPU.A10.1", 30, 240, 1, "A10", 2.0),
    cloud_gpu!("oci", "BM.GPU.A10.4", 128, 1024, 4, "A10", 8.0),
    cloud_gpu!("oci", "BM.GPU4.8", 128, 2048, 8, "A100", 24.4),
    cloud_gpu!("oci", "BM.GPU.A100-v2.8", 256, 2048, 8, "A100-80GB", 32.0),
    cloud_gpu!("oci", "BM.GPU.H100.8", 224, 2048, 8, "H100", 80.0),
];

/// The environment variable naming the operator's own GPU machines (see [`load_operator_catalog`]).
pub const OPERATOR_CATALOG_ENV: &str = "GPULEDGER_GPU_CATALOG";

static OPERATOR_TYPES: std::sync::OnceLock<Vec<CloudGpuType>> = std::sync::OnceLock::new();

/// The operator's EC2 instance types (its catalog's `aws` rows), as [`InstanceType`]s.
static OPERATOR_INSTANCE_TYPES: std::sync::OnceLock<Vec<InstanceType>> = std::sync::OnceLock::new();

/// Reads the GPU machines an operator adds without a rebuild: the CSV file
/// `GPULEDGER_GPU_CATALOG` names, with the header `provider,name,gpus,gpu_model` (`aws`,
/// `azure`, `gcp` or `oci`; the instance type, size, machine type, shape or SKU id as the bill
/// writes it; GPUs per machine; the short model), and optionally `vcpu`, `memory_gib`,
/// `on_demand_hourly`. Read once, before a command runs; a bad file is refused with its row and
/// column. Returns how many were added.
pub fn load_operator_catalog() -> Result<usize, String> {
    let Some(path) = std::env::var_os(OPERATOR_CATALOG_ENV) else { return Ok(0) };
    let label = std::path::Path::new(&path).display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{OPERATOR_CATALOG_ENV} {label}: {e}"))?;
    let types = parse_operator_catalog(&label, &text)?;
    let added = types.len();
    let (ec2, others): (Vec<CloudGpuType>, Vec<CloudGpuType>) =
        types.into_iter().partition(|t| t.provider == "aws");
    let ec2 = ec2
        .into_iter()
        .map(|t| InstanceType {
            name: t.name,
            family: t.name.split('.').next().unwrap_or(t.name),
            vcpu: t.vcpu,
            memory_gib: t.memory_gib,
            gpus: t.gpus,
            gpu_model: t.gpu_model,
            gpu_model_name: "",
            gpu_memory_mib: 0,
            on_demand_hourly: t.on_demand_hourly,
            physical_processor: "",
        })
        .collect();
    let _ = OPERATOR_INSTANCE_TYPES.set(ec2);
    let _ = OPERATOR_TYPES.set(others);
    Ok(added)
}

/// The operator's machines from a catalog file's text (`label` names it in errors).
pub fn parse_operator_catalog(label: &str, text: &str) -> Result<Vec<CloudGpuType>, String> {
    let mut lines = text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty());
    let header: Vec<String> = match lines.next() {
        Some((_, line)) => line.split(',').map(|c| c.trim().to_ascii_lowercase()).collect(),
        None => return Ok(Vec::new()),
    };
    let at = |name: &str| header.iter().position(|c| c == name);
    let [provider, name, gpus, model] = ["provider", "name", "gpus", "gpu_model"]
        .map(|column| at(column).ok_or_else(|| format!("{label}: the header has no column {column}")));
    let (provider, name, gpus, model) = (provider?, name?, gpus?, model?);
    let leak = |text: &str| -> &'static str { Box::leak(text.trim().to_string().into_boxed_str()) };
    let mut types = Vec::new();
    for (index, line) in lines {
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let row = index + 1;
        let cell = |i: usize, column: &str| {
            cells
                .get(i)
                .copied()
                .filter(|c| !c.is_empty())
                .ok_or_else(|| format!("{label}: row {row}, column {column}: empty"))
        };
        let number = |column: &str| -> Result<f64, String> {
            match at(column).and_then(|i| cells.get(i)).filter(|c| !c.is_empty()) {
                None => Ok(0.0),
                Some(c) => c.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0).ok_or_else(|| {
                    format!("{label}: row {row}, column {column}: {c:?} is not a number of 0 or more")
                }),
            }
        };
        let id = cell(provider, "provider")?.to_ascii_lowercase();
        let provider = match id.as_str() {
            "aws" => "aws",
            "azure" => "azure",
            "gcp" => "gcp",
            "oci" => "oci",
            other => {
                return Err(format!(
                    "{label}: row {row}, column provider: {other:?} is not aws, azure, gcp or oci"
                ));
            }
        };
        let count = cell(gpus, "gpus")?;
        let count: u32 = count.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
            format!("{label}: row {row}, column gpus: {count:?} is not a whole number above 0")
        })?;
        types.push(CloudGpuType {
            provider,
            name: leak(cell(name, "name")?),
            vcpu: number("vcpu")? as u32,
            memory_gib: number("memory_gib")? as u32,
            gpus: count,
            gpu_model: leak(cell(model, "gpu_model")?),
            on_demand_hourly: number("on_demand_hourly")?,
        });
    }
    Ok(types)
}

/// The built-in GPU types of the other clouds, then the operator's.
fn cloud_types() -> impl Iterator<Item = &'static CloudGpuType> {
    CLOUD_GPU_TYPES.iter().chain(OPERATOR_TYPES.get().map_or(&[][..], Vec::as_slice))
}

/// What one bill line says about GPUs: the model of the GPU instance it belongs to and the
/// GPU-hours it stands for (0 for a GPU instance's vCPU or memory line).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuCharge {
    pub gpu_model: &'static str,
    pub gpu_hours: f64,
}

/// The GPU instance a bill line is for, recognised as each provider writes it, with its
/// GPU-hours: `instance` is the instance type a line names (EC2's from its usage type,
/// Azure's VM size, a shape), `meter` the SKU's description (`NC24ads A100 v4 Spot`,
/// `Nvidia Tesla A100 GPU running in Americas`, `GPU Standard - A10`), `hours` the line's
/// consumed quantity (instance-hours, or GPU-hours where the provider bills GPUs apart).
pub fn gpu_charge(provider: &str, instance: &str, meter: &str, unit: &str, hours: f64) -> Option<GpuCharge> {
    let whole =
        |gpus: u32, gpu_model: &'static str| GpuCharge { gpu_model, gpu_hours: f64::from(gpus) * hours };
    match provider {
        "aws" => instance_type(instance).filter(|t| t.gpus > 0).map(|t| whole(t.gpus, t.gpu_model)),
        "azure" => [instance, meter]
            .into_iter()
            .find_map(|name| cloud_gpu_type("azure", name))
            .map(|t| whole(t.gpus, t.gpu_model)),
        // A line of one of a VM's SKUs (its cores, memory or GPUs) counts as that SKU, even
        // where the row names its machine type too: only the GPUs' line holds GPU-hours.
        "gcp" => gcp_sku(meter, hours)
            .or_else(|| cloud_gpu_type("gcp", instance).map(|t| whole(t.gpus, t.gpu_model))),
        "oci" => {
            // Oracle bills a GPU shape by the GPU-hour (`GPU Per Hour`): the quantity is
            // GPU-hours already, wherever the shape is named.
            let per_gpu = unit.to_ascii_lowercase().contains("gpu");
            match cloud_gpu_type("oci", instance) {
                Some(t) if per_gpu => Some(GpuCharge { gpu_model: t.gpu_model, gpu_hours: hours }),
                Some(t) => Some(whole(t.gpus, t.gpu_model)),
                None => gpu_model_in(meter)
                    .filter(|_| meter.to_ascii_lowercase().contains("gpu"))
                    .map(|gpu_model| GpuCharge { gpu_model, gpu_hours: if per_gpu { hours } else { 0.0 } }),
            }
        }
        _ => None,
    }
}

/// A GPU type of another cloud by the name its bill writes: Azure's VM size with or without
/// `Standard_`, with spaces for underscores and a `Spot` or `Low Priority` meter suffix.
pub fn cloud_gpu_type(provider: &str, name: &str) -> Option<&'static CloudGpuType> {
    let canonical = |text: &str| {
        let lower = text.trim().to_ascii_lowercase().replace(' ', "_");
        let lower = lower.strip_prefix("standard_").unwrap_or(&lower).to_string();
        let lower = lower.strip_suffix("_low_priority").unwrap_or(&lower).to_string();
        lower.strip_suffix("_spot").unwrap_or(&lower).to_string()
    };
    if name.trim().is_empty() {
        return None;
    }
    let wanted = canonical(name);
    cloud_types().find(|t| t.provider == provider && canonical(t.name) == wanted)
}

/// A GPU type of another cloud named anywhere in a text (a charge's description, a meter):
/// the whole text as [`cloud_gpu_type`] reads a name, else one to three of its words joined
/// (`Virtual Machines NC24ads A100 v4 Spot - EU West` names `Standard_NC24ads_A100_v4`).
pub fn cloud_gpu_type_in(provider: &str, text: &str) -> Option<&'static CloudGpuType> {
    if let Some(known) = cloud_gpu_type(provider, text) {
        return Some(known);
    }
    let words = words_of(text);
    (0..words.len()).find_map(|start| {
        (1..=3).filter(|n| start + n <= words.len()).find_map(|n| {
            let name = words[start..start + n].join("_");
            cloud_gpu_type(provider, &name)
        })
    })
}

/// A text's words: split at spaces and at the punctuation that surrounds a name in a
/// description or a JSON detail (`,;:"'()[]{}=/`), a trailing `.` taken off.
fn words_of(text: &str) -> Vec<&str> {
    text.split(|c: char| c.is_whitespace() || ",;:\"'()[]{}=/".contains(c))
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether the catalog knows a machine by the name a bill line's instance type holds: an EC2
/// instance type, or another cloud's GPU type (the operator's among them).
pub fn is_known_machine(provider: &str, name: &str) -> bool {
    match provider {
        "aws" => instance_type(name).is_some(),
        _ => cloud_gpu_type(provider, name).is_some(),
    }
}

/// Whether a bill's text names what looks like a GPU machine, known to the catalog or not: a
/// word `GPU`, an EC2 type of the `p`, `g`, `trn`, `inf` or `dl` families, an Azure N-series
/// size (`NC`, `ND`, `NV`, `NG`), a Google accelerator-optimized type (`a2-`, `a3-`, `a4-`,
/// `g2-`, `g4-`), an Oracle `GPU` shape.
pub fn looks_like_gpu_machine(provider: &str, text: &str) -> bool {
    let family = |word: &str, prefixes: &[&str]| {
        prefixes.iter().any(|p| {
            word.len() > p.len()
                && word[..p.len()].eq_ignore_ascii_case(p)
                && word.as_bytes()[p.len()].is_ascii_digit()
        })
    };
    words_of(text).into_iter().any(|word| {
        let lower = word.to_ascii_lowercase();
        lower == "gpu"
            || lower.contains(".gpu")
            || match provider {
                "aws" => family(&lower, &["p", "g", "trn", "inf", "dl"]) && lower.contains('.'),
                "azure" => {
                    family(lower.strip_prefix("standard_").unwrap_or(&lower), &["nc", "nd", "nv", "ng"])
                }
                "gcp" => ["a2-", "a3-", "a4-", "g2-", "g4-"].iter().any(|p| lower.starts_with(p)),
                _ => false,
            }
    })
}

/// Google bills an accelerator-optimized VM in three SKUs: its cores, its memory (`A2
/// Instance Core running in Americas`) and its GPUs (`Nvidia Tesla A100 GPU running in
/// Americas`, by the GPU-hour).
fn gcp_sku(meter: &str, hours: f64) -> Option<GpuCharge> {
    let lower = meter.to_ascii_lowercase();
    if lower.contains("gpu") {
        return gpu_model_in(meter).map(|gpu_model| GpuCharge { gpu_model, gpu_hours: hours });
    }
    let family = lower.split_whitespace().next()?;
    let gpu_model = match family {
        "a2" if lower.contains("ultra") => "A100-80GB",
        "a2" => "A100",
        "a3" => "H100",
        "g2" => "L4",
        _ => return None,
    };
    lower.contains("instance").then_some(GpuCharge { gpu_model, gpu_hours: 0.0 })
}

/// The GPU model a SKU's description names (`A100 80GB`, `H100`, `L4`, `A10`, `T4`).
fn gpu_model_in(text: &str) -> Option<&'static str> {
    let upper = text.to_ascii_uppercase();
    let words: Vec<&str> = upper.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    let has = |w: &str| words.contains(&w);
    if has("H100") {
        Some("H100")
    } else if has("A100") && upper.contains("80GB") {
        Some("A100-80GB")
    } else if has("A100") {
        Some("A100")
    } else if has("L40S") {
        Some("L40S")
    } else if has("L4") {
        Some("L4")
    } else if has("A10") || has("A10G") {
        Some("A10")
    } else if has("T4") {
        Some("T4")
    } else if has("V100") {
        Some("V100")
    } else {
        None
    }
}

/// FOCUS's service category of an AWS product code (`line_item_product_code`), as AWS's FOCUS
/// export writes it for the services the generator bills; `Other` for the rest.
pub fn aws_service_category(product_code: &str) -> &'static str {
    match product_code {
        "AmazonEC2" | "AmazonEKS" | "ComputeSavingsPlans" => "Compute",
        "AmazonS3" | "AmazonEFS" => "Storage",
        "AWSDataTransfer" | "AmazonVPC" | "AmazonCloudFront" => "Networking",
        _ => "Other",
    }
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

    #[test]
    fn gpu_lines_are_recognised_as_each_provider_bills_them() {
        let hours = |provider, instance, meter, unit, q| gpu_charge(provider, instance, meter, unit, q);
        // EC2: the instance type from the usage type, 8 GPUs an hour.
        assert_eq!(
            hours("aws", "p4d.24xlarge", "", "Hrs", 2.0),
            Some(GpuCharge { gpu_model: "A100", gpu_hours: 16.0 })
        );
        assert_eq!(hours("aws", "m5.xlarge", "", "Hrs", 2.0), None);
        // Azure: the VM size, or the meter with its Spot suffix; 24 hours of a day's row.
        let a100 = Some(GpuCharge { gpu_model: "A100-80GB", gpu_hours: 24.0 });
        assert_eq!(hours("azure", "Standard_NC24ads_A100_v4", "", "1 Hour", 24.0), a100);
        assert_eq!(hours("azure", "", "NC24ads A100 v4 Spot", "1 Hour", 24.0), a100);
        assert_eq!(hours("azure", "", "ND96isr H100 v5", "1 Hour", 3.0).unwrap().gpu_hours, 24.0);
        assert_eq!(hours("azure", "", "D8s v5", "1 Hour", 24.0), None);
        // Google: GPUs are their own SKU by the GPU-hour; the cores and memory of an A2 are
        // the GPU instance's cost with no GPU-hours of their own.
        assert_eq!(
            hours("gcp", "", "Nvidia Tesla A100 GPU running in Americas", "hour", 5.0),
            Some(GpuCharge { gpu_model: "A100", gpu_hours: 5.0 })
        );
        assert_eq!(
            hours("gcp", "", "G2 Instance Ram running in Americas", "gibibyte hour", 32.0),
            Some(GpuCharge { gpu_model: "L4", gpu_hours: 0.0 })
        );
        assert_eq!(hours("gcp", "", "E2 Instance Core running in Americas", "hour", 4.0), None);
        assert_eq!(hours("gcp", "a3-highgpu-8g", "", "hour", 1.0).unwrap().gpu_hours, 8.0);
        // Oracle: a GPU shape billed per GPU-hour, or named by its shape.
        assert_eq!(
            hours("oci", "", "GPU Standard - A10", "GPU Per Hour", 4.0),
            Some(GpuCharge { gpu_model: "A10", gpu_hours: 4.0 })
        );
        assert_eq!(hours("oci", "BM.GPU.H100.8", "", "", 1.0).unwrap().gpu_hours, 8.0);
        // A shape named beside a per-GPU-hour meter: 4 GPU-hours are 4, not 4 × 4.
        assert_eq!(
            hours("oci", "BM.GPU.A10.4", "GPU Standard - A10", "GPU Per Hour", 4.0),
            Some(GpuCharge { gpu_model: "A10", gpu_hours: 4.0 })
        );
        // Google's core SKU of an A2 named by its machine type too: no GPU-hours of its own.
        assert_eq!(
            hours("gcp", "a2-highgpu-1g", "A2 Instance Core running in Americas", "hour", 12.0),
            Some(GpuCharge { gpu_model: "A100", gpu_hours: 0.0 })
        );
        assert_eq!(hours("oci", "", "Standard - E3 - Memory", "GB Hours", 8.0), None);
    }

    #[test]
    fn an_operators_catalog_file_is_read_and_a_bad_one_named_by_row_and_column() {
        let types = parse_operator_catalog(
            "gpus.csv",
            "provider,name,gpus,gpu_model,on_demand_hourly\nazure,Standard_ND40rs_v2,8,V100,22.03\n\ngcp,a2-megagpu-16g,16,A100,\n",
        )
        .unwrap();
        let names: Vec<(&str, &str, u32, &str, f64)> =
            types.iter().map(|t| (t.provider, t.name, t.gpus, t.gpu_model, t.on_demand_hourly)).collect();
        assert_eq!(
            names,
            [("azure", "Standard_ND40rs_v2", 8, "V100", 22.03), ("gcp", "a2-megagpu-16g", 16, "A100", 0.0)]
        );
        let bad = |text: &str| parse_operator_catalog("gpus.csv", text).unwrap_err();
        assert_eq!(bad("provider,name,gpus\n"), "gpus.csv: the header has no column gpu_model");
        assert_eq!(
            bad("provider,name,gpus,gpu_model\nazure,ND40rs v2,eight,V100\n"),
            "gpus.csv: row 2, column gpus: \"eight\" is not a whole number above 0"
        );
        assert!(
            bad("provider,name,gpus,gpu_model\nibm,gx3-24x120x1l4,1,L4\n")
                .starts_with("gpus.csv: row 2, column provider: \"ibm\" is not aws")
        );
        assert_eq!(
            bad("provider,name,gpus,gpu_model\nazure,,1,V100\n"),
            "gpus.csv: row 2, column name: empty"
        );
    }

    #[test]
    fn a_gpu_machine_is_found_in_free_text_and_an_unknown_one_still_looks_like_a_gpu() {
        let name = |provider, text| cloud_gpu_type_in(provider, text).map(|t| t.name);
        assert_eq!(
            name("azure", "Virtual Machines NC24ads A100 v4 Spot - EU West"),
            Some("Standard_NC24ads_A100_v4")
        );
        assert_eq!(
            name("azure", r#"{"VMSize": "Standard_ND96isr_H100_v5"}"#),
            Some("Standard_ND96isr_H100_v5")
        );
        assert_eq!(name("gcp", "Commitment v1: a3-highgpu-8g in us-central1"), Some("a3-highgpu-8g"));
        assert_eq!(name("oci", "Compute - BM.GPU.A10.4."), Some("BM.GPU.A10.4"));
        assert_eq!(name("azure", "D8s v5"), None);
        // Not in the catalog, but a GPU machine by its name: listed, never counted as CPU.
        for (provider, text) in [
            ("azure", "ND40rs v2"),
            ("azure", "Standard_NV36ads_A10_v5"),
            ("gcp", "a2-megagpu-16g"),
            ("gcp", "Nvidia Tesla P100 GPU running in Americas"),
            ("oci", "BM.GPU.B200.8"),
            ("aws", "p3.2xlarge"),
        ] {
            assert!(looks_like_gpu_machine(provider, text), "{provider}: {text}");
        }
        for (provider, text) in [
            ("azure", "D8s v5"),
            ("gcp", "e2-standard-4"),
            ("aws", "m5.xlarge"),
            ("oci", "VM.Standard.E4.Flex"),
        ] {
            assert!(!looks_like_gpu_machine(provider, text), "{provider}: {text}");
        }
    }
}
