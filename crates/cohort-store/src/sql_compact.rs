//! The database calls of compaction and of the store's figures: the archive, the record of the
//! last compaction, pruning in short transactions (the journal's commits wait at most one), and
//! giving SQLite's space back. Portable SQL except where a backend differs (space, sizes).

use super::sql::{Backend, Db, SCHEMA_ARCHIVE};
use super::{ArchivedTask, Compacted, StoreError, StoreStats};
use cohort_core::ids::TaskId;
use sqlx::Row;
use sqlx::any::AnyRow;

fn archived_row(row: &AnyRow) -> Result<ArchivedTask, StoreError> {
    let task: String = row.try_get(0)?;
    let body: String = row.try_get(1)?;
    serde_json::from_str(&body).map_err(|e| StoreError::BadArchive {
        task,
        why: e.to_string(),
    })
}

impl Db {
    fn has_archive(&self) -> bool {
        self.schema >= SCHEMA_ARCHIVE
    }

    pub(super) async fn archive_get(
        &self,
        task: TaskId,
    ) -> Result<Option<ArchivedTask>, StoreError> {
        if !self.has_archive() {
            return Ok(None);
        }
        let row = sqlx::query("SELECT task_id, body FROM task_archive WHERE task_id = $1")
            .bind(task.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(archived_row).transpose()
    }

    pub(super) async fn archive_page(
        &self,
        after: Option<TaskId>,
        limit: usize,
    ) -> Result<Vec<ArchivedTask>, StoreError> {
        if !self.has_archive() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(
            "SELECT task_id, body FROM task_archive WHERE task_id > $1 ORDER BY task_id LIMIT $2",
        )
        .bind(after.map(|t| t.as_str().to_owned()).unwrap_or_default())
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(archived_row).collect()
    }

    /// Keeps a task's record (its body is the whole [`ArchivedTask`], version included).
    pub(super) async fn archive_put(
        &self,
        task: TaskId,
        version: u64,
        body: String,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO task_archive (task_id, version, at, body) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (task_id) DO UPDATE SET version = excluded.version, \
             at = excluded.at, body = excluded.body",
        )
        .bind(task.as_str().to_owned())
        .bind(version as i64)
        .bind(chrono::Utc::now().timestamp_millis())
        .bind(body)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(super) async fn compaction_get(&self) -> Result<Option<Compacted>, StoreError> {
        if !self.has_archive() {
            return Ok(None);
        }
        let Some(r) = sqlx::query(
            "SELECT at, snapshot, folded_to, events_pruned, snapshots_pruned, tasks_archived, \
             bytes_before, bytes_after FROM compaction WHERE id = 1",
        )
        .fetch_optional(&self.pool)
        .await?
        else {
            return Ok(None);
        };
        let n = |i: usize| r.try_get::<i64, _>(i).map(|v| v as u64);
        Ok(Some(Compacted {
            at: r.try_get(0)?,
            snapshot: n(1)?,
            folded_to: n(2)?,
            events_pruned: n(3)?,
            snapshots_pruned: n(4)?,
            tasks_archived: n(5)?,
            bytes_before: n(6)?,
            bytes_after: n(7)?,
        }))
    }

    pub(super) async fn compaction_put(&self, c: Compacted) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO compaction (id, at, snapshot, folded_to, events_pruned, \
             snapshots_pruned, tasks_archived, bytes_before, bytes_after) \
             VALUES (1, $1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO UPDATE SET \
             at = excluded.at, snapshot = excluded.snapshot, folded_to = excluded.folded_to, \
             events_pruned = excluded.events_pruned, \
             snapshots_pruned = excluded.snapshots_pruned, \
             tasks_archived = excluded.tasks_archived, bytes_before = excluded.bytes_before, \
             bytes_after = excluded.bytes_after",
        )
        .bind(c.at)
        .bind(c.snapshot as i64)
        .bind(c.folded_to as i64)
        .bind(c.events_pruned as i64)
        .bind(c.snapshots_pruned as i64)
        .bind(c.tasks_archived as i64)
        .bind(c.bytes_before as i64)
        .bind(c.bytes_after as i64)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The newest snapshot's version and size (its row's and its parts'), if there is one.
    pub(super) async fn snapshot_newest(&self) -> Result<Option<(u64, u64)>, StoreError> {
        let row = sqlx::query(
            "SELECT version, CAST(octet_length(body) AS BIGINT) FROM snapshots \
             ORDER BY version DESC LIMIT 1",
        )
        .fetch_optional(&self.pool)
        .await?;
        let Some(r) = row else { return Ok(None) };
        let version = r.try_get::<i64, _>(0)?;
        let mut bytes = int(&r, 1)?;
        if self.schema >= super::sql::SCHEMA_PARTS {
            let parts = sqlx::query(
                "SELECT CAST(COALESCE(SUM(octet_length(body)), 0) AS BIGINT) \
                 FROM snapshot_parts WHERE version = $1",
            )
            .bind(version)
            .fetch_one(&self.pool)
            .await?;
            bytes += int(&parts, 0)?;
        }
        Ok(Some((version as u64, bytes)))
    }

    /// The newest event up to `upto` published before `before` (ms since the epoch); 0 if none.
    pub(super) async fn last_event_before(
        &self,
        upto: u64,
        before: i64,
    ) -> Result<u64, StoreError> {
        let v: i64 = sqlx::query(
            "SELECT COALESCE(MAX(version), 0) FROM events WHERE version <= $1 AND at < $2",
        )
        .bind(upto as i64)
        .bind(before)
        .fetch_one(&self.pool)
        .await?
        .try_get(0)?;
        Ok(v as u64)
    }

    /// Up to `limit` events in `(above, upto]`, newest first, with the size of each.
    pub(super) async fn event_sizes_desc(
        &self,
        above: u64,
        upto: u64,
        limit: usize,
    ) -> Result<Vec<(u64, u64)>, StoreError> {
        let rows = sqlx::query(
            "SELECT version, CAST(octet_length(body) AS BIGINT) FROM events \
             WHERE version > $1 AND version <= $2 \
             ORDER BY version DESC LIMIT $3",
        )
        .bind(above as i64)
        .bind(upto as i64)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get::<i64, _>(0)? as u64, int(r, 1)?)))
            .collect()
    }

    /// The tasks with events in `(above, upto]`.
    pub(super) async fn tasks_between(
        &self,
        above: u64,
        upto: u64,
    ) -> Result<Vec<TaskId>, StoreError> {
        let rows = sqlx::query(
            "SELECT DISTINCT task_id FROM events WHERE version > $1 AND version <= $2 \
             AND task_id IS NOT NULL",
        )
        .bind(above as i64)
        .bind(upto as i64)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| Ok(TaskId::from(r.try_get::<String, _>(0)?.as_str())))
            .collect()
    }

    pub(super) async fn first_event(&self) -> Result<Option<u64>, StoreError> {
        let v: Option<i64> = sqlx::query("SELECT MIN(version) FROM events")
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?;
        Ok(v.map(|v| v as u64))
    }

    /// Deletes the events in `from..=to`; returns how many there were.
    pub(super) async fn events_delete(&self, from: u64, to: u64) -> Result<u64, StoreError> {
        let done = sqlx::query("DELETE FROM events WHERE version >= $1 AND version <= $2")
            .bind(from as i64)
            .bind(to as i64)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }

    pub(super) async fn snapshots_delete_before(&self, version: u64) -> Result<u64, StoreError> {
        let done = sqlx::query("DELETE FROM snapshots WHERE version < $1")
            .bind(version as i64)
            .execute(&self.pool)
            .await?;
        if self.schema >= super::sql::SCHEMA_PARTS {
            sqlx::query("DELETE FROM snapshot_parts WHERE version < $1")
                .bind(version as i64)
                .execute(&self.pool)
                .await?;
        }
        Ok(done.rows_affected())
    }
}

