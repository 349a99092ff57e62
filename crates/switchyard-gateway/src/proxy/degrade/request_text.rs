//! The request as warmup and the downgrade chain see it, parsed only when one of them needs
//! it: the JSON body (for normalisation and the cache key) and the plain prompt text — the
//! messages' contents in order without role markers, or the completion prompt — which warmup
//! resources match their head prefix against and time-sensitive patterns are looked for in.

use bytes::Bytes;
use serde_json::Value;
use switchyard_warmup::CacheKey;

use crate::openai::{ChatKeyInputs, Route};

pub(crate) struct RequestText {
    route: Route,
    /// Whose request it is: cache keys are scoped to the caller.
    caller: String,
    body: Bytes,
    /// What the key reads of a chat body, when the parse kept it.
    key_inputs: Option<ChatKeyInputs>,
    value: Option<Option<Value>>,
    text: Option<String>,
}

impl RequestText {
    pub(crate) fn new(route: Route, body: Bytes) -> Self {
        Self {
            route,
            caller: String::new(),
            body,
            key_inputs: None,
            value: None,
            text: None,
        }
    }

    /// The same request, its cache keys scoped to `caller`.
    pub(crate) fn for_caller(mut self, caller: &str) -> Self {
        self.caller = caller.to_string();
        self
    }

    /// The same request, its chat cache key built from what the parse kept of the body
    /// (`inputs`, when it kept them) rather than from the body read again.
    pub(crate) fn read_as(mut self, inputs: Option<ChatKeyInputs>) -> Self {
        self.key_inputs = inputs;
        self
    }

    /// The body as JSON (None if it is not an object: `openai::parse` accepted it, so this
    /// does not happen in practice).
    pub(crate) fn value(&mut self) -> Option<&Value> {
        let body = &self.body;
        self.value
            .get_or_insert_with(|| {
                serde_json::from_slice::<Value>(body)
                    .ok()
                    .filter(Value::is_object)
            })
            .as_ref()
    }

    pub(crate) fn text(&mut self) -> &str {
        if self.text.is_none() {
            let route = self.route;
            let text = self
                .value()
                .map(|v| plain_text(route, v))
                .unwrap_or_default();
            self.text = Some(text);
        }
        self.text.as_deref().unwrap_or_default()
    }

    /// The response-cache key of this request under `alias`, scoped to the caller and to
    /// the request's generation parameters.
    pub(crate) fn cache_key(&mut self, alias: &str) -> Option<CacheKey> {
        if let Some(inputs) = &self.key_inputs
            && let Some(fields) = inputs.fields()
        {
            return Some(CacheKey::of_chat_turns(
                alias,
                &self.caller,
                inputs.turns(),
                &fields,
            ));
        }
        let key = match self.route {
            // Read straight from the bytes (no tree of the whole body) unless the body was
            // parsed already for the downgrade chain or warmup: the same key either way.
            Route::ChatCompletions if self.value.is_none() => {
                match CacheKey::of_chat_body(alias, &self.caller, &self.body) {
                    Ok(key) => return key,
                    // Not a JSON object: the parsed path says what that means.
                    Err(_) => CacheKey::from_chat(alias, self.value()?)?,
                }
            }
            Route::ChatCompletions => CacheKey::from_chat(alias, self.value()?)?,
            Route::Completions => CacheKey::from_prompt(alias, self.text()),
            // Only generation is answered from the cache.
            _ => return None,
        };
        let caller = self.caller.clone();
        Some(key.scoped(&caller, self.value()?))
    }
}

