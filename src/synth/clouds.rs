//! The agency's other clouds, as their FOCUS exports bill them: AKS on Azure (billed in EUR,
//! an Azure Cost Management export), GKE on Google Cloud (the FOCUS table exported to
//! Parquet files) and OKE on Oracle Cloud (its daily FOCUS reports). AWS stays the primary
//! (the CUR world); these are the overflow capacity an agency buys when a GPU type is sold
//! out at home.
//!
//! Each provider writes its bill as it does in life:
//!
//! - **Azure** rows are daily per VM (`ConsumedQuantity` the hours it ran that day). The
//!   A100 pool runs on Spot (`Dynamic`) and loses nodes to evictions; the H100 node is
//!   covered by a one-instance reservation bought monthly (`Purchase` billed on the 1st,
//!   effective 0), its hours `Committed`/`Used` (billed 0, effective at the reservation's
//!   rate), and the hours it did not run `Unused`. Two export runs per month: a month-to-date
//!   run on the 15th and the month's final run, which replaces it.
//! - **Google** bills an accelerator-optimized VM in three SKUs (cores, memory, GPUs by the
//!   GPU-hour), hourly, and GKE cost allocation splits each node-hour among the namespaces
//!   that requested it (`k8s-namespace`, the rest `kube:unallocated`). The A2 pool is Spot;
//!   the G2 pool is covered by a committed use discount for two nodes, a third node on
//!   demand in working hours.
//! - **Oracle** bills its GPU shape by the GPU-hour, hourly, in one gzip CSV per day.
//!
//! Where Azure's export names a VM's size differs between its layouts ([`MachineColumn`]):
//! the 1.2 export's `SkuMeter` by default, or only in `SkuPriceDetails`, `x_SkuDetails`,
//! `x_SkuMeterName`, `x_SkuDescription` or an opaque `SkuId`, `SkuMeter` and
//! `ChargeDescription` then saying no more than "Virtual Machines".
//!
//! The truth is summed in integer nano-units of each bill's currency from the same values
//! written, so a reader must meet it exactly.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::rng::Rng;
use super::{GenerateError, io_error};
use crate::catalog::cloud_gpu_type;
use crate::period::Period;
use crate::sources::focus_file::{write_csv_gz, write_parquet};

/// A provider of the generated world beside AWS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    Aws,
    Azure,
    Gcp,
    Oci,
}

impl Provider {
    pub const ALL: [Provider; 4] = [Provider::Aws, Provider::Azure, Provider::Gcp, Provider::Oci];

    pub fn id(self) -> &'static str {
        match self {
            Provider::Aws => "aws",
            Provider::Azure => "azure",
            Provider::Gcp => "gcp",
            Provider::Oci => "oci",
        }
    }

    /// The folder under `--out` its export is written to (AWS's is the CUR's prefix).
    pub fn folder(self) -> &'static str {
        self.id()
    }
}

/// The column of Azure's export that names a VM's size (the rest of its row says only
/// `Virtual Machines`), `--azure-machine-column` of `generate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum MachineColumn {
    /// `SkuMeter` (`NC24ads A100 v4 Spot`) and `ChargeDescription`, as the 1.2 export.
    #[default]
    SkuMeter,
    /// FOCUS 1.1's `SkuPriceDetails`: `{"CoreCount":24,"InstanceType":"Standard_NC24ads_A100_v4"}`.
    SkuPriceDetails,
    /// Azure's `x_SkuDetails`: `{"ServiceType":"Standard_NC24ads_A100_v4","VCPUs":24}`.
    XSkuDetails,
    /// Azure's `x_SkuMeterName`: the meter's name.
    XSkuMeterName,
    /// Azure's `x_SkuDescription`: `Virtual Machines NC24ads A100 v4 Spot - West Europe`.
    XSkuDescription,
    /// `SkuId` alone, an id that names nothing (`DZH318Z0BQ4L/0047`): only an operator's catalog
    /// entry under that id tells its GPUs.
    SkuId,
}

impl MachineColumn {
    /// The column's name in the export's header.
    pub fn column(self) -> &'static str {
        match self {
            MachineColumn::SkuMeter => "SkuMeter",
            MachineColumn::SkuPriceDetails => "SkuPriceDetails",
            MachineColumn::XSkuDetails => "x_SkuDetails",
            MachineColumn::XSkuMeterName => "x_SkuMeterName",
            MachineColumn::XSkuDescription => "x_SkuDescription",
            MachineColumn::SkuId => "SkuId",
        }
    }

    /// What the column says of a VM's line, `None` for a line of no VM.
    fn value(self, world: &CloudWorld, line: &Line) -> Option<String> {
        let instance = cloud_gpu_type(world.provider.id(), line.instance);
        let vcpu = instance.map_or(8, |t| t.vcpu);
        match self {
            _ if line.instance.is_empty() => None,
            MachineColumn::SkuMeter => Some(line.meter.to_string()),
            MachineColumn::SkuPriceDetails => {
                Some(format!(r#"{{"CoreCount":{vcpu},"InstanceType":"{}"}}"#, line.instance))
            }
            MachineColumn::XSkuDetails => {
                Some(format!(r#"{{"ServiceType":"{}","VCPUs":{vcpu}}}"#, line.instance))
            }
            MachineColumn::XSkuMeterName => Some(line.meter.to_string()),
            MachineColumn::XSkuDescription => Some(format!("Virtual Machines {} - West Europe", line.meter)),
            MachineColumn::SkuId => Some(sku_id(line.instance)),
        }
    }
}

/// How a month's bills differ from their world's: another sub-account id for every cloud's
/// (`None`: the world's own), and the column Azure names a VM's size in.
#[derive(Debug, Clone, Copy, Default)]
pub struct Variant<'a> {
    pub sub_account: Option<&'a str>,
    pub machine: MachineColumn,
}

/// The opaque `SkuId` Azure's export names an instance's SKU by: the same id for the same VM
/// size (what an operator's catalog entry names it by).
pub fn sku_id(instance: &str) -> String {
    let digest = instance
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("DZH318Z0{:04X}/{:04}", digest >> 48, digest % 10_000)
}

/// How a pool's hours are paid for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Pricing {
    Standard,
    /// Spot or preemptible, at these prices per hour.
    Spot,
    /// The first `covered` nodes under a commitment, the rest on demand.
    Committed {
        covered: u32,
    },
}

/// One SKU a node-hour is billed in: what the meter says, its unit and quantity per node-hour,
/// and its prices per unit in nano-units (list, spot or committed).
pub(super) struct Sku {
    pub(super) meter: &'static str,
    pub(super) unit: &'static str,
    pub(super) per_node_hour: u32,
    pub(super) list: i64,
    pub(super) discounted: i64,
}

pub(super) struct Pool {
    pub(super) name: &'static str,
    pub(super) instance: &'static str,
    pub(super) nodes: u32,
    pub(super) pricing: Pricing,
    /// Share of hours a node runs (Spot evictions, weekends off for the second G2 node).
    pub(super) uptime: f64,
    pub(super) skus: &'static [Sku],
    /// The agency's `client` tag on a pool dedicated to one client.
    pub(super) client: Option<&'static str>,
    /// Namespaces whose pods the pool runs (GKE cost allocation names them).
    pub(super) namespaces: &'static [&'static str],
}

