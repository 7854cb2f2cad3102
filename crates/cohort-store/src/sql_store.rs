//! `SqlStore`, the team's store as the rest of Cohort sees it: the database calls of
//! [`super::sql::Db`], each run on a runtime of the store's own.

use super::lease::{AgentWrite, Fence};
use super::sql::{Db, rows};
use super::{
    ArchivedTask, Compacted, Snapshot, SnapshotJson, Store, StoreError, StoredEvent, StoredSession,
};
use cohort_core::config::Compaction;
use cohort_core::event::Event;
use cohort_core::ids::{StepId, TaskId};
use futures::future::BoxFuture;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The team's store on SQLite or Postgres. Every database call runs on a runtime of the
/// store's own, so its connections belong to no caller: the journal's thread, the HTTP
/// server's runtime and actix's each wait for an answer without having to drive (or outlive)
/// the sockets it comes on. A caller that blocks its own thread (closing the journal) or a
/// runtime that stops (the HTTP server's) can never stall or break the store.
pub struct SqlStore {
    pub(super) db: Arc<Db>,
    url: String,
    rt: Arc<StoreRuntime>,
    /// A node's hold on the team's lease: its appends and snapshots are refused once another
    /// node took the lease ([`SqlStore::fenced`]).
    fence: Option<Arc<Fence>>,
}

impl SqlStore {
    /// Opens (creating if need be) the SQLite database at `path`, WAL mode.
    pub async fn open_sqlite(path: &Path) -> Result<SqlStore, StoreError> {
        let path = path.to_owned();
        Self::on_own_runtime(async move { Db::open_sqlite(&path).await }).await
    }

    /// Connects to the Postgres database at `url` (`postgres://…`) and takes its lock.
    pub async fn open_postgres(url: &str) -> Result<SqlStore, StoreError> {
        let url = url.to_owned();
        Self::on_own_runtime(async move { Db::open_postgres(&url, false).await }).await
    }

    /// Connects to the Postgres database at `url` as one node of a team across machines: its
    /// lock is shared with the other nodes (and keeps a lone `serve` out), and what it writes
    /// is fenced by the team's lease ([`SqlStore::fenced`]).
    pub async fn open_postgres_node(url: &str) -> Result<SqlStore, StoreError> {
        let url = url.to_owned();
        Self::on_own_runtime(async move { Db::open_postgres(&url, true).await }).await
    }

    /// The same store, its appends and snapshots refused (in their own transactions) once
    /// `fence`'s lease has passed to another node; and its idea of the last version stored
    /// read again, since other nodes may have written meanwhile.
    pub async fn fenced(&self, fence: Fence) -> Result<SqlStore, StoreError> {
        let last = self
            .call(|db| async move { db.query_last_version().await })
            .await?;
        self.db.last.store(last, Ordering::SeqCst);
        Ok(SqlStore {
            db: self.db.clone(),
            url: self.url.clone(),
            rt: self.rt.clone(),
            fence: Some(Arc::new(fence)),
        })
    }

    /// The session whose token hashes to `token_hash`, if it is not expired at `now` (ms since
    /// the epoch): one row read, however many people are logged in (a node's feeds each look
    /// theirs up every few seconds).
    pub async fn live_session(
        &self,
        token_hash: &str,
        now: i64,
    ) -> Result<Option<crate::StoredSession>, StoreError> {
        let hash = token_hash.to_owned();
        self.call(move |db| async move { db.session_live(&hash, now).await })
            .await
    }

