//! Where one delivery's data files are read from while it is ingested (a copy of an object
//! store's, or the local folder's own), whatever the bill source, removed when done or, after
//! a kill, by the next ingest.

use std::path::PathBuf;

/// Where downloaded or local data files are read from during one period's ingest.
pub struct Scratch {
    pub dir: PathBuf,
}

/// Scratch folders are named `gpuledger-ingest-PID-NANOS` in the temporary folder.
const SCRATCH_PREFIX: &str = "gpuledger-ingest-";

impl Scratch {
    pub fn new() -> std::io::Result<Scratch> {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("{SCRATCH_PREFIX}{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch { dir })
    }
}

/// Removes the scratch folders of ingests whose process is gone (killed before its `Drop`
/// could run): a downloaded month is gigabytes. Every ingest of a bill source runs it first, also one
/// that finds nothing new to read (and so makes no scratch folder of its own).
pub fn remove_abandoned_scratch() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(pid) = name.strip_prefix(SCRATCH_PREFIX).and_then(|rest| rest.split('-').next()) else {
            continue;
        };
        if pid.parse::<i64>().is_ok_and(|pid| !crate::host::process_alive(pid)) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
