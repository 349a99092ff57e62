use super::*;

const S: Duration = Duration::from_secs(1);

fn detector(t0: Instant) -> OverloadDetector {
    OverloadDetector::new(&DetectorConfig::default(), &RampConfig::default(), t0)
}

/// The events that change capacity or state (verdict changes are reported separately).
fn moves(events: Vec<DetectorEvent>) -> Vec<DetectorEvent> {
    events
        .into_iter()
        .filter(|event| !matches!(event, DetectorEvent::Verdict(_)))
        .collect()
}

fn verdicts(events: &[DetectorEvent]) -> Vec<Verdict> {
    events
        .iter()
        .filter_map(|event| match event {
            DetectorEvent::Verdict(verdict) => Some(*verdict),
            _ => None,
        })
        .collect()
}

fn transition(events: &[DetectorEvent]) -> Option<GatewayState> {
    events.iter().find_map(|event| match event {
        DetectorEvent::Transition { to, .. } => Some(*to),
        _ => None,
    })
}

/// Drives a detector into `Recovering` and returns the time it got there.
fn recovering(detector: &mut OverloadDetector, t0: Instant) -> Instant {
    detector.report_fleet(0.9, t0);
    assert_eq!(
        transition(&detector.evaluate(t0 + S * 5)),
        Some(GatewayState::Overloaded)
    );
    detector.report_fleet(0.0, t0 + S * 6);
    let at = t0 + S * 21;
    assert_eq!(
        transition(&detector.evaluate(at)),
        Some(GatewayState::Recovering)
    );
    at
}

#[test]
fn entry_needs_the_signal_held_without_a_break() {
    let t0 = Instant::now();
    let mut detector = detector(t0);
    assert!(moves(detector.report_fleet(0.6, t0)).is_empty());
    assert!(moves(detector.evaluate(t0 + S * 4)).is_empty());
    assert!(
        moves(detector.report_fleet(0.4, t0 + S * 4)).is_empty(),
        "dip below the threshold"
    );
    assert!(
        moves(detector.report_fleet(0.6, t0 + S * 5)).is_empty(),
        "hold restarts"
    );
    assert!(moves(detector.evaluate(t0 + S * 9)).is_empty());
    let events = moves(detector.evaluate(t0 + S * 10));
    assert_eq!(
        events,
        vec![DetectorEvent::Transition {
            from: GatewayState::Normal,
            to: GatewayState::Overloaded
        }]
    );
    assert_eq!(
        detector.capacity_ratio(),
        0.3,
        "overloaded admits the ramp floor"
    );
}

#[test]
fn the_band_between_exit_and_entry_keeps_the_gateway_overloaded() {
    let t0 = Instant::now();
    let mut detector = detector(t0);
    detector.report_fleet(0.9, t0);
    detector.evaluate(t0 + S * 5);
    assert_eq!(detector.state(), GatewayState::Overloaded);
    detector.report_fleet(0.3, t0 + S * 6);
    assert!(
        moves(detector.evaluate(t0 + S * 600)).is_empty(),
        "0.3 is inside the 0.2–0.5 band"
    );
    detector.report_fleet(0.2, t0 + S * 600);
    assert!(moves(detector.evaluate(t0 + S * 614)).is_empty());
    assert_eq!(
        transition(&detector.evaluate(t0 + S * 615)),
        Some(GatewayState::Recovering)
    );
}

#[test]
fn queue_refusals_with_healthy_workers_are_demand_overload_and_never_cut_capacity() {
    let t0 = Instant::now();
    let mut detector = detector(t0);
    let mut events = Vec::new();
    for i in 0..30 {
        events.extend(detector.record_queued(i % 3 == 0, t0)); // a third refused
    }
    assert_eq!(verdicts(&events), vec![Verdict::DemandOverload]);
    for second in 1..=120 {
        for _ in 0..10 {
            detector.record_queued(true, t0 + S * second);
            detector.record_finished(false, t0 + S * second);
        }
        assert!(moves(detector.evaluate(t0 + S * second)).is_empty());
    }
    assert_eq!(detector.state(), GatewayState::Normal);
    assert_eq!(detector.capacity_ratio(), 1.0, "full dispatch capacity");
    assert_eq!(detector.verdict(), Verdict::DemandOverload);
    let quiet = detector.evaluate(t0 + S * 200);
    assert_eq!(
        verdicts(&quiet),
        vec![Verdict::Healthy],
        "the window emptied"
    );
}

