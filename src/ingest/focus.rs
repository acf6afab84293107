//! `gpuledger ingest focus SOURCE`: FOCUS bills from any provider, several a month. Every
//! file of the source is read and checked first; then each bill found (a provider's billing
//! account for one billing period) replaces its stored self, all in one transaction, and no
//! other bill moves. A bad file, row or value leaves the database as it was.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::IngestError;
use crate::domain::runs::RunKind;
use crate::money::nanos_from_usd;
use crate::period::Period;
use crate::sources::cur::{self as cur_source};
use crate::sources::focus::{self, Charge, Deviations, Layout, Version};
use crate::sources::objects::{LocalFolder, ObjectStore, S3Options, S3Store};
use crate::sources::row_identity::RowIdentities;
use crate::sources::{SourceError, invalid};
use crate::store::{Bill, BillCharge, BillVmDay, NewIngestRun, Store, TEXTS, VmPeriod};

/// What `gpuledger ingest focus` was asked to do.
#[derive(Debug, Clone, Default)]
pub struct FocusIngestOptions {
    /// A FOCUS file, a folder of them, an AWS Data Exports root, `s3://bucket/prefix`,
    /// `az://container/prefix` (Azure Blob Storage) or `gs://bucket/prefix` (Google Cloud
    /// Storage).
    pub source: String,
    /// Whose bill this is, when the files do not say (`aws`, `azure`, `gcp`, `oci`); rows
    /// naming another provider are refused.
    pub provider: Option<String>,
    /// Only this billing period; rows of others are skipped (and counted).
    pub period: Option<Period>,
    /// Ingest an unchanged delivery again, and accept a bill that falls or rises past its
    /// bounds.
    pub force: bool,
    /// `--max-drop`, `--max-rise`: the bounds of a re-delivered bill ([`super::judge`]), else
    /// the bounds in force for its month (`settings bounds`).
    pub max_drop_percent: Option<u32>,
    pub max_rise_percent: Option<u32>,
    pub s3: S3Options,
}

/// One bill as an ingest left it.
#[derive(Debug, Clone, Serialize)]
pub struct BillResult {
    pub period: String,
    pub provider: String,
    pub billing_account: String,
    /// `ingested` or `skipped` (the same delivery as stored).
    pub status: &'static str,
    pub focus_version: String,
    pub currency: String,
    pub rows: u64,
    /// Exact decimals in the bill's currency.
    pub billed_total: String,
    pub effective_total: String,
    pub list_total: String,
}

/// What a run read and what it made of it: the run's reconciliation.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FocusReconciliation {
    pub layout: String,
    pub files: u64,
    pub rows_read: u64,
    /// Rows of billing periods other than `--period`.
    pub rows_skipped_other_periods: u64,
    pub bills: u64,
    /// What the files did that FOCUS does not allow but whose meaning is plain; each bill of
    /// the delivery keeps these with it.
    pub deviations: Deviations,
}

/// Sums of one bill, while its files are read.
#[derive(Debug, Default)]
struct BillSums {
    billing_account_name: String,
    currency: String,
    /// Where its currency was first seen (the file, and its data row counted from 1), for
    /// the message of a second one.
    currency_seen_at: (String, usize),
    version: Option<Version>,
    rows: u64,
    billed: i64,
    effective: i64,
    list: i64,
    contracted: i64,
    /// Each charge group and its sums, in the order first seen.
    charges: Vec<(ChargeKey, ChargeSums)>,
    /// Each group's [`BillCharge::untagged_key`] and its number among the bill's, beside it.
    untagged: Vec<(std::sync::Arc<str>, u32)>,
    untagged_ids: rustc_hash::FxHashMap<std::sync::Arc<str>, u32>,
    /// Where each group of one file's rows is, by its day, its tags' number in the file
    /// ([`Charge::tags_id`]) and its other fields' bytes ([`push_fields`]): a row finds its
    /// group without building a key or hashing its tags' text.
    index: rustc_hash::FxHashMap<Box<[u8]>, usize>,
    /// Where each group is by its key, for adding the files' sums together.
    by_key: rustc_hash::FxHashMap<ChargeKey, usize>,
    /// Each virtual machine's charge periods of one day and untagged group, in the order
    /// first seen; where each is while one file is read, by the machine's and the cluster's
    /// numbers in the file and the untagged group's ([`VmDayKey`]); and where each is by its
    /// names, for adding the files' together.
    vm_days: Vec<VmDay>,
    vm_day_index: rustc_hash::FxHashMap<VmDayKey, u32>,
    vm_day_by_name: rustc_hash::FxHashMap<VmDayName, u32>,
}

/// A virtual machine's ([`crate::engine::kube_split::vm_key`]) number in its file, the number
/// of the cluster its tags name, and the number of the charge group its rows are summed into
/// less its tags ([`BillCharge::untagged_key`], which holds the day): rows of one VM-hour that
/// differ only in their tags (Google's cost allocation writes one per namespace) are one
/// origin charge. Numbers, not texts: a row finds its place by hashing twelve bytes.
type VmDayKey = (u32, u32, u32);

/// [`VmDayKey`] by name: machine, cluster, untagged group.
type VmDayName = (std::sync::Arc<str>, std::sync::Arc<str>, std::sync::Arc<str>);

/// One virtual machine's charge periods of one day and untagged group, stored as a
/// [`BillVmDay`].
#[derive(Debug)]
struct VmDay {
    /// The period the last row was of, kept beside the rest: the rows of a machine's hour
    /// mostly come together, and a row then reads one place in memory, not two.
    last: VmPeriod,
    /// The periods before; one may appear twice (rows out of order), summed by
    /// [`VmDay::periods`].
    earlier: Vec<VmPeriod>,
    name: VmDayName,
    day: i64,
}

impl VmDay {
    fn new(name: VmDayName, day: i64, first: VmPeriod) -> VmDay {
        VmDay { last: first, earlier: Vec::new(), name, day }
    }

    /// Adds a row's period: to the last one's sums when it is the same period, else as the
    /// last.
    fn add(&mut self, period: &VmPeriod) {
        if self.last.start == period.start && self.last.end == period.end {
            self.last.add(period);
        } else {
            self.earlier.push(std::mem::replace(&mut self.last, *period));
        }
    }

    /// Adds another file's periods of the same machine, day and group.
    fn append(&mut self, other: VmDay) {
        self.earlier.push(other.last);
        self.earlier.extend(other.earlier);
    }

