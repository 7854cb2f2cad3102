//! Durability: the state event stream written to a store, and read back after a restart.
//!
//! The store is a log of [`Event`]s plus snapshots of the whole
//! [`States`](cohort_core::event::States) (as a [`StatesRecord`]), so recovery reads the newest
//! snapshot and only the events after it. Compaction ([`compact`]) keeps it proportional to
//! what it holds: events the newest snapshot covers leave once past a retention window (each
//! task they touched folded first into its [`ArchivedTask`]), older snapshots leave, and the
//! space is given back. [`Store`] is the one small trait the runtime uses; [`SqlStore`]
//! implements it for SQLite (embedded, the default: a file, nothing to install) and Postgres
//! (shared, backed up), with one query layer (sqlx's `Any` driver) and the migrations in
//! `migrations/`.
//!
//! - [`sql`]: `SqlStore`, opening, locking and migrating a database, and its queries.
//! - [`archive`]: a task's record once its events are pruned, and folding events onto it.
//! - [`compact`]: compaction, what it keeps and what it drops.
//! - [`stats`]: what a store holds, in counts and bytes (`cohort inspect`, the bench).
//! - [`inspect`]: `cohort inspect` and `cohort export`, reading a store without the team.
//! - [`backup`]: `cohort backup`, a consistent copy of a SQLite store while the team runs.
//! - [`step_calls`]: the model calls of failed steps, kept so they outlive a restart.
//! - [`lease`]: the nodes of a team across machines and their fenced leases (Postgres).
//! - [`published`]: how far the team's events are on its NATS event stream.

pub mod archive;
mod attachments;
pub mod backup;
mod blobs;
pub mod compact;
pub mod inspect;
pub mod lease;
pub mod model_calls;
pub mod published;
pub mod sql;
mod sql_compact;
mod sql_store;
pub mod stats;
pub mod step_calls;

use cohort_core::config::Compaction;
use cohort_core::event::{Event, StatesRecord};
use cohort_core::ids::{StepId, TaskId};
use futures::future::BoxFuture;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

pub use archive::ArchivedTask;
pub use compact::Compacted;
pub use sql::SCHEMA_VERSION;
pub use sql_store::SqlStore;
pub use stats::StoreStats;

/// An event with the task it belongs to (for exporting one task), as the store keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredEvent {
    pub event: Event,
    pub task_id: Option<TaskId>,
}

/// A person's session as the store keeps it: a hash of the token, never the token.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredSession {
    pub token_hash: String,
    pub human: cohort_core::ids::AgentId,
    /// Milliseconds since the Unix epoch.
    pub expires_at: i64,
}

/// About the most bytes one part of a snapshot holds.
pub const SNAPSHOT_PART: usize = 1 << 20;

/// A snapshot's JSON in parts of about [`SNAPSHOT_PART`] bytes, each whole UTF-8: the store
/// keeps one row a part, so a snapshot of tens of megabytes is never copied whole into the
/// database's memory (it copies each value it is given, then again into its record).
#[derive(Debug, Default)]
pub struct SnapshotJson(pub Vec<String>);

impl SnapshotJson {
    /// The JSON that `write` writes, cut into parts as it is written.
    pub fn written(
        write: impl FnOnce(&mut Parts) -> serde_json::Result<()>,
    ) -> serde_json::Result<SnapshotJson> {
        let mut parts = Parts::default();
        write(&mut parts)?;
        parts.cut(0).map_err(serde::ser::Error::custom)?;
        Ok(SnapshotJson(parts.done))
    }

    pub fn bytes(&self) -> usize {
        self.0.iter().map(String::len).sum()
    }
}

impl From<String> for SnapshotJson {
    fn from(json: String) -> Self {
        SnapshotJson(vec![json])
    }
}

/// Where [`SnapshotJson::written`] writes: whole parts, and what is not a part yet.
#[derive(Default)]
pub struct Parts {
    done: Vec<String>,
    pending: Vec<u8>,
}

impl Parts {
    /// Moves whole parts out of `pending` while it holds `at_least` bytes or more (with 0:
    /// everything); each part ends where a character starts.
    fn cut(&mut self, at_least: usize) -> Result<(), std::string::FromUtf8Error> {
        while !self.pending.is_empty() && self.pending.len() >= at_least {
            let mut at = SNAPSHOT_PART.min(self.pending.len());
            while at < self.pending.len() && at > 0 && (self.pending[at] & 0xC0) == 0x80 {
                at -= 1;
            }
            let rest = self.pending.split_off(at);
            let part = std::mem::replace(&mut self.pending, rest);
            self.done.push(String::from_utf8(part)?);
        }
        Ok(())
    }
}

