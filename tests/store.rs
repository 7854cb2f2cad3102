//! The store, one suite run against both backends: SQLite in a file and a real Postgres
//! cluster started for the test. Appending in order (all or none), reading back by version and
//! by task, snapshots, reopening, the lock against a second writer, a schema newer than the
//! binary, and a damaged file.

#[path = "support/postgres.rs"]
mod postgres;

use cohort::event::{Change, Event, StatesRecord, TaskChange};
use cohort::ids::TaskId;
use cohort::state::{TaskState, TokenUsage};
use cohort::store::{SqlStore, Store, StoreError, StoredEvent, StoredSession};
use std::future::Future;

fn task_created(version: u64, task: &str) -> StoredEvent {
    let t = TaskState::new(task.into(), format!("task {task}"), "i".into(), "m".into());
    StoredEvent {
        event: Event {
            version,
            at: 1_700_000_000_000 + version as i64,
            change: Change::Task(TaskChange::Created { task: t }),
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
    store.put_snapshot(2, &record).await.unwrap();
    store.put_snapshot(4, &record).await.unwrap();
    store.put_snapshot(3, &record).await.unwrap();
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
    drop(store);
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

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("cohort-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[tokio::test]
async fn sqlite_store() {
    let dir = scratch("sqlite");
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
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn postgres_store() {
    let pg = postgres::Cluster::start("store");
    let url = pg.url();
    suite(|| SqlStore::open_postgres(&url)).await;
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
    let file = std::env::temp_dir().join(format!("cohort-independent-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&file);
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
