//! OpenMetrics / Prometheus text files with timestamps: the generator's output, or metrics
//! exported from an air-gapped cluster. Read line by line into a [`Collector`]; only the
//! metrics [`MetricNames`] knows are kept.

use std::io::BufRead;

use super::{Collector, Labels, MetricNames, Observed};

/// A line that cannot be read, with where it is.
#[derive(Debug, thiserror::Error)]
#[error("{path}:{line}: {message}")]
pub struct ParseError {
    pub path: String,
    pub line: u64,
    pub message: String,
}

/// Reads every sample of `input` into `collector`; `path` names it in errors, and
/// `progress` is told how many bytes were read.
pub fn read_into(
    input: impl BufRead,
    path: &str,
    names: &MetricNames,
    collector: &mut Collector,
    progress: &dyn Fn(u64),
) -> Result<(), ParseError> {
    let mut last: Option<(String, Option<usize>)> = None;
    let mut line_number = 0u64;
    let mut bytes = 0u64;
    let mut saw_eof = false;
    for line in input.lines() {
        line_number += 1;
        let fail = |message: String| ParseError { path: path.to_string(), line: line_number, message };
        let line = line.map_err(|e| fail(format!("cannot read: {e}")))?;
        bytes += line.len() as u64 + 1;
        if line_number % 65_536 == 0 {
            progress(bytes);
        }
        if saw_eof && !line.is_empty() {
            return Err(fail("data after `# EOF`".into()));
        }
        if line.starts_with('#') {
            saw_eof |= line == "# EOF";
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        let sample = parse_line(&line).map_err(fail)?;
        let key = &line[..sample.key_len];
        let id = match &last {
            Some((previous, id)) if previous == key => *id,
            _ => {
                let id = names.role(sample.name).map(|role| {
                    collector.series_id(key, || {
                        (
                            sample.name.to_string(),
                            role,
                            parse_labels(&line[sample.name.len()..sample.key_len]),
                        )
                    })
                });
                last = Some((key.to_string(), id));
                id
            }
        };
        let Some(id) = id else { continue };
        let Some(t_ms) = sample.t_ms else {
            return Err(fail("a sample without a timestamp; export with timestamps (unix seconds)".into()));
        };
        if collector.observe(id, t_ms, sample.value) == Observed::NotNewer {
            return Err(fail(format!(
                "{} is not later than the previous sample of the same series (samples of a series must \
                 be in time order)",
                line[sample.key_len..].trim()
            )));
        }
    }
    progress(bytes);
    if !saw_eof {
        return Err(ParseError {
            path: path.to_string(),
            line: line_number,
            message: "the file ends without `# EOF` (truncated?)".into(),
        });
    }
    Ok(())
}

struct Sample<'a> {
    name: &'a str,
    /// Length of `name{labels}`: the series key.
    key_len: usize,
    value: f64,
    t_ms: Option<i64>,
}

fn parse_line(line: &str) -> Result<Sample<'_>, String> {
    let name_end = line.find(['{', ' ']).ok_or_else(|| format!("not a sample line: {line:?}"))?;
    let name = &line[..name_end];
    let key_len = if line.as_bytes()[name_end] == b'{' {
        labels_end(line, name_end).ok_or_else(|| format!("unclosed label set in {line:?}"))?
    } else {
        name_end
    };
    let mut fields = line[key_len..].split_ascii_whitespace();
    let value = fields.next().ok_or_else(|| format!("no value in {line:?}"))?;
    let value = parse_value(value).ok_or_else(|| format!("value {value:?} is not a number"))?;
    let t_ms = match fields.next() {
        None => None,
        Some(t) => {
            let seconds: f64 = t.parse().map_err(|_| format!("timestamp {t:?} is not a number"))?;
            if seconds > 1e11 {
                return Err(format!(
                    "timestamp {t} looks like milliseconds; OpenMetrics timestamps are seconds"
                ));
            }
            Some((seconds * 1000.0).round() as i64)
        }
    };
    Ok(Sample { name, key_len, value, t_ms })
}

/// Prometheus value text: a float, or `NaN`, `+Inf`, `-Inf`.
pub fn parse_value(text: &str) -> Option<f64> {
    match text {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => text.parse().ok(),
    }
}

