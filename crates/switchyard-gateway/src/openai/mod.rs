//! The subset of an OpenAI request the gateway needs to route it. The body itself is forwarded
//! byte for byte; only these fields are read.

use serde::Deserialize;

mod chat;
mod request;
mod surface;

pub use chat::ChatKeyInputs;
pub use request::{ParsedRequest, Route};
pub use surface::parse_bodiless;

use self::chat::{ChatRead, flatten_messages};
use self::request::{StreamOptions, from_json};
use crate::error::ApiError;

#[derive(Deserialize)]
struct CompletionBody {
    model: String,
    prompt: Prompt,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Prompt {
    Text(String),
    Many(Vec<String>),
}

pub fn parse(route: Route, body: &[u8]) -> Result<ParsedRequest, ApiError> {
    parse_keyed(route, body).map(|(parsed, _)| parsed)
}

/// [`parse`], also returning what the response-cache key reads of a chat body (when the
/// key can read it from this parse).
pub fn parse_keyed(
    route: Route,
    body: &[u8],
) -> Result<(ParsedRequest, Option<ChatKeyInputs>), ApiError> {
    match route {
        Route::ChatCompletions => {
            let mut body = ChatRead::read(body)?;
            let chat = &mut body.fields;
            if chat.messages.is_empty() {
                return Err(ApiError::bad_request(
                    "invalid_request",
                    "`messages` must contain at least one message",
                ));
            }
            let parsed = ParsedRequest {
                prompt: flatten_messages(&chat.messages),
                model: std::mem::take(&mut chat.model),
                stream: chat.stream.unwrap_or(false),
                user: chat.user.take(),
                max_tokens: chat.max_completion_tokens.or(chat.max_tokens),
                include_usage: include_usage(chat.stream_options.as_ref()),
            };
            Ok((parsed, ChatKeyInputs::of(body)))
        }
        Route::Completions => {
            let completion: CompletionBody = from_json(body)?;
            let prompt = match completion.prompt {
                Prompt::Text(text) => text,
                Prompt::Many(parts) => parts.join(" "),
            };
            let parsed = ParsedRequest {
                prompt,
                model: completion.model,
                stream: completion.stream.unwrap_or(false),
                user: completion.user,
                max_tokens: completion.max_tokens,
                include_usage: include_usage(completion.stream_options.as_ref()),
            };
            Ok((parsed, None))
        }
        other => surface::parse(other, body).map(|parsed| (parsed, None)),
    }
}

fn include_usage(options: Option<&StreamOptions>) -> bool {
    options.and_then(|o| o.include_usage).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_messages_flatten_so_turns_extend_the_prompt() {
        let one = br#"{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}"#;
        let two = br#"{"model":"m","stream":true,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"hello"}]},{"role":"user","content":"more"}]}"#;
        let a = parse(Route::ChatCompletions, one).unwrap();
        let b = parse(Route::ChatCompletions, two).unwrap();
        assert!(!a.stream && b.stream);
        assert!(b.prompt.starts_with(&a.prompt));
        assert!(b.prompt.contains("hello"));
        assert_eq!(a.max_tokens, None);
        assert_eq!(
            a.estimated_tokens(100),
            (a.prompt.len() as u64).div_ceil(4) + 100
        );
    }

    #[test]
    fn content_is_text_or_parts_and_anything_else_is_a_400() {
        let body = br#"{"model":"m","messages":[{"role":"user","content":"a\"b"},{"role":"tool","content":null},{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url"},{"text":"y"}]}]}"#;
        let parsed = parse(Route::ChatCompletions, body).unwrap();
        assert_eq!(parsed.prompt, "<|user|>a\"b\n<|tool|>\n<|user|>xy\n");
        assert_eq!(parsed.prompt.capacity(), parsed.prompt.len());
        for bad in [r#"5"#, r#"{"text":"x"}"#, r#"["x"]"#, r#"true"#] {
            let body = format!(r#"{{"model":"m","messages":[{{"role":"user","content":{bad}}}]}}"#);
            let error = parse(Route::ChatCompletions, body.as_bytes()).unwrap_err();
            assert_eq!(
                (error.status.as_u16(), error.code),
                (400, "invalid_request"),
                "{bad}"
            );
        }
    }

    #[test]
    fn completions_accept_string_or_list_prompts() {
        let a = parse(Route::Completions, br#"{"model":"m","prompt":"abc"}"#).unwrap();
        assert_eq!(a.prompt, "abc");
        let b = parse(
            Route::Completions,
            br#"{"model":"m","prompt":["a","b"],"user":"u"}"#,
        )
        .unwrap();
        assert_eq!(b.prompt, "a b");
        assert_eq!(b.user.as_deref(), Some("u"));
    }

    #[test]
    fn malformed_and_incomplete_bodies_are_400_with_distinct_codes() {
        let bad = parse(Route::ChatCompletions, b"{not json").unwrap_err();
        assert_eq!(bad.status.as_u16(), 400);
        assert_eq!(bad.code, "invalid_json");
        let missing = parse(Route::ChatCompletions, br#"{"messages":[]}"#).unwrap_err();
        assert_eq!(missing.code, "invalid_request");
        assert!(missing.message.contains("model"), "{}", missing.message);
        let empty = parse(Route::ChatCompletions, br#"{"model":"m","messages":[]}"#).unwrap_err();
        assert!(empty.message.contains("messages"));
        let wrong = parse(
            Route::Completions,
            br#"{"model":"m","prompt":"x","stream":"yes"}"#,
        )
        .unwrap_err();
        assert_eq!(wrong.status.as_u16(), 400);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn content() -> impl Strategy<Value = serde_json::Value> {
            prop_oneof![
                Just(serde_json::Value::Null),
                ".{0,40}".prop_map(serde_json::Value::from),
                proptest::collection::vec(".{0,10}", 0..3).prop_map(|parts| {
                    serde_json::Value::Array(
                        parts
                            .into_iter()
                            .map(|t| serde_json::json!({"type": "text", "text": t}))
                            .collect(),
                    )
                }),
                any::<i64>().prop_map(serde_json::Value::from),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

            #[test]
            fn arbitrary_bytes_are_parsed_or_refused_with_a_400(
                bytes in proptest::collection::vec(any::<u8>(), 0..200),
            ) {
                for route in [Route::ChatCompletions, Route::Completions] {
                    if let Err(error) = parse(route, &bytes) {
                        prop_assert_eq!(error.status.as_u16(), 400);
                    }
                }
            }

            #[test]
            fn any_max_tokens_is_reserved_without_wrapping_and_checked_against_the_cap(
                max_tokens in any::<u64>(),
                cap in 1u64..1_000_000,
                roles in proptest::collection::vec("[a-z]{0,8}", 1..4),
                contents in proptest::collection::vec(content(), 1..4),
                stream in any::<bool>(),
                include_usage in proptest::option::of(any::<bool>()),
            ) {
                let messages: Vec<_> = roles
                    .iter()
                    .zip(contents.iter().cycle())
                    .map(|(role, content)| serde_json::json!({"role": role, "content": content}))
                    .collect();
                let body = serde_json::json!({
                    "model": "m", "messages": messages, "stream": stream,
                    "max_tokens": max_tokens,
                    "stream_options": {"include_usage": include_usage},
                });
                let bytes = serde_json::to_vec(&body).unwrap();
                match parse(Route::ChatCompletions, &bytes) {
                    Ok(parsed) => {
                        prop_assert!(parsed.estimated_tokens(256) >= max_tokens);
                        prop_assert_eq!(parsed.check_max_tokens(cap).is_err(), max_tokens > cap);
                        prop_assert_eq!(parsed.include_usage, include_usage.unwrap_or(false));
                    }
                    // Numbers or other non-text contents are a 400, never a panic.
                    Err(error) => prop_assert_eq!(error.status.as_u16(), 400),
                }
            }
        }
    }
}
