//! Finding CUR 2.0 deliveries: billing periods through their manifests, and only the files
//! a manifest lists (CUR reference §1). A recursive listing would count CREATE_NEW folders of
//! earlier refreshes and the empty chunks an OVERWRITE leaves behind.

pub mod reader;

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::objects::{LocalFolder, ObjectStore};
use super::{SourceError, invalid};
use crate::period::Period;

/// One billing period as its latest manifest describes it.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub period: Period,
    /// The manifest's key in the store.
    pub manifest_key: String,
    /// executionId, else the manifest's ETag, else its size and content hash.
    pub data_version: String,
    /// Keys of the data files, in manifest order.
    pub data_files: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    execution_id: Option<String>,
    data_files: Vec<String>,
    /// Optional: `YYYY-MM`, or `{"start": ..., "end": ...}` as the legacy CUR wrote it.
    billing_period: Option<serde_json::Value>,
}

/// The period a manifest's own `billingPeriod` names, when it names one.
fn manifest_period(value: &serde_json::Value) -> Option<Period> {
    let text = match value {
        serde_json::Value::String(text) => text.as_str(),
        serde_json::Value::Object(fields) => fields.get("start")?.as_str()?,
        _ => return None,
    };
    text.get(..7)?.parse().ok()
}

/// Parses a `billing_period=YYYY-MM` folder name, case-insensitively.
pub fn partition_period(name: &str) -> Option<Period> {
    let (key, value) = name.split_once('=')?;
    if !key.eq_ignore_ascii_case("billing_period") {
        return None;
    }
    value.parse().ok()
}

/// Resolves a local SOURCE: an export root (holding `metadata/`), or one billing-period
/// folder under `metadata/` or `data/`, which limits the ingest to that period.
pub fn local_source(path: &Path) -> Result<(LocalFolder, Option<Period>), SourceError> {
    if path.join("metadata").is_dir() {
        return Ok((LocalFolder { root: path.to_path_buf() }, None));
    }
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if let Some(period) = partition_period(&name) {
        let parent = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let root = parent.parent().map(Path::to_path_buf).unwrap_or_default();
        return Ok((LocalFolder { root }, Some(period)));
    }
    if !path.exists() {
        return Err(invalid(path.display().to_string(), "no such folder"));
    }
    let mut exports = Vec::new();
    find_exports(path, 4, &mut exports);
    if !exports.is_empty() {
        exports.sort();
        let listed: Vec<String> = exports.iter().map(|e| format!("  {}", e.display())).collect();
        return Err(invalid(
            path.display().to_string(),
            format!(
                "this folder holds {} CUR 2.0 export(s) deeper down; give one of them as SOURCE:\n{}",
                exports.len(),
                listed.join("\n")
            ),
        ));
    }
    Err(invalid(
        path.display().to_string(),
        "not a CUR 2.0 export: expected a folder holding metadata/, or a BILLING_PERIOD=YYYY-MM folder",
    ))
}

/// Export roots (folders holding `metadata/BILLING_PERIOD=…`) under `folder`, up to `depth`
/// levels down: what a synced bucket looks like.
fn find_exports(folder: &Path, depth: u32, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(folder) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let has_periods = std::fs::read_dir(path.join("metadata")).is_ok_and(|mut periods| {
            periods.any(|p| p.is_ok_and(|p| partition_period(&p.file_name().to_string_lossy()).is_some()))
        });
        if has_periods {
            found.push(path);
        } else if depth > 1 {
            find_exports(&path, depth - 1, found);
        }
    }
}

