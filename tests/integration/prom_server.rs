//! A real Prometheus 2.42 server for integration tests: an OpenMetrics file is backfilled with
//! `promtool tsdb create-blocks-from openmetrics`, then `prometheus` serves those blocks on a free
//! loopback port (recipe: `shared/reference/prometheus.md` §3.2–3.3). Tests are skipped when the
//! binaries are not on PATH. `timestamped_openmetrics` turns a real exporter scrape, which has no
//! timestamps, into a file promtool accepts.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::s3::free_port;

/// How long a fresh server may take to open its blocks and answer `/-/ready` (≈1 s is usual).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A Prometheus server on a free loopback port, serving only backfilled blocks (no scrape
/// configs, so no head data); killed by its process id when dropped.
pub struct Prometheus {
    /// Base URL without a trailing slash, e.g. `http://127.0.0.1:40123`.
    pub url: String,
    child: Child,
    /// Holds the TSDB, the config and `prometheus.log`; removed after `drop` has stopped the child.
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Kills the server now, for a test whose source stops answering half-way. Calling it twice,
    /// or dropping the server afterwards, is harmless.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Backfills `openmetrics` into a fresh TSDB and starts Prometheus on it, returning once the
/// server is ready; or returns `None` (test skipped) when `promtool` or `prometheus` is not on
/// PATH. Panics with promtool's output if the backfill fails, or with the server log if the
/// server exits or is not ready within 60 s.
///
/// Queries must pass explicit `start`/`end` inside the file's time range.
pub fn start_prometheus(openmetrics: &Path) -> Option<Prometheus> {
    let missing: Vec<&str> = ["promtool", "prometheus"].into_iter().filter(|name| !on_path(name)).collect();
    if !missing.is_empty() {
        eprintln!(
            "{} not on PATH: Prometheus test skipped (apt-get install prometheus)",
            missing.join(" and ")
        );
        return None;
    }
    let dir = tempfile::tempdir().expect("create a temp dir for Prometheus");
    let tsdb = dir.path().join("tsdb");
    // 24h blocks: promtool re-parses the whole file once per block, so 2h blocks are slow.
    let backfill = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=24h"])
        .arg(openmetrics)
        .arg(&tsdb)
        .output()
        .expect("run promtool");
    assert!(
        backfill.status.success(),
        "promtool could not backfill {} ({}):\n{}{}",
        openmetrics.display(),
        backfill.status,
        String::from_utf8_lossy(&backfill.stderr),
        String::from_utf8_lossy(&backfill.stdout),
    );

    let config = dir.path().join("prometheus.yml");
    std::fs::write(&config, "global:\n  scrape_interval: 15s\n").expect("write prometheus.yml");
    let log_path = dir.path().join("prometheus.log");
    let log = File::create(&log_path).expect("create prometheus.log");
    let port = free_port();
    let child = Command::new("prometheus")
        .arg(flag("--config.file=", &config))
        .arg(flag("--storage.tsdb.path=", &tsdb))
        // Retention counts back from the newest block, but a fixed old dataset must never expire.
        .arg("--storage.tsdb.retention.time=100y")
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(log.try_clone().expect("share prometheus.log"))
        .stderr(log)
        .spawn()
        .expect("start prometheus");
    // Built before polling, so a panic below still kills the child.
    let mut server = Prometheus { url: format!("http://127.0.0.1:{port}"), child, _dir: dir };

    let deadline = Instant::now() + READY_TIMEOUT;
    while !is_ready(port) {
        let exited = server.child.try_wait().expect("poll the prometheus process");
        if exited.is_some() || Instant::now() >= deadline {
            let why = match exited {
                Some(status) => format!("exited with {status}"),
                None => format!("not ready after {} s", READY_TIMEOUT.as_secs()),
            };
            let log = std::fs::read_to_string(&log_path).unwrap_or_else(|error| format!("(no log: {error})"));
            panic!("prometheus on port {port} {why}; its log:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(server)
}

/// Turns a real exporter scrape (Prometheus text format, no timestamps) into an OpenMetrics file
/// for `promtool`, with every series' value repeated at each of `timestamps` (unix seconds,
/// strictly ascending).
///
/// Each metric name becomes one family, typed `counter` when the source declares it so (DCGM
/// counters have no `_total` suffix, which promtool accepts) and `gauge` otherwise. Families and
/// series keep their first-seen order, a family's series stay together, a series seen twice keeps
/// its first value, label values are kept byte for byte, `# HELP` and other comments are dropped,
/// and so are samples whose value is not a number.
pub fn timestamped_openmetrics(exposition: &str, timestamps: &[i64]) -> String {
    assert!(!timestamps.is_empty(), "timestamped_openmetrics needs at least one timestamp");
    // promtool silently drops a sample older than the one before it in the same block.
    assert!(
        timestamps.windows(2).all(|pair| pair[0] < pair[1]),
        "timestamps must be strictly ascending: {timestamps:?}"
    );
    let counters = declared_counters(exposition);
    let mut families: Vec<Family> = Vec::new();
    let mut family_of: HashMap<&str, usize> = HashMap::new();
    let mut seen = HashSet::new();
    for line in exposition.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(sample) = parse_sample(line) else { continue };
        // Prometheus ignores label order and drops empty labels, so the series is the sorted rest.
        let mut identity: Vec<(&str, &str)> =
            sample.labels.iter().copied().filter(|(_, value)| !value.is_empty()).collect();
        identity.sort_unstable();
        if !seen.insert((sample.name, identity)) {
            continue;
        }
        let index = *family_of.entry(sample.name).or_insert_with(|| {
            families.push(Family { name: sample.name, series: Vec::new() });
            families.len() - 1
        });
        families[index].series.push(sample.series_and_value());
    }

    let mut out = String::new();
    for family in &families {
        let is_counter = counters.contains(family.name)
            || family.name.strip_suffix("_total").is_some_and(|base| counters.contains(base));
        let kind = if is_counter { "counter" } else { "gauge" };
        writeln!(out, "# TYPE {} {kind}", family.name).expect("write to a String");
        for (series, value) in &family.series {
            for timestamp in timestamps {
                writeln!(out, "{series} {value} {timestamp}").expect("write to a String");
            }
        }
    }
    out.push_str("# EOF\n");
    out
}

/// One metric family of the output: its name and its series as (`name{labels}`, value).
struct Family<'a> {
    name: &'a str,
    series: Vec<(String, String)>,
}

/// One sample line of a text exposition; label values are still escaped, exactly as written.
struct Sample<'a> {
    name: &'a str,
    labels: Vec<(&'a str, &'a str)>,
    value: f64,
    value_text: &'a str,
}

impl Sample<'_> {
    /// The series as OpenMetrics writes it (`name{a="1",b="2"}`, or `name` with no labels) and
    /// its value, with NaN and infinities spelled the way every Prometheus parser reads them.
    fn series_and_value(&self) -> (String, String) {
        let mut series = self.name.to_owned();
        if !self.labels.is_empty() {
            let pairs: Vec<String> =
                self.labels.iter().map(|(name, value)| format!("{name}=\"{value}\"")).collect();
            write!(series, "{{{}}}", pairs.join(",")).expect("write to a String");
        }
        let value = if self.value.is_nan() {
            "NaN".to_owned()
        } else if self.value.is_infinite() {
            if self.value > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
        } else {
            self.value_text.to_owned()
        };
        (series, value)
    }
}

