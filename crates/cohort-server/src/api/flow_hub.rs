//! The hub behind the task event streams (`GET /api/task/{id}/events`): one reader of the
//! monitor's changes and of the answers being written, keeping a [`TaskFlow`] for each task
//! someone follows, with a numbered log of the events it told, so a client that reconnects with
//! the last id it got is sent what it missed.
//!
//! It costs nothing while nobody follows a task: it starts with the first follower, and a task
//! nobody has followed for [`LINGER`] is let go. Everything it holds is capped: at most
//! [`FOLLOWED_TASKS`] tasks, each log [`LOG_EVENTS`] events and [`LOG_BYTES`] bytes, each
//! follower's backlog [`FOLLOWER_BACKLOG`] events. A follower that falls behind is sent what
//! it missed from the log, or, when the log no longer holds it, a reset and the whole flow
//! again; the hub itself falling behind the monitor catches its folds up from the states (the
//! same transitions, never a silent gap). It never holds the runtime back: it reads the
//! monitor's feeds, whose senders never wait.

use bytes::Bytes;
use cohort_core::event::States;
use cohort_core::event::flow::{FlowEvent, FlowRisk, TaskFlow};
use cohort_core::ids::{StepId, TaskId};
use cohort_runtime::monitor::Monitor;
use cohort_runtime::monitor::feed::RecvError;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;

/// Tasks followed at once; one more is refused until one is let go.
pub const FOLLOWED_TASKS: usize = 64;
/// Events of one task's log kept for reconnecting clients, and their bytes.
pub const LOG_EVENTS: usize = 2_048;
pub const LOG_BYTES: usize = 1 << 20;
/// Events one follower may fall behind by before it is sent them from the log.
pub const FOLLOWER_BACKLOG: usize = 256;
/// How long a task nobody follows any more is kept (its log, for a client reconnecting).
pub const LINGER: Duration = Duration::from_secs(120);

/// The plan's risk of a task as the states tell it (its agents and their tool servers).
pub type RiskOf = Arc<dyn Fn(&States, &TaskId) -> Option<FlowRisk> + Send + Sync>;

/// One event as the hub told it: its name, its JSON (made once for every follower) and, for
/// events of the log, its id (`{epoch}-{seq}`).
#[derive(Debug)]
pub struct Told {
    pub id: Option<String>,
    pub seq: u64,
    pub event: FlowEvent,
    pub json: Bytes,
}

impl Told {
    fn new(event: FlowEvent, id: Option<String>, seq: u64) -> Told {
        let json = Bytes::from(serde_json::to_vec(&event).unwrap_or_default());
        Told {
            id,
            seq,
            event,
            json,
        }
    }
}

/// Why a task cannot be followed.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error("no task `{0}` in memory")]
    NoSuchTask(TaskId),
    #[error("{FOLLOWED_TASKS} tasks are followed already; try again once one is let go")]
    TooMany,
}

/// What a new follower gets: the events to send first, whether they start the flow again
/// (the id it had is no longer held), and the live events after them.
pub struct Following {
    pub backlog: Vec<Arc<Told>>,
    pub reset: bool,
    pub live: broadcast::Receiver<Arc<Told>>,
    pub guard: FollowerGuard,
}

/// Counts a follower of a task while it lives.
pub struct FollowerGuard {
    hub: Weak<FlowHub>,
    task: TaskId,
}

impl Drop for FollowerGuard {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.upgrade()
            && let Some(e) = hub.lock().entries.get_mut(&self.task)
        {
            e.followers -= 1;
            e.idle_since = Some(Instant::now());
        }
    }
}

struct Entry {
    flow: TaskFlow,
    /// The fold was caught up from the states at this version: changes up to it are in it.
    from_version: u64,
    log: VecDeque<Arc<Told>>,
    log_bytes: usize,
    /// The seq the next event gets (the first is 1).
    next: u64,
    tx: broadcast::Sender<Arc<Told>>,
    followers: usize,
    idle_since: Option<Instant>,
}

impl Entry {
    fn tell(&mut self, epoch: u64, events: Vec<FlowEvent>) {
        for event in events {
            let seq = self.next;
            self.next += 1;
            let told = Arc::new(Told::new(event, Some(format!("{epoch}-{seq}")), seq));
            self.log_bytes += told.json.len();
            self.log.push_back(told.clone());
            while self.log.len() > LOG_EVENTS || self.log_bytes > LOG_BYTES {
                let Some(old) = self.log.pop_front() else {
                    break;
                };
                self.log_bytes -= old.json.len();
            }
            // No follower is fine: the log has it.
            let _ = self.tx.send(told);
        }
    }