    /// Opens `spec`: a `postgres://` URL, or else a SQLite file path.
    pub async fn open(spec: &str) -> Result<SqlStore, StoreError> {
        if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
            Self::open_postgres(spec).await
        } else {
            Self::open_sqlite(Path::new(spec.strip_prefix("sqlite://").unwrap_or(spec))).await
        }
    }

    /// Opens a store to read it only (`cohort inspect`, `cohort export`): no lock, so a
    /// running team may keep writing; nothing is created or migrated.
    pub async fn open_reader(spec: &str) -> Result<SqlStore, StoreError> {
        let spec = spec.to_owned();
        Self::on_own_runtime(async move { Db::open_reader(&spec).await }).await
    }

    async fn on_own_runtime(
        open: impl Future<Output = Result<Db, StoreError>> + Send + 'static,
    ) -> Result<SqlStore, StoreError> {
        let rt = StoreRuntime::start()?;
        let db = rt.run(open).await?;
        Ok(SqlStore {
            url: db.url.clone(),
            db: Arc::new(db),
            rt: Arc::new(rt),
            fence: None,
        })
    }

    /// Where the data lives, as shown to people (no password).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What the store holds, in counts and bytes.
    pub async fn stats(&self) -> Result<super::StoreStats, StoreError> {
        self.call(|db| async move { db.stats().await }).await
    }

    /// Runs the database call `f` makes on the store's runtime.
    pub(super) fn call<T, F, Fut>(
        &self,
        f: F,
    ) -> impl Future<Output = Result<T, StoreError>> + Send + 'static
    where
        T: Send + 'static,
        F: FnOnce(Arc<Db>) -> Fut,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    {
        self.rt.run(f(self.db.clone()))
    }
}

impl Store for SqlStore {
    fn put_session<'a>(&'a self, s: &'a StoredSession) -> BoxFuture<'a, Result<(), StoreError>> {
        let (db, s) = (self.db.clone(), s.clone());
        Box::pin(self.rt.run(async move { db.session_put(&s).await }))
    }

    fn delete_session<'a>(&'a self, token_hash: &'a str) -> BoxFuture<'a, Result<(), StoreError>> {
        let db = self.db.clone();
        let hash = token_hash.to_owned();
        Box::pin(self.rt.run(async move { db.session_delete(&hash).await }))
    }