/// The index just past the `}` closing the label set that opens at `open`.
fn labels_end(line: &str, open: usize) -> Option<usize> {
    let bytes = line.as_bytes();
    let mut in_quotes = false;
    let mut i = open + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if in_quotes => i += 1,
            b'"' => in_quotes = !in_quotes,
            b'}' if !in_quotes => return Some(i + 1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// `{a="1",b="x\"y"}` into sorted pairs; empty values are dropped, as Prometheus does.
pub fn parse_labels(block: &str) -> Labels {
    let inner = block.trim().trim_start_matches('{').trim_end_matches('}');
    let mut labels = Vec::new();
    let mut rest = inner;
    while let Some(eq) = rest.find('=') {
        let key = rest[..eq].trim().trim_start_matches(',').trim().to_string();
        let after = rest[eq + 1..].trim_start();
        let Some(body) = after.strip_prefix('"') else { break };
        let mut value = String::new();
        let mut chars = body.char_indices();
        let mut consumed = body.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => {}
                },
                '"' => {
                    consumed = i + 1;
                    break;
                }
                other => value.push(other),
            }
        }
        if !value.is_empty() {
            labels.push((key, value));
        }
        rest = &body[consumed..];
    }
    labels.sort();
    labels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::prometheus::Role;

    #[test]
    fn labels_with_escapes_and_spaces_in_values() {
        let labels = parse_labels(r#"{modelName="NVIDIA H100 80GB HBM3",b="x\"y,z}",pod=""}"#);
        assert_eq!(
            labels,
            vec![("b".into(), "x\"y,z}".into()), ("modelName".into(), "NVIDIA H100 80GB HBM3".into())]
        );
        assert_eq!(labels_end(r#"m{b="}"} 1"#, 1), Some(8));
    }

    #[test]
    fn a_small_file_folds_into_hours() {
        // Two samples in hour H (0.5 and 1.0: mean 0.75), one at H+1h; an unknown metric is
        // skipped; a counter steps 0 → 7 → 10 over the hour's end.
        let text = "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n\
            DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID=\"GPU-1\",pod=\"p\"} 0.500000 1790812800\n\
            DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID=\"GPU-1\",pod=\"p\"} 1.000000 1790814600\n\
            DCGM_FI_PROF_GR_ENGINE_ACTIVE{UUID=\"GPU-1\",pod=\"p\"} 0.000000 1790816400\n\
            DCGM_FI_DEV_POWER_USAGE{UUID=\"GPU-1\"} 300 1790812800\n\
            vllm:request_success_total{pod=\"p\"} 0 1790812800\n\
            vllm:request_success_total{pod=\"p\"} 7 1790814600\n\
            vllm:request_success_total{pod=\"p\"} 10 1790816400\n\
            # EOF\n";
        let h = 1_790_812_800;
        let mut c = Collector::new(h, h + 7200);
        read_into(text.as_bytes(), "t.om", &MetricNames::default(), &mut c, &|_| {}).unwrap();
        assert_eq!(c.series.len(), 2);
        let gauge = &c.series[0];
        assert_eq!(
            (gauge.role, gauge.hours[0].samples, gauge.hours[0].sum / 2.0),
            (Role::EngineActive, 2, 0.75)
        );
        assert_eq!(c.series[1].hours[0].sum, 10.0);
    }

    #[test]
    fn truncated_files_and_missing_timestamps_say_where() {
        let names = MetricNames::default();
        let mut c = Collector::new(0, 3600);
        let cut = "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-1\"} 5 60\n";
        let error = read_into(cut.as_bytes(), "a.om", &names, &mut c, &|_| {}).unwrap_err();
        assert!(error.to_string().contains("a.om:1: the file ends without `# EOF`"), "{error}");
        let untimed = "DCGM_FI_DEV_GPU_UTIL{UUID=\"GPU-2\"} 5\n# EOF\n";
        let error = read_into(untimed.as_bytes(), "b.om", &names, &mut c, &|_| {}).unwrap_err();
        assert!(error.to_string().starts_with("b.om:1: a sample without a timestamp"), "{error}");
    }
}
