//! The store, one suite run against both backends: SQLite in a file and a real Postgres
//! cluster started for the test. Appending in order (all or none), reading back by version and
//! by task, snapshots, reopening, the lock against a second writer, a schema newer than the
//! binary, and a damaged file.

use crate::support::postgres;
use crate::support::scratch;

use cohort::call::media::{Blob, BlobId};
use cohort::event::{Change, Event, StatesRecord, TaskChange};
use cohort::ids::TaskId;
use cohort::state::{TaskState, TokenUsage};
use cohort::store::{SqlStore, Store, StoreError, StoredEvent, StoredSession};
use scratch::Scratch;
use std::future::Future;

fn task_created(version: u64, task: &str) -> StoredEvent {
    let t = TaskState::new(task.into(), format!("task {task}"), "i".into(), "m".into());
    StoredEvent {
        event: Event {
            version,
            at: 1_700_000_000_000 + version as i64,
            change: Change::Task(TaskChange::Created { task: Box::new(t) }),
        },
        task_id: Some(task.into()),
    }
}

fn tokens(version: u64, task: &str) -> StoredEvent {
    StoredEvent {
        event: Event {
            version,
            at: 1_700_000_000_000 + version as i64,
            change: Change::Task(TaskChange::Tokens {
                task_id: task.into(),
                usage: TokenUsage::new(version, 1),
            }),
        },
        task_id: Some(task.into()),
    }
}

fn versions(events: &[Event]) -> Vec<u64> {
    events.iter().map(|e| e.version).collect()
}

/// Everything a store must do, against a fresh, empty store that `reopen` opens again.
async fn suite<F, Fut>(reopen: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<SqlStore, StoreError>>,
{
    let store = reopen().await.unwrap();
    assert_eq!(store.last_version().await.unwrap(), 0);
    assert!(store.latest_snapshot().await.unwrap().is_none());
    assert!(store.events_after(0, 100).await.unwrap().is_empty());

    // One batch, two tasks; read back whole, in pages, and by task.
    let batch = vec![
        task_created(1, "a"),
        task_created(2, "b"),
        tokens(3, "a"),
        tokens(4, "b"),
    ];
    store.append(&batch).await.unwrap();
    assert_eq!(store.last_version().await.unwrap(), 4);
    let all = store.events_after(0, 100).await.unwrap();
    assert_eq!(
        all,
        batch.iter().map(|e| e.event.clone()).collect::<Vec<_>>(),
        "events read back as they were written"
    );
    assert_eq!(versions(&store.events_after(1, 2).await.unwrap()), [2, 3]);
    let a: TaskId = "a".into();
    assert_eq!(
        versions(&store.task_events(&a, 0, 100).await.unwrap()),
        [1, 3]
    );
    assert_eq!(versions(&store.task_events(&a, 1, 100).await.unwrap()), [3]);

    // Out of order: refused, and nothing of that batch is written.
    let err = store
        .append(&[tokens(5, "a"), tokens(5, "a")])
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::OutOfOrder {
                version: 5,
                last: 5
            }
        ),
        "{err}"
    );
    let err = store.append(&[tokens(2, "a")]).await.unwrap_err();
    assert!(matches!(err, StoreError::OutOfOrder { .. }), "{err}");
    assert_eq!(store.last_version().await.unwrap(), 4);

    // A batch larger than one INSERT holds.
    let big: Vec<StoredEvent> = (5..=1_204).map(|v| tokens(v, "b")).collect();
    store.append(&big).await.unwrap();
    assert_eq!(store.events_after(4, 5_000).await.unwrap().len(), 1_200);

    // Snapshots: the newest is read back whole.
    let mut states = cohort::event::States::default();
    for e in &batch {
        states.apply(&e.event.change);
    }
    let record = StatesRecord::of(&states);
    // Written from the states themselves, as the journal writes it: the same record.
    assert_eq!(states.record_json().unwrap(), record.json().unwrap());
    store
        .put_snapshot(2, record.json().unwrap().into())
        .await
        .unwrap();
    // In parts, as the journal writes it.
    let parts = cohort::store::SnapshotJson::written(|p| states.write_record(p)).unwrap();
    store.put_snapshot(4, parts).await.unwrap();
    store
        .put_snapshot(3, record.json().unwrap().into())
        .await
        .unwrap();
    let snap = store.latest_snapshot().await.unwrap().unwrap();
    assert_eq!(snap.version, 4);
    assert_eq!(snap.states, record);
    assert_eq!(snap.states.tasks.len(), 2);

    // A second writer is refused while the store is open.
    let err = reopen().await.err().expect("a second open is refused");
    assert!(matches!(err, StoreError::Locked { .. }), "{err}");
    assert!(
        err.to_string().contains("in use by another cohort process"),
        "{err}"
    );

    // Closed and opened again: everything is there, and appending carries on.
    drop(store);
    let store = reopen().await.unwrap();
    assert_eq!(store.last_version().await.unwrap(), 1_204);
    assert_eq!(store.latest_snapshot().await.unwrap().unwrap().version, 4);
    store.append(&[tokens(1_205, "a")]).await.unwrap();
    assert_eq!(
        versions(&store.task_events(&a, 3, 100).await.unwrap()),
        [1_205]
    );

    // Sessions: kept by hash; the expired ones leave when the live ones are read.
    let live = StoredSession {
        token_hash: "h-live".into(),
        human: "alice".into(),
        expires_at: 2_000,
    };
    let old = StoredSession {
        token_hash: "h-old".into(),
        human: "bob".into(),
        expires_at: 500,
    };
    store.put_session(&live).await.unwrap();
    store.put_session(&old).await.unwrap();
    // One looked up by its hash: only while it lasts.
    assert_eq!(
        store.live_session("h-live", 1_000).await.unwrap().as_ref(),
        Some(&live)
    );
    assert_eq!(store.live_session("h-live", 2_000).await.unwrap(), None);
    assert_eq!(store.live_session("h-old", 1_000).await.unwrap(), None);
    assert_eq!(store.live_session("h-none", 0).await.unwrap(), None);
    assert_eq!(
        store.live_sessions(1_000).await.unwrap(),
        std::slice::from_ref(&live)
    );
    drop(store);
    let store = reopen().await.unwrap();
    assert_eq!(
        store.live_sessions(0).await.unwrap(),
        [live],
        "the expired one is gone"
    );
    blobs(&store).await;
    model_calls(&store).await;
    drop(store);
    let store = reopen().await.unwrap();
    let gone = blob(cohort::store::BLOBS_KEPT);
    assert!(
        store.blob(&gone.id).await.unwrap().is_none(),
        "the older ones left for good"
    );
    let newest = blob(1_000 + cohort::store::BLOBS_KEPT - 1);
    assert_eq!(
        store.blob(&newest.id).await.unwrap(),
        Some(newest),
        "kept over a restart"
    );
    let oldest_kept = blob(1_000);
    assert!(
        store.blob(&oldest_kept.id).await.unwrap().is_some(),
        "the newest 128, all kept"
    );
    drop(store);
}

