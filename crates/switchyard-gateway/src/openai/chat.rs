//! A chat completion's body, read once for routing and budgets and for the response-cache
//! key: besides the fields routing reads, each message's role and texts and the top-level
//! fields outside them are kept ([`ChatKeyInputs`]), so the key needs no second pass over the
//! bytes. Read as strictly as serde's derived structs read it (same refusals, same messages).

use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use super::request::{StreamOptions, from_json};
use crate::error::ApiError;

/// A chat body. The top level is read by hand so the fields routing does not read are kept
/// for the cache key (a derived struct would skip them); a body given as a JSON array of its
/// fields (which serde accepts for a struct) is read by the derived [`ChatBody`].
pub(super) struct ChatRead {
    pub(super) fields: ChatBody,
    /// The top-level fields but those of [`ChatBody`], in order, as given (skipped as
    /// leniently as a derived struct skips them); `None` for a body given as an array.
    pub(super) others: Option<Vec<(String, Box<RawValue>)>>,
}

#[derive(Deserialize)]
pub(super) struct ChatBody {
    pub(super) model: String,
    pub(super) messages: Vec<AsObject<ChatMessage>>,
    #[serde(default)]
    pub(super) stream: Option<bool>,
    #[serde(default)]
    pub(super) user: Option<String>,
    #[serde(default)]
    pub(super) max_tokens: Option<u64>,
    #[serde(default)]
    pub(super) max_completion_tokens: Option<u64>,
    #[serde(default)]
    pub(super) stream_options: Option<StreamOptions>,
}

#[derive(Deserialize)]
pub(super) struct ChatMessage {
    role: String,
    #[serde(default)]
    content: Option<Content>,
}

/// A message's content: a string, or an array of parts. Read by hand rather than as an
/// untagged enum, which buffers every message into an intermediate tree before trying each
/// variant; this is the hottest part of parsing a chat request.
enum Content {
    Text(String),
    Parts(Vec<AsObject<ContentPart>>),
}

#[derive(Deserialize)]
struct ContentPart {
    #[serde(default)]
    text: Option<String>,
}

/// A struct read by its derived implementation, noting whether the body gave it as a JSON
/// object: serde also accepts an array of a struct's fields, which the cache key (reading
/// objects only) treats as no message or part at all.
pub(super) struct AsObject<T> {
    value: T,
    object: bool,
}

/// The name serde's derived implementation gives a struct in its error messages.
trait StructName {
    const NAME: &'static str;
}

impl StructName for ChatMessage {
    const NAME: &'static str = "ChatMessage";
}

impl StructName for ContentPart {
    const NAME: &'static str = "ContentPart";
}

impl<'de, T: Deserialize<'de> + StructName> Deserialize<'de> for AsObject<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de> + StructName> Visitor<'de> for V<T> {
            type Value = AsObject<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "struct {}", T::NAME)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let value = T::deserialize(MapAccessDeserializer::new(map))?;
                Ok(AsObject {
                    value,
                    object: true,
                })
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                let value = T::deserialize(SeqAccessDeserializer::new(seq))?;
                Ok(AsObject {
                    value,
                    object: false,
                })
            }
        }
        deserializer.deserialize_struct(T::NAME, &[], V(PhantomData))
    }
}

impl ChatRead {
    /// Reads a chat body, refusing what the derived [`ChatBody`] refuses. The fields it
    /// does not read are kept only from a body of valid UTF-8: keeping them validates their
    /// text, which the derived struct, skipping them, does not.
    pub(super) fn read(body: &[u8]) -> Result<Self, ApiError> {
        if std::str::from_utf8(body).is_ok() {
            from_json(body)
        } else {
            let fields = from_json::<ChatBody>(body)?;
            Ok(Self {
                fields,
                others: None,
            })
        }
    }
}

impl<'de> Deserialize<'de> for ChatRead {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ChatRead;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("struct ChatBody")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ChatRead, A::Error> {
                let fields = ChatBody::deserialize(SeqAccessDeserializer::new(seq))?;
                Ok(ChatRead {
                    fields,
                    others: None,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ChatRead, A::Error> {
                read_object(map)
            }
        }
        deserializer.deserialize_struct("ChatBody", &[], V)
    }
}

/// The object form of a chat body, refused exactly as the derived [`ChatBody`] refuses it:
/// a repeated field it reads is an error, a missing `model` or `messages` too (in that order).
fn read_object<'de, A: MapAccess<'de>>(mut map: A) -> Result<ChatRead, A::Error> {
    let mut model = None;
    let mut messages = None;
    let mut stream = None;
    let mut user = None;
    let mut max_tokens = None;
    let mut max_completion_tokens = None;
    let mut stream_options = None;
    let mut others = Vec::new();
    while let Some(FieldName(name)) = map.next_key::<FieldName<'de>>()? {
        match &*name {
            "model" => once(&mut map, &mut model, "model")?,
            "messages" => once(&mut map, &mut messages, "messages")?,
            "stream" => once(&mut map, &mut stream, "stream")?,
            "user" => once(&mut map, &mut user, "user")?,
            "max_tokens" => once(&mut map, &mut max_tokens, "max_tokens")?,
            "max_completion_tokens" => once(
                &mut map,
                &mut max_completion_tokens,
                "max_completion_tokens",
            )?,
            "stream_options" => once(&mut map, &mut stream_options, "stream_options")?,
            _ => {
                let value = map.next_value::<Box<RawValue>>()?;
                others.push((name.into_owned(), value));
            }
        }
    }
    let fields = ChatBody {
        model: model.ok_or_else(|| de::Error::missing_field("model"))?,
        messages: messages.ok_or_else(|| de::Error::missing_field("messages"))?,
        stream: stream.flatten(),
        user: user.flatten(),
        max_tokens: max_tokens.flatten(),
        max_completion_tokens: max_completion_tokens.flatten(),
        stream_options: stream_options.flatten(),
    };
    Ok(ChatRead {
        fields,
        others: Some(others),
    })
}

