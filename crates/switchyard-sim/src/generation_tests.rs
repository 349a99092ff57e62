//! Scheduler and timing-model tests on paused tokio time.

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::*;
use crate::config::SimConfig;
use crate::fault::Fault;

fn engine(max_running: usize) -> Arc<Engine> {
    let config = SimConfig {
        max_running,
        ..SimConfig::default()
    };
    Arc::new(Engine::new(config).unwrap())
}

/// A prompt of `count` distinct words starting with `tag`.
fn prompt(tag: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{tag}{i}")).collect()
}

/// Drives a generation to the end; returns (time to first token, usage).
async fn run(engine: Arc<Engine>, words: Vec<String>, max_tokens: usize) -> (Duration, Usage) {
    let start = Instant::now();
    let mut generation = Generation::new(engine, &words, max_tokens);
    let mut ttft = None;
    loop {
        match generation.next_event().await {
            Some(GenEvent::Token(_)) => {
                ttft.get_or_insert_with(|| start.elapsed());
            }
            Some(GenEvent::Finished(usage)) => return (ttft.unwrap(), usage),
            None => panic!("ended without usage"),
        }
    }
}

fn assert_close(actual: Duration, expected_ms: f64) {
    let actual_ms = actual.as_secs_f64() * 1000.0;
    assert!(
        (actual_ms - expected_ms).abs() <= 1.5,
        "expected ~{expected_ms} ms, got {actual_ms} ms"
    );
}

#[tokio::test(start_paused = true)]
async fn at_most_max_running_and_the_rest_wait() {
    let engine = engine(2);
    let mut tasks = JoinSet::new();
    for i in 0..5 {
        tasks.spawn(run(Arc::clone(&engine), prompt(&format!("p{i}-"), 100), 8));
    }
    tokio::time::sleep(Duration::from_millis(1)).await;
    let stats = engine.stats();
    assert_eq!((stats.running, stats.waiting), (2, 3));
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
        assert!(engine.stats().running <= 2);
    }
    let stats = engine.stats();
    assert_eq!((stats.running, stats.waiting), (0, 0));
    assert_eq!(stats.requests_completed, 5);
    assert_eq!(stats.generation_tokens, 40);
}

#[tokio::test(start_paused = true)]
async fn queue_is_fifo_and_ttft_grows_with_queue_wait() {
    let engine = engine(1);
    let mut handles = Vec::new();
    for i in 0..3 {
        handles.push(tokio::spawn(run(
            Arc::clone(&engine),
            prompt(&format!("q{i}-"), 1000),
            5,
        )));
        // Let each request reach the queue before the next one arrives.
        tokio::task::yield_now().await;
    }
    let mut ttfts = Vec::new();
    for handle in handles {
        ttfts.push(handle.await.unwrap().0);
    }
    // Alone: 40 ms prefill. Each predecessor adds its whole run: 40 + 4 x 5 = 60 ms.
    assert_close(ttfts[0], 40.0);
    assert_close(ttfts[1], 100.0);
    assert_close(ttfts[2], 160.0);
}

#[tokio::test(start_paused = true)]
async fn ttft_grows_with_uncached_tokens_and_cache_shortens_it() {
    let engine = engine(4);
    let (short, _) = run(Arc::clone(&engine), prompt("a", 1000), 1).await;
    let (long, _) = run(Arc::clone(&engine), prompt("b", 2008), 1).await;
    assert_close(short, 40.0);
    assert_close(long, 2008.0 / 1000.0 * 40.0);

    // Same prompt again: its 125 full blocks (2000 tokens) are cached, 8 are not.
    let (cached, usage) = run(Arc::clone(&engine), prompt("b", 2008), 1).await;
    assert_eq!(usage.prompt_tokens_details.cached_tokens, 2000);
    assert_close(cached, 8.0 / 1000.0 * 40.0);
    assert!(cached < long);
    assert_eq!(engine.stats().cached_tokens, 2000);
}

#[tokio::test(start_paused = true)]
async fn contention_and_slow_fault_stretch_decode() {
    // 50 ms per token keeps every expected pause (also 50 x 1.02) on whole milliseconds,
    // the timer's resolution.
    let config = SimConfig {
        decode_ms_per_token: 50.0,
        ..SimConfig::default()
    };
    let engine = Arc::new(Engine::new(config).unwrap());
    let start = Instant::now();
    run(Arc::clone(&engine), prompt("s", 0), 11).await;
    assert_close(start.elapsed(), 500.0);

    engine.faults.set(Fault::Slow { factor: 10.0 });
    let start = Instant::now();
    run(Arc::clone(&engine), prompt("s", 0), 11).await;
    assert_close(start.elapsed(), 5000.0);
    engine.faults.set(Fault::Ok);

    // Two running together, memory-bound: each token costs 50 x 1.02 ms, so the pair
    // finishes in about the time one takes alone (throughput nearly doubles).
    let start = Instant::now();
    let ((_, x), (_, y)) = tokio::join!(
        run(Arc::clone(&engine), prompt("x", 0), 11),
        run(Arc::clone(&engine), prompt("y", 0), 11)
    );
    assert_eq!((x.completion_tokens, y.completion_tokens), (11, 11));
    assert_close(start.elapsed(), 510.0);
}