/// Recorded model calls: read back in order, of one task or all; each agent's newest within
/// its bytes, the oldest of that agent leaving first, another agent's untouched.
async fn model_calls(store: &SqlStore) {
    use cohort::store::model_calls::StoredModelCall;
    let call = |seq: u64, agent: &str, task: &str| StoredModelCall {
        seq,
        agent_id: agent.into(),
        task_id: Some(task.into()),
        step_id: format!("s{seq}").as_str().into(),
        body: format!("{{\"seq\":{seq},\"prompt\":\"{}\"}}", "x".repeat(100)),
        system: None,
    };
    let size = call(1, "a", "t").body.len() as u64;
    let calls: Vec<_> = (1..=6)
        .map(|n| call(n, if n % 2 == 0 { "b" } else { "a" }, "t"))
        .collect();
    let trim = |bytes: u64, agents: &[&str]| cohort::store::model_calls::Trim {
        bytes_per_agent: bytes,
        agents: agents.iter().map(|a| (*a).into()).collect(),
    };
    store
        .put_model_calls(calls, trim(10 * size, &["a", "b"]))
        .await
        .unwrap();
    let all = store.model_calls(None, 0, 100).await.unwrap();
    assert_eq!(
        all.iter().map(|c| c.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    // Agent a makes four more, and its ring is trimmed (b's is not due): it keeps its newest
    // within two calls' bytes.
    let more: Vec<_> = (7..=10).map(|n| call(n * 2 - 1, "a", "u")).collect();
    store
        .put_model_calls(more, trim(2 * size + 4, &["a"]))
        .await
        .unwrap();
    let all = store.model_calls(None, 0, 100).await.unwrap();
    let of = |agent: &str| {
        all.iter()
            .filter(|c| c.agent_id.as_str() == agent)
            .map(|c| c.seq)
            .collect::<Vec<_>>()
    };
    assert_eq!(of("a"), [17, 19], "a's newest within its bytes");
    assert_eq!(of("b"), [2, 4, 6], "b's ring is trimmed only when named");
    let u: cohort::ids::TaskId = "u".into();
    assert_eq!(store.model_calls(Some(&u), 0, 100).await.unwrap().len(), 2);
    assert_eq!(
        store
            .model_calls(None, 4, 2)
            .await
            .unwrap()
            .iter()
            .map(|c| c.seq)
            .collect::<Vec<_>>(),
        [6, 17]
    );
    // With a batch of events, in its transaction: both are there; a call kept again replaces
    // the one with its number.
    let next = store.last_version().await.unwrap() + 1;
    let recorded = cohort::store::model_calls::Recorded {
        calls: vec![call(40, "c", "v"), call(17, "a", "u")],
        trim: trim(1 << 20, &["c"]),
    };
    store
        .append_recorded(&[tokens(next, "v")], &[], &recorded)
        .await
        .unwrap();
    assert_eq!(store.last_version().await.unwrap(), next);
    let v: cohort::ids::TaskId = "v".into();
    let with = store.model_calls(Some(&v), 0, 100).await.unwrap();
    assert_eq!(with.iter().map(|c| c.seq).collect::<Vec<_>>(), [40]);
    let all = store.model_calls(None, 0, 100).await.unwrap();
    assert_eq!(all.iter().filter(|c| c.seq == 17).count(), 1);
    system_texts(store, &call, &trim).await;
    many_model_calls(store).await;
}

/// A batch larger than one statement's rows (the store writes many to a statement), each
/// call's text sent with the first call that names it, some named twice in one batch: all
/// read back whole, in order.
async fn many_model_calls(store: &SqlStore) {
    use cohort::store::model_calls::{StoredModelCall, SystemText, Trim};
    let text = |n: u64| format!("SYS-{}", n % 3);
    let calls: Vec<_> = (1_000..2_234u64)
        .map(|seq| StoredModelCall {
            seq,
            agent_id: format!("m{}", seq % 7).as_str().into(),
            task_id: Some("many".into()),
            step_id: format!("s{seq}").as_str().into(),
            // Long enough for Postgres to keep it out of line, compressed.
            body: format!("{{\"seq\":{seq},\"prompt\":\"{}\"}}", "step ".repeat(600)),
            system: Some(SystemText {
                id: SystemText::id_of(&text(seq)),
                text: (seq < 1_006).then(|| text(seq)),
                bytes: text(seq).len(),
            }),
        })
        .collect();
    store.put_model_calls(calls, Trim::default()).await.unwrap();
    let many: cohort::ids::TaskId = "many".into();
    let mut back = Vec::new();
    while back.len() < 1_234 {
        let after = back.last().map_or(0, |c: &StoredModelCall| c.seq);
        let page = store.model_calls(Some(&many), after, 500).await.unwrap();
        assert!(!page.is_empty(), "{} of 1234 read back", back.len());
        back.extend(page);
    }
    for (c, seq) in back.iter().zip(1_000u64..) {
        let v: serde_json::Value = serde_json::from_str(&c.body).unwrap();
        assert_eq!((c.seq, v["seq"].as_u64()), (seq, Some(seq)));
        assert_eq!(v["system"].as_str(), Some(text(seq).as_str()), "call {seq}");
        assert_eq!(c.agent_id.as_str(), format!("m{}", seq % 7));
    }
}

/// A call's system prompt is kept once for every call that sends it, and read back in its
/// place; once no kept call names it, it goes with a trim.
async fn system_texts(
    store: &SqlStore,
    call: &dyn Fn(u64, &str, &str) -> cohort::store::model_calls::StoredModelCall,
    trim: &dyn Fn(u64, &[&str]) -> cohort::store::model_calls::Trim,
) {
    use cohort::store::model_calls::SystemText;
    let with = |seq: u64, text: &str, sent: bool| {
        let mut c = call(seq, "d", "w");
        c.system = Some(SystemText {
            id: SystemText::id_of(text),
            text: sent.then(|| text.to_owned()),
            bytes: text.len(),
        });
        c
    };
    // The second call names the text the first stored.
    let calls = vec![
        with(50, "SYS-D", true),
        with(51, "SYS-D", false),
        with(52, "SYS-E", true),
    ];
    store
        .put_model_calls(calls, trim(1 << 20, &[]))
        .await
        .unwrap();
    let w: cohort::ids::TaskId = "w".into();
    let read = |calls: Vec<cohort::store::model_calls::StoredModelCall>| {
        calls
            .iter()
            .map(|c| {
                let v: serde_json::Value = serde_json::from_str(&c.body).unwrap();
                (
                    c.seq,
                    v["system"].as_str().map(str::to_owned),
                    v["prompt"].is_string(),
                )
            })
            .collect::<Vec<_>>()
    };
    let back = read(store.model_calls(Some(&w), 0, 100).await.unwrap());
    let sys = |t: &str| Some(t.to_owned());
    assert_eq!(
        back,
        [
            (50, sys("SYS-D"), true),
            (51, sys("SYS-D"), true),
            (52, sys("SYS-E"), true)
        ]
    );
    // d's ring trimmed to its newest call: SYS-D is named by none and goes; a call that
    // named it without sending it (which a writer does only before a trim) reads without it.
    let size = call(52, "d", "w").body.len() as u64 + "SYS-E".len() as u64;
    store
        .put_model_calls(vec![], trim(size, &["d"]))
        .await
        .unwrap();
    store
        .put_model_calls(vec![with(53, "SYS-D", false)], trim(1 << 20, &[]))
        .await
        .unwrap();
    let back = read(store.model_calls(Some(&w), 0, 100).await.unwrap());
    assert_eq!(back, [(52, sys("SYS-E"), true), (53, None, true)]);
}

/// A blob of its own bytes, numbered `n`.
fn blob(n: usize) -> Blob {
    let bytes = format!("\u{89}PNG {n}").into_bytes();
    Blob {
        id: BlobId::of(&bytes),
        mime: "image/png".into(),
        bytes,
    }
}

/// Images and sounds: read back by their id, the same bytes kept once, the newest
/// `BLOBS_KEPT` kept (the oldest by when they were last kept).
async fn blobs(store: &SqlStore) {
    let first = blob(0);
    store.put_blob(first.clone()).await.unwrap();
    assert_eq!(store.blob(&first.id).await.unwrap(), Some(first.clone()));
    assert!(store.blob(&blob(1).id).await.unwrap().is_none());
    for n in 1..cohort::store::BLOBS_KEPT {
        store.put_blob(blob(n)).await.unwrap();
    }
    // Kept again: the newest now, so the next one pushes out the second instead.
    store.put_blob(first.clone()).await.unwrap();
    store
        .put_blob(blob(cohort::store::BLOBS_KEPT))
        .await
        .unwrap();
    assert!(
        store.blob(&blob(1).id).await.unwrap().is_none(),
        "the oldest left"
    );
    assert_eq!(store.blob(&first.id).await.unwrap(), Some(first));
    for n in 0..cohort::store::BLOBS_KEPT {
        store.put_blob(blob(1_000 + n)).await.unwrap();
    }
}

/// Sets the stored schema version, as a newer cohort would have left it.
async fn set_schema_version(url: &str, v: i64) {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    let mut c = sqlx::AnyConnection::connect(url).await.unwrap();
    sqlx::query("UPDATE cohort_meta SET value = $1 WHERE key = 'schema_version'")
        .bind(v.to_string())
        .execute(&mut c)
        .await
        .unwrap();
}

#[tokio::test]
async fn sqlite_store() {
    let dir = Scratch::new("store-sqlite");
    let file = dir.join("data/team.db");
    suite(|| SqlStore::open_sqlite(&file)).await;

    // WAL mode, as promised.
    assert!(dir.join("data/team.db-wal").exists() || dir.join("data/team.db").exists());

    // A schema newer than this binary: a clear error, and the file is left alone.
    set_schema_version(&format!("sqlite://{}", file.display()), 99).await;
    let err = SqlStore::open_sqlite(&file).await.err().unwrap();
    assert!(
        matches!(err, StoreError::SchemaNewer { found: 99, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("newer than this cohort knows"),
        "{err}"
    );

    // A file that is not a database: a clear error, never a fresh start over it.
    let junk = dir.join("junk.db");
    std::fs::write(
        &junk,
        "this is not a database, it is a shopping list\n".repeat(200),
    )
    .unwrap();
    let before = std::fs::read(&junk).unwrap();
    let err = SqlStore::open_sqlite(&junk).await.err().unwrap();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("junk.db"), "{err}");
    assert_eq!(
        std::fs::read(&junk).unwrap(),
        before,
        "the file is untouched"
    );
}

#[tokio::test]
async fn postgres_store() {
    let pg = postgres::Cluster::start("store");
    let url = pg.url();
    suite(|| SqlStore::open_postgres(&url)).await;
    // Large bodies are compressed with lz4 (Debian's Postgres has it), not pglz.
    let compressed = {
        use sqlx::{Connection, Row};
        let mut c = sqlx::AnyConnection::connect(&url).await.unwrap();
        sqlx::query(
            "SELECT COALESCE(pg_column_compression(body)::text, '') FROM model_calls \
             WHERE task_id = 'many' GROUP BY 1",
        )
        .fetch_all(&mut c)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect::<Vec<_>>()
    };
    assert_eq!(compressed, ["lz4"]);
    set_schema_version(&url, 99).await;
    let err = SqlStore::open_postgres(&url).await.err().unwrap();
    assert!(
        matches!(err, StoreError::SchemaNewer { found: 99, .. }),
        "{err}"
    );
}

/// A store does not depend on the runtime that opened and used it: its connections are its
/// own, so a caller's runtime that is blocked (the thread that closes the journal waits for
/// it) or stopped (the HTTP server's at shutdown) stalls nothing.
fn independent_of_its_callers_runtime(open: impl FnOnce() -> SqlStore + Send + 'static) {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let first = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let store = std::sync::Arc::new(open());
            store.append(&[task_created(1, "t1")]).await.unwrap();
            ready_tx.send(store).unwrap();
            // This runtime's only thread now blocks, as a thread joining the journal does.
            let _ = done_rx.recv();
        });
    });
    let store = ready_rx.recv().unwrap();
    let second = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let read = second.block_on(async {
        tokio::time::timeout(std::time::Duration::from_secs(20), async {
            store.append(&[tokens(2, "t1")]).await.unwrap();
            store.events_after(0, 10).await.unwrap()
        })
        .await
    });
    done_tx.send(()).unwrap();
    first.join().unwrap();
    let read = read.expect("the store answers while the runtime that used it is blocked");
    assert_eq!(read.len(), 2);
}

