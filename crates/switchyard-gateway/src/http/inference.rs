use axum::extract::{Request, State};
use axum::response::Response;

use crate::openai::Route;
use crate::proxy;
use crate::state::SharedState;

// The whole request is taken and split rather than extracting `HeaderMap`, which clones
// every header of every request.

pub async fn chat_completions(State(state): State<SharedState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    proxy::handle(state, Route::ChatCompletions, parts.headers, body).await
}

pub async fn completions(State(state): State<SharedState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    proxy::handle(state, Route::Completions, parts.headers, body).await
}