    /// Its periods in order, each once with its rows' sums.
    fn periods(self) -> Vec<VmPeriod> {
        let mut periods = self.earlier;
        periods.push(self.last);
        periods.sort_by_key(|p| (p.start, p.end));
        let mut summed: Vec<VmPeriod> = Vec::with_capacity(periods.len());
        for period in periods {
            match summed.last_mut() {
                Some(last) if last.start == period.start && last.end == period.end => last.add(&period),
                _ => summed.push(period),
            }
        }
        summed
    }
}

/// Where the tags are among a [`ChargeKey`]'s texts.
const TAGS: usize = 11;

/// What a bill's charges are summed by: the day and every dimension a page groups by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct ChargeKey {
    day: i64,
    text: [String; TEXTS],
}

#[derive(Debug, Default, Clone, Copy)]
struct ChargeSums {
    consumed_quantity: f64,
    gpu_hours: f64,
    charges: i64,
    billed: i64,
    effective: i64,
    list: i64,
    contracted: i64,
}

/// The instance type of a virtual machine's hour when the row names one (AWS's usage type
/// after its `:` for box, spot and reserved hours; a GPU VM size or shape of another cloud
/// wherever the row writes it: [`machine_texts`]), else the row's `ResourceType`.
pub fn resource_type(provider: &str, charge: &Charge<'_>) -> String {
    let usage_type = charge.usage_type;
    if let Some((kind, instance)) = usage_type.rsplit_once(':')
        && (kind.ends_with("BoxUsage") || kind.ends_with("SpotUsage") || kind.ends_with("HeavyUsage"))
    {
        return instance.to_string();
    }
    if let Some(known) =
        machine_texts(charge).into_iter().find_map(|text| crate::catalog::cloud_gpu_type_in(provider, text))
    {
        return known.name.to_string();
    }
    charge.resource_type.to_string()
}

/// Every text of a row that may name its machine, as exports write it: the meter (FOCUS's
/// `SkuMeter`, Azure's `x_SkuMeterName`), the resource type, the SKU's properties
/// (`SkuPriceDetails`, Azure's `x_SkuDetails`), the SKU's description (`x_SkuDescription`,
/// `ChargeDescription`) and the SKU's id (which names a machine only when an operator's
/// catalog lists it by that id).
pub fn machine_texts<'a>(charge: &Charge<'a>) -> [&'a str; 8] {
    [
        charge.sku_meter,
        charge.x_sku_meter_name,
        charge.resource_type,
        charge.sku_price_details,
        charge.x_sku_details,
        charge.x_sku_description,
        charge.charge_description,
        charge.sku_id,
    ]
}

/// The row's meter: `SkuMeter`, else Azure's `x_SkuMeterName`, else the SKU's description
/// (`x_SkuDescription`, `ChargeDescription`: Oracle's `GPU Standard - A10`).
fn meter<'a>(charge: &Charge<'a>) -> &'a str {
    [charge.sku_meter, charge.x_sku_meter_name, charge.x_sku_description, charge.charge_description]
        .into_iter()
        .find(|text| !text.is_empty())
        .unwrap_or("")
}

/// The text of a compute usage row that looks like a GPU machine the catalog does not know
/// (its GPUs are not counted): `ND40rs v2`, `BM.GPU.B200.8`; for AWS, an instance type its
/// usage type names (`p3.2xlarge`), not a description that mentions one.
fn unknown_gpu_machine(provider: &str, charge: &Charge<'_>, instance: &str) -> Option<String> {
    // A commitment's unused hours ran no machine; a machine the catalog knows is not unknown.
    if charge.service_category != "Compute"
        || charge.charge_category != "Usage"
        || charge.commitment_discount_status == Some("Unused")
        || crate::catalog::is_known_machine(provider, instance)
    {
        return None;
    }
    let texts = if provider == "aws" { vec![instance] } else { machine_texts(charge).to_vec() };
    texts
        .into_iter()
        .find(|text| crate::catalog::looks_like_gpu_machine(provider, text))
        .map(|t| t.trim().to_string())
}

/// The GPU instance a usage line is for and its GPU-hours, as its provider bills them.
fn gpu_charge(
    provider: &str,
    charge: &Charge<'_>,
    instance: &str,
    hours: f64,
) -> Option<crate::catalog::GpuCharge> {
    // A commitment's unused hours ran no instance.
    if charge.charge_category != "Usage" || charge.commitment_discount_status == Some("Unused") {
        return None;
    }
    crate::catalog::gpu_charge(provider, instance, meter(charge), charge.consumed_unit, hours)
}

impl ChargeSums {
    fn add(&mut self, other: &ChargeSums) {
        self.consumed_quantity += other.consumed_quantity;
        self.gpu_hours += other.gpu_hours;
        self.charges += other.charges;
        self.billed += other.billed;
        self.effective += other.effective;
        self.list += other.list;
        self.contracted += other.contracted;
    }
}

impl BillSums {
    /// The index of the charge group of a row of `day` and `text`, whose tags have the number
    /// `tags_id` in its file, added if new; `key` is scratch space.
    fn group(&mut self, key: &mut Vec<u8>, day: i64, text: &[&str; TEXTS], tags_id: u32) -> usize {
        key.clear();
        key.extend_from_slice(&day.to_le_bytes());
        key.extend_from_slice(&tags_id.to_le_bytes());
        push_fields(key, &text[..TAGS]);
        push_fields(key, &text[TAGS + 1..]);
        match self.index.get(key.as_slice()) {
            Some(index) => *index,
            None => {
                let charge_key = ChargeKey { day, text: text.map(str::to_string) };
                let mut untagged = *text;
                untagged[TAGS] = "";
                let untagged: std::sync::Arc<str> = BillCharge::key_of(day, &untagged).into();
                let next = self.untagged_ids.len() as u32;
                let id = *self.untagged_ids.entry(untagged.clone()).or_insert(next);
                self.untagged.push((untagged, id));
                self.charges.push((charge_key, ChargeSums::default()));
                self.index.insert(key.clone().into_boxed_slice(), self.charges.len() - 1);
                self.charges.len() - 1
            }
        }
    }

