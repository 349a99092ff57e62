//! What routing and budgets need from the endpoints beyond chat and completions: embeddings,
//! tokenize/detokenize, rerank/score (vLLM), the Responses API and any other `POST /v1/*`
//! that names a model. The body is forwarded byte for byte; only the model, the stream flag,
//! the requested output and the text that routes the request (its prefix feeds cache-aware
//! routing, its length the budget estimate) are read.

use serde_json::{Map, Value};

use super::request::{ParsedRequest, Route, from_json};
use crate::error::ApiError;

/// Fields whose text routes the request, per endpoint. Fields absent from a body are skipped:
/// the engine judges whether the request is complete.
fn text_fields(route: Route) -> &'static [&'static str] {
    match route {
        Route::Embeddings => &["input"],
        // vLLM takes `prompt` or `messages`, llama.cpp `content`.
        Route::Tokenize => &["prompt", "messages", "content"],
        Route::Detokenize => &[],
        Route::Rerank => &["query", "documents"],
        Route::Score => &["text_1", "text_2", "queries", "documents"],
        Route::Responses => &["instructions", "input"],
        Route::Passthrough | Route::ChatCompletions | Route::Completions => {
            &["prompt", "messages", "input"]
        }
    }
}

/// Whether the endpoint may omit `model` (llama.cpp's tokenizer endpoints never take one; the
/// gateway then picks the model when it serves only one).
fn model_optional(route: Route) -> bool {
    matches!(route, Route::Tokenize | Route::Detokenize)
}