#[test]
fn a_sqlite_store_does_not_depend_on_its_callers_runtime() {
    let dir = Scratch::new("independent");
    let file = dir.join("team.db");
    let opener = tokio::runtime::Runtime::new().unwrap();
    let store = opener.block_on(SqlStore::open_sqlite(&file)).unwrap();
    drop(opener);
    independent_of_its_callers_runtime(move || store);
}

#[test]
fn a_postgres_store_does_not_depend_on_its_callers_runtime() {
    let pg = postgres::Cluster::start("independent");
    let url = pg.url();
    let opener = tokio::runtime::Runtime::new().unwrap();
    let store = opener.block_on(SqlStore::open_postgres(&url)).unwrap();
    drop(opener);
    independent_of_its_callers_runtime(move || store);
}

// ---- Compaction --------------------------------------------------------------------------

use cohort::config::Compaction;
use cohort::event::{States, TaskSummaryLine};
use cohort::state::{ConversationEntry, ExecutionState, StageState};
use cohort::store::{StoreStats, inspect, load, stored_task};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// A team's history as a store receives it: each change applied to a reader's copy of the
/// states (what snapshots hold and what recovery must give back) and appended in batches.
#[derive(Default)]
struct History {
    states: States,
    version: u64,
    batch: Vec<StoredEvent>,
}