/// A daily or hourly flat charge beside the nodes (control plane, storage, network).
pub(super) struct Flat {
    service: &'static str,
    category: &'static str,
    meter: &'static str,
    unit: &'static str,
    /// Nano-units per hour (`hourly`) or per day with up to ±25 % spread.
    amount: i64,
    hourly: bool,
}

pub(super) struct CloudWorld {
    pub(super) provider: Provider,
    pub(super) provider_name: &'static str,
    pub(super) billing_account: &'static str,
    pub(super) billing_account_name: &'static str,
    pub(super) sub_account: &'static str,
    pub(super) sub_account_name: &'static str,
    pub(super) currency: &'static str,
    pub(super) region: &'static str,
    pub(super) cluster: &'static str,
    /// The `ServiceName` of its virtual machines and commitments.
    pub(super) compute_service: &'static str,
    /// Hourly rows (Google, Oracle) or daily (Azure).
    pub(super) hourly: bool,
    pub(super) pools: &'static [Pool],
    pub(super) flats: &'static [Flat],
    /// The commitment's id, type and category (Azure's reservation and Google's
    /// resource-based committed use discount are of usage: `Usage`).
    pub(super) commitment: (&'static str, &'static str, &'static str),
}

const fn nanos(units: i64, nano_fraction: i64) -> i64 {
    units * 1_000_000_000 + nano_fraction
}

const AZURE: CloudWorld = CloudWorld {
    provider: Provider::Azure,
    provider_name: "Microsoft",
    billing_account: "/providers/Microsoft.Billing/billingAccounts/5f1c2d3e-8a9b-4c7d-9e0f-1a2b3c4d5e6f:0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d_2019-05-31",
    billing_account_name: "Agency GmbH",
    sub_account: "/subscriptions/7d9e2f41-3b6c-4a85-9f10-2c4e6a8b0d13",
    sub_account_name: "gpu-overflow-weu",
    currency: "EUR",
    region: "westeurope",
    cluster: "aks-weu",
    compute_service: "Virtual Machines",
    hourly: false,
    pools: &[
        Pool {
            name: "system",
            instance: "Standard_D8s_v5",
            nodes: 2,
            pricing: Pricing::Standard,
            uptime: 1.0,
            skus: &[Sku {
                meter: "D8s v5",
                unit: "1 Hour",
                per_node_hour: 1,
                list: nanos(0, 353_300_000),
                discounted: nanos(0, 353_300_000),
            }],
            client: None,
            namespaces: &[],
        },
        Pool {
            name: "a100spot",
            instance: "Standard_NC24ads_A100_v4",
            nodes: 3,
            pricing: Pricing::Spot,
            uptime: 0.85,
            skus: &[Sku {
                meter: "NC24ads A100 v4 Spot",
                unit: "1 Hour",
                per_node_hour: 1,
                list: nanos(3, 379_700_000),
                discounted: nanos(0, 743_600_000),
            }],
            client: None,
            namespaces: &[],
        },
        Pool {
            name: "h100",
            instance: "Standard_NC40ads_H100_v5",
            nodes: 1,
            pricing: Pricing::Committed { covered: 1 },
            uptime: 0.99,
            skus: &[Sku {
                meter: "NC40ads H100 v5",
                unit: "1 Hour",
                per_node_hour: 1,
                list: nanos(6, 425_400_000),
                discounted: nanos(3, 983_800_000),
            }],
            client: Some("initech"),
            namespaces: &[],
        },
    ],
    flats: &[
        Flat {
            service: "Azure Kubernetes Service",
            category: "Compute",
            meter: "Standard Uptime SLA",
            unit: "1 Hour",
            amount: nanos(0, 92_000_000),
            hourly: true,
        },
        Flat {
            service: "Storage",
            category: "Storage",
            meter: "P10 LRS Disk",
            unit: "1/Month",
            amount: nanos(1, 354_000_000),
            hourly: false,
        },
        Flat {
            service: "Bandwidth",
            category: "Networking",
            meter: "Standard Data Transfer Out",
            unit: "1 GB",
            amount: nanos(3, 120_000_000),
            hourly: false,
        },
    ],
    commitment: (
        "/providers/Microsoft.Capacity/reservationOrders/3c5e7a90-1b2d-4f60-8a7c-9e0b1d2f3a4c/reservations/8b2d4f60-7a9c-4e1b-b3d5-f7a9c1e3b5d7",
        "Reservation",
        "Usage",
    ),
};

const A2_SPOT: &[Sku] = &[
    Sku {
        meter: "A2 Instance Core running in Americas",
        unit: "hour",
        per_node_hour: 12,
        list: nanos(0, 31_611_000),
        discounted: nanos(0, 9_483_000),
    },
    Sku {
        meter: "A2 Instance Ram running in Americas",
        unit: "gibibyte hour",
        per_node_hour: 85,
        list: nanos(0, 4_237_000),
        discounted: nanos(0, 1_271_000),
    },
    Sku {
        meter: "Nvidia Tesla A100 GPU running in Americas",
        unit: "hour",
        per_node_hour: 1,
        list: nanos(2, 933_908_000),
        discounted: nanos(0, 880_000_000),
    },
];

const G2_COMMITTED: &[Sku] = &[
    Sku {
        meter: "G2 Instance Core running in Americas",
        unit: "hour",
        per_node_hour: 8,
        list: nanos(0, 24_988_000),
        discounted: nanos(0, 15_742_000),
    },
    Sku {
        meter: "G2 Instance Ram running in Americas",
        unit: "gibibyte hour",
        per_node_hour: 32,
        list: nanos(0, 2_927_000),
        discounted: nanos(0, 1_844_000),
    },
    Sku {
        meter: "Nvidia L4 GPU running in Americas",
        unit: "hour",
        per_node_hour: 1,
        list: nanos(0, 559_900_000),
        discounted: nanos(0, 352_737_000),
    },
];

const E2: &[Sku] = &[
    Sku {
        meter: "E2 Instance Core running in Americas",
        unit: "hour",
        per_node_hour: 8,
        list: nanos(0, 21_811_000),
        discounted: nanos(0, 21_811_000),
    },
    Sku {
        meter: "E2 Instance Ram running in Americas",
        unit: "gibibyte hour",
        per_node_hour: 32,
        list: nanos(0, 2_923_000),
        discounted: nanos(0, 2_923_000),
    },
];

const GCP: CloudWorld = CloudWorld {
    provider: Provider::Gcp,
    provider_name: "Google Cloud",
    billing_account: "01A7C3-5B9D2E-4F6081",
    billing_account_name: "Agency billing",
    sub_account: "agency-gpu-us",
    sub_account_name: "agency-gpu-us",
    currency: "USD",
    region: "us-central1",
    cluster: "gke-central",
    compute_service: "Compute Engine",
    hourly: true,
    pools: &[
        Pool {
            name: "a2spot",
            instance: "a2-highgpu-1g",
            nodes: 2,
            pricing: Pricing::Spot,
            uptime: 0.9,
            skus: A2_SPOT,
            client: None,
            namespaces: &["acme-train", "globex-vision"],
        },
        Pool {
            name: "g2",
            instance: "g2-standard-8",
            nodes: 3,
            pricing: Pricing::Committed { covered: 2 },
            uptime: 1.0,
            skus: G2_COMMITTED,
            client: None,
            namespaces: &["acme-llm", "umbrella-rag"],
        },
        Pool {
            name: "default",
            instance: "e2-standard-8",
            nodes: 2,
            pricing: Pricing::Standard,
            uptime: 1.0,
            skus: E2,
            client: None,
            namespaces: &["kube-system", "monitoring", "acme-llm"],
        },
    ],
    flats: &[
        Flat {
            service: "Kubernetes Engine",
            category: "Compute",
            meter: "Regional Kubernetes Clusters",
            unit: "hour",
            amount: nanos(0, 100_000_000),
            hourly: true,
        },
        Flat {
            service: "Cloud Storage",
            category: "Storage",
            meter: "Standard Storage US Multi-region",
            unit: "gibibyte month",
            amount: nanos(3, 640_000_000),
            hourly: false,
        },
    ],
    commitment: (
        "projects/agency-gpu-us/regions/us-central1/commitments/g2-l4-1y",
        "Committed Use Discount",
        "Usage",
    ),
};

const OCI: CloudWorld = CloudWorld {
    provider: Provider::Oci,
    provider_name: "Oracle",
    billing_account: "ocid1.tenancy.oc1..aaaaaaaa7gpuledgeragencytenancy4q2xk3m5n7p9r1t3v5x7z",
    billing_account_name: "agency",
    sub_account: "ocid1.compartment.oc1..aaaaaaaa7gpuledgermlcompartment2b4d6f8h0j2l4n6p8r",
    sub_account_name: "ml",
    currency: "USD",
    region: "us-ashburn-1",
    cluster: "oke-iad",
    compute_service: "Compute",
    hourly: true,
    pools: &[Pool {
        name: "a10",
        instance: "BM.GPU.A10.4",
        nodes: 1,
        pricing: Pricing::Standard,
        uptime: 1.0,
        skus: &[Sku {
            meter: "GPU Standard - A10",
            unit: "GPU Per Hour",
            per_node_hour: 4,
            list: nanos(2, 0),
            discounted: nanos(2, 0),
        }],
        client: Some("umbrella"),
        namespaces: &[],
    }],
    flats: &[
        Flat {
            service: "Container Engine",
            category: "Compute",
            meter: "OKE Enhanced Cluster",
            unit: "Cluster Per Hour",
            amount: nanos(0, 100_000_000),
            hourly: true,
        },
        Flat {
            service: "Block Storage",
            category: "Storage",
            meter: "Block Volume - Storage",
            unit: "GB Months",
            amount: nanos(0, 850_000_000),
            hourly: false,
        },
    ],
    commitment: ("", "", ""),
};

pub(super) fn world(provider: Provider) -> Option<&'static CloudWorld> {
    match provider {
        Provider::Azure => Some(&AZURE),
        Provider::Gcp => Some(&GCP),
        Provider::Oci => Some(&OCI),
        Provider::Aws => None,
    }
}

