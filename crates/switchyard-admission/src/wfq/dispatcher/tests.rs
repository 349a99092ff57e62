use super::*;
use crate::metrics::QueueGauges;
use std::time::Duration;
use tokio::sync::mpsc;
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

fn caller(name: &str) -> Arc<str> {
    Arc::from(name)
}

/// Lets every spawned task run until it blocks.
async fn settle() {
    for _ in 0..10 {
        yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn free_slots_are_taken_at_once_and_a_full_gateway_times_out() {
    let dispatcher = dispatcher(2);
    let a = dispatcher
        .acquire(Priority::P1, caller("a"), LONG)
        .await
        .unwrap();
    let _b = dispatcher
        .acquire(Priority::P1, caller("a"), LONG)
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let refused = dispatcher
        .acquire(Priority::P1, caller("a"), Duration::from_secs(2))
        .await;
    assert_eq!(refused.err(), Some(QueueRefusal::Timeout));
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    assert_eq!(
        dispatcher.stats().queued,
        [0, 0, 0],
        "the timed-out waiter left"
    );
    drop(a);
    assert_eq!(dispatcher.stats().in_use, 1);
}

#[tokio::test(start_paused = true)]
async fn a_freed_slot_goes_to_the_waiter_wfq_picks() {
    let dispatcher = dispatcher(1);
    let held = dispatcher
        .acquire(Priority::P0, caller("x"), LONG)
        .await
        .unwrap();
    let (served, mut order) = mpsc::unbounded_channel();
    for class in [Priority::P2, Priority::P1, Priority::P0] {
        let dispatcher = dispatcher.clone();
        let served = served.clone();
        tokio::spawn(async move {
            let slot = dispatcher.acquire(class, caller("c"), LONG).await.unwrap();
            served.send(class).unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
            drop(slot);
        });
        settle().await;
    }
    assert_eq!(dispatcher.stats().queued, [1, 1, 1]);
    drop(held);
    let mut classes = Vec::new();
    for _ in 0..3 {
        classes.push(order.recv().await.unwrap());
    }
    assert_eq!(classes, vec![Priority::P0, Priority::P1, Priority::P2]);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_leaves_the_queue() {
    let dispatcher = dispatcher(1);
    let held = dispatcher
        .acquire(Priority::P1, caller("a"), LONG)
        .await
        .unwrap();
    let waiter = {
        let dispatcher = dispatcher.clone();
        tokio::spawn(async move {
            dispatcher
                .acquire(Priority::P1, caller("b"), LONG)
                .await
                .is_ok()
        })
    };
    settle().await;
    assert_eq!(dispatcher.stats().queued, [0, 1, 0]);
    waiter.abort();
    settle().await;
    assert_eq!(dispatcher.stats().queued, [0, 0, 0]);
    drop(held);
    assert_eq!(
        dispatcher.stats().in_use,
        0,
        "nobody left to hand the slot to"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slot_granted_to_a_waiter_that_is_then_dropped_is_passed_on() {
    let dispatcher = dispatcher(1);
    let held = dispatcher
        .acquire(Priority::P0, caller("a"), LONG)
        .await
        .unwrap();
    let spawn_waiter = |class| {
        let dispatcher = dispatcher.clone();
        tokio::spawn(async move {
            let _slot = dispatcher.acquire(class, caller("w"), LONG).await.unwrap();
            tokio::time::sleep(LONG).await;
        })
    };
    let doomed = spawn_waiter(Priority::P0);
    settle().await;
    let next = spawn_waiter(Priority::P1);
    settle().await;
    // Grant the slot to `doomed`, then cancel it before it runs again.
    drop(held);
    doomed.abort();
    settle().await;
    let stats = dispatcher.stats();
    assert_eq!(
        (stats.in_use, stats.queued),
        (1, [0, 0, 0]),
        "the slot went on to `next`"
    );
    next.abort();
    settle().await;
    assert_eq!(dispatcher.stats().in_use, 0, "no slot lost");
}

#[tokio::test(start_paused = true)]
async fn heavy_cancellation_loses_no_slots() {
    let dispatcher = dispatcher(4);
    let mut tasks = Vec::new();
    for i in 0..200u64 {
        let dispatcher = dispatcher.clone();
        let class = Priority::ALL[(i % 3) as usize];
        tasks.push(tokio::spawn(async move {
            let timeout = Duration::from_millis(50 + (i * 37) % 500);
            if let Ok(_slot) = dispatcher
                .acquire(class, caller(&format!("c{}", i % 7)), timeout)
                .await
            {
                tokio::time::sleep(Duration::from_millis((i * 13) % 100)).await;
            }
        }));
    }
    for (i, task) in tasks.iter().enumerate() {
        if i % 5 == 0 {
            task.abort();
        }
        if i % 20 == 0 {
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let stats = dispatcher.stats();
    assert_eq!((stats.in_use, stats.queued), (0, [0, 0, 0]));
    let slots: Vec<_> = futures_free_acquire(&dispatcher, 4).await;
    assert_eq!(slots.len(), 4, "all four slots are still there");
}

async fn futures_free_acquire(dispatcher: &Arc<Dispatcher>, n: usize) -> Vec<DispatchSlot> {
    let mut slots = Vec::new();
    for _ in 0..n {
        slots.push(
            dispatcher
                .acquire(Priority::P1, caller("z"), Duration::ZERO)
                .await
                .unwrap(),
        );
    }
    slots
}

#[tokio::test(start_paused = true)]
async fn a_paused_class_is_refused_and_its_waiters_resume_after() {
    let dispatcher = dispatcher(1);
    let held = dispatcher
        .acquire(Priority::P1, caller("a"), LONG)
        .await
        .unwrap();
    let queued_p2 = {
        let dispatcher = dispatcher.clone();
        tokio::spawn(async move {
            dispatcher
                .acquire(Priority::P2, caller("batch"), LONG)
                .await
                .is_ok()
        })
    };
    settle().await;
    dispatcher.set_paused(Priority::P2, true);
    assert_eq!(
        dispatcher
            .acquire(Priority::P2, caller("batch"), LONG)
            .await
            .err(),
        Some(QueueRefusal::Paused)
    );
    drop(held);
    settle().await;
    assert_eq!(
        dispatcher.stats().in_use,
        0,
        "the free slot is not given to paused P2"
    );
    assert_eq!(dispatcher.stats().queued, [0, 0, 1]);
    dispatcher.set_paused(Priority::P2, false);
    assert!(queued_p2.await.unwrap(), "resumed");
}

#[tokio::test(start_paused = true)]
async fn raising_capacity_wakes_waiters_and_a_full_queue_refuses() {
    let dispatcher = Dispatcher::new(
        1,
        2,
        [5.0, 2.0, 1.0],
        [0.4, 0.15, 0.05],
        QueueGauges::detached(),
    );
    let _held = dispatcher
        .acquire(Priority::P1, caller("a"), LONG)
        .await
        .unwrap();
    let mut waiters = Vec::new();
    for _ in 0..2 {
        let dispatcher = dispatcher.clone();
        waiters.push(tokio::spawn(async move {
            let slot = dispatcher.acquire(Priority::P1, caller("b"), LONG).await;
            tokio::time::sleep(LONG).await;
            slot.is_ok()
        }));
        settle().await;
    }
    assert_eq!(
        dispatcher
            .acquire(Priority::P1, caller("c"), LONG)
            .await
            .err(),
        Some(QueueRefusal::Full),
        "nobody less urgent to shed"
    );
    dispatcher.set_capacity(3);
    settle().await;
    let stats = dispatcher.stats();
    assert_eq!((stats.in_use, stats.queued), (3, [0, 0, 0]));
    dispatcher.set_capacity(1);
    assert_eq!(dispatcher.stats().in_use, 3, "shrinking never preempts");
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_sheds_its_newest_least_urgent_waiter_for_a_more_urgent_one() {
    let dispatcher = Dispatcher::new(
        1,
        3,
        [5.0, 2.0, 1.0],
        [0.4, 0.15, 0.05],
        QueueGauges::detached(),
    );
    let held = dispatcher
        .acquire(Priority::P1, caller("a"), LONG)
        .await
        .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    for (i, class) in [Priority::P2, Priority::P1, Priority::P2]
        .into_iter()
        .enumerate()
    {
        let dispatcher = dispatcher.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let slot = dispatcher.acquire(class, caller("w"), LONG).await;
            tx.send((i, slot.as_ref().err().copied())).unwrap();
            tokio::time::sleep(LONG).await;
            drop(slot);
        });
        settle().await;
    }
    assert_eq!(dispatcher.stats().queued, [0, 1, 2]);
    let p0 = tokio::spawn({
        let dispatcher = dispatcher.clone();
        async move {
            dispatcher
                .acquire(Priority::P0, caller("vip"), LONG)
                .await
                .is_ok()
        }
    });
    settle().await;
    assert_eq!(
        rx.try_recv().unwrap(),
        (2, Some(QueueRefusal::Shed)),
        "the newest P2 made room"
    );
    assert_eq!(dispatcher.stats().queued, [1, 1, 1]);
    drop(held);
    assert!(p0.await.unwrap(), "P0 got the freed slot");
}

/// `n` slots of `class`, held until dropped.
async fn hold(dispatcher: &Arc<Dispatcher>, class: Priority, n: usize) -> Vec<DispatchSlot> {
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(dispatcher.acquire(class, caller("h"), LONG).await.unwrap());
    }
    held
}

#[tokio::test(start_paused = true)]
async fn a_class_below_its_guaranteed_slots_is_served_first() {
    // 10 slots: P0 is guaranteed 4 (40 %), P1 2 (15 % rounded), P2 1 (5 % rounded up).
    let dispatcher = dispatcher(10);
    let mut p2 = hold(&dispatcher, Priority::P2, 10).await;
    assert_eq!(
        Priority::ALL.map(|class| dispatcher.state.lock().guaranteed(class)),
        [4, 2, 1]
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    for class in [Priority::P2, Priority::P2, Priority::P1, Priority::P0] {
        let dispatcher = dispatcher.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let slot = dispatcher.acquire(class, caller("w"), LONG).await.unwrap();
            tx.send(class).unwrap();
            tokio::time::sleep(LONG).await;
            drop(slot);
        });
        settle().await;
    }
    let mut order = Vec::new();
    for _ in 0..3 {
        p2.pop();
        settle().await;
        order.push(rx.try_recv().unwrap());
    }
    assert_eq!(
        order,
        [Priority::P0, Priority::P1, Priority::P2],
        "guarantees first, most urgent first"
    );
}

fn assert_about(actual: Option<Duration>, millis: u64) {
    let actual = actual.expect("an estimate").as_secs_f64() * 1e3;
    assert!(
        (actual - millis as f64).abs() < 1.0,
        "{actual} ms, not {millis} ms"
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_that_would_wait_past_its_limit_is_refused_on_arrival() {
    // 5 slots: P0 is guaranteed 2 of them.
    let dispatcher = dispatcher(5);
    assert_eq!(dispatcher.drain_time(Priority::P1), None, "no estimate yet");
    // Teach the dispatcher that a slot is held 400 ms.
    for _ in 0..2 {
        let slots = hold(&dispatcher, Priority::P1, 5).await;
        tokio::time::sleep(Duration::from_millis(400)).await;
        drop(slots);
    }
    assert_about(dispatcher.stats().service_time, 400);
    let _busy = hold(&dispatcher, Priority::P1, 5).await;
    // Only P1 backlogged: it gets all 5 slots, so each waiter adds 80 ms.
    let limit = Duration::from_millis(450);
    let mut waiters = Vec::new();
    for _ in 0..5 {
        let dispatcher = dispatcher.clone();
        waiters.push(tokio::spawn(async move {
            dispatcher
                .acquire(Priority::P1, caller("w"), limit)
                .await
                .err()
        }));
        settle().await;
    }
    assert_eq!(
        dispatcher.stats().queued,
        [0, 5, 0],
        "5 × 80 ms fits in 450 ms"
    );
    let started = tokio::time::Instant::now();
    let refused = dispatcher.acquire(Priority::P1, caller("w"), limit).await;
    assert_eq!(started.elapsed(), Duration::ZERO, "refused at once");
    match refused.err() {
        Some(QueueRefusal::Deadline(wait)) => assert_about(Some(wait), 480),
        other => panic!("expected a deadline refusal, got {other:?}"),
    }
    assert_about(dispatcher.drain_time(Priority::P1), 400);
    // P0 holds none of its 2 guaranteed slots: it waits for the next one, never refused
    // on an estimate.
    let p0 = dispatcher
        .acquire(Priority::P0, caller("vip"), Duration::from_millis(1))
        .await;
    assert_eq!(p0.err(), Some(QueueRefusal::Timeout), "it waited");
    drop(waiters);
}
