//! The chat body read once: refused exactly as the derived structs it replaced refuse it
//! (same message), and giving the cache key the body read again would give.

use super::*;
use crate::openai::{ParsedRequest, Route, parse_keyed};
use proptest::prelude::*;
use switchyard_warmup::CacheKey;

/// The derived structs the hand-read body replaced, as they were.
mod reference {
    use serde::Deserialize;
    use std::fmt;

    #[derive(Deserialize, Default)]
    pub struct StreamOptions {
        #[serde(default)]
        pub include_usage: Option<bool>,
    }

    #[derive(Deserialize)]
    pub struct ChatBody {
        pub model: String,
        pub messages: Vec<ChatMessage>,
        #[serde(default)]
        pub stream: Option<bool>,
        #[serde(default)]
        pub user: Option<String>,
        #[serde(default)]
        pub max_tokens: Option<u64>,
        #[serde(default)]
        pub max_completion_tokens: Option<u64>,
        #[serde(default)]
        pub stream_options: Option<StreamOptions>,
    }

    #[derive(Deserialize)]
    pub struct ChatMessage {
        pub role: String,
        #[serde(default)]
        pub content: Option<Content>,
    }

    pub enum Content {
        Text(String),
        Parts(Vec<ContentPart>),
    }

    impl<'de> Deserialize<'de> for Content {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct ContentVisitor;
            impl<'de> serde::de::Visitor<'de> for ContentVisitor {
                type Value = Content;
                fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                    formatter.write_str("a string or an array of content parts")
                }
                fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Content, E> {
                    Ok(Content::Text(text.to_owned()))
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(
                    self,
                    mut seq: A,
                ) -> Result<Content, A::Error> {
                    let mut parts = Vec::new();
                    while let Some(part) = seq.next_element::<ContentPart>()? {
                        parts.push(part);
                    }
                    Ok(Content::Parts(parts))
                }
            }
            deserializer.deserialize_any(ContentVisitor)
        }
    }

    #[derive(Deserialize)]
    pub struct ContentPart {
        #[serde(default)]
        pub text: Option<String>,
    }

    /// What `openai::parse` answered with these structs: the request (an empty prompt for
    /// no messages, which `parse` refuses), or the error's text.
    pub fn parse(body: &[u8]) -> Result<crate::openai::ParsedRequest, String> {
        let chat: ChatBody = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        let mut prompt = String::new();
        for message in &chat.messages {
            prompt.push_str("<|");
            prompt.push_str(&message.role);
            prompt.push_str("|>");
            match &message.content {
                Some(Content::Text(text)) => prompt.push_str(text),
                Some(Content::Parts(parts)) => {
                    for text in parts.iter().filter_map(|p| p.text.as_deref()) {
                        prompt.push_str(text);
                    }
                }
                None => {}
            }
            prompt.push('\n');
        }
        let include_usage = chat
            .stream_options
            .and_then(|o| o.include_usage)
            .unwrap_or(false);
        Ok(crate::openai::ParsedRequest {
            model: chat.model,
            stream: chat.stream.unwrap_or(false),
            prompt,
            user: chat.user,
            max_tokens: chat.max_completion_tokens.or(chat.max_tokens),
            include_usage,
        })
    }
}

/// The new parse as the reference reports it, and the cache key its inputs give (`None`
/// inside when it kept none, or a field is no `Value`).
fn parse_new(body: &[u8]) -> Result<(ParsedRequest, Option<Option<CacheKey>>), String> {
    match ChatRead::read(body) {
        Err(error) => Err(error.message),
        Ok(_) => {
            let (parsed, inputs) = parse_keyed(Route::ChatCompletions, body)
                .map_err(|e| format!("refused after reading: {}", e.message))?;
            let key = inputs.map(|inputs| {
                inputs.fields().map(|fields| {
                    CacheKey::of_chat_turns("alias", "caller", inputs.turns(), &fields)
                })
            });
            Ok((parsed, key))
        }
    }
}

/// Reads `body` both ways: same request or same error text; and whenever the new parse
/// gives a key, it is the key read from the bytes.
fn check(body: &[u8]) -> Result<(), TestCaseError> {
    let expected = reference::parse(body);
    match (ChatRead::read(body), expected) {
        (Err(error), Err(message)) => {
            prop_assert!(
                error.message.ends_with(&message),
                "{} vs {message}",
                error.message
            );
        }
        // No messages: refused by `parse` either way.
        (Ok(_), Ok(expected)) if expected.prompt.is_empty() => {}
        (Ok(_), Ok(expected)) => {
            let (parsed, key) = parse_new(body).map_err(TestCaseError::fail)?;
            prop_assert_eq!(parsed, expected);
            if let Some(Some(key)) = key {
                let read = CacheKey::of_chat_body("alias", "caller", body)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(Some(key), read);
            }
        }
        (new, old) => {
            return Err(TestCaseError::fail(format!(
                "new {:?} vs reference {:?}",
                new.map(|_| ()).map_err(|e| e.message),
                old.map(|_| ())
            )));
        }
    }
    Ok(())
}

