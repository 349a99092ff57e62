//! The response-cache key of a chat request read straight from its body bytes: each message's
//! role and texts and the generation parameters, in one pass that builds no tree of the
//! body — the fields the key leaves out are skipped unread. The same key as
//! [`CacheKey::from_chat`] then [`CacheKey::scoped`] on the body's `Value`, and as lenient:
//! a field of an unexpected type counts as absent there, so it does here.

use serde::Deserializer;
use serde::de::{self, Deserialize, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;

use super::cache::{CacheKey, ChatKeyWriter, is_unscoped};

impl CacheKey {
    /// The key of the chat request `body` under `alias`, scoped to `caller`: `Ok(None)` when
    /// the body has no `messages` array (no key), `Err` when it is not a JSON object.
    pub fn of_chat_body(
        alias: &str,
        caller: &str,
        body: &[u8],
    ) -> Result<Option<Self>, serde_json::Error> {
        let view: ChatKeyView<'_> = serde_json::from_slice(body)?;
        let Some(messages) = view.messages else {
            return Ok(None);
        };
        let mut key = ChatKeyWriter::new(alias, messages.len());
        for turn in &messages {
            key.turn(&turn.role, turn.texts.iter().map(|text| &**text));
        }
        Ok(Some(key.finish().scoped_by(caller, view.params.iter())))
    }

    /// The key of a chat request whose body was read already, under `alias` and scoped to
    /// `caller`: `turns` are its messages, each a role and its texts (the content string, or
    /// each content part's `text` string), `fields` its top-level fields but `messages` (those
    /// the key leaves out are skipped here). The same key as [`CacheKey::of_chat_body`] on a
    /// body whose messages are objects with a string `role`, without reading the body again.
    pub fn of_chat_turns<'t, T, I>(
        alias: &str,
        caller: &str,
        turns: I,
        fields: &Map<String, Value>,
    ) -> Self
    where
        I: ExactSizeIterator<Item = (&'t str, T)>,
        T: IntoIterator<Item = &'t str>,
    {
        let mut key = ChatKeyWriter::new(alias, turns.len());
        for (role, texts) in turns {
            key.turn(role, texts);
        }
        key.finish().scoped_by(caller, fields.iter())
    }
}

/// What the key reads of a chat body.
struct ChatKeyView<'a> {
    /// `None` when the body has no `messages` field or it is not an array.
    messages: Option<Vec<Turn<'a>>>,
    /// The top-level fields in the generation parameters.
    params: Map<String, Value>,
}

/// One message: its role (empty unless a string) and its texts (the content string, or each
/// content part's `text` string).
#[derive(Default)]
struct Turn<'a> {
    role: Cow<'a, str>,
    texts: Vec<Cow<'a, str>>,
}

/// Skips what is left of a map or sequence of an unexpected type.
fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Implements the visitor methods of every JSON type but strings, maps and sequences as
/// "a value of another type": `$absent`.
macro_rules! other_types_are {
    ($absent:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($absent)
        }
    };
}

impl<'de: 'a, 'a> Deserialize<'de> for ChatKeyView<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Body;
        impl<'de> Visitor<'de> for Body {
            type Value = ChatKeyView<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut view = ChatKeyView {
                    messages: None,
                    params: Map::new(),
                };
                // A repeated field counts once, its last value (as in a `Value` object).
                while let Some(name) = map.next_key::<Cow<'de, str>>()? {
                    if name == "messages" {
                        view.messages = map.next_value::<Messages<'de>>()?.0;
                    } else if is_unscoped(&name) {
                        map.next_value::<IgnoredAny>()?;
                    } else {
                        let value = map.next_value::<Value>()?;
                        view.params.insert(name.into_owned(), value);
                    }
                }
                Ok(view)
            }
        }
        deserializer.deserialize_map(Body)
    }
}

/// The `messages` field: its turns when it is an array.
struct Messages<'a>(Option<Vec<Turn<'a>>>);