fn plain_text(route: Route, body: &Value) -> String {
    match route {
        Route::ChatCompletions => body["messages"]
            .as_array()
            .map(|messages| {
                messages
                    .iter()
                    .map(content_text)
                    .filter(|text| !text.is_empty())
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default(),
        Route::Completions => match &body["prompt"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        },
        // The rest of the surface never reaches warmup (see `proxy::surface`).
        _ => String::new(),
    }
}

fn content_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_text_starts_with_the_system_prompt_and_keys_ignore_spacing() {
        let body = br#"{"model":"m","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":[{"type":"text","text":"hi  there"}]}]}"#;
        let mut request = RequestText::new(Route::ChatCompletions, Bytes::from_static(body));
        assert_eq!(request.text(), "Be terse.\nhi  there");
        let spaced = br#"{"model":"m","messages":[{"role":"system","content":"Be  terse."},{"role":"user","content":"hi there"}]}"#;
        let mut other = RequestText::new(Route::ChatCompletions, Bytes::from_static(spaced));
        assert_eq!(request.cache_key("a"), other.cache_key("a"));
        assert_ne!(request.cache_key("a"), request.cache_key("b"));
        let completion = br#"{"model":"m","prompt":["a","b"]}"#;
        let mut request = RequestText::new(Route::Completions, Bytes::from_static(completion));
        assert_eq!(request.text(), "a b");
    }

    #[test]
    fn a_chat_key_is_the_same_whether_or_not_the_body_was_parsed_first() {
        let body = br#"{"model":"m","temperature":0.2,"messages":[{"role":"user","content":"hi  there"}]}"#;
        let mut fresh =
            RequestText::new(Route::ChatCompletions, Bytes::from_static(body)).for_caller("c");
        let mut parsed =
            RequestText::new(Route::ChatCompletions, Bytes::from_static(body)).for_caller("c");
        assert!(parsed.value().is_some());
        let key = fresh.cache_key("a");
        assert!(key.is_some());
        assert_eq!(key, parsed.cache_key("a"));
        assert!(
            fresh.value.is_none(),
            "the key did not need the parsed body"
        );
    }

    #[test]
    fn a_chat_key_from_the_parse_is_the_key_read_from_the_bytes() {
        let bodies: [&'static [u8]; 3] = [
            br#"{"model":"m","temperature":0.2,"messages":[{"role":"user","content":"hi  there"}]}"#,
            br#"{"model":"m","stop":["\n"],"t":1,"t":[2],"messages":[{"role":"system","content":[{"text":"a"},{"type":"x"}]},{"role":"user"}]}"#,
            br#"{"model":"m","messages":[{"role":"user","content":"x"}],"big":1e999}"#,
        ];
        for body in bodies {
            let (_, inputs) = crate::openai::parse_keyed(Route::ChatCompletions, body).unwrap();
            assert!(inputs.is_some());
            let mut from_parse = RequestText::new(Route::ChatCompletions, Bytes::from_static(body))
                .for_caller("c")
                .read_as(inputs);
            let mut from_bytes =
                RequestText::new(Route::ChatCompletions, Bytes::from_static(body)).for_caller("c");
            assert_eq!(from_parse.cache_key("a"), from_bytes.cache_key("a"));
        }
    }

    #[test]
    fn keys_differ_by_caller_and_by_generation_parameters() {
        let key = |caller: &str, body: &'static [u8]| {
            RequestText::new(Route::ChatCompletions, Bytes::from_static(body))
                .for_caller(caller)
                .cache_key("a")
        };
        let plain = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        let streamed = br#"{"model":"m","stream":true,"user":"u1","messages":[{"role":"user","content":"hi"}]}"#;
        let hot = br#"{"model":"m","temperature":1.5,"messages":[{"role":"user","content":"hi"}]}"#;
        let tools = br#"{"model":"m","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(key("team-a", plain), key("team-a", streamed));
        assert_ne!(key("team-a", plain), key("team-b", plain));
        assert_ne!(key("team-a", plain), key("team-a", hot));
        assert_ne!(key("team-a", plain), key("team-a", tools));
        let completion = |caller: &str| {
            RequestText::new(
                Route::Completions,
                Bytes::from_static(br#"{"model":"m","prompt":"x"}"#),
            )
            .for_caller(caller)
            .cache_key("a")
        };
        assert_ne!(completion("team-a"), completion("team-b"));
    }
}
