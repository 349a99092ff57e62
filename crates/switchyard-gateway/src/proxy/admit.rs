//! Admission: budget gate, token bucket, concurrency gate and the priority queue. The permit
//! is held to the end of the response and settled there with the real usage; a request that
//! was never served gives it back unspent.

use switchyard_admission::AdmissionPermit;
use switchyard_core::RequestTags;
use tracing::Instrument;

use super::context::RequestContext;
use crate::error::ApiError;
use crate::openai::ParsedRequest;

/// Output tokens assumed for the budget estimate when a request sets no `max_tokens`.
const DEFAULT_OUTPUT_ESTIMATE: u64 = 256;

pub(super) async fn admit(
    ctx: &RequestContext<'_>,
    tags: &RequestTags,
    request: &ParsedRequest,
) -> Result<AdmissionPermit, ApiError> {
    let estimate = request.estimated_tokens(DEFAULT_OUTPUT_ESTIMATE);
    let span = tracing::debug_span!(
        "admit",
        priority = tags.priority.as_str(),
        estimated_tokens = estimate
    );
    ctx.stack
        .admission
        .admit(tags, estimate)
        .instrument(span)
        .await
        .map_err(ApiError::refused)
}

/// Nothing was served: nothing is spent; a worker-side failure counts against capacity.
pub(super) fn unserved(mut permit: AdmissionPermit, error: ApiError) -> ApiError {
    if error.status.is_server_error() {
        permit.mark_failed();
    }
    permit.settle(0);
    error
}
