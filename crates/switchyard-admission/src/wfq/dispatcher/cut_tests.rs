//! P0's guarantee against capacity cuts (recovery ramp, degradation), on paused time.

use super::*;
use crate::metrics::QueueGauges;
use tokio::task::yield_now;

const LONG: Duration = Duration::from_secs(3600);

fn dispatcher(capacity: usize) -> Arc<Dispatcher> {
    Dispatcher::new(
        capacity,
        1_000,
        [5.0, 2.0, 1.0],
        [0.4, 0.15, 0.05],
        QueueGauges::detached(),
    )
}

async fn settle() {
    for _ in 0..10 {
        yield_now().await;
    }
}

async fn hold(dispatcher: &Arc<Dispatcher>, class: Priority, n: usize) -> Vec<DispatchSlot> {
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(
            dispatcher
                .acquire(class, Arc::from("h"), LONG)
                .await
                .unwrap(),
        );
    }
    held
}

/// A queued request of `class` that reports when it gets a slot, then holds it.
fn waiter(
    dispatcher: &Arc<Dispatcher>,
    class: Priority,
) -> tokio::task::JoinHandle<Result<(), QueueRefusal>> {
    let dispatcher = dispatcher.clone();
    tokio::spawn(async move {
        let slot = dispatcher.acquire(class, Arc::from("w"), LONG).await?;
        tokio::time::sleep(LONG).await;
        drop(slot);
        Ok(())
    })
}

#[test]
fn guarantees_round_up_to_whole_slots() {
    let guarantees = |capacity| {
        let dispatcher = dispatcher(capacity);
        let state = dispatcher.state.lock();
        Priority::ALL.map(|class| state.guaranteed(class))
    };
    // 40 % of 6 is 2.4 slots: P0 is guaranteed 3, never rounded down to 2.
    assert_eq!(guarantees(6), [3, 1, 1]);
    // Exact products stay exact (0.4 × 5 = 2), whatever the float error.
    assert_eq!(guarantees(5), [2, 1, 1]);
    assert_eq!(guarantees(10), [4, 2, 1]);
    // Rounded up all three would ask for 4 of 4: still fits.
    assert_eq!(guarantees(4), [2, 1, 1]);
    // Rounded up they would not fit in 2 or 1 slots: nearest slot instead, so a one-slot
    // gateway keeps its weighted order.
    assert_eq!(guarantees(2), [1, 0, 0]);
    assert_eq!(guarantees(1), [0, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn p0_is_admitted_past_a_capacity_cut_up_to_its_full_capacity_share() {
    // Full capacity 6 (P0 guaranteed 3); the recovery ramp cuts it to 2, both held by P1.
    let dispatcher = dispatcher(6);
    dispatcher.set_capacity(2);
    let _p1 = hold(&dispatcher, Priority::P1, 2).await;
    // P0 gets a slot at once although the cut is reached: the gateway goes to 3 = P0's
    // guarantee, never further.
    let first = dispatcher
        .acquire(Priority::P0, Arc::from("vip"), Duration::from_millis(1))
        .await;
    assert!(first.is_ok(), "P0 admitted past the cut");
    assert_eq!(dispatcher.stats().in_use, 3);
    let second = waiter(&dispatcher, Priority::P0);
    let p1 = waiter(&dispatcher, Priority::P1);
    settle().await;
    assert_eq!(
        dispatcher.stats().queued,
        [1, 1, 0],
        "3 in flight is the ceiling"
    );
    assert!(!second.is_finished() && !p1.is_finished());
    drop(first);
    settle().await;
    // The freed slot goes to P0 (below its guarantee); P1 stays queued, above the cut.
    let stats = dispatcher.stats();
    assert_eq!(stats.in_use_by_class, [1, 2, 0]);
    assert_eq!(stats.queued, [0, 1, 0]);
    second.abort();
    p1.abort();
}

#[tokio::test(start_paused = true)]
async fn past_the_cut_p0_holds_at_most_its_guarantee_and_others_wait_for_the_cut() {
    let dispatcher = dispatcher(6);
    dispatcher.set_capacity(2);
    // P0 alone fills its guarantee of 3 past the cut of 2…
    let p0 = hold(&dispatcher, Priority::P0, 3).await;
    assert_eq!(dispatcher.stats().in_use, 3);
    // …and a fourth P0 waits, as does P1: nothing runs past max(cut, P0's guarantee).
    let fourth = waiter(&dispatcher, Priority::P0);
    let p1 = waiter(&dispatcher, Priority::P1);
    settle().await;
    assert_eq!(dispatcher.stats().queued, [1, 1, 0]);
    // Back to full capacity: both are dispatched.
    dispatcher.set_capacity(6);
    settle().await;
    let stats = dispatcher.stats();
    assert_eq!((stats.in_use, stats.queued), (5, [0, 0, 0]));
    drop(p0);
    fourth.abort();
    p1.abort();
}

#[tokio::test(start_paused = true)]
async fn without_a_cut_p0_gets_no_slot_beyond_capacity() {
    let dispatcher = dispatcher(6);
    let _p1 = hold(&dispatcher, Priority::P1, 6).await;
    let refused = dispatcher
        .acquire(Priority::P0, Arc::from("vip"), Duration::from_millis(5))
        .await;
    assert_eq!(refused.err(), Some(QueueRefusal::Timeout));
    assert_eq!(dispatcher.stats().in_use, 6);
}