const HOUR_MS: i64 = 3_600_000;

impl History {
    fn change(&mut self, task: &str, change: Change, at: i64) {
        self.version += 1;
        self.states.apply_at(&change, at);
        self.batch.push(StoredEvent {
            event: Event {
                version: self.version,
                at,
                change,
            },
            task_id: Some(task.into()),
        });
    }

    /// A 16 KB message in the task's conversation, its pool kept to 60 entries as retention
    /// keeps it (so history outgrows what is held).
    fn message(&mut self, task: &str, n: usize, at: i64) {
        let text = format!("{n:06} {}", "x".repeat(16 * 1024));
        let m = cohort::message::Message::notice(
            task.into(),
            "operator".into(),
            vec!["manager".into()],
            cohort::ids::StageRef::NoRelative,
            text,
        );
        let entry = ConversationEntry {
            timestamp: n.to_string(),
            message: std::sync::Arc::new(m),
        };
        let task_id: TaskId = task.into();
        self.change(
            task,
            Change::Task(TaskChange::Conversation {
                task_id: task_id.clone(),
                entry,
                message_no: 0,
            }),
            at,
        );
        if self.states.tasks[&task_id].shared_conversation_pool.len() > 60 {
            let trim = TaskChange::Trimmed {
                task_id,
                shared_info: 0,
                conversation: 10,
            };
            self.change(task, Change::Task(trim), at);
        }
    }

