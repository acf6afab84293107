//! Embeds the migration files in the binary: one list per backend, read from
//! `migrations/<backend>/NNNN_name.sql`, so a new file is a new migration and the two backends
//! cannot disagree on which migrations there are.

use std::fmt::Write;
use std::path::Path;

const BACKENDS: [&str; 2] = ["sqlite", "postgres"];

/// `0007_settings.sql` → (7, "settings").
fn parse(file: &str) -> Option<(i64, &str)> {
    let (number, name) = file.strip_suffix(".sql")?.split_once('_')?;
    Some((number.parse().ok()?, name))
}

fn main() {
    let mut out = String::new();
    let mut lists: Vec<Vec<(i64, String)>> = Vec::new();
    for backend in BACKENDS {
        let folder = Path::new("migrations").join(backend);
        println!("cargo:rerun-if-changed={}", folder.display());
        let mut files: Vec<String> = std::fs::read_dir(&folder)
            .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
            .map(|entry| entry.expect("a readable folder entry").file_name().to_string_lossy().into_owned())
            .filter(|file| file.ends_with(".sql"))
            .collect();
        files.sort();
        let mut list = Vec::new();
        writeln!(
            out,
            "/// {backend} migrations, oldest first (made from `migrations/{backend}/` by build.rs)."
        )
        .unwrap();
        writeln!(out, "pub(crate) const {}: &[Migration] = &[", backend.to_uppercase()).unwrap();
        for file in &files {
            let Some((version, name)) = parse(file) else {
                panic!("migrations/{backend}/{file}: a migration is named NNNN_name.sql");
            };
            let expected = list.len() as i64 + 1;
            assert!(
                version == expected,
                "migrations/{backend}/{file}: expected number {expected:04} (no gaps, no repeats)"
            );
            writeln!(
                out,
                "    Migration {{ version: {version}, name: {name:?}, sql: include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/migrations/{backend}/{file}\")) }},"
            )
            .unwrap();
            list.push((version, name.to_string()));
        }
        writeln!(out, "];").unwrap();
        lists.push(list);
    }
    assert!(
        lists[0] == lists[1],
        "migrations/sqlite and migrations/postgres must hold the same migrations (number and name): {:?} against {:?}",
        lists[0],
        lists[1]
    );
    let path = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("migrations.rs");
    std::fs::write(&path, out).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
