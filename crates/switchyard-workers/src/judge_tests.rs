use super::*;
use crate::latency::LatencySource;

fn defaults() -> JudgeThresholds {
    JudgeThresholds::from_config(&HealthConfig::default())
}

fn window(ttft: Option<f64>, tpot: Option<f64>, samples: u64) -> LatencyFigures {
    LatencyFigures {
        source: LatencySource::Metrics,
        ttft_p90_seconds: ttft,
        tpot_p90_seconds: tpot,
        ttft_samples: samples,
        tpot_samples: if tpot.is_some() { samples * 10 } else { 0 },
        window_seconds: 5.0,
    }
}

fn overloaded_judge() -> Judge {
    let mut judge = Judge::default();
    let t = defaults();
    assert_eq!(
        judge.observe_window(&window(Some(31.0), Some(0.05), 20), &t),
        WindowVerdict::Marked(OverloadReason::Ttft)
    );
    judge
}

#[test]
fn defaults_are_the_seed_thresholds() {
    let t = defaults();
    assert_eq!((t.overload_ttft, t.overload_tpot), (30.0, 0.3));
    assert_eq!((t.recover_ttft, t.recover_tpot), (16.0, 0.08));
    assert_eq!(t.min_samples, 10);
}

#[test]
fn enters_exactly_at_each_threshold() {
    let t = defaults();
    let mut j = Judge::default();
    assert_eq!(
        j.observe_window(&window(Some(29.99), Some(0.299), 50), &t),
        WindowVerdict::Normal
    );
    assert!(!j.is_overloaded());
    assert_eq!(
        j.observe_window(&window(Some(30.0), Some(0.01), 50), &t),
        WindowVerdict::Marked(OverloadReason::Ttft)
    );
    let mut j = Judge::default();
    assert_eq!(
        j.observe_window(&window(Some(1.0), Some(0.3), 50), &t),
        WindowVerdict::Marked(OverloadReason::Tpot)
    );
    assert!(j.is_overloaded());
}

#[test]
fn a_sparse_window_can_mark_but_never_clear() {
    let t = defaults();
    let mut j = Judge::default();
    assert_eq!(
        j.observe_window(&window(Some(40.0), None, 2), &t),
        WindowVerdict::Marked(OverloadReason::Ttft)
    );
    for _ in 0..3 {
        j.observe_probe(true, &t);
    }
    assert_eq!(
        j.observe_window(&window(Some(0.1), Some(0.01), 9), &t),
        WindowVerdict::Sparse
    );
    assert!(j.is_overloaded());
    assert_eq!(
        j.observe_window(&window(Some(0.1), Some(0.01), 10), &t),
        WindowVerdict::Recovered
    );
}

#[test]
fn no_samples_while_normal_is_no_data() {
    let mut j = Judge::default();
    assert_eq!(
        j.observe_window(&window(None, None, 0), &defaults()),
        WindowVerdict::NoData
    );
}

#[test]
fn the_16_to_30_second_band_keeps_the_worker_locked() {
    let t = defaults();
    let mut j = overloaded_judge();
    for _ in 0..3 {
        j.observe_probe(true, &t);
    }
    for ttft in [29.0, 20.0, 16.0] {
        assert_eq!(
            j.observe_window(&window(Some(ttft), Some(0.01), 50), &t),
            WindowVerdict::Locked,
            "ttft {ttft}"
        );
    }
    // TPOT in its own band (0.08..0.3) locks too.
    assert_eq!(
        j.observe_window(&window(Some(1.0), Some(0.08), 50), &t),
        WindowVerdict::Locked
    );
    assert!(j.is_overloaded());
    assert_eq!(
        j.observe_window(&window(Some(15.9), Some(0.079), 50), &t),
        WindowVerdict::Recovered
    );
}

#[test]
fn latency_alone_or_probes_alone_do_not_clear() {
    let t = defaults();
    let mut j = overloaded_judge();
    assert_eq!(
        j.observe_window(&window(Some(1.0), Some(0.01), 50), &t),
        WindowVerdict::AwaitingProbe
    );
    assert_eq!(j.observe_probe(true, &t), ProbeVerdict::Counting);
    assert_eq!(j.observe_probe(true, &t), ProbeVerdict::Counting);
    // Third success with latency already good: double confirmation complete.
    assert_eq!(j.observe_probe(true, &t), ProbeVerdict::Recovered);
    assert!(!j.is_overloaded());

    let mut j = overloaded_judge();
    for _ in 0..2 {
        j.observe_probe(true, &t);
    }
    assert_eq!(j.observe_probe(true, &t), ProbeVerdict::Confirmed);
    assert_eq!(j.observe_probe(true, &t), ProbeVerdict::Confirmed);
    assert!(j.is_overloaded());
    // A later bad window withdraws the latency half; probes alone still do not clear.
    assert_eq!(
        j.observe_window(&window(Some(20.0), Some(0.01), 50), &t),
        WindowVerdict::Locked
    );
    assert_eq!(j.observe_probe(true, &t), ProbeVerdict::Confirmed);
    assert_eq!(
        j.observe_window(&window(Some(2.0), Some(0.01), 50), &t),
        WindowVerdict::Recovered
    );
}

#[test]
fn a_probe_failure_breaks_the_success_streak() {
    let t = defaults();
    let mut j = overloaded_judge();
    j.observe_window(&window(Some(1.0), Some(0.01), 50), &t);
    j.observe_probe(true, &t);
    j.observe_probe(true, &t);
    assert_eq!(j.observe_probe(false, &t), ProbeVerdict::Counting);
    assert_eq!(j.observe_probe(true, &t), ProbeVerdict::Counting);
    assert_eq!(j.observe_probe(true, &t), ProbeVerdict::Counting);
    assert_eq!(j.observe_probe(true, &t), ProbeVerdict::Recovered);
}

#[test]
fn three_probe_failures_rearm_and_forget_recovery_progress() {
    let t = defaults();
    let mut j = overloaded_judge();
    assert_eq!(
        j.observe_window(&window(Some(1.0), Some(0.01), 50), &t),
        WindowVerdict::AwaitingProbe
    );
    assert_eq!(j.observe_probe(false, &t), ProbeVerdict::Counting);
    assert_eq!(j.observe_probe(false, &t), ProbeVerdict::Counting);
    assert_eq!(j.observe_probe(false, &t), ProbeVerdict::Rearmed);
    assert!(j.is_overloaded());
    // The good window seen before the re-arm no longer counts.
    for _ in 0..2 {
        j.observe_probe(true, &t);
    }
    assert_eq!(j.observe_probe(true, &t), ProbeVerdict::Confirmed);
    assert_eq!(
        j.observe_window(&window(Some(1.0), Some(0.01), 50), &t),
        WindowVerdict::Recovered
    );
}

#[test]
fn inactive_is_a_no_op_that_clears_marks() {
    let mut t = defaults();
    let mut j = overloaded_judge();
    t.active = false;
    assert_eq!(
        j.observe_window(&window(Some(100.0), Some(1.0), 50), &t),
        WindowVerdict::Inactive
    );
    assert!(!j.is_overloaded());
    assert_eq!(j.observe_probe(false, &t), ProbeVerdict::Ignored);
    assert!(!j.is_overloaded());
}

#[test]
fn late_probe_results_after_recovery_are_ignored() {
    let t = defaults();
    let mut j = Judge::default();
    assert_eq!(j.observe_probe(false, &t), ProbeVerdict::Ignored);
    assert!(Judge::resume(true).is_overloaded());
}
