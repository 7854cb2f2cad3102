//! A monitor that follows another node's: on a node that does not run the team, the team's
//! committed changes (read from its JetStream event stream or its store by the node's
//! follower) are applied here with the versions they were given there, so
//! this node's websocket feeds show the whole team without asking the node that runs it.

use super::{Monitor, Published};
use cohort_core::config::MemoryBudget;
use cohort_core::event::{Event, States};
use std::sync::{Arc, OnceLock};

/// A followed change that does not come next: the changes between are missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("change {got} came after {at}: the changes between are missing")]
pub struct Gap {
    /// The newest version applied.
    pub at: u64,
    /// The version that came.
    pub got: u64,
}

impl Monitor {
    /// A monitor with no store and no publisher of its own, at `states` and `version`, its
    /// retired steps and feed held to `memory`'s shares as the running node's are.
    pub fn following(buffer: usize, states: States, version: u64, memory: MemoryBudget) -> Self {
        let m = Self::starting_at(buffer, states, version);
        m.hold_retired_to(memory.retired_steps());
        m.hold_feed_to(memory.feed());
        m
    }

    /// Applies a followed change with the version it was given: one already applied is
    /// skipped, the next is applied and passed to subscribers, any later one is a [`Gap`].
    pub fn apply_followed(&self, event: Event) -> Result<(), Gap> {
        let mut shared = self.lock();
        if event.version <= shared.version {
            return Ok(());
        }
        if event.version != shared.version + 1 {
            return Err(Gap {
                at: shared.version,
                got: event.version,
            });
        }
        shared.version = event.version;
        shared.states.apply_at(&event.change, event.at);
        self.inner.tx.send(Arc::new(Published {
            event,
            json: OnceLock::new(),
        }));
        Ok(())
    }

    /// Starts again from `states` at `version` (read anew from the store, when the changes
    /// since are lost), held to `memory` as [`Monitor::following`] holds them: every
    /// subscriber is told it lagged, so it takes a fresh snapshot.
    pub fn reset_followed(&self, mut states: States, version: u64, memory: MemoryBudget) {
        states.hold_retired_to(memory.retired_steps());
        let mut shared = self.lock();
        shared.states = states;
        shared.version = version;
        shared.snapshot = None;
        *self.assigned() = version;
        self.inner.tx.skip_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(version: u64, id: &str) -> Event {
        Event {
            version,
            at: 0,
            change: crate::monitor::tests::created(id),
        }
    }

    #[test]
    fn followed_changes_apply_once_in_order_and_a_gap_is_told() {
        let m = Monitor::following(16, States::default(), 0, MemoryBudget::mib(16));
        let mut feed = m.subscribe();
        m.apply_followed(created(1, "a")).unwrap();
        m.apply_followed(created(1, "a")).unwrap();
        assert_eq!(
            m.apply_followed(created(3, "c")),
            Err(Gap { at: 1, got: 3 })
        );
        m.apply_followed(created(2, "b")).unwrap();
        assert_eq!(m.version(), 2);
        assert_eq!(m.read(|s| s.tasks.len()), 2);
        let seen: Vec<u64> = std::iter::from_fn(|| feed.try_recv().ok())
            .map(|p| p.event.version)
            .collect();
        assert_eq!(seen, [1, 2]);
    }

    #[test]
    fn a_reset_makes_every_subscriber_take_a_fresh_snapshot() {
        let m = Monitor::following(16, States::default(), 0, MemoryBudget::mib(16));
        let mut feed = m.subscribe();
        m.apply_followed(created(1, "a")).unwrap();
        let _ = feed.try_recv();
        let mut states = States::default();
        states.apply_at(&created(7, "z").change, 0);
        m.reset_followed(states, 7, MemoryBudget::mib(16));
        assert!(matches!(
            feed.try_recv(),
            Err(crate::monitor::feed::TryRecvError::Lagged(_))
        ));
        assert_eq!(m.version(), 7);
        m.apply_followed(created(8, "y")).unwrap();
        assert_eq!(feed.try_recv().unwrap().event.version, 8);
    }
}