/// One FOCUS row. Money in nano-units of the bill's currency.
#[derive(Debug, Clone, Default)]
struct Line {
    start: i64,
    end: i64,
    category: &'static str,
    frequency: &'static str,
    pricing: Option<&'static str>,
    commitment_status: Option<&'static str>,
    commitment: bool,
    service: &'static str,
    service_category: &'static str,
    resource_id: String,
    resource_type: &'static str,
    meter: &'static str,
    unit: &'static str,
    quantity: f64,
    billed: i64,
    effective: i64,
    list: i64,
    contracted: i64,
    tags: BTreeMap<&'static str, String>,
    /// The VM size of a node's line, empty for other lines.
    instance: &'static str,
    /// For the truth: the pool and namespace the line is for, and its GPU-hours.
    pool: &'static str,
    namespace: Option<String>,
    gpu_hours: f64,
    gpu_instance: bool,
}

/// A bill's answers, exact: amounts are decimal strings of nano-units.
#[derive(Debug, Default, Clone, Serialize)]
pub struct ProviderTruth {
    pub provider: String,
    pub billing_account: String,
    pub currency: String,
    /// Where the export lies under `--out`, for `ingest focus`.
    pub source: String,
    pub rows: u64,
    pub billed_total: String,
    pub effective_total: String,
    pub list_total: String,
    pub gpu_hours: f64,
    pub spot_gpu_hours: f64,
    /// Σ EffectiveCost of the GPU instances' usage lines.
    pub gpu_fleet_effective: String,
    /// Effective cost per sub-account (Azure subscription, Google project, OCI compartment).
    pub by_sub_account: BTreeMap<String, String>,
    /// Effective cost per `client` tag (`""`: lines no client tag claims).
    pub by_client_tag: BTreeMap<String, String>,
    /// Effective cost per `k8s-namespace` (GKE cost allocation), Google only.
    pub by_namespace: BTreeMap<String, String>,
    /// Effective cost per node pool (`""`: what no pool ran: control plane, storage, network,
    /// unused commitment).
    pub by_pool: BTreeMap<String, String>,
    /// The commitment's month (Azure's reservation, Google's committed use discount): its id,
    /// type and category, and the EffectiveCost of its hours run (`Used`) and not run (`Unused`), in
    /// the bill's currency; empty for a bill without one.
    pub commitment_id: String,
    pub commitment_type: String,
    pub commitment_category: String,
    pub commitment_used: String,
    pub commitment_unused: String,
    /// With `--kube-state-metrics`: the cluster's Kubernetes series and what gpuledger's
    /// split of its nodes' cost must come to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<super::cloud_kube::KubeTruth>,
}