    /// The events after `seq`, if the log still holds every one of them.
    fn after(&self, seq: u64) -> Option<Vec<Arc<Told>>> {
        let first = self.log.front().map_or(self.next, |t| t.seq);
        (seq + 1 >= first && seq < self.next)
            .then(|| self.log.iter().filter(|t| t.seq > seq).cloned().collect())
    }

    /// The whole flow so far, the last event carrying the newest id (so a reconnect goes on
    /// from there).
    fn replay(&self, epoch: u64) -> Vec<Arc<Told>> {
        let events = self.flow.replay();
        let n = events.len();
        let head = self.next - 1;
        events
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                let id = (i + 1 == n).then(|| format!("{epoch}-{head}"));
                Arc::new(Told::new(e, id, head))
            })
            .collect()
    }
}

#[derive(Default)]
struct HubState {
    entries: HashMap<TaskId, Entry>,
}

impl HubState {
    /// The followed task whose fold follows step `id` (at most [`FOLLOWED_TASKS`] to ask).
    fn entry_of_step(&mut self, id: &StepId) -> Option<&mut Entry> {
        self.entries.values_mut().find(|e| e.flow.has_step(id))
    }
}

/// See the module docs.
pub struct FlowHub {
    monitor: Monitor,
    risk: RiskOf,
    /// Told apart from another run's ids: a client's id from before a restart is not ours.
    epoch: u64,
    state: Mutex<HubState>,
}

