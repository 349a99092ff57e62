//! The cache fallback (an old answer beats no answer when no model can serve): a bounded LRU of answers keyed by the normalised
//! request, each stored with its generation time. It answers only requests that are not
//! time-sensitive (configured patterns, or `x-switchyard-fresh: true`) and never answers
//! with something older than `max_age_secs`; a hit reports its age. Sharded so inserting
//! every answer does not serialise the response path on one lock.

use parking_lot::Mutex;
use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use switchyard_router::stable_hash;

use crate::clock::{UnixMillis, secs_to_ms};
use crate::config::ResponseCacheConfig;
use switchyard_core::WallClock;

const SHARDS: usize = 16;

#[path = "cache_shard.rs"]
mod shard;
use shard::{Shard, entry_bytes};

/// Request fields already in the key (prompt, model), that do not change the answer, or
/// that only bound its length (a cached answer is a fallback; its length is disclosed).
const UNSCOPED_FIELDS: [&str; 8] = [
    "messages",
    "prompt",
    "model",
    "stream",
    "stream_options",
    "user",
    "max_tokens",
    "max_completion_tokens",
];

/// The normalised request: alias plus each message's role and whitespace-collapsed text,
/// so formatting differences do not split one question into several entries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CacheKey(String);

impl CacheKey {
    pub fn from_chat(alias: &str, body: &Value) -> Option<Self> {
        let messages = body.get("messages")?.as_array()?;
        let mut key = ChatKeyWriter::new(alias, messages.len());
        for message in messages {
            let role = message.get("role").and_then(Value::as_str).unwrap_or("");
            let texts: &mut dyn Iterator<Item = &str> = match message.get("content") {
                Some(Value::String(text)) => &mut std::iter::once(text.as_str()),
                Some(Value::Array(parts)) => &mut parts
                    .iter()
                    .filter_map(|part| part.get("text").and_then(Value::as_str)),
                _ => &mut std::iter::empty(),
            };
            key.turn(role, texts);
        }
        Some(key.finish())
    }

    pub fn from_prompt(alias: &str, prompt: &str) -> Self {
        Self(format!("{alias}\u{1f}prompt\u{1e}{}", collapse(prompt)))
    }

    /// The same key scoped to one caller and to the request's generation parameters (every
    /// top-level field of `body` but the prompt, the model, the streaming flags and the length
    /// limits: sampling, tools, response format, stop sequences…), so no caller is served another's answer and
    /// requests that would generate differently never share one.
    pub fn scoped(self, caller: &str, body: &Value) -> Self {
        self.scoped_by(caller, body.as_object().into_iter().flatten())
    }

    /// [`CacheKey::scoped`] given the body's top-level fields (in `Value`'s key order).
    pub(super) fn scoped_by<'v, I>(self, caller: &str, fields: I) -> Self
    where
        I: Iterator<Item = (&'v String, &'v Value)> + Clone,
    {
        let params = stable_hash(&generation_params(fields));
        let mut key = String::with_capacity(caller.len() + 2 * 2 + 16 + self.0.len());
        key.push_str(caller);
        key.push('\u{1d}');
        push_hex(&mut key, params);
        key.push('\u{1d}');
        key.push_str(&self.0);
        Self(key)
    }

    fn shard(&self) -> usize {
        (stable_hash(self.0.as_bytes()) % SHARDS as u64) as usize
    }
}

/// Whether a top-level request field stays out of the generation parameters.
pub(super) fn is_unscoped(name: &str) -> bool {
    UNSCOPED_FIELDS.contains(&name)
}

/// The chat part of a key: the alias, then each message's role and whitespace-collapsed text.
pub(super) struct ChatKeyWriter(String);

impl ChatKeyWriter {
    pub(super) fn new(alias: &str, messages: usize) -> Self {
        let mut key = String::with_capacity(alias.len() + 64 * messages);
        key.push_str(alias);
        Self(key)
    }

    /// One message: its role and its texts (the content string, or each part's text).
    pub(super) fn turn<'t>(&mut self, role: &str, texts: impl IntoIterator<Item = &'t str>) {
        self.0.push('\u{1f}');
        self.0.push_str(role);
        self.0.push('\u{1e}');
        // The whitespace-collapsed `content_text`, written in place: parts are joined by
        // whitespace there, so collapsing part by part gives the same words.
        let mut first = true;
        for text in texts {
            push_collapsed(&mut self.0, text, &mut first);
        }
    }

    pub(super) fn finish(self) -> CacheKey {
        CacheKey(self.0)
    }
}