#[test]
fn odd_bodies_are_refused_or_read_as_the_derived_structs_did() {
    let bodies: &[&[u8]] = &[
        br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":1,"stream":false}"#,
        br#"{"model":"m","temperature":0.5,"stop":["\n"],"prompt":"p","t":1,"t":2,"messages":[{"role":"system","content":"be  brief"},{"role":"user","content":[{"type":"text","text":"a "},{"type":"image_url"},{"text":" b\nc"},{"text":null}]},{"role":"tool","content":null},{"role":"x"}]}"#,
        br#"{"\u006dodel":"m","messages":[{"r\u006fle":"u\u0073er","content":"\u00e9"}],"us\u0065r":"u"}"#,
        br#"["m",[{"role":"user","content":"hi"}],true,"u",5]"#,
        br#"["m",[{"role":"user","content":"hi"}],true,"u",5,6,{"include_usage":true},7]"#,
        br#"{"model":"m","messages":[["user","hi"]]}"#,
        br#"{"model":"m","messages":[{"role":"user","content":[["part"]]}]}"#,
        br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"big":1e999}"#,
        b"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"x\":\"\xff\"}",
        br#"{"model":"m","model":"n","messages":[]}"#,
        br#"{"model":"m","messages":[{"role":"user","role":"u"}]}"#,
        br#"{"model":"m","messages":[{"role":"user","content":[{"text":"a","text":"b"}]}]}"#,
        br#"{"messages":[]}"#,
        br#"{"model":"m"}"#,
        br#"{"model":5,"messages":[]}"#,
        br#"{"model":"m","messages":{}}"#,
        br#"{"model":"m","messages":["x"]}"#,
        br#"{"model":"m","messages":[null]}"#,
        br#"{"model":"m","messages":[{"content":"no role"}]}"#,
        br#"{"model":"m","messages":[{"role":"user","content":5}]}"#,
        br#"{"model":"m","messages":[{"role":"user","content":["x"]}]}"#,
        br#"{"model":"m","messages":[{"role":"user","content":[{"text":3}]}]}"#,
        br#"{"model":"m","messages":[{"role":"user"}],"stream":"yes"}"#,
        br#"{"model":"m","messages":[{"role":"user"}],"stream_options":{"include_usage":true}}"#,
        br#"{"model":"m","messages":[{"role":"user"}],"stream_options":[true]}"#,
        br#"{"model":"m","messages":[{"role":"user"}],"max_tokens":-1}"#,
        br#"{"model":"m","messages":[{"role":"user"}],"extra":[1,{"a":"b"}"#,
        br#"{"model":"m","messages":[{"role":"user"}]} trailing"#,
        br#"[]"#,
        br#"["m"]"#,
        br#"null"#,
        br#""x""#,
        b"",
        b"{not json",
    ];
    for body in bodies {
        check(body).unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(body)));
    }
}

#[test]
fn the_key_is_kept_only_for_objects_and_values() {
    let keyed = |body: &[u8]| parse_new(body).unwrap().1;
    let plain = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":1}"#;
    assert!(matches!(keyed(plain), Some(Some(_))));
    for array_form in [
        &br#"["m",[{"role":"user","content":"hi"}]]"#[..],
        br#"{"model":"m","messages":[["user","hi"]]}"#,
        br#"{"model":"m","messages":[{"role":"user","content":[["part"]]}]}"#,
        b"{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}],\"x\":\"\xff\"}",
    ] {
        assert!(keyed(array_form).is_none(), "{array_form:?}");
    }
    let out_of_range = br#"{"model":"m","messages":[{"role":"user"}],"big":1e999}"#;
    assert!(matches!(keyed(out_of_range), Some(None)));
    assert!(CacheKey::of_chat_body("alias", "caller", out_of_range).is_err());
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        (-1e6f64..1e6).prop_map(serde_json::Value::from),
        "[a-z \\n\"é]{0,8}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(serde_json::Value::from),
            proptest::collection::vec(("(text|role|content|type|[a-z]{1,3})", inner), 0..3)
                .prop_map(|fields| serde_json::Value::Object(fields.into_iter().collect())),
        ]
    })
}

fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("model".to_string()),
        Just("messages".to_string()),
        Just("stream".to_string()),
        Just("user".to_string()),
        Just("max_tokens".to_string()),
        Just("max_completion_tokens".to_string()),
        Just("stream_options".to_string()),
        Just("prompt".to_string()),
        "[a-z_]{1,6}",
    ]
}

fn message() -> impl Strategy<Value = serde_json::Value> {
    let part = prop_oneof![
        "[a-z ]{0,6}".prop_map(|t| serde_json::json!({"type": "text", "text": t})),
        Just(serde_json::json!({"type": "image_url"})),
        json_value(),
    ];
    let content = prop_oneof![
        "[a-z \\n]{0,10}".prop_map(serde_json::Value::from),
        proptest::collection::vec(part, 0..3).prop_map(serde_json::Value::from),
        Just(serde_json::Value::Null),
        json_value(),
    ];
    prop_oneof![
        4 => ("[a-z]{1,6}", content).prop_map(|(role, content)| serde_json::json!({"role": role, "content": content})),
        1 => json_value(),
    ]
}

/// A body as text, its fields in the order given (repeats kept: a `Value` would drop them).
fn body_text(fields: &[(String, serde_json::Value)]) -> String {
    let fields: Vec<String> = fields
        .iter()
        .map(|(name, value)| format!("{}:{value}", serde_json::Value::from(name.as_str())))
        .collect();
    format!("{{{}}}", fields.join(","))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn any_body_is_read_as_the_derived_structs_read_it(
        model in prop_oneof![4 => "[a-z]{1,4}".prop_map(serde_json::Value::from), 1 => json_value()],
        messages in prop_oneof![
            4 => proptest::collection::vec(message(), 0..4).prop_map(serde_json::Value::from),
            1 => json_value(),
        ],
        extra in proptest::collection::vec((field_name(), json_value()), 0..4),
        model_first in any::<bool>(),
    ) {
        let mut fields = vec![("messages".to_string(), messages)];
        let model = ("model".to_string(), model);
        if model_first { fields.insert(0, model) } else { fields.push(model) }
        fields.extend(extra);
        check(body_text(&fields).as_bytes())?;
    }

    #[test]
    fn arbitrary_bytes_are_read_as_the_derived_structs_read_them(
        bytes in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        check(&bytes)?;
    }
}