    fn created(&mut self, task: &str, at: i64) {
        let t = TaskState::new(task.into(), format!("task {task}"), "i".into(), "m".into());
        self.change(
            task,
            Change::Task(TaskChange::Created { task: Box::new(t) }),
            at,
        );
    }

    /// A task that runs one stage with `messages` messages and finishes; `evicted`: it then
    /// leaves memory (retention), as the oldest finished tasks do.
    fn finished_task(&mut self, task: &str, messages: usize, evicted: bool, at: i64) {
        self.created(task, at);
        let stage = StageState::new(task.into(), "do it".into(), Default::default());
        let added = cohort::event::StageChange::Added { stage, list_at: 0 };
        self.change(task, Change::Stage(added), at);
        for n in 0..messages {
            self.message(task, n, at);
        }
        let done = TaskChange::State {
            task_id: task.into(),
            execution_state: ExecutionState::Finished,
            task_summary: Some(format!("{task} is done")),
            summary_written: None,
            outcome: None,
        };
        self.change(task, Change::Task(done), at);
        if evicted {
            let task_state = &self.states.tasks[&TaskId::from(task)];
            let summary = TaskSummaryLine::of(task_state, &cohort::prompt::Texts::english());
            let gone = TaskChange::Evicted {
                task_id: task.into(),
                summary,
            };
            self.change(task, Change::Task(gone), at);
        }
    }

