//! An engine's own 4xx answer (vLLM/SGLang `{"object":"error",...}`, FastAPI 422, llama.cpp's
//! integer codes) reaches the client in OpenAI's error shape with the status OpenAI would use
//! (`switchyard_workers::openai_error`). Such answers are small: one that is not complete
//! within the bounds below is passed through as the engine sent it.

use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use std::time::Duration;

const LIMIT_BYTES: usize = 64 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Reads the engine's error body and returns what the client is sent before the (then
/// finished) rest of `body`: the rewritten error, with `parts` fixed to match, or the bytes
/// read so far when the body was too long or too slow to judge (the rest then follows as it
/// is).
pub(super) async fn normalise(parts: &mut http::response::Parts, body: &mut Incoming) -> Bytes {
    let mut raw = Vec::new();
    let mut complete = false;
    let read = async {
        while raw.len() <= LIMIT_BYTES {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        raw.extend_from_slice(&data);
                    }
                }
                Some(Err(_)) => return,
                None => {
                    complete = true;
                    return;
                }
            }
        }
    };
    let _ = tokio::time::timeout(READ_TIMEOUT, read).await;
    if !complete {
        return Bytes::from(raw);
    }
    let (status, error) = switchyard_workers::openai_error(parts.status.as_u16(), &raw);
    parts.status = StatusCode::from_u16(status).unwrap_or(parts.status);
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::TRANSFER_ENCODING);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Bytes::from(error.to_string())
}
