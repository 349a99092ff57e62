//! Dispatch slots shared by the whole gateway. A request takes a free slot at once; when none
//! is free it waits in the priority queues and the WFQ discipline picks who gets the next
//! freed slot. A class holding fewer slots than its guaranteed minimum share is served
//! first; a request whose expected wait is past its class's limit is refused on arrival; a
//! full queue sheds its least urgent newest waiter for a more urgent arrival. Waiting is
//! bounded and cancellation-safe: a waiter that is dropped leaves the queue, and a slot
//! granted to it at the last moment is passed on, never lost.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::Priority;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::deadline::{ServiceTime, expected_wait};
use super::discipline::WfqCore;
use crate::capacity::adaptive::AdaptiveLimit;
use crate::metrics::{DispatchPath, QueueGauges};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QueueRefusal {
    /// The class is paused (P2 while the gateway is overloaded).
    Paused,
    /// `max_queued` waiters already, none less urgent to shed.
    Full,
    /// Shed from a full queue for a more urgent arrival.
    Shed,
    /// The expected wait (given) is past the class's wait limit: refused on arrival.
    Deadline(Duration),
    /// No slot within the class's queue timeout.
    Timeout,
}

impl QueueRefusal {
    /// Refused because there was more demand than dispatch capacity.
    pub(crate) fn is_capacity(self) -> bool {
        !matches!(self, QueueRefusal::Paused)
    }
}

/// How a waiter's turn ended.
enum Grant {
    Slot,
    Shed,
}

/// Occupancy, for the snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DispatchStats {
    pub(crate) in_use: usize,
    pub(crate) in_use_by_class: [usize; 3],
    pub(crate) capacity: usize,
    pub(crate) queued: [usize; 3],
    pub(crate) p2_paused: bool,
    pub(crate) service_time: Option<Duration>,
    pub(crate) adaptive_limit: Option<usize>,
    pub(crate) adaptive_min_rtt: Option<Duration>,
}

struct DispatchState {
    core: WfqCore,
    grants: HashMap<u64, oneshot::Sender<Grant>>,
    in_use: usize,
    in_use_by_class: [usize; 3],
    /// Slots offered now: `base_capacity`, capped by the adaptive limit when it is on.
    capacity: usize,
    /// Slots the recovery ramp and degradation allow.
    base_capacity: usize,
    /// Slots at full capacity (`max_concurrent`): what the guarantees are shares of.
    nominal: usize,
    adaptive: Option<AdaptiveLimit>,
    minimums: [f64; 3],
    max_queued: usize,
    next_id: u64,
    service: ServiceTime,
}

impl DispatchState {
    /// Slots each class is guaranteed: its minimum share of full capacity (the adaptive
    /// limit when lower), rounded up so a share never rounds away to nothing. P0 keeps its
    /// whole guarantee when the recovery ramp or degradation cut capacity below it: the cut
    /// protects recovering workers from bulk traffic, and P0's share of full capacity is
    /// bounded. The other classes are granted theirs within the slots offered now, most
    /// urgent first, so a cut falls on the least urgent first.
    fn guaranteed(&self, class: Priority) -> usize {
        let full = self.nominal.min(
            self.adaptive
                .as_ref()
                .map_or(usize::MAX, AdaptiveLimit::limit),
        );
        let wanted = guarantees(self.minimums, full);
        let mut left = self.capacity;
        for candidate in Priority::ALL {
            let wanted = wanted[candidate.index()];
            let granted = if candidate == Priority::P0 {
                wanted
            } else {
                wanted.min(left)
            };
            if candidate == class {
                return granted;
            }
            left = left.saturating_sub(granted);
        }
        0
    }

    /// Whether a dispatch to `class` fits now: below capacity, or P0 below its guarantee
    /// while the gateway as a whole stays within the larger of the cut and that guarantee.
    fn fits(&self, class: Priority) -> bool {
        if self.in_use < self.capacity {
            return true;
        }
        if class != Priority::P0 {
            return false;
        }
        let guaranteed = self.guaranteed(Priority::P0);
        self.in_use_by_class[Priority::P0.index()] < guaranteed && self.in_use < guaranteed
    }

    fn below_guarantee(&self) -> [bool; 3] {
        Priority::ALL.map(|class| self.in_use_by_class[class.index()] < self.guaranteed(class))
    }

    fn take(&mut self, class: Priority) {
        self.in_use += 1;
        self.in_use_by_class[class.index()] += 1;
    }

    fn give_back(&mut self, class: Priority) {
        self.in_use = self.in_use.saturating_sub(1);
        let held = &mut self.in_use_by_class[class.index()];
        *held = held.saturating_sub(1);
    }

    fn refresh_capacity(&mut self) {
        let limit = self
            .adaptive
            .as_ref()
            .map_or(usize::MAX, AdaptiveLimit::limit);
        self.capacity = self.base_capacity.min(limit).max(1);
    }