#[tokio::test(start_paused = true)]
async fn past_the_compute_knee_a_step_grows_with_the_batch() {
    let config = SimConfig {
        decode_ms_per_token: 10.0,
        compute_knee: 2,
        ..SimConfig::default()
    };
    let engine = Arc::new(Engine::new(config).unwrap());
    // Four running, knee at two: each step costs 10 x 4 / 2 ms, so four requests take
    // twice as long as one and aggregate throughput is that of two.
    let start = Instant::now();
    let mut set = JoinSet::new();
    for tag in ["a", "b", "c", "d"] {
        set.spawn(run(Arc::clone(&engine), prompt(tag, 0), 11));
    }
    while let Some(done) = set.join_next().await {
        assert_eq!(done.unwrap().1.completion_tokens, 11);
    }
    assert_close(start.elapsed(), 200.0);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_running_request_counts_a_cancel_and_frees_the_slot() {
    let engine = engine(1);
    let mut generation = Generation::new(Arc::clone(&engine), &prompt("c", 64), 100);
    assert!(matches!(
        generation.next_event().await,
        Some(GenEvent::Token(_))
    ));
    assert_eq!(engine.stats().running, 1);
    assert!(engine.load().kv_cache_usage > 0.0);
    drop(generation);
    let stats = engine.stats();
    assert_eq!((stats.running, stats.requests_cancelled), (0, 1));
    assert_eq!(stats.requests_completed, 0);
    assert_eq!(engine.with_state(|state| state.private_blocks), 0);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_queued_request_leaves_the_queue() {
    let engine = engine(1);
    let mut first = Generation::new(Arc::clone(&engine), &prompt("f", 16), 3);
    first.next_event().await;
    let mut second = Generation::new(Arc::clone(&engine), &prompt("g", 16), 3);
    let mut pending = Box::pin(second.next_event());
    assert!((&mut pending).now_or_never().is_none());
    assert_eq!(engine.stats().waiting, 1);
    drop(pending);
    drop(second);
    let stats = engine.stats();
    assert_eq!((stats.running, stats.waiting), (1, 0));
    assert_eq!(stats.requests_cancelled, 1);
    drop(first);
    assert_eq!(engine.stats().running, 0);
}

#[tokio::test(start_paused = true)]
async fn slot_granted_to_a_departed_waiter_is_returned() {
    let engine = engine(1);
    let mut first = Generation::new(Arc::clone(&engine), &prompt("f", 16), 1);
    first.next_event().await;
    let mut second = Generation::new(Arc::clone(&engine), &prompt("g", 16), 1);
    let mut pending = Box::pin(second.next_event());
    assert!((&mut pending).now_or_never().is_none());
    // The first finishes and hands its slot to the second, which never looks.
    assert!(matches!(
        first.next_event().await,
        Some(GenEvent::Finished(_))
    ));
    assert_eq!(engine.stats().running, 1);
    drop(pending);
    drop(second);
    assert_eq!(engine.stats().running, 0);
}

fn cold_engine() -> Arc<Engine> {
    let config = SimConfig {
        cold_start_ms: 3_000.0,
        cold_after_ms: 60_000.0,
        ..SimConfig::default()
    };
    Arc::new(Engine::new(config).unwrap())
}

#[tokio::test(start_paused = true)]
async fn cold_engine_pays_one_shared_wake_then_serves_warm() {
    let engine = cold_engine();
    assert!(
        engine.load().cold,
        "a fresh engine has not loaded its model"
    );
    // Three requests arrive together while cold: they wait for one wake, not three.
    let mut tasks = JoinSet::new();
    for i in 0..3 {
        tasks.spawn(run(Arc::clone(&engine), prompt(&format!("w{i}-"), 1000), 1));
    }
    while let Some(done) = tasks.join_next().await {
        let (ttft, _) = done.unwrap();
        // 3 s wake + 40 ms prefill, +5 % per extra running request.
        let ms = ttft.as_secs_f64() * 1000.0;
        assert!((3_040.0..=3_046.0).contains(&ms), "ttft {ms} ms");
    }
    assert_eq!(engine.stats().cold_starts, 1);
    assert!(!engine.load().cold);
    // Idle 59 s: still warm, no extra delay.
    tokio::time::sleep(Duration::from_secs(59)).await;
    let (ttft, _) = run(Arc::clone(&engine), prompt("warm", 1000), 1).await;
    assert_close(ttft, 40.0);
    assert_eq!(engine.stats().cold_starts, 1);
}

#[tokio::test(start_paused = true)]
async fn idle_engine_goes_cold_and_loses_its_prefix_cache() {
    let engine = cold_engine();
    let (first, _) = run(Arc::clone(&engine), prompt("p", 1000), 1).await;
    assert_close(first, 3_040.0);
    let (_, usage) = run(Arc::clone(&engine), prompt("p", 1000), 1).await;
    assert_eq!(
        usage.prompt_tokens_details.cached_tokens, 992,
        "warm: cached"
    );
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert!(engine.load().cold);
    let (ttft, usage) = run(Arc::clone(&engine), prompt("p", 1000), 1).await;
    assert_eq!(
        usage.prompt_tokens_details.cached_tokens, 0,
        "a reloaded engine starts with an empty prefix cache"
    );
    assert_close(ttft, 3_040.0);
    assert_eq!(engine.stats().cold_starts, 2);
    let text = engine.render_metrics().unwrap();
    assert!(text.contains(r#"switchyard_sim_cold_starts_total{model_name="sim-llama"} 2"#));
}

#[tokio::test(start_paused = true)]
async fn time_scale_shrinks_the_cold_start() {
    let config = SimConfig {
        cold_start_ms: 3_000.0,
        cold_after_ms: 60_000.0,
        time_scale: 0.1,
        ..SimConfig::default()
    };
    let engine = Arc::new(Engine::new(config).unwrap());
    let (ttft, _) = run(Arc::clone(&engine), prompt("t", 1000), 1).await;
    assert_close(ttft, 304.0);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!engine.load().cold, "6 s scaled idle threshold not reached");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert!(engine.load().cold);
}

/// Drives a chat generation to the end; returns its answer text and usage.
async fn answer_chat(engine: Arc<Engine>, words: &[String], max_tokens: usize) -> (String, Usage) {
    let mut generation = Generation::new(engine, words, max_tokens)
        .with_answer_head(crate::tokens::chat_answer_head());
    let mut text = String::new();
    loop {
        match generation.next_event().await {
            Some(GenEvent::Token(piece)) => text.push_str(&piece),
            Some(GenEvent::Finished(usage)) => return (text, usage),
            None => panic!("ended without usage"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_next_turn_hits_through_the_generated_answer() {
    use crate::tokens::{render_message, tokenize};
    let engine = engine(4);
    let opening = [
        render_message("system", &prompt("s", 39).join(" ")),
        render_message("user", "hello"),
    ]
    .join(" ");
    let first = tokenize(&opening);
    assert_eq!(first.len(), 42, "two full blocks and a partial one");
    let (answer, usage) = answer_chat(Arc::clone(&engine), &first, 40).await;
    assert_eq!(usage.completion_tokens, 40);
    // The client sends the history with the answer it got, then its next message.
    let next_turn = |answer: &str| {
        tokenize(
            &[
                opening.clone(),
                render_message("assistant", answer),
                render_message("user", "tell me more"),
            ]
            .join(" "),
        )
    };
    let (_, usage) = answer_chat(Arc::clone(&engine), &next_turn(&answer), 4).await;
    // 42 prompt tokens + the assistant tag + 39 answer tokens whose KV was computed = 82:
    // five full blocks, three more than the first prompt alone had.
    assert_eq!(usage.prompt_tokens_details.cached_tokens, 5 * 16);
    // A history whose answer differs from what the engine said hits only the prompt's blocks.
    let other = answer.replacen(' ', " x ", 1);
    let fresh = engine_with_same_history(&first).await;
    let (_, usage) = answer_chat(fresh, &next_turn(&other), 4).await;
    assert_eq!(usage.prompt_tokens_details.cached_tokens, 2 * 16);
}

/// A new engine that has served only `first`.
async fn engine_with_same_history(first: &[String]) -> Arc<Engine> {
    let engine = engine(4);
    answer_chat(Arc::clone(&engine), first, 40).await;
    engine
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_answer_caches_only_what_was_computed() {
    let engine = engine(4);
    let words = prompt("c", 32);
    let mut generation = Generation::new(Arc::clone(&engine), &words, 100)
        .with_answer_head(vec!["<|assistant|>".into()]);
    let mut text = String::new();
    for _ in 0..20 {
        if let Some(GenEvent::Token(piece)) = generation.next_event().await {
            text.push_str(&piece);
        }
    }
    drop(generation);
    assert_eq!(engine.stats().requests_cancelled, 1);
    // 32 prompt tokens + tag + 19 computed answer tokens = 52: three full blocks.
    let mut continued = words.clone();
    continued.push("<|assistant|>".into());
    continued.extend(tokenize_words(&text));
    continued.extend(prompt("u", 30));
    let (_, usage) = run(engine, continued, 1).await;
    assert_eq!(usage.prompt_tokens_details.cached_tokens, 3 * 16);
}

fn tokenize_words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}
