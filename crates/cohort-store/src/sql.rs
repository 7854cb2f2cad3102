//! The store's database calls on SQLite or Postgres through sqlx's `Any` driver, so one set
//! of queries (portable SQL, `$n` parameters) serves both (`SqlStore` runs them). Opening a
//! store takes its lock (a lock file beside a SQLite database, an advisory lock on Postgres),
//! so two processes never write the same team; checks the schema version; and runs the
//! migrations it lacks. A new SQLite file is made with incremental auto-vacuum, so compaction
//! can give its space back a piece at a time (`sql_compact.rs`).

use super::lease::{AgentWrite, Fence, check_agents};
use super::{Snapshot, StoreError, StoredEvent, StoredSession};
use cohort_core::event::Event;
use cohort_core::ids::TaskId;
use sqlx::any::AnyPoolOptions;
use sqlx::{AnyConnection, AnyPool, AssertSqlSafe, Connection, Executor, Row};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The schema this binary reads and writes; a store with a newer one is refused.
pub const SCHEMA_VERSION: i64 = 10;

/// The migrations, in order: migration `i` brings the schema to version `i + 1`.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_events.sql"),
    include_str!("../migrations/0002_sessions.sql"),
    include_str!("../migrations/0003_compaction.sql"),
    include_str!("../migrations/0004_snapshot_parts.sql"),
    include_str!("../migrations/0005_step_calls.sql"),
    include_str!("../migrations/0006_nodes.sql"),
    include_str!("../migrations/0007_blobs.sql"),
    include_str!("../migrations/0008_model_calls.sql"),
    include_str!("../migrations/0009_model_call_texts.sql"),
    include_str!("../migrations/0010_attachments.sql"),
];

/// The schema that has the archive and the compaction record (a store written by an older
/// cohort, read without migrating it, has neither).
pub(super) const SCHEMA_ARCHIVE: i64 = 3;
/// The schema that keeps a snapshot in parts (older ones keep each in one row).
pub(super) const SCHEMA_PARTS: i64 = 4;
/// The schema that keeps the model calls of failed steps.
pub(super) const SCHEMA_STEP_CALLS: i64 = 5;
/// The schema that has the nodes and leases of a team across machines.
pub(super) const SCHEMA_NODES: i64 = 6;
/// The schema that keeps the images and sounds tools returned.
pub(super) const SCHEMA_BLOBS: i64 = 7;
/// The schema that records every model call.
pub(super) const SCHEMA_MODEL_CALLS: i64 = 8;
/// From here a recorded call's system prompt is kept once, in `model_call_texts`.
pub(super) const SCHEMA_CALL_TEXTS: i64 = 9;
/// The schema that keeps the files people attach.
pub(super) const SCHEMA_ATTACHMENTS: i64 = 10;

/// The most a SQLite store's `-wal` file keeps once checkpointed: a burst of large commits
/// grows it, and without a limit it would stay that large.
const WAL_KEPT_BYTES: u64 = 64 * 1024 * 1024;

/// Events per INSERT: few round trips, well under both databases' parameter limits.
pub(super) const ROWS_PER_INSERT: usize = 500;

/// Which advisory lock a Postgres store takes (any fixed number; "cohort" in ASCII).
const PG_LOCK_KEY: i64 = 0x636f_686f_7274;
/// Which advisory lock a Postgres store holds while it migrates ("cohortm").
const PG_MIGRATE_KEY: i64 = 0x0063_6f68_6f72_746d;
/// How long opening a Postgres store waits for another process's lock to go.
const PG_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Which database a store is: compaction gives space back and sizes are read differently.
pub(super) enum Backend {
    /// The SQLite file (its `-wal` file beside it).
    Sqlite(PathBuf),
    Postgres,
}

