use super::*;
use switchyard_core::{Clock, ManualClock};

fn breaker() -> (CircuitBreaker, ManualClock) {
    let params = BreakerParams::from_config(&BreakerConfig::default());
    (CircuitBreaker::new(params), ManualClock::new())
}

fn record_n(b: &mut CircuitBreaker, clock: &ManualClock, call: Call, n: usize) -> Vec<Transition> {
    (0..n).filter_map(|_| b.record(call, clock.now())).collect()
}

fn trip(b: &mut CircuitBreaker, clock: &ManualClock) {
    record_n(b, clock, Call::Failure, 30);
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn defaults_match_the_seed() {
    let p = BreakerParams::from_config(&BreakerConfig::default());
    assert_eq!(
        (p.window_size, p.minimum_calls, p.half_open_permits),
        (100, 30, 5)
    );
    assert_eq!((p.failure_rate, p.slow_rate), (0.5, 0.8));
    assert_eq!(p.slow_call, Duration::from_secs(3));
    assert_eq!(p.open_for, Duration::from_secs(30));
}

#[test]
fn nothing_opens_before_the_minimum_number_of_calls() {
    let (mut b, clock) = breaker();
    assert!(record_n(&mut b, &clock, Call::Failure, 29).is_empty());
    assert_eq!(b.state(), BreakerState::Closed);
    assert!(b.try_acquire(clock.now()).0);
    assert_eq!(
        record_n(&mut b, &clock, Call::Failure, 1),
        vec![Transition::Opened]
    );
    assert!(!b.try_acquire(clock.now()).0);
}

#[test]
fn failure_rate_threshold_is_inclusive() {
    let (mut b, clock) = breaker();
    record_n(&mut b, &clock, Call::Success, 16);
    record_n(&mut b, &clock, Call::Failure, 14);
    assert_eq!(b.state(), BreakerState::Closed, "14/30 < 50 %");
    let (mut b, clock) = breaker();
    record_n(&mut b, &clock, Call::Success, 15);
    assert_eq!(
        record_n(&mut b, &clock, Call::Failure, 15),
        vec![Transition::Opened],
        "15/30 = 50 %"
    );
}

#[test]
fn slow_calls_open_at_eighty_percent() {
    let (mut b, clock) = breaker();
    record_n(&mut b, &clock, Call::Success, 7);
    record_n(&mut b, &clock, Call::Slow, 23);
    assert_eq!(b.state(), BreakerState::Closed, "23/30 < 80 %");
    let (mut b, clock) = breaker();
    record_n(&mut b, &clock, Call::Success, 6);
    assert_eq!(
        record_n(&mut b, &clock, Call::Slow, 24),
        vec![Transition::Opened]
    );
}

#[test]
fn the_window_slides_over_the_last_hundred_calls() {
    let (mut b, clock) = breaker();
    record_n(&mut b, &clock, Call::Success, 100);
    // Each failure now evicts a success: 49 failures in the last 100 is still closed.
    assert!(record_n(&mut b, &clock, Call::Failure, 49).is_empty());
    assert_eq!(
        record_n(&mut b, &clock, Call::Failure, 1),
        vec![Transition::Opened]
    );
}

#[test]
fn open_for_thirty_seconds_then_half_open_with_five_permits() {
    let (mut b, clock) = breaker();
    trip(&mut b, &clock);
    clock.advance(Duration::from_millis(29_999));
    assert_eq!(b.try_acquire(clock.now()), (false, None));
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        b.try_acquire(clock.now()),
        (true, Some(Transition::HalfOpened))
    );
    for _ in 0..4 {
        assert_eq!(b.try_acquire(clock.now()), (true, None));
    }
    assert_eq!(b.permits_left(), 0);
    assert_eq!(
        b.try_acquire(clock.now()),
        (false, None),
        "sixth trial refused"
    );
}