    /// Adds what a file holds of the bill: its currency must be the bill's.
    fn add(&mut self, other: BillSums) -> Result<(), SourceError> {
        if self.currency.is_empty() {
            self.currency = other.currency.clone();
            self.currency_seen_at = other.currency_seen_at.clone();
        } else if self.currency != other.currency {
            let (location, row) = &other.currency_seen_at;
            return Err(invalid(
                location,
                format!(
                    "data row {row}, column {}: {}",
                    crate::sources::columns::ColumnId::column_name(focus::Col::BillingCurrency),
                    second_currency(&other.currency, self)
                ),
            ));
        }
        if self.billing_account_name.is_empty() {
            self.billing_account_name = other.billing_account_name;
        }
        self.version = self.version.max(other.version);
        self.rows += other.rows;
        self.billed += other.billed;
        self.effective += other.effective;
        self.list += other.list;
        self.contracted += other.contracted;
        for ((charge_key, sums), (untagged, _)) in other.charges.into_iter().zip(other.untagged) {
            match self.by_key.get(&charge_key) {
                Some(&index) => self.charges[index].1.add(&sums),
                None => {
                    self.by_key.insert(charge_key.clone(), self.charges.len());
                    self.charges.push((charge_key, sums));
                    // Only the files' groups are numbered: the whole finds VM-days by name.
                    self.untagged.push((untagged, 0));
                }
            }
        }
        for vm_day in other.vm_days {
            match self.vm_day_by_name.get(&vm_day.name) {
                Some(&index) => self.vm_days[index as usize].append(vm_day),
                None => {
                    self.vm_day_by_name.insert(vm_day.name.clone(), self.vm_days.len() as u32);
                    self.vm_days.push(vm_day);
                }
            }
        }
        Ok(())
    }
}

/// The refusal of a row in `currency` in a bill already in another.
fn second_currency(currency: &str, bill: &BillSums) -> String {
    let (location, row) = &bill.currency_seen_at;
    format!(
        "{currency} in a bill in {} (since {location}, data row {row}): one bill has one currency",
        bill.currency
    )
}

/// Every bill the files of one delivery hold, summed and checked.
#[derive(Debug, Default)]
struct Reading {
    /// The version the export's manifest names, if any.
    declared: Option<Version>,
    /// Each bill (period, provider, billing account) and its sums; a delivery holds a few.
    bills: Vec<((Period, String, String), BillSums)>,
    /// Each distinct naming's instance and GPUs ([`Classified`]), by its bytes.
    classified: rustc_hash::FxHashMap<Box<[u8]>, Classified>,
    reconciliation: FocusReconciliation,
    /// Every row's identity: a row the delivery holds twice is refused.
    identities: RowIdentities,
}

/// What a row's names make of it: its instance type ([`resource_type`]) and, for a GPU
/// instance's usage, its GPU model and GPU-hours per consumed unit.
#[derive(Debug, Clone)]
struct Classified {
    instance: std::sync::Arc<str>,
    gpu: Option<(&'static str, f64)>,
}

impl Classified {
    fn of(provider: &str, charge: &Charge<'_>) -> Classified {
        let mut instance = resource_type(provider, charge);
        // GPU-hours are linear in the hours consumed: the catalog's answer for one.
        let gpu = gpu_charge(provider, charge, &instance, 1.0).map(|g| (g.gpu_model, g.gpu_hours));
        // A GPU machine the catalog does not know keeps the text naming it, for `report bill`
        // and the Data page to list (never counted as CPU without a word).
        if gpu.is_none()
            && let Some(text) = unknown_gpu_machine(provider, charge, &instance)
        {
            instance = text;
        }
        Classified { instance: instance.into(), gpu }
    }
}

/// Appends each field to `bytes` after its length: two lists of fields give the same bytes
/// only when they are the same.
fn push_fields(bytes: &mut Vec<u8>, fields: &[&str]) {
    for field in fields {
        bytes.extend_from_slice(&(field.len() as u32).to_le_bytes());
        bytes.extend_from_slice(field.as_bytes());
    }
}

impl Reading {
    /// Reads the files, each on the next free core, and adds what each holds in the files'
    /// order as soon as the files before it are added (so at most a file per core waits, not
    /// the delivery): the sums are those of reading them one by one, and the refusal is the
    /// first file's that has one.
    fn of_files(
        declared: Option<Version>,
        files: &[(PathBuf, String)],
        expected_rows: &[Option<u64>],
        options: &FocusIngestOptions,
        bar: &indicatif::ProgressBar,
    ) -> Result<Reading, SourceError> {
        /// The files added so far, those read and waiting for an earlier one, and a refusal.
        struct Added {
            whole: Reading,
            next: usize,
            waiting: Vec<Option<Result<Reading, SourceError>>>,
            refusal: Option<SourceError>,
        }
        let workers =
            std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, files.len().max(1));
        let handed_out = std::sync::atomic::AtomicUsize::new(0);
        let refused = std::sync::atomic::AtomicBool::new(false);
        let added = std::sync::Mutex::new(Added {
            whole: Reading { declared, ..Reading::default() },
            next: 0,
            waiting: files.iter().map(|_| None).collect(),
            refusal: None,
        });
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    // Files are handed out in order and one begun is finished: every file before
                    // a refused one is read and added.
                    while !refused.load(std::sync::atomic::Ordering::Relaxed) {
                        let index = handed_out.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((path, location)) = files.get(index) else { break };
                        let mut reading = Reading { declared, ..Reading::default() };
                        let expected = expected_rows.get(index).copied().flatten();
                        let result =
                            reading.add_file(path, location, expected, options, bar).map(|()| reading);
                        let mut added = added.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        added.waiting[index] = Some(result);
                        while added.refusal.is_none() {
                            let next = added.next;
                            let Some(file) = added.waiting.get_mut(next).and_then(Option::take) else {
                                break;
                            };
                            added.next += 1;
                            if let Err(refusal) = file.and_then(|file| added.whole.add(file)) {
                                added.refusal = Some(refusal);
                                refused.store(true, std::sync::atomic::Ordering::Relaxed);
                            }
                        }
                    }
                });
            }
        });
        let added = added.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        match added.refusal {
            Some(refusal) => Err(refusal),
            None => Ok(added.whole),
        }
    }

    /// Adds another file's reading: its bills, its counts and its deviations.
    fn add(&mut self, other: Reading) -> Result<(), SourceError> {
        for (key, sums) in other.bills {
            let index = match self.bills.iter().position(|(k, _)| *k == key) {
                Some(index) => index,
                None => {
                    self.bills.push((key, BillSums::default()));
                    self.bills.len() - 1
                }
            };
            self.bills[index].1.add(sums)?;
        }
        let (mine, theirs) = (&mut self.reconciliation, &other.reconciliation);
        mine.files += theirs.files;
        mine.rows_read += theirs.rows_read;
        mine.rows_skipped_other_periods += theirs.rows_skipped_other_periods;
        mine.deviations.add(&theirs.deviations);
        self.identities.append(other.identities)
    }

    /// Reads one file; `expected_rows` is how many data rows its manifest says it holds.
    fn add_file(
        &mut self,
        path: &Path,
        location: &str,
        expected_rows: Option<u64>,
        options: &FocusIngestOptions,
        bar: &indicatif::ProgressBar,
    ) -> Result<(), SourceError> {
        let names = focus::header(path, location)?;
        let version = Version::of_header(&names).max(self.declared.unwrap_or(Version::V1_0));
        let mut deviations = Deviations::default();
        let mut rows_of = FileRows {
            bills: &mut self.bills,
            classified: &mut self.classified,
            skipped: 0,
            not_calendar: 0,
            key: Vec::new(),
            month: (0, None),
            location,
            options,
            version,
            bar,
            unshown: 0,
            vm_keys: Default::default(),
            vms: Vec::new(),
            vm_last_day: Vec::new(),
            clusters: Vec::new(),
            cluster_ids: Default::default(),
        };
        let rows =
            focus::read_file(path, location, &names, &mut deviations, &mut rows_of, &mut self.identities)?;
        if let Some(declared) = expected_rows
            && declared != rows as u64
        {
            return Err(invalid(
                location,
                format!(
                    "holds {rows} data rows, but the export's manifest says {declared} (dataRowCount): \
                     a short or overlong delivery. Nothing was ingested; wait for the export to finish \
                     or run it again"
                ),
            ));
        }
        bar.inc(rows_of.unshown);
        deviations.billing_periods_not_calendar_months += rows_of.not_calendar;
        self.reconciliation.rows_skipped_other_periods += rows_of.skipped;
        self.reconciliation.deviations.add(&deviations);
        self.reconciliation.files += 1;
        self.reconciliation.rows_read += rows as u64;
        Ok(())
    }
}

