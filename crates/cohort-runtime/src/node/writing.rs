//! Answers being written (a model's streamed text), passed from the node running the team to
//! the nodes that follow it ([`super::follower`]) over NATS core, so a console on any node
//! shows them as they grow. They are glimpses, never stored or replayed: a follower that
//! misses one misses a glimpse, and the step's result replaces them all.
//!
//! They cost the node running the team only while someone watches: a follower with a feed
//! open says so every [`WANTED_EVERY`] (`cohort.<team>.writing_wanted`), and the team's node
//! takes glimpses from its monitor only until `WANTED_FOR` after it last heard that (with no
//! taker, the monitor makes none).

use super::bus::Bus;
use crate::monitor::{Monitor, WRITING_SHOWN, Writing};
use cohort_core::ids::{AgentId, StepId};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;

/// How often a follower with a feed open says it wants the glimpses.
pub const WANTED_EVERY: Duration = Duration::from_secs(2);
/// How long the team's node passes glimpses on after it last heard they are wanted.
const WANTED_FOR: Duration = Duration::from_secs(5);

/// One glimpse as it goes over NATS.
#[derive(Serialize, Deserialize)]
struct Glimpse {
    agent_id: AgentId,
    step_id: StepId,
    /// The text so far, its last [`WRITING_SHOWN`] characters (what a feed shows of it).
    text: String,
}

/// On the node running the team: publishes the glimpses its monitor is told while a follower
/// wants them, on the bus's thread, until aborted.
pub fn pass_on(bus: Arc<Bus>, monitor: &Monitor) -> tokio::task::JoinHandle<()> {
    let monitor = monitor.clone();
    let on = bus.clone();
    on.spawn(async move {
        let wanted = bus
            .client
            .subscribe(bus.names.writing_wanted_subject.clone());
        let mut wanted = match wanted.await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("answers being written are not passed on to other nodes: {e}");
                return;
            }
        };
        let mut glimpses: Option<broadcast::Receiver<Arc<Writing>>> = None;
        let mut heard = Instant::now();
        loop {
            tokio::select! {
                w = wanted.next() => {
                    if w.is_none() {
                        return;
                    }
                    heard = Instant::now();
                    glimpses.get_or_insert_with(|| monitor.subscribe_writing());
                }
                w = next(&mut glimpses) => match w {
                    Ok(w) => publish(&bus, &w).await,
                    Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return,
                },
                () = tokio::time::sleep_until(heard + WANTED_FOR), if glimpses.is_some() => {
                    // Nobody watches: the monitor makes no glimpse for nobody.
                    glimpses = None;
                }
            }
        }
    })
}

/// The next glimpse, or never while none are taken.
async fn next(
    glimpses: &mut Option<broadcast::Receiver<Arc<Writing>>>,
) -> Result<Arc<Writing>, RecvError> {
    match glimpses {
        Some(g) => g.recv().await,
        None => std::future::pending().await,
    }
}

async fn publish(bus: &Bus, w: &Writing) {
    let skip = w.text.chars().count().saturating_sub(WRITING_SHOWN);
    let glimpse = Glimpse {
        agent_id: w.agent_id.clone(),
        step_id: w.step_id.clone(),
        text: w.text.chars().skip(skip).collect(),
    };
    let Ok(json) = serde_json::to_vec(&glimpse) else {
        return;
    };
    let subject = bus.names.writing_subject.clone();
    if let Err(e) = bus.client.publish(subject, json.into()).await {
        tracing::debug!("a glimpse of an answer being written was not published: {e}");
    }
}

/// On a node following the team: tells `monitor` every glimpse published, and says it wants
/// them while a feed here watches, until aborted.
pub fn take_in(bus: Arc<Bus>, monitor: Monitor) -> tokio::task::JoinHandle<()> {
    let on = bus.clone();
    on.spawn(async move {
        let subject = bus.names.writing_subject.clone();
        let mut subscription = match bus.client.subscribe(subject).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("answers being written are not shown on this node: {e}");
                return;
            }
        };
        let mut every = tokio::time::interval(WANTED_EVERY);
        loop {
            tokio::select! {
                m = subscription.next() => {
                    let Some(m) = m else { return };
                    if let Ok(g) = serde_json::from_slice::<Glimpse>(&m.payload) {
                        monitor.writing(&g.agent_id, &g.step_id, &g.text);
                    }
                }
                _ = every.tick() => {
                    if monitor.writing_watched() {
                        let wanted = bus.names.writing_wanted_subject.clone();
                        let _ = bus.client.publish(wanted, bytes::Bytes::new()).await;
                    }
                }
            }
        }
    })
}
