use super::*;
use crate::progress::StreamMark;
use crate::status::Routability;
use crate::worker::decisions::ProbeResult;
use crate::worker::decisions::tests::clocked_core as clocked;

const WINDOW: Duration = Duration::from_millis(1500);
const TICK: Duration = Duration::from_millis(250);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn counter(registry: &prometheus::Registry, name: &str, label: &str) -> u64 {
    registry
        .gather()
        .into_iter()
        .find(|f| f.name() == name)
        .and_then(|f| {
            f.get_metric()
                .iter()
                .find(|m| m.get_label().iter().any(|l| l.value() == label))
                .map(|m| m.get_counter().get_value() as u64)
        })
        .unwrap_or(0)
}

/// Streams as (first chunk, last chunk) ages in ms.
fn census(now: Instant, streams: &[(u64, u64)], completed_ms_ago: Option<u64>) -> Evidence {
    Evidence {
        now,
        silence: None,
        streams: StreamCensus {
            streams: streams
                .iter()
                .map(|(first, last)| StreamMark {
                    first: now - ms(*first),
                    last: now - ms(*last),
                })
                .collect(),
            last_completion: completed_ms_ago.map(|a| now - ms(a)),
        },
    }
}

#[test]
fn overdue_time_is_the_part_of_a_span_the_gateway_spent_late() {
    let start = Instant::now();
    let mut lag = GatewayLag::default();
    lag.tick(start, TICK);
    lag.tick(start + ms(250), TICK); // on time
    lag.tick(start + ms(1500), TICK); // 1 s late: overdue from 0.5 s to 1.5 s
    lag.tick(start + ms(1800), TICK); // 50 ms late
    assert_eq!(lag.overdue_since(start), ms(1050));
    assert_eq!(lag.overdue_since(start + ms(1000)), ms(550), "partly");
    assert_eq!(lag.overdue_since(start + ms(1600)), ms(50));
    assert_eq!(lag.overdue_since(start + ms(1800)), Duration::ZERO);
}

#[test]
fn streams_stuck_mid_answer_while_nothing_completes_are_a_hang() {
    let lag = GatewayLag::default();
    let now = Instant::now() + Duration::from_secs(100);
    // One stuck stream is not enough; two are, even with fresh streams still answering.
    assert_eq!(
        check(
            &census(now, &[(1630, 1600), (40, 10)], Some(5000)),
            WINDOW,
            2,
            &lag
        ),
        HungCheck::Fine
    );
    assert_eq!(
        check(
            &census(now, &[(1730, 1700), (1530, 1500), (50, 20)], Some(5000)),
            WINDOW,
            2,
            &lag
        ),
        HungCheck::StalledStreams {
            streams: 2,
            longest: ms(1700)
        }
    );
    assert_eq!(
        check(
            &census(now, &[(1730, 1700), (1530, 1500)], None),
            WINDOW,
            0,
            &lag
        ),
        HungCheck::Fine,
        "switched off"
    );
}

#[test]
fn pauses_shorter_than_the_window_and_slow_streams_among_healthy_ones_are_not_a_hang() {
    let lag = GatewayLag::default();
    let now = Instant::now() + Duration::from_secs(100);
    // Preempted for just under the window: nothing stuck yet.
    assert_eq!(
        check(
            &census(now, &[(9000, 1400), (9000, 1450), (9000, 1490)], None),
            WINDOW,
            2,
            &lag
        ),
        HungCheck::Fine
    );
    // Stuck streams on a worker that completed an answer within the window.
    assert_eq!(
        check(
            &census(now, &[(1730, 1700), (1630, 1600), (40, 10)], Some(900)),
            WINDOW,
            2,
            &lag
        ),
        HungCheck::StallsExcused
    );
    // Two stuck among long streams that keep answering: slow ones among healthy ones.
    let long = [
        (9000, 1700),
        (9000, 1600),
        (9000, 10),
        (8000, 20),
        (7000, 30),
    ];
    assert_eq!(
        check(&census(now, &long, None), WINDOW, 2, &lag),
        HungCheck::StallsExcused
    );
    // Fresh streams (answering for less than the window) prove nothing yet.
    let fresh = [(1730, 1700), (1630, 1600), (100, 10), (200, 20), (300, 30)];
    assert!(matches!(
        check(&census(now, &fresh, None), WINDOW, 2, &lag),
        HungCheck::StalledStreams { streams: 2, .. }
    ));
}