/// Where one file's rows go: each to its bill's charge group.
struct FileRows<'r> {
    bills: &'r mut Vec<((Period, String, String), BillSums)>,
    classified: &'r mut rustc_hash::FxHashMap<Box<[u8]>, Classified>,
    /// Rows of billing periods other than `--period`.
    skipped: u64,
    /// Rows of billing periods that do not start on a month's first midnight.
    not_calendar: u64,
    /// Scratch space for keys.
    key: Vec<u8>,
    /// The last billing period start seen and its month: a file's rows share one or a few.
    month: (i64, Option<(Period, bool)>),
    location: &'r str,
    options: &'r FocusIngestOptions,
    version: Version,
    bar: &'r indicatif::ProgressBar,
    /// Rows added since the bar last moved.
    unshown: u64,
    /// Each `ResourceId`'s virtual machine's number among `vms` ([`NO_VM`] if it names
    /// none), and each tags' cluster (by the tags' number in the file): worked out once each.
    vm_keys: rustc_hash::FxHashMap<u128, u32>,
    vms: Vec<std::sync::Arc<str>>,
    /// Each machine's (by its number among `vms`) last VM-day: a machine's rows mostly come
    /// a day at a time, and a row then finds its VM-day in a short array, not a hash table.
    vm_last_day: Vec<VmLastDay>,
    clusters: Vec<std::sync::Arc<str>>,
    cluster_ids: rustc_hash::FxHashMap<u32, u32>,
}

/// Where a row goes.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// A billing period other than `--period`'s: counted, not summed.
    Skipped,
    /// A bill (its index in the reading) and one of its charge groups; whether its billing
    /// period is a calendar month; its GPU-hours per consumed unit (0 for no GPU).
    /// `vm_cluster`: for a compute usage row, the cluster its tags name (its index in the
    /// file's), else [`NO_VM`].
    Group { bill: usize, group: usize, calendar: bool, gpu_hours_per_unit: f64, vm_cluster: u32 },
}

/// A row for no virtual machine.
const NO_VM: u32 = u32::MAX;

/// A machine's last VM-day: the bill (its index in the reading), the [`VmDayKey`]'s cluster
/// and untagged group, and where the VM-day is among the bill's.
#[derive(Debug, Clone, Copy)]
struct VmLastDay {
    bill: u32,
    cluster: u32,
    untagged: u32,
    index: u32,
}