/// The generation parameters among a body's top-level `fields` as compact JSON: the object of
/// its scoped fields (what `Value::Object(those fields).to_string()` prints), serialised field
/// by field straight from the request instead of from a copy of them.
fn generation_params<'v, I>(fields: I) -> Vec<u8>
where
    I: Iterator<Item = (&'v String, &'v Value)> + Clone,
{
    let mut out = Vec::with_capacity(64);
    out.push(b'{');
    for (name, value) in fields.clone() {
        if is_unscoped(name) {
            continue;
        }
        if out.len() > 1 {
            out.push(b',');
        }
        // Serialising a `Value` into a Vec cannot fail (its map keys are strings); should
        // it ever, the fields are serialised the slow way.
        let written = serde_json::to_writer(&mut out, name).and_then(|()| {
            out.push(b':');
            serde_json::to_writer(&mut out, value)
        });
        if written.is_err() {
            return generation_params_copied(fields);
        }
    }
    out.push(b'}');
    out
}

/// [`generation_params`] through a copy of the scoped fields.
fn generation_params_copied<'v>(fields: impl Iterator<Item = (&'v String, &'v Value)>) -> Vec<u8> {
    let params: serde_json::Map<String, Value> = fields
        .filter(|(name, _)| !is_unscoped(name))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    Value::Object(params).to_string().into_bytes()
}

fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Appends `text`'s words to `key`, one space between words (also between calls).
fn push_collapsed(key: &mut String, text: &str, first: &mut bool) {
    for word in text.split_whitespace() {
        if !*first {
            key.push(' ');
        }
        *first = false;
        key.push_str(word);
    }
}

