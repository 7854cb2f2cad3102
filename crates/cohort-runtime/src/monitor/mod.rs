//! The monitor: the reader of the team's change stream that everything else reads through.
//! Owners publish their changes here; the monitor gives each a team-wide version, applies it to
//! its `States` (the latest state of every task, stage, agent and step, for `/api/states`,
//! `--json` and snapshots) and broadcasts it to live subscribers (websocket feeds, `cohort
//! run`). An event is serialised at most once, however many clients read it, and a snapshot is
//! built at most once per version and shared.
//!
//! With a store ([`Monitor::with_store`]) the monitor writes ahead: changes reach the states
//! and subscribers only once the [`journal`] has committed them, and effects queued with them
//! ([`Monitor::publish_then`]) run after that. Its `compactor` keeps that store compacted.

mod compactor;
pub mod feed;
pub mod follow;
pub mod journal;
pub mod media;
pub mod record;

use bytes::Bytes;
pub use cohort_core::event::StateKind;
use cohort_core::event::tally::Histogram;
use cohort_core::event::{Change, Event, States};
use cohort_core::ids::{AgentId, StepId};
use cohort_store::Store;
use cohort_store::lease::AgentWrite;
use compactor::Compactor;
pub use journal::Effect;
use journal::{Entry, Journal};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tokio::sync::broadcast;

/// One published event, shared by every subscriber; its JSON is made once, on first use.
#[derive(Debug)]
pub struct Published {
    pub event: Event,
    json: OnceLock<Bytes>,
}

impl Published {
    /// The event as JSON (`{"version", "at", "kind", "op", …}`).
    pub fn json(&self) -> &Bytes {
        self.json.get_or_init(|| {
            Bytes::from(serde_json::to_vec(&self.event).unwrap_or_else(|e| {
                tracing::error!("an event did not serialise: {e}");
                b"{}".to_vec()
            }))
        })
    }
}

/// An answer being written: its step and the whole text so far. The websocket's frame of it,
/// `{"type": "writing", "agent_id", "step_id", "text"}`, shows the text's newest
/// [`WRITING_SHOWN`] characters; the task event stream sends what is new as TEXT_ADD deltas.
#[derive(Debug)]
pub struct Writing {
    /// The agent writing it.
    pub agent_id: AgentId,
    /// The step being written (a feed shows it only to those who may see the step).
    pub step_id: StepId,
    /// The whole text so far.
    pub text: String,
    json: OnceLock<Bytes>,
}

/// How many characters of an answer being written a frame shows: its end, where it grows.
pub const WRITING_SHOWN: usize = 2000;

/// Members' snapshots built at once (a lagging member's feed waits for a place).
pub const SNAPSHOT_SENDS: usize = 2;

/// The live feed's backlog in bytes unless told (a 256 MiB budget's 32nd).
pub const FEED_BYTES: usize = 8 << 20;

/// Answers being written that a slow reader may fall behind on; older ones are skipped.
const WRITING_BUFFER: usize = 64;

impl Writing {
    fn new(agent_id: &AgentId, step_id: &StepId, text: &str) -> Self {
        Writing {
            agent_id: agent_id.clone(),
            step_id: step_id.clone(),
            text: text.to_owned(),
            json: OnceLock::new(),
        }
    }

    /// The websocket frame, made once for every feed.
    pub fn json(&self) -> &Bytes {
        self.json.get_or_init(|| {
            let skip = self.text.chars().count().saturating_sub(WRITING_SHOWN);
            let shown: String = self.text.chars().skip(skip).collect();
            let json = serde_json::json!({
                "type": "writing",
                "agent_id": self.agent_id,
                "step_id": self.step_id,
                "text": shown,
                "cut": skip > 0,
            });
            Bytes::from(serde_json::to_vec(&json).unwrap_or_default())
        })
    }
}

#[derive(Clone)]
pub struct Monitor {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Mutex<Shared>,
    tx: feed::Feed,
    /// Answers being written ([`Writing`]): not changes, so neither versioned nor stored.
    writing: broadcast::Sender<Arc<Writing>>,
    /// Set when the monitor writes ahead to a store.
    journal: OnceLock<Journal>,
    /// Snapshots being sent to readers (see [`Monitor::snapshot_send`]).
    snapshot_sends: tokio::sync::Semaphore,
    /// Set when it keeps that store compacted.
    compactor: OnceLock<Compactor>,
    /// Set when the journal keeps failed steps' model calls in the store: the team's call log
    /// and the most characters of one text kept.
    failed_calls: OnceLock<(Arc<cohort_llm::recorded::CallLog>, usize)>,
    /// With a journal: the newest version given to a change (ahead of the states' while the
    /// journal commits). A lock of its own: a publisher may wait on a full journal while
    /// holding it, and the journal needs the states' lock, never this one, to drain.
    assigned: Mutex<u64>,
    /// How long the journal's commits took ([`Monitor::commit_timings`]).
    commits: Mutex<Histogram>,
    /// The team's images and sounds (see [`media`]).
    media: media::Media,
    /// Every model call, on its way to the store (see [`record`]); set with a store only.
    recording: OnceLock<Arc<record::Recording>>,
}