#[test]
fn worker_errors_during_demand_overload_are_distress_and_engage_the_ramp() {
    let t0 = Instant::now();
    let mut detector = detector(t0);
    for _ in 0..40 {
        detector.record_queued(true, t0);
        detector.record_finished(false, t0);
    }
    assert_eq!(detector.verdict(), Verdict::DemandOverload);
    let mut events = Vec::new();
    for _ in 0..40 {
        events.extend(detector.record_finished(true, t0 + S));
    }
    assert_eq!(verdicts(&events), vec![Verdict::BackendErrors]);
    assert!(moves(detector.evaluate(t0 + S * 5)).is_empty(), "held 4 s");
    assert_eq!(
        transition(&detector.evaluate(t0 + S * 6)),
        Some(GatewayState::Overloaded)
    );
    assert_eq!(detector.capacity_ratio(), 0.3);
}

#[test]
fn queue_refusals_at_reduced_capacity_do_not_block_the_exit() {
    let t0 = Instant::now();
    let mut detector = detector(t0);
    detector.report_fleet(0.9, t0);
    assert_eq!(
        transition(&detector.evaluate(t0 + S * 5)),
        Some(GatewayState::Overloaded)
    );
    detector.report_fleet(0.0, t0 + S * 6);
    for _ in 0..100 {
        detector.record_queued(true, t0 + S * 6);
    }
    assert_eq!(
        transition(&detector.evaluate(t0 + S * 21)),
        Some(GatewayState::Recovering)
    );
}

#[test]
fn few_samples_are_not_trusted() {
    let t0 = Instant::now();
    let mut detector = detector(t0);
    for _ in 0..19 {
        detector.record_finished(true, t0);
    }
    assert!(
        moves(detector.evaluate(t0 + S * 9)).is_empty(),
        "19 failures < min_samples"
    );
    detector.record_finished(true, t0 + S * 9);
    detector.evaluate(t0 + S * 9);
    assert_eq!(
        transition(&detector.evaluate(t0 + S * 14)),
        None,
        "the errors slid out of the window"
    );
}

#[test]
fn error_rate_enters_and_a_clean_fleet_with_low_errors_exits() {
    let t0 = Instant::now();
    let mut detector = detector(t0);
    for i in 0..40 {
        detector.record_finished(i % 4 == 0, t0); // 25 % errors
    }
    assert_eq!(
        transition(&detector.evaluate(t0 + S * 5)),
        Some(GatewayState::Overloaded)
    );
    for i in 0..40 {
        detector.record_finished(i % 4 == 0, t0 + S * 6);
    }
    assert!(
        moves(detector.evaluate(t0 + S * 14)).is_empty(),
        "errors still high"
    );
    assert!(
        moves(detector.evaluate(t0 + S * 16)).is_empty(),
        "window empty now: exit hold starts"
    );
    assert_eq!(
        transition(&detector.evaluate(t0 + S * 31)),
        Some(GatewayState::Recovering)
    );
}

#[test]
fn recovery_ramps_to_normal_holding_each_level() {
    let t0 = Instant::now();
    let mut detector = detector(t0);
    let start = recovering(&mut detector, t0);
    let hold = S * 30;
    let mut ratios = vec![detector.capacity_ratio()];
    for step in 1..=3 {
        assert!(moves(detector.evaluate(start + hold * step - S)).is_empty());
        assert_eq!(
            moves(detector.evaluate(start + hold * step)),
            vec![DetectorEvent::RampUp]
        );
        ratios.push(detector.capacity_ratio());
    }
    assert_eq!(ratios, vec![0.3, 0.5, 0.8, 1.0]);
    assert_eq!(
        transition(&detector.evaluate(start + hold * 4)),
        Some(GatewayState::Normal)
    );
    assert_eq!(detector.capacity_ratio(), 1.0);
}

