//! The downgrade chain end to end: alias → model with normalisation and disclosure headers,
//! the cache fallback with its age, time-sensitive requests skipping it, bounds, and the
//! friendly error at the end.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use switchyard_core::header_names;

mod common;

use common::*;
use serde_json::json;
use std::time::Duration;
use switchyard_warmup::downgrade::Notice;
use switchyard_warmup::{
    CacheKey, CacheLookup, ChainConfig, DegradationConfig, DowngradeRequest, DowngradeStep,
    ModelProfile, ResponseCache, ResponseCacheConfig, degraded_headers, friendly_error,
    normalise_chat, plan_downgrade,
};

fn config() -> DegradationConfig {
    DegradationConfig {
        chains: vec![ChainConfig {
            alias: "flagship".into(),
            models: vec!["big".into(), "standard".into(), "small".into()],
            cache_fallback: true,
        }],
        profiles: vec![ModelProfile {
            model: "standard".into(),
            system_role: false,
            max_history_messages: 2,
        }],
        ..Default::default()
    }
}

fn body() -> serde_json::Value {
    json!({
        "model": "flagship",
        "stream": false,
        "messages": [
            {"role": "system", "content": "You are ACME's support agent."},
            {"role": "user", "content": "I ordered a lamp."},
            {"role": "assistant", "content": "Thanks, noted."},
            {"role": "user", "content": "Where is it?"},
        ]
    })
}

#[test]
fn an_unavailable_flagship_moves_down_with_normalisation_and_disclosure() {
    let config = config();
    let request = DowngradeRequest {
        alias: "flagship",
        ..Default::default()
    };
    let step = plan_downgrade(&config, &request, |model| model != "big");
    let DowngradeStep::Model {
        model,
        degraded: true,
        ..
    } = &step
    else {
        panic!("{step:?}")
    };
    let normalised = normalise_chat(&body(), model, config.profile(model)).unwrap();
    assert_eq!(normalised.body["model"], "standard");
    assert_eq!(
        normalised.body["messages"],
        json!([{"role": "user", "content": "You are ACME's support agent.\n\nWhere is it?"}]),
        "history trimmed to the newest user turn, system prompt folded into it"
    );
    assert_eq!(
        normalised.notices,
        vec![
            Notice::HistoryTrimmed {
                dropped: 2,
                kept: 1
            },
            Notice::SystemPromptFolded
        ]
    );
    let headers = degraded_headers(&step, &normalised.notices, None);
    assert_eq!(headers[0], (header_names::DEGRADED, "standard".to_string()));
    let notice = &headers
        .iter()
        .find(|(name, _)| *name == header_names::NOTICE)
        .unwrap()
        .1;
    assert!(notice.contains("history trimmed") && notice.is_ascii());
}

