//! The monitor writing ahead to a real store (SQLite in a file): a change is visible (states,
//! subscribers, effects) only once committed; everything published is stored in version order;
//! closing takes a snapshot the states can be rebuilt from; a store that fails for a while
//! loses nothing.

use crate::support::scratch;

use cohort::event::{Change, Event, States, TaskChange};
use cohort::monitor::Monitor;
use cohort::state::{TaskState, TokenUsage};
use cohort::store::{Snapshot, SqlStore, Store, StoreError, StoredEvent};
use futures::future::BoxFuture;
use scratch::Scratch;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

fn created(id: &str) -> Change {
    Change::Task(TaskChange::Created {
        task: Box::new(TaskState::new(
            id.into(),
            "n".into(),
            "i".into(),
            "m".into(),
        )),
    })
}

fn tokens(id: &str, n: u64) -> Change {
    Change::Task(TaskChange::Tokens {
        task_id: id.into(),
        usage: TokenUsage::new(n, 0),
    })
}

/// A fresh folder and the store file in it; the folder goes when its guard is dropped.
fn db(name: &str) -> (Scratch, std::path::PathBuf) {
    let dir = Scratch::new(&format!("journal-{name}"));
    let file = dir.join("team.db");
    (dir, file)
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .unwrap_or_else(|_| panic!("{what} took over 20 s"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_are_stored_before_anyone_sees_them_and_a_snapshot_rebuilds_the_states() {
    let (_dir, file) = db("ahead");
    let store = Arc::new(SqlStore::open_sqlite(&file).await.unwrap());
    let m = Monitor::with_store(1_024, store.clone(), States::default(), 0);
    let mut rx = m.subscribe();
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let v = m.publish_then(
        vec![created("t1"), tokens("t1", 5)],
        Box::new({
            let m = m.clone();
            move || {
                // Runs once visible: the states already hold what was published with it.
                let _ = seen_tx.send(m.read(|s| s.tasks.contains_key(&"t1".into())));
            }
        }),
    );
    assert_eq!(v, 2);
    assert!(within("the commit", m.durable(v)).await);
    // Stored, in order, by the time it is durable.
    let stored = store.events_after(0, 10).await.unwrap();
    assert_eq!(stored.iter().map(|e| e.version).collect::<Vec<_>>(), [1, 2]);
    assert!(seen_rx.recv_timeout(Duration::from_secs(10)).unwrap());
    let first = within("the broadcast", rx.recv()).await.unwrap();
    assert_eq!(first.event, stored[0], "subscribers get what was stored");

    // Many small publishes from several threads: every one stored once, versions 1..=n.
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let m = m.clone();
            std::thread::spawn(move || {
                for i in 0..500u64 {
                    m.publish(vec![tokens("t1", t * 1_000 + i)]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let last = m.publish(vec![created("t2")]);
    assert_eq!(last, 2 + 2_000 + 1);
    assert!(within("the commit", m.durable(last)).await);
    let all = store.events_after(0, 10_000).await.unwrap();
    assert_eq!(
        all.iter().map(|e| e.version).collect::<Vec<_>>(),
        (1..=last).collect::<Vec<_>>()
    );
    let t1: cohort::ids::TaskId = "t1".into();
    assert_eq!(
        store.task_events(&t1, 0, 10_000).await.unwrap().len(),
        2_002
    );

    // Closing commits and snapshots: the states rebuilt from the store are the monitor's.
    m.close();
    let Snapshot { version, states } = store.latest_snapshot().await.unwrap().unwrap();
    assert_eq!(version, last);
    assert_eq!(states.into_states().all_json(), m.all());
}

/// A real SQLite store whose first appends fail, as a store that is briefly unreachable.
struct Flaky {
    inner: SqlStore,
    failures_left: AtomicUsize,
    /// Refuse every append as a store refuses a node that lost the team's lease.
    fenced: bool,
}

impl Store for Flaky {
    fn append_as<'a>(
        &'a self,
        events: &'a [StoredEvent],
        writers: &'a [cohort::store::lease::AgentWrite],
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        if self.fenced {
            return Box::pin(async {
                Err(StoreError::Fenced {
                    resource: "team".into(),
                    token: 1,
                    held_by: "b".into(),
                    token_now: 2,
                })
            });
        }
        if self
            .failures_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Box::pin(async { Err(StoreError::Query(sqlx::Error::PoolTimedOut)) });
        }
        self.inner.append_as(events, writers)
    }
    fn put_snapshot(
        &self,
        version: u64,
        json: cohort::store::SnapshotJson,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.inner.put_snapshot(version, json)
    }
    fn latest_snapshot(&self) -> BoxFuture<'_, Result<Option<Snapshot>, StoreError>> {
        self.inner.latest_snapshot()
    }
    fn events_after(&self, v: u64, limit: usize) -> BoxFuture<'_, Result<Vec<Event>, StoreError>> {
        self.inner.events_after(v, limit)
    }
    fn task_events<'a>(
        &'a self,
        t: &'a cohort::ids::TaskId,
        v: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<Event>, StoreError>> {
        self.inner.task_events(t, v, limit)
    }
    fn last_version(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.inner.last_version()
    }
    fn put_session<'a>(
        &'a self,
        s: &'a cohort::store::StoredSession,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.put_session(s)
    }
    fn delete_session<'a>(&'a self, token_hash: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.delete_session(token_hash)
    }
    fn live_sessions(
        &self,
        now: i64,
    ) -> BoxFuture<'_, Result<Vec<cohort::store::StoredSession>, StoreError>> {
        self.inner.live_sessions(now)
    }
    fn archived<'a>(
        &'a self,
        t: &'a cohort::ids::TaskId,
    ) -> BoxFuture<'a, Result<Option<cohort::store::ArchivedTask>, StoreError>> {
        self.inner.archived(t)
    }
    fn archived_after<'a>(
        &'a self,
        after: Option<&'a cohort::ids::TaskId>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<cohort::store::ArchivedTask>, StoreError>> {
        self.inner.archived_after(after, limit)
    }
    fn last_compaction(
        &self,
    ) -> BoxFuture<'_, Result<Option<cohort::store::Compacted>, StoreError>> {
        self.inner.last_compaction()
    }
    fn compact<'a>(
        &'a self,
        policy: &'a cohort::config::Compaction,
        stop: &'a std::sync::atomic::AtomicBool,
    ) -> BoxFuture<'a, Result<cohort::store::Compacted, StoreError>> {
        self.inner.compact(policy, stop)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_fails_for_a_while_delays_changes_and_loses_none() {
    let (_dir, file) = db("flaky");
    let store = Arc::new(Flaky {
        inner: SqlStore::open_sqlite(&file).await.unwrap(),
        failures_left: AtomicUsize::new(3),
        fenced: false,
    });
    let m = Monitor::with_store(1_024, store.clone(), States::default(), 0);
    let v = m.publish(vec![created("t1")]);
    // Not visible while the store refuses it.
    assert_eq!(m.version(), 0);
    assert!(m.read(|s| s.tasks.is_empty()));
    assert!(within("the retried commit", m.durable(v)).await);
    assert_eq!(
        store.failures_left.load(Ordering::SeqCst),
        0,
        "it was retried"
    );
    assert!(m.read(|s| s.tasks.contains_key(&"t1".into())));
    assert_eq!(store.events_after(0, 10).await.unwrap().len(), 1);
    m.close();
}

