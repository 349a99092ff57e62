//! Engines' error answers in OpenAI's shape. vLLM and SGLang answer
//! `{"object":"error","message","type":"BadRequestError","param","code":400}`, FastAPI
//! validation `422 {"detail":[{"msg"}]}`, llama.cpp `{"error":{"code":400,"message","type"}}`;
//! clients of an OpenAI-compatible gateway expect `{"error":{"message","type","param","code"}}`
//! with a string code and the status OpenAI would use.

use serde_json::{Value, json};

use crate::engine::error_message;

/// Longest non-JSON error text kept as the message.
const TEXT_LIMIT: usize = 512;

/// OpenAI's `type` for an HTTP status.
fn openai_type(status: u16) -> &'static str {
    match status {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        500..=599 => "server_error",
        _ => "invalid_request_error",
    }
}

/// `BadRequestError` → `bad_request_error`; `exceed_context_size_error` stays.
fn snake_case(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4);
    for (i, c) in text.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        }
    }
    out
}

/// The engine's own error object: the nested `error` object, else the body itself.
fn error_object(value: &Value) -> Option<&serde_json::Map<String, Value>> {
    match value.get("error") {
        Some(Value::Object(inner)) => Some(inner),
        _ => value.as_object(),
    }
}

/// A context-length refusal, whatever the engine calls it.
fn is_context_overflow(kind: &str, message: &str) -> bool {
    kind == "exceed_context_size_error"
        || message.contains("maximum context length")
        || message.contains("exceeds the available context size")
        || message.contains("longer than the model's context length")
}

/// The status and OpenAI-shaped body for an engine's error answer (`status` ≥ 400): the
/// engine's message kept, a validation 422 answered as 400, a string `code` (the engine's
/// string code, else `context_length_exceeded` for context overflows, else its error type in
/// snake case, else `upstream_error`), `param` when the engine named one.
pub fn openai_error(status: u16, body: &[u8]) -> (u16, Value) {
    let status = if status == 422 { 400 } else { status };
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let message = error_message(body).unwrap_or_else(|| {
        let text = String::from_utf8_lossy(body);
        let text = text.trim();
        if text.is_empty() || parsed.is_some() {
            format!("the inference engine answered {status}")
        } else {
            text.chars().take(TEXT_LIMIT).collect()
        }
    });
    let object = parsed.as_ref().and_then(error_object);
    let field = |name: &str| object.and_then(|o| o.get(name));
    let kind = field("type").and_then(Value::as_str).unwrap_or_default();
    let code = match field("code") {
        Some(Value::String(code)) if !code.is_empty() => code.clone(),
        _ if is_context_overflow(kind, &message) => "context_length_exceeded".into(),
        _ if !kind.is_empty() => snake_case(kind),
        _ => "upstream_error".into(),
    };
    let param = field("param").filter(|p| !p.is_null()).cloned();
    (
        status,
        json!({"error": {
            "message": message,
            "type": openai_type(status),
            "param": param,
            "code": code,
        }}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(status: u16, body: &[u8]) -> (u16, Value) {
        let (status, value) = openai_error(status, body);
        (status, value["error"].clone())
    }

    #[test]
    fn vllm_and_sglang_errors_become_openai_errors() {
        let (status, e) = error(400, include_bytes!("../tests/fixtures/vllm_error.json"));
        assert_eq!(status, 400);
        assert_eq!(e["type"], "invalid_request_error");
        assert_eq!(e["code"], "context_length_exceeded");
        assert!(
            e["message"]
                .as_str()
                .unwrap()
                .starts_with("This model's maximum context length")
        );
        assert!(e["param"].is_null());
        let (status, e) = error(404, include_bytes!("../tests/fixtures/sglang_error.json"));
        assert_eq!(status, 404);
        assert_eq!(e["type"], "not_found_error");
        assert_eq!(e["code"], "not_found_error");
        assert!(e["message"].as_str().unwrap().contains("does not exist"));
    }

    #[test]
    fn llamacpp_errors_keep_their_message_and_get_a_string_code() {
        let (status, e) = error(400, include_bytes!("../tests/fixtures/llamacpp_error.json"));
        assert_eq!(status, 400);
        assert_eq!(e["code"], "context_length_exceeded");
        assert_eq!(e["type"], "invalid_request_error");
        let (status, e) = error(
            503,
            include_bytes!("../tests/fixtures/llamacpp_loading.json"),
        );
        assert_eq!(status, 503);
        assert_eq!(e["type"], "server_error");
        assert_eq!(e["code"], "unavailable_error");
        assert_eq!(e["message"], "Loading model");
    }

    #[test]
    fn validation_errors_are_400_and_plain_text_is_kept_short() {
        let (status, e) = error(
            422,
            br#"{"detail":[{"loc":["body","temperature"],"msg":"Input should be a valid number"}]}"#,
        );
        assert_eq!(status, 400);
        assert_eq!(e["message"], "Input should be a valid number");
        assert_eq!(e["code"], "upstream_error");
        let long = "x".repeat(5000);
        let (status, e) = error(500, long.as_bytes());
        assert_eq!(status, 500);
        assert_eq!(e["message"].as_str().unwrap().len(), TEXT_LIMIT);
        let (_, e) = error(502, b"");
        assert_eq!(e["message"], "the inference engine answered 502");
        let (_, e) = error(
            400,
            br#"{"error":{"message":"bad","type":"invalid_request_error","param":"n","code":"invalid_value"}}"#,
        );
        assert_eq!(
            (e["code"].as_str(), e["param"].as_str()),
            (Some("invalid_value"), Some("n"))
        );
    }
}