/// An exact decimal of nano-units (`12.345678901`).
pub fn nano_text(value: i64) -> String {
    let sign = if value < 0 { "-" } else { "" };
    let abs = value.unsigned_abs();
    format!("{sign}{}.{:09}", abs / 1_000_000_000, abs % 1_000_000_000)
}

#[derive(Default)]
struct Tally {
    rows: u64,
    billed: i64,
    effective: i64,
    list: i64,
    gpu_hours: f64,
    spot_gpu_hours: f64,
    gpu_fleet: i64,
    by_sub_account: BTreeMap<String, i64>,
    by_client: BTreeMap<String, i64>,
    by_namespace: BTreeMap<String, i64>,
    by_pool: BTreeMap<String, i64>,
    commitment_used: i64,
    commitment_unused: i64,
}

impl Tally {
    fn add(&mut self, world: &CloudWorld, line: &Line) {
        self.rows += 1;
        self.billed += line.billed;
        self.effective += line.effective;
        self.list += line.list;
        self.gpu_hours += line.gpu_hours;
        if line.pricing == Some("Dynamic") {
            self.spot_gpu_hours += line.gpu_hours;
        }
        if line.gpu_instance {
            self.gpu_fleet += line.effective;
        }
        *self.by_sub_account.entry(world.sub_account.into()).or_default() += line.effective;
        let client = line.tags.get("client").cloned().unwrap_or_default();
        *self.by_client.entry(client).or_default() += line.effective;
        if let Some(namespace) = &line.namespace {
            *self.by_namespace.entry(namespace.clone()).or_default() += line.effective;
        }
        *self.by_pool.entry(line.pool.into()).or_default() += line.effective;
        match line.commitment_status {
            Some("Used") => self.commitment_used += line.effective,
            Some("Unused") => self.commitment_unused += line.effective,
            _ => {}
        }
    }

    fn truth(self, world: &CloudWorld, source: String) -> ProviderTruth {
        let texts = |map: BTreeMap<String, i64>| map.into_iter().map(|(k, v)| (k, nano_text(v))).collect();
        let round6 = |v: f64| (v * 1e6).round() / 1e6;
        ProviderTruth {
            provider: world.provider.id().into(),
            billing_account: world.billing_account.into(),
            currency: world.currency.into(),
            source,
            rows: self.rows,
            billed_total: nano_text(self.billed),
            effective_total: nano_text(self.effective),
            list_total: nano_text(self.list),
            gpu_hours: round6(self.gpu_hours),
            spot_gpu_hours: round6(self.spot_gpu_hours),
            gpu_fleet_effective: nano_text(self.gpu_fleet),
            by_sub_account: texts(self.by_sub_account),
            by_client_tag: texts(self.by_client),
            by_namespace: texts(self.by_namespace),
            by_pool: texts(self.by_pool),
            commitment_id: world.commitment.0.into(),
            commitment_type: world.commitment.1.into(),
            commitment_category: world.commitment.2.into(),
            commitment_used: nano_text(self.commitment_used),
            commitment_unused: nano_text(self.commitment_unused),
            kubernetes: None,
        }
    }
}

