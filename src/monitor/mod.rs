//! The monitor: every change to a task, stage, agent or step is published here as a
//! `StateEvent`; the monitor keeps the latest state of each (a dashmap index, for
//! `/api/states` and `--json`) and broadcasts the event to live subscribers.

use dashmap::DashMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::broadcast;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateKind {
    Task,
    Stage,
    Agent,
    Step,
}

impl StateKind {
    pub const ALL: [StateKind; 4] = [
        StateKind::Task,
        StateKind::Stage,
        StateKind::Agent,
        StateKind::Step,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StateKind::Task => "task",
            StateKind::Stage => "stage",
            StateKind::Agent => "agent",
            StateKind::Step => "step",
        }
    }
}

/// One published change. `version` grows by one with every event of the whole team, so a
/// client can order events and drop ones older than what it has.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StateEvent {
    pub kind: StateKind,
    pub id: String,
    pub version: u64,
    pub state: Value,
}

#[derive(Clone)]
pub struct Monitor {
    inner: Arc<Inner>,
}

struct Inner {
    index: DashMap<(StateKind, String), (u64, Value)>,
    version: AtomicU64,
    tx: broadcast::Sender<StateEvent>,
}

impl Monitor {
    /// `buffer` bounds how many events a slow subscriber may fall behind before it lags.
    pub fn new(buffer: usize) -> Self {
        let (tx, _) = broadcast::channel(buffer.max(16));
        Monitor {
            inner: Arc::new(Inner {
                index: DashMap::new(),
                version: AtomicU64::new(0),
                tx,
            }),
        }
    }

    pub fn publish<T: Serialize>(&self, kind: StateKind, id: &str, state: &T) {
        let state = match serde_json::to_value(state) {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(kind = kind.name(), id, "state did not serialize: {e}");
                return;
            }
        };
        // Take the version while holding the index entry, so the index never goes backwards.
        let mut entry = self
            .inner
            .index
            .entry((kind, id.to_owned()))
            .or_insert((0, Value::Null));
        let version = self.inner.version.fetch_add(1, Ordering::SeqCst) + 1;
        *entry = (version, state.clone());
        drop(entry);
        // No subscriber is fine: the index still has the state.
        let _ = self.inner.tx.send(StateEvent {
            kind,
            id: id.to_owned(),
            version,
            state,
        });
    }

    pub fn subscribe(&self) -> broadcast::Receiver<StateEvent> {
        self.inner.tx.subscribe()
    }

    /// The newest version published so far.
    pub fn version(&self) -> u64 {
        self.inner.version.load(Ordering::SeqCst)
    }

    pub fn get(&self, kind: StateKind, id: &str) -> Option<Value> {
        self.inner
            .index
            .get(&(kind, id.to_owned()))
            .map(|e| e.1.clone())
    }

    /// `{id: state}` for one kind.
    pub fn snapshot(&self, kind: StateKind) -> BTreeMap<String, Value> {
        self.inner
            .index
            .iter()
            .filter(|e| e.key().0 == kind)
            .map(|e| (e.key().1.clone(), e.value().1.clone()))
            .collect()
    }

    /// `{"task": {…}, "stage": {…}, "agent": {…}, "step": {…}}`.
    pub fn all(&self) -> Value {
        let mut out = serde_json::Map::new();
        for k in StateKind::ALL {
            out.insert(
                k.name().to_owned(),
                serde_json::to_value(self.snapshot(k)).unwrap_or_default(),
            );
        }
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_keeps_the_latest_state_and_events_carry_growing_versions() {
        let m = Monitor::new(16);
        let mut rx = m.subscribe();
        m.publish(StateKind::Task, "t1", &serde_json::json!({"n": 1}));
        m.publish(StateKind::Task, "t1", &serde_json::json!({"n": 2}));
        m.publish(StateKind::Step, "s1", &serde_json::json!({"x": true}));
        assert_eq!(m.snapshot(StateKind::Task)["t1"]["n"], 2);
        let a = rx.try_recv().unwrap();
        let b = rx.try_recv().unwrap();
        assert!(b.version > a.version);
        assert_eq!(m.all()["step"]["s1"]["x"], true);
        assert_eq!(m.version(), 3);
    }
}