    async fn flush(&mut self, store: &dyn Store) {
        store
            .append(&std::mem::take(&mut self.batch))
            .await
            .unwrap();
    }

    async fn snapshot(&mut self, store: &dyn Store) -> u64 {
        self.flush(store).await;
        let parts = cohort::store::SnapshotJson::written(|p| self.states.write_record(p)).unwrap();
        store.put_snapshot(self.version, parts).await.unwrap();
        self.version
    }
}

/// What a store gives its readers: the states recovery builds, each task as `stored_task`
/// reads it, and the events after the newest snapshot.
#[derive(Debug, PartialEq)]
struct Readings {
    version: u64,
    states: StatesRecord,
    tasks: Vec<Option<(TaskState, Vec<StageState>)>>,
    after_snapshot: Vec<Event>,
}

const TASKS: [&str; 13] = [
    "base", "t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "late", "never",
];

async fn readings(store: &dyn Store) -> Readings {
    let loaded = load(store).await.unwrap();
    let mut tasks = Vec::new();
    for t in TASKS {
        tasks.push(stored_task(store, &t.into()).await.unwrap());
    }
    let snapshot = store.latest_snapshot().await.unwrap().unwrap().version;
    Readings {
        version: loaded.version,
        states: StatesRecord::of(&loaded.states),
        tasks,
        after_snapshot: store.events_after(snapshot, 100_000).await.unwrap(),
    }
}

fn policy(keep_hours: u64, keep_bytes: u64) -> Compaction {
    Compaction {
        keep_events: Duration::from_secs(keep_hours * 3600),
        keep_events_bytes: keep_bytes,
        every: Duration::from_secs(60),
    }
}