impl focus::Visitor for FileRows<'_> {
    type Place = Place;

    fn place(
        &mut self,
        charge: &Charge<'_>,
        columns: &crate::sources::columns::Columns<'_>,
        row: usize,
    ) -> Result<Place, SourceError> {
        if self.month.0 != charge.billing_period_start || self.month.1.is_none() {
            self.month = (charge.billing_period_start, focus::billing_month(charge.billing_period_start));
        }
        let Some((period, calendar)) = self.month.1 else {
            return Err(columns.bad(row, focus::Col::BillingPeriodStart, "not a date gpuledger can hold"));
        };
        if self.options.period.is_some_and(|p| p != period) {
            return Ok(Place::Skipped);
        }
        let asked = self.options.provider.as_deref();
        let provider = match (focus::provider_id(charge.provider), asked) {
            (Some(named), Some(asked)) if named != asked => {
                return Err(columns.bad(
                    row,
                    focus::Col::ProviderName,
                    format!("the row is {named}'s bill, but --provider {asked} was given"),
                ));
            }
            (Some(named), _) => named,
            (None, Some(asked)) if charge.provider.is_empty() => asked,
            (None, _) if charge.provider.is_empty() => {
                return Err(columns.bad(
                    row,
                    focus::Col::ProviderName,
                    format!("the row names no provider: pass --provider ({})", focus::PROVIDERS.join(", ")),
                ));
            }
            (None, _) => {
                return Err(columns.bad(
                    row,
                    focus::Col::ProviderName,
                    format!(
                        "{:?} is not a provider gpuledger knows ({})",
                        charge.provider,
                        focus::PROVIDERS.join(", ")
                    ),
                ));
            }
        };
        if charge.billing_account_id.is_empty() {
            return Err(columns.bad(
                row,
                focus::Col::BillingAccountId,
                "BillingAccountId is never null in FOCUS",
            ));
        }
        // The bill of the row (a delivery holds a few).
        let bills = &mut *self.bills;
        let found = bills.iter().position(|((p, named, account), _)| {
            *p == period && named == provider && account == charge.billing_account_id
        });
        let bill_index = found.unwrap_or_else(|| {
            bills.push((
                (period, provider.to_string(), charge.billing_account_id.to_string()),
                BillSums::default(),
            ));
            bills.len() - 1
        });
        let bill = &mut bills[bill_index].1;
        if bill.currency.is_empty() {
            bill.currency = charge.billing_currency.to_string();
            bill.currency_seen_at = (self.location.to_string(), columns.first_row() + row + 1);
        } else if bill.currency != charge.billing_currency {
            return Err(columns.bad(
                row,
                focus::Col::BillingCurrency,
                second_currency(charge.billing_currency, bill),
            ));
        }
        if bill.billing_account_name.is_empty() {
            bill.billing_account_name = charge.billing_account_name.to_string();
        }
        bill.version = bill.version.max(Some(self.version));
        let day = charge.charge_period_start - charge.charge_period_start.rem_euclid(86_400);
        // The instance and GPUs of the row, classified once per distinct naming: every text
        // `Classified::of` reads.
        let usage = charge.charge_category == "Usage" && charge.commitment_discount_status != Some("Unused");
        let key = &mut self.key;
        key.clear();
        push_fields(
            key,
            &[
                provider,
                charge.usage_type,
                charge.service_category,
                charge.consumed_unit,
                if usage { "usage" } else { "" },
            ],
        );
        push_fields(key, &machine_texts(charge));
        let class = match self.classified.get(key.as_slice()) {
            Some(class) => class.clone(),
            None => {
                let class = Classified::of(provider, charge);
                self.classified.insert(key.clone().into_boxed_slice(), class.clone());
                class
            }
        };
        let text = [
            charge.sub_account_id,
            charge.sub_account_name,
            charge.service_name,
            charge.service_category,
            charge.charge_category,
            charge.charge_class.unwrap_or(""),
            charge.pricing_category.unwrap_or(""),
            charge.commitment_discount_status.unwrap_or(""),
            charge.region,
            &class.instance,
            charge.consumed_unit,
            &charge.tags,
            class.gpu.map_or("", |(model, _)| model),
            charge.commitment_discount_id,
            charge.commitment_discount_type,
            charge.commitment_discount_category.unwrap_or(""),
        ];
        let group = bill.group(key, day, &text, charge.tags_id);
        // A compute usage row may be a virtual machine's (its `ResourceId` says, row by row):
        // the cluster its tags name, worked out once per tags.
        let mut vm_cluster = NO_VM;
        if usage && charge.service_category == "Compute" {
            let clusters = &mut self.clusters;
            vm_cluster = match self.cluster_ids.get(&charge.tags_id) {
                Some(&id) => id,
                None => {
                    // Numbered by name: the many tags of one cluster's rows give one number.
                    let name = crate::engine::kube_split::cluster_of_tags(&charge.tags);
                    let id = match clusters.iter().position(|c| **c == *name) {
                        Some(id) => id as u32,
                        None => {
                            clusters.push(name.into());
                            clusters.len() as u32 - 1
                        }
                    };
                    self.cluster_ids.insert(charge.tags_id, id);
                    id
                }
            };
        }
        Ok(Place::Group {
            bill: bill_index,
            group,
            calendar,
            gpu_hours_per_unit: class.gpu.map_or(0.0, |(_, per)| per),
            vm_cluster,
        })
    }

    fn add(&mut self, place: Place, amounts: &focus::Amounts<'_>) {
        // The bar moves every few thousand rows: a clock read per row costs more than the row.
        const STEP: u64 = 4_096;
        self.unshown += 1;
        if self.unshown == STEP {
            self.bar.inc(STEP);
            self.unshown = 0;
        }
        let Place::Group { bill, group, calendar, gpu_hours_per_unit, vm_cluster } = place else {
            self.skipped += 1;
            return;
        };
        if !calendar {
            self.not_calendar += 1;
        }
        let bill_index = bill;
        let bill = &mut self.bills[bill].1;
        bill.rows += 1;
        let (billed, effective, list, contracted) = (
            nanos_from_usd(amounts.billed_cost),
            nanos_from_usd(amounts.effective_cost),
            nanos_from_usd(amounts.list_cost),
            nanos_from_usd(amounts.contracted_cost),
        );
        bill.billed += billed;
        bill.effective += effective;
        bill.list += list;
        bill.contracted += contracted;
        if vm_cluster != NO_VM && !amounts.resource_id.is_empty() {
            let vm = match self.vm_keys.get(&amounts.resource_key) {
                Some(&known) => known,
                None => {
                    let found = match crate::engine::kube_split::vm_key(amounts.resource_id) {
                        Some(instance) => {
                            self.vms.push(instance.into());
                            self.vm_last_day.push(VmLastDay {
                                bill: u32::MAX,
                                cluster: 0,
                                untagged: 0,
                                index: 0,
                            });
                            self.vms.len() as u32 - 1
                        }
                        None => NO_VM,
                    };
                    self.vm_keys.insert(amounts.resource_key, found);
                    found
                }
            };
            if vm != NO_VM {
                let (untagged, untagged_id) = &bill.untagged[group];
                let key = (vm, vm_cluster, *untagged_id);
                let period = VmPeriod {
                    start: amounts.charge_period_start,
                    end: amounts.charge_period_end,
                    charges: 1,
                    consumed_quantity: amounts.consumed_quantity.unwrap_or(0.0),
                    billed_nanos: billed,
                    effective_nanos: effective,
                    list_nanos: list,
                    contracted_nanos: contracted,
                };
                let last = &mut self.vm_last_day[vm as usize];
                if last.bill == bill_index as u32
                    && last.cluster == vm_cluster
                    && last.untagged == *untagged_id
                {
                    bill.vm_days[last.index as usize].add(&period);
                } else {
                    let index = match bill.vm_day_index.get(&key) {
                        Some(&index) => {
                            bill.vm_days[index as usize].add(&period);
                            index
                        }
                        None => {
                            let name = (
                                self.vms[vm as usize].clone(),
                                self.clusters[vm_cluster as usize].clone(),
                                untagged.clone(),
                            );
                            bill.vm_days.push(VmDay::new(name, bill.charges[group].0.day, period));
                            let index = bill.vm_days.len() as u32 - 1;
                            bill.vm_day_index.insert(key, index);
                            index
                        }
                    };
                    *last = VmLastDay {
                        bill: bill_index as u32,
                        cluster: vm_cluster,
                        untagged: *untagged_id,
                        index,
                    };
                }
            }
        }
        let consumed = amounts.consumed_quantity.unwrap_or(0.0);
        bill.charges[group].1.add(&ChargeSums {
            consumed_quantity: consumed,
            gpu_hours: gpu_hours_per_unit * consumed,
            charges: 1,
            billed,
            effective,
            list,
            contracted,
        });
    }
}

/// The decimal text of nano-units.
fn decimal(nanos: i64) -> String {
    crate::money::Nanos(nanos).decimal()
}

