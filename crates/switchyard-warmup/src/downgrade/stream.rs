//! Cached answers for streaming requests. The cache holds one shape, the non-streaming
//! completion: a streamed answer is assembled into it from its SSE deltas before it is
//! stored, and a cached completion is replayed as SSE frames (`data: {chunk}` … `data:
//! [DONE]`) when a streaming request is answered from the cache.

use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

const DONE: &str = "[DONE]";

/// A cached completion (chat or text) as the SSE body of the same answer: per choice, a
/// chunk carrying the whole text and a chunk carrying the finish reason, then `[DONE]`.
/// `None` when the body is not a completion this can replay.
pub fn sse_from_completion(body: &str) -> Option<String> {
    let completion: Value = serde_json::from_str(body).ok()?;
    let choices = completion.get("choices")?.as_array()?;
    let chat = completion.get("object").and_then(Value::as_str) != Some("text_completion")
        && choices.iter().all(|choice| choice.get("message").is_some());
    let header = |object: &str| {
        let mut chunk = Map::new();
        for field in ["id", "created", "model", "system_fingerprint"] {
            if let Some(value) = completion.get(field) {
                chunk.insert(field.into(), value.clone());
            }
        }
        chunk.insert("object".into(), json!(object));
        chunk
    };
    let mut out = String::new();
    for (position, choice) in choices.iter().enumerate() {
        let index = choice.get("index").cloned().unwrap_or(json!(position));
        let finish = choice
            .get("finish_reason")
            .cloned()
            .unwrap_or(json!("stop"));
        if chat {
            let message = choice.get("message")?;
            let role = message.get("role").cloned().unwrap_or(json!("assistant"));
            let content = message.get("content").cloned().unwrap_or(Value::Null);
            let delta = json!({"role": role, "content": content});
            push_frame(
                &mut out,
                header("chat.completion.chunk"),
                index.clone(),
                delta,
                None,
            );
            push_frame(
                &mut out,
                header("chat.completion.chunk"),
                index,
                json!({}),
                Some(finish),
            );
        } else {
            let text = choice.get("text")?.clone();
            let mut chunk = header("text_completion");
            chunk.insert(
                "choices".into(),
                json!([{"index": index, "text": text, "finish_reason": finish}]),
            );
            push_data(&mut out, &Value::Object(chunk));
        }
    }
    out.push_str("data: ");
    out.push_str(DONE);
    out.push_str("\n\n");
    Some(out)
}

fn push_frame(
    out: &mut String,
    mut chunk: Map<String, Value>,
    index: Value,
    delta: Value,
    finish: Option<Value>,
) {
    chunk.insert(
        "choices".into(),
        json!([{"index": index, "delta": delta, "finish_reason": finish}]),
    );
    push_data(out, &Value::Object(chunk));
}

fn push_data(out: &mut String, chunk: &Value) {
    out.push_str("data: ");
    out.push_str(&chunk.to_string());
    out.push_str("\n\n");
}

#[derive(Default)]
struct Assembled {
    role: Option<Value>,
    text: String,
    finish: Option<Value>,
}