/// The upper bounds of the store-commit duration buckets, in seconds.
pub const COMMIT_SECONDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic while applying leaves the states as they were between two changes.
        self.shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

struct Shared {
    /// The newest version applied to the states and sent to subscribers.
    version: u64,
    states: States,
    /// The last snapshot built, as `{"version", "states"}` JSON, with its version.
    snapshot: Option<(u64, Bytes)>,
}

impl Monitor {
    /// `buffer` bounds how many events a slow subscriber may fall behind before it lags.
    pub fn new(buffer: usize) -> Self {
        Self::starting_at(buffer, States::default(), 0)
    }

    fn starting_at(buffer: usize, states: States, version: u64) -> Self {
        let tx = feed::Feed::new(feed::FeedCap {
            events: buffer.max(16),
            bytes: FEED_BYTES,
        });
        let (writing, _) = broadcast::channel(WRITING_BUFFER);
        Monitor {
            inner: Arc::new(Inner {
                writing,
                shared: Mutex::new(Shared {
                    version,
                    states,
                    snapshot: None,
                }),
                tx,
                journal: OnceLock::new(),
                snapshot_sends: tokio::sync::Semaphore::new(SNAPSHOT_SENDS),
                compactor: OnceLock::new(),
                failed_calls: OnceLock::new(),
                assigned: Mutex::new(version),
                commits: Mutex::default(),
                media: media::Media::default(),
                recording: OnceLock::new(),
            }),
        }
    }

    /// A monitor that writes every change to `store` before anyone sees it, starting from
    /// `states` at `version` (what the store holds: empty and 0 for a new store).
    pub fn with_store(
        buffer: usize,
        store: Arc<dyn Store>,
        mut states: States,
        version: u64,
    ) -> Self {
        // What the store holds was counted by the run that made it.
        states.start_tally();
        let m = Self::starting_at(buffer, states, version);
        let journal = Journal::start(Arc::downgrade(&m.inner), store, version);
        let _ = m.inner.journal.set(journal);
        m
    }

