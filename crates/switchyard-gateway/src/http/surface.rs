//! Handlers for the surface beyond chat and completions. Each forwards to the worker at the
//! client's own path and query, so vLLM's aliases (`/rerank`, `/v2/rerank`, `/score`) reach
//! the same endpoint they name; other `/v1/*` paths pass through on `POST`, `GET` and
//! `DELETE`. (These routes are not nested, so the request URI is the client's own.)

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method};

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
    proxy::handle_at(state, route, &Method::POST, path, headers, body).await
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

/// `GET` and `DELETE` on other `/v1/*` paths (files, batches, stored responses): passed
/// through with the client's method, path and query, admitted like any request, to a worker
/// of the model named by the `model` query parameter, else of the fleet's only model. Such
/// resources live on one engine: with several workers per model, only the one that made a
/// resource knows it. Other methods have no OpenAI meaning there.
pub async fn passthrough_bodiless(
    State(state): State<SharedState>,
    method: Method,
    uri: http::Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if method != Method::GET && method != Method::DELETE {
        return ApiError::not_found(
            "unknown_route",
            format!(
                "no route for {method} {}: `/v1/*` passes through POST, GET and DELETE",
                uri.path()
            ),
        )
        .into_response();
    }
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    proxy::handle_at(state, Route::Passthrough, &method, path, headers, body).await
}
