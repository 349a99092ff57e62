//! OpenAI request parsing and response/chunk shapes for chat and completions.

use serde::Deserialize;
use serde_json::{Value, json};

use super::error::ApiError;
use crate::config::MAX_OUTPUT_TOKENS;
use crate::generation::Usage;
use crate::tokens::{render_message, tokenize};

/// Which OpenAI endpoint a request came through; decides every response shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Chat,
    Completion,
}

/// A validated inference request, reduced to what the engine needs.
#[derive(Clone, Debug)]
pub(crate) struct InferenceRequest {
    pub(crate) model: String,
    pub(crate) prompt: Vec<String>,
    pub(crate) max_tokens: usize,
    /// Whether the client set a length limit (then hitting it is `length`, not `stop`).
    pub(crate) limit_given: bool,
    pub(crate) stream: bool,
    pub(crate) include_usage: bool,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Deserialize)]
struct ContentPart {
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct ChatMessage {
    role: String,
    #[serde(default)]
    content: Option<MessageContent>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Prompt {
    Text(String),
    Many(Vec<String>),
}

/// Fields of both request kinds; the endpoint decides which body field is required.
#[derive(Deserialize)]
struct RawRequest {
    model: Option<String>,
    messages: Option<Vec<ChatMessage>>,
    prompt: Option<Prompt>,
    max_tokens: Option<u64>,
    max_completion_tokens: Option<u64>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
}

fn render_chat(messages: &[ChatMessage]) -> String {
    let rendered: Vec<String> = messages
        .iter()
        .map(|message| {
            let content = match &message.content {
                None => String::new(),
                Some(MessageContent::Text(text)) => text.clone(),
                Some(MessageContent::Parts(parts)) => parts
                    .iter()
                    .filter_map(|part| part.text.as_deref())
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            render_message(&message.role, &content)
        })
        .collect();
    rendered.join(" ")
}

/// Parses and validates a request body for `endpoint`.
pub(crate) fn parse_request(
    endpoint: Endpoint,
    body: &[u8],
    default_max_tokens: u32,
) -> Result<InferenceRequest, ApiError> {
    let raw: RawRequest = serde_json::from_slice(body)
        .map_err(|err| ApiError::bad_request(format!("invalid JSON body: {err}")))?;
    let model = raw
        .model
        .ok_or_else(|| ApiError::bad_request("missing required field `model`"))?;
    let text = match endpoint {
        Endpoint::Chat => match raw.messages {
            Some(messages) if !messages.is_empty() => render_chat(&messages),
            Some(_) => return Err(ApiError::bad_request("`messages` must not be empty")),
            None => return Err(ApiError::bad_request("missing required field `messages`")),
        },
        Endpoint::Completion => match raw.prompt {
            Some(Prompt::Text(text)) => text,
            Some(Prompt::Many(parts)) => parts.join(" "),
            None => return Err(ApiError::bad_request("missing required field `prompt`")),
        },
    };
    let limit = raw.max_completion_tokens.or(raw.max_tokens);
    let max_tokens = limit
        .unwrap_or(u64::from(default_max_tokens))
        .clamp(1, u64::from(MAX_OUTPUT_TOKENS));
    Ok(InferenceRequest {
        model,
        prompt: tokenize(&text),
        max_tokens: usize::try_from(max_tokens).unwrap_or(1),
        limit_given: limit.is_some(),
        stream: raw.stream.unwrap_or(false),
        include_usage: raw
            .stream_options
            .and_then(|options| options.include_usage)
            .unwrap_or(false),
    })
}

/// Identity fields shared by every chunk and response of one request.
#[derive(Clone, Debug)]
pub(crate) struct ResponseMeta {
    pub(crate) endpoint: Endpoint,
    pub(crate) id: String,
    pub(crate) created: u64,
    pub(crate) model: String,
}

impl ResponseMeta {
    fn object(&self, streaming: bool) -> &'static str {
        match (self.endpoint, streaming) {
            (Endpoint::Chat, true) => "chat.completion.chunk",
            (Endpoint::Chat, false) => "chat.completion",
            (Endpoint::Completion, _) => "text_completion",
        }
    }

    fn envelope(&self, streaming: bool, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.object(streaming),
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }

    /// A streamed token; the first chat chunk also announces the assistant role.
    pub(crate) fn token_chunk(&self, piece: &str, first: bool) -> Value {
        let choice = match self.endpoint {
            Endpoint::Chat if first => json!({
                "index": 0,
                "delta": {"role": "assistant", "content": piece},
                "logprobs": null,
                "finish_reason": null,
            }),
            Endpoint::Chat => json!({
                "index": 0, "delta": {"content": piece}, "logprobs": null, "finish_reason": null,
            }),
            Endpoint::Completion => json!({
                "index": 0, "text": piece, "logprobs": null, "finish_reason": null,
            }),
        };
        self.envelope(true, json!([choice]))
    }

    /// The streamed chunk that carries `finish_reason` and no new text.
    pub(crate) fn finish_chunk(&self, finish_reason: &str) -> Value {
        let choice = match self.endpoint {
            Endpoint::Chat => json!({
                "index": 0, "delta": {}, "logprobs": null, "finish_reason": finish_reason,
            }),
            Endpoint::Completion => json!({
                "index": 0, "text": "", "logprobs": null, "finish_reason": finish_reason,
            }),
        };
        self.envelope(true, json!([choice]))
    }

    /// `stream_options.include_usage`: empty `choices` plus `usage`.
    pub(crate) fn usage_chunk(&self, usage: &Usage) -> Value {
        let mut chunk = self.envelope(true, json!([]));
        chunk["usage"] = json!(usage);
        chunk
    }

    /// The whole non-streaming answer.
    pub(crate) fn full_response(&self, text: &str, finish_reason: &str, usage: &Usage) -> Value {
        let choice = match self.endpoint {
            Endpoint::Chat => json!({
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": null,
                "finish_reason": finish_reason,
            }),
            Endpoint::Completion => json!({
                "index": 0, "text": text, "logprobs": null, "finish_reason": finish_reason,
            }),
        };
        let mut response = self.envelope(false, json!([choice]));
        response["usage"] = json!(usage);
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_messages_render_roles_and_parts() {
        let body = br#"{"model":"m","messages":[
            {"role":"system","content":"be brief"},
            {"role":"user","content":[{"type":"text","text":"hi there"},{"type":"image_url"}]}
        ],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}"#;
        let request = parse_request(Endpoint::Chat, body, 16).unwrap();
        assert_eq!(
            request.prompt,
            vec!["<|system|>", "be", "brief", "<|user|>", "hi", "there"]
        );
        assert_eq!(request.max_tokens, 3);
        assert!(request.limit_given && request.stream && request.include_usage);
    }

    #[test]
    fn completion_prompt_array_is_joined_and_limits_apply() {
        let body = br#"{"model":"m","prompt":["a b","c"],"max_tokens":999999}"#;
        let request = parse_request(Endpoint::Completion, body, 16).unwrap();
        assert_eq!(request.prompt, vec!["a", "b", "c"]);
        assert_eq!(request.max_tokens, 4096);
        let defaulted = parse_request(Endpoint::Completion, br#"{"model":"m","prompt":"x"}"#, 7);
        let defaulted = defaulted.unwrap();
        assert_eq!((defaulted.max_tokens, defaulted.limit_given), (7, false));
        let chat = br#"{"model":"m","messages":[{"role":"user","content":"x"}],"max_completion_tokens":2,"max_tokens":9}"#;
        assert_eq!(
            parse_request(Endpoint::Chat, chat, 16).unwrap().max_tokens,
            2
        );
    }

    #[test]
    fn invalid_bodies_are_rejected() {
        for (endpoint, body) in [
            (Endpoint::Chat, &b"{not json"[..]),
            (
                Endpoint::Chat,
                br#"{"messages":[{"role":"user","content":"x"}]}"#,
            ),
            (Endpoint::Chat, br#"{"model":"m"}"#),
            (Endpoint::Chat, br#"{"model":"m","messages":[]}"#),
            (Endpoint::Completion, br#"{"model":"m","messages":[]}"#),
            (Endpoint::Completion, br#"{"model":"m","prompt":5}"#),
        ] {
            assert!(parse_request(endpoint, body, 16).is_err());
        }
    }
}