/// Fills a store with two days of history (old events, then recent ones), compacts it three
/// times (a 24-hour window; the window with a byte budget; nothing kept beyond recovery) and
/// checks each time that recovery, every task's reading and the events after the newest
/// snapshot are what they were; `disk` reads the store's size when the backend gives space
/// back (SQLite).
async fn compaction_suite(store: &SqlStore, sqlite: bool) {
    let now = chrono::Utc::now().timestamp_millis();
    let old = now - 48 * HOUR_MS;
    let mut h = History::default();
    // Two days ago: ten tasks (eight then left memory) and a flood into the base task.
    h.created("base", old);
    for i in 0..10 {
        h.finished_task(&format!("t{i}"), 12, i < 8, old);
    }
    h.snapshot(store).await;
    for n in 0..1_000 {
        h.message("base", n, old);
    }
    h.snapshot(store).await;
    let last_old = h.version;
    // Today: more of the flood and a new task, a snapshot, and events after it.
    for n in 1_000..1_030 {
        h.message("base", n, now);
    }
    h.finished_task("late", 5, false, now);
    let newest = h.snapshot(store).await;
    for n in 1_030..1_040 {
        h.message("base", n, now);
    }
    h.flush(store).await;
    let before = readings(store).await;
    assert_eq!(
        before.states,
        StatesRecord::of(&h.states),
        "the fill itself"
    );
    assert!(before.tasks[1].is_some() && before.tasks[12].is_none());
    let stats = store.stats().await.unwrap();
    assert_eq!(
        stats.snapshots, 2,
        "the newest two, as snapshot_put keeps them"
    );
    if sqlite {
        assert!(
            stats.disk_bytes() > 3 * stats.live_bytes(),
            "before compaction the store is far larger than what it must keep: {stats:?}"
        );
    }

    // A 24-hour window: the two-day-old events go, today's stay.
    let stop = AtomicBool::new(false);
    let c = store.compact(&policy(24, 1 << 40), &stop).await.unwrap();
    assert_eq!((c.snapshot, c.folded_to), (newest, last_old));
    assert_eq!(c.events_pruned, last_old);
    assert_eq!(c.snapshots_pruned, 1, "only the newest snapshot is left");
    assert_eq!(c.tasks_archived, 11, "base and t0..t9");
    assert_eq!(readings(store).await, before);
    let kept = store.events_after(0, 100_000).await.unwrap();
    assert_eq!(kept.first().map(|e| e.version), Some(last_old + 1));
    assert!(kept.iter().all(|e| e.at == now));
    assert_eq!(store.last_compaction().await.unwrap(), Some(c));

    // A byte budget: of the events the snapshot covers, only the newest ~100 KB stay.
    let budget = 100_000;
    let c = store.compact(&policy(24, budget), &stop).await.unwrap();
    assert!(c.folded_to > last_old && c.folded_to < newest, "{c:?}");
    let covered = store.events_after(0, 100_000).await.unwrap();
    let covered: Vec<_> = covered.iter().filter(|e| e.version <= newest).collect();
    let bytes: usize = covered
        .iter()
        .map(|e| serde_json::to_string(e).unwrap().len())
        .sum();
    assert!(
        !covered.is_empty() && bytes as u64 <= budget,
        "{bytes} bytes kept"
    );
    assert_eq!(readings(store).await, before);

    // Nothing kept beyond recovery: everything the snapshot covers goes.
    let c = store.compact(&policy(0, 0), &stop).await.unwrap();
    assert_eq!(c.folded_to, newest);
    assert_eq!(
        readings(store).await,
        before,
        "nothing a reader needs is lost"
    );
    let again = store.compact(&policy(0, 0), &stop).await.unwrap();
    assert_eq!((again.events_pruned, again.tasks_archived), (0, 0));
    let stats: StoreStats = store.stats().await.unwrap();
    let after = before.after_snapshot.len() as u64;
    assert_eq!((stats.events, stats.snapshots), (after, 1), "{stats:?}");
    assert_eq!(stats.events_after_snapshot, after);
    assert_eq!(stats.archived, 12, "base, t0..t9 and late");
    if sqlite {
        assert!(
            stats.disk_bytes() <= 3 * stats.live_bytes(),
            "the store is at most 3x what it must keep: {stats:?}"
        );
    }

    // An evicted, finished task exports as its final record, and nothing else.
    let mut out = Vec::new();
    let t0: TaskId = "t0".into();
    let n = inspect::export(store, Some(&t0), &mut out).await.unwrap();
    assert_eq!((n.events, n.archived), (0, 1));
    let line: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let task: TaskState = serde_json::from_value(line["archived"]["task"].clone()).unwrap();
    assert_eq!(Some(&task), before.tasks[1].as_ref().map(|t| &t.0));
    assert_eq!(task.execution_state, ExecutionState::Finished);
    assert_eq!(task.shared_conversation_pool.len(), 12);
    // Everything: the twelve records, then the events after the snapshot.
    let mut out = Vec::new();
    let n = inspect::export(store, None, &mut out).await.unwrap();
    assert_eq!((n.archived, n.events), (12, after));

    // The base task goes on after compaction: its record and its new events read as a whole.
    for n in 1_040..1_050 {
        h.message("base", n, now);
    }
    h.snapshot(store).await;
    store.compact(&policy(0, 0), &stop).await.unwrap();
    let base = stored_task(store, &"base".into()).await.unwrap().unwrap();
    assert_eq!(base.0, h.states.tasks[&TaskId::from("base")]);
    let loaded = load(store).await.unwrap();
    assert_eq!(
        StatesRecord::of(&loaded.states),
        StatesRecord::of(&h.states)
    );
}

