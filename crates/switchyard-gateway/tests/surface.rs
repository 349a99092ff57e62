#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The API surface beyond chat and completions, through the real gateway: embeddings from the
//! simulator, the tokenizer, rerank/score, Responses and generic `/v1/*` pass-through against
//! an upstream that records bytes; tool calls, `response_format` and `logprobs` untouched;
//! routed by model, admitted and metered.

mod common;
mod echo_support;

use common::*;
use echo_support::{EchoWorker, JSON_REPLY, SSE_REPLY};
use http::Method;
use switchyard_gateway::config::AdmissionConfig;

/// Decodes standard base64 (what the OpenAI SDK asks embeddings for by default).
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let bytes: Vec<u8> = text.bytes().filter(|c| *c != b'=').collect();
    let mut out = Vec::new();
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= u32::from(value(*c)) << (18 - 6 * i);
        }
        for i in 0..chunk.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

#[tokio::test]
async fn embeddings_reach_the_simulator_as_floats_or_base64_with_usage() {
    let sims = start_sims(2).await;
    let gateway = switchyard_gateway::start(config_for(&sims, "round_robin"), None)
        .await
        .unwrap();
    let url = format!("{}/v1/embeddings", gateway.base_url());
    let floats = post_json(
        &url,
        &serde_json::json!({"model": "sim-llama", "input": ["the quick fox", "a lazy dog"]}),
    )
    .await;
    assert_eq!(floats.status, 200, "{}", floats.body);
    assert!(floats.header("x-switchyard-worker").is_some());
    let body = floats.json();
    assert_eq!(body["object"], "list");
    assert_eq!(body["data"].as_array().unwrap().len(), 2);
    assert_eq!(body["usage"]["prompt_tokens"], 6);
    let first: Vec<f32> = body["data"][0]["embedding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(first.len(), 16);

    // The SDK's default request: base64 of little-endian f32, same vector.
    let encoded = post_json(
        &url,
        &serde_json::json!({"model": "sim-llama", "input": "the quick fox", "encoding_format": "base64"}),
    )
    .await;
    assert_eq!(encoded.status, 200, "{}", encoded.body);
    let bytes = decode_base64(encoded.json()["data"][0]["embedding"].as_str().unwrap());
    let decoded: Vec<f32> = bytes
        .chunks(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert_eq!(decoded, first, "base64 and float carry the same vector");

    let unknown = post_json(&url, &serde_json::json!({"model": "nope", "input": "x"})).await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    assert_eq!(unknown.error_code(), "model_not_found");
    let missing = post_json(&url, &serde_json::json!({"model": "sim-llama"})).await;
    assert_eq!(missing.status, 400, "{}", missing.body);

    let metrics = metrics_text(&gateway.base_url()).await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("switchyard_requests_total{route=\"embeddings\",status=\"200\"")),
        "embeddings are counted under their own route label"
    );
}