/// One delivery: its files and the version that tells a re-delivery from the same one.
pub struct FocusDelivery {
    layout: Layout,
    /// The version the export's manifest names (Azure's `dataVersion`), when it names one:
    /// 1.1 and 1.2 columns are optional, so a header alone may read as older than it is.
    declared: Option<Version>,
    /// Where it was found, for the run and the bills.
    location: String,
    data_version: String,
    files: Vec<String>,
    /// How many data rows each file holds, where the manifest says (Azure's `dataRowCount`).
    expected_rows: Vec<Option<u64>>,
    /// The month the export's folders say the bills are of (Azure's date range).
    month: Option<Period>,
    period: Option<Period>,
}

/// Finds what the source holds: an AWS Data Exports root (manifests per billing period), or
/// plain FOCUS files (a file, or a folder of them).
async fn discover(
    options: &FocusIngestOptions,
) -> Result<(Box<dyn ObjectStore>, Vec<FocusDelivery>), IngestError> {
    let (objects, single): (Box<dyn ObjectStore>, Option<String>) = if options.source.starts_with("s3://") {
        (Box::new(S3Store::connect(&options.source, &options.s3).await?), None)
    } else if crate::sources::cloud_objects::Cloud::of(&options.source).is_some() {
        let endpoint = options.s3.endpoint_url.as_deref();
        (Box::new(crate::sources::cloud_objects::CloudFolder::connect(&options.source, endpoint)?), None)
    } else {
        let path = PathBuf::from(&options.source);
        if path.is_file() {
            let root = path.parent().map(Path::to_path_buf).unwrap_or_default();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            (Box::new(LocalFolder { root }), Some(name))
        } else if path.is_dir() {
            (Box::new(LocalFolder { root: path }), None)
        } else {
            return Err(IngestError::Source(invalid(&options.source, "no such file or folder")));
        }
    };
    let has_manifests = single.is_none()
        && objects.folders("metadata/").await?.iter().any(|f| cur_source::partition_period(f).is_some());
    if has_manifests {
        let deliveries = cur_source::discover(objects.as_ref(), options.period).await?;
        let found = deliveries
            .into_iter()
            .map(|d| FocusDelivery {
                layout: Layout::AwsDataExport,
                declared: None,
                location: objects.locate(&d.manifest_key),
                data_version: d.data_version,
                expected_rows: Vec::new(),
                month: None,
                files: d.data_files,
                period: Some(d.period),
            })
            .collect();
        return Ok((objects, found));
    }
    if single.is_none() {
        let runs = focus::azure_runs(objects.as_ref(), "", 5).await?;
        if !runs.is_empty() {
            let found = runs
                .into_iter()
                .map(|run| FocusDelivery {
                    layout: Layout::AzureExport,
                    declared: run.version,
                    location: objects.locate(&run.manifest_key),
                    data_version: run.run_id,
                    expected_rows: run.rows,
                    month: run.month,
                    files: run.files,
                    period: options.period,
                })
                .collect();
            return Ok((objects, found));
        }
    }
    let (layout, files) = match (single, focus::oci_reports(objects.as_ref()).await?) {
        (Some(name), _) => (Layout::Plain, vec![name]),
        (None, Some(reports)) => {
            (Layout::OciReports, focus::plain_files(objects.as_ref(), &reports, 4).await?)
        }
        (None, None) => (Layout::Plain, focus::plain_files(objects.as_ref(), "", 4).await?),
    };
    if files.is_empty() {
        return Err(IngestError::Source(invalid(
            objects.describe(),
            "no FOCUS data files here (.csv, .csv.gz or .parquet), and no AWS Data Exports manifests",
        )));
    }
    let location = objects.describe();
    Ok((
        objects,
        vec![FocusDelivery {
            layout,
            declared: None,
            location,
            data_version: String::new(),
            files,
            expected_rows: Vec::new(),
            month: None,
            period: options.period,
        }],
    ))
}

/// Ingests every bill the source holds. Returns each bill's outcome.
pub async fn ingest_focus(
    store: &dyn Store,
    options: &FocusIngestOptions,
    progress: &indicatif::MultiProgress,
) -> Result<Vec<BillResult>, IngestError> {
    if let Some(provider) = &options.provider
        && !focus::PROVIDERS.contains(&provider.as_str())
    {
        return Err(IngestError::Other(format!(
            "--provider {provider}: expected one of {}",
            focus::PROVIDERS.join(", ")
        )));
    }
    let bills = super::source::ingest(options, store, progress).await?;
    Ok(bills.into_iter().flatten().collect())
}

/// FOCUS as a bill source: a delivery is an export run, a billing period's manifest, or a
/// folder or file of bills; it holds one or several bills, each judged and replaced alone.
#[async_trait::async_trait]
impl super::source::BillSource for FocusIngestOptions {
    type Delivery = FocusDelivery;
    type Outcome = Vec<BillResult>;

    fn kind(&self) -> RunKind {
        RunKind::Focus
    }

    fn asked(&self) -> (String, String) {
        (self.source.clone(), self.period.map(|p| p.to_string()).unwrap_or_default())
    }

    async fn discover(&self) -> Result<(Box<dyn ObjectStore>, Vec<FocusDelivery>), IngestError> {
        discover(self).await
    }

    /// Never the whole delivery: each bill it holds is skipped alone when its data version is
    /// the stored one's.
    async fn unchanged(
        &self,
        _store: &dyn Store,
        _objects: &dyn ObjectStore,
        _delivery: &FocusDelivery,
    ) -> Result<Option<Vec<BillResult>>, IngestError> {
        Ok(None)
    }

    fn run(&self, _objects: &dyn ObjectStore, delivery: &FocusDelivery) -> NewIngestRun {
        let period = delivery.period.or(self.period).map(|p| p.to_string()).unwrap_or_default();
        NewIngestRun::now(RunKind::Focus, &delivery.location, &period, &delivery.data_version)
    }

    async fn ingest(
        &self,
        store: &dyn Store,
        objects: &dyn ObjectStore,
        delivery: &FocusDelivery,
        progress: &indicatif::MultiProgress,
    ) -> Result<super::source::Ingested<Vec<BillResult>>, IngestError> {
        let (bills, reconciliation) = ingest_delivery(store, objects, delivery, self, progress).await?;
        Ok(super::source::Ingested {
            rows_read: reconciliation.rows_read,
            rows_written: bills.iter().filter(|b| b.status == "ingested").count() as u64,
            reconciliation: serde_json::to_string(&reconciliation).ok(),
            outcome: bills,
        })
    }
}

