use super::*;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

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

/// A deterministic pseudo-random source (xorshift64*), so noisy runs repeat exactly.
struct Noise(u64);

impl Noise {
    /// Uniform in [0, 1).
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Workers as a queue in front of `knee` servers, each request `base` × a random factor in
/// [1 − jitter, 1 + jitter], × `slowdown(t)` for requests starting at t; the gateway keeps
/// the limit filled. Returns completions per second and the limits seen, both over
/// `[from, until)` seconds.
struct Fleet {
    knee: usize,
    base: Duration,
    jitter: f64,
    noise: Noise,
}

impl Fleet {
    fn new(knee: usize, base: Duration, seed: u64) -> Self {
        Self {
            knee,
            base,
            jitter: 0.3,
            noise: Noise(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
        }
    }

    fn run(
        &mut self,
        limiter: &mut AdaptiveLimit,
        t0: Instant,
        until: f64,
        from: f64,
        slowdown: impl Fn(f64) -> f64,
    ) -> (f64, Vec<usize>) {
        let secs = |at: Instant| at.duration_since(t0).as_secs_f64();
        let mut servers = vec![t0; self.knee];
        // (finish, dispatched)
        let mut finishing: BinaryHeap<Reverse<(Instant, Instant)>> = BinaryHeap::new();
        let (mut completions, mut limits) = (0u64, Vec::new());
        let mut now = t0;
        loop {
            while finishing.len() < limiter.limit() {
                let (slot, free_at) = servers
                    .iter()
                    .copied()
                    .enumerate()
                    .min_by_key(|&(_, free_at)| free_at)
                    .unwrap();
                let start = free_at.max(now);
                let factor = 1.0 + self.jitter * (2.0 * self.noise.next() - 1.0);
                let took = self.base.mul_f64(factor * slowdown(secs(start)));
                servers[slot] = start + took;
                finishing.push(Reverse((start + took, now)));
            }
            let Reverse((finish, dispatched)) = finishing.pop().unwrap();
            now = finish;
            if secs(now) >= until {
                return (completions as f64 / (until - from), limits);
            }
            limiter.record(now - dispatched, finishing.len() + 1, now);
            if secs(now) >= from {
                completions += 1;
                limits.push(limiter.limit());
            }
        }
    }
}

#[test]
fn it_probes_the_no_load_latency_first_then_tracks() {
    let t0 = Instant::now();
    let mut limiter = AdaptiveLimit::new(&config(), 64);
    assert_eq!(limiter.limit(), 3, "pinned to min_limit while probing");
    assert_eq!(limiter.record(MS * 900, 10, t0), None);
    assert_eq!(
        limiter.min_rtt(),
        None,
        "a sample at concurrency 10 is not no-load"
    );
    for _ in 0..19 {
        assert_eq!(limiter.record(MS * 400, 3, t0), None);
    }
    assert_eq!(
        limiter.record(MS * 400, 3, t0),
        Some(Decision::ProbeMeasured)
    );
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
fn noisy_workers_keep_full_throughput_and_a_bounded_limit() {
    // Each request's latency varies ±30 %; the limit must neither sink under the knee
    // (lost throughput) nor run away (the workers' queue is the gateway's queue then).
    for knee in [4usize, 8, 16, 40] {
        for seed in 1..=3 {
            let t0 = Instant::now();
            let mut limiter = AdaptiveLimit::new(&config(), 256);
            let mut fleet = Fleet::new(knee, MS * 360, seed);
            let (rate, limits) = fleet.run(&mut limiter, t0, 60.0, 20.0, |_| 1.0);
            let best = knee as f64 / 0.36;
            let high = *limits.iter().max().unwrap();
            assert!(
                rate >= 0.95 * best,
                "knee {knee} seed {seed}: {rate:.1}/s of {best:.1}/s"
            );
            assert!(
                high as f64 <= 2.0 * knee as f64 + 6.0,
                "knee {knee} seed {seed}: rose to {high}"
            );
        }
    }
}

#[test]
fn a_latency_spike_does_not_cut_the_limit_below_the_knee() {
    // The host stalls: for 1.5 s every request takes three times as long. Throughput falls
    // for the stall whatever the limit; the limit must not end up under the knee for it.
    let knee = 8;
    let stall = |t: f64| if (30.0..31.5).contains(&t) { 3.0 } else { 1.0 };
    for seed in 1..=3 {
        let t0 = Instant::now();
        let mut limiter = AdaptiveLimit::new(&config(), 64);
        let mut fleet = Fleet::new(knee, MS * 360, seed);
        fleet.run(&mut limiter, t0, 29.0, 0.0, |_| 1.0);
        let (_, limits) = fleet.run(&mut limiter, t0, 36.0, 29.0, stall);
        let low = *limits.iter().min().unwrap();
        assert!(low >= knee, "seed {seed}: cut to {low} ({limits:?})");
    }
}

#[test]
fn cuts_are_counted_and_stop_at_the_best_recent_throughput() {
    let t0 = Instant::now();
    let mut limiter = AdaptiveLimit::new(&config(), 64);
    let mut decisions = Vec::new();
    for _ in 0..20 {
        decisions.extend(limiter.record(MS * 100, 3, t0));
    }
    assert_eq!(decisions, [Decision::ProbeMeasured]);
    // Saturating demand at a knee of 10: grows past 10, where latency starts to rise.
    let mut now = t0;
    for _ in 0..2000 {
        let in_flight = limiter.limit();
        let rtt = latency(MS * 100, 10, in_flight);
        now += rtt / in_flight as u32;
        decisions.extend(limiter.record(rtt, in_flight, now));
    }
    assert!(decisions.contains(&Decision::Grew), "{decisions:?}");
    assert!(decisions.contains(&Decision::Shrank), "{decisions:?}");
    let settled = limiter.limit();
    assert!(settled >= 10, "{settled}");
    // Now every request reports five times its latency for a window, as when the gateway's
    // host stalls: cut, but not below 10 (100/s best × 100 ms no-load), where it holds.
    decisions.clear();
    let mut lowest = settled;
    for _ in 0..40 {
        now += MS * 50;
        decisions.extend(limiter.record(MS * 500, settled, now));
        lowest = lowest.min(limiter.limit());
    }
    assert_eq!(lowest, 10, "{decisions:?}");
    assert_eq!(
        decisions.last(),
        Some(&Decision::HeldAtFloor),
        "{decisions:?}"
    );
    let held = decisions.iter().filter(|&&d| d == Decision::HeldAtFloor);
    assert!(held.count() >= 3, "{decisions:?}");
    // Slow for good: once the fast windows have left the rate memory, cuts go on.
    decisions.clear();
    for _ in 0..40 {
        now += MS * 50;
        decisions.extend(limiter.record(MS * 500, settled, now));
    }
    assert!(decisions.contains(&Decision::Shrank), "{decisions:?}");
    assert!(limiter.limit() < 10, "{}", limiter.limit());
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
    // The knee drops to 4 (workers lost capacity), latency at 12 in flight triples: once
    // the faster past has left the rate memory, the limit comes down.
    let t1 = t0 + Duration::from_secs(20);
    let mut now = t1;
    for _ in 0..300 {
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
    let mut idle = 0;
    for _ in 0..500 {
        now += MS * 100;
        if limiter.record(MS * 100, 1, now) == Some(Decision::HeldIdle) {
            idle += 1;
        }
    }
    assert_eq!(
        limiter.limit(),
        3,
        "one request at a time says nothing about more"
    );
    assert!(idle > 0, "counted as held_idle");
}

#[test]
fn it_reprobes_periodically_with_samples_dispatched_under_the_pin() {
    let t0 = Instant::now();
    let mut limiter = AdaptiveLimit::new(&config(), 64);
    run(&mut limiter, t0, MS * 100, 16, 30);
    assert!(limiter.limit() > 3);
    let at = t0 + Duration::from_secs(61);
    assert_eq!(
        limiter.record(MS * 150, 16, at),
        Some(Decision::ProbeStarted)
    );
    assert_eq!(limiter.limit(), 3, "probing again after min_rtt_interval");
    // Finishing at 3 in flight, but dispatched before the pin: it queued behind more.
    for i in 1..=5u32 {
        limiter.record(MS * 900, 3, at + MS * (100 * i));
    }
    let done = at + MS * 1000;
    let mut decisions = Vec::new();
    for i in 0..20u32 {
        decisions.extend(limiter.record(MS * 200, 3, done + MS * (10 * i)));
    }
    assert_eq!(decisions, [Decision::ProbeMeasured]);
    assert_eq!(limiter.min_rtt(), Some(MS * 200), "the workers got slower");
    assert!(limiter.limit() > 3, "resumed");
}
