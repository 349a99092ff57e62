use axum::Json;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode};
use serde_json::json;

/// An error answered in the OpenAI shape `{"error":{"message","type","code"}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub code: &'static str,
    pub message: String,
    /// Seconds, for 429/503.
    pub retry_after: Option<u64>,
    /// The same advice to the millisecond (`retry-after-ms`, read first by the OpenAI SDKs).
    pub retry_after_ms: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, code: &'static str, message: String) -> Self {
        Self {
            status,
            kind,
            code,
            message,
            retry_after: None,
            retry_after_ms: None,
        }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            code,
            message.into(),
        )
    }

    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            "request_too_large",
            format!("request body exceeds the limit of {limit} bytes"),
        )
    }

    /// 408: the client did not send its request (body) in time.
    pub fn request_timeout(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_request_error",
            "request_timeout",
            message.into(),
        )
    }

    pub fn model_not_found(model: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "model_not_found",
            format!("the model `{model}` is not served by any worker"),
        )
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            code,
            message.into(),
        )
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "invalid_request_error",
            code,
            message.into(),
        )
    }

    pub fn unavailable(code: &'static str, message: impl Into<String>, retry_after: u64) -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service_unavailable",
            code,
            message.into(),
        );
        e.retry_after = Some(retry_after);
        e
    }

    pub fn bad_gateway(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            code,
            message.into(),
        )
    }

    pub fn gateway_timeout(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_error",
            "upstream_timeout",
            message.into(),
        )
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid_api_key",
            message.into(),
        )
    }

    pub fn forbidden(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            code,
            message.into(),
        )
    }

    /// A refusal from the admission layer (identity, budget, rate, concurrency, queue,
    /// recovery), with its status and advice on when to come back.
    pub fn refused(refusal: switchyard_admission::Refusal) -> Self {
        let kind = match refusal.status.as_u16() {
            400 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            429 => "rate_limit_error",
            _ => "service_unavailable",
        };
        let retry_after = refusal.retry_after_header_secs();
        let retry_after_ms = refusal.retry_after_header_millis();
        let mut error = Self::new(
            refusal.status,
            kind,
            refusal.code,
            format!("{} (refused by the {} gate)", refusal.message, refusal.gate),
        );
        error.retry_after = retry_after;
        error.retry_after_ms = retry_after_ms;
        error
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "internal_error",
            message.into(),
        )
    }

    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"message": self.message, "type": self.kind, "code": self.code}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if let Some(millis) = self.retry_after_ms {
            response
                .headers_mut()
                .insert(crate::headers::RETRY_AFTER_MS, HeaderValue::from(millis));
        }
        response
    }
}
