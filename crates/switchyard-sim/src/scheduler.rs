//! Batch admission: at most `max_running` requests hold a slot, the rest wait FIFO.
//!
//! The scheduler is plain data kept inside the engine's lock; the async waiting
//! and the guards that give slots back live in `engine`.

use std::collections::VecDeque;

use tokio::sync::oneshot;

/// Identifies one queued request so it can leave the queue if its client goes away.
pub(crate) type Ticket = u64;

/// Outcome of asking for a slot.
pub(crate) enum Admission {
    /// The request holds a slot now.
    Running,
    /// The request waits; the receiver fires when a slot is handed over.
    Queued(Ticket, oneshot::Receiver<()>),
}

#[derive(Debug)]
pub(crate) struct Scheduler {
    max_running: usize,
    running: usize,
    queue: VecDeque<(Ticket, oneshot::Sender<()>)>,
    next_ticket: Ticket,
}

impl Scheduler {
    pub(crate) fn new(max_running: usize) -> Self {
        Self {
            // A zero-sized batch would starve every request forever.
            max_running: max_running.max(1),
            running: 0,
            queue: VecDeque::new(),
            next_ticket: 0,
        }
    }

    pub(crate) fn running(&self) -> usize {
        self.running
    }

    pub(crate) fn waiting(&self) -> usize {
        self.queue.len()
    }

    /// Grants a slot at once only when nobody is queued, which keeps admission FIFO.
    pub(crate) fn admit(&mut self) -> Admission {
        if self.running < self.max_running && self.queue.is_empty() {
            self.running += 1;
            return Admission::Running;
        }
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        let (sender, receiver) = oneshot::channel();
        self.queue.push_back((ticket, sender));
        Admission::Queued(ticket, receiver)
    }

    /// Gives a slot back and hands free slots to the oldest waiters.
    pub(crate) fn release(&mut self) {
        self.running = self.running.saturating_sub(1);
        while self.running < self.max_running {
            let Some((_, sender)) = self.queue.pop_front() else {
                break;
            };
            // The slot counts as taken even if the receiver is gone: the waiter's
            // guard sees its ticket missing from the queue and releases it.
            self.running += 1;
            let _ = sender.send(());
        }
    }

    /// Removes a waiter that gave up; `false` means it was already granted a slot.
    pub(crate) fn leave_queue(&mut self, ticket: Ticket) -> bool {
        match self.queue.iter().position(|(queued, _)| *queued == ticket) {
            Some(index) => {
                self.queue.remove(index);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(admission: Admission) -> (Ticket, oneshot::Receiver<()>) {
        match admission {
            Admission::Queued(ticket, rx) => (ticket, rx),
            Admission::Running => panic!("expected to queue"),
        }
    }

    #[test]
    fn admits_up_to_max_then_queues() {
        let mut scheduler = Scheduler::new(2);
        assert!(matches!(scheduler.admit(), Admission::Running));
        assert!(matches!(scheduler.admit(), Admission::Running));
        let _third = queued(scheduler.admit());
        assert_eq!((scheduler.running(), scheduler.waiting()), (2, 1));
    }

    #[test]
    fn release_hands_slots_over_in_fifo_order() {
        let mut scheduler = Scheduler::new(1);
        assert!(matches!(scheduler.admit(), Admission::Running));
        let (_, mut first) = queued(scheduler.admit());
        let (_, mut second) = queued(scheduler.admit());
        scheduler.release();
        assert!(first.try_recv().is_ok());
        assert!(second.try_recv().is_err());
        assert_eq!((scheduler.running(), scheduler.waiting()), (1, 1));
    }

    #[test]
    fn leaving_the_queue_frees_the_place() {
        let mut scheduler = Scheduler::new(1);
        assert!(matches!(scheduler.admit(), Admission::Running));
        let (ticket, _rx) = queued(scheduler.admit());
        assert!(scheduler.leave_queue(ticket));
        assert!(!scheduler.leave_queue(ticket));
        scheduler.release();
        assert_eq!((scheduler.running(), scheduler.waiting()), (0, 0));
    }
}