/// Splits `total` among `weights` exactly, by largest remainder.
fn split_exact(total: i64, weights: &[u64]) -> Vec<i64> {
    if total < 0 {
        return split_exact(-total, weights).into_iter().map(|share| -share).collect();
    }
    let sum: u64 = weights.iter().sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let mut shares: Vec<i64> =
        weights.iter().map(|w| (i128::from(total) * i128::from(*w) / i128::from(sum)) as i64).collect();
    let mut remainders: Vec<(i128, usize)> = weights
        .iter()
        .enumerate()
        .map(|(i, w)| ((i128::from(total) * i128::from(*w)) % i128::from(sum), i))
        .collect();
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let left = total - shares.iter().sum::<i64>();
    for (_, i) in remainders.into_iter().take(left.max(0) as usize) {
        shares[i] += 1;
    }
    shares
}

/// Whether node `node` of pool `pool` runs in `hour` of the month: Spot nodes lose hours to
/// evictions; of a committed pool, the node after the covered ones runs on demand in working
/// hours only and the last covered one is off at weekends (its commitment unused then).
pub(super) fn node_runs(
    world: &CloudWorld,
    seed: u64,
    period: Period,
    pool: usize,
    node: u32,
    hour: u32,
) -> bool {
    let p = &world.pools[pool];
    let at = period.start() + i64::from(hour) * 3_600;
    let weekday = (at.div_euclid(86_400) + 3).rem_euclid(7); // 0 = Monday
    let hour_of_day = at.rem_euclid(86_400) / 3_600;
    match p.pricing {
        Pricing::Committed { covered } if covered >= 2 && node == covered => {
            weekday < 5 && (8..20).contains(&hour_of_day)
        }
        Pricing::Committed { covered } if covered >= 2 && node == covered - 1 => weekday < 5,
        _ if p.uptime >= 1.0 => true,
        _ => {
            let stream = world.provider as u64 + 100;
            let mut rng = Rng::derive(
                seed,
                &[stream, period.start() as u64, pool as u64, u64::from(node), u64::from(hour)],
            );
            rng.chance(p.uptime)
        }
    }
}

/// The id the bill names a node's virtual machine by (an AKS scale set's instance, a GKE
/// node's Compute Engine instance, an OKE node's instance OCID).
pub(super) fn node_resource_id(world: &CloudWorld, seed: u64, pool_index: usize, node: u32) -> String {
    let pool = &world.pools[pool_index];
    match world.provider {
        Provider::Azure => format!(
            "{}/resourceGroups/MC_rg-gpu_{}_{}/providers/Microsoft.Compute/virtualMachineScaleSets/aks-{}-31415926-vmss/virtualMachines/{node}",
            world.sub_account, world.cluster, world.region, pool.name
        ),
        Provider::Gcp => format!(
            "//compute.googleapis.com/projects/{}/zones/{}-a/instances/{}",
            world.sub_account,
            world.region,
            gke_instance_name(world, seed, pool_index, node)
        ),
        _ => format!("ocid1.instance.oc1.iad.anuwcljr{}{:04}{node}", pool.name, pool_index),
    }
}

/// A GKE node's instance name (its Kubernetes node name too).
pub(super) fn gke_instance_name(world: &CloudWorld, seed: u64, pool_index: usize, node: u32) -> String {
    let stream = world.provider as u64 + 100;
    format!(
        "gke-{}-{}-{:08x}-{node}",
        world.cluster,
        world.pools[pool_index].name,
        super::rng::hash(seed, &[stream, pool_index as u64]) as u32
    )
}

/// Whether a pool's node is under its commitment.
pub(super) fn is_covered(pool: &Pool, node: u32) -> bool {
    matches!(pool.pricing, Pricing::Committed { covered } if node < covered)
}

/// A SKU's effective price per unit for a node: Spot's, the commitment's, else the list's.
pub(super) fn sku_price(pool: &Pool, sku: &Sku, covered: bool) -> i64 {
    if matches!(pool.pricing, Pricing::Spot) || covered { sku.discounted } else { sku.list }
}

