//! Plain-text tables: one row per metric, one column per run.

use std::collections::{BTreeMap, BTreeSet};

use crate::report::{BreakdownReport, LoadReport};

type Row = (String, Vec<String>);

impl LoadReport {
    /// The report as a one-column table.
    pub fn render_table(&self) -> String {
        render_side_by_side(&[("value", self)])
    }
}

/// Renders runs next to each other (e.g. "round-robin" vs "cache-aware") for direct comparison.
/// Error kinds and workers are the union across runs; a run lacking one shows 0.
pub fn render_side_by_side(columns: &[(&str, &LoadReport)]) -> String {
    let reports: Vec<&LoadReport> = columns.iter().map(|(_, report)| *report).collect();
    let rows = metric_rows(&reports);
    let label_width = rows
        .iter()
        .map(|(label, _)| label.chars().count())
        .chain(std::iter::once("metric".len()))
        .max()
        .unwrap_or(0);
    let column_widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(index, (name, _))| {
            rows.iter()
                .map(|(_, values)| values[index].chars().count())
                .chain(std::iter::once(name.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();

    let mut out = String::new();
    let header: Vec<String> = columns.iter().map(|(name, _)| (*name).to_owned()).collect();
    push_line(&mut out, "metric", &header, label_width, &column_widths);
    for (label, values) in &rows {
        push_line(&mut out, label, values, label_width, &column_widths);
    }
    out
}

fn push_line(
    out: &mut String,
    label: &str,
    values: &[String],
    label_width: usize,
    widths: &[usize],
) {
    out.push_str(&format!("{label:<label_width$}"));
    for (value, width) in values.iter().zip(widths) {
        out.push_str(&format!("  {value:>width$}"));
    }
    out.push('\n');
}

fn metric_rows(reports: &[&LoadReport]) -> Vec<Row> {
    let row = |label: &str, value: &dyn Fn(&LoadReport) -> String| -> Row {
        (
            label.to_owned(),
            reports.iter().map(|report| value(report)).collect(),
        )
    };
    let error_kinds: BTreeSet<&String> = reports.iter().flat_map(|r| r.errors.keys()).collect();
    let workers: BTreeSet<&String> = reports.iter().flat_map(|r| r.workers.keys()).collect();
    let retrying = reports
        .iter()
        .any(|r| r.client_retries > 0 || !r.client_groups.is_empty());

    let mut rows = vec![
        row("requests sent", &|r| r.requests_sent.to_string()),
        row("ok", &|r| r.ok.to_string()),
        row("errors", &|r| r.error_count().to_string()),
    ];
    if retrying {
        rows.extend([
            row("total attempts", &|r| r.total_attempts.to_string()),
            row("client retries", &|r| r.client_retries.to_string()),
            row("eventual success", &|r| percent(r.eventual_success_rate)),
        ]);
    }
    for kind in error_kinds {
        rows.push(row(&format!("  error {kind}"), &|r| {
            r.errors.get(kind).copied().unwrap_or(0).to_string()
        }));
    }
    rows.extend([
        row("client dropped", &|r| r.client_dropped.to_string()),
        row("achieved rate (req/s)", &|r| {
            format!("{:.2}", r.achieved_rate)
        }),
        row("TTFT p50 (ms)", &|r| millis(r.ttft.p50)),
        row("TTFT p90 (ms)", &|r| millis(r.ttft.p90)),
        row("TTFT p99 (ms)", &|r| millis(r.ttft.p99)),
        row("e2e p50 (ms)", &|r| millis(r.e2e.p50)),
        row("e2e p99 (ms)", &|r| millis(r.e2e.p99)),
        row("e2e max (ms)", &|r| millis(r.e2e.max)),
        row("prompt tokens", &|r| r.prompt_tokens.to_string()),
        row("cached tokens", &|r| r.cached_tokens.to_string()),
        row("hit rate", &|r| percent(r.hit_rate())),
    ]);
    for worker in workers {
        rows.push(row(
            &format!("worker {worker} share"),
            &|r| match r.workers.get(worker) {
                Some(load) => format!("{:.1}% ({})", load.share * 100.0, load.requests),
                None => "0.0% (0)".to_owned(),
            },
        ));
    }
    rows.push(row("worker load CV", &|r| format!("{:.3}", r.load_cv())));
    rows.extend(breakdown_rows(reports, "class", |r| &r.priority_classes));
    rows.extend(breakdown_rows(reports, "clients", |r| &r.client_groups));
    let targets: BTreeSet<&String> = reports.iter().flat_map(|r| r.targets.keys()).collect();
    if targets.len() > 1 {
        for target in targets {
            rows.push(row(&format!("target {target} attempts"), &|r| {
                r.targets
                    .get(target)
                    .map_or(0, |load| load.attempts)
                    .to_string()
            }));
        }
    }
    rows
}

/// Requests, success rate and TTFT per slice (priority class or client group).
fn breakdown_rows(
    reports: &[&LoadReport],
    kind: &str,
    slices: impl Fn(&LoadReport) -> &BTreeMap<String, BreakdownReport>,
) -> Vec<Row> {
    let names: BTreeSet<&String> = reports.iter().flat_map(|r| slices(r).keys()).collect();
    let mut rows = Vec::new();
    for name in names {
        let cell = |value: &dyn Fn(&BreakdownReport) -> String| -> Vec<String> {
            reports
                .iter()
                .map(|r| slices(r).get(name).map_or_else(|| "-".to_owned(), value))
                .collect()
        };
        rows.push((
            format!("{kind} {name} ok/requests"),
            cell(&|b| format!("{}/{}", b.ok, b.requests)),
        ));
        rows.push((
            format!("{kind} {name} success"),
            cell(&|b| percent(b.success_rate)),
        ));
        rows.push((
            format!("{kind} {name} TTFT p50/p99 (ms)"),
            cell(&|b| format!("{}/{}", millis(b.ttft.p50), millis(b.ttft.p99))),
        ));
    }
    rows
}

fn percent(ratio: f64) -> String {
    format!("{:.1}%", ratio * 100.0)
}

fn millis(seconds: Option<f64>) -> String {
    seconds.map_or_else(|| "-".to_owned(), |value| format!("{:.1}", value * 1000.0))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Workload;
    use crate::exchange::{Completion, Failure};
    use crate::report::{Collector, RequestLabels, RunFacts};
    use crate::{ClientRetryMode, PriorityClass};

    fn report(workers: &[&str], errors: &[&str]) -> LoadReport {
        let mut collector = Collector::default();
        for worker in workers {
            collector.record(&Ok(Completion {
                ttft: Some(Duration::from_millis(12)),
                e2e: Duration::from_millis(40),
                prompt_tokens: 100,
                cached_tokens: 25,
                worker: Some((*worker).to_owned()),
                ..Completion::default()
            }));
        }
        for kind in errors {
            collector.record(&Err(Failure::new(*kind)));
        }
        collector.finish(RunFacts {
            targets: vec!["http://t".into()],
            model: "m".into(),
            workload: Workload::Multiturn,
            seed: 0,
            configured_rate: 1.0,
            issue_time: Duration::from_secs(1),
            started_unix_ms: 0,
        })
    }

    #[test]
    fn single_table_shows_every_metric() {
        let table = report(&["w1", "w2", "w1"], &["503"]).render_table();
        for needle in [
            "requests sent",
            "  error 503",
            "client dropped",
            "TTFT p90 (ms)",
            "e2e p99 (ms)",
            "e2e max (ms)",
            "25.0%",
            "worker w1 share",
            "66.7% (2)",
            "worker load CV",
        ] {
            assert!(table.contains(needle), "missing {needle:?} in\n{table}");
        }
        assert!(table.contains("12.0"), "{table}");
    }

    #[test]
    fn side_by_side_aligns_the_union_of_rows() {
        let left = report(&["w1"], &["429"]);
        let right = report(&["w2", "w2"], &[]);
        let table = render_side_by_side(&[("round-robin", &left), ("cache-aware", &right)]);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].contains("round-robin") && lines[0].contains("cache-aware"));
        let error_row = lines
            .iter()
            .find(|line| line.contains("error 429"))
            .expect("row");
        assert!(error_row.trim_end().ends_with('0'), "{error_row}");
        let w1_row = lines
            .iter()
            .find(|line| line.contains("worker w1"))
            .expect("row");
        assert!(w1_row.contains("100.0% (1)") && w1_row.contains("0.0% (0)"));
        let width = lines[0].len();
        assert!(lines.iter().all(|line| line.len() == width), "\n{table}");
    }

    #[test]
    fn class_retry_and_target_rows_appear_only_when_used() {
        let plain = report(&["w1"], &[]).render_table();
        for absent in ["total attempts", "class ", "clients ", "target "] {
            assert!(!plain.contains(absent), "{absent:?} in\n{plain}");
        }
        let mut collector = Collector::default();
        let id = collector.begin(RequestLabels {
            target: 1,
            priority: Some(PriorityClass::P0),
            client_group: Some(ClientRetryMode::Fixed(Duration::from_secs(1))),
        });
        let refused = Err(Failure::status(http::StatusCode::TOO_MANY_REQUESTS, None));
        collector.attempt_started(id, Duration::ZERO, false);
        collector.attempt_finished(id, Duration::ZERO, &refused);
        collector.attempt_started(id, Duration::from_secs(1), true);
        let served = Ok(Completion {
            ttft: Some(Duration::from_millis(25)),
            ..Completion::default()
        });
        collector.attempt_finished(id, Duration::from_secs(1), &served);
        collector.finish_request(id, &served);
        let mut facts = RunFacts::for_tests();
        facts.targets = vec!["http://a".into(), "http://b".into()];
        let table = collector.finish(facts).render_table();
        for needle in [
            "total attempts",
            "eventual success",
            "class P0 ok/requests",
            "1/1",
            "class P0 TTFT p50/p99 (ms)",
            "25.0/25.0",
            "clients fixed1s success",
            "100.0%",
            "target http://b attempts",
        ] {
            assert!(table.contains(needle), "missing {needle:?} in\n{table}");
        }
    }
}