/// A store that is its database's tables: every call, in the calling runtime.
pub(super) struct Db {
    pub(super) pool: AnyPool,
    /// What renews leases and says the node is alive: a connection of its own on a node's
    /// store, so a journal or a compaction holding every connection of `pool` never costs
    /// the node its leases (the main pool itself elsewhere).
    pub(super) leases: AnyPool,
    pub(super) backend: Backend,
    /// The schema version of the database (below [`SCHEMA_VERSION`] only for a reader of a
    /// store an older cohort wrote).
    pub(super) schema: i64,
    /// The URL without its password, for messages.
    pub(super) url: String,
    /// The last version stored, to refuse events out of order before touching the database.
    pub(super) last: AtomicU64,
    /// Held while the store is open: the lock file of a SQLite store, the connection holding a
    /// Postgres store's advisory lock.
    _lock: Lock,
}

enum Lock {
    File(#[allow(dead_code)] File),
    Postgres(#[allow(dead_code)] tokio::sync::Mutex<AnyConnection>),
    /// A reader takes no lock.
    None,
}

impl Db {
    /// Opens (creating if need be) the SQLite database at `path`, WAL mode.
    pub(super) async fn open_sqlite(path: &Path) -> Result<Db, StoreError> {
        let url = format!("sqlite://{}", path.display());
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Open {
                url: url.clone(),
                source: sqlx::Error::Io(e),
            })?;
        }
        let lock_path = PathBuf::from(format!("{}.lock", path.display()));
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| StoreError::Open {
                url: url.clone(),
                source: sqlx::Error::Io(e),
            })?;
        if lock.try_lock().is_err() {
            return Err(StoreError::Locked {
                url,
                lock: lock_path,
            });
        }
        sqlx::any::install_default_drivers();
        let conn_url = format!("{url}?mode=rwc");
        // One connection first, so a file that is not a database fails at once and clearly
        // (a pool would retry it until its timeout).
        let mut probe =
            AnyConnection::connect(&conn_url)
                .await
                .map_err(|source| StoreError::Open {
                    url: url.clone(),
                    source,
                })?;
        let probed = sqlx::raw_sql("SELECT count(*) FROM sqlite_master")
            .execute(&mut probe)
            .await;
        let _ = probe.close().await;
        if let Err(e) = probed {
            return Err(StoreError::Corrupt {
                url,
                why: e.to_string(),
            });
        }
        let pool = AnyPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .after_connect(|conn, _| {
                Box::pin(async move {
                    // Incremental auto-vacuum first: it takes effect only on a new file (whose
                    // header the WAL switch writes); an older file is converted by its first
                    // compaction. WAL: readers never wait for the writer. FULL: a commit is on
                    // disk when it returns (group commit makes that cheap).
                    conn.execute(AssertSqlSafe(format!(
                        "PRAGMA auto_vacuum = INCREMENTAL; PRAGMA journal_mode = WAL; \
                         PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000; \
                         PRAGMA journal_size_limit = {WAL_KEPT_BYTES};"
                    )))
                    .await?;
                    Ok(())
                })
            })
            .connect(&conn_url)
            .await
            .map_err(|source| StoreError::Open {
                url: url.clone(),
                source,
            })?;
        let backend = Backend::Sqlite(path.to_owned());
        Self::ready((pool.clone(), pool), url, backend, Lock::File(lock)).await
    }

    /// Connects to the Postgres database at `url` (`postgres://…`) and takes its lock: alone
    /// (one process writes the team), or `shared` with the other nodes of a team across
    /// machines, whose leases say who writes (either kind keeps the other out).
    pub(super) async fn open_postgres(url: &str, shared: bool) -> Result<Db, StoreError> {
        let shown = without_password(url);
        sqlx::any::install_default_drivers();
        let open = |source| StoreError::Open {
            url: shown.clone(),
            source,
        };
        let mut locker = AnyConnection::connect(url).await.map_err(open)?;
        // A process killed a moment ago may still hold the lock until the server notices its
        // connection is gone: wait a little for it before calling the store in use.
        let deadline = std::time::Instant::now() + PG_LOCK_WAIT;
        let got = loop {
            let take = if shared {
                "SELECT pg_try_advisory_lock_shared($1)"
            } else {
                "SELECT pg_try_advisory_lock($1)"
            };
            let got: bool = sqlx::query(take)
                .bind(PG_LOCK_KEY)
                .fetch_one(&mut locker)
                .await
                .and_then(|r| r.try_get(0))
                .map_err(open)?;
            if got || std::time::Instant::now() >= deadline {
                break got;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        };
        if !got {
            return Err(StoreError::Locked {
                url: shown,
                lock: PathBuf::from(format!("pg_advisory_lock({PG_LOCK_KEY})")),
            });
        }
        let pool = AnyPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect(url)
            .await
            .map_err(open)?;
        let leases = match shared {
            true => AnyPoolOptions::new()
                .max_connections(1)
                .acquire_timeout(std::time::Duration::from_secs(5))
                .connect(url)
                .await
                .map_err(open)?,
            false => pool.clone(),
        };
        // Nodes starting together on a new database would run the same migrations at once
        // (Postgres's catalog refuses a second `CREATE TABLE IF NOT EXISTS` under way): one at
        // a time, the others find them done.
        let migrating = |sql| sqlx::query(sql).bind(PG_MIGRATE_KEY);
        migrating("SELECT pg_advisory_lock($1)")
            .execute(&mut locker)
            .await
            .map_err(open)?;
        let lock = Lock::Postgres(tokio::sync::Mutex::new(locker));
        let ready = Self::ready((pool, leases), shown, Backend::Postgres, lock).await;
        if let Ok(db) = &ready
            && let Lock::Postgres(locker) = &db._lock
        {
            let _ = migrating("SELECT pg_advisory_unlock($1)")
                .execute(&mut *locker.lock().await)
                .await;
        }
        ready
    }

    /// Opens a store to read it only (`cohort inspect`, `cohort export`): no lock, so a
    /// running team may keep writing; nothing is created or migrated.
    pub(super) async fn open_reader(spec: &str) -> Result<Db, StoreError> {
        sqlx::any::install_default_drivers();
        let (url, shown, backend) =
            if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
                (spec.to_owned(), without_password(spec), Backend::Postgres)
            } else {
                let path = Path::new(spec.strip_prefix("sqlite://").unwrap_or(spec));
                let shown = format!("sqlite://{}", path.display());
                if !path.is_file() {
                    return Err(StoreError::Missing { url: shown });
                }
                let backend = Backend::Sqlite(path.to_owned());
                (format!("{shown}?mode=ro"), shown, backend)
            };
        let pool = AnyPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect(&url)
            .await
            .map_err(|source| StoreError::Open {
                url: shown.clone(),
                source,
            })?;
        let found = schema_version(&pool, &shown).await?;
        if found == 0 {
            return Err(StoreError::Missing { url: shown });
        }
        if found > SCHEMA_VERSION {
            return Err(StoreError::SchemaNewer {
                url: shown,
                found,
                supported: SCHEMA_VERSION,
            });
        }
        let store = Db {
            leases: pool.clone(),
            pool,
            backend,
            schema: found,
            url: shown,
            last: AtomicU64::new(0),
            _lock: Lock::None,
        };
        let last = store.query_last_version().await?;
        store.last.store(last, Ordering::SeqCst);
        Ok(store)
    }

    async fn ready(
        (pool, leases): (AnyPool, AnyPool),
        url: String,
        backend: Backend,
        lock: Lock,
    ) -> Result<Db, StoreError> {
        migrate(&pool, &url).await?;
        if matches!(backend, Backend::Postgres) {
            compress_with_lz4(&pool).await;
        }
        let store = Db {
            pool,
            leases,
            backend,
            schema: SCHEMA_VERSION,
            url,
            last: AtomicU64::new(0),
            _lock: lock,
        };
        let last = store.query_last_version().await?;
        store.last.store(last, Ordering::SeqCst);
        Ok(store)
    }

    pub(super) async fn query_last_version(&self) -> Result<u64, StoreError> {
        let v: i64 = sqlx::query("SELECT COALESCE(MAX(version), 0) FROM events")
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?;
        Ok(v as u64)
    }

    /// Appends the rows in one transaction (refused when `fence` no longer holds its lease, or
    /// one of `writers` its agent's); returns the bytes of their bodies.
    pub(super) async fn insert(
        &self,
        rows: Vec<EventRow>,
        fence: Option<&Fence>,
        writers: &[AgentWrite],
        recorded: Option<super::model_calls::Recorded>,
    ) -> Result<u64, StoreError> {
        if rows.is_empty() {
            return Ok(0);
        }
        let bytes = rows.iter().map(|r| r.body.len() as u64).sum();
        let last = self.last.load(Ordering::SeqCst);
        let mut prev = last;
        for r in &rows {
            if r.version <= prev {
                return Err(StoreError::OutOfOrder {
                    version: r.version,
                    last: prev,
                });
            }
            prev = r.version;
        }
        let mut tx = self.pool.begin().await?;
        if let Some(fence) = fence {
            fence.check(&mut tx).await?;
        }
        if !writers.is_empty() {
            check_agents(&mut tx, writers).await?;
        }
        let nameless = self.nameless();
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            let head = "INSERT INTO events (version, at, task_id, body) VALUES ";
            let mut q = sqlx::query(AssertSqlSafe(values_sql(
                head,
                4,
                chunk.len(),
                nameless,
                "",
            )));
            for r in chunk {
                q = q
                    .bind(r.version as i64)
                    .bind(r.at)
                    .bind(r.task_id.clone())
                    .bind(r.body.clone());
            }
            q.execute(&mut *tx).await?;
        }
        if let Some(r) = recorded {
            super::model_calls::write(&mut tx, r, nameless).await?;
        }
        if let Err(e) = tx.commit().await {
            // The commit may have landed before its answer was lost: learn what is stored.
            if let Ok(v) = self.query_last_version().await {
                self.last.store(v, Ordering::SeqCst);
            }
            return Err(e.into());
        }
        self.last.store(prev, Ordering::SeqCst);
        Ok(bytes)
    }

    /// Whether statements built with [`values_sql`] take nameless parameters (`?`): SQLite
    /// finds a numbered one (`$N`) by a scan of the statement's names, so binding a chunk of
    /// them costs their number squared (a fifth of a busy journal's time went there); nameless
    /// ones are bound in order at no cost. Postgres wants `$N`.
    pub(super) fn nameless(&self) -> bool {
        matches!(self.backend, Backend::Sqlite(_))
    }

    /// Keeps a snapshot, its JSON in `parts` (one row each, so the database copies one part at
    /// a time); returns its size in bytes.
    pub(super) async fn snapshot_put(
        &self,
        version: u64,
        parts: Vec<String>,
        fence: Option<&Fence>,
    ) -> Result<u64, StoreError> {
        let bytes = parts.iter().map(|p| p.len() as u64).sum();
        let mut tx = self.pool.begin().await?;
        if let Some(fence) = fence {
            fence.check(&mut tx).await?;
        }
        sqlx::query("DELETE FROM snapshot_parts WHERE version = $1")
            .bind(version as i64)
            .execute(&mut *tx)
            .await?;
        for (i, part) in parts.into_iter().enumerate() {
            sqlx::query("INSERT INTO snapshot_parts (version, part, body) VALUES ($1, $2, $3)")
                .bind(version as i64)
                .bind(i as i64)
                .bind(part)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(
            "INSERT INTO snapshots (version, at, body) VALUES ($1, $2, '') \
             ON CONFLICT (version) DO UPDATE SET body = excluded.body, at = excluded.at",
        )
        .bind(version as i64)
        .bind(chrono::Utc::now().timestamp_millis())
        .execute(&mut *tx)
        .await?;
        // The newest two are kept until compaction drops the older one (it would serve only
        // with the events after it, which compaction prunes): a team whose compaction is far
        // off still holds at most two.
        let keep = "(SELECT MIN(version) FROM \
             (SELECT version FROM snapshots ORDER BY version DESC LIMIT 2) AS newest)";
        for table in ["snapshots", "snapshot_parts"] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE version < {keep}"
            )))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(bytes)
    }

    pub(super) async fn snapshot_latest(&self) -> Result<Option<Snapshot>, StoreError> {
        // One transaction: a compaction beside it (a reader on a live store) cannot drop the
        // parts between the row and them.
        let mut tx = self.pool.begin().await?;
        let Some(row) =
            sqlx::query("SELECT version, body FROM snapshots ORDER BY version DESC LIMIT 1")
                .fetch_optional(&mut *tx)
                .await?
        else {
            return Ok(None);
        };
        let version: i64 = row.try_get(0)?;
        let mut body: String = row.try_get(1)?;
        // A snapshot written in parts has an empty row; one an older cohort wrote, its body.
        if body.is_empty() && self.schema >= SCHEMA_PARTS {
            body = snapshot_parts(&mut tx, version).await?;
        }
        tx.commit().await?;
        let states = serde_json::from_str(&body).map_err(|e| StoreError::BadSnapshot {
            version,
            why: e.to_string(),
        })?;
        Ok(Some(Snapshot {
            version: version as u64,
            states,
        }))
    }

    pub(super) async fn select_events(
        &self,
        task: Option<TaskId>,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Event>, StoreError> {
        let rows =
            match task {
                None => sqlx::query(
                    "SELECT version, body FROM events WHERE version > $1 ORDER BY version LIMIT $2",
                )
                .bind(after as i64)
                .bind(limit as i64)
                .fetch_all(&self.pool)
                .await?,
                Some(t) => {
                    sqlx::query(
                        "SELECT version, body FROM events WHERE task_id = $1 AND version > $2 \
                     ORDER BY version LIMIT $3",
                    )
                    .bind(t.as_str().to_owned())
                    .bind(after as i64)
                    .bind(limit as i64)
                    .fetch_all(&self.pool)
                    .await?
                }
            };
        rows.iter()
            .map(|row| {
                let version: i64 = row.try_get(0)?;
                let body: String = row.try_get(1)?;
                serde_json::from_str(&body).map_err(|e| StoreError::BadEvent {
                    version,
                    why: e.to_string(),
                })
            })
            .collect()
    }
}