/// The lines of one month of a provider's bill, in time order, through `hours` hours.
fn month_lines(world: &CloudWorld, seed: u64, period: Period, hours: u32) -> Vec<Line> {
    let start = period.start();
    let step = if world.hourly { 3_600 } else { 86_400 };
    let mut lines = Vec::new();
    let stream = world.provider as u64 + 100;
    let cluster_tag = |tags: &mut BTreeMap<&'static str, String>| match world.provider {
        Provider::Gcp => {
            tags.insert("goog-k8s-cluster-name", world.cluster.into());
            tags.insert("goog-k8s-cluster-location", world.region.into());
        }
        Provider::Azure => {
            tags.insert("aks-managed-cluster-name", world.cluster.into());
        }
        _ => {
            tags.insert("oke-cluster-name", world.cluster.into());
        }
    };
    let runs = |pool: usize, node: u32, hour: u32| node_runs(world, seed, period, pool, node, hour);
    let periods = if world.hourly { hours } else { hours.div_ceil(24) };
    for slot in 0..periods {
        let slot_start = start + i64::from(slot) * step;
        let slot_hours: Vec<u32> =
            if world.hourly { vec![slot] } else { (slot * 24..((slot + 1) * 24).min(hours)).collect() };
        let slot_end = slot_start + step.min(slot_hours.len() as i64 * 3_600);
        for (pool_index, pool) in world.pools.iter().enumerate() {
            // GPUs per node from the catalog: the truth's GPU-hours are the GPU SKU's (or the
            // VM's) node-hours times these, whatever the bill's meter says.
            let gpus = cloud_gpu_type(world.provider.id(), pool.instance).map_or(0, |t| t.gpus);
            let mut unused_hours = 0u32;
            for node in 0..pool.nodes {
                let ran_hours: Vec<u32> =
                    slot_hours.iter().copied().filter(|h| runs(pool_index, node, *h)).collect();
                let covered = is_covered(pool, node);
                if covered {
                    unused_hours += slot_hours.len() as u32 - ran_hours.len() as u32;
                }
                if ran_hours.is_empty() {
                    continue;
                }
                let node_hours = ran_hours.len() as u32;
                let resource_id = node_resource_id(world, seed, pool_index, node);
                let pricing = match pool.pricing {
                    Pricing::Standard => "Standard",
                    Pricing::Spot => "Dynamic",
                    Pricing::Committed { .. } if covered => "Committed",
                    Pricing::Committed { .. } => "Standard",
                };
                for sku in pool.skus {
                    let quantity = i64::from(sku.per_node_hour) * i64::from(node_hours);
                    let list = sku.list * quantity;
                    let effective = sku_price(pool, sku, covered) * quantity;
                    let billed = if covered { 0 } else { effective };
                    let gpu_line = gpus > 0 && (pool.skus.len() == 1 || sku.meter.contains("GPU"));
                    let mut tags = BTreeMap::new();
                    cluster_tag(&mut tags);
                    match world.provider {
                        Provider::Azure => {
                            tags.insert("aks-managed-poolName", pool.name.to_string());
                        }
                        Provider::Gcp => {
                            tags.insert("goog-k8s-node-pool-name", pool.name.to_string());
                        }
                        _ => {
                            tags.insert("oke-node-pool", pool.name.to_string());
                        }
                    }
                    if let Some(client) = pool.client {
                        tags.insert("client", client.to_string());
                    }
                    let line = Line {
                        start: slot_start,
                        end: slot_end,
                        category: "Usage",
                        frequency: "Usage-Based",
                        pricing: Some(pricing),
                        commitment_status: covered.then_some("Used"),
                        commitment: covered,
                        service: world.compute_service,
                        service_category: "Compute",
                        resource_id: resource_id.clone(),
                        resource_type: match world.provider {
                            Provider::Azure => "Virtual machine scale set",
                            Provider::Gcp => "Compute Engine instance",
                            _ => "instance",
                        },
                        meter: sku.meter,
                        unit: sku.unit,
                        quantity: quantity as f64,
                        billed,
                        effective,
                        list,
                        contracted: effective,
                        tags,
                        instance: pool.instance,
                        pool: pool.name,
                        namespace: None,
                        gpu_hours: if gpu_line { f64::from(gpus * node_hours) } else { 0.0 },
                        gpu_instance: gpus > 0,
                    };
                    if pool.namespaces.is_empty() {
                        lines.push(line);
                        continue;
                    }
                    // GKE cost allocation: the node-hour split among the namespaces whose pods
                    // requested it, the rest unallocated.
                    let mut rng =
                        Rng::derive(seed, &[stream, slot_start as u64, pool_index as u64, u64::from(node)]);
                    let mut weights: Vec<u64> =
                        pool.namespaces.iter().map(|_| rng.int(5, 100) as u64).collect();
                    let allocated: u64 = weights.iter().sum();
                    weights.push(allocated * rng.int(8, 60) as u64 / 100);
                    let names: Vec<String> = pool
                        .namespaces
                        .iter()
                        .map(|n| n.to_string())
                        .chain(["kube:unallocated".to_string()])
                        .collect();
                    let billed = split_exact(line.billed, &weights);
                    let effective = split_exact(line.effective, &weights);
                    let listed = split_exact(line.list, &weights);
                    let total: u64 = weights.iter().sum();
                    for (i, namespace) in names.into_iter().enumerate() {
                        let share = weights[i] as f64 / total as f64;
                        let mut tags = line.tags.clone();
                        tags.insert("k8s-namespace", namespace.clone());
                        // GKE cost allocation carries the pods' labels (`k8s-label/KEY`): the
                        // agency labels its clients' pods `client`.
                        if let Some(client) = ["acme", "globex", "initech", "umbrella"]
                            .into_iter()
                            .find(|c| namespace.starts_with(&format!("{c}-")))
                        {
                            tags.insert("k8s-label/client", client.to_string());
                        }
                        lines.push(Line {
                            quantity: line.quantity * share,
                            gpu_hours: line.gpu_hours * share,
                            billed: billed[i],
                            effective: effective[i],
                            list: listed[i],
                            contracted: effective[i],
                            tags,
                            namespace: Some(namespace),
                            ..line.clone()
                        });
                    }
                }
            }
            // The commitment's hours nobody ran: `Unused`, billed 0, at the committed price.
            if unused_hours > 0 {
                for sku in pool.skus {
                    let quantity = i64::from(sku.per_node_hour) * i64::from(unused_hours);
                    let effective = sku.discounted * quantity;
                    lines.push(Line {
                        start: slot_start,
                        end: slot_end,
                        category: "Usage",
                        frequency: "Usage-Based",
                        pricing: Some("Committed"),
                        commitment_status: Some("Unused"),
                        commitment: true,
                        service: world.compute_service,
                        service_category: "Compute",
                        resource_id: world.commitment.0.into(),
                        resource_type: world.commitment.1,
                        meter: sku.meter,
                        unit: sku.unit,
                        quantity: quantity as f64,
                        effective,
                        contracted: effective,
                        pool: "",
                        ..Line::default()
                    });
                }
            }
        }
        for flat in world.flats {
            let mut tags = BTreeMap::new();
            cluster_tag(&mut tags);
            let amount = if flat.hourly {
                flat.amount * (slot_end - slot_start) / 3_600
            } else if world.hourly && slot % 24 != 0 {
                continue;
            } else {
                let mut rng = Rng::derive(seed, &[stream, 7, slot_start as u64]);
                flat.amount * rng.int(75, 125) / 100
            };
            let day_end = if world.hourly && !flat.hourly { slot_start + 3_600 } else { slot_end };
            lines.push(Line {
                start: slot_start,
                end: day_end,
                category: "Usage",
                frequency: "Usage-Based",
                pricing: Some("Standard"),
                service: flat.service,
                service_category: flat.category,
                resource_id: format!("{}/{}", world.cluster, flat.meter.to_lowercase().replace(' ', "-")),
                resource_type: flat.service,
                meter: flat.meter,
                unit: flat.unit,
                quantity: 1.0,
                billed: amount,
                effective: amount,
                list: amount,
                contracted: amount,
                tags,
                pool: "",
                ..Line::default()
            });
        }
    }
    // The commitment's purchase: billed in full for the month's hours, effective 0 (its cost
    // is in the covered and unused hours).
    for pool in world.pools {
        if let Pricing::Committed { covered } = pool.pricing {
            let month_hours = i64::from(period.hours());
            let amount: i64 =
                pool.skus.iter().map(|s| s.discounted * i64::from(s.per_node_hour)).sum::<i64>()
                    * i64::from(covered)
                    * month_hours;
            lines.push(Line {
                start,
                end: start + 86_400,
                category: "Purchase",
                frequency: "Recurring",
                pricing: Some("Standard"),
                commitment: true,
                service: world.compute_service,
                service_category: "Compute",
                resource_id: world.commitment.0.into(),
                resource_type: world.commitment.1,
                meter: if world.provider == Provider::Azure {
                    "Reservation purchase"
                } else {
                    "Commitment v1: L4 GPU, cores and memory"
                },
                unit: "1 Month",
                quantity: f64::from(covered),
                billed: amount,
                list: 0,
                contracted: amount,
                pool: "",
                ..Line::default()
            });
        }
    }
    lines
}