#[test]
fn an_error_rebound_steps_the_ramp_back_and_at_the_floor_reenters_overload() {
    let t0 = Instant::now();
    let mut detector = detector(t0);
    let start = recovering(&mut detector, t0);
    detector.evaluate(start + S * 30);
    assert_eq!(detector.capacity_ratio(), 0.5);
    let mut events = Vec::new();
    for _ in 0..20 {
        events.extend(moves(detector.record_finished(true, start + S * 31)));
    }
    assert_eq!(events, vec![DetectorEvent::RampBack]);
    assert_eq!(detector.capacity_ratio(), 0.3);
    let mut events = Vec::new();
    for _ in 0..20 {
        events.extend(detector.record_finished(true, start + S * 32));
    }
    assert_eq!(transition(&events), Some(GatewayState::Overloaded));
}

#[test]
fn the_fleet_relapsing_sends_recovery_back_to_overload() {
    let t0 = Instant::now();
    let mut detector = detector(t0);
    let start = recovering(&mut detector, t0);
    detector.report_fleet(0.7, start + S);
    assert!(moves(detector.evaluate(start + S * 5)).is_empty());
    assert_eq!(
        transition(&detector.evaluate(start + S * 6)),
        Some(GatewayState::Overloaded)
    );
}

#[test]
fn while_recovering_retries_get_at_most_their_share_of_admissions() {
    let t0 = Instant::now();
    let mut detector = detector(t0);
    assert!(
        detector.try_admit_retry(),
        "normal: retries are not held back"
    );
    recovering(&mut detector, t0);
    assert!(!detector.try_admit_retry(), "new requests go first");
    let (mut new, mut retries) = (0u32, 0u32);
    for _ in 0..1_000 {
        detector.note_new_request_admitted();
        new += 1;
        for _ in 0..4 {
            if detector.try_admit_retry() {
                retries += 1;
            }
        }
    }
    let share = f64::from(retries) / f64::from(retries + new);
    assert!((share - 0.2).abs() < 0.01, "retry share {share}");
}

#[test]
fn an_outage_under_demand_overload_runs_the_whole_ramp_with_refusals_all_along() {
    // Demand above capacity the whole time (half the queued requests refused), a 10 s
    // outage in which every admitted request fails, then healthy workers again.
    let t0 = Instant::now();
    let mut detector = detector(t0);
    let mut path = vec![(detector.state(), detector.capacity_ratio())];
    let second = |detector: &mut OverloadDetector, at: u64, failing: bool| {
        let now = t0 + S * at as u32;
        let mut events = Vec::new();
        for i in 0..20 {
            events.extend(detector.record_queued(i % 2 == 0, now));
            events.extend(detector.record_finished(failing, now));
        }
        events.extend(detector.evaluate(now));
        events
    };
    for at in 0..10 {
        second(&mut detector, at, false);
    }
    assert_eq!(detector.verdict(), Verdict::DemandOverload);
    assert_eq!(detector.state(), GatewayState::Normal, "demand alone");
    let mut entered = None;
    let mut recovering_at = None;
    let mut normal_at = None;
    for at in 10..200 {
        let events = second(&mut detector, at, (10..20).contains(&at));
        if !moves(events).is_empty() {
            path.push((detector.state(), detector.capacity_ratio()));
            match detector.state() {
                GatewayState::Overloaded => entered = entered.or(Some(at)),
                GatewayState::Recovering => recovering_at = recovering_at.or(Some(at)),
                GatewayState::Normal => normal_at = normal_at.or(Some(at)),
            }
        }
    }
    use GatewayState::{Normal, Overloaded, Recovering};
    assert_eq!(
        path,
        vec![
            (Normal, 1.0),
            (Overloaded, 0.3),
            (Recovering, 0.3),
            (Recovering, 0.5),
            (Recovering, 0.8),
            (Recovering, 1.0),
            (Normal, 1.0),
        ],
        "one pass up the ramp, never back"
    );
    // The window's error rate reaches 20 % in the outage's second second; held 5 s, that
    // enters. Exit once the errors have left the 10 s window and 15 s more passed clean;
    // then 30 s per level.
    assert_eq!(entered, Some(16));
    let recovering_at = recovering_at.unwrap();
    assert!((43..=46).contains(&recovering_at), "{recovering_at}");
    assert_eq!(normal_at, Some(recovering_at + 120));
}

