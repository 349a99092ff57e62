use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::HeaderMap;

use crate::openai::Route;
use crate::proxy;
use crate::state::SharedState;

pub async fn chat_completions(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    proxy::handle(state, Route::ChatCompletions, headers, body).await
}

pub async fn completions(
    State(state): State<SharedState>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    proxy::handle(state, Route::Completions, headers, body).await
}