/// Reads the routing fields of a non-generation request. A missing `model` is an empty string
/// where the endpoint allows it.
pub fn parse(route: Route, body: &[u8]) -> Result<ParsedRequest, ApiError> {
    let value: Value = from_json(body)?;
    let Value::Object(object) = value else {
        return Err(ApiError::bad_request(
            "invalid_request",
            "the request body must be a JSON object",
        ));
    };
    let model = match object.get("model") {
        Some(Value::String(model)) if !model.is_empty() => model.clone(),
        None if model_optional(route) => String::new(),
        Some(Value::String(_)) | None => {
            return Err(ApiError::bad_request(
                "invalid_request",
                "`model` is required and must name a model",
            ));
        }
        Some(_) => return Err(invalid_type("model", "a string")),
    };
    if route == Route::Embeddings && !object.contains_key("input") {
        return Err(ApiError::bad_request(
            "invalid_request",
            "`input` is required",
        ));
    }
    let stream = match object.get("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(stream)) => *stream,
        Some(_) => return Err(invalid_type("stream", "a boolean")),
    };
    let mut prompt = String::new();
    for field in text_fields(route) {
        if let Some(value) = object.get(*field) {
            append_text(value, &mut prompt);
        }
    }
    Ok(ParsedRequest {
        model,
        stream,
        prompt,
        user: match object.get("user") {
            Some(Value::String(user)) => Some(user.clone()),
            _ => None,
        },
        max_tokens: requested_output(route, &object)?,
        include_usage: object
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

#[derive(serde::Deserialize)]
struct ModelQuery {
    model: Option<String>,
}

/// The routing fields of a bodiless pass-through (`GET` or `DELETE` on `/v1/*`: files,
/// batches, stored responses): the model its `model` query parameter names, else none (the
/// fleet's only model is then taken). Nothing to route by prefix and no output to reserve;
/// usage, if the worker reports any, is still metered.
pub fn parse_bodiless(path_and_query: &str) -> ParsedRequest {
    let model = http::Uri::try_from(path_and_query)
        .ok()
        .and_then(|uri| axum::extract::Query::<ModelQuery>::try_from_uri(&uri).ok())
        .and_then(|query| query.0.model)
        .unwrap_or_default();
    ParsedRequest {
        model,
        stream: false,
        prompt: String::new(),
        user: None,
        max_tokens: Some(0),
        include_usage: false,
    }
}

/// Output tokens the request may generate: none for the encoders (embeddings, tokenizer,
/// rerank, score), the client's limit for generation, unknown otherwise.
fn requested_output(route: Route, object: &Map<String, Value>) -> Result<Option<u64>, ApiError> {
    let field = match route {
        Route::Responses => "max_output_tokens",
        Route::Passthrough | Route::ChatCompletions | Route::Completions => {
            if object.contains_key("max_completion_tokens") {
                "max_completion_tokens"
            } else {
                "max_tokens"
            }
        }
        Route::Embeddings | Route::Tokenize | Route::Detokenize | Route::Rerank | Route::Score => {
            return Ok(Some(0));
        }
    };
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or_else(|| invalid_type(field, "a non-negative integer")),
    }
}

fn invalid_type(field: &str, expected: &str) -> ApiError {
    ApiError::bad_request("invalid_request", format!("`{field}` must be {expected}"))
}

/// Appends the text of a JSON value in document order: strings as they are, token ids as
/// numbers, arrays element by element, objects by their `role`, `text` and `content` (the
/// shapes of chat messages, Responses input items and rerank documents). Other fields (images,
/// tool schemas) do not route.
fn append_text(value: &Value, out: &mut String) {
    match value {
        Value::String(text) => {
            out.push_str(text);
            out.push('\n');
        }
        Value::Number(number) => {
            out.push_str(&number.to_string());
            out.push(' ');
        }
        Value::Array(items) => items.iter().for_each(|item| append_text(item, out)),
        Value::Object(object) => {
            if let Some(Value::String(role)) = object.get("role") {
                out.push_str("<|");
                out.push_str(role);
                out.push_str("|>");
            }
            for key in ["text", "content"] {
                if let Some(inner) = object.get(key) {
                    append_text(inner, out);
                }
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::parse as parse_any;

    #[test]
    fn embeddings_route_by_their_input_and_reserve_no_output() {
        let one = parse_any(
            Route::Embeddings,
            br#"{"model":"e5","input":"hello world","encoding_format":"base64"}"#,
        )
        .unwrap();
        assert_eq!(one.model, "e5");
        assert_eq!(one.prompt, "hello world\n");
        assert_eq!(one.max_tokens, Some(0));
        assert_eq!(one.estimated_tokens(256), 3);
        let many = parse_any(Route::Embeddings, br#"{"model":"e5","input":[[1,2],[3]]}"#).unwrap();
        assert_eq!(many.prompt, "1 2 3 ");
        let missing = parse_any(Route::Embeddings, br#"{"model":"e5"}"#).unwrap_err();
        assert_eq!(missing.status.as_u16(), 400);
        assert!(missing.message.contains("input"));
    }

    #[test]
    fn tokenizer_endpoints_may_omit_the_model_others_may_not() {
        let tokenize = parse_any(Route::Tokenize, br#"{"content":"abc"}"#).unwrap();
        assert_eq!(tokenize.model, "");
        assert_eq!(tokenize.prompt, "abc\n");
        let detokenize = parse_any(Route::Detokenize, br#"{"tokens":[1,2,3]}"#).unwrap();
        assert_eq!(detokenize.prompt, "");
        for route in [
            Route::Rerank,
            Route::Score,
            Route::Responses,
            Route::Passthrough,
        ] {
            let error = parse_any(route, br#"{"input":"x"}"#).unwrap_err();
            assert_eq!(error.status.as_u16(), 400, "{route:?}");
            assert!(error.message.contains("model"), "{}", error.message);
        }
        let wrong = parse_any(Route::Tokenize, br#"{"model":7}"#).unwrap_err();
        assert!(wrong.message.contains("`model` must be a string"));
    }

    #[test]
    fn responses_read_instructions_input_items_stream_and_output_limit() {
        let body = br#"{"model":"m","instructions":"be brief","stream":true,"max_output_tokens":40,
            "input":[{"role":"user","content":[{"type":"input_text","text":"hi there"}]}]}"#;
        let parsed = parse_any(Route::Responses, body).unwrap();
        assert!(parsed.stream);
        assert_eq!(parsed.max_tokens, Some(40));
        assert_eq!(parsed.prompt, "be brief\n<|user|>hi there\n");
        let bad = parse_any(
            Route::Responses,
            br#"{"model":"m","input":"x","stream":"yes"}"#,
        )
        .unwrap_err();
        assert!(bad.message.contains("stream"));
        let limit =
            parse_any(Route::Responses, br#"{"model":"m","max_output_tokens":-1}"#).unwrap_err();
        assert!(limit.message.contains("max_output_tokens"));
    }

    #[test]
    fn bodiless_requests_name_their_model_in_the_query_if_at_all() {
        let named = parse_bodiless("/v1/files?limit=2&model=org%2Fchat-model");
        assert_eq!(named.model, "org/chat-model");
        assert_eq!((named.prompt.as_str(), named.max_tokens), ("", Some(0)));
        assert!(!named.stream);
        assert_eq!(parse_bodiless("/v1/batches/b1").model, "");
        assert_eq!(parse_bodiless("/v1/files?model=").model, "");
    }

    #[test]
    fn rerank_score_and_passthrough_collect_their_text() {
        let rerank = parse_any(
            Route::Rerank,
            br#"{"model":"r","query":"q","documents":["a",{"text":"b"}],"top_n":1}"#,
        )
        .unwrap();
        assert_eq!(rerank.prompt, "q\na\nb\n");
        let score = parse_any(
            Route::Score,
            br#"{"model":"r","text_1":"x","text_2":["y","z"]}"#,
        )
        .unwrap();
        assert_eq!(score.prompt, "x\ny\nz\n");
        let other = parse_any(
            Route::Passthrough,
            br#"{"model":"m","prompt":"p","max_completion_tokens":9,"max_tokens":3}"#,
        )
        .unwrap();
        assert_eq!((other.prompt.as_str(), other.max_tokens), ("p\n", Some(9)));
        let not_object = parse_any(Route::Passthrough, b"[1]").unwrap_err();
        assert_eq!(not_object.status.as_u16(), 400);
        let not_json = parse_any(Route::Score, b"{").unwrap_err();
        assert_eq!(not_json.code, "invalid_json");
    }
}
