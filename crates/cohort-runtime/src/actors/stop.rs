//! Stopping a team's actors in order, so that nothing changes state once they are stopped: the
//! agents first (their threads are stopped and joined, so no step of theirs lands later), then
//! the watchdog, the supervisor, SyncState and the dispatcher, each after the messages already
//! in its mailbox. A journal closed after this has every change the team made; closed before
//! it, a step landing late had nowhere to be stored.

use actix::prelude::*;
use std::time::{Duration, Instant};

/// Stop after the messages already queued; the futures the actor spawned go with it.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Stop;

/// How long stopping waits for one actor to be gone: a handler that never ends (a bug) must
/// not keep the process from stopping.
const STOP_DEADLINE: Duration = Duration::from_secs(10);

/// Asks `addr`'s actor to stop once its earlier messages are handled, then waits until its
/// context is gone (so nothing it spawned runs on), at most `STOP_DEADLINE`.
pub async fn stop_actor<A>(addr: &Addr<A>)
where
    A: Actor<Context = Context<A>> + Handler<Stop>,
{
    let until = Instant::now() + STOP_DEADLINE;
    match tokio::time::timeout(STOP_DEADLINE, addr.send(Stop)).await {
        Ok(Ok(())) => {}
        Ok(Err(_)) => return,
        Err(_) => {
            tracing::warn!(
                actor = std::any::type_name::<A>(),
                "an actor did not take its stop within {STOP_DEADLINE:?}"
            );
            return;
        }
    }
    while addr.connected() {
        if Instant::now() >= until {
            tracing::warn!(
                actor = std::any::type_name::<A>(),
                "an actor did not stop within {STOP_DEADLINE:?}"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Implements [`Stop`] for actors that need nothing more than their context stopped.
macro_rules! stops {
    ($($actor:ty),*) => {$(
        impl Handler<Stop> for $actor {
            type Result = ();
            fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
                ctx.stop();
            }
        }
    )*};
}

stops!(
    super::AgentActor,
    super::Dispatcher,
    super::Supervisor,
    super::SyncStateActor,
    super::Watchdog
);