/// Reads the value of field `name` into `slot`, refusing it the second time.
fn once<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    map: &mut A,
    slot: &mut Option<T>,
    name: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(name));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

/// A field name, borrowed from the body unless it had escapes.
struct FieldName<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for FieldName<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FieldName<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("field identifier")
            }
            fn visit_borrowed_str<E: de::Error>(self, name: &'de str) -> Result<Self::Value, E> {
                Ok(FieldName(Cow::Borrowed(name)))
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Self::Value, E> {
                Ok(FieldName(Cow::Owned(name.to_owned())))
            }
        }
        deserializer.deserialize_identifier(V)
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ContentVisitor;

        impl<'de> Visitor<'de> for ContentVisitor {
            type Value = Content;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a string or an array of content parts")
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Content, E> {
                Ok(Content::Text(text.to_owned()))
            }

            fn visit_string<E: de::Error>(self, text: String) -> Result<Content, E> {
                Ok(Content::Text(text))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut parts = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(part) = seq.next_element::<AsObject<ContentPart>>()? {
                    parts.push(part);
                }
                Ok(Content::Parts(parts))
            }
        }

        deserializer.deserialize_any(ContentVisitor)
    }
}

impl ChatMessage {
    /// The content's texts in order: the string, or each part's `text`.
    fn texts(&self) -> impl Iterator<Item = &str> {
        let (text, parts) = match &self.content {
            Some(Content::Text(text)) => (Some(text.as_str()), &[][..]),
            Some(Content::Parts(parts)) => (None, &parts[..]),
            None => (None, &[][..]),
        };
        text.into_iter()
            .chain(parts.iter().filter_map(|part| part.value.text.as_deref()))
    }

    /// Whether the message and each of its parts were JSON objects.
    fn all_objects(message: &AsObject<ChatMessage>) -> bool {
        message.object
            && match &message.value.content {
                Some(Content::Parts(parts)) => parts.iter().all(|part| part.object),
                _ => true,
            }
    }
}

/// What the response-cache key reads of a chat body `parse` accepted: each message's role and
/// texts, and the top-level fields routing does not read.
pub struct ChatKeyInputs {
    messages: Vec<AsObject<ChatMessage>>,
    others: Vec<(String, Box<RawValue>)>,
}

impl ChatKeyInputs {
    /// The inputs of `body`, when the key reads them as given: `None` when the body, a
    /// message or a part was an array of a struct's fields (read the key's own way instead).
    pub(super) fn of(body: ChatRead) -> Option<Self> {
        let others = body.others?;
        let messages = body.fields.messages;
        messages
            .iter()
            .all(ChatMessage::all_objects)
            .then_some(Self { messages, others })
    }

    /// Each message's role and texts (the content string, or each part's `text`), in order.
    pub fn turns(&self) -> impl ExactSizeIterator<Item = (&str, impl Iterator<Item = &str>)> {
        self.messages
            .iter()
            .map(|message| (message.value.role.as_str(), message.value.texts()))
    }

    /// The body's top-level fields but those routing reads (model, messages, streaming
    /// flags, user, output limits), a repeated one with its last value (as in a `Value`
    /// object). `None` when one of them is no `Value` (a number out of range, nesting too
    /// deep: skipped by the parse, refused by `Value`).
    pub fn fields(&self) -> Option<Map<String, Value>> {
        let mut fields = Map::new();
        for (name, raw) in &self.others {
            let value = serde_json::from_str::<Value>(raw.get()).ok()?;
            fields.insert(name.clone(), value);
        }
        Some(fields)
    }
}

/// The prompt text of `messages`: each turn as `<|role|>` then its texts, one line each, so
/// each turn extends the previous prompt.
pub(super) fn flatten_messages(messages: &[AsObject<ChatMessage>]) -> String {
    let mut text = String::with_capacity(flattened_len(messages));
    for message in messages {
        text.push_str("<|");
        text.push_str(&message.value.role);
        text.push_str("|>");
        for part in message.value.texts() {
            text.push_str(part);
        }
        text.push('\n');
    }
    text
}

/// The length of [`flatten_messages`]' output, so it is built without growing.
fn flattened_len(messages: &[AsObject<ChatMessage>]) -> usize {
    messages
        .iter()
        .map(|message| {
            let content: usize = message.value.texts().map(str::len).sum();
            "<||>\n".len() + message.value.role.len() + content
        })
        .sum()
}

#[cfg(test)]
#[path = "chat_tests.rs"]
mod tests;