#[test]
fn half_open_closes_when_the_trials_succeed() {
    let (mut b, clock) = breaker();
    trip(&mut b, &clock);
    clock.advance(Duration::from_secs(30));
    for _ in 0..5 {
        assert!(b.try_acquire(clock.now()).0);
    }
    assert!(record_n(&mut b, &clock, Call::Success, 4).is_empty());
    assert_eq!(
        record_n(&mut b, &clock, Call::Success, 1),
        vec![Transition::Closed]
    );
    assert!(b.try_acquire(clock.now()).0);
    // Closed again with a fresh window: 29 failures are below the minimum.
    assert!(record_n(&mut b, &clock, Call::Failure, 29).is_empty());
}

#[test]
fn half_open_reopens_when_the_trials_fail_and_waits_again() {
    let (mut b, clock) = breaker();
    trip(&mut b, &clock);
    clock.advance(Duration::from_secs(30));
    for _ in 0..5 {
        b.try_acquire(clock.now());
    }
    record_n(&mut b, &clock, Call::Success, 2);
    assert_eq!(
        record_n(&mut b, &clock, Call::Failure, 3),
        vec![Transition::Opened]
    );
    clock.advance(Duration::from_secs(29));
    assert!(!b.try_acquire(clock.now()).0, "the open period restarted");
    clock.advance(Duration::from_secs(1));
    assert!(b.try_acquire(clock.now()).0);
}

#[test]
fn abandoned_trials_return_their_permit() {
    let (mut b, clock) = breaker();
    trip(&mut b, &clock);
    clock.advance(Duration::from_secs(30));
    for _ in 0..5 {
        b.try_acquire(clock.now());
    }
    assert!(!b.try_acquire(clock.now()).0);
    assert_eq!(b.record(Call::Abandoned, clock.now()), None);
    assert!(b.try_acquire(clock.now()).0);
}

#[test]
fn late_outcomes_while_open_are_ignored() {
    let (mut b, clock) = breaker();
    trip(&mut b, &clock);
    assert!(record_n(&mut b, &clock, Call::Success, 50).is_empty());
    assert_eq!(b.state(), BreakerState::Open);
    assert!(b.open_until().is_some());
}

#[test]
fn reconfigure_shrinks_the_window_keeping_the_newest_calls() {
    let (mut b, clock) = breaker();
    record_n(&mut b, &clock, Call::Success, 30);
    record_n(&mut b, &clock, Call::Failure, 10);
    let mut params = BreakerParams::from_config(&BreakerConfig::default());
    params.window_size = 30;
    b.reconfigure(params);
    // The window is now 20 successes + 10 failures; each failure evicts a success,
    // so the fifth one makes 15/30 = 50 %.
    assert!(record_n(&mut b, &clock, Call::Failure, 4).is_empty());
    assert_eq!(
        record_n(&mut b, &clock, Call::Failure, 1),
        vec![Transition::Opened]
    );
}

#[test]
fn failover_runs_from_the_first_bad_call_of_the_episode_to_the_opening() {
    let (mut b, clock) = breaker();
    record_n(&mut b, &clock, Call::Success, 15);
    // An isolated failure that leaves the window again does not start the episode.
    let mut params = BreakerParams::from_config(&BreakerConfig::default());
    params.window_size = 30;
    b.reconfigure(params);
    record_n(&mut b, &clock, Call::Failure, 1);
    record_n(&mut b, &clock, Call::Success, 30);
    assert_eq!(b.take_failover(), None);
    clock.advance(Duration::from_secs(5));
    record_n(&mut b, &clock, Call::Failure, 1);
    clock.advance(Duration::from_millis(1_500));
    assert_eq!(record_n(&mut b, &clock, Call::Failure, 13), vec![]);
    assert_eq!(b.take_failover(), None, "still closed");
    assert_eq!(
        record_n(&mut b, &clock, Call::Failure, 1),
        vec![Transition::Opened]
    );
    assert_eq!(b.take_failover(), Some(Duration::from_millis(1_500)));
    assert_eq!(b.take_failover(), None, "taken once");
}