/// Names that the exposition declares with `# TYPE <name> counter`.
fn declared_counters(exposition: &str) -> HashSet<&str> {
    let mut counters = HashSet::new();
    for line in exposition.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let ["#", "TYPE", name, "counter"] = words[..] {
            counters.insert(name);
        }
    }
    counters
}

/// Parses `name{label="value",...} value [timestamp]`; `None` when the value is not a number.
/// Panics on a line that is not a sample at all, so a broken fixture fails loudly.
fn parse_sample(line: &str) -> Option<Sample<'_>> {
    let malformed = |why: &str| -> ! { panic!("not a sample line ({why}): {line}") };
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace()).unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() {
        malformed("no metric name");
    }
    let mut rest = line[name_end..].trim_start();
    let mut labels = Vec::new();
    if let Some(inside) = rest.strip_prefix('{') {
        rest = inside;
        loop {
            rest = rest.trim_start();
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let Some((label, after)) = rest.split_once('=') else { malformed("label without '='") };
            let Some(quoted) = after.trim_start().strip_prefix('"') else {
                malformed("unquoted label value")
            };
            let Some(end) = closing_quote(quoted) else { malformed("unterminated label value") };
            labels.push((label.trim(), &quoted[..end]));
            rest = quoted[end + 1..].trim_start();
            match rest.strip_prefix(',') {
                Some(after_comma) => rest = after_comma,
                None if rest.starts_with('}') => {}
                None => malformed("expected ',' or '}' after a label"),
            }
        }
    }
    let value_text = rest.split_whitespace().next()?;
    let value = value_text.parse().ok()?;
    Some(Sample { name, labels, value, value_text })
}

/// Byte index of the quote that ends a label value, skipping `\"` and `\\` escapes.
fn closing_quote(quoted: &str) -> Option<usize> {
    let mut escaped = false;
    for (index, byte) in quoted.bytes().enumerate() {
        match byte {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b'"' => return Some(index),
            _ => {}
        }
    }
    None
}

/// Whether `binary --version` runs, i.e. the binary is on PATH.
fn on_path(binary: &str) -> bool {
    Command::new(binary)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// `--name=` followed by a path, without going through a lossy `String`.
fn flag(name: &str, path: &Path) -> OsString {
    let mut flag = OsString::from(name);
    flag.push(path);
    flag
}

/// Whether `GET /-/ready` answers 200 (Prometheus answers 503 while it opens the TSDB).
fn is_ready(port: u16) -> bool {
    let address = SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_secs(1)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream.write_all(b"GET /-/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").is_err() {
        return false;
    }
    // On an error the bytes read so far are kept, and the status line comes first.
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    String::from_utf8_lossy(&response).lines().next().is_some_and(|status| status.contains(" 200 "))
}
