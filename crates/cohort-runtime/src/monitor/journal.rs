//! The monitor's journal: with a store, a change is committed before anyone sees it.
//!
//! `publish` gives changes their versions and queues them (in version order, under the
//! monitor's lock) for the journal's writer thread. The writer takes whatever is queued, up to
//! a batch, appends it to the store in one transaction (group commit: many changes, one sync),
//! and only then applies it to the monitor's states, broadcasts it and runs the effects queued
//! with it (a message routed once its record is safe). A full queue makes publishers wait
//! for the writer: a store that cannot keep up slows the team instead of filling memory.
//!
//! A store that refuses a batch for its fence (a node of a team across machines that lost
//! the team's lease to another node, or a batch holding an agent's changes made under a lease
//! the agent has since been granted to another node under) ends the journal at once: nothing of that batch or after
//! it is shown, and `Journal::fenced` tells the node to stop its team.

use super::{Inner, Published};
use cohort_core::event::{Change, Event, StageChange, StepChange};
use cohort_core::ids::{StageId, StepId, TaskId};
use cohort_store::lease::AgentWrite;
use cohort_store::model_calls::Recorded;
use cohort_store::{SnapshotJson, Store, StoredEvent};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// Something to do once the changes queued with it are committed (and visible).
pub type Effect = Box<dyn FnOnce() + Send>;

/// Changes waiting for the writer, at most this many entries (each one `publish`).
const QUEUE: usize = 8_192;
/// At most this many events per transaction.
const BATCH: usize = 4_096;
/// A snapshot of the states after this many events, once they add up to the last snapshot's
/// size (see [`snapshot_due`]).
pub const SNAPSHOT_EVERY: u64 = 10_000;
/// A snapshot also once the events since the last one add up to as many bytes as it (at least
/// this many): then the events after the newest snapshot, which recovery needs and compaction
/// never prunes, stay within the size of the states, and snapshots cost at most as many bytes
/// as the events they follow. Without it a flood of large messages (16 KB each, copied into
/// steps) would pile up hundreds of megabytes before the next snapshot.
pub const SNAPSHOT_MIN_BYTES: u64 = 8 * 1024 * 1024;

pub(super) struct Entry {
    pub events: Vec<Event>,
    pub effect: Option<Effect>,
    /// The agent's lease the events were written under (an agent on another node).
    pub writer: Option<AgentWrite>,
}

pub(super) enum Item {
    Entry(Entry),
    /// Commit everything queued so far, snapshot, and stop.
    Close,
}

/// The publishers' side of the journal.
pub(super) struct Journal {
    queue: SyncSender<Item>,
    durable: watch::Receiver<u64>,
    /// True once the store refused a batch for its fence.
    fenced: watch::Receiver<bool>,
    /// Set to make the writer stop at once, storing nothing more ([`Journal::abandon`]).
    abandoned: Arc<AtomicBool>,
    writer: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Told (closed) when the writer thread ends.
    ended: std::sync::Mutex<Option<Receiver<()>>>,
}

/// How long closing waits for the writer to store what is queued.
const CLOSE_DEADLINE: Duration = Duration::from_secs(30);

