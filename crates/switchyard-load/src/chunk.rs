//! Reading the parts of an OpenAI chat-completion payload the report needs: streamed chunks
//! (`choices[].delta`) and whole responses (`choices[].message`) share one shape.

use serde::Deserialize;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub completion_tokens: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChunkSummary {
    /// Visible or reasoning text arrived (what TTFT measures).
    pub has_content: bool,
    /// Visible answer text, kept to continue multi-turn conversations.
    pub content: String,
    pub usage: Option<Usage>,
}

#[derive(Deserialize)]
struct ChunkJson {
    #[serde(default)]
    choices: Vec<ChoiceJson>,
    usage: Option<UsageJson>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ChoiceJson {
    delta: Option<MessageJson>,
    message: Option<MessageJson>,
}

#[derive(Deserialize)]
struct MessageJson {
    content: Option<String>,
    reasoning_content: Option<String>,
}

#[derive(Deserialize)]
struct UsageJson {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptTokensDetailsJson>,
}

#[derive(Deserialize)]
struct PromptTokensDetailsJson {
    cached_tokens: Option<u64>,
}

/// `None` when the payload is not JSON or reports an error.
pub fn summarize_chunk(payload: &str) -> Option<ChunkSummary> {
    let chunk: ChunkJson = serde_json::from_str(payload).ok()?;
    if chunk.error.as_ref().is_some_and(|error| !error.is_null()) {
        return None;
    }
    let mut summary = ChunkSummary::default();
    for choice in chunk.choices {
        let Some(message) = choice.delta.or(choice.message) else {
            continue;
        };
        let content = message.content.unwrap_or_default();
        let reasoning = message.reasoning_content.unwrap_or_default();
        summary.has_content |= !content.is_empty() || !reasoning.is_empty();
        summary.content.push_str(&content);
    }
    summary.usage = chunk.usage.map(|usage| Usage {
        prompt_tokens: usage.prompt_tokens.unwrap_or(0),
        completion_tokens: usage.completion_tokens.unwrap_or(0),
        cached_tokens: usage
            .prompt_tokens_details
            .and_then(|details| details.cached_tokens)
            .unwrap_or(0),
    });
    Some(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_delta_counts_as_content() {
        let summary =
            summarize_chunk(r#"{"choices":[{"index":0,"delta":{"content":"Hi"}}]}"#).expect("ok");
        assert!(summary.has_content);
        assert_eq!(summary.content, "Hi");
        assert_eq!(summary.usage, None);
    }

    #[test]
    fn role_only_and_empty_deltas_are_not_content() {
        for payload in [
            r#"{"choices":[{"delta":{"role":"assistant"}}]}"#,
            r#"{"choices":[{"delta":{"content":""}}]}"#,
            r#"{"choices":[{"delta":{"content":null}}]}"#,
        ] {
            assert!(
                !summarize_chunk(payload).expect("ok").has_content,
                "{payload}"
            );
        }
    }

    #[test]
    fn usage_chunk_with_cached_tokens() {
        let payload = r#"{"choices":[],"usage":{"prompt_tokens":120,"completion_tokens":8,
            "prompt_tokens_details":{"cached_tokens":96}}}"#;
        let usage = summarize_chunk(payload).expect("ok").usage;
        assert_eq!(
            usage,
            Some(Usage {
                prompt_tokens: 120,
                cached_tokens: 96,
                completion_tokens: 8
            })
        );
        let without_details =
            r#"{"choices":[],"usage":{"prompt_tokens":5,"prompt_tokens_details":null}}"#;
        let usage = summarize_chunk(without_details).expect("ok").usage;
        assert_eq!(usage.map(|usage| usage.cached_tokens), Some(0));
    }

    #[test]
    fn whole_response_message_is_read() {
        let payload = r#"{"choices":[{"message":{"role":"assistant","content":"Done."}}],
            "usage":{"prompt_tokens":3,"completion_tokens":2}}"#;
        let summary = summarize_chunk(payload).expect("ok");
        assert_eq!(summary.content, "Done.");
        assert_eq!(summary.usage.map(|usage| usage.prompt_tokens), Some(3));
    }

    #[test]
    fn errors_and_garbage_are_rejected() {
        assert_eq!(
            summarize_chunk(r#"{"error":{"message":"overloaded"}}"#),
            None
        );
        assert_eq!(summarize_chunk("{not json"), None);
        assert!(summarize_chunk(r#"{"choices":[],"error":null}"#).is_some());
    }
}