impl std::io::Write for Parts {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        self.cut(SNAPSHOT_PART)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The newest snapshot and how many events follow it.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    pub version: u64,
    pub states: StatesRecord,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open the data at {url}: {source}")]
    Open {
        url: String,
        #[source]
        source: sqlx::Error,
    },
    #[error(
        "the data at {url} is in use by another cohort process (lock file {lock}); stop it first"
    )]
    Locked { url: String, lock: PathBuf },
    #[error(
        "the data at {url} has schema version {found}, newer than this cohort knows ({supported}); \
         upgrade cohort to use it"
    )]
    SchemaNewer {
        url: String,
        found: i64,
        supported: i64,
    },
    #[error("there is no cohort data at {url}")]
    Missing { url: String },
    #[error("the data at {url} is not a cohort store or is damaged: {why}")]
    Corrupt { url: String, why: String },
    #[error("the store failed: {0}")]
    Query(#[from] sqlx::Error),
    #[error("event {version} in the store cannot be read: {why}")]
    BadEvent { version: i64, why: String },
    #[error("the snapshot at version {version} cannot be read: {why}")]
    BadSnapshot { version: i64, why: String },
    #[error("the archived record of task {task} cannot be read or written: {why}")]
    BadArchive { task: String, why: String },
    #[error("events must be appended in version order: {version} after {last}")]
    OutOfOrder { version: u64, last: u64 },
    #[error("cannot write the export: {0}")]
    Write(#[source] std::io::Error),
    #[error(
        "{url} is a Postgres database: back it up with pg_dump (for example `pg_dump \
         --format=custom --file=cohort.dump DATABASE_URL`), which copies it consistently while \
         the team runs"
    )]
    BackupPostgres { url: String },
    #[error("{} already exists: a backup is written to a new file only", .0.display())]
    BackupExists(PathBuf),
    #[error(
        "this node no longer holds the `{resource}` lease (its token {token}; node `{held_by}` \
         holds it now, token {token_now}): the store refuses its writes"
    )]
    Fenced {
        resource: String,
        token: i64,
        held_by: String,
        token_now: i64,
    },
    #[error(
        "node `{node}` runs another team file than node `{other}`, which serves this team now: \
         start every node of a team with the same team file"
    )]
    TeamDiffers { node: String, other: String },
    #[error(
        "{url} cannot hold the nodes of a team across machines: `--node` needs a Postgres store \
         (`--database postgres://…`)"
    )]
    NodesNeedPostgres { url: String },
    #[error("this store keeps no attached files")]
    NoAttachments,
    #[error("no task id given: --task needs a task id, or its first 4 characters or more")]
    NoTaskId,
    #[error(
        "`{given}` is too short to name a task: give 4 characters of its id or more (the \
         console shows 8)"
    )]
    ShortTaskId { given: String },
    #[error("no task in {url} has an id that is or starts with `{given}`")]
    UnknownTask { given: String, url: String },
    #[error("`{given}` names more than one task in {url}: {}; give more of the id", .matches.join(", "))]
    AmbiguousTask {
        given: String,
        url: String,
        matches: Vec<String>,
    },
}

/// Where a team keeps its data unless told otherwise: `.cohort/<team file name>.db` in the
/// team file's folder.
pub fn default_path(team_file: &std::path::Path) -> PathBuf {
    let stem = team_file
        .file_stem()
        .map_or_else(|| "team".into(), |s| s.to_string_lossy().into_owned());
    team_file
        .parent()
        .unwrap_or_else(|| std::path::Path::new("."))
        .join(".cohort")
        .join(format!("{stem}.db"))
}

/// What a store holds, read back: the states at `version` (empty and 0 for a new store).
pub struct Loaded {
    pub states: cohort_core::event::States,
    pub version: u64,
    /// Events replayed on top of the snapshot.
    pub replayed: u64,
}

/// Reads a store back: its newest snapshot, then every event after it, in pages.
pub async fn load(store: &dyn Store) -> Result<Loaded, StoreError> {
    // An event may hold a 64 KB message: pages are sized for memory, not for round trips.
    const PAGE: usize = 1_000;
    let (mut states, mut version) = match store.latest_snapshot().await? {
        Some(s) => (s.states.into_states(), s.version),
        None => (cohort_core::event::States::default(), 0),
    };
    let mut replayed = 0;
    loop {
        let page = store.events_after(version, PAGE).await?;
        let Some(last) = page.last() else { break };
        let last = last.version;
        for e in &page {
            states.apply_at(&e.change, e.at);
        }
        replayed += page.len() as u64;
        version = last;
        if page.len() < PAGE {
            break;
        }
    }
    Ok(Loaded {
        states,
        version,
        replayed,
    })
}

