//! Singleflight: concurrent callers asking for the same key share one execution. The first
//! caller leads and runs the work; the others wait for its result. If the leader is dropped
//! mid-flight (its request was cancelled), a waiter takes over, so nobody waits forever.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use tokio::sync::watch;

/// How a caller got its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Flight<V> {
    /// This caller ran the work.
    Led(V),
    /// Another caller ran it; this one waited for the result.
    Joined(V),
}

impl<V> Flight<V> {
    pub fn into_value(self) -> V {
        match self {
            Flight::Led(value) | Flight::Joined(value) => value,
        }
    }
}

/// Flights in the air: key → the channel its leader will publish the result on.
type Flights<V> = Arc<Mutex<HashMap<Arc<str>, watch::Receiver<Option<V>>>>>;

pub(crate) struct Singleflight<V> {
    flights: Flights<V>,
}

impl<V> Default for Singleflight<V> {
    fn default() -> Self {
        Self {
            flights: Arc::new(Mutex::new(HashMap::new())),
        }
    }
}

/// Removes the leader's entry however the leader ends (finished or dropped).
struct Landing<V> {
    flights: Flights<V>,
    key: Arc<str>,
    mine: watch::Receiver<Option<V>>,
}

impl<V> Drop for Landing<V> {
    fn drop(&mut self) {
        let mut flights = self.flights.lock();
        if flights
            .get(&self.key)
            .is_some_and(|current| current.same_channel(&self.mine))
        {
            flights.remove(&self.key);
        }
    }
}

impl<V: Clone + Send + Sync> Singleflight<V> {
    pub(crate) async fn run<F, Fut>(&self, key: &Arc<str>, work: F) -> Flight<V>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = V>,
    {
        let sender = loop {
            let waiting = {
                let mut flights = self.flights.lock();
                match flights.get(key) {
                    Some(receiver) => receiver.clone(),
                    None => {
                        let (sender, receiver) = watch::channel(None);
                        flights.insert(Arc::clone(key), receiver);
                        break sender;
                    }
                }
            };
            let mut waiting = waiting;
            let shared = match waiting.wait_for(Option::is_some).await {
                Ok(value) => value.clone(),
                Err(_) => None,
            };
            if let Some(value) = shared {
                return Flight::Joined(value);
            }
            // The leader was dropped before it finished: try to lead.
        };
        let _landing = Landing {
            flights: Arc::clone(&self.flights),
            key: Arc::clone(key),
            mine: sender.subscribe(),
        };
        let value = work().await;
        sender.send_replace(Some(value.clone()));
        Flight::Led(value)
    }

    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> usize {
        self.flights.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn hundred_concurrent_callers_share_one_execution() {
        let flights = Arc::new(Singleflight::<u32>::default());
        let runs = Arc::new(AtomicUsize::new(0));
        let key: Arc<str> = Arc::from("r");
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..100 {
            let (flights, runs, key) = (flights.clone(), runs.clone(), key.clone());
            tasks.spawn(async move {
                flights
                    .run(&key, || async {
                        runs.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        7
                    })
                    .await
            });
        }
        let mut led = 0;
        while let Some(flight) = tasks.join_next().await {
            let flight = flight.unwrap();
            led += usize::from(matches!(flight, Flight::Led(_)));
            assert_eq!(flight.into_value(), 7);
        }
        assert_eq!((runs.load(Ordering::SeqCst), led), (1, 1));
        assert_eq!(flights.in_flight(), 0, "the entry is gone after landing");
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_leader_hands_over_to_a_waiter() {
        let flights = Arc::new(Singleflight::<u32>::default());
        let key: Arc<str> = Arc::from("r");
        let leader = {
            let (flights, key) = (flights.clone(), key.clone());
            tokio::spawn(async move {
                flights
                    .run(&key, || async {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        1
                    })
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let follower = {
            let (flights, key) = (flights.clone(), key.clone());
            tokio::spawn(async move { flights.run(&key, || async { 2 }).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        leader.abort();
        assert_eq!(follower.await.unwrap(), Flight::Led(2));
        assert_eq!(flights.in_flight(), 0);
    }
}
