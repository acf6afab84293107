//! The docs a newcomer walks: the code map names files that exist and every top-level
//! module; every relative link of the README and docs/ leads somewhere.

use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The backticked paths of `text` that start with one of the repository's folders.
fn code_paths(text: &str) -> Vec<String> {
    const FOLDERS: [&str; 9] =
        ["src/", "tests/", "scripts/", "templates/", "static/", "migrations/", "docs/", "benches/", ".ci/"];
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|quoted| FOLDERS.iter().any(|f| quoted.starts_with(f)) && !quoted.contains(' '))
        .map(String::from)
        .collect()
}

#[test]
fn the_code_map_names_files_that_exist_and_every_top_level_module() {
    let map = read("docs/ARCHITECTURE.md");
    let paths = code_paths(&map);
    assert!(paths.len() > 50, "the code map names {} paths", paths.len());
    let missing: Vec<&String> = paths.iter().filter(|p| !Path::new(ROOT).join(p.as_str()).exists()).collect();
    assert!(missing.is_empty(), "docs/ARCHITECTURE.md names paths that do not exist: {missing:?}");

    let modules: Vec<String> = read("src/lib.rs")
        .lines()
        .filter_map(|line| line.strip_prefix("pub mod ")?.strip_suffix(';').map(String::from))
        .collect();
    assert!(modules.len() >= 20, "src/lib.rs declares {} modules", modules.len());
    let unmapped: Vec<&String> = modules
        .iter()
        .filter(|m| !paths.iter().any(|p| *p == format!("src/{m}.rs") || p.starts_with(&format!("src/{m}/"))))
        .collect();
    assert!(unmapped.is_empty(), "top-level modules the code map misses: {unmapped:?}");
}

#[test]
fn the_readme_and_the_docs_link_to_what_exists_and_the_readme_stays_short() {
    let readme = read("README.md");
    assert!(readme.lines().count() <= 300, "README.md has {} lines", readme.lines().count());
    for (file, folder) in [
        ("README.md", ""),
        ("docs/ARCHITECTURE.md", "docs/"),
        ("docs/METRICS.md", "docs/"),
        ("docs/OPERATIONS.md", "docs/"),
        ("docs/BENCHMARKS.md", "docs/"),
    ] {
        let text = read(file);
        for link in text.split("](").skip(1).filter_map(|rest| rest.split(')').next()) {
            let target = link.split('#').next().unwrap();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let path = Path::new(ROOT).join(folder).join(target);
            assert!(path.exists(), "{file} links to {link}, which does not exist");
        }
        for path in code_paths(&text) {
            assert!(Path::new(ROOT).join(&path).exists(), "{file} names {path}, which does not exist");
        }
    }
}
