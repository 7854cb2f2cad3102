//! Where an agent's own changes go besides its hand-overs to SyncState: the team's monitor when
//! the agent runs on the node that runs the team, or that node over NATS when the agent is
//! placed on another node (the node module's `host`). Either way they are stored in the order the
//! agent made them, after what it handed over before.

use crate::monitor::Monitor;
use cohort_core::call::media::{Blob, BlobId};
use cohort_core::event::Change;
use cohort_core::ids::{AgentId, StepId};
use futures::FutureExt;
use futures::future::BoxFuture;
use std::sync::Arc;

pub trait Outlet: Send + Sync {
    /// Publishes the agent's changes, after everything it published or handed over before.
    fn publish(&self, changes: Vec<Change>);

    /// Resolves true once everything the agent published so far is stored; false if it never
    /// will be (the store or the running node went away). Callers bound the wait.
    fn stored(&self) -> BoxFuture<'static, bool>;

    /// The text so far of an answer a step's model is writing (a glimpse, never stored).
    fn writing(&self, agent: &AgentId, step: &StepId, text: &str);

    /// The team's agents, when there are no more than `at_most` (else none).
    fn receivers(&self, at_most: usize) -> Vec<String>;

    /// Keeps an image or a sound a tool returned, before the result that refers to it is
    /// published.
    fn keep_blob(&self, blob: Blob);

    /// An image or a sound kept lately (held in memory), for a model that takes images.
    fn blob(&self, id: &BlobId) -> Option<Arc<Blob>>;
}

impl Outlet for Monitor {
    fn publish(&self, changes: Vec<Change>) {
        Monitor::publish(self, changes);
    }

    fn keep_blob(&self, blob: Blob) {
        Monitor::keep_blob(self, blob);
    }

    fn blob(&self, id: &BlobId) -> Option<Arc<Blob>> {
        Monitor::blob(self, id)
    }

    fn stored(&self) -> BoxFuture<'static, bool> {
        let (monitor, version) = (self.clone(), self.assigned_version());
        async move { monitor.durable(version).await }.boxed()
    }

    fn writing(&self, agent: &AgentId, step: &StepId, text: &str) {
        Monitor::writing(self, agent, step, text);
    }

    fn receivers(&self, at_most: usize) -> Vec<String> {
        self.read(|s| {
            if s.agents.len() > at_most {
                return Vec::new();
            }
            s.agents.keys().map(|a| a.to_string()).collect()
        })
    }
}