/// Giving space back and measuring it.
impl Db {
    /// SQLite's auto-vacuum mode, pages and free pages (None for Postgres).
    pub(super) async fn sqlite_pages(&self) -> Result<Option<(i64, u64, u64)>, StoreError> {
        if !matches!(self.backend, Backend::Sqlite(_)) {
            return Ok(None);
        }
        let pragma = |name: &'static str| async move {
            let v: i64 = sqlx::query(name).fetch_one(&self.pool).await?.try_get(0)?;
            Ok::<_, StoreError>(v)
        };
        let mode = pragma("PRAGMA auto_vacuum").await?;
        let pages = pragma("PRAGMA page_count").await? as u64;
        let free = pragma("PRAGMA freelist_count").await? as u64;
        Ok(Some((mode, pages, free)))
    }

    /// Rewrites a SQLite file whole, in incremental auto-vacuum mode from then on (the one time
    /// a file made before that mode is converted). It copies only what is live, needs room for
    /// that copy, and holds the write lock while it runs.
    pub(super) async fn sqlite_vacuum(&self) -> Result<(), StoreError> {
        let mut conn = self.pool.acquire().await?;
        sqlx::raw_sql("PRAGMA auto_vacuum = INCREMENTAL; VACUUM")
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    /// Gives up to `pages` free pages of a SQLite file back; returns how many are left free.
    pub(super) async fn sqlite_vacuum_step(&self, pages: u64) -> Result<u64, StoreError> {
        let mut conn = self.pool.acquire().await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "PRAGMA incremental_vacuum({pages})"
        )))
        .execute(&mut *conn)
        .await?;
        let free: i64 = sqlx::query("PRAGMA freelist_count")
            .fetch_one(&mut *conn)
            .await?
            .try_get(0)?;
        Ok(free.max(0) as u64)
    }

    /// Copies SQLite's `-wal` file into the database and truncates it (it would otherwise stay
    /// as large as its largest burst).
    pub(super) async fn sqlite_checkpoint(&self) -> Result<(), StoreError> {
        if matches!(self.backend, Backend::Sqlite(_)) {
            sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
                .fetch_all(&self.pool)
                .await?;
        }
        Ok(())
    }

    /// The store's size on disk: the SQLite file and its `-wal`, or Postgres's tables (with
    /// their indexes and TOAST).
    pub(super) async fn size(&self) -> Result<(u64, u64), StoreError> {
        match &self.backend {
            Backend::Sqlite(path) => {
                let len = |p: &std::path::Path| std::fs::metadata(p).map_or(0, |m| m.len());
                let wal = std::path::PathBuf::from(format!("{}-wal", path.display()));
                Ok((len(path), len(&wal)))
            }
            Backend::Postgres => {
                let tables = if self.schema >= super::sql::SCHEMA_PARTS {
                    "'events', 'snapshots', 'snapshot_parts', 'sessions', 'cohort_meta', \
                     'task_archive', 'compaction'"
                } else if self.has_archive() {
                    "'events', 'snapshots', 'sessions', 'cohort_meta', 'task_archive', 'compaction'"
                } else {
                    "'events', 'snapshots', 'sessions', 'cohort_meta'"
                };
                let v: i64 = sqlx::query(sqlx::AssertSqlSafe(format!(
                    "SELECT CAST(COALESCE(SUM(pg_total_relation_size(c.oid)), 0) AS BIGINT) \
                     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = current_schema() AND c.relname IN ({tables})"
                )))
                .fetch_one(&self.pool)
                .await?
                .try_get(0)?;
                Ok((v as u64, 0))
            }
        }
    }

    /// What the store holds, in counts and bytes.
    pub(super) async fn stats(&self) -> Result<StoreStats, StoreError> {
        let (file_bytes, wal_bytes) = self.size().await?;
        let count = |sql: &'static str, after: u64| async move {
            let r = sqlx::query(sql)
                .bind(after as i64)
                .fetch_one(&self.pool)
                .await?;
            Ok::<_, StoreError>((int(&r, 0)?, int(&r, 1)?))
        };
        let newest = self.snapshot_newest().await?;
        let after = newest.map_or(0, |(v, _)| v);
        let events_sql = "SELECT COUNT(*), CAST(COALESCE(SUM(octet_length(body)), 0) AS BIGINT) \
                          FROM events WHERE version > $1";
        let (events, event_bytes) = count(events_sql, 0).await?;
        let (events_after_snapshot, event_bytes_after_snapshot) = count(events_sql, after).await?;
        let (snapshots, mut snapshot_bytes) = count(
            "SELECT COUNT(*), CAST(COALESCE(SUM(octet_length(body)), 0) AS BIGINT) \
             FROM snapshots WHERE version > $1",
            0,
        )
        .await?;
        if self.schema >= super::sql::SCHEMA_PARTS {
            snapshot_bytes += count(
                "SELECT COUNT(*), CAST(COALESCE(SUM(octet_length(body)), 0) AS BIGINT) \
                 FROM snapshot_parts WHERE version > $1",
                0,
            )
            .await?
            .1;
        }
        let (archived, archive_bytes) = if self.has_archive() {
            count(
                "SELECT COUNT(*), CAST(COALESCE(SUM(octet_length(body)), 0) AS BIGINT) \
                 FROM task_archive WHERE version > $1",
                0,
            )
            .await?
        } else {
            (0, 0)
        };
        let free_bytes = match self.sqlite_pages().await? {
            Some((_, pages, free)) if pages > 0 => file_bytes / pages * free,
            _ => 0,
        };
        Ok(StoreStats {
            file_bytes,
            wal_bytes,
            free_bytes,
            events,
            event_bytes,
            events_after_snapshot,
            event_bytes_after_snapshot,
            snapshots,
            snapshot_bytes,
            newest_snapshot: newest,
            archived,
            archive_bytes,
            last_compaction: self.compaction_get().await?,
        })
    }
}

/// A count or a size from a row (SQLite and Postgres both answer a BIGINT).
fn int(row: &AnyRow, i: usize) -> Result<u64, StoreError> {
    Ok(row.try_get::<i64, _>(i)?.max(0) as u64)
}
