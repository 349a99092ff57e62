//! The client listener's service: the router, but for the two inference routes that carry
//! nearly every request, which are served directly — the lifecycle guard, the handler, and
//! the `content-length` the router's top-level route sets — with the same answer. The
//! router's path match, its boxed middleware and handler services and their futures cost
//! a few thousand instructions a request, as much as several stages of the proxy.

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::from_fn_with_state;
use axum::response::Response;
use futures_util::future::Either;
use http::{HeaderValue, Method, header};
use http_body::Body as _;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use tower::ServiceExt;

use super::{inference, router};
use crate::lifecycle::Lifecycle;
use crate::lifecycle::middleware::{guard, guarded};
use crate::openai::Route;
use crate::state::SharedState;

/// What a listener serves each request with.
#[derive(Clone)]
pub struct App {
    router: Router,
    direct: Option<Arc<Direct>>,
}

/// The state the directly served routes read.
struct Direct {
    state: SharedState,
    lifecycle: Arc<Lifecycle>,
}

impl App {
    /// The client routes ([`router`]) behind the lifecycle guard; chat and completions
    /// served directly.
    pub fn client(state: SharedState, lifecycle: Arc<Lifecycle>) -> Self {
        let router =
            router(Arc::clone(&state)).layer(from_fn_with_state(Arc::clone(&lifecycle), guard));
        Self {
            router,
            direct: Some(Arc::new(Direct { state, lifecycle })),
        }
    }

    /// `router` alone, every request through it (the separate metrics listener).
    pub fn router_only(router: Router) -> Self {
        Self {
            router,
            direct: None,
        }
    }

    /// Serves one request.
    pub fn call(
        &self,
        request: Request,
    ) -> impl Future<Output = Result<Response, Infallible>> + Send + use<> {
        match self.direct.as_ref().zip(direct_route(&request)) {
            Some((direct, route)) => {
                let direct = Arc::clone(direct);
                Either::Right(async move { Ok(direct.serve(route, request).await) })
            }
            None => Either::Left(self.router.clone().oneshot(request)),
        }
    }
}

/// The inference route a request goes to when the router would send it to the chat or
/// completions handler: a `POST` to exactly that path (the router matches the path as
/// sent, without its query, and a static route wins over `/v1/{*rest}`).
fn direct_route(request: &Request) -> Option<Route> {
    if request.method() != Method::POST {
        return None;
    }
    match request.uri().path() {
        "/v1/chat/completions" => Some(Route::ChatCompletions),
        "/v1/completions" => Some(Route::Completions),
        _ => None,
    }
}

impl Direct {
    async fn serve(&self, route: Route, request: Request) -> Response {
        let state = Arc::clone(&self.state);
        let mut response = guarded(&self.lifecycle, request, move |request| async move {
            match route {
                Route::Completions => inference::completions(State(state), request).await,
                _ => inference::chat_completions(State(state), request).await,
            }
        })
        .await;
        set_content_length(&mut response);
        response
    }
}

/// What the router's top-level route adds to every answer: a `content-length` from the
/// body's exact size, unless the answer has one.
fn set_content_length(response: &mut Response) {
    if response.headers().contains_key(header::CONTENT_LENGTH) {
        return;
    }
    if let Some(size) = response.body().size_hint().exact() {
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    }
}

#[cfg(test)]
#[path = "app_tests.rs"]
mod tests;
