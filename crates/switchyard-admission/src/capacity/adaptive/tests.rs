use super::*;

const MS: Duration = Duration::from_millis(1);

fn config() -> AdaptiveConfig {
    AdaptiveConfig {
        enabled: true,
        ..AdaptiveConfig::default()
    }
}

/// Workers with a throughput knee at `knee` concurrent requests: below it a request takes
/// `base`, past it the excess queues inside the workers and latency grows in proportion.
fn latency(base: Duration, knee: usize, in_flight: usize) -> Duration {
    base.mul_f64((in_flight as f64 / knee as f64).max(1.0))
}

/// Saturating demand for `secs` simulated seconds: the gateway always fills the limit.
/// Returns the limits seen over the last quarter and the completions per second then.
fn run(
    limiter: &mut AdaptiveLimit,
    t0: Instant,
    base: Duration,
    knee: usize,
    secs: u64,
) -> (Vec<usize>, f64) {
    let mut now = t0;
    let end = t0 + Duration::from_secs(secs);
    let tail = t0 + Duration::from_secs(secs * 3 / 4);
    let (mut limits, mut completions) = (Vec::new(), 0u64);
    while now < end {
        let in_flight = limiter.limit();
        let rtt = latency(base, knee, in_flight);
        // With `in_flight` requests each taking `rtt`, one finishes every rtt / in_flight.
        now += rtt / in_flight as u32;
        limiter.record(rtt, in_flight, now);
        if now >= tail {
            limits.push(limiter.limit());
            completions += 1;
        }
    }
    (limits, completions as f64 / (secs as f64 / 4.0))
}

#[test]
fn it_probes_the_no_load_latency_first_then_tracks() {
    let t0 = Instant::now();
    let mut limiter = AdaptiveLimit::new(&config(), 64);
    assert_eq!(limiter.limit(), 3, "pinned to min_limit while probing");
    limiter.record(MS * 900, 10, t0);
    assert_eq!(
        limiter.min_rtt(),
        None,
        "a sample at concurrency 10 is not no-load"
    );
    for _ in 0..20 {
        limiter.record(MS * 400, 3, t0);
    }
    assert_eq!(limiter.min_rtt(), Some(MS * 400));
    assert_eq!(limiter.limit(), 3, "resumes from where it was");
}

#[test]
fn it_settles_just_past_the_knee_with_full_throughput() {
    for knee in [4usize, 6, 16, 40] {
        let t0 = Instant::now();
        let mut limiter = AdaptiveLimit::new(&config(), 256);
        let base = MS * 400;
        let (limits, rate) = run(&mut limiter, t0, base, knee, 50);
        let (low, high) = (limits.iter().min().unwrap(), limits.iter().max().unwrap());
        let best = knee as f64 / base.as_secs_f64();
        assert!(
            rate >= 0.9 * best,
            "knee {knee}: {rate:.1}/s of {best:.1}/s"
        );
        assert!(*low >= knee, "knee {knee}: fell to {low}");
        assert!(
            *high as f64 <= 2.0 * knee as f64 + 4.0,
            "knee {knee}: rose to {high} ({limits:?})"
        );
    }
}

#[test]
fn it_follows_slower_workers_down_and_never_leaves_its_bounds() {
    let t0 = Instant::now();
    let mut limiter = AdaptiveLimit::new(&config(), 12);
    let (limits, _) = run(&mut limiter, t0, MS * 100, 40, 20);
    assert!(
        limits.iter().all(|&l| l == 12),
        "capped by max_concurrent: {limits:?}"
    );
    // The knee drops to 4 (workers lost capacity), latency at 12 in flight triples.
    let t1 = t0 + Duration::from_secs(20);
    let mut now = t1;
    for _ in 0..200 {
        let in_flight = limiter.limit();
        let rtt = latency(MS * 100, 4, in_flight);
        now += rtt / in_flight as u32;
        limiter.record(rtt, in_flight, now);
    }
    let limit = limiter.limit();
    assert!((4..=8).contains(&limit), "came down to {limit}");
    assert!(limit >= 3);
}

#[test]
fn idle_workers_do_not_grow_the_limit() {
    let t0 = Instant::now();
    let mut limiter = AdaptiveLimit::new(&config(), 64);
    for _ in 0..20 {
        limiter.record(MS * 100, 1, t0);
    }
    let mut now = t0;
    for _ in 0..500 {
        now += MS * 100;
        limiter.record(MS * 100, 1, now);
    }
    assert_eq!(
        limiter.limit(),
        3,
        "one request at a time says nothing about more"
    );
}

#[test]
fn it_reprobes_periodically() {
    let t0 = Instant::now();
    let mut limiter = AdaptiveLimit::new(&config(), 64);
    run(&mut limiter, t0, MS * 100, 16, 30);
    assert!(limiter.limit() > 3);
    let at = t0 + Duration::from_secs(61);
    limiter.record(MS * 150, 16, at);
    assert_eq!(limiter.limit(), 3, "probing again after min_rtt_interval");
    for _ in 0..20 {
        limiter.record(MS * 200, 3, at);
    }
    assert_eq!(limiter.min_rtt(), Some(MS * 200), "the workers got slower");
    assert!(limiter.limit() > 3, "resumed");
}
