//! What a process may ask of the machine it runs on: its name, whether a process lives.

/// This machine's name, as runs record it (`/etc/hostname`, else `HOSTNAME`, else `localhost`).
pub fn this_host() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Whether a process of this host is alive. Only Linux can tell (`/proc`); elsewhere every
/// process counts as alive, so nothing of a live run is wrongly closed or removed.
pub fn process_alive(pid: i64) -> bool {
    if !std::path::Path::new("/proc/self").exists() {
        return true;
    }
    pid > 0 && std::path::Path::new(&format!("/proc/{pid}")).exists()
}