impl Db {
    pub(super) async fn session_put(&self, s: &StoredSession) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO sessions (token_hash, human, expires_at) VALUES ($1, $2, $3) \
             ON CONFLICT (token_hash) DO UPDATE SET human = excluded.human, \
             expires_at = excluded.expires_at",
        )
        .bind(s.token_hash.clone())
        .bind(s.human.as_str().to_owned())
        .bind(s.expires_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(super) async fn session_delete(&self, token_hash: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM sessions WHERE token_hash = $1")
            .bind(token_hash.to_owned())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The session whose token hashes to `token_hash`, if it is not expired at `now`.
    pub(super) async fn session_live(
        &self,
        token_hash: &str,
        now: i64,
    ) -> Result<Option<StoredSession>, StoreError> {
        let row = sqlx::query(
            "SELECT token_hash, human, expires_at FROM sessions \
             WHERE token_hash = $1 AND expires_at > $2",
        )
        .bind(token_hash.to_owned())
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(session_of).transpose()
    }

    pub(super) async fn sessions_live(&self, now: i64) -> Result<Vec<StoredSession>, StoreError> {
        sqlx::query("DELETE FROM sessions WHERE expires_at <= $1")
            .bind(now)
            .execute(&self.pool)
            .await?;
        let rows = sqlx::query("SELECT token_hash, human, expires_at FROM sessions")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(session_of).collect()
    }
}

/// A row of `sessions` (`token_hash, human, expires_at`).
fn session_of(r: &sqlx::any::AnyRow) -> Result<StoredSession, StoreError> {
    Ok(StoredSession {
        token_hash: r.try_get(0)?,
        human: r.try_get::<String, _>(1)?.into(),
        expires_at: r.try_get(2)?,
    })
}

/// An event as a row of the `events` table.
pub(super) struct EventRow {
    version: u64,
    at: i64,
    task_id: Option<String>,
    body: String,
}

/// `head`, then `rows` groups of `cols` parameters (`(?, ?)` or `($1, $2), ($3, $4)`, see
/// [`Db::nameless`]), then `tail`: one statement for many rows. Only placeholders are put
/// together here; the data goes in as parameters.
pub(super) fn values_sql(
    head: &str,
    cols: usize,
    rows: usize,
    nameless: bool,
    tail: &str,
) -> String {
    let mut sql = String::with_capacity(head.len() + tail.len() + rows * cols * 6);
    sql.push_str(head);
    for i in 0..rows {
        sql.push_str(if i > 0 { ",(" } else { "(" });
        for c in 0..cols {
            if c > 0 {
                sql.push_str(", ");
            }
            if nameless {
                sql.push('?');
            } else {
                sql.push_str(&format!("${}", i * cols + c + 1));
            }
        }
        sql.push(')');
    }
    sql.push_str(tail);
    sql
}

pub(super) fn rows(events: &[StoredEvent]) -> Result<Vec<EventRow>, StoreError> {
    events
        .iter()
        .map(|e| {
            Ok(EventRow {
                version: e.event.version,
                at: e.event.at,
                task_id: e.task_id.as_ref().map(|t| t.as_str().to_owned()),
                body: serde_json::to_string(&e.event).map_err(|err| StoreError::BadEvent {
                    version: e.event.version as i64,
                    why: err.to_string(),
                })?,
            })
        })
        .collect()
}

/// Brings the schema up to [`SCHEMA_VERSION`], refusing a store whose schema is newer.
async fn migrate(pool: &AnyPool, url: &str) -> Result<(), StoreError> {
    let corrupt = |e: sqlx::Error| StoreError::Corrupt {
        url: url.to_owned(),
        why: e.to_string(),
    };
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS cohort_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    )
    .execute(pool)
    .await
    .map_err(corrupt)?;
    let found = schema_version(pool, url).await?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::SchemaNewer {
            url: url.to_owned(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
        let mut tx = pool.begin().await?;
        sqlx::raw_sql(*sql).execute(&mut *tx).await?;
        sqlx::query(
            "INSERT INTO cohort_meta (key, value) VALUES ('schema_version', $1) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )
        .bind((i as i64 + 1).to_string())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
    }
    Ok(())
}

/// The tables whose `body` may be large (a recorded call, a snapshot's part, a blob).
const LARGE_BODIES: &[&str] = &[
    "events",
    "snapshots",
    "snapshot_parts",
    "task_archive",
    "step_calls",
    "blobs",
    "model_calls",
    "model_call_texts",
    "attachments",
];

/// Has Postgres compress the large bodies it keeps out of line with lz4 where it can (from
/// Postgres 14, when built with it, as Debian's is) instead of its default pglz: a wide
/// team's journal writes tens of megabytes of recorded calls and snapshots a minute, and
/// pglz made storing them most of each commit's time (BENCHMARKS.md, issue 45). Done once,
/// at the first open that can: only a column not yet lz4 is changed (values stored before keep
/// their compression; both read the same). A server without lz4 keeps pglz, said at debug
/// level.
async fn compress_with_lz4(pool: &AnyPool) {
    let listed = LARGE_BODIES
        .iter()
        .map(|t| format!("'{t}'"))
        .collect::<Vec<_>>()
        .join(", ");
    // Only the fixed names above are put together here.
    let find = format!(
        "SELECT c.relname::text FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid \
         WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' \
         AND a.attname = 'body' AND a.attcompression <> 'l' AND c.relname IN ({listed})"
    );
    let tables: Vec<String> = match sqlx::query_scalar(AssertSqlSafe(find))
        .fetch_all(pool)
        .await
    {
        Ok(tables) => tables,
        Err(e) => {
            tracing::debug!("the store's bodies keep Postgres's default compression: {e}");
            return;
        }
    };
    for table in tables.iter().filter(|t| LARGE_BODIES.contains(&t.as_str())) {
        if let Err(e) = alter_to_lz4(pool, table).await {
            tracing::debug!("{table}'s bodies keep Postgres's default compression for now: {e}");
            return;
        }
    }
}

/// Sets lz4 on `table`'s bodies, waiting at most a second for its lock: the change locks the
/// table whole, and a running team's writes would queue behind a wait for a long read (the next
/// open tries again).
async fn alter_to_lz4(pool: &AnyPool, table: &str) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::raw_sql("SET LOCAL lock_timeout = '1s'")
        .execute(&mut *tx)
        .await?;
    let alter = format!("ALTER TABLE {table} ALTER COLUMN body SET COMPRESSION lz4");
    sqlx::raw_sql(AssertSqlSafe(alter))
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

/// A snapshot's parts, joined in order (read a few at a time).
async fn snapshot_parts(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    version: i64,
) -> Result<String, StoreError> {
    const AT_ONCE: i64 = 16;
    let mut body = String::new();
    let mut next = 0i64;
    loop {
        let rows = sqlx::query(
            "SELECT part, body FROM snapshot_parts WHERE version = $1 AND part >= $2 \
             ORDER BY part LIMIT $3",
        )
        .bind(version)
        .bind(next)
        .bind(AT_ONCE)
        .fetch_all(&mut **tx)
        .await?;
        for r in &rows {
            let part: i64 = r.try_get(0)?;
            if part != next {
                return Err(StoreError::BadSnapshot {
                    version,
                    why: format!("its part {next} is missing"),
                });
            }
            body.push_str(&r.try_get::<String, _>(1)?);
            next += 1;
        }
        if (rows.len() as i64) < AT_ONCE {
            return Ok(body);
        }
    }
}

/// The schema version a store records (0 for a database cohort never wrote).
async fn schema_version(pool: &AnyPool, url: &str) -> Result<i64, StoreError> {
    let corrupt = |e: sqlx::Error| StoreError::Corrupt {
        url: url.to_owned(),
        why: e.to_string(),
    };
    let row = match sqlx::query("SELECT value FROM cohort_meta WHERE key = 'schema_version'")
        .fetch_optional(pool)
        .await
    {
        Ok(row) => row,
        // No meta table: not a cohort store (yet).
        Err(sqlx::Error::Database(e)) if e.message().contains("cohort_meta") => None,
        Err(e) => return Err(corrupt(e)),
    };
    let Some(row) = row else { return Ok(0) };
    let v: String = row.try_get(0).map_err(corrupt)?;
    v.trim().parse().map_err(|_| StoreError::Corrupt {
        url: url.to_owned(),
        why: format!("its schema version is `{v}`"),
    })
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
pub(super) fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((creds, host)) if creds.contains(':') => {
            let user = creds.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_never_show() {
        assert_eq!(
            super::without_password("postgres://me:secret@db:5432/team"),
            "postgres://me:***@db:5432/team"
        );
        assert_eq!(
            super::without_password("postgres://db/team"),
            "postgres://db/team"
        );
    }
}