    /// When the queue `class` waits in is expected to have drained: its waiters times the
    /// service time over its share of the slots.
    fn drain_time(&self, class: Priority) -> Option<Duration> {
        let service = self.service.mean()?;
        let slots = self.core.share_of(class) * self.capacity as f64;
        Some(expected_wait(self.core.len(class).max(1), service, slots))
    }
}

/// Slots the minimum shares amount to out of `full`: rounded up, so a share never rounds
/// away to nothing (40 % of 6 is 3 slots, not 2), as long as the rounded-up guarantees fit
/// in `full` together; otherwise to the nearest slot, so that on a tiny gateway (one slot)
/// guarantees do not take over the weighted order. A hair of tolerance keeps exact products
/// (0.4 × 5 = 2) from being pushed to the next slot by float error.
fn guarantees(minimums: [f64; 3], full: usize) -> [usize; 3] {
    let exact = minimums.map(|share| (share * full as f64).max(0.0));
    let up = exact.map(|slots| (slots - 1e-9).ceil().max(0.0) as usize);
    if up.iter().sum::<usize>() <= full {
        up
    } else {
        exact.map(|slots| slots.round() as usize)
    }
}

pub(crate) struct Dispatcher {
    state: Mutex<DispatchState>,
    gauges: QueueGauges,
}

/// One dispatch slot; dropping it frees the slot for the next waiter WFQ picks, and the
/// time it was held feeds the service-time estimate (and the adaptive limit).
pub(crate) struct DispatchSlot {
    dispatcher: Arc<Dispatcher>,
    class: Priority,
    since: Instant,
}

impl DispatchSlot {
    fn new(dispatcher: &Arc<Dispatcher>, class: Priority) -> Self {
        Self {
            dispatcher: dispatcher.clone(),
            class,
            since: Instant::now(),
        }
    }
}

impl Drop for DispatchSlot {
    fn drop(&mut self) {
        self.dispatcher.release(self.class, self.since.elapsed());
    }
}

/// A queued request; if dropped before its grant is taken, it leaves the queue or hands on
/// the slot it was granted.
struct Waiting {
    dispatcher: Arc<Dispatcher>,
    id: u64,
    class: Priority,
    grant: oneshot::Receiver<Grant>,
    taken: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.taken {
            self.dispatcher.abandon(self.id, self.class);
        }
    }
}

impl Dispatcher {
    #[cfg(test)]
    pub(crate) fn new(
        capacity: usize,
        max_queued: usize,
        weights: [f64; 3],
        minimums: [f64; 3],
        gauges: QueueGauges,
    ) -> Arc<Self> {
        Self::with_adaptive(capacity, max_queued, weights, minimums, gauges, None)
    }