#[test]
fn the_cache_fallback_serves_with_its_age_and_skips_time_sensitive_requests() {
    let (clock, wall) = manual_wall(0);
    let registry = prometheus::Registry::new();
    let cache = ResponseCache::new(ResponseCacheConfig::default(), wall, &registry).unwrap();
    let key = CacheKey::from_chat("flagship", &body()).unwrap();
    cache.insert(
        key.clone(),
        "big",
        r#"{"choices":[{"message":{"content":"On its way."}}]}"#.into(),
    );
    clock.advance(Duration::from_secs(90));

    // Nothing can serve: the chain falls to the cache.
    let config = config();
    let request = DowngradeRequest {
        alias: "flagship",
        ..Default::default()
    };
    let step = plan_downgrade(&config, &request, |_| false);
    assert_eq!(step, DowngradeStep::CacheFallback);
    let reformatted = json!({"messages": [
        {"role": "system", "content": "You are   ACME's support agent."},
        {"role": "user", "content": "I ordered a lamp.\n"},
        {"role": "assistant", "content": "Thanks, noted."},
        {"role": "user", "content": " Where is it?"},
    ]});
    let same = CacheKey::from_chat("flagship", &reformatted).unwrap();
    let CacheLookup::Hit { answer, age } = cache.lookup(&same, "Where is it?", None) else {
        panic!("expected a hit")
    };
    assert_eq!(answer.model, "big");
    let headers = degraded_headers(&step, &[], Some(age));
    assert!(headers.contains(&(header_names::CACHE_AGE, "90".to_string())));

    assert_eq!(
        cache.lookup(&key, "Where is it?", Some("true")),
        CacheLookup::TimeSensitive
    );
    let news = CacheKey::from_prompt("flagship", "What is the latest news today?");
    cache.insert(news.clone(), "big", "old news".into());
    assert_eq!(
        cache.lookup(&news, "What is the latest news today?", None),
        CacheLookup::TimeSensitive
    );
    assert_eq!(
        cache.lookup(&CacheKey::from_prompt("flagship", "other"), "other", None),
        CacheLookup::Miss
    );

    clock.advance(Duration::from_secs(86_400));
    assert_eq!(
        cache.lookup(&key, "Where is it?", None),
        CacheLookup::Expired
    );
    assert_eq!(
        cache.lookup(&key, "Where is it?", None),
        CacheLookup::Miss,
        "expired answers are dropped"
    );
    let hits = [("outcome", "hit")];
    assert_eq!(
        metric(
            &registry,
            "switchyard_degradation_cache_lookups_total",
            &hits
        ),
        1.0
    );
    let skipped = [("outcome", "time_sensitive")];
    assert_eq!(
        metric(
            &registry,
            "switchyard_degradation_cache_lookups_total",
            &skipped
        ),
        2.0
    );

    // After the cache, the friendly error.
    let error = friendly_error(&config, "flagship");
    assert_eq!(error.status, 503);
    assert_eq!(error.body["error"]["type"], "service_unavailable");
}

#[test]
fn the_cache_stays_within_its_bounds_least_recently_used_first() {
    let (_clock, wall) = manual_wall(0);
    let registry = prometheus::Registry::new();
    let bounded = ResponseCacheConfig {
        max_entries: 16,
        ..Default::default()
    };
    let cache = ResponseCache::new(bounded, wall, &registry).unwrap();
    for i in 0..200 {
        let key = CacheKey::from_prompt("m", &format!("question {i}"));
        cache.insert(key.clone(), "m", format!("answer {i}"));
        assert!(
            matches!(cache.lookup(&key, "q", None), CacheLookup::Hit { .. }),
            "newest stays"
        );
    }
    assert!(cache.len() <= 16, "{}", cache.len());
    assert!(
        metric(
            &registry,
            "switchyard_degradation_cache_evictions_total",
            &[]
        ) >= 184.0
    );
    assert_eq!(
        metric(&registry, "switchyard_degradation_cache_entries", &[]),
        cache.len() as f64
    );

    let tiny = ResponseCacheConfig {
        max_bytes: 16 * 64,
        ..Default::default()
    };
    let cache = ResponseCache::new(tiny, manual_wall(0).1, &prometheus::Registry::new()).unwrap();
    cache.insert(CacheKey::from_prompt("m", "big"), "m", "x".repeat(1_000));
    assert!(
        cache.is_empty(),
        "an answer larger than a shard's share is not cached"
    );
}

#[test]
fn survival_serves_cache_only_and_shrink_skips_the_flagship_for_non_core_callers() {
    let config = config();
    let cache_only = DowngradeRequest {
        alias: "flagship",
        skip: 0,
        cache_only: true,
    };
    assert_eq!(
        plan_downgrade(&config, &cache_only, |_| true),
        DowngradeStep::CacheFallback
    );
    let shrink = DowngradeRequest {
        alias: "flagship",
        skip: 1,
        cache_only: false,
    };
    assert!(matches!(
        plan_downgrade(&config, &shrink, |_| true),
        DowngradeStep::Model { ref model, position: 1, .. } if model == "standard"
    ));
}
