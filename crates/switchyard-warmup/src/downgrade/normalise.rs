//! Prompt normalisation for the model a request moves down to: a model
//! configured without a system role gets the system prompt folded into the first user
//! message; a model with a short context gets the conversation trimmed to its newest
//! messages. Every change is disclosed as a [`Notice`]. Operates on the OpenAI chat body
//! and leaves every other field as the client sent it.

use serde::Serialize;
use serde_json::{Value, json};

use crate::config::ModelProfile;

/// A feature trimmed on the way down, disclosed to the client (`x-switchyard-notice`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "notice", rename_all = "snake_case")]
pub enum Notice {
    SystemPromptFolded,
    HistoryTrimmed { dropped: usize, kept: usize },
}

impl Notice {
    /// Plain ASCII, fit for a header value.
    pub fn text(&self) -> String {
        match self {
            Notice::SystemPromptFolded => {
                "system prompt merged into the first user message for this model".to_string()
            }
            Notice::HistoryTrimmed { dropped, kept } => format!(
                "service busy: conversation history trimmed to the last {kept} messages \
                 ({dropped} earlier messages not sent)"
            ),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Normalised {
    pub body: Value,
    pub notices: Vec<Notice>,
}

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("cannot normalise the request: {0}")]
pub struct NormaliseError(pub String);

/// Rewrites a chat-completions body for `target_model`. Without a profile the model takes
/// everything: only `model` changes.
pub fn normalise_chat(
    body: &Value,
    target_model: &str,
    profile: Option<&ModelProfile>,
) -> Result<Normalised, NormaliseError> {
    let mut body = body.clone();
    let object = body
        .as_object_mut()
        .ok_or_else(|| NormaliseError("the body is not a JSON object".into()))?;
    object.insert("model".into(), Value::String(target_model.to_string()));
    let messages = object
        .get_mut("messages")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| NormaliseError("`messages` is missing or not an array".into()))?;
    let mut notices = Vec::new();
    if let Some(profile) = profile {
        if profile.max_history_messages > 0 {
            if let Some(notice) = trim_history(messages, profile.max_history_messages as usize) {
                notices.push(notice);
            }
        }
        if !profile.system_role && fold_system(messages) {
            notices.push(Notice::SystemPromptFolded);
        }
    }
    Ok(Normalised { body, notices })
}

fn role(message: &Value) -> &str {
    message.get("role").and_then(Value::as_str).unwrap_or("")
}

fn is_system(message: &Value) -> bool {
    matches!(role(message), "system" | "developer")
}

/// The text of a message's content: a string, or the text parts of an array.
pub(crate) fn content_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Keeps system messages and the newest `max` other messages, starting at a user message.
fn trim_history(messages: &mut Vec<Value>, max: usize) -> Option<Notice> {
    let conversation = messages.iter().filter(|m| !is_system(m)).count();
    if conversation <= max {
        return None;
    }
    let mut to_drop = conversation - max;
    // A kept slice starting mid-exchange (assistant or tool first) confuses most models.
    let starts_with_user = |messages: &[Value], skip: usize| {
        messages
            .iter()
            .filter(|m| !is_system(m))
            .nth(skip)
            .is_none_or(|m| role(m) == "user")
    };
    while to_drop < conversation - 1 && !starts_with_user(messages, to_drop) {
        to_drop += 1;
    }
    let mut dropped = 0;
    messages.retain(|m| {
        if is_system(m) || dropped >= to_drop {
            true
        } else {
            dropped += 1;
            false
        }
    });
    Some(Notice::HistoryTrimmed {
        dropped,
        kept: conversation - dropped,
    })
}

/// Moves every system message's text in front of the first user message. True if any.
fn fold_system(messages: &mut Vec<Value>) -> bool {
    let system: Vec<String> = messages
        .iter()
        .filter(|m| is_system(m))
        .map(content_text)
        .filter(|text| !text.is_empty())
        .collect();
    let had_system = messages.iter().any(is_system);
    messages.retain(|m| !is_system(m));
    if system.is_empty() {
        return had_system;
    }
    let preamble = system.join("\n\n");
    match messages.iter_mut().find(|m| role(m) == "user") {
        Some(user) => {
            let folded = match user.get("content") {
                Some(Value::Array(parts)) => {
                    let mut parts = parts.clone();
                    parts.insert(0, json!({"type": "text", "text": preamble}));
                    Value::Array(parts)
                }
                _ => Value::String(format!("{preamble}\n\n{}", content_text(user))),
            };
            if let Some(object) = user.as_object_mut() {
                object.insert("content".into(), folded);
            }
        }
        None => messages.insert(0, json!({"role": "user", "content": preamble})),
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(system_role: bool, max: u32) -> ModelProfile {
        ModelProfile {
            model: "small".into(),
            system_role,
            max_history_messages: max,
        }
    }

    fn chat(messages: Value) -> Value {
        json!({"model": "flagship", "temperature": 0.2, "messages": messages})
    }

    #[test]
    fn folds_the_system_prompt_into_the_first_user_message() {
        let body = chat(json!([
            {"role": "system", "content": "You are a pirate."},
            {"role": "user", "content": "Hello"},
        ]));
        let out = normalise_chat(&body, "standard", Some(&profile(false, 0))).unwrap();
        assert_eq!(out.body["model"], "standard");
        assert_eq!(out.body["temperature"], 0.2, "other fields untouched");
        assert_eq!(
            out.body["messages"],
            json!([{"role": "user", "content": "You are a pirate.\n\nHello"}])
        );
        assert_eq!(out.notices, vec![Notice::SystemPromptFolded]);
        let kept = normalise_chat(&body, "big", Some(&profile(true, 0))).unwrap();
        assert_eq!(kept.body["messages"], body["messages"]);
        assert!(kept.notices.is_empty());
    }

    #[test]
    fn trims_history_to_the_newest_messages_starting_with_a_user_turn() {
        let body = chat(json!([
            {"role": "system", "content": "S"},
            {"role": "user", "content": "u1"},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "u2"},
            {"role": "assistant", "content": "a2"},
            {"role": "user", "content": "u3"},
        ]));
        let out = normalise_chat(&body, "small", Some(&profile(true, 2))).unwrap();
        let texts: Vec<String> = out.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(content_text)
            .collect();
        // The newest 2 would start with "a2": trimming goes on to "u3".
        assert_eq!(texts, vec!["S", "u3"]);
        assert_eq!(
            out.notices,
            vec![Notice::HistoryTrimmed {
                dropped: 4,
                kept: 1
            }]
        );
        assert!(out.notices[0].text().is_ascii());
    }

    #[test]
    fn folding_without_a_user_message_creates_one_and_rejects_non_chat_bodies() {
        let body = chat(json!([{"role": "system", "content": [{"type": "text", "text": "S"}]}]));
        let out = normalise_chat(&body, "small", Some(&profile(false, 0))).unwrap();
        assert_eq!(
            out.body["messages"],
            json!([{"role": "user", "content": "S"}])
        );
        assert!(normalise_chat(&json!({"prompt": "x"}), "small", None).is_err());
    }
}