/// Reads one delivery's files, checks them, and replaces the bills they hold in one
/// transaction.
async fn ingest_delivery(
    store: &dyn Store,
    objects: &dyn ObjectStore,
    delivery: &FocusDelivery,
    options: &FocusIngestOptions,
    progress: &indicatif::MultiProgress,
) -> Result<(Vec<BillResult>, FocusReconciliation), IngestError> {
    let scratch = super::scratch::Scratch::new()
        .map_err(|e| IngestError::Other(format!("creating a scratch folder: {e}")))?;
    let mut files = Vec::new();
    for key in &delivery.files {
        files.push((objects.local_copy(key, &scratch.dir).await?, objects.locate(key)));
    }
    super::judge::refuse_same_contents(&files)?;
    // A plain source's version is its files' contents: the same files are the same bills.
    let data_version = if delivery.data_version.is_empty() {
        let mut digests = String::new();
        for (path, location) in &files {
            let digest = super::judge::file_sha256(path)
                .map_err(|e| IngestError::Other(format!("{location}: reading it: {e}")))?;
            digests.push_str(&crate::text::hex(&digest));
        }
        format!("sha256:{}", &crate::text::sha256_hex(digests.as_bytes())[..32])
    } else {
        delivery.data_version.clone()
    };
    let bar = progress.add(indicatif::ProgressBar::new_spinner());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} {human_pos} rows ({per_sec})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.set_message(format!("FOCUS: {} ({} files)", delivery.location, files.len()));
    let reading_options = options.clone();
    let reading_bar = bar.clone();
    let layout = delivery.layout;
    let declared = delivery.declared;
    let expected_rows = delivery.expected_rows.clone();
    let mut reading = tokio::task::spawn_blocking(move || {
        let mut reading =
            Reading::of_files(declared, &files, &expected_rows, &reading_options, &reading_bar)?;
        reading.identities.check()?;
        reading.reconciliation.layout = layout.as_str().to_string();
        Ok::<_, SourceError>(reading)
    })
    .await
    .map_err(|e| IngestError::Other(format!("the reading task failed: {e}")))??;
    bar.finish_and_clear();
    if reading.bills.is_empty() {
        return Err(IngestError::Other(format!(
            "{}: no rows{}: nothing was ingested, and no stored bill was touched",
            delivery.location,
            options.period.map(|p| format!(" of billing period {p}")).unwrap_or_default()
        )));
    }
    reading.reconciliation.bills = reading.bills.len() as u64;
    if let Some(month) = delivery.month
        && let Some(((other, provider, account), _)) = reading.bills.iter().find(|((p, ..), _)| *p != month)
    {
        return Err(IngestError::Other(format!(
            "{}: the export run lies in the date range of {month}, but holds {provider} {account}'s bill of \
             {other}: a run filed under another month's range. Nothing was ingested",
            delivery.location
        )));
    }
    refuse_unconvertible(store, &reading.bills, &delivery.location).await?;
    let stored: HashMap<(String, String, String), Bill> = store
        .bills(None)
        .await?
        .into_iter()
        .filter(|b| b.format == "focus")
        .map(|b| ((b.period.clone(), b.provider.clone(), b.billing_account.clone()), b))
        .collect();
    let settings = store.settings().await?;
    let now = chrono::Utc::now().timestamp();
    let mut replace = Vec::new();
    let mut results = Vec::new();
    reading.bills.sort_by(|a, b| a.0.cmp(&b.0));
    for ((period, provider, account), sums) in std::mem::take(&mut reading.bills) {
        let key = (period.to_string(), provider.clone(), account.clone());
        let before = stored.get(&key);
        let version = sums.version.unwrap_or(Version::V1_0).as_str().to_string();
        let result = BillResult {
            period: period.to_string(),
            provider: provider.clone(),
            billing_account: account.clone(),
            status: "ingested",
            focus_version: version.clone(),
            currency: sums.currency.clone(),
            rows: sums.rows,
            billed_total: decimal(sums.billed),
            effective_total: decimal(sums.effective),
            list_total: decimal(sums.list),
        };
        if !options.force && before.is_some_and(|b| b.data_version == data_version) {
            results.push(BillResult { status: "skipped", ..result });
            continue;
        }
        // Judged as every source's bills are: the bounds in force for the month, unless the
        // command gave its own.
        if let Some(before) = before {
            let bounds = settings.ingest_bounds(period).map_err(IngestError::Other)?;
            let allowance = super::judge::Allowance::of(
                bounds,
                options.force,
                false,
                options.max_drop_percent,
                options.max_rise_percent,
            );
            let mut stored_days = std::collections::BTreeMap::new();
            for charge in store.bill_charges(&before.period, Some(&before.provider)).await? {
                if charge.billing_account == before.billing_account {
                    *stored_days.entry(charge.day).or_insert(0) += charge.effective_nanos;
                }
            }
            let mut delivered_days = std::collections::BTreeMap::new();
            for (key, charge) in &sums.charges {
                *delivered_days.entry(key.day).or_insert(0) += charge.effective;
            }
            let delivered = super::judge::Delivered {
                period: &before.period,
                which: Some((&provider, &account)),
                deliverer: "the provider",
                rows_read: sums.rows,
                currency: &sums.currency,
                bill: super::judge::Figures {
                    data_version: data_version.clone(),
                    cost_nanos: sums.effective,
                    days: delivered_days,
                },
            };
            let stored = super::judge::Figures {
                data_version: before.data_version.clone(),
                cost_nanos: before.effective_nanos,
                days: stored_days,
            };
            if let Some(refusal) = super::judge::judge(&delivered, Some(&stored), allowance) {
                return Err(IngestError::Refused(Box::new(refusal)));
            }
        }
        let mut charges: Vec<BillCharge> = sums
            .charges
            .into_iter()
            .map(|(key, sums)| {
                let [
                    sub_account_id,
                    sub_account_name,
                    service_name,
                    service_category,
                    charge_category,
                    charge_class,
                    pricing_category,
                    commitment_discount_status,
                    region,
                    resource_type,
                    consumed_unit,
                    tags,
                    gpu_model,
                    commitment_discount_id,
                    commitment_discount_type,
                    commitment_discount_category,
                ] = key.text;
                BillCharge {
                    provider: provider.clone(),
                    billing_account: account.clone(),
                    day: key.day,
                    sub_account_id,
                    sub_account_name,
                    service_name,
                    service_category,
                    charge_category,
                    charge_class,
                    pricing_category,
                    commitment_discount_status,
                    region,
                    resource_type,
                    consumed_unit,
                    tags,
                    gpu_model,
                    commitment_discount_id,
                    commitment_discount_type,
                    commitment_discount_category,
                    gpu_hours: sums.gpu_hours,
                    consumed_quantity: sums.consumed_quantity,
                    charges: sums.charges,
                    billed_nanos: sums.billed,
                    effective_nanos: sums.effective,
                    list_nanos: sums.list,
                    contracted_nanos: sums.contracted,
                }
            })
            .collect();
        charges.sort_by(|a, b| {
            (a.day, &a.service_name, &a.charge_category).cmp(&(b.day, &b.service_name, &b.charge_category))
        });
        let vms: Vec<BillVmDay> = sums
            .vm_days
            .into_iter()
            .map(|vm_day| {
                let (instance, cluster, untagged) = vm_day.name.clone();
                let day = vm_day.day;
                let periods = vm_day.periods();
                BillVmDay {
                    provider: provider.clone(),
                    billing_account: account.clone(),
                    instance: instance.to_string(),
                    cluster: cluster.to_string(),
                    day,
                    charge_key: untagged.to_string(),
                    periods: BillVmDay::pack(day, &periods),
                }
            })
            .collect();
        let bill = Bill {
            period: period.to_string(),
            provider,
            billing_account: account,
            format: "focus".into(),
            billing_account_name: sums.billing_account_name,
            focus_version: version,
            currency: sums.currency,
            source: delivery.location.clone(),
            data_version: data_version.clone(),
            rows_read: sums.rows as i64,
            billed_nanos: sums.billed,
            effective_nanos: sums.effective,
            list_nanos: sums.list,
            contracted_nanos: sums.contracted,
            deviations: serde_json::to_string(&reading.reconciliation.deviations)
                .unwrap_or_else(|_| "{}".into()),
            ingested_at: now,
        };
        replace.push((bill, charges, vms));
        results.push(result);
    }
    if !replace.is_empty() {
        store.replace_bills(&replace).await?;
    }
    Ok((results, reading.reconciliation))
}

