//! What every child actor shares: one round of I/O per [`Tick`], after which the round says
//! when the next one is due. A child is a [`Round`]; [`spawn_child`] runs it as an actor.

use ractor::concurrency::JoinHandle;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SpawnErr};
use std::future::Future;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

/// "Do your periodic work now"; every child's only message.
pub(crate) struct Tick;

/// When the next round runs.
pub(crate) enum Next {
    /// One period after the round that just ended started: a slow round does not stretch
    /// the cadence.
    Every(Duration),
    /// This long after the round that just ended.
    After(Duration),
    /// Never: the child's work is done and it stops.
    Stop(&'static str),
}

/// One child's work, a round at a time.
pub(crate) trait Round: Send + Sync + 'static {
    type Arguments: ractor::State;
    type State: ractor::State;

    /// The state, and the wait before the first round (`None`: at once).
    fn start(args: Self::Arguments) -> (Self::State, Option<Duration>);

    fn round(state: &mut Self::State) -> impl Future<Output = Next> + Send;
}

/// The actor that runs `R`'s rounds.
struct Periodic<R>(PhantomData<fn() -> R>);

impl<R: Round> Actor for Periodic<R> {
    type Msg = Tick;
    type State = R::State;
    type Arguments = R::Arguments;

    async fn pre_start(
        &self,
        myself: ActorRef<Tick>,
        args: R::Arguments,
    ) -> Result<R::State, ActorProcessingErr> {
        let (state, first) = R::start(args);
        match first {
            None => myself.send_message(Tick)?,
            Some(wait) => {
                myself.send_after(wait, || Tick);
            }
        }
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<Tick>,
        _tick: Tick,
        state: &mut R::State,
    ) -> Result<(), ActorProcessingErr> {
        let started = Instant::now();
        // Ractor owns the timer task and drops the message if this actor has stopped.
        match R::round(state).await {
            Next::Every(period) => {
                myself.send_after(period.saturating_sub(started.elapsed()), || Tick);
            }
            Next::After(wait) => {
                myself.send_after(wait, || Tick);
            }
            Next::Stop(reason) => myself.stop(Some(reason.into())),
        }
        Ok(())
    }
}

/// Starts `R` as a child linked to `supervisor`, unnamed (ractor's name registry is
/// process-global and several gateways may run in one process).
pub(crate) async fn spawn_child<R: Round>(
    args: R::Arguments,
    supervisor: ActorCell,
) -> Result<(ActorRef<Tick>, JoinHandle<()>), SpawnErr> {
    Actor::spawn_linked(None, Periodic::<R>(PhantomData), args, supervisor).await
}