/// The FOCUS columns each provider writes here, in order; Google and Oracle write 1.0's
/// columns (the SKU's description in `ChargeDescription`), Azure 1.2's.
const COLUMNS: [&str; 35] = [
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "ContractedCost",
    "BillingCurrency",
    "BillingAccountId",
    "BillingAccountName",
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ChargeCategory",
    "ChargeClass",
    "ChargeFrequency",
    "ChargeDescription",
    "PricingCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountType",
    "CommitmentDiscountCategory",
    "CommitmentDiscountStatus",
    "ConsumedQuantity",
    "ConsumedUnit",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "InvoiceIssuerName",
    "RegionId",
    "ResourceId",
    "ResourceType",
    "ServiceName",
    "ServiceCategory",
    "SubAccountId",
    "SubAccountName",
    "Tags",
];

/// A line's values as text, in [`COLUMNS`] order (None: null).
fn row(world: &CloudWorld, period: Period, line: &Line) -> Vec<Option<String>> {
    let iso = crate::sources::focus::iso;
    let some = |text: &str| (!text.is_empty()).then(|| text.to_string());
    let tags = (!line.tags.is_empty()).then(|| serde_json::to_string(&line.tags).unwrap_or_default());
    let quantity = (line.quantity != 0.0).then(|| format!("{}", line.quantity));
    vec![
        Some(nano_text(line.billed)),
        Some(nano_text(line.effective)),
        Some(nano_text(line.list)),
        Some(nano_text(line.contracted)),
        Some(world.currency.into()),
        Some(world.billing_account.into()),
        Some(world.billing_account_name.into()),
        Some(iso(period.start())),
        Some(iso(period.end())),
        Some(iso(line.start)),
        Some(iso(line.end)),
        Some(line.category.into()),
        None,
        Some(line.frequency.into()),
        some(line.meter),
        line.pricing.map(str::to_string),
        line.commitment.then(|| world.commitment.0.to_string()),
        line.commitment.then(|| world.commitment.1.to_string()),
        line.commitment.then(|| world.commitment.2.to_string()),
        line.commitment_status.map(str::to_string),
        quantity.clone(),
        some(line.unit).filter(|_| quantity.is_some()),
        quantity,
        some(line.unit),
        Some(world.provider_name.into()),
        Some(world.provider_name.into()),
        Some(world.provider_name.into()),
        Some(world.region.into()),
        some(&line.resource_id),
        some(line.resource_type),
        Some(line.service.into()),
        Some(line.service_category.into()),
        Some(world.sub_account.into()),
        Some(world.sub_account_name.into()),
        tags,
    ]
}

/// Azure 1.2 adds `SkuMeter` (the meter) and `InvoiceId`; a VM named in another column
/// ([`MachineColumn`]) adds it, its meter and description then only `Virtual Machines`.
fn azure_row(world: &CloudWorld, period: Period, line: &Line, machine: MachineColumn) -> Vec<Option<String>> {
    let named = machine.value(world, line);
    let elsewhere = machine != MachineColumn::SkuMeter && named.is_some();
    let line = &Line { meter: if elsewhere { "Virtual Machines" } else { line.meter }, ..line.clone() };
    let mut values = row(world, period, line);
    values.push((!line.meter.is_empty()).then(|| line.meter.to_string()));
    values.push(Some(format!("E{}{:02}0001", period.year(), period.month())));
    if machine != MachineColumn::SkuMeter {
        values.push(named);
    }
    values
}

