//! The queueing discipline, without any waiting: per-class queues served by stride
//! scheduling (weighted fair queuing over dispatch slots) with minimum shares, and inside a
//! class round-robin over callers so no caller starves the others of its class.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use switchyard_core::Priority;

/// Shares of dispatches among the eligible (backlogged, not paused) classes: weights
/// normalised over that set, then any class under its minimum raised to it and the rest
/// re-split by weight among the others.
pub(crate) fn effective_shares(
    weights: [f64; 3],
    minimums: [f64; 3],
    eligible: [bool; 3],
) -> [f64; 3] {
    let mut shares = [0.0; 3];
    let mut pinned = [false; 3];
    loop {
        let pinned_total: f64 = (0..3).filter(|&i| pinned[i]).map(|i| shares[i]).sum();
        let free = [0, 1, 2].map(|i| eligible[i] && !pinned[i]);
        let free_weight: f64 = (0..3).filter(|&i| free[i]).map(|i| weights[i]).sum();
        if free_weight <= 0.0 {
            return shares;
        }
        let remaining = (1.0 - pinned_total).max(0.0);
        let mut raised = false;
        for i in (0..3).filter(|&i| free[i]) {
            shares[i] = remaining * weights[i] / free_weight;
            if shares[i] < minimums[i] {
                shares[i] = minimums[i];
                pinned[i] = true;
                raised = true;
            }
        }
        if !raised {
            return shares;
        }
    }
}

#[derive(Default)]
struct ClassQueue {
    /// Stride-scheduling position: the class with the lowest pass is served next, and
    /// serving it advances the pass by 1 / share.
    pass: f64,
    rotation: VecDeque<Arc<str>>,
    by_caller: HashMap<Arc<str>, VecDeque<u64>>,
    len: usize,
}

impl ClassQueue {
    fn push(&mut self, id: u64, caller: Arc<str>) {
        let queue = self.by_caller.entry(caller.clone()).or_default();
        if queue.is_empty() {
            self.rotation.push_back(caller);
        }
        queue.push_back(id);
        self.len += 1;
    }

    fn pop(&mut self) -> Option<u64> {
        let caller = self.rotation.pop_front()?;
        let queue = self.by_caller.get_mut(&caller)?;
        let id = queue.pop_front();
        if queue.is_empty() {
            self.by_caller.remove(&caller);
        } else {
            self.rotation.push_back(caller);
        }
        self.len -= usize::from(id.is_some());
        id
    }

    fn remove(&mut self, id: u64, caller: &Arc<str>) -> bool {
        let Some(queue) = self.by_caller.get_mut(caller) else {
            return false;
        };
        let Some(position) = queue.iter().position(|&queued| queued == id) else {
            return false;
        };
        queue.remove(position);
        if queue.is_empty() {
            self.by_caller.remove(caller);
            self.rotation.retain(|c| c != caller);
        }
        self.len -= 1;
        true
    }
}

pub(crate) struct WfqCore {
    weights: [f64; 3],
    minimums: [f64; 3],
    classes: [ClassQueue; 3],
    paused: [bool; 3],
    virtual_time: f64,
    index: HashMap<u64, (Priority, Arc<str>)>,
}

impl WfqCore {
    pub(crate) fn new(weights: [f64; 3], minimums: [f64; 3]) -> Self {
        Self {
            weights,
            minimums,
            classes: Default::default(),
            paused: [false; 3],
            virtual_time: 0.0,
            index: HashMap::new(),
        }
    }

    pub(crate) fn push(&mut self, id: u64, class: Priority, caller: Arc<str>) {
        self.classes[class.index()].push(id, caller.clone());
        self.index.insert(id, (class, caller));
    }

    /// Takes the next waiter to serve, if any class is eligible.
    #[cfg(test)]
    pub(crate) fn pop(&mut self) -> Option<(u64, Priority)> {
        self.pop_first([false; 3]).map(|(id, class, _)| (id, class))
    }

    /// Takes the next waiter to serve. A backlogged class flagged in `first` (one holding
    /// fewer slots than its guaranteed minimum) is served before the stride order, most
    /// urgent first, and charged for it like any dispatch; the flag is returned.
    pub(crate) fn pop_first(&mut self, first: [bool; 3]) -> Option<(u64, Priority, bool)> {
        let eligible = self.eligible();
        let shares = effective_shares(self.weights, self.minimums, eligible);
        let serves = |i: usize| eligible[i] && shares[i] > 0.0;
        for i in (0..3).filter(|&i| serves(i)) {
            // A class that was idle or paused must not bank credit for that time.
            self.classes[i].pass = self.classes[i].pass.max(self.virtual_time);
        }
        let guaranteed = (0..3).find(|&i| serves(i) && first[i]);
        // Ties go to the more urgent class (the first minimum).
        let i = guaranteed.or_else(|| {
            (0..3)
                .filter(|&i| serves(i))
                .min_by(|&a, &b| self.classes[a].pass.total_cmp(&self.classes[b].pass))
        })?;
        let class = &mut self.classes[i];
        // An out-of-order dispatch must not move the clock the others are measured by.
        if guaranteed.is_none() {
            self.virtual_time = class.pass;
        }
        class.pass += 1.0 / shares[i];
        let id = class.pop()?;
        self.index.remove(&id);
        Some((id, Priority::ALL[i], guaranteed.is_some()))
    }

    /// The share of dispatches `class` gets while backlogged next to the classes
    /// backlogged now.
    pub(crate) fn share_of(&self, class: Priority) -> f64 {
        let mut eligible = self.eligible();
        eligible[class.index()] = !self.paused[class.index()];
        effective_shares(self.weights, self.minimums, eligible)[class.index()]
    }

    /// The least urgent class with waiters that is less urgent than `than`.
    pub(crate) fn least_urgent_below(&self, than: Priority) -> Option<Priority> {
        (than.index() + 1..3)
            .rev()
            .find(|&i| self.classes[i].len > 0)
            .map(|i| Priority::ALL[i])
    }

    /// Removes and returns the newest waiter of `class` (the one shed first).
    pub(crate) fn remove_newest(&mut self, class: Priority) -> Option<u64> {
        let newest = self.classes[class.index()]
            .by_caller
            .values()
            .filter_map(|queue| queue.back().copied())
            .max()?;
        self.remove(newest).then_some(newest)
    }

    /// Forgets a waiter that gave up. False if it is not queued (already served).
    pub(crate) fn remove(&mut self, id: u64) -> bool {
        let Some((class, caller)) = self.index.remove(&id) else {
            return false;
        };
        self.classes[class.index()].remove(id, &caller)
    }

    pub(crate) fn set_paused(&mut self, class: Priority, paused: bool) {
        self.paused[class.index()] = paused;
    }

    pub(crate) fn is_paused(&self, class: Priority) -> bool {
        self.paused[class.index()]
    }

    pub(crate) fn len(&self, class: Priority) -> usize {
        self.classes[class.index()].len
    }

    pub(crate) fn total(&self) -> usize {
        self.index.len()
    }

    /// Whether [`Self::pop_first`] could answer anything: some class has a waiter and is
    /// not paused.
    pub(crate) fn any_eligible(&self) -> bool {
        self.eligible().contains(&true)
    }

    fn eligible(&self) -> [bool; 3] {
        [0, 1, 2].map(|i| self.classes[i].len > 0 && !self.paused[i])
    }
}

#[cfg(test)]
mod tests;