#[test]
fn a_gateway_that_ran_late_does_not_count_its_own_lag_as_the_worker_silence() {
    let start = Instant::now();
    let mut lag = GatewayLag::default();
    lag.tick(start, TICK);
    // Starved: the next check ran 1.25 s late, so a worker quiet for 1.6 s was quiet only
    // 0.35 s of the gateway's working time.
    let now = start + ms(1500);
    lag.tick(now, TICK);
    let silent = Evidence {
        now,
        silence: Some(ms(1600)),
        streams: StreamCensus::default(),
    };
    assert_eq!(
        check(&silent, WINDOW, 2, &lag),
        HungCheck::DeferredForGatewayLag
    );
    let stuck = census(now, &[(1630, 1600), (1630, 1600)], None);
    assert_eq!(
        check(&stuck, WINDOW, 2, &lag),
        HungCheck::DeferredForGatewayLag
    );
    // On-time checks since: the silence counts again once it is over the window net.
    let mut now = now;
    for _ in 0..5 {
        now += TICK;
        lag.tick(now, TICK);
    }
    let silent = Evidence {
        now,
        silence: Some(ms(1600 + 1250)),
        streams: StreamCensus::default(),
    };
    assert_eq!(check(&silent, WINDOW, 2, &lag), HungCheck::Silent(ms(1600)));
}

/// The shape that escaped the worker-wide silence: every new stream delivers its first
/// chunks and then stalls, so the worker is never silent, and the streams keep coming.
#[test]
fn a_worker_whose_streams_stall_is_marked_hung_within_the_window_while_streams_keep_arriving() {
    let (clock, registry, mut core, handle) = clocked();
    let config = HealthConfig::default();
    let mut streams = Vec::new();
    let mut elapsed = Duration::ZERO;
    let mut marked_at = None;
    // A stream arrives every 100 ms, sends three chunks 10 ms apart and then nothing.
    while elapsed < Duration::from_secs(4) && marked_at.is_none() {
        let mut stream = handle.start_request();
        stream.expect_bytes_within(Duration::ZERO);
        for _ in 0..3 {
            stream.note_chunk();
            clock.advance(ms(10));
        }
        streams.push(stream);
        clock.advance(ms(70));
        elapsed += ms(100);
        // Checked every 100 ms: never late, so no lag is discounted.
        core.on_watch(&config);
        if handle.is_hung() {
            marked_at = Some(elapsed);
        }
    }
    let marked_at = marked_at.expect("marked hung");
    // The second stream stalled at 0.12 s: window (1.5 s) plus one check interval.
    assert!(marked_at <= ms(2000), "{marked_at:?}");
    assert_eq!(handle.routability(), Routability::Hung);
    assert_eq!(
        handle.status().last_transition,
        Some("hung_stalled_streams")
    );
    assert_eq!(
        counter(
            &registry,
            "switchyard_worker_hung_checks_total",
            "stalled_streams"
        ),
        1
    );
    assert!(
        handle.silence().is_some_and(|s| s < WINDOW),
        "the worker-wide silence never reached the window"
    );

    // Probes confirm it is back: the streams still stuck from before do not mark it again.
    for _ in 0..config.prober.successes_to_confirm {
        core.on_probe(ProbeResult::Success, &config);
    }
    assert!(!handle.is_hung());
    for _ in 0..8 {
        clock.advance(TICK);
        core.on_watch(&config);
    }
    assert!(!handle.is_hung(), "old stuck streams are forgiven");
    assert_eq!(handle.status().last_transition, Some("hung_recovered"));
    drop(streams);
}

#[test]
fn a_stream_waiting_for_its_first_chunk_or_one_slow_stream_among_completing_ones_is_not_a_hang() {
    let (clock, registry, mut core, handle) = clocked();
    let config = HealthConfig::default();
    // A long prefill: in flight for 5 s without a chunk. Not due (a non-streaming
    // answer's deadline), so the worker-wide silence does not count either.
    let mut prefill = handle.start_request();
    prefill.expect_bytes_within(Duration::from_secs(30));
    // One stream stuck mid-answer while others keep completing.
    let mut slow = handle.start_request();
    slow.expect_bytes_within(Duration::ZERO);
    slow.note_chunk();
    for _ in 0..20 {
        clock.advance(TICK);
        let mut quick = handle.start_request();
        quick.expect_bytes_within(Duration::ZERO);
        quick.note_chunk();
        quick.note_completed();
        drop(quick);
        core.on_watch(&config);
    }
    assert!(!handle.is_hung());
    // A second stuck stream: still excused while answers complete.
    let mut second = handle.start_request();
    second.expect_bytes_within(Duration::ZERO);
    second.note_chunk();
    for _ in 0..8 {
        clock.advance(TICK);
        handle.note_progress();
        let quick = handle.start_request();
        quick.note_completed();
        drop(quick);
        core.on_watch(&config);
    }
    assert!(!handle.is_hung(), "answers still complete");
    assert!(
        counter(
            &registry,
            "switchyard_worker_hung_checks_total",
            "stalls_excused"
        ) > 0
    );
    drop((prefill, slow, second));
}