    /// How long the journal's commits took so far (in [`COMMIT_SECONDS`] buckets); empty
    /// without a store.
    pub fn commit_timings(&self) -> Histogram {
        self.inner
            .commits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Keeps an image or a sound a tool returned: held in memory (the newest), and with a store
    /// written by the journal before the change that refers to it. Keep it before publishing
    /// that change.
    pub fn keep_blob(&self, blob: cohort_core::call::media::Blob) {
        self.inner
            .media
            .keep(blob, self.inner.journal.get().is_some());
    }

    /// An image or a sound still held in memory (the store may have it when this does not).
    pub fn blob(
        &self,
        id: &cohort_core::call::media::BlobId,
    ) -> Option<Arc<cohort_core::call::media::Blob>> {
        self.inner.media.get(id)
    }

    /// Holds the steps that left their agents (kept for readers) to `bytes`.
    pub fn hold_retired_to(&self, bytes: usize) {
        self.lock().states.hold_retired_to(bytes);
    }

    /// Waits until every change up to `version` is stored (at once without a store); false if
    /// the journal stopped first. Callers bound the wait with their own deadline.
    pub async fn durable(&self, version: u64) -> bool {
        let Some(j) = self.inner.journal.get() else {
            return true;
        };
        let mut rx = j.durable();
        rx.wait_for(|v| *v >= version).await.is_ok()
    }

    /// Resolves once the store refused this monitor's changes for its fence (a node of a
    /// team across machines that lost the team's lease); never without a store.
    pub async fn fenced(&self) {
        match self.inner.journal.get() {
            // A journal that ends otherwise (closed) was never fenced.
            Some(j) => {
                if j.fenced().wait_for(|f| *f).await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending().await,
        }
    }

    /// Compacts `store` (the one this monitor writes to) now and then under `policy`, on a
    /// thread of its own, until the monitor closes or goes. Once only: a second call does
    /// nothing.
    pub fn keep_compacted(&self, store: Arc<dyn Store>, policy: cohort_core::config::Compaction) {
        if self.inner.compactor.get().is_none() {
            let _ = self.inner.compactor.set(Compactor::start(store, policy));
        }
    }

    /// Keeps the model calls of each step that fails (from `calls`, the team's call log, each
    /// text cut to `text_chars`) in the store, with the change that failed it, so they outlive
    /// a restart. Once only; nothing to do without a store.
    pub fn keep_failed_calls(&self, calls: Arc<cohort_llm::recorded::CallLog>, text_chars: usize) {
        let _ = self.inner.failed_calls.set((calls, text_chars));
    }

    /// Records every model call of `calls` (the team's call log) in the store, each agent's
    /// newest within `bytes_per_agent`: the journal writes each before the batch of changes
    /// after it. Once only; nothing to do without a store or with no bytes to keep.
    pub fn record_calls(&self, calls: &cohort_llm::recorded::CallLog, bytes_per_agent: u64) {
        if self.inner.journal.get().is_none() || bytes_per_agent == 0 {
            return;
        }
        let recording = Arc::new(record::Recording::new(bytes_per_agent));
        if self.inner.recording.set(recording.clone()).is_ok() {
            calls.record_to(Box::new(move |call| recording.add(call)));
        }
    }

    /// Stops writing at once, storing nothing of what is queued (none of it was shown): for a
    /// node that lost the team's lease, whose changes are no longer its to store.
    pub fn abandon(&self) {
        if let Some(c) = self.inner.compactor.get() {
            c.stop();
        }
        if let Some(j) = self.inner.journal.get() {
            j.abandon();
        }
    }

    /// Commits what is queued, takes a last snapshot and stops writing (with a store; nothing
    /// to do without one). Changes published afterwards are not stored.
    pub fn close(&self) {
        if let Some(c) = self.inner.compactor.get() {
            c.stop();
        }
        if let Some(j) = self.inner.journal.get() {
            j.close();
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.inner.lock()
    }

    /// Publishes changes in order: each gets the next version, is applied to the states and is
    /// sent to subscribers (in version order: the lock is held while sending). With a store,
    /// that happens once the journal has committed them. Returns the last version given.
    pub fn publish(&self, changes: Vec<Change>) -> u64 {
        self.publish_as(None, changes, None)
    }

    /// Publishes changes, then runs `effect` once they are visible: at once without a store,
    /// after their commit with one (a message is routed only once its record is safe).
    pub fn publish_then(&self, changes: Vec<Change>, effect: Effect) -> u64 {
        self.publish_as(None, changes, Some(effect))
    }

    /// Publishes changes (then runs `effect`, if any, as [`Monitor::publish_then`] does); with
    /// a `writer` (an agent on another node, or SyncState applying what it handed over), the
    /// store refuses their commit unless the agent's lease still has that token.
    pub fn publish_as(
        &self,
        writer: Option<AgentWrite>,
        changes: Vec<Change>,
        effect: Option<Effect>,
    ) -> u64 {
        // Agents publish after every message, mostly nothing: that must cost the journal
        // nothing either.
        if changes.is_empty() && effect.is_none() {
            return self.assigned_version();
        }
        let at = chrono::Utc::now().timestamp_millis();
        if let Some(journal) = self.inner.journal.get() {
            let mut assigned = self.assigned();
            let mut events = Vec::with_capacity(changes.len());
            for change in changes {
                *assigned += 1;
                events.push(Event {
                    version: *assigned,
                    at,
                    change,
                });
            }
            // Queued under the lock, so the journal gets them in version order.
            journal.push(Entry {
                events,
                effect,
                writer,
            });
            return *assigned;
        }
        let mut shared = self.lock();
        for change in changes {
            shared.version += 1;
            shared.states.apply_at(&change, at);
            let event = Event {
                version: shared.version,
                at,
                change,
            };
            // No subscriber is fine: the states still have the change.
            self.inner.tx.send(Arc::new(Published {
                event,
                json: OnceLock::new(),
            }));
        }
        let version = shared.version;
        drop(shared);
        if let Some(effect) = effect {
            effect();
        }
        version
    }

    pub fn subscribe(&self) -> feed::FeedReceiver {
        self.inner.tx.subscribe()
    }

    /// The bytes the live feed's backlog holds now (what its slowest reader has not read).
    pub fn feed_bytes(&self) -> usize {
        self.inner.tx.held().1
    }

    /// Holds the live feed's backlog to `bytes` (a subscriber further behind gets `Lagged`).
    pub fn hold_feed_to(&self, bytes: usize) {
        self.inner.tx.set_bytes(bytes);
    }

    /// Passes on the text so far of an answer a step's model is writing (streamed). It is not
    /// part of the states: the step's result replaces it, and a reader that missed some only
    /// missed a glimpse.
    pub fn writing(&self, agent_id: &AgentId, step_id: &StepId, text: &str) {
        if self.inner.writing.receiver_count() == 0 {
            return;
        }
        let _ = self
            .inner
            .writing
            .send(Arc::new(Writing::new(agent_id, step_id, text)));
    }

    pub fn subscribe_writing(&self) -> broadcast::Receiver<Arc<Writing>> {
        self.inner.writing.subscribe()
    }

    /// Whether anyone takes the answers being written now (a feed is open).
    pub fn writing_watched(&self) -> bool {
        self.inner.writing.receiver_count() > 0
    }

    /// The newest version applied to the states (with a store: committed).
    pub fn version(&self) -> u64 {
        self.lock().version
    }

    /// The newest version given to a change (with a store it may not be committed yet).
    pub fn assigned_version(&self) -> u64 {
        match self.inner.journal.get() {
            Some(_) => *self.assigned(),
            None => self.version(),
        }
    }

    fn assigned(&self) -> MutexGuard<'_, u64> {
        self.inner
            .assigned
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Reads the states (keep `f` short: publishers wait meanwhile).
    pub fn read<R>(&self, f: impl FnOnce(&States) -> R) -> R {
        f(&self.lock().states)
    }

    /// Reads the states with the version they are at.
    pub fn read_at<R>(&self, f: impl FnOnce(&States, u64) -> R) -> R {
        let shared = self.lock();
        f(&shared.states, shared.version)
    }

    /// One state as clients read it.
    pub fn get(&self, kind: StateKind, id: &str) -> Option<Value> {
        self.read(|s| s.json(kind, id))
    }

    /// `{id: state}` for one kind.
    pub fn snapshot(&self, kind: StateKind) -> BTreeMap<String, Value> {
        self.read(|s| s.kind_json(kind).into_iter().collect())
    }

    /// `{"task": {…}, "stage": {…}, "agent": {…}, "step": {…}}`.
    pub fn all(&self) -> Value {
        self.read(States::all_json)
    }

    /// A place among the [`SNAPSHOT_SENDS`] snapshots of a member's view built at once (each is
    /// a copy of what the member sees, built for them alone).
    /// None only if the monitor is shutting down.
    pub async fn snapshot_send(&self) -> Option<tokio::sync::SemaphorePermit<'_>> {
        self.inner.snapshot_sends.acquire().await.ok()
    }

    /// Every state at one version, as the websocket frame `{"type": "snapshot", "version": V,
    /// "states": {…}}`. Built once per version and shared by everyone who asks at that version.
    pub fn snapshot_json(&self) -> (u64, Bytes) {
        let mut shared = self.lock();
        if let Some((v, json)) = &shared.snapshot
            && *v == shared.version
        {
            return (*v, json.clone());
        }
        let version = shared.version;
        // Written straight from the states: a JSON tree of a large team would be several
        // times the size of the frame it becomes.
        let mut out = Vec::with_capacity(4096);
        out.extend_from_slice(
            format!(r#"{{"type":"snapshot","version":{version},"states":"#).as_bytes(),
        );
        if let Err(e) = shared.states.write_all(&mut out) {
            // Not kept: the next reader at this version tries again.
            tracing::error!("the snapshot did not serialise: {e}");
            return (version, Bytes::new());
        }
        out.push(b'}');
        let json = Bytes::from(out);
        shared.snapshot = Some((version, json.clone()));
        (version, json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cohort_core::event::TaskChange;
    use cohort_core::state::TaskState;

    pub(super) fn created(id: &str) -> Change {
        Change::Task(TaskChange::Created {
            task: Box::new(TaskState::new(
                id.into(),
                "n".into(),
                "i".into(),
                "m".into(),
            )),
        })
    }

    #[test]
    fn the_states_follow_the_changes_and_events_carry_growing_versions() {
        let m = Monitor::new(16);
        let mut rx = m.subscribe();
        m.publish(vec![created("t1"), created("t2")]);
        m.publish(vec![Change::Task(TaskChange::Joined {
            task_id: "t1".into(),
            agents: vec!["w".into()],
        })]);
        assert_eq!(m.snapshot(StateKind::Task)["t1"]["task_group"][1], "w");
        let a = rx.try_recv().unwrap();
        let b = rx.try_recv().unwrap();
        assert!(b.event.version > a.event.version);
        assert_eq!(m.version(), 3);
        let json: Value = serde_json::from_slice(b.json()).unwrap();
        assert_eq!(
            (json["kind"].as_str(), json["op"].as_str()),
            (Some("task"), Some("created"))
        );
    }

    #[test]
    fn a_snapshot_is_built_once_per_version() {
        let m = Monitor::new(16);
        m.publish(vec![created("t1")]);
        let (v1, a) = m.snapshot_json();
        let (_, b) = m.snapshot_json();
        assert_eq!(a.as_ptr(), b.as_ptr(), "shared, not rebuilt");
        m.publish(vec![created("t2")]);
        let (v2, c) = m.snapshot_json();
        assert!(v2 > v1);
        let json: Value = serde_json::from_slice(&c).unwrap();
        assert_eq!(json["states"]["task"].as_object().unwrap().len(), 2);
    }
}