/// A complete SSE answer (it ended with `[DONE]`) assembled into the non-streaming
/// completion the cache stores, chat or text alike. `None` — nothing is cached — when the
/// stream did not finish, carried an error event, carried something a completion cannot
/// hold as plain text (tool calls, function calls), or its text exceeds `max_text_bytes`.
pub fn completion_from_sse(sse: &[u8], max_text_bytes: usize) -> Option<String> {
    let sse = std::str::from_utf8(sse).ok()?;
    let mut chat = None;
    let mut head: Option<Map<String, Value>> = None;
    let mut usage = None;
    let mut choices: BTreeMap<u64, Assembled> = BTreeMap::new();
    let mut text_bytes = 0usize;
    let mut done = false;
    for line in sse.lines() {
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let data = data.trim();
        if data == DONE {
            done = true;
            break;
        }
        let chunk: Value = serde_json::from_str(data).ok()?;
        if chunk.get("error").is_some() {
            return None;
        }
        let is_chat = chunk.get("object").and_then(Value::as_str) != Some("text_completion");
        if *chat.get_or_insert(is_chat) != is_chat {
            return None;
        }
        if head.is_none() {
            let mut fields = Map::new();
            for field in ["id", "created", "model", "system_fingerprint"] {
                if let Some(value) = chunk.get(field) {
                    fields.insert(field.into(), value.clone());
                }
            }
            head = Some(fields);
        }
        if let Some(found) = chunk.get("usage").filter(|u| !u.is_null()) {
            usage = Some(found.clone());
        }
        for choice in chunk
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let index = choice.get("index").and_then(Value::as_u64).unwrap_or(0);
            let entry = choices.entry(index).or_default();
            let piece = if is_chat {
                let delta = choice.get("delta");
                let field = |name: &str| delta.and_then(|d| d.get(name)).filter(|v| !v.is_null());
                if field("tool_calls").is_some() || field("function_call").is_some() {
                    return None;
                }
                if let Some(role) = field("role") {
                    entry.role = Some(role.clone());
                }
                field("content").and_then(Value::as_str)
            } else {
                choice.get("text").and_then(Value::as_str)
            };
            if let Some(piece) = piece {
                text_bytes += piece.len();
                if text_bytes > max_text_bytes {
                    return None;
                }
                entry.text.push_str(piece);
            }
            if let Some(finish) = choice.get("finish_reason").filter(|f| !f.is_null()) {
                entry.finish = Some(finish.clone());
            }
        }
    }
    if !done || choices.is_empty() {
        return None;
    }
    let chat = chat.unwrap_or(true);
    let mut completion = head.unwrap_or_default();
    let object = if chat {
        "chat.completion"
    } else {
        "text_completion"
    };
    completion.insert("object".into(), json!(object));
    let choices: Vec<Value> = choices
        .into_iter()
        .map(|(index, choice)| {
            let finish = choice.finish.unwrap_or(json!("stop"));
            if chat {
                let role = choice.role.unwrap_or(json!("assistant"));
                json!({
                    "index": index,
                    "message": {"role": role, "content": choice.text},
                    "finish_reason": finish,
                })
            } else {
                json!({"index": index, "text": choice.text, "finish_reason": finish})
            }
        })
        .collect();
    completion.insert("choices".into(), Value::Array(choices));
    if let Some(usage) = usage {
        completion.insert("usage".into(), usage);
    }
    serde_json::to_string(&Value::Object(completion)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(sse: &str) -> Vec<Value> {
        sse.split("\n\n")
            .filter_map(|frame| frame.strip_prefix("data: "))
            .filter(|data| *data != DONE)
            .map(|data| serde_json::from_str(data).unwrap())
            .collect()
    }

    #[test]
    fn a_cached_chat_completion_replays_as_sse_chunks_then_done() {
        let body = json!({
            "id": "c1", "object": "chat.completion", "created": 7, "model": "small",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris."},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        })
        .to_string();
        let sse = sse_from_completion(&body).unwrap();
        assert!(sse.ends_with("data: [DONE]\n\n"), "{sse}");
        let chunks = frames(&sse);
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0]["object"], "chat.completion.chunk");
        assert_eq!(
            (&chunks[0]["id"], &chunks[0]["model"]),
            (&json!("c1"), &json!("small"))
        );
        assert_eq!(chunks[0]["choices"][0]["delta"]["content"], "Paris.");
        assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
        assert!(chunks[0]["choices"][0]["finish_reason"].is_null());
        assert_eq!(chunks[1]["choices"][0]["finish_reason"], "stop");
        assert_eq!(sse_from_completion("not json"), None);
    }

    #[test]
    fn a_text_completion_replays_with_text_chunks() {
        let body = json!({"object": "text_completion", "model": "m",
            "choices": [{"index": 0, "text": "42", "finish_reason": "length"}]})
        .to_string();
        let chunks = frames(&sse_from_completion(&body).unwrap());
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0]["choices"][0]["text"], "42");
        assert_eq!(chunks[0]["choices"][0]["finish_reason"], "length");
    }

    fn chat_stream(pieces: &[&str], done: bool) -> String {
        let mut sse = String::new();
        for (i, piece) in pieces.iter().enumerate() {
            let delta = if i == 0 {
                json!({"role": "assistant", "content": piece})
            } else {
                json!({"content": piece})
            };
            let chunk = json!({"id": "s1", "object": "chat.completion.chunk", "created": 9,
                "model": "small", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
            sse.push_str(&format!("data: {chunk}\r\n\r\n"));
        }
        let last = json!({"id": "s1", "object": "chat.completion.chunk", "model": "small",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"total_tokens": 9}});
        sse.push_str(&format!("data: {last}\n\n"));
        if done {
            sse.push_str("data: [DONE]\n\n");
        }
        sse
    }

    #[test]
    fn a_finished_stream_assembles_into_a_completion_that_replays_the_same_text() {
        let sse = chat_stream(&["The capital ", "is ", "Paris."], true);
        let body = completion_from_sse(sse.as_bytes(), 1024).unwrap();
        let completion: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(completion["object"], "chat.completion");
        assert_eq!(completion["id"], "s1");
        assert_eq!(
            completion["choices"][0]["message"]["content"],
            "The capital is Paris."
        );
        assert_eq!(completion["choices"][0]["message"]["role"], "assistant");
        assert_eq!(completion["choices"][0]["finish_reason"], "stop");
        assert_eq!(completion["usage"]["total_tokens"], 9);
        let replay = frames(&sse_from_completion(&body).unwrap());
        assert_eq!(
            replay[0]["choices"][0]["delta"]["content"],
            "The capital is Paris."
        );
    }

    #[test]
    fn unfinished_oversized_errored_or_tool_streams_are_not_cached() {
        let unfinished = chat_stream(&["half"], false);
        assert_eq!(completion_from_sse(unfinished.as_bytes(), 1024), None);
        let long = chat_stream(&["0123456789", "0123456789"], true);
        assert_eq!(completion_from_sse(long.as_bytes(), 15), None);
        assert!(completion_from_sse(long.as_bytes(), 20).is_some());
        let errored = format!(
            "{}data: {{\"error\":{{\"message\":\"broke\"}}}}\n\ndata: [DONE]\n\n",
            chat_stream(&["a"], false)
        );
        assert_eq!(completion_from_sse(errored.as_bytes(), 1024), None);
        let tool = "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\
                    \"delta\":{\"tool_calls\":[{\"index\":0}]}}]}\n\ndata: [DONE]\n\n";
        assert_eq!(completion_from_sse(tool.as_bytes(), 1024), None);
        let text = "data: {\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"4\",\
                    \"finish_reason\":null}]}\n\ndata: {\"object\":\"text_completion\",\
                    \"choices\":[{\"index\":0,\"text\":\"2\",\"finish_reason\":\"stop\"}]}\n\n\
                    data: [DONE]\n\n";
        let completion: Value =
            serde_json::from_str(&completion_from_sse(text.as_bytes(), 1024).unwrap()).unwrap();
        assert_eq!(completion["choices"][0]["text"], "42");
    }
}
