//! The subset of an OpenAI request the gateway needs to route it. The body itself is forwarded
//! byte for byte; only these fields are read.

use serde::Deserialize;
use std::fmt::Write;

use crate::error::ApiError;

/// Which OpenAI endpoint a request came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    ChatCompletions,
    Completions,
}

impl Route {
    pub fn path(self) -> &'static str {
        match self {
            Route::ChatCompletions => "/v1/chat/completions",
            Route::Completions => "/v1/completions",
        }
    }

    /// Metric label.
    pub fn label(self) -> &'static str {
        match self {
            Route::ChatCompletions => "chat_completions",
            Route::Completions => "completions",
        }
    }
}

/// What routing needs to know about one request.
#[derive(Debug, PartialEq)]
pub struct ParsedRequest {
    pub model: String,
    pub stream: bool,
    /// Prompt text, chat messages flattened in order so each turn extends the previous prompt.
    pub prompt: String,
    pub user: Option<String>,
    /// `max_completion_tokens`, else `max_tokens`, if the client set one.
    pub max_tokens: Option<u64>,
}

impl ParsedRequest {
    /// Tokens to reserve before the worker reports real usage: about four bytes of prompt
    /// per token, plus the requested output (or `default_output` when none was asked for).
    pub fn estimated_tokens(&self, default_output: u64) -> u64 {
        (self.prompt.len() as u64).div_ceil(4) + self.max_tokens.unwrap_or(default_output)
    }
}

#[derive(Deserialize)]
struct ChatBody {
    model: String,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    max_completion_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ChatMessage {
    role: String,
    #[serde(default)]
    content: Option<Content>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize)]
struct ContentPart {
    #[serde(default)]
    text: Option<String>,
}

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
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Prompt {
    Text(String),
    Many(Vec<String>),
}

pub fn parse(route: Route, body: &[u8]) -> Result<ParsedRequest, ApiError> {
    match route {
        Route::ChatCompletions => {
            let chat: ChatBody = from_json(body)?;
            if chat.messages.is_empty() {
                return Err(ApiError::bad_request(
                    "invalid_request",
                    "`messages` must contain at least one message",
                ));
            }
            Ok(ParsedRequest {
                prompt: flatten_messages(&chat.messages),
                model: chat.model,
                stream: chat.stream.unwrap_or(false),
                user: chat.user,
                max_tokens: chat.max_completion_tokens.or(chat.max_tokens),
            })
        }
        Route::Completions => {
            let completion: CompletionBody = from_json(body)?;
            let prompt = match completion.prompt {
                Prompt::Text(text) => text,
                Prompt::Many(parts) => parts.join(" "),
            };
            Ok(ParsedRequest {
                prompt,
                model: completion.model,
                stream: completion.stream.unwrap_or(false),
                user: completion.user,
                max_tokens: completion.max_tokens,
            })
        }
    }
}

fn from_json<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            Category::Data => {
                ApiError::bad_request("invalid_request", format!("invalid request: {e}"))
            }
            Category::Syntax | Category::Eof | Category::Io => ApiError::bad_request(
                "invalid_json",
                format!("request body is not valid JSON: {e}"),
            ),
        }
    })
}

fn flatten_messages(messages: &[ChatMessage]) -> String {
    let mut text = String::new();
    for message in messages {
        let _ = write!(text, "<|{}|>", message.role);
        match &message.content {
            Some(Content::Text(content)) => text.push_str(content),
            Some(Content::Parts(parts)) => {
                for part in parts.iter().filter_map(|p| p.text.as_deref()) {
                    text.push_str(part);
                }
            }
            None => {}
        }
        text.push('\n');
    }
    text
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
}