/// A task as the store leaves it, with its stages: its archived record (if compaction pruned
/// its older events) and its events after it. This is how a finished task that left memory
/// (retention) is still read. None when the store has nothing of it.
pub async fn stored_task(
    store: &dyn Store,
    id: &TaskId,
) -> Result<
    Option<(
        cohort_core::state::TaskState,
        Vec<cohort_core::state::StageState>,
    )>,
    StoreError,
> {
    const PAGE: usize = 256;
    let mut fold = archive::TaskFold::new(id, store.archived(id).await?);
    loop {
        let page = store.task_events(id, fold.version(), PAGE).await?;
        page.iter().for_each(|e| fold.apply(e));
        if page.len() < PAGE {
            break;
        }
    }
    Ok(fold.finish(0).map(|a| (a.task, a.stages)))
}

/// Where the runtime keeps its state events. Every method is one transaction.
pub trait Store: Send + Sync {
    /// Appends events, in version order and after every event already stored, all or none;
    /// returns the bytes stored (what the journal paces its snapshots by).
    fn append<'a>(&'a self, events: &'a [StoredEvent]) -> BoxFuture<'a, Result<u64, StoreError>> {
        self.append_as(events, &[])
    }
    /// Appends events as [`Store::append`] does, refused too unless each of `writers` (the
    /// agents on other nodes whose changes they hold) still holds its agent's lease, checked in
    /// the same transaction.
    fn append_as<'a>(
        &'a self,
        events: &'a [StoredEvent],
        writers: &'a [lease::AgentWrite],
    ) -> BoxFuture<'a, Result<u64, StoreError>>;
    /// Appends events as [`Store::append_as`] does, with the recorded model calls they came
    /// from (and the rings to trim) in the same transaction: a batch costs one commit.
    fn append_recorded<'a>(
        &'a self,
        events: &'a [StoredEvent],
        writers: &'a [lease::AgentWrite],
        recorded: &'a model_calls::Recorded,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let r = recorded.clone();
            self.put_model_calls(r.calls, r.trim).await?;
            self.append_as(events, writers).await
        })
    }
    /// Keeps a snapshot of the states at `version` (every event up to it applied), given as
    /// the JSON of their [`StatesRecord`] in parts ([`SnapshotJson`]); returns its size in
    /// bytes.
    fn put_snapshot(
        &self,
        version: u64,
        json: SnapshotJson,
    ) -> BoxFuture<'_, Result<u64, StoreError>>;
    /// The newest snapshot, if any.
    fn latest_snapshot(&self) -> BoxFuture<'_, Result<Option<Snapshot>, StoreError>>;
    /// Up to `limit` events after `version`, in order.
    fn events_after(
        &self,
        version: u64,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<Event>, StoreError>>;
    /// Up to `limit` events of one task after `version`, in order.
    fn task_events<'a>(
        &'a self,
        task: &'a TaskId,
        version: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<Event>, StoreError>>;
    /// The version of the last event stored (0 when there is none).
    fn last_version(&self) -> BoxFuture<'_, Result<u64, StoreError>>;
    /// Keeps a session (replacing one with the same token hash).
    fn put_session<'a>(&'a self, s: &'a StoredSession) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Forgets a session (a logout).
    fn delete_session<'a>(&'a self, token_hash: &'a str) -> BoxFuture<'a, Result<(), StoreError>>;
    /// The sessions not expired at `now` (ms since the epoch); expired ones are deleted.
    fn live_sessions(&self, now: i64) -> BoxFuture<'_, Result<Vec<StoredSession>, StoreError>>;
    /// A task's archived record (compaction pruned its events up to the record's version).
    fn archived<'a>(
        &'a self,
        task: &'a TaskId,
    ) -> BoxFuture<'a, Result<Option<ArchivedTask>, StoreError>>;
    /// Up to `limit` archived records of the tasks after `after`, in task id order.
    fn archived_after<'a>(
        &'a self,
        after: Option<&'a TaskId>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<ArchivedTask>, StoreError>>;
    /// The last compaction, if the store was ever compacted.
    fn last_compaction(&self) -> BoxFuture<'_, Result<Option<Compacted>, StoreError>>;
    /// Compacts the store (see [`compact`]); stops early, between two pieces of work, once
    /// `stop` is set.
    fn compact<'a>(
        &'a self,
        policy: &'a Compaction,
        stop: &'a AtomicBool,
    ) -> BoxFuture<'a, Result<Compacted, StoreError>>;
    /// Makes the store's main file hold everything committed, on a clean stop: SQLite copies
    /// its `-wal` file in and truncates it, so the `.db` file alone is a whole copy. Nothing to
    /// do for a store without such a file (Postgres).
    fn checkpoint(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }
    /// Keeps the model calls of a failed step (`calls`: their JSON, each text capped by the
    /// caller), replacing any kept for it; only the newest [`STEP_CALLS_KEPT`] steps' are kept.
    fn put_step_calls<'a>(
        &'a self,
        step: &'a StepId,
        calls: String,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let _ = (step, calls);
        Box::pin(async { Ok(()) })
    }
    /// The model calls kept for a failed step (their JSON), if any.
    fn step_calls<'a>(
        &'a self,
        step: &'a StepId,
    ) -> BoxFuture<'a, Result<Option<String>, StoreError>> {
        let _ = step;
        Box::pin(async { Ok(None) })
    }
    /// Keeps recorded model calls, then trims the rings `trim` names (each agent keeps its
    /// newest within its bytes).
    fn put_model_calls(
        &self,
        calls: Vec<model_calls::StoredModelCall>,
        trim: model_calls::Trim,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        let _ = (calls, trim);
        Box::pin(async { Ok(()) })
    }
    /// Recorded model calls after `after` (their `seq`), oldest first, at most `limit`; of
    /// `task` only when given.
    fn model_calls<'a>(
        &'a self,
        task: Option<&'a TaskId>,
        after: u64,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<model_calls::StoredModelCall>, StoreError>> {
        let _ = (task, after, limit);
        Box::pin(async { Ok(Vec::new()) })
    }
    /// Keeps an image or a sound a tool returned; only the newest [`BLOBS_KEPT`] are kept.
    fn put_blob(
        &self,
        blob: cohort_core::call::media::Blob,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        let _ = blob;
        Box::pin(async { Ok(()) })
    }
    /// A kept image or sound, if the store still has it.
    fn blob<'a>(
        &'a self,
        id: &'a cohort_core::call::media::BlobId,
    ) -> BoxFuture<'a, Result<Option<cohort_core::call::media::Blob>, StoreError>> {
        let _ = id;
        Box::pin(async { Ok(None) })
    }
    /// Keeps a file a person attached, before the upload is acknowledged; only the newest
    /// [`ATTACHMENTS_KEPT`] are kept. A store that keeps none refuses it.
    fn put_attachment(
        &self,
        file: cohort_core::attachment::Attachment,
        bytes: Vec<u8>,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        let _ = (file, bytes);
        Box::pin(async { Err(StoreError::NoAttachments) })
    }
    /// A kept attachment, with its bytes when `with_bytes`; none if the store does not have it.
    fn attachment<'a>(
        &'a self,
        id: &'a cohort_core::attachment::AttachmentId,
        with_bytes: bool,
    ) -> BoxFuture<'a, Result<Option<KeptAttachment>, StoreError>> {
        let _ = (id, with_bytes);
        Box::pin(async { Ok(None) })
    }
}

/// How many failed steps' model calls a store keeps (the newest).
pub const STEP_CALLS_KEPT: usize = 200;
/// How many images and sounds a store keeps (the newest; each at most
/// `cohort_core::call::media::MOST_BLOB_BYTES`).
pub const BLOBS_KEPT: usize = 128;
/// An attached file as a store gives it back: its reference and its bytes (none when they
/// were not asked for).
pub type KeptAttachment = (cohort_core::attachment::Attachment, Vec<u8>);

/// How many attached files a store keeps (the newest; each at most
/// `cohort_core::attachment::MOST_ATTACHMENT_BYTES`).
pub const ATTACHMENTS_KEPT: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_cut_into_parts_between_characters_and_joins_back_whole() {
        let text: String = "héllo wörld ✓ ".repeat(SNAPSHOT_PART / 5);
        let json = serde_json::to_string(&text).unwrap();
        let parts = SnapshotJson::written(|p| serde_json::to_writer(p, &text)).unwrap();
        assert!(parts.0.len() >= 3, "{} parts", parts.0.len());
        assert!(parts.0.iter().all(|p| p.len() <= SNAPSHOT_PART));
        assert_eq!(parts.0.concat(), json);
        assert_eq!(parts.bytes(), json.len());
    }
}