#[test]
fn half_the_fleet_filtered_cuts_to_the_half_level_and_recovery_climbs_from_there() {
    // Two workers, one out (a false hung mark, say): the other is healthy and keeps its share.
    let t0 = Instant::now();
    let mut detector = detector(t0);
    detector.report_fleet(0.5, t0);
    assert_eq!(
        transition(&detector.evaluate(t0 + S * 5)),
        Some(GatewayState::Overloaded)
    );
    assert_eq!(
        detector.capacity_ratio(),
        0.5,
        "the routable half keeps 50 %"
    );
    detector.report_fleet(0.0, t0 + S * 8);
    assert!(
        moves(detector.evaluate(t0 + S * 22)).is_empty(),
        "exit hold"
    );
    assert_eq!(
        transition(&detector.evaluate(t0 + S * 23)),
        Some(GatewayState::Recovering)
    );
    let start = t0 + S * 23;
    assert_eq!(detector.capacity_ratio(), 0.5, "the climb starts at 50 %");
    assert_eq!(
        moves(detector.evaluate(start + S * 30)),
        vec![DetectorEvent::RampUp]
    );
    assert_eq!(detector.capacity_ratio(), 0.8);
    detector.evaluate(start + S * 60);
    assert_eq!(
        transition(&detector.evaluate(start + S * 90)),
        Some(GatewayState::Normal)
    );
}

#[test]
fn distress_that_deepens_while_overloaded_cuts_further_and_the_climb_starts_lowest() {
    let t0 = Instant::now();
    let mut detector = detector(t0);
    detector.report_fleet(0.5, t0);
    detector.evaluate(t0 + S * 5);
    assert_eq!(detector.capacity_ratio(), 0.5);
    assert_eq!(
        moves(detector.report_fleet(1.0, t0 + S * 6)),
        vec![DetectorEvent::CutDeeper],
        "the whole fleet out now"
    );
    assert_eq!(detector.capacity_ratio(), 0.3);
    assert!(
        moves(detector.report_fleet(0.5, t0 + S * 7)).is_empty(),
        "a partial return does not lift the cut"
    );
    assert_eq!(detector.capacity_ratio(), 0.3);
    detector.report_fleet(0.0, t0 + S * 8);
    assert_eq!(
        transition(&detector.evaluate(t0 + S * 23)),
        Some(GatewayState::Recovering)
    );
    assert_eq!(
        detector.capacity_ratio(),
        0.3,
        "the climb starts at the floor"
    );
}

#[test]
fn failing_requests_cut_to_the_floor_even_with_most_workers_routable() {
    let t0 = Instant::now();
    let mut detector = detector(t0);
    detector.report_fleet(0.5, t0);
    for _ in 0..40 {
        detector.record_finished(true, t0);
    }
    assert_eq!(
        transition(&detector.evaluate(t0 + S * 5)),
        Some(GatewayState::Overloaded)
    );
    assert_eq!(detector.capacity_ratio(), 0.3);
}

#[test]
fn an_error_collapse_at_a_partial_start_level_reenters_overload_at_the_floor() {
    let t0 = Instant::now();
    let mut detector = detector(t0);
    detector.report_fleet(0.5, t0);
    detector.evaluate(t0 + S * 5);
    detector.report_fleet(0.0, t0 + S * 6);
    let start = t0 + S * 21;
    assert_eq!(
        transition(&detector.evaluate(start)),
        Some(GatewayState::Recovering)
    );
    assert_eq!(detector.capacity_ratio(), 0.5);
    let mut events = Vec::new();
    for _ in 0..20 {
        events.extend(moves(detector.record_finished(true, start + S)));
    }
    assert_eq!(events, vec![DetectorEvent::RampBack]);
    assert_eq!(detector.capacity_ratio(), 0.3);
    let mut events = Vec::new();
    for _ in 0..20 {
        events.extend(detector.record_finished(true, start + S * 2));
    }
    assert_eq!(transition(&events), Some(GatewayState::Overloaded));
    assert_eq!(detector.capacity_ratio(), 0.3);
}