    pub(crate) fn with_adaptive(
        capacity: usize,
        max_queued: usize,
        weights: [f64; 3],
        minimums: [f64; 3],
        gauges: QueueGauges,
        adaptive: Option<AdaptiveLimit>,
    ) -> Arc<Self> {
        let mut state = DispatchState {
            core: WfqCore::new(weights, minimums),
            grants: HashMap::new(),
            in_use: 0,
            in_use_by_class: [0; 3],
            capacity: capacity.max(1),
            base_capacity: capacity.max(1),
            nominal: capacity.max(1),
            adaptive,
            minimums,
            max_queued,
            next_id: 0,
            service: ServiceTime::default(),
        };
        state.refresh_capacity();
        let dispatcher = Arc::new(Self {
            state: Mutex::new(state),
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
            if state.fits(class) {
                state.take(class);
                self.gauges.dispatched(class, DispatchPath::Free);
                self.publish(&state);
                return Ok(DispatchSlot::new(self, class));
            }
            // Within its guaranteed slots a class is served next whatever its queue says.
            let ahead = state.core.len(class);
            let guaranteed = state.in_use_by_class[class.index()] + ahead < state.guaranteed(class);
            let service = state.service.mean().filter(|_| !guaranteed);
            if let Some(service) = service {
                let slots = state.core.share_of(class) * state.capacity as f64;
                let wait = expected_wait(ahead + 1, service, slots);
                if wait > timeout {
                    return Err(QueueRefusal::Deadline(wait));
                }
            }
            if state.core.total() >= state.max_queued {
                let shed = state
                    .core
                    .least_urgent_below(class)
                    .and_then(|victim| state.core.remove_newest(victim));
                match shed.and_then(|id| state.grants.remove(&id)) {
                    // The shed waiter may have just given up; it is gone either way.
                    Some(sender) => drop(sender.send(Grant::Shed)),
                    None if shed.is_some() => {}
                    None => return Err(QueueRefusal::Full),
                }
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
                class,
                grant,
                taken: false,
            }
        };
        match tokio::time::timeout(timeout, &mut waiting.grant).await {
            Ok(Ok(Grant::Slot)) => {
                waiting.taken = true;
                Ok(DispatchSlot::new(self, class))
            }
            Ok(Ok(Grant::Shed)) => {
                waiting.taken = true;
                Err(QueueRefusal::Shed)
            }
            // Timed out (or, impossibly, the sender vanished): `waiting` drops and leaves.
            Ok(Err(_)) | Err(_) => Err(QueueRefusal::Timeout),
        }
    }

    /// Whether `class` holds and waits for fewer slots than it is guaranteed.
    pub(crate) fn within_guarantee(&self, class: Priority) -> bool {
        let state = self.state.lock();
        state.in_use_by_class[class.index()] + state.core.len(class) < state.guaranteed(class)
    }

    /// When the queue of `class` is expected to have drained, once the service time is
    /// known: the `Retry-After` of a queue refusal.
    pub(crate) fn drain_time(&self, class: Priority) -> Option<Duration> {
        self.state.lock().drain_time(class)
    }

    /// Changes the number of slots (the recovery ramp). Shrinking never preempts: fewer
    /// slots are handed out until in-use falls below the new capacity.
    pub(crate) fn set_capacity(&self, capacity: usize) {
        let mut state = self.state.lock();
        state.base_capacity = capacity.max(1);
        state.refresh_capacity();
        self.dispatch(&mut state);
        self.publish(&state);
    }

    pub(crate) fn set_paused(&self, class: Priority, paused: bool) {
        let mut state = self.state.lock();
        state.core.set_paused(class, paused);
        self.dispatch(&mut state);
        self.publish(&state);
    }

    pub(crate) fn stats(&self) -> DispatchStats {
        let state = self.state.lock();
        DispatchStats {
            in_use: state.in_use,
            in_use_by_class: state.in_use_by_class,
            capacity: state.capacity,
            queued: Priority::ALL.map(|class| state.core.len(class)),
            p2_paused: state.core.is_paused(Priority::P2),
            service_time: state.service.mean(),
            adaptive_limit: state.adaptive.as_ref().map(AdaptiveLimit::limit),
            adaptive_min_rtt: state.adaptive.as_ref().and_then(AdaptiveLimit::min_rtt),
        }
    }

    fn release(&self, class: Priority, held: Duration) {
        let mut state = self.state.lock();
        state.give_back(class);
        state.service.record(held);
        let in_use = state.in_use;
        if let Some(adaptive) = state.adaptive.as_mut() {
            let before = adaptive.limit();
            let decision = adaptive.record(held, in_use + 1, Instant::now().into_std());
            if let Some(decision) = decision {
                self.gauges.adaptive_decided(decision);
            }
            if adaptive.limit() != before {
                state.refresh_capacity();
            }
        }
        self.dispatch(&mut state);
        self.publish(&state);
    }

    fn abandon(&self, id: u64, class: Priority) {
        let mut state = self.state.lock();
        if state.core.remove(id) {
            state.grants.remove(&id);
        } else {
            // Granted under this lock before the waiter could take it: pass the slot on.
            state.give_back(class);
            self.dispatch(&mut state);
        }
        self.publish(&state);
    }

    /// Hands free slots to waiters: classes below their guaranteed slots first, then in
    /// WFQ order; past a capacity cut, only P0 within its guarantee.
    fn dispatch(&self, state: &mut DispatchState) {
        loop {
            // Nobody to hand a slot to (as on every release while the queues are empty):
            // `pop_first` would find nothing, and the guarantees it is given cost more to
            // work out than the rest of the release.
            if !state.core.any_eligible() {
                break;
            }
            let first = if state.in_use < state.capacity {
                state.below_guarantee()
            } else if state.core.len(Priority::P0) > 0 && state.fits(Priority::P0) {
                [true, false, false]
            } else {
                break;
            };
            let Some((id, class, guaranteed)) = state.core.pop_first(first) else {
                break;
            };
            let Some(sender) = state.grants.remove(&id) else {
                continue;
            };
            if sender.send(Grant::Slot).is_ok() {
                state.take(class);
                let path = if guaranteed {
                    DispatchPath::Guarantee
                } else {
                    DispatchPath::Wfq
                };
                self.gauges.dispatched(class, path);
            }
        }
    }

    fn publish(&self, state: &DispatchState) {
        for class in Priority::ALL {
            self.gauges.queue_depth[class.index()].set(state.core.len(class) as i64);
        }
        self.gauges.in_use.set(state.in_use as i64);
        let adaptive = state.adaptive.as_ref().map_or(0, AdaptiveLimit::limit);
        self.gauges.adaptive_limit.set(adaptive as i64);
        self.gauges.capacity.set(state.capacity as i64);
    }
}

#[cfg(test)]
mod cut_tests;
#[cfg(test)]
mod tests;