/// A node that lost the team's lease abandons its journal while the store cannot be reached:
/// the writer stops retrying at once, and nothing of what was queued is stored or shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_journal_stops_retrying_and_stores_and_shows_nothing_more() {
    let (_dir, file) = db("abandoned");
    let store = Arc::new(Flaky {
        inner: SqlStore::open_sqlite(&file).await.unwrap(),
        failures_left: AtomicUsize::new(usize::MAX),
        fenced: false,
    });
    let m = Monitor::with_store(1_024, store.clone(), States::default(), 0);
    let v = m.publish(vec![created("t1")]);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    within("abandoning", async { m.abandon() }).await;
    assert!(
        !within("the durable mark", m.durable(v)).await,
        "never stored"
    );
    assert!(m.read(|s| s.tasks.is_empty()), "never shown");
    assert!(store.events_after(0, 10).await.unwrap().is_empty());
}

/// A store that refuses a batch for its fence ends the journal at once (no retry can help)
/// and tells the monitor, so the node stops its team; nothing of the batch is shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_refusing_the_fence_ends_the_journal_and_tells_the_monitor() {
    let (_dir, file) = db("fenced");
    let store = Arc::new(Flaky {
        inner: SqlStore::open_sqlite(&file).await.unwrap(),
        failures_left: AtomicUsize::new(0),
        fenced: true,
    });
    let m = Monitor::with_store(1_024, store.clone(), States::default(), 0);
    let v = m.publish(vec![created("t1")]);
    within("the monitor told of the fence", m.fenced()).await;
    assert!(!within("the durable mark", m.durable(v)).await);
    assert!(m.read(|s| s.tasks.is_empty()));
    m.close();
}