impl Journal {
    /// Starts the writer thread for `inner`'s monitor; `stored` is the last version already in
    /// the store.
    pub(super) fn start(inner: Weak<Inner>, store: Arc<dyn Store>, stored: u64) -> Journal {
        let (queue, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let (durable_tx, durable) = watch::channel(stored);
        let (fenced_tx, fenced) = watch::channel(false);
        let abandoned = Arc::new(AtomicBool::new(false));
        let given_up = abandoned.clone();
        let (ended_tx, ended) = std::sync::mpsc::channel::<()>();
        let writer = std::thread::Builder::new()
            .name("cohort-journal".into())
            .spawn(move || {
                let _ended = ended_tx;
                let wrote = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    write_loop(inner, store, rx, (durable_tx, fenced_tx), &given_up, stored)
                }));
                // Without its journal the team would go on storing nothing: stop the process
                // instead, so that it is restarted on its store and carries on from there.
                if wrote.is_err() {
                    tracing::error!(
                        "the journal failed: the process stops, to carry on from its store \
                         when started again"
                    );
                    std::process::exit(70);
                }
            })
            .expect("start the journal thread");
        Journal {
            queue,
            durable,
            fenced,
            abandoned,
            writer: std::sync::Mutex::new(Some(writer)),
            ended: std::sync::Mutex::new(Some(ended)),
        }
    }

    /// Queues an entry; waits while the queue is full.
    pub(super) fn push(&self, entry: Entry) {
        match self.queue.try_send(Item::Entry(entry)) {
            Ok(()) => {}
            Err(TrySendError::Full(item)) => {
                tracing::debug!("the journal is behind; the publisher waits for the store");
                let _ = self.queue.send(item);
            }
            // A fenced node's changes are refused by the store, an abandoned journal's are not
            // its to store: its team is being stopped.
            Err(TrySendError::Disconnected(_))
                if *self.fenced.borrow() || self.abandoned.load(Ordering::SeqCst) =>
            {
                tracing::debug!("not stored: this node no longer holds the team's lease");
            }
            Err(TrySendError::Disconnected(_)) => {
                tracing::error!("the journal has stopped: a change was not stored");
            }
        }
    }

    pub(super) fn durable(&self) -> watch::Receiver<u64> {
        self.durable.clone()
    }

    /// Turns true once the store refused a batch for its fence.
    pub(super) fn fenced(&self) -> watch::Receiver<bool> {
        self.fenced.clone()
    }

    /// Commits what is queued, takes a last snapshot and stops the writer, waiting at most
    /// [`CLOSE_DEADLINE`]: a store that cannot take the last changes does not keep the process
    /// from stopping (what it did not store is lost as in a crash, and a start carries on
    /// from what it has).
    /// Stops the writer at once: what is queued, and a commit it is retrying, are dropped,
    /// as in a crash (a node that lost the team's lease: its changes are no longer its to
    /// store, and none of them was shown). Waits for the writer as [`Journal::close`] does.
    pub(super) fn abandon(&self) {
        self.abandoned.store(true, Ordering::SeqCst);
        self.close();
    }

    pub(super) fn close(&self) {
        let _ = self.queue.send(Item::Close);
        let ended = self.ended.lock().ok().and_then(|mut e| e.take());
        let Some(ended) = ended else {
            return;
        };
        match ended.recv_timeout(CLOSE_DEADLINE) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                if let Some(w) = self.writer.lock().ok().and_then(|mut w| w.take()) {
                    let _ = w.join();
                }
            }
            Err(RecvTimeoutError::Timeout) => tracing::error!(
                "the store did not take the last changes within {CLOSE_DEADLINE:?}; stopping \
                 without them (a start carries on from what it stored)"
            ),
        }
    }
}