/// The export's name: the root folder's last segment (what manifests are named after).
fn export_name(store: &dyn ObjectStore) -> String {
    let described = store.describe();
    let trimmed = described.trim_end_matches('/');
    PathBuf::from(trimmed).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Finds the deliveries under `metadata/`, oldest first, optionally one period only.
pub async fn discover(store: &dyn ObjectStore, only: Option<Period>) -> Result<Vec<Delivery>, SourceError> {
    let folders = store.folders("metadata/").await?;
    let mut partitions: Vec<(Period, String)> =
        folders.iter().filter_map(|name| partition_period(name).map(|p| (p, name.clone()))).collect();
    partitions.sort();
    if let Some(period) = only {
        partitions.retain(|(p, _)| *p == period);
        if partitions.is_empty() {
            return Err(invalid(
                store.locate(&format!("metadata/BILLING_PERIOD={period}/")),
                "no manifest for this billing period (the metadata folder for it is missing)",
            ));
        }
    }
    if partitions.is_empty() {
        return Err(invalid(
            store.locate("metadata/"),
            "no BILLING_PERIOD=YYYY-MM folders with manifests: is this a CUR 2.0 export root?",
        ));
    }
    let export = export_name(store);
    let mut deliveries = Vec::new();
    for (period, folder) in partitions {
        deliveries.push(read_manifest(store, period, &folder, &export).await?);
    }
    Ok(deliveries)
}

async fn read_manifest(
    store: &dyn ObjectStore,
    period: Period,
    folder: &str,
    export: &str,
) -> Result<Delivery, SourceError> {
    let prefix = format!("metadata/{folder}/");
    // AWS documents both names; real deliveries use `<export>-Manifest.json`.
    let mut candidates = vec![format!("{prefix}{export}-Manifest.json"), format!("{prefix}Manifest.json")];
    for file in store.files(&prefix).await? {
        if file.ends_with("Manifest.json") {
            candidates.push(format!("{prefix}{file}"));
        }
    }
    for key in candidates {
        let Some(object) = store.get(&key).await? else { continue };
        let manifest: Manifest = serde_json::from_slice(&object.bytes)
            .map_err(|e| invalid(store.locate(&key), format!("the manifest is not valid JSON: {e}")))?;
        let data_version =
            manifest.execution_id.filter(|id| !id.is_empty()).or(object.etag).unwrap_or_else(|| {
                format!("size:{}:{:016x}", object.bytes.len(), content_hash(&object.bytes))
            });
        let location = store.locate(&key);
        if let Some(named) = manifest.billing_period.as_ref().and_then(manifest_period)
            && named != period
        {
            return Err(invalid(
                &location,
                format!("the manifest's billingPeriod is {named}, but it lies in the folder of {period}"),
            ));
        }
        let mut data_files: Vec<String> = Vec::with_capacity(manifest.data_files.len());
        // Every data file lies in one export: the part of its URI before `/data/` is the same.
        let mut roots: Vec<&str> = manifest
            .data_files
            .iter()
            .map(|uri| uri.rfind("/data/").map_or(uri.as_str(), |i| &uri[..i]))
            .collect();
        roots.sort_unstable();
        roots.dedup();
        if roots.len() > 1 {
            return Err(invalid(
                &location,
                format!("dataFiles name files of more than one export: {}", roots.join(", ")),
            ));
        }
        for uri in &manifest.data_files {
            let data_key = store.key_of_uri(uri).ok_or_else(|| {
                invalid(
                    &location,
                    format!("dataFiles entry {uri:?} lies outside the export root {}", store.describe()),
                )
            })?;
            if let Some(other) = data_key.split('/').filter_map(partition_period).find(|p| *p != period) {
                return Err(invalid(
                    &location,
                    format!("dataFiles entry {uri:?} lies in the billing period {other}, not {period}"),
                ));
            }
            if data_files.contains(&data_key) {
                return Err(invalid(
                    &location,
                    format!("dataFiles lists {uri:?} twice: its cost would count twice"),
                ));
            }
            data_files.push(data_key);
        }
        return Ok(Delivery { period, data_version, data_files, manifest_key: key });
    }
    Err(invalid(
        store.locate(&prefix),
        format!(
            "no manifest in this billing-period folder (expected {export}-Manifest.json or Manifest.json)"
        ),
    ))
}

fn content_hash(bytes: &[u8]) -> u64 {
    // FNV-1a: a stable fingerprint for manifests that carry no executionId.
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_parse_in_either_case() {
        assert_eq!(
            partition_period("BILLING_PERIOD=2026-10").map(|p| p.to_string()).as_deref(),
            Some("2026-10")
        );
        assert_eq!(
            partition_period("billing_period=2026-05").map(|p| p.to_string()).as_deref(),
            Some("2026-05")
        );
        assert_eq!(partition_period("year=2026"), None);
        assert_eq!(partition_period("BILLING_PERIOD=2026"), None);
    }

    #[test]
    fn data_file_uris_map_to_keys_under_the_export_root() {
        let local = LocalFolder { root: "/tmp/x/cur/exp".into() };
        assert_eq!(
            local
                .key_of_uri("s3://bucket/cur/exp/data/BILLING_PERIOD=2026-10/exp-00001.snappy.parquet")
                .as_deref(),
            Some("data/BILLING_PERIOD=2026-10/exp-00001.snappy.parquet")
        );
        assert_eq!(
            local.key_of_uri("s3://bucket/cur/exp/data/BILLING_PERIOD=2026-10/../../../etc/passwd"),
            None
        );
        assert_eq!(local.key_of_uri("s3://bucket/cur/exp/data/"), None);
    }
}