impl<'de: 'a, 'a> Deserialize<'de> for Messages<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Messages<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            other_types_are!(Messages(None));
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Messages(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                drain_map(map).map(|()| Messages(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut turns = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(turn) = seq.next_element::<Turn<'de>>()? {
                    turns.push(turn);
                }
                Ok(Messages(Some(turns)))
            }
        }
        deserializer.deserialize_any(V)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Turn<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Turn<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            other_types_are!(Turn::default());
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Turn::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                drain_seq(seq).map(|()| Turn::default())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut turn = Turn::default();
                while let Some(name) = map.next_key::<Cow<'de, str>>()? {
                    match &*name {
                        "role" => turn.role = map.next_value::<Text<'de>>()?.0.unwrap_or_default(),
                        "content" => turn.texts = map.next_value::<Content<'de>>()?.0,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(turn)
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// A message's content: the string, or the `text` strings of its parts; else nothing.
struct Content<'a>(Vec<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            other_types_are!(Content(Vec::new()));
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Content(vec![Cow::Borrowed(text)]))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Content(vec![Cow::Owned(text.to_owned())]))
            }
            fn visit_string<E: de::Error>(self, text: String) -> Result<Self::Value, E> {
                Ok(Content(vec![Cow::Owned(text)]))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                drain_map(map).map(|()| Content(Vec::new()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut texts = Vec::new();
                while let Some(part) = seq.next_element::<Part<'de>>()? {
                    texts.extend(part.0);
                }
                Ok(Content(texts))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// A content part: its `text` when that is a string.
struct Part<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Part<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Part<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            other_types_are!(Part(None));
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Part(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                drain_seq(seq).map(|()| Part(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut text = None;
                while let Some(name) = map.next_key::<Cow<'de, str>>()? {
                    if name == "text" {
                        text = map.next_value::<Text<'de>>()?.0;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(Part(text))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// A string field: `None` when the value is of another type.
struct Text<'a>(Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            other_types_are!(Text(None));
            fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Borrowed(text))))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Owned(text.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, text: String) -> Result<Self::Value, E> {
                Ok(Text(Some(Cow::Owned(text))))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                drain_map(map).map(|()| Text(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                drain_seq(seq).map(|()| Text(None))
            }
        }
        deserializer.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read from the bytes or from the parsed `Value`, a body gets the same key (or none).
    #[test]
    fn keys_from_bytes_equal_keys_from_the_parsed_value() {
        let bodies = [
            r#"{"model":"m","messages":[{"role":"user","content":"  hi\n there "}]}"#,
            r#"{"model":"m","temperature":0.5,"stop":["\n","é\"x"],"tools":[{"a":{"b":null}}],"messages":[{"role":"system","content":"be\tbrief"},{"role":"user","content":[{"type":"text","text":"a "},{"type":"image_url"},{"text":" b\nc"}]},{"role":"assistant"},{"content":"no role"}],"stream":true,"max_tokens":9,"user":"u"}"#,
            r#"{"messages":[],"seed":7,"n":1,"top_p":1e-3,"z":{"b":1,"a":[1.50,2]}}"#,
            r#"{"b":1,"a":2,"a":3,"messages":[{"role":"u","role":"v","content":"x","content":"y"}]}"#,
            r#"{"messages":[{"role":5,"content":7},"str",[1],null,{"content":[5,"s",{"text":3},{"text":"ok"},[{"text":"no"}],null]},{"content":{"text":"map"}}]}"#,
            r#"{"messages":[{"role":"\u0075ser","content":"esc\u00e9ped \"quoted\""}],"frequency_penalty":-0.0}"#,
            r#"{"messages":"not a list","temperature":1}"#,
            r#"{"model":"m"}"#,
            r#"{"messages":{"role":"user"}}"#,
            r#"{"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}]}"#,
        ];
        for body in bodies {
            let value: Value = serde_json::from_str(body).unwrap();
            let expected =
                CacheKey::from_chat("alias", &value).map(|key| key.scoped("caller", &value));
            let read = CacheKey::of_chat_body("alias", "caller", body.as_bytes()).unwrap();
            assert_eq!(read, expected, "{body}");
        }
        for not_an_object in ["[1]", "\"x\"", "{", "{} trailing"] {
            assert!(CacheKey::of_chat_body("a", "c", not_an_object.as_bytes()).is_err());
        }
    }

    /// Turns and fields read by another parser give the key read from the bytes.
    #[test]
    fn keys_from_turns_equal_keys_from_the_bytes() {
        let body = r#"{"model":"m","temperature":0.5,"stop":["\n"],"prompt":"x","stream":true,"user":"u","messages":[{"role":"system","content":"be  brief"},{"role":"user","content":[{"type":"text","text":"a "},{"type":"image_url"},{"text":" b\nc"}]},{"role":"assistant"}]}"#;
        let value: Value = serde_json::from_str(body).unwrap();
        let mut fields = value.as_object().unwrap().clone();
        fields.remove("messages");
        let turns: Vec<(&str, Vec<&str>)> = vec![
            ("system", vec!["be  brief"]),
            ("user", vec!["a ", " b\nc"]),
            ("assistant", vec![]),
        ];
        let from_turns = CacheKey::of_chat_turns(
            "alias",
            "caller",
            turns
                .iter()
                .map(|(role, texts)| (*role, texts.iter().copied())),
            &fields,
        );
        let read = CacheKey::of_chat_body("alias", "caller", body.as_bytes()).unwrap();
        assert_eq!(Some(from_turns.clone()), read);
        let other_caller = CacheKey::of_chat_turns(
            "alias",
            "other",
            turns
                .iter()
                .map(|(role, texts)| (*role, texts.iter().copied())),
            &fields,
        );
        assert_ne!(from_turns, other_caller);
    }
}
