//! Handlers for the surface beyond chat and completions. Each forwards to the worker at the
//! client's own path and query, so vLLM's aliases (`/rerank`, `/v2/rerank`, `/score`) reach
//! the same endpoint they name. (These routes are not nested, so the request URI is the
//! client's own.)

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::HeaderMap;

use crate::error::ApiError;
use crate::openai::Route;
use crate::proxy;
use crate::state::SharedState;

async fn forward(
    state: SharedState,
    route: Route,
    uri: &http::Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let path = uri.path_and_query().map_or(route.path(), |p| p.as_str());
    proxy::handle_at(state, route, path, headers, body).await
}

macro_rules! surface_handler {
    ($name:ident, $route:expr) => {
        pub async fn $name(
            State(state): State<SharedState>,
            uri: http::Uri,
            headers: HeaderMap,
            body: Body,
        ) -> Response {
            forward(state, $route, &uri, headers, body).await
        }
    };
}

surface_handler!(embeddings, Route::Embeddings);
surface_handler!(tokenize, Route::Tokenize);
surface_handler!(detokenize, Route::Detokenize);
surface_handler!(rerank, Route::Rerank);
surface_handler!(score, Route::Score);
surface_handler!(responses, Route::Responses);
surface_handler!(passthrough, Route::Passthrough);

/// Other methods on `/v1/*`: nothing there can be routed by model.
pub async fn passthrough_other_method(method: http::Method, uri: http::Uri) -> ApiError {
    ApiError::not_found(
        "unknown_route",
        format!(
            "no route for {method} {}: only POST requests that name a model are passed through",
            uri.path()
        ),
    )
}