    fn live_sessions(&self, now: i64) -> BoxFuture<'_, Result<Vec<StoredSession>, StoreError>> {
        let db = self.db.clone();
        Box::pin(self.rt.run(async move { db.sessions_live(now).await }))
    }

    fn append_as<'a>(
        &'a self,
        events: &'a [StoredEvent],
        writers: &'a [AgentWrite],
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let (db, fence, writers) = (self.db.clone(), self.fence.clone(), writers.to_vec());
        Box::pin(async move {
            let rows = rows(events)?;
            self.rt
                .run(async move { db.insert(rows, fence.as_deref(), &writers, None).await })
                .await
        })
    }

    fn append_recorded<'a>(
        &'a self,
        events: &'a [StoredEvent],
        writers: &'a [AgentWrite],
        recorded: &'a crate::model_calls::Recorded,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let (db, fence, writers) = (self.db.clone(), self.fence.clone(), writers.to_vec());
        let recorded = recorded.clone();
        Box::pin(async move {
            let rows = rows(events)?;
            self.rt
                .run(async move {
                    db.insert(rows, fence.as_deref(), &writers, Some(recorded))
                        .await
                })
                .await
        })
    }

    fn put_snapshot(
        &self,
        version: u64,
        json: SnapshotJson,
    ) -> BoxFuture<'_, Result<u64, StoreError>> {
        let (db, fence) = (self.db.clone(), self.fence.clone());
        Box::pin(
            self.rt
                .run(async move { db.snapshot_put(version, json.0, fence.as_deref()).await }),
        )
    }

    fn latest_snapshot(&self) -> BoxFuture<'_, Result<Option<Snapshot>, StoreError>> {
        let db = self.db.clone();
        Box::pin(self.rt.run(async move { db.snapshot_latest().await }))
    }

    fn events_after(
        &self,
        version: u64,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<Event>, StoreError>> {
        let db = self.db.clone();
        Box::pin(
            self.rt
                .run(async move { db.select_events(None, version, limit).await }),
        )
    }

    fn task_events<'a>(
        &'a self,
        task: &'a TaskId,
        version: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<Event>, StoreError>> {
        let (db, task) = (self.db.clone(), task.clone());
        Box::pin(
            self.rt
                .run(async move { db.select_events(Some(task), version, limit).await }),
        )
    }

    fn last_version(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { Ok(self.db.last.load(Ordering::SeqCst)) })
    }

    fn archived<'a>(
        &'a self,
        task: &'a TaskId,
    ) -> BoxFuture<'a, Result<Option<ArchivedTask>, StoreError>> {
        let task = task.clone();
        Box::pin(self.call(|db| async move { db.archive_get(task).await }))
    }

    fn archived_after<'a>(
        &'a self,
        after: Option<&'a TaskId>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<ArchivedTask>, StoreError>> {
        let after = after.cloned();
        Box::pin(self.call(|db| async move { db.archive_page(after, limit).await }))
    }

    fn last_compaction(&self) -> BoxFuture<'_, Result<Option<Compacted>, StoreError>> {
        Box::pin(self.call(|db| async move { db.compaction_get().await }))
    }

    fn compact<'a>(
        &'a self,
        policy: &'a Compaction,
        stop: &'a AtomicBool,
    ) -> BoxFuture<'a, Result<Compacted, StoreError>> {
        Box::pin(self.compact_now(policy, stop))
    }

    fn checkpoint(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.call(|db| async move { db.sqlite_checkpoint().await }))
    }

    fn put_step_calls<'a>(
        &'a self,
        step: &'a StepId,
        calls: String,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let step = step.clone();
        Box::pin(self.call(|db| async move { db.step_calls_put(step, calls).await }))
    }

    fn step_calls<'a>(
        &'a self,
        step: &'a StepId,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        let step = step.clone();
        Box::pin(self.call(|db| async move { db.step_calls_get(step).await }))
    }

    fn put_model_calls(
        &self,
        calls: Vec<crate::model_calls::StoredModelCall>,
        trim: crate::model_calls::Trim,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.call(|db| async move { db.model_calls_put(calls, trim).await }))
    }

    fn model_calls<'a>(
        &'a self,
        task: Option<&'a TaskId>,
        after: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<crate::model_calls::StoredModelCall>, StoreError>> {
        let task = task.cloned();
        Box::pin(self.call(|db| async move { db.model_calls_get(task, after, limit).await }))
    }

    fn put_blob(
        &self,
        blob: cohort_core::call::media::Blob,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.call(|db| async move { db.blob_put(blob).await }))
    }

    fn blob<'a>(
        &'a self,
        id: &'a cohort_core::call::media::BlobId,
    ) -> BoxFuture<'a, Result<Option<cohort_core::call::media::Blob>, StoreError>> {
        let id = id.clone();
        Box::pin(self.call(|db| async move { db.blob_get(id).await }))
    }

    fn put_attachment(
        &self,
        file: cohort_core::attachment::Attachment,
        bytes: Vec<u8>,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(self.call(|db| async move { db.attachment_put(file, bytes).await }))
    }

    fn attachment<'a>(
        &'a self,
        id: &'a cohort_core::attachment::AttachmentId,
        with_bytes: bool,
    ) -> BoxFuture<'a, Result<Option<crate::KeptAttachment>, StoreError>> {
        let id = id.clone();
        Box::pin(self.call(|db| async move { db.attachment_get(id, with_bytes).await }))
    }
}

/// The store's own runtime (one thread). Dropped without waiting, from any context.
struct StoreRuntime(Option<tokio::runtime::Runtime>);

impl StoreRuntime {
    fn start() -> Result<Self, StoreError> {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cohort-store")
            .enable_all()
            .build()
            .map(|rt| StoreRuntime(Some(rt)))
            .map_err(|e| StoreError::Query(sqlx::Error::Io(e)))
    }

    /// Runs `work` on the store's runtime and waits for it.
    fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> impl Future<Output = Result<T, StoreError>> + Send + 'static {
        let running = self.0.as_ref().map(|rt| rt.spawn(work));
        async move {
            match running {
                Some(task) => task.await.unwrap_or_else(|e| {
                    Err(StoreError::Query(sqlx::Error::Io(std::io::Error::other(
                        format!("the store's call did not finish: {e}"),
                    ))))
                }),
                None => Err(StoreError::Query(sqlx::Error::PoolClosed)),
            }
        }
    }
}

impl Drop for StoreRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}