/// Writes one provider's month in its layout under `out` (and, with `kube`, its cluster's
/// Kubernetes series); returns its truth.
pub fn write_month(
    out: &Path,
    seed: u64,
    provider: Provider,
    period: Period,
    hours: u32,
    kube: bool,
    Variant { sub_account, machine }: Variant<'_>,
) -> Result<Option<ProviderTruth>, GenerateError> {
    let Some(world) = world(provider) else { return Ok(None) };
    // Another sub-account id for the whole month, bill and cluster alike. The worlds are
    // constants of `&'static str`; the id is leaked once per provider and month generated.
    let renamed;
    let world = match sub_account {
        Some(id) => {
            renamed = CloudWorld { sub_account: Box::leak(id.to_string().into_boxed_str()), ..*world };
            &renamed
        }
        None => world,
    };
    let lines = month_lines(world, seed, period, hours);
    let mut tally = Tally::default();
    for line in &lines {
        tally.add(world, line);
    }
    let root = out.join(provider.folder());
    let source = match provider {
        Provider::Azure => {
            let export = root.join("gpu-overflow-focus");
            let range = format!(
                "{}-{}",
                chrono::DateTime::from_timestamp(period.start(), 0).unwrap_or_default().format("%Y%m%d"),
                chrono::DateTime::from_timestamp(period.end() - 86_400, 0)
                    .unwrap_or_default()
                    .format("%Y%m%d")
            );
            let mut header: Vec<&str> = COLUMNS.to_vec();
            header.extend(["SkuMeter", "InvoiceId"]);
            if machine != MachineColumn::SkuMeter {
                header.push(machine.column());
            }
            // The month-to-date run of the 15th, then the final run that replaces it.
            let mid = period.start() + 15 * 86_400;
            let mut ids = Rng::derive(seed, &[210, period.start() as u64]);
            for (run, cut) in [(0, mid), (1, i64::MAX)] {
                let run_id = ids.uuid();
                let rows: Vec<Vec<Option<String>>> = lines
                    .iter()
                    .filter(|l| l.start < cut)
                    .map(|l| azure_row(world, period, l, machine))
                    .collect();
                let folder = export.join(&range).join(&run_id);
                let name = "part_0_0001.csv.gz";
                write_csv_gz(&folder.join(name), &header, &rows)?;
                let submitted = chrono::DateTime::from_timestamp(
                    if run == 0 { mid + 3_600 } else { period.end() + 2 * 86_400 },
                    0,
                )
                .unwrap_or_default()
                .format("%Y-%m-%dT%H:%M:%S%.3fZ")
                .to_string();
                let manifest = serde_json::json!({
                    "manifestVersion": "2024-04-01",
                    "byteCount": 0,
                    "blobCount": 1,
                    "dataRowCount": rows.len(),
                    "exportConfig": {
                        "exportName": "gpu-overflow-focus",
                        "resourceId": format!("{}/providers/Microsoft.CostManagement/exports/gpu-overflow-focus", world.sub_account),
                        "dataVersion": "1.2-preview",
                        "apiVersion": "2023-07-01-preview",
                        "type": "FocusCost",
                        "timeFrame": "MonthToDate",
                        "granularity": "Daily",
                    },
                    "deliveryConfig": {"partitionData": true, "dataOverwriteBehavior": "CreateNewReport", "fileFormat": "Csv", "compressionMode": "gzip"},
                    "runInfo": {"executionType": "Scheduled", "submittedTime": submitted, "runId": run_id, "startDate": crate::sources::focus::iso(period.start()), "endDate": crate::sources::focus::iso(period.end() - 1)},
                    "blobs": [{"blobName": format!("focus-exports/gpu-overflow-focus/{range}/{run_id}/{name}"), "byteCount": 0, "dataRowCount": rows.len()}],
                });
                let path = folder.join("manifest.json");
                fs::write(&path, serde_json::to_string_pretty(&manifest).unwrap_or_default())
                    .map_err(io_error(&path))?;
            }
            "azure".to_string()
        }
        Provider::Gcp => {
            let rows: Vec<Vec<Option<String>>> = lines.iter().map(|l| row(world, period, l)).collect();
            let folder =
                root.join(format!("gcp_billing_export_focus_{}", world.billing_account.replace('-', "_")));
            write_parquet(&folder.join(format!("{period}-000000000000.parquet")), &COLUMNS, &rows)?;
            "gcp".to_string()
        }
        _ => {
            // One report per day, each row in the file of the day its charge starts.
            let mut days: BTreeMap<i64, Vec<Vec<Option<String>>>> = BTreeMap::new();
            for line in &lines {
                days.entry(line.start.div_euclid(86_400)).or_default().push(row(world, period, line));
            }
            for (day, rows) in days {
                let date = chrono::DateTime::from_timestamp(day * 86_400, 0).unwrap_or_default();
                let path: PathBuf = root
                    .join("FOCUS Reports")
                    .join(date.format("%Y").to_string())
                    .join(date.format("%m").to_string())
                    .join(date.format("%d").to_string())
                    .join(format!("{}_0001.csv.gz", date.format("%Y%m%d")));
                write_csv_gz(&path, &COLUMNS, &rows)?;
            }
            "oci".to_string()
        }
    };
    let mut truth = tally.truth(world, source);
    if kube {
        truth.kubernetes = Some(super::cloud_kube::write_month(out, world, seed, period, hours)?);
    }
    Ok(Some(truth))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_adds_up_to_its_whole() {
        assert_eq!(split_exact(100, &[1, 1, 1]), vec![34, 33, 33]);
        assert_eq!(split_exact(-7, &[1, 1]).iter().sum::<i64>(), -7);
        assert_eq!(split_exact(5, &[0, 0]), vec![0, 0]);
        assert_eq!(nano_text(-1_500_000_001), "-1.500000001");
    }

    #[test]
    fn a_commitment_costs_what_its_purchase_billed() {
        // Over a whole month, the covered hours' and the unused hours' effective cost add up
        // to the purchase the invoice charged: the specification's amortization.
        for world in [&AZURE, &GCP] {
            let period = Period::new(2026, 2).unwrap();
            let lines = month_lines(world, 42, period, period.hours());
            let commitment = |l: &&Line| l.commitment;
            let purchased: i64 = lines.iter().filter(commitment).map(|l| l.billed).sum();
            let amortized: i64 = lines.iter().filter(commitment).map(|l| l.effective).sum();
            assert!(purchased > 0);
            assert_eq!(purchased, amortized, "{:?}", world.provider);
            assert!(lines.iter().any(|l| l.commitment_status == Some("Unused")), "{:?}", world.provider);
        }
    }
}
