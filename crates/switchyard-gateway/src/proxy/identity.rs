//! Identity: the API key → caller, priority (clamped), purpose and the client's retry count.
//! Unknown keys are refused (401/403) before the body is read.

use http::HeaderMap;
use switchyard_core::RequestTags;

use crate::error::ApiError;
use crate::state::Stack;

pub(super) fn resolve(stack: &Stack, client_headers: &HeaderMap) -> Result<RequestTags, ApiError> {
    stack
        .admission
        .resolve(client_headers)
        .map_err(ApiError::refused)
}