#[tokio::test]
async fn compaction_keeps_what_recovery_and_readers_need_and_gives_the_rest_back_sqlite() {
    let dir = Scratch::new("store-compact-sqlite");
    let store = SqlStore::open_sqlite(&dir.join("team.db")).await.unwrap();
    compaction_suite(&store, true).await;
}

#[tokio::test]
async fn compaction_keeps_what_recovery_and_readers_need_postgres() {
    let pg = postgres::Cluster::start("compact");
    let store = SqlStore::open_postgres(&pg.url()).await.unwrap();
    compaction_suite(&store, false).await;
}

/// A store the release before compaction made (schema 2, no auto-vacuum): it opens, is
/// migrated, and its first compaction rewrites it once so that its space is given back.
#[tokio::test]
async fn a_store_made_before_compaction_loads_and_shrinks_at_its_first_compaction() {
    use sqlx::{Connection, Executor, Row};
    let dir = Scratch::new("store-compact-old");
    let file = dir.join("team.db");
    let url = format!("sqlite://{}?mode=rwc", file.display());
    sqlx::any::install_default_drivers();
    let mut c = sqlx::AnyConnection::connect(&url).await.unwrap();
    c.execute("PRAGMA journal_mode = WAL").await.unwrap();
    for sql in [
        include_str!("../../crates/cohort-store/migrations/0001_events.sql"),
        include_str!("../../crates/cohort-store/migrations/0002_sessions.sql"),
        "CREATE TABLE cohort_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); \
         INSERT INTO cohort_meta VALUES ('schema_version', '2')",
    ] {
        sqlx::raw_sql(sql).execute(&mut c).await.unwrap();
    }
    c.close().await.unwrap();
    let mode = |file: std::path::PathBuf| async move {
        let url = format!("sqlite://{}", file.display());
        let mut c = sqlx::AnyConnection::connect(&url).await.unwrap();
        let r = sqlx::query("PRAGMA auto_vacuum").fetch_one(&mut c).await;
        r.unwrap().try_get::<i64, _>(0).unwrap()
    };
    assert_eq!(mode(file.clone()).await, 0, "made without auto-vacuum");
    // Read as it is (`cohort inspect`, `export`: nothing migrated), it has no archive yet.
    let reader = SqlStore::open_reader(file.to_str().unwrap()).await.unwrap();
    let stats = reader.stats().await.unwrap();
    assert_eq!(
        (stats.events, stats.archived, stats.last_compaction),
        (0, 0, None)
    );
    let n = inspect::export(&reader, None, &mut Vec::new())
        .await
        .unwrap();
    assert_eq!((n.events, n.archived), (0, 0));
    drop(reader);

    let store = SqlStore::open_sqlite(&file).await.unwrap();
    let now = chrono::Utc::now().timestamp_millis();
    let mut h = History::default();
    h.created("base", now);
    h.finished_task("t0", 12, true, now);
    for n in 0..600 {
        h.message("base", n, now);
    }
    h.snapshot(&store).await;
    h.message("base", 600, now);
    h.flush(&store).await;
    let before = readings(&store).await;
    let c = store
        .compact(&policy(0, 0), &AtomicBool::new(false))
        .await
        .unwrap();
    assert!(c.bytes_after * 3 < c.bytes_before, "{c:?}");
    assert_eq!(readings(&store).await, before);
    let stats = store.stats().await.unwrap();
    assert!(stats.disk_bytes() <= 3 * stats.live_bytes(), "{stats:?}");
    drop(store);
    assert_eq!(mode(file).await, 2, "incremental from now on");
}
