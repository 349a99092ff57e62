//! Which workers exist and what they are called, turned into a published consistent-hash
//! ring. Built from the registry's membership events, never per request.

use crate::ring::movement::moved_share;
use crate::ring::{Member, Ring};
use arc_swap::{ArcSwap, Guard};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use switchyard_core::WorkerId;

/// Membership events (rare; from the registry observer) rebuild the ring under a writer lock
/// and publish it; `select` only loads the current snapshot.
///
/// No actor: the observer is called synchronously by the registry actor, and the gateway
/// relies on membership reaching routing structures before the next directory snapshot is
/// read. Rebuilding here keeps that ordering, costs about a millisecond for 64 workers × 256
/// vnodes, and stays off the request path.
#[derive(Debug)]
pub(crate) struct Membership {
    vnodes: u32,
    workers: Mutex<BTreeMap<WorkerId, Arc<str>>>,
    ring: ArcSwap<Ring>,
    changes: AtomicU64,
    /// f64 bits of the key-space share moved by the last change.
    last_moved_share: AtomicU64,
}

impl Membership {
    pub(crate) fn new(vnodes: u32) -> Self {
        Self {
            vnodes,
            workers: Mutex::new(BTreeMap::new()),
            ring: ArcSwap::from_pointee(Ring::default()),
            changes: AtomicU64::new(0),
            last_moved_share: AtomicU64::new(0.0f64.to_bits()),
        }
    }

    /// The current ring, lock-free.
    pub(crate) fn ring(&self) -> Guard<Arc<Ring>> {
        self.ring.load()
    }

    /// Adds (or renames) a worker. A new id under a name already present is a new incarnation
    /// of that worker: it replaces the old id and keeps the name's ring positions.
    pub(crate) fn add(&self, id: WorkerId, name: &str) {
        let mut workers = self.workers.lock();
        if workers.get(&id).is_some_and(|known| known.as_ref() == name) {
            return;
        }
        workers.retain(|&other, known| other == id || known.as_ref() != name);
        workers.insert(id, Arc::from(name));
        self.rebuild(&workers);
    }

    /// Returns whether the worker was known.
    pub(crate) fn remove(&self, id: WorkerId) -> bool {
        let mut workers = self.workers.lock();
        if workers.remove(&id).is_none() {
            return false;
        }
        self.rebuild(&workers);
        true
    }

    pub(crate) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    pub(crate) fn last_moved_share(&self) -> f64 {
        f64::from_bits(self.last_moved_share.load(Ordering::Relaxed))
    }

    /// Called with the writer lock held, so two changes cannot publish out of order.
    fn rebuild(&self, workers: &BTreeMap<WorkerId, Arc<str>>) {
        let members = workers.iter().map(|(&id, name)| Member {
            id,
            name: Arc::clone(name),
        });
        let ring = Ring::build(members, self.vnodes);
        let moved = moved_share(&self.ring.load(), &ring);
        tracing::info!(
            workers = ring.members().len(),
            vnodes = ring.vnode_count(),
            moved_share = moved,
            "routing ring rebuilt"
        );
        self.ring.store(Arc::new(ring));
        self.last_moved_share
            .store(moved.to_bits(), Ordering::Relaxed);
        self.changes.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_follows_membership_and_a_new_incarnation_replaces_the_old_id() {
        let membership = Membership::new(16);
        membership.add(WorkerId(1), "a");
        membership.add(WorkerId(2), "b");
        assert_eq!(membership.ring().members().len(), 2);
        // The second of two workers takes about half the key space.
        let share = membership.last_moved_share();
        assert!(share > 0.3 && share < 0.7, "{share}");
        let before = membership
            .ring()
            .owner(12345)
            .and_then(|m| membership.ring().member(m).map(|m| m.name.clone()));
        membership.add(WorkerId(7), "a");
        let ring = membership.ring();
        assert_eq!(ring.members().len(), 2);
        assert_eq!(ring.id_of("a"), Some(WorkerId(7)));
        assert_eq!(ring.name_of(WorkerId(1)), None);
        // Same names, same positions: nothing moved.
        assert_eq!(membership.last_moved_share(), 0.0);
        let after = ring
            .owner(12345)
            .and_then(|m| ring.member(m).map(|m| m.name.clone()));
        assert_eq!(before, after);
        drop(ring);
        assert!(membership.remove(WorkerId(2)));
        assert!(!membership.remove(WorkerId(2)));
        assert_eq!(membership.ring().members().len(), 1);
        assert_eq!(membership.changes(), 4);
    }
}