#[tokio::test]
async fn tool_calls_response_format_and_logprobs_pass_through_byte_for_byte() {
    let echo = EchoWorker::start("echo-model").await;
    let mut config = config_for(&[], "round_robin");
    config.workers = vec![echo.spec("echo")];
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let url = format!("{}/v1/chat/completions", gateway.base_url());
    // Key order, spacing and unicode escapes a re-serialiser would change.
    let request = r#"{"model":"echo-model",  "messages":[{"role":"user","content":"weather in Paris? \u00e9"}],
 "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],
 "tool_choice":"auto","response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object"}}},
 "logprobs":true,"top_logprobs":1,"max_tokens":5}"#;
    let reply = send(
        Method::POST,
        &url,
        &[("content-type", "application/json")],
        request,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(echo.last().path, "/v1/chat/completions");
    assert_eq!(&echo.last().body[..], request.as_bytes(), "request bytes");
    assert_eq!(reply.body, JSON_REPLY, "response bytes");

    // A stream that asks for usage itself is forwarded as it is (the gateway asks for usage
    // on the client's behalf otherwise, and hides it again).
    let streamed = request.replace(
        "\"max_tokens\":5",
        "\"max_tokens\":5,\"stream\":true,\"stream_options\":{\"include_usage\":true}",
    );
    let reply = send(
        Method::POST,
        &url,
        &[("content-type", "application/json")],
        streamed.clone(),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(&echo.last().body[..], streamed.as_bytes());
    assert_eq!(reply.body, SSE_REPLY, "stream bytes");
}

#[tokio::test]
async fn every_surface_endpoint_reaches_its_worker_path_routed_by_model() {
    let chat = EchoWorker::start("chat-model").await;
    let ranker = EchoWorker::start("rank-model").await;
    let mut config = config_for(&[], "round_robin");
    config.workers = vec![chat.spec("chat"), ranker.spec("ranker")];
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let base = gateway.base_url();
    let cases: &[(&str, &str, &EchoWorker)] = &[
        (
            "/v1/embeddings",
            r#"{"model":"rank-model","input":"abc"}"#,
            &ranker,
        ),
        (
            "/tokenize",
            r#"{"model":"chat-model","prompt":"abc"}"#,
            &chat,
        ),
        (
            "/detokenize",
            r#"{"model":"rank-model","tokens":[1,2]}"#,
            &ranker,
        ),
        (
            "/v1/rerank",
            r#"{"model":"rank-model","query":"q","documents":["a","b"]}"#,
            &ranker,
        ),
        (
            "/rerank",
            r#"{"model":"rank-model","query":"q","documents":["a"]}"#,
            &ranker,
        ),
        (
            "/v2/rerank",
            r#"{"model":"rank-model","query":"q","documents":["a"]}"#,
            &ranker,
        ),
        (
            "/v1/score",
            r#"{"model":"rank-model","text_1":"a","text_2":"b"}"#,
            &ranker,
        ),
        (
            "/score",
            r#"{"model":"rank-model","text_1":"a","text_2":"b"}"#,
            &ranker,
        ),
        (
            "/v1/responses",
            r#"{"model":"chat-model","input":"hi","tools":[{"type":"function","name":"f","parameters":{}}]}"#,
            &chat,
        ),
        (
            "/v1/classify?verbose=1",
            r#"{"model":"rank-model","input":["x"]}"#,
            &ranker,
        ),
        (
            "/v1/audio/whatever",
            r#"{"model":"chat-model","prompt":"p"}"#,
            &chat,
        ),
    ];
    for (path, body, worker) in cases {
        let reply = send(
            Method::POST,
            &format!("{base}{path}"),
            &[("content-type", "application/json")],
            *body,
        )
        .await;
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        assert_eq!(reply.header("x-echo-model"), Some(worker.model.as_str()));
        let seen = worker.last();
        assert_eq!(seen.path, *path);
        assert_eq!(&seen.body[..], body.as_bytes(), "{path}");
    }
    // Streaming Responses come back as the worker's events.
    let reply = send(
        Method::POST,
        &format!("{base}/v1/responses"),
        &[],
        r#"{"model":"chat-model","input":"hi","stream":true}"#,
    )
    .await;
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    assert_eq!(reply.body, SSE_REPLY);

    // A tokenizer request without a model is ambiguous with two models served.
    let ambiguous = post_json(
        &format!("{base}/tokenize"),
        &serde_json::json!({"content": "abc"}),
    )
    .await;
    assert_eq!(ambiguous.status, 400, "{}", ambiguous.body);
    assert!(ambiguous.body.contains("chat-model"), "{}", ambiguous.body);
    let unknown = post_json(
        &format!("{base}/v1/rerank"),
        &serde_json::json!({"model": "nope", "query": "q", "documents": []}),
    )
    .await;
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    assert_eq!(unknown.error_code(), "model_not_found");
    let no_model = post_json(
        &format!("{base}/v1/anything"),
        &serde_json::json!({"input": "x"}),
    )
    .await;
    assert_eq!(no_model.status, 400, "{}", no_model.body);
    // GET and DELETE pass through with their method, path and query, to the model the
    // query names; without one, two models served make it ambiguous.
    let get = send(Method::GET, &format!("{base}/v1/files"), &[], "").await;
    assert_eq!(get.status, 400, "{}", get.body);
    assert!(get.body.contains("rank-model"), "{}", get.body);
    for (method, path, worker) in [
        (Method::GET, "/v1/files?model=rank-model&limit=2", &ranker),
        (
            Method::DELETE,
            "/v1/responses/resp_1?model=chat-model",
            &chat,
        ),
        (Method::GET, "/v1/batches/b1?model=chat-model", &chat),
    ] {
        let reply = send(method.clone(), &format!("{base}{path}"), &[], "").await;
        assert_eq!(reply.status, 200, "{method} {path}: {}", reply.body);
        assert!(reply.header("x-switchyard-worker").is_some());
        let seen = worker.last();
        assert_eq!((&seen.method, seen.path.as_str()), (&method, path));
        assert!(seen.body.is_empty());
    }
    let unknown_model = send(Method::GET, &format!("{base}/v1/files?model=nope"), &[], "").await;
    assert_eq!(unknown_model.error_code(), "model_not_found");
    let put = send(Method::PUT, &format!("{base}/v1/files"), &[], "").await;
    assert_eq!(put.status, 404, "{}", put.body);
    assert_eq!(put.error_code(), "unknown_route");
    // The gateway's own /v1/models still answers.
    let models = send(Method::GET, &format!("{base}/v1/models"), &[], "").await;
    assert_eq!(models.status, 200, "{}", models.body);
}

#[tokio::test]
async fn a_tokenizer_request_without_a_model_goes_to_the_only_model() {
    let echo = EchoWorker::start("solo").await;
    let mut config = config_for(&[], "round_robin");
    config.workers = vec![echo.spec("solo")];
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let reply = post_json(
        &format!("{}/tokenize", gateway.base_url()),
        &serde_json::json!({"content": "llama.cpp sends no model"}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(echo.last().path, "/tokenize");
    // So does a GET that names none.
    let reply = send(
        Method::GET,
        &format!("{}/v1/files/file-1/content", gateway.base_url()),
        &[],
        "",
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(echo.last().path, "/v1/files/file-1/content");
    assert_eq!(echo.last().method, Method::GET);
}

#[tokio::test]
async fn surface_requests_are_admitted_and_spend_their_reported_usage() {
    // Every echo answer reports 400 tokens; the tenant has 1000 a day.
    let echo = EchoWorker::start("echo-model").await;
    let mut config = config_for(&[], "round_robin");
    config.workers = vec![echo.spec("echo")];
    config.admission = serde_json::from_value::<AdmissionConfig>(serde_json::json!({
        "tenants": [{"api_key": "sk-a", "caller": "team-a", "max_priority": "P1", "tokens_per_day": 1000}]
    }))
    .unwrap();
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let url = format!("{}/v1/embeddings", gateway.base_url());
    let anonymous = post_json(
        &url,
        &serde_json::json!({"model": "echo-model", "input": "x"}),
    )
    .await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    let bodiless = send(
        Method::GET,
        &format!("{}/v1/files", gateway.base_url()),
        &[],
        "",
    )
    .await;
    assert_eq!(bodiless.status, 401, "{}", bodiless.body);
    let ask = |input: &str| {
        send(
            Method::POST,
            &url,
            &[("authorization", "Bearer sk-a")],
            serde_json::json!({"model": "echo-model", "input": input}).to_string(),
        )
    };
    assert_eq!(ask("one").await.status, 200);
    assert_eq!(ask("two").await.status, 200);
    // 800 of 1000 spent by reported usage (the estimate was a couple of tokens each).
    let third = ask("three").await;
    assert_eq!(third.status, 200, "{}", third.body);
    let fourth = ask("four").await;
    assert_eq!(fourth.status, 429, "1200 of 1000 spent: {}", fourth.body);
    assert!(fourth.header("retry-after").is_some());
}

#[tokio::test]
async fn models_are_listed_with_their_context_and_retrieved_by_id() {
    let chat = EchoWorker::start("org/chat-model").await;
    let ranker = EchoWorker::start("rank-model").await;
    let mut config = config_for(&[], "round_robin");
    config.workers = vec![chat.spec("chat"), ranker.spec("ranker")];
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let base = gateway.base_url();
    // The context comes from each worker's own /v1/models.
    let listed = eventually(std::time::Duration::from_secs(10), || async {
        let reply = send(Method::GET, &format!("{base}/v1/models"), &[], "").await;
        let data = reply.json()["data"].clone();
        data.as_array()
            .is_some_and(|d| d.len() == 2 && d.iter().all(|m| m["max_model_len"] == 2048))
    })
    .await;
    let reply = send(Method::GET, &format!("{base}/v1/models"), &[], "").await;
    assert!(listed, "{}", reply.body);
    assert_eq!(reply.json()["data"][0]["id"], "org/chat-model");

    let one = send(
        Method::GET,
        &format!("{base}/v1/models/org/chat-model"),
        &[],
        "",
    )
    .await;
    assert_eq!(one.status, 200, "{}", one.body);
    assert_eq!(one.json()["id"], "org/chat-model");
    assert_eq!(one.json()["object"], "model");
    let missing = send(Method::GET, &format!("{base}/v1/models/gpt-9"), &[], "").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["error"]["code"], "model_not_found");
    // Methods with no pass-through meaning on /v1 stay OpenAI-shaped 404s.
    let other = send(Method::PATCH, &format!("{base}/v1/files"), &[], "").await;
    assert_eq!(other.status, 404);
    assert_eq!(other.json()["error"]["code"], "unknown_route");
    gateway.shutdown().await;
}