/// Every bill in another currency than the reporting one needs a rate in force for its
/// month, or the ledger cannot count it: refused before anything is written, saying which
/// rate to set.
async fn refuse_unconvertible(
    store: &dyn Store,
    bills: &[((Period, String, String), BillSums)],
    location: &str,
) -> Result<(), IngestError> {
    use crate::domain::fx::{REPORTING_CURRENCY, rate_for};
    let rates = store.fx_rates().await?;
    for ((period, provider, account), sums) in bills {
        let month = period.to_string();
        if sums.currency.is_empty()
            || sums.currency == REPORTING_CURRENCY
            || rate_for(&rates, &sums.currency, REPORTING_CURRENCY, &month).is_some()
        {
            continue;
        }
        return Err(IngestError::Other(format!(
            "{location}: {month} {provider} {account} is billed in {currency}, and no exchange rate from \
             {currency} to {REPORTING_CURRENCY} is in force for {month}: refused, nothing was written. Set one \
             (gpuledger fx set {currency} {REPORTING_CURRENCY} RATE --from {month}) and ingest again",
            currency = sums.currency,
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "BilledCost,EffectiveCost,BillingCurrency,BillingAccountId,BillingPeriodStart,\
        ChargePeriodStart,ChargePeriodEnd,ChargeCategory,ProviderName,ServiceName,Tags";

    /// A FOCUS CSV of `rows` (cost, currency, service, tags) on 2026-10-01 in account `A`.
    fn file(dir: &Path, name: &str, rows: &[(&str, &str, &str, &str)]) -> (PathBuf, String) {
        let mut text = format!("{HEADER}\n");
        for (cost, currency, service, tags) in rows {
            text.push_str(&format!(
                "{cost},{cost},{currency},A,2026-10-01T00:00:00Z,2026-10-01T00:00:00Z,\
                 2026-10-01T01:00:00Z,Usage,Google Cloud,{service},\"{}\"\n",
                tags.replace('"', "\"\"")
            ));
        }
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        (path, name.to_string())
    }

    fn read(files: &[(PathBuf, String)]) -> Result<Reading, SourceError> {
        Reading::of_files(None, files, &[], &FocusIngestOptions::default(), &indicatif::ProgressBar::hidden())
    }

    #[test]
    fn files_read_side_by_side_add_up_to_one_bill_with_each_group_once() {
        let dir = tempfile::tempdir().unwrap();
        let run = r#"{"team": "a"}"#;
        // The same tags written in another order are the same group.
        let run_again = r#"{ "team":"a" }"#;
        let files = [
            file(dir.path(), "1.csv", &[("1.25", "USD", "Compute", run), ("2", "USD", "Storage", "")]),
            file(dir.path(), "2.csv", &[("0.5", "USD", "Compute", run_again), ("3", "USD", "Compute", "")]),
            file(dir.path(), "3.csv", &[("10", "USD", "Storage", "")]),
        ];
        let reading = read(&files).unwrap();
        assert_eq!(reading.reconciliation.files, 3);
        assert_eq!(reading.reconciliation.rows_read, 5);
        let [(_, bill)] = &reading.bills[..] else { panic!("one bill: {:?}", reading.bills) };
        assert_eq!(bill.rows, 5);
        // 1.25 + 2 + 0.5 + 3 + 10 = 16.75
        assert_eq!(bill.billed, 16_750_000_000);
        let groups: Vec<(&str, &str, i64, i64)> = bill
            .charges
            .iter()
            .map(|(key, sums)| (key.text[2].as_str(), key.text[TAGS].as_str(), sums.charges, sums.billed))
            .collect();
        assert_eq!(
            groups,
            [
                ("Compute", r#"{"team":"a"}"#, 2, 1_750_000_000),
                ("Storage", "{}", 2, 12_000_000_000),
                ("Compute", "{}", 1, 3_000_000_000),
            ],
            "in the order first seen, each group once"
        );
    }

    #[test]
    fn a_second_currency_in_a_later_file_is_refused_naming_its_row() {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            file(dir.path(), "1.csv", &[("1", "USD", "Compute", "")]),
            file(dir.path(), "2.csv", &[("2", "USD", "Compute", ""), ("3", "USD", "Compute", "")]),
            file(dir.path(), "3.csv", &[("1", "EUR", "Compute", "")]),
            file(dir.path(), "4.csv", &[("1", "GBP", "Compute", "")]),
        ];
        let error = read(&files).expect_err("refused").to_string();
        assert_eq!(
            error,
            "3.csv: data row 1, column BillingCurrency: EUR in a bill in USD (since 1.csv, data row 1): \
             one bill has one currency"
        );
    }
}