impl FlowHub {
    /// A hub reading `monitor`, on a task of its own until the hub is dropped.
    pub fn start(monitor: Monitor, risk: RiskOf) -> Arc<FlowHub> {
        let epoch = chrono::Utc::now().timestamp_millis().unsigned_abs();
        let hub = Arc::new(FlowHub {
            monitor,
            risk,
            epoch,
            state: Mutex::default(),
        });
        // Subscribed before anyone follows: a fold caught up from the states misses nothing
        // that comes after them.
        let feeds = (hub.monitor.subscribe(), hub.monitor.subscribe_writing());
        tokio::spawn(read_loop(Arc::downgrade(&hub), feeds));
        hub
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Follows `task`, going on after the event of id `last` (`{epoch}-{seq}`) when given.
    pub fn follow(
        self: &Arc<Self>,
        task: &TaskId,
        last: Option<&str>,
    ) -> Result<Following, FollowError> {
        let mut state = self.lock();
        if !state.entries.contains_key(task) {
            if state.entries.len() >= FOLLOWED_TASKS && !forget_idle(&mut state, Duration::ZERO) {
                return Err(FollowError::TooMany);
            }
            let entry = self.new_entry(task)?;
            state.entries.insert(task.clone(), entry);
        }
        let entry = state.entries.get_mut(task).expect("inserted above");
        let resumed = last
            .and_then(|l| l.split_once('-'))
            .filter(|(epoch, _)| epoch.parse() == Ok(self.epoch))
            .and_then(|(_, seq)| seq.parse().ok())
            .and_then(|seq| entry.after(seq));
        let reset = last.is_some() && resumed.is_none();
        let backlog = resumed.unwrap_or_else(|| entry.replay(self.epoch));
        entry.followers += 1;
        entry.idle_since = None;
        Ok(Following {
            backlog,
            reset,
            live: entry.tx.subscribe(),
            guard: FollowerGuard {
                hub: Arc::downgrade(self),
                task: task.clone(),
            },
        })
    }

    /// The events of `task` after `seq`, if the log still holds them (for a follower that fell
    /// behind); else its whole flow again.
    pub fn catch_up(&self, task: &TaskId, seq: u64) -> (Vec<Arc<Told>>, bool) {
        let state = self.lock();
        let Some(entry) = state.entries.get(task) else {
            return (Vec::new(), true);
        };
        match entry.after(seq) {
            Some(events) => (events, false),
            None => (entry.replay(self.epoch), true),
        }
    }

    fn new_entry(&self, task: &TaskId) -> Result<Entry, FollowError> {
        let mut flow = TaskFlow::new(task.clone());
        let from_version = self.monitor.read_at(|s, version| {
            let t = s
                .tasks
                .get(task)
                .ok_or_else(|| FollowError::NoSuchTask(task.clone()))?;
            let risk = || (self.risk)(s, task);
            flow.catch_up(Some(t), steps_of(s, task), &risk);
            Ok(version)
        })?;
        Ok(Entry {
            flow,
            from_version,
            log: VecDeque::new(),
            log_bytes: 0,
            next: 1,
            tx: broadcast::channel(FOLLOWER_BACKLOG).0,
            followers: 0,
            idle_since: Some(Instant::now()),
        })
    }

    /// One change: the events it means for the task it belongs to, if that task is followed.
    fn on_change(&self, version: u64, change: &cohort_core::event::Change) {
        use cohort_core::event::{Change, StepChange};
        let mut state = self.lock();
        if state.entries.is_empty() {
            return;
        }
        let entry = match change {
            Change::Step(StepChange::Added { step, .. }) => state.entries.get_mut(&step.task_id),
            Change::Step(s) => step_of(s).and_then(|id| state.entry_of_step(id)),
            _ => change.task_id().and_then(|t| state.entries.get_mut(t)),
        };
        let Some(entry) = entry.filter(|e| version > e.from_version) else {
            return;
        };
        let task = entry.flow.task_id().clone();
        let risk = || self.monitor.read(|s| (self.risk)(s, &task));
        let events = entry.flow.apply(change, &risk);
        entry.tell(self.epoch, events);
    }

    /// An answer being written: a TEXT_ADD for a followed task's step.
    fn on_writing(&self, step: &StepId, text: &str) {
        let mut state = self.lock();
        if let Some(entry) = state.entry_of_step(step)
            && let Some(event) = entry.flow.text(step, text)
        {
            entry.tell(self.epoch, vec![event]);
        }
    }

    /// The hub fell behind the monitor: every fold is caught up from the states, telling what
    /// moved meanwhile.
    fn resync(&self) {
        let mut state = self.lock();
        self.monitor.read_at(|s, version| {
            for (task, entry) in state.entries.iter_mut() {
                let risk = || (self.risk)(s, task);
                let events = entry
                    .flow
                    .catch_up(s.tasks.get(task), steps_of(s, task), &risk);
                entry.from_version = version;
                entry.tell(self.epoch, events);
            }
        });
    }

    fn forget_idle(&self) {
        forget_idle(&mut self.lock(), LINGER);
    }
}

/// Lets go of the tasks nobody has followed for `linger`; true if one was.
fn forget_idle(state: &mut HubState, linger: Duration) -> bool {
    let before = state.entries.len();
    state
        .entries
        .retain(|_, e| e.followers > 0 || e.idle_since.is_none_or(|t| t.elapsed() < linger));
    state.entries.len() < before
}

/// A task's steps in the order they were made.
fn steps_of<'a>(s: &'a States, task: &TaskId) -> Vec<&'a cohort_core::state::StepState> {
    s.ids(cohort_core::event::StateKind::Step, Some(task))
        .iter()
        .filter_map(|id| s.step(&StepId::from(id.as_str())))
        .collect()
}

fn step_of(s: &cohort_core::event::StepChange) -> Option<&StepId> {
    use cohort_core::event::StepChange;
    match s {
        StepChange::Started { step_id, .. } | StepChange::Updated { step_id, .. } => Some(step_id),
        _ => None,
    }
}

async fn read_loop(
    hub: Weak<FlowHub>,
    (mut events, mut writing): (
        cohort_runtime::monitor::feed::FeedReceiver,
        broadcast::Receiver<Arc<cohort_runtime::monitor::Writing>>,
    ),
) {
    let mut sweep = tokio::time::interval(LINGER / 4);
    loop {
        tokio::select! {
            // An answer's whole text is told before the change that ends its step is
            // published: taking texts first keeps the last delta before the step's end.
            biased;
            w = writing.recv() => {
                let Some(hub) = hub.upgrade() else { return };
                match w {
                    Ok(w) => hub.on_writing(&w.step_id, &w.text),
                    // A text missed is sent with the next one: deltas go on from what was told.
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
            ev = events.recv() => {
                let Some(hub) = hub.upgrade() else { return };
                match ev {
                    Ok(p) => hub.on_change(p.event.version, &p.event.change),
                    Err(RecvError::Lagged(_)) => {
                        events = events.resubscribe();
                        hub.resync();
                    }
                    Err(RecvError::Closed) => return,
                }
            }
            _ = sweep.tick() => {
                let Some(hub) = hub.upgrade() else { return };
                hub.forget_idle();
            }
        }
    }
}
