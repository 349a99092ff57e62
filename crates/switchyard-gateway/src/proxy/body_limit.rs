use axum::body::Body;
use bytes::Bytes;
use http::HeaderMap;
use http_body_util::{BodyExt, Limited};

use crate::error::ApiError;

/// Reads the whole request body, refusing with 413 as soon as it is known to exceed `limit`
/// (from `content-length` before reading, or while reading).
pub async fn read(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return Err(ApiError::payload_too_large(limit));
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => {
            Err(ApiError::payload_too_large(limit))
        }
        Err(error) => Err(ApiError::bad_request(
            "body_read_failed",
            format!("could not read the request body: {error}"),
        )),
    }
}