/// `value` as 16 lower-case hex digits (what `{:016x}` prints).
fn push_hex(out: &mut String, value: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for shift in (0..16).rev() {
        out.push(char::from(DIGITS[((value >> (shift * 4)) & 0xf) as usize]));
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedAnswer {
    /// The response body as the worker produced it.
    pub body: String,
    pub model: String,
    pub generated_unix_ms: UnixMillis,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheLookup {
    /// Serve it with `x-switchyard-cache-age` (whole seconds of `age`).
    Hit {
        answer: Arc<CachedAnswer>,
        age: Duration,
    },
    Miss,
    /// Found, but older than `max_age_secs` (and now removed).
    Expired,
    /// The request wants fresh information: cached answers are never served to it.
    TimeSensitive,
    Disabled,
}

impl CacheLookup {
    fn label(&self) -> &'static str {
        match self {
            CacheLookup::Hit { .. } => "hit",
            CacheLookup::Miss => "miss",
            CacheLookup::Expired => "expired",
            CacheLookup::TimeSensitive => "time_sensitive",
            CacheLookup::Disabled => "disabled",
        }
    }
}

/// Whether a request must not be answered from the cache.
pub fn is_time_sensitive(
    config: &ResponseCacheConfig,
    prompt: &str,
    fresh_header: Option<&str>,
) -> bool {
    if fresh_header
        .is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
    {
        return true;
    }
    let prompt = prompt.to_lowercase();
    config
        .time_sensitive_patterns
        .iter()
        .any(|pattern| prompt.contains(&pattern.to_lowercase()))
}

pub struct ResponseCache {
    config: ResponseCacheConfig,
    clock: WallClock,
    shards: Vec<Mutex<Shard>>,
    lookups: IntCounterVec,
    evictions: IntCounter,
    entries: IntGauge,
    bytes: IntGauge,
}

impl ResponseCache {
    /// Registers `switchyard_degradation_cache_*` in `registry`.
    pub fn new(
        config: ResponseCacheConfig,
        clock: WallClock,
        registry: &Registry,
    ) -> Result<Self, prometheus::Error> {
        let lookups = IntCounterVec::new(
            Opts::new(
                "switchyard_degradation_cache_lookups_total",
                "Cache-fallback lookups by outcome (hit, miss, expired, time_sensitive, disabled).",
            ),
            &["outcome"],
        )?;
        let evictions = IntCounter::new(
            "switchyard_degradation_cache_evictions_total",
            "Cached answers evicted to stay within the entry and byte bounds.",
        )?;
        let entries = IntGauge::new(
            "switchyard_degradation_cache_entries",
            "Cached answers held.",
        )?;
        let bytes = IntGauge::new(
            "switchyard_degradation_cache_bytes",
            "Bytes of keys and answers held by the response cache.",
        )?;
        registry.register(Box::new(lookups.clone()))?;
        registry.register(Box::new(evictions.clone()))?;
        registry.register(Box::new(entries.clone()))?;
        registry.register(Box::new(bytes.clone()))?;
        Ok(Self {
            config,
            clock,
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            lookups,
            evictions,
            entries,
            bytes,
        })
    }

    /// Stores an answer generated now. Answers larger than a shard's byte share are skipped.
    pub fn insert(&self, key: CacheKey, model: &str, body: String) {
        if !self.config.enabled {
            return;
        }
        let answer = Arc::new(CachedAnswer {
            body,
            model: model.to_string(),
            generated_unix_ms: self.clock.unix_millis(),
        });
        let size = entry_bytes(&key, &answer);
        let max_bytes = (self.config.max_bytes / SHARDS).max(1);
        let max_entries = self.config.max_entries.div_ceil(SHARDS).max(1);
        if size > max_bytes {
            return;
        }
        let mut shard = self.shards[key.shard()].lock();
        let (before_entries, before_bytes) = (shard.entries.len(), shard.bytes);
        let evicted = shard.put(key, answer, size, (max_entries, max_bytes));
        let (entries, bytes) = (shard.entries.len(), shard.bytes);
        drop(shard);
        self.evictions.inc_by(evicted);
        self.entries.add(entries as i64 - before_entries as i64);
        self.bytes.add(bytes as i64 - before_bytes as i64);
    }

    /// Looks an answer up for a request whose prompt text is `prompt`.
    pub fn lookup(&self, key: &CacheKey, prompt: &str, fresh_header: Option<&str>) -> CacheLookup {
        let found = self.lookup_inner(key, prompt, fresh_header);
        self.lookups.with_label_values(&[found.label()]).inc();
        found
    }

    fn lookup_inner(
        &self,
        key: &CacheKey,
        prompt: &str,
        fresh_header: Option<&str>,
    ) -> CacheLookup {
        if !self.config.enabled {
            return CacheLookup::Disabled;
        }
        if is_time_sensitive(&self.config, prompt, fresh_header) {
            return CacheLookup::TimeSensitive;
        }
        let now = self.clock.unix_millis();
        let mut shard = self.shards[key.shard()].lock();
        let Some((answer, _)) = shard.entries.get(key) else {
            return CacheLookup::Miss;
        };
        let answer = Arc::clone(answer);
        let age_ms = now.saturating_sub(answer.generated_unix_ms);
        if age_ms > secs_to_ms(self.config.max_age_secs) {
            let before = shard.bytes;
            shard.remove(key);
            let after = shard.bytes;
            drop(shard);
            self.entries.dec();
            self.bytes.sub(before as i64 - after as i64);
            return CacheLookup::Expired;
        }
        shard.touch(key);
        CacheLookup::Hit {
            answer,
            age: Duration::from_millis(age_ms),
        }
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().entries.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::super::normalise::content_text;
    use super::*;
    use serde_json::json;

    /// The key as it was first written: whole texts collapsed, fields copied then printed.
    fn reference_key(alias: &str, caller: &str, body: &Value) -> String {
        let mut key = String::from(alias);
        for message in body["messages"].as_array().unwrap() {
            key.push('\u{1f}');
            key.push_str(message.get("role").and_then(Value::as_str).unwrap_or(""));
            key.push('\u{1e}');
            key.push_str(&collapse(&content_text(message)));
        }
        let params = stable_hash(&generation_params_copied(body.as_object().unwrap().iter()));
        format!("{caller}\u{1d}{params:016x}\u{1d}{key}")
    }

    #[test]
    fn keys_are_built_in_place_exactly_as_by_copying() {
        let bodies = [
            json!({"model": "m", "messages": [{"role": "user", "content": "  hi\n there "}]}),
            json!({"model": "m", "temperature": 0.5, "stop": ["\n", "é\"x"], "tools": [{"a": {"b": null}}],
                   "messages": [{"role": "system", "content": "be\tbrief"},
                                {"role": "user", "content": [{"type": "text", "text": "a "}, {"type": "image_url"}, {"text": " b\nc"}]},
                                {"role": "assistant"}, {"content": "no role"}],
                   "stream": true, "max_tokens": 9, "user": "u"}),
            json!({"messages": [], "seed": 7, "n": 1, "top_p": 1e-3}),
        ];
        for body in &bodies {
            let built = CacheKey::from_chat("alias", body)
                .unwrap()
                .scoped("caller", body);
            assert_eq!(built.0, reference_key("alias", "caller", body), "{body}");
        }
        let other = json!({"model": "m", "temperature": 0.6, "messages": [{"role": "user", "content": "hi there"}]});
        assert_ne!(
            CacheKey::from_chat("alias", &other)
                .unwrap()
                .scoped("caller", &other),
            CacheKey::from_chat("alias", &bodies[0])
                .unwrap()
                .scoped("caller", &bodies[0]),
        );
    }
}
