//! Identity: the API key → caller, priority (clamped), purpose and the client's retry count.
//! Unknown keys are refused (401/403) before the body is read.

use switchyard_core::RequestTags;

use super::context::RequestContext;
use crate::error::ApiError;

pub(super) fn resolve(ctx: &RequestContext<'_>) -> Result<RequestTags, ApiError> {
    let tags = ctx
        .stack
        .admission
        .resolve(ctx.client_headers)
        .map_err(ApiError::refused)?;
    tracing::Span::current().record("caller", &*tags.caller);
    Ok(tags)
}
