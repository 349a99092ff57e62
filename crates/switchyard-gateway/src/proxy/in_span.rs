//! A future run inside a span, as `tracing::Instrument` runs it — entered on every poll, and
//! dropped inside it while unfinished — except that a finished future is dropped at once
//! rather than once more inside the span when its owner drops it: every request's span is
//! entered and left on each poll, and that last time is a fifth of those trips for nothing.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

/// Runs `future` inside `span`.
pub(super) async fn in_span<F: Future>(span: tracing::Span, future: F) -> F::Output {
    let slot = std::pin::pin!(Some(future));
    let mut running = Running { span: &span, slot };
    std::future::poll_fn(|cx| running.poll(cx)).await
}

struct Running<'a, F> {
    span: &'a tracing::Span,
    /// The future until it finishes.
    slot: Pin<&'a mut Option<F>>,
}

impl<F: Future> Running<'_, F> {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _entered = self.span.enter();
        // Polled only until it is ready, by `in_span`.
        let Some(future) = self.slot.as_mut().as_pin_mut() else {
            return Poll::Pending;
        };
        let output = ready!(future.poll(cx));
        self.slot.set(None);
        Poll::Ready(output)
    }
}

impl<F> Drop for Running<'_, F> {
    fn drop(&mut self) {
        if self.slot.is_some() {
            let _entered = self.span.enter();
            self.slot.set(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing::Subscriber;
    use tracing::span::{Attributes, Id};
    use tracing_subscriber::layer::{Context as LayerContext, Layer, SubscriberExt};

    /// Records span entries and the span current when a value is dropped.
    #[derive(Clone, Default)]
    struct Trips(Arc<Mutex<Vec<String>>>);

    impl<S: Subscriber> Layer<S> for Trips {
        fn on_new_span(&self, _: &Attributes<'_>, _: &Id, _: LayerContext<'_, S>) {}
        fn on_enter(&self, _: &Id, _: LayerContext<'_, S>) {
            self.0.lock().unwrap().push("enter".into());
        }
        fn on_exit(&self, _: &Id, _: LayerContext<'_, S>) {
            self.0.lock().unwrap().push("exit".into());
        }
    }

    /// Notes whether its drop ran inside a span.
    struct Witness(Trips);

    impl Drop for Witness {
        fn drop(&mut self) {
            let inside = !tracing::Span::current().is_none();
            (self.0)
                .0
                .lock()
                .unwrap()
                .push(format!("drop inside={inside}"));
        }
    }

    async fn pending_once(witness: Witness) -> u32 {
        let _witness = witness;
        let mut first = true;
        std::future::poll_fn(|cx| {
            if std::mem::take(&mut first) {
                cx.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(7)
            }
        })
        .await
    }

    #[test]
    fn a_future_runs_and_is_dropped_inside_its_span() {
        let trips = Trips::default();
        let subscriber = tracing_subscriber::registry().with(trips.clone());
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("request");
            let finished = futures_util::FutureExt::now_or_never(in_span(
                span.clone(),
                pending_once(Witness(trips.clone())),
            ));
            assert_eq!(finished, None, "pending once");
            let mut run = Box::pin(in_span(span.clone(), pending_once(Witness(trips.clone()))));
            let mut cx = Context::from_waker(std::task::Waker::noop());
            assert_eq!(run.as_mut().poll(&mut cx), Poll::Pending);
            assert_eq!(run.as_mut().poll(&mut cx), Poll::Ready(7));
            drop(run);
        });
        let trips = trips.0.lock().unwrap().clone();
        assert_eq!(
            trips,
            [
                // Dropped unfinished: inside the span.
                "enter",
                "exit",
                "enter",
                "drop inside=true",
                "exit",
                // Finished: dropped inside the poll that finished it, and no trip after.
                "enter",
                "exit",
                "enter",
                "drop inside=true",
                "exit",
            ]
        );
    }
}