/// Publishing far faster than the store commits fills the journal's queue: publishers then
/// wait for the writer (never the other way round), and everything is committed in the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publisher_faster_than_the_store_waits_for_it_and_nothing_is_dropped() {
    let (_dir, file) = db("full");
    let store = Arc::new(SqlStore::open_sqlite(&file).await.unwrap());
    let m = Monitor::with_store(1_024, store.clone(), States::default(), 0);
    m.publish(vec![created("t1")]);
    let publisher = std::thread::spawn({
        let m = m.clone();
        // Many more single publishes than the journal queues.
        move || {
            let mut last = None;
            for i in 0..30_000u64 {
                last = Some(m.publish(vec![tokens("t1", i)]));
            }
            last
        }
    });
    // Readers keep taking the states' lock meanwhile, as REST and websocket feeds do.
    let reader = std::thread::spawn({
        let m = m.clone();
        move || {
            for _ in 0..2_000 {
                m.read(|s| s.tasks.len());
            }
        }
    });
    let last = within(
        "publishing into a full journal",
        tokio::task::spawn_blocking(move || publisher.join().unwrap().unwrap()),
    )
    .await
    .unwrap();
    reader.join().unwrap();
    assert_eq!(last, 30_001);
    assert!(within("the commit of everything", m.durable(last)).await);
    assert_eq!(store.last_version().await.unwrap(), 30_001);
    assert_eq!(m.version(), 30_001);
    m.close();
}

/// A change carrying a 16 KB message, as a flood of large messages publishes them.
fn big_message(task: &str, n: usize) -> Change {
    let m = cohort::message::Message::notice(
        task.into(),
        "operator".into(),
        vec!["manager".into()],
        cohort::ids::StageRef::NoRelative,
        format!("{n:06} {}", "x".repeat(16 * 1024)),
    );
    Change::Task(TaskChange::Conversation {
        task_id: task.into(),
        entry: cohort::state::ConversationEntry {
            timestamp: n.to_string(),
            message: Arc::new(m),
        },
        message_no: 0,
    })
}

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..400 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} did not happen within 20 s");
}

/// Large events bring a snapshot long before 10,000 of them: the events after the newest
/// snapshot (which recovery needs, so compaction keeps) stay within the size of the states.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_events_bring_a_snapshot_before_ten_thousand_of_them() {
    use cohort::monitor::journal::{SNAPSHOT_EVERY, SNAPSHOT_MIN_BYTES};
    let (_dir, file) = db("bytes");
    let store = Arc::new(SqlStore::open_sqlite(&file).await.unwrap());
    let m = Monitor::with_store(1_024, store.clone(), States::default(), 0);
    m.publish(vec![created("t1")]);
    // Just over the least bytes that bring a snapshot, in far fewer than SNAPSHOT_EVERY events.
    let n = (SNAPSHOT_MIN_BYTES / (16 * 1024)) as usize + 16;
    assert!((n as u64) < SNAPSHOT_EVERY / 10);
    let mut last = 0;
    for i in 0..n {
        last = m.publish(vec![big_message("t1", i)]);
    }
    assert!(within("the commit", m.durable(last)).await);
    eventually("a snapshot", async || {
        store.latest_snapshot().await.unwrap().is_some()
    })
    .await;
    m.close();
}

/// A monitor keeps its store compacted while it runs: the events its snapshots cover leave
/// (here at once: nothing kept beyond recovery), and the store still rebuilds its states.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_monitor_keeps_its_store_compacted() {
    let (_dir, file) = db("compacting");
    let store = Arc::new(SqlStore::open_sqlite(&file).await.unwrap());
    let m = Monitor::with_store(1_024, store.clone(), States::default(), 0);
    let policy = cohort::config::Compaction {
        keep_events: Duration::ZERO,
        keep_events_bytes: 0,
        every: Duration::from_secs(1),
    };
    m.keep_compacted(store.clone(), policy);
    m.publish(vec![created("t1")]);
    let mut last = 0;
    for i in 0..700 {
        last = m.publish(vec![big_message("t1", i)]);
    }
    assert!(within("the commit", m.durable(last)).await);
    eventually("a compaction that pruned events", async || {
        let c = store.last_compaction().await.unwrap();
        c.is_some_and(|c| c.events_pruned > 0)
    })
    .await;
    let folded = store.last_compaction().await.unwrap().unwrap().folded_to;
    let first = store.events_after(0, 1).await.unwrap();
    assert!(first.first().is_none_or(|e| e.version > folded));
    m.close();
    let loaded = cohort::store::load(store.as_ref()).await.unwrap();
    assert_eq!(loaded.states.all_json(), m.all());
}
