//! Answers being written (a model's streamed text), passed from the node running the team to
//! the nodes that follow it ([`super::follower`]) over NATS core, so a console on any node
//! shows them as they grow. They are glimpses, never stored or replayed: a follower that
//! misses one misses a glimpse, and the step's result replaces them all.

use super::bus::Bus;
use crate::monitor::{Monitor, WRITING_SHOWN};
use cohort_core::ids::{AgentId, StepId};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;

/// One glimpse as it goes over NATS.
#[derive(Serialize, Deserialize)]
struct Glimpse {
    agent_id: AgentId,
    step_id: StepId,
    /// The text so far, its last [`WRITING_SHOWN`] characters (what a feed shows of it).
    text: String,
}

/// On the node running the team: publishes every glimpse its monitor is told, on the bus's
/// thread, until aborted.
pub fn pass_on(bus: Arc<Bus>, monitor: &Monitor) -> tokio::task::JoinHandle<()> {
    let mut glimpses = monitor.subscribe_writing();
    let on = bus.clone();
    on.spawn(async move {
        loop {
            let w = match glimpses.recv().await {
                Ok(w) => w,
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            };
            let skip = w.text.chars().count().saturating_sub(WRITING_SHOWN);
            let glimpse = Glimpse {
                agent_id: w.agent_id.clone(),
                step_id: w.step_id.clone(),
                text: w.text.chars().skip(skip).collect(),
            };
            let Ok(json) = serde_json::to_vec(&glimpse) else {
                continue;
            };
            let subject = bus.names.writing_subject.clone();
            if let Err(e) = bus.client.publish(subject, json.into()).await {
                tracing::debug!("a glimpse of an answer being written was not published: {e}");
            }
        }
    })
}

/// On a node following the team: tells `monitor` every glimpse published, until aborted.
pub fn take_in(bus: Arc<Bus>, monitor: Monitor) -> tokio::task::JoinHandle<()> {
    let on = bus.clone();
    on.spawn(async move {
        let mut subscription = match bus
            .client
            .subscribe(bus.names.writing_subject.clone())
            .await
        {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("answers being written are not shown on this node: {e}");
                return;
            }
        };
        while let Some(m) = subscription.next().await {
            if let Ok(g) = serde_json::from_slice::<Glimpse>(&m.payload) {
                monitor.writing(&g.agent_id, &g.step_id, &g.text);
            }
        }
    })
}
