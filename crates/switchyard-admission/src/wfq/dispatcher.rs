//! Dispatch slots shared by the whole gateway. A request takes a free slot at once; when none
//! is free it waits in the priority queues and the WFQ discipline picks who gets the next
//! freed slot. Waiting is bounded and cancellation-safe: a waiter that is dropped leaves the
//! queue, and a slot granted to it at the last moment is passed on, never lost.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::Priority;
use tokio::sync::oneshot;

use super::discipline::WfqCore;
use crate::metrics::QueueGauges;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QueueRefusal {
    /// The class is paused (P2 while the gateway is overloaded).
    Paused,
    /// `max_queued` waiters already.
    Full,
    /// No slot within the class's queue timeout.
    Timeout,
}

/// Occupancy, for the snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DispatchStats {
    pub(crate) in_use: usize,
    pub(crate) capacity: usize,
    pub(crate) queued: [usize; 3],
    pub(crate) p2_paused: bool,
}

struct DispatchState {
    core: WfqCore,
    grants: HashMap<u64, oneshot::Sender<()>>,
    in_use: usize,
    capacity: usize,
    max_queued: usize,
    next_id: u64,
}

pub(crate) struct Dispatcher {
    state: Mutex<DispatchState>,
    gauges: QueueGauges,
}

/// One dispatch slot; dropping it frees the slot for the next waiter WFQ picks.
pub(crate) struct DispatchSlot {
    dispatcher: Arc<Dispatcher>,
}

impl Drop for DispatchSlot {
    fn drop(&mut self) {
        self.dispatcher.release();
    }
}

/// A queued request; if dropped before its grant is taken, it leaves the queue or hands on
/// the slot it was granted.
struct Waiting {
    dispatcher: Arc<Dispatcher>,
    id: u64,
    grant: oneshot::Receiver<()>,
    taken: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.taken {
            self.dispatcher.abandon(self.id);
        }
    }
}

impl Dispatcher {
    pub(crate) fn new(
        capacity: usize,
        max_queued: usize,
        weights: [f64; 3],
        minimums: [f64; 3],
        gauges: QueueGauges,
    ) -> Arc<Self> {
        let dispatcher = Arc::new(Self {
            state: Mutex::new(DispatchState {
                core: WfqCore::new(weights, minimums),
                grants: HashMap::new(),
                in_use: 0,
                capacity: capacity.max(1),
                max_queued,
                next_id: 0,
            }),
            gauges,
        });
        dispatcher.publish(&dispatcher.state.lock());
        dispatcher
    }

    pub(crate) async fn acquire(
        self: &Arc<Self>,
        class: Priority,
        caller: Arc<str>,
        timeout: Duration,
    ) -> Result<DispatchSlot, QueueRefusal> {
        let mut waiting = {
            let mut state = self.state.lock();
            if state.core.is_paused(class) {
                return Err(QueueRefusal::Paused);
            }
            // Whenever a slot is free no eligible waiter exists (every release dispatches),
            // so taking it cannot jump the queue.
            if state.in_use < state.capacity {
                state.in_use += 1;
                self.publish(&state);
                return Ok(DispatchSlot {
                    dispatcher: self.clone(),
                });
            }
            if state.core.total() >= state.max_queued {
                return Err(QueueRefusal::Full);
            }
            let id = state.next_id;
            state.next_id += 1;
            let (sender, grant) = oneshot::channel();
            state.grants.insert(id, sender);
            state.core.push(id, class, caller);
            self.publish(&state);
            Waiting {
                dispatcher: self.clone(),
                id,
                grant,
                taken: false,
            }
        };
        match tokio::time::timeout(timeout, &mut waiting.grant).await {
            Ok(Ok(())) => {
                waiting.taken = true;
                Ok(DispatchSlot {
                    dispatcher: self.clone(),
                })
            }
            // Timed out (or, impossibly, the sender vanished): `waiting` drops and leaves.
            Ok(Err(_)) | Err(_) => Err(QueueRefusal::Timeout),
        }
    }

    /// Changes the number of slots (the recovery ramp). Shrinking never preempts: fewer
    /// slots are handed out until in-use falls below the new capacity.
    pub(crate) fn set_capacity(&self, capacity: usize) {
        let mut state = self.state.lock();
        state.capacity = capacity.max(1);
        Self::dispatch(&mut state);
        self.publish(&state);
    }

    pub(crate) fn set_paused(&self, class: Priority, paused: bool) {
        let mut state = self.state.lock();
        state.core.set_paused(class, paused);
        Self::dispatch(&mut state);
        self.publish(&state);
    }

    pub(crate) fn stats(&self) -> DispatchStats {
        let state = self.state.lock();
        DispatchStats {
            in_use: state.in_use,
            capacity: state.capacity,
            queued: Priority::ALL.map(|class| state.core.len(class)),
            p2_paused: state.core.is_paused(Priority::P2),
        }
    }

    fn release(&self) {
        let mut state = self.state.lock();
        state.in_use = state.in_use.saturating_sub(1);
        Self::dispatch(&mut state);
        self.publish(&state);
    }

    fn abandon(&self, id: u64) {
        let mut state = self.state.lock();
        if state.core.remove(id) {
            state.grants.remove(&id);
        } else {
            // Granted under this lock before the waiter could take it: pass the slot on.
            state.in_use = state.in_use.saturating_sub(1);
            Self::dispatch(&mut state);
        }
        self.publish(&state);
    }

    /// Hands free slots to waiters in WFQ order.
    fn dispatch(state: &mut DispatchState) {
        while state.in_use < state.capacity {
            let Some((id, _)) = state.core.pop() else {
                break;
            };
            let Some(sender) = state.grants.remove(&id) else {
                continue;
            };
            if sender.send(()).is_ok() {
                state.in_use += 1;
            }
        }
    }

    fn publish(&self, state: &DispatchState) {
        for class in Priority::ALL {
            self.gauges.queue_depth[class.index()].set(state.core.len(class) as i64);
        }
        self.gauges.in_use.set(state.in_use as i64);
        self.gauges.capacity.set(state.capacity as i64);
    }
}

#[cfg(test)]
mod tests;