fn write_loop(
    inner: Weak<Inner>,
    store: Arc<dyn Store>,
    rx: Receiver<Item>,
    (durable, fenced): (watch::Sender<u64>, watch::Sender<bool>),
    abandoned: &AtomicBool,
    stored: u64,
) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("the journal could not start its runtime: {e}");
            return;
        }
    };
    let mut since_snapshot = 0u64;
    // Bytes stored since the last snapshot, and that snapshot's size (0 before the first).
    let (mut since_bytes, mut snapshot_bytes) = (0u64, 0u64);
    let mut closing = false;
    // The newest version committed: the durable mark only moves forward.
    let mut committed = stored;
    while !closing {
        // Wait for work; wake now and then to notice a monitor that went away.
        let first = match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(item) => item,
            Err(RecvTimeoutError::Timeout) => {
                if inner.strong_count() == 0 {
                    break;
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let (entries, count, close) = batch(first, &rx);
        closing = close;
        if abandoned.load(Ordering::SeqCst) {
            return;
        }
        let Some(inner) = inner.upgrade() else {
            break;
        };
        // The blobs the batch's results refer to go first; the model calls it came from are
        // stored with it, in its transaction (alone when no change came with them).
        keep_blobs(&rt, store.as_ref(), &inner);
        let recorded = recorded_calls(&inner);
        if entries.is_empty() {
            keep_model_calls(&rt, store.as_ref(), &inner, recorded);
        } else {
            let stored = with_tasks(&inner, &entries);
            let writers = writers(&entries);
            let batch = (&stored[..], &writers[..], &recorded);
            match timed_commit(&rt, store.as_ref(), &inner, batch, abandoned) {
                Ok(bytes) => since_bytes += bytes,
                Err(NotStored::Abandoned) => return,
                Err(NotStored::Fenced(e)) => {
                    tracing::error!("{e}; this node stops its team");
                    fenced.send_replace(true);
                    return;
                }
            }
            keep_failed_calls(&rt, store.as_ref(), &inner, &stored);
            committed = stored.last().map_or(committed, |e| e.event.version);
            reveal(&inner, entries);
            durable.send_replace(committed);
            since_snapshot += count as u64;
        }
        let due = snapshot_due(since_snapshot, since_bytes, snapshot_bytes);
        if due || (closing && since_snapshot > 0) {
            snapshot_bytes = timed_snapshot(&rt, store.as_ref(), &inner, since_snapshot)
                .unwrap_or(snapshot_bytes);
            (since_snapshot, since_bytes) = (0, 0);
        }
    }
}

/// [`commit`], with how long a commit that succeeded took noted in the monitor's commit
/// timings (`/metrics`).
fn timed_commit(
    rt: &tokio::runtime::Runtime,
    store: &dyn Store,
    inner: &Inner,
    batch: (&[StoredEvent], &[AgentWrite], &Recorded),
    abandoned: &AtomicBool,
) -> Result<u64, NotStored> {
    let began = std::time::Instant::now();
    let done = commit(rt, store, batch, abandoned);
    if done.is_ok() {
        inner
            .commits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .observe(super::COMMIT_SECONDS, began.elapsed().as_secs_f64());
    }
    done
}

/// The entries waiting, from `first` on, up to [`BATCH`] events or a close (which ends the
/// batch); with how many events they hold and whether the journal closes after them.
fn batch(first: Item, rx: &Receiver<Item>) -> (Vec<Entry>, usize, bool) {
    let mut entries = Vec::new();
    let mut count = 0;
    let mut closing = false;
    let mut next = Some(first);
    while let Some(item) = next.take() {
        match item {
            Item::Close => closing = true,
            Item::Entry(e) => {
                count += e.events.len();
                entries.push(e);
            }
        }
        if closing || count >= BATCH {
            break;
        }
        next = rx.try_recv().ok();
    }
    (entries, count, closing)
}

/// Whether a snapshot is due after `events` events of `bytes` bytes since the last one, which
/// took `snapshot_bytes` (0 before the first): once the events add up to its size, and they
/// are [`SNAPSHOT_EVERY`] events or [`SNAPSHOT_MIN_BYTES`] bytes. So the snapshots cost at
/// most the bytes of the events they follow, and a start replays events worth at most the
/// snapshot's size (or 8 MB). A large team's states (10 MB for 1,000 agents at work) taken
/// every 10,000 small events made the journal, which commits nothing while it writes one
/// (100–180 ms), spend a quarter of a wide goal writing snapshots; taken every half of their
/// size, an eighth.
pub fn snapshot_due(events: u64, bytes: u64, snapshot_bytes: u64) -> bool {
    bytes >= snapshot_bytes && (events >= SNAPSHOT_EVERY || bytes >= SNAPSHOT_MIN_BYTES)
}

/// [`snapshot`], its size and time logged (at debug level); its size, None when it was not
/// stored (logged as an error).
fn timed_snapshot(
    rt: &tokio::runtime::Runtime,
    store: &dyn Store,
    inner: &Inner,
    events: u64,
) -> Option<u64> {
    let started = std::time::Instant::now();
    match snapshot(rt, store, inner) {
        Ok(bytes) => {
            let took = started.elapsed();
            tracing::debug!(
                "a snapshot of {bytes} bytes, {events} events after the last, took {took:?}"
            );
            Some(bytes)
        }
        Err(e) => {
            tracing::error!("a snapshot of the states was not stored: {e}");
            None
        }
    }
}

/// Stores a snapshot of the states as they are; its size in bytes.
fn snapshot(
    rt: &tokio::runtime::Runtime,
    store: &dyn Store,
    inner: &Inner,
) -> Result<u64, cohort_store::StoreError> {
    // Written straight from the states under the lock: a copy of the whole team beside the
    // team would double the memory a snapshot costs.
    let (version, json) = {
        let shared = inner.lock();
        let json = SnapshotJson::written(|parts| shared.states.write_record(parts));
        (shared.version, json)
    };
    match json {
        Ok(json) => rt.block_on(store.put_snapshot(version, json)),
        Err(e) => Err(cohort_store::StoreError::BadSnapshot {
            version: version as i64,
            why: e.to_string(),
        }),
    }
}

/// The events of a batch as the store keeps them, each with the task it belongs to (a step's
/// task from the states, or from a step added earlier in the same batch).
fn with_tasks(inner: &Inner, entries: &[Entry]) -> Vec<StoredEvent> {
    let shared = inner.lock();
    let mut added: HashMap<&StepId, &TaskId> = HashMap::new();
    let mut stages_added: HashMap<&StageId, &TaskId> = HashMap::new();
    let mut out = Vec::with_capacity(entries.iter().map(|e| e.events.len()).sum());
    for e in entries.iter().flat_map(|e| &e.events) {
        let task_id = match &e.change {
            Change::Step(StepChange::Added { step, .. }) => {
                added.insert(&step.step_id, &step.task_id);
                Some(step.task_id.clone())
            }
            // The steps of one change are of one piece of work, so of one task.
            Change::Step(
                StepChange::Started { step_id, .. } | StepChange::Updated { step_id, .. },
            ) => task_of(step_id, &added, &shared.states),
            Change::Step(
                StepChange::Removed { step_ids, .. } | StepChange::CutLoose { step_ids, .. },
            ) => step_ids
                .first()
                .and_then(|id| task_of(id, &added, &shared.states)),
            Change::Stage(StageChange::Added { stage, .. }) => {
                stages_added.insert(&stage.stage_id, &stage.task_id);
                Some(stage.task_id.clone())
            }
            Change::Stage(
                StageChange::State { stage_id, .. }
                | StageChange::Agent { stage_id, .. }
                | StageChange::Completion { stage_id, .. },
            ) => stages_added
                .get(stage_id)
                .map(|t| (*t).clone())
                .or_else(|| {
                    shared
                        .states
                        .stages
                        .get(stage_id)
                        .map(|s| s.task_id.clone())
                }),
            other => other.task_id().cloned(),
        };
        out.push(StoredEvent {
            event: e.clone(),
            task_id,
        });
    }
    out
}

fn task_of(
    id: &StepId,
    added: &HashMap<&StepId, &TaskId>,
    states: &cohort_core::event::States,
) -> Option<TaskId> {
    added
        .get(id)
        .map(|t| (*t).clone())
        .or_else(|| states.step(id).map(|s| s.task_id.clone()))
}

/// Appends a batch, retrying (with growing pauses, each failure logged) until the store takes
/// it: nothing is shown before it is stored, and nothing is dropped. Returns the bytes stored
/// (0 for a commit whose answer was lost but which landed), or the store's refusal for the
/// fence, which no retry can change, or that the journal was abandoned while retrying.
/// Why a batch was not stored, once retrying is no use.
enum NotStored {
    /// The store refused the node's fence: another node holds the team's lease.
    Fenced(cohort_store::StoreError),
    /// The journal was abandoned (its node lost the lease) while the store failed.
    Abandoned,
}

/// The agents' leases a batch's entries were written under, each once.
fn writers(entries: &[Entry]) -> Vec<AgentWrite> {
    let mut writers: Vec<AgentWrite> = entries.iter().filter_map(|e| e.writer.clone()).collect();
    writers.sort_by(|a, b| (&a.agent, a.token).cmp(&(&b.agent, b.token)));
    writers.dedup();
    writers
}

fn commit(
    rt: &tokio::runtime::Runtime,
    store: &dyn Store,
    (events, writers, recorded): (&[StoredEvent], &[AgentWrite], &Recorded),
    abandoned: &AtomicBool,
) -> Result<u64, NotStored> {
    let mut pause = Duration::from_millis(50);
    let mut events = events;
    loop {
        let appended = if recorded.calls.is_empty() && recorded.trim.agents.is_empty() {
            rt.block_on(store.append_as(events, writers))
        } else {
            rt.block_on(store.append_recorded(events, writers, recorded))
        };
        let e = match appended {
            Ok(bytes) => return Ok(bytes),
            Err(e @ cohort_store::StoreError::Fenced { .. }) => return Err(NotStored::Fenced(e)),
            Err(e) => e,
        };
        // A commit whose answer was lost may have landed (the store then knows a newer last
        // version): what is stored already is not sent again.
        if let Ok(last) = rt.block_on(store.last_version()) {
            events = &events[events.partition_point(|e| e.event.version <= last)..];
            if events.is_empty() {
                return Ok(0);
            }
        }
        tracing::error!(
            "storing {} events failed (retrying in {pause:?}): {e}",
            events.len()
        );
        std::thread::sleep(pause);
        if abandoned.load(Ordering::SeqCst) {
            return Err(NotStored::Abandoned);
        }
        pause = (pause * 2).min(Duration::from_secs(5));
    }
}

/// Stores the model calls of the steps a committed batch failed (when the monitor keeps them,
/// see [`super::Monitor::keep_failed_calls`]), each text capped: the call log is memory only.
/// A call not stored is logged and given up on: the step's failure itself is stored.
fn keep_failed_calls(
    rt: &tokio::runtime::Runtime,
    store: &dyn Store,
    inner: &Inner,
    events: &[StoredEvent],
) {
    let Some((calls, chars)) = inner.failed_calls.get() else {
        return;
    };
    for e in events {
        let Change::Step(StepChange::Updated {
            step_id, update, ..
        }) = &e.event.change
        else {
            continue;
        };
        if update.execution_state != Some(cohort_core::state::StepExecutionState::Failed) {
            continue;
        }
        let made = calls.of_step(step_id);
        if made.is_empty() {
            continue;
        }
        let mut kept = serde_json::to_value(&made).unwrap_or_default();
        cohort_core::state::cap_value(&mut kept, *chars);
        if let Err(err) = rt.block_on(store.put_step_calls(step_id, kept.to_string())) {
            tracing::warn!(step = %step_id, "the failed step's model calls were not stored: {err}");
        }
    }
}

/// The model calls recorded since the last batch (see [`super::Monitor::record_calls`]), to
/// store with it; none when the team records none.
fn recorded_calls(inner: &Inner) -> Recorded {
    inner
        .recording
        .get()
        .map(|r| {
            let (calls, trim) = r.take();
            Recorded { calls, trim }
        })
        .unwrap_or_default()
}

/// Stores recorded model calls that came with no change. Calls not stored are logged and
/// given up on: the run goes on, its replay will lack them.
fn keep_model_calls(
    rt: &tokio::runtime::Runtime,
    store: &dyn Store,
    inner: &Inner,
    recorded: Recorded,
) {
    if recorded.calls.is_empty() {
        return;
    }
    let n = recorded.calls.len();
    if let Err(err) = rt.block_on(store.put_model_calls(recorded.calls, recorded.trim)) {
        tracing::warn!("{n} model calls were not recorded: {err}");
        // The system prompts they carried may be missing too: the next calls store them.
        if let Some(r) = inner.recording.get() {
            r.forget_stored_texts();
        }
    }
}

/// Stores the images and sounds kept since the last batch (see [`super::Monitor::keep_blob`]).
/// One not stored is logged and given up on: the result that refers to it is stored anyway,
/// and a reader is told the blob is no longer kept.
fn keep_blobs(rt: &tokio::runtime::Runtime, store: &dyn Store, inner: &Inner) {
    for blob in inner.media.take_pending() {
        let id = blob.id.clone();
        if let Err(err) = rt.block_on(store.put_blob((*blob).clone())) {
            tracing::warn!(blob = %id, "an image or sound a tool returned was not stored: {err}");
        }
    }
}

/// Applies committed events to the states and broadcasts them, then runs their effects.
fn reveal(inner: &Inner, entries: Vec<Entry>) {
    let mut effects = Vec::new();
    {
        let mut shared = inner.lock();
        for entry in entries {
            for event in entry.events {
                shared.version = event.version;
                shared.states.apply_at(&event.change, event.at);
                inner.tx.send(Arc::new(Published {
                    event,
                    json: OnceLock::new(),
                }));
            }
            effects.extend(entry.effect);
        }
    }
    for effect in effects {
        effect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_due_once_the_events_add_up_to_its_size() {
        const MB: u64 = 1 << 20;
        // The first: after 10,000 events, whatever their size, or 8 MB of them.
        assert!(!snapshot_due(SNAPSHOT_EVERY - 1, MB, 0));
        assert!(snapshot_due(SNAPSHOT_EVERY, 1, 0));
        assert!(snapshot_due(1, SNAPSHOT_MIN_BYTES, 0));
        // A small team's (1 MB): every 10,000 events once they are worth 1 MB.
        assert!(snapshot_due(SNAPSHOT_EVERY, MB, MB));
        assert!(!snapshot_due(SNAPSHOT_EVERY, MB - 1, MB));
        assert!(!snapshot_due(SNAPSHOT_EVERY - 1, MB, MB));
        // A large team's (10 MB): neither 10,000 small events nor 8 MB are enough, 10 MB are.
        assert!(!snapshot_due(3 * SNAPSHOT_EVERY, 5 * MB, 10 * MB));
        assert!(!snapshot_due(
            3 * SNAPSHOT_EVERY,
            SNAPSHOT_MIN_BYTES,
            10 * MB
        ));
        assert!(snapshot_due(3 * SNAPSHOT_EVERY, 10 * MB, 10 * MB));
        // Large events: as soon as they add up to its size, at least 8 MB.
        assert!(snapshot_due(100, SNAPSHOT_MIN_BYTES, MB));
        assert!(!snapshot_due(100, SNAPSHOT_MIN_BYTES - 1, MB));
        assert!(snapshot_due(100, 12 * MB, 12 * MB));
    }
}
