//! `POST /v1/embeddings`: deterministic unit vectors (the same text always embeds the same),
//! with `usage`, as floats or — what the OpenAI SDK asks for by default — base64 of
//! little-endian `f32`s.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::ApiError;
use super::state::AppState;
use crate::tokens::tokenize;

/// Vector length when the request does not ask for `dimensions`.
const DEFAULT_DIMENSIONS: usize = 16;
/// Largest `dimensions` accepted (OpenAI's largest model has 3072).
const MAX_DIMENSIONS: usize = 4096;
/// Inputs per request (OpenAI's limit).
const MAX_INPUTS: usize = 2048;

#[derive(Deserialize)]
#[serde(untagged)]
enum Input {
    Text(String),
    Texts(Vec<String>),
    Tokens(Vec<u64>),
    TokenLists(Vec<Vec<u64>>),
}

#[derive(Deserialize)]
struct EmbeddingRequest {
    model: Option<String>,
    input: Option<Input>,
    #[serde(default)]
    encoding_format: Option<String>,
    #[serde(default)]
    dimensions: Option<usize>,
}

pub(crate) async fn embeddings(State(app): State<AppState>, body: Bytes) -> Response {
    match answer(&app, &body) {
        Ok(value) => Json(value).into_response(),
        Err(error) => error.into_response(),
    }
}

fn answer(app: &AppState, body: &[u8]) -> Result<Value, ApiError> {
    let request: EmbeddingRequest = serde_json::from_slice(body)
        .map_err(|err| ApiError::bad_request(format!("invalid JSON body: {err}")))?;
    let model = request
        .model
        .ok_or_else(|| ApiError::bad_request("missing required field `model`"))?;
    if model != app.engine.config.model {
        return Err(ApiError::model_not_found(&model));
    }
    let inputs: Vec<Vec<String>> = match request.input {
        None => return Err(ApiError::bad_request("missing required field `input`")),
        Some(Input::Text(text)) => vec![tokenize(&text)],
        Some(Input::Texts(texts)) => texts.iter().map(|t| tokenize(t)).collect(),
        Some(Input::Tokens(ids)) => vec![ids.iter().map(u64::to_string).collect()],
        Some(Input::TokenLists(lists)) => lists
            .iter()
            .map(|ids| ids.iter().map(u64::to_string).collect())
            .collect(),
    };
    if inputs.is_empty() || inputs.len() > MAX_INPUTS {
        return Err(ApiError::bad_request(format!(
            "`input` must hold 1 to {MAX_INPUTS} items"
        )));
    }
    let dimensions = request.dimensions.unwrap_or(DEFAULT_DIMENSIONS);
    if dimensions == 0 || dimensions > MAX_DIMENSIONS {
        return Err(ApiError::bad_request(format!(
            "`dimensions` must be in 1..={MAX_DIMENSIONS}"
        )));
    }
    let base64 = match request.encoding_format.as_deref() {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "`encoding_format` must be `float` or `base64`, got `{other}`"
            )));
        }
    };
    let mut tokens = 0;
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, words)| {
            tokens += words.len();
            let vector = embed(words, dimensions);
            let embedding = if base64 {
                json!(encode_base64(
                    &vector
                        .iter()
                        .flat_map(|x| x.to_le_bytes())
                        .collect::<Vec<u8>>()
                ))
            } else {
                json!(vector)
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    Ok(json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
}

/// A unit vector seeded by the words (FNV-1a, then a xorshift stream).
fn embed(words: &[String], dimensions: usize) -> Vec<f32> {
    let mut seed: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in words.iter().flat_map(|w| w.bytes().chain([b' '])) {
        seed ^= u64::from(byte);
        seed = seed.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut vector: Vec<f32> = (0..dimensions)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // Top 24 bits as a fraction in [0, 1), centred on zero.
            (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect();
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|x| *x /= norm);
    }
    vector
}

/// Standard base64 with padding (RFC 4648), which the SDK decodes.
fn encode_base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        assert_eq!(encode_base64(b""), "");
        assert_eq!(encode_base64(b"f"), "Zg==");
        assert_eq!(encode_base64(b"fo"), "Zm8=");
        assert_eq!(encode_base64(b"foo"), "Zm9v");
        assert_eq!(encode_base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn vectors_are_deterministic_unit_length_and_differ_by_text() {
        let a = embed(&tokenize("hello world"), 32);
        let b = embed(&tokenize("hello world"), 32);
        let c = embed(&tokenize("goodbye world"), 32);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
    }
}
