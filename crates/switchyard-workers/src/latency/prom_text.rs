//! Just enough of the Prometheus text exposition format to read histogram families
//! (`<name>_bucket{..,le="x"}` and `<name>_count`) out of a worker's `/metrics`.

use std::collections::{BTreeMap, HashMap};

use super::histogram::HistogramFamily;

/// Parses the histogram families named in `wanted` (base names, without `_bucket`).
/// Lines that do not parse are skipped: one odd metric must not blind the collector.
pub(crate) fn parse_histograms(text: &str, wanted: &[&str]) -> HashMap<String, HistogramFamily> {
    let mut families: HashMap<String, HistogramFamily> = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(sample) = parse_sample(line) else {
            continue;
        };
        let (base, is_bucket) = if let Some(base) = sample.name.strip_suffix("_bucket") {
            (base, true)
        } else if let Some(base) = sample.name.strip_suffix("_count") {
            (base, false)
        } else {
            continue;
        };
        if !wanted.contains(&base) {
            continue;
        }
        let mut le = None;
        let mut key = String::new();
        for (name, value) in &sample.labels {
            if name == "le" {
                le = parse_value(value);
                continue;
            }
            if !key.is_empty() {
                key.push(',');
            }
            key.push_str(name);
            key.push('=');
            key.push_str(value);
        }
        let series = families
            .entry(base.to_string())
            .or_default()
            .series
            .entry(key)
            .or_default();
        if is_bucket {
            if let Some(le) = le {
                series.buckets.push((le, sample.value));
            }
        } else {
            series.count = Some(sample.value);
        }
    }
    for family in families.values_mut() {
        for series in family.series.values_mut() {
            series
                .buckets
                .sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
        }
    }
    families
}

struct Sample<'a> {
    name: &'a str,
    /// Sorted by label name so the series key does not depend on exposition order.
    labels: BTreeMap<String, String>,
    value: f64,
}

fn parse_sample(line: &str) -> Option<Sample<'_>> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        let (parsed, after) = parse_labels(inner)?;
        labels = parsed;
        rest = after;
    }
    // The value may be followed by a timestamp, which we do not need.
    let value = parse_value(rest.split_whitespace().next()?)?;
    Some(Sample {
        name,
        labels,
        value,
    })
}

/// Parses `a="x",b="y"}` and returns the labels and the text after the closing brace.
fn parse_labels(mut s: &str) -> Option<(BTreeMap<String, String>, &str)> {
    let mut labels = BTreeMap::new();
    loop {
        s = s.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let name = s[..eq].trim().to_string();
        s = s[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '"' => break i,
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                other => value.push(other),
            }
        };
        labels.insert(name, value);
        s = &s[end + 1..];
    }
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shaped like vLLM 0.8's exposition (prometheus_client), trimmed.
    const VLLM_TEXT: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 41.2
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 20.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 90.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 100.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 100.0
vllm:time_to_first_token_seconds_created{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.7e+09
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{engine="0",le="0.05",model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.0 1712345678000
vllm:time_per_output_token_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 9.0 1712345678000
"#;

    #[test]
    fn reads_vllm_histograms_and_ignores_the_rest() {
        let families = parse_histograms(
            VLLM_TEXT,
            &[
                "vllm:time_to_first_token_seconds",
                "vllm:time_per_output_token_seconds",
            ],
        );
        assert_eq!(families.len(), 2);
        let ttft = &families["vllm:time_to_first_token_seconds"];
        assert_eq!(ttft.series.len(), 1);
        let (key, series) = ttft.series.iter().next().unwrap();
        assert_eq!(key, "engine=0,model_name=meta-llama/Llama-3.1-8B-Instruct");
        assert_eq!(
            series.buckets,
            vec![
                (0.001, 0.0),
                (0.1, 20.0),
                (1.0, 90.0),
                (f64::INFINITY, 100.0)
            ]
        );
        assert_eq!(series.count, Some(100.0));
        let tpot = &families["vllm:time_per_output_token_seconds"];
        let series = tpot.series.values().next().unwrap();
        assert_eq!(series.buckets, vec![(0.05, 7.0), (f64::INFINITY, 9.0)]);
    }

    #[test]
    fn label_order_and_escapes_do_not_split_series() {
        let text = "h_bucket{a=\"x\\\"y\",le=\"1\"} 2\nh_bucket{le=\"+Inf\", a=\"x\\\"y\"} 3\n";
        let families = parse_histograms(text, &["h"]);
        let family = &families["h"];
        assert_eq!(family.series.len(), 1);
        assert_eq!(family.series["a=x\"y"].buckets.len(), 2);
    }

    #[test]
    fn malformed_lines_are_skipped() {
        let text = "h_bucket{le=\"1\" 2\nh_bucket{le=\"+Inf\"} nope\nh_bucket{le=\"+Inf\"} 4\n";
        let families = parse_histograms(text, &["h"]);
        let series = families["h"].series.values().next().unwrap();
        assert_eq!(series.buckets, vec![(f64::INFINITY, 4.0)]);
    }
}
