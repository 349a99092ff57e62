//! OpenAI-shaped error responses.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

/// An error answered to the client as `{"error": {message, type, param, code}}`.
#[derive(Debug, thiserror::Error)]
#[error("{status}: {message}")]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
    kind: &'static str,
    code: Option<&'static str>,
}

impl ApiError {
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            code: None,
        }
    }

    pub(crate) fn model_not_found(requested: &str) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            message: format!("The model `{requested}` does not exist."),
            kind: "invalid_request_error",
            code: Some("model_not_found"),
        }
    }

    /// The `error` fault's answer.
    pub(crate) fn injected_failure() -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: "injected fault: internal server error".to_owned(),
            kind: "server_error",
            code: Some("internal_error"),
        }
    }

    /// The `unavailable` fault's answer: what an engine that is restarting or refusing
    /// work sends.
    pub(crate) fn injected_unavailable() -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "injected fault: service unavailable".to_owned(),
            kind: "server_error",
            code: Some("service_unavailable"),
        }
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: message.into(),
            kind: "server_error",
            code: None,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": null,
                "code": self.code,
            }
        });
        (self.status, Json(body)).into_response()
    }
}
