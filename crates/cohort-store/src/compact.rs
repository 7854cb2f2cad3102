//! Compaction: keeps a store proportional to what it holds. Recovery needs the newest snapshot
//! and the events after it; those are never touched. The events the snapshot covers are kept
//! for `cohort export` for a while (`store.keep_events_hours`, at most
//! `store.keep_events_mb` of them), then pruned; before a task's events go, the task is folded
//! into its archived record (its state and stages), which `stored_task` and `export` read.
//! Snapshots older than the newest are dropped. SQLite then gives the freed pages back to the
//! file system (incremental auto-vacuum, a page run at a time) and truncates its `-wal`;
//! Postgres reuses them (autovacuum; never `VACUUM FULL`, which would lock the team out).
//!
//! Every step is safe to interrupt (a kill, a stop): a task's record is written before its
//! events are pruned, and records the version it holds, so folding again never applies an
//! event twice; the version folded up to is recorded before any event goes.

use super::archive::TaskFold;
use super::{SqlStore, Store, StoreError};
use cohort_core::config::Compaction;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};

/// What one compaction did (the store keeps the last one's record).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Compacted {
    /// When it ran, in ms since the Unix epoch.
    pub at: i64,
    /// The newest snapshot when it ran: nothing after it was touched.
    pub snapshot: u64,
    /// Events up to here are folded into the archive and the snapshot (and pruned).
    pub folded_to: u64,
    pub events_pruned: u64,
    pub snapshots_pruned: u64,
    /// Tasks whose record was written or brought up to date.
    pub tasks_archived: u64,
    /// The store's size on disk before and after (the SQLite file and its `-wal`, or the
    /// Postgres tables).
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// Event sizes read a page at a time while finding where to cut.
const PAGE: usize = 10_000;
/// Events read a page at a time while folding a task: an event may hold a 64 KB message, so
/// a page is bytes in memory, not a count (a page of 10,000 was the server's peak).
const FOLD_PAGE: usize = 256;
/// Events deleted per transaction: the journal's commits wait for at most one.
const DELETE_RUN: u64 = 4_096;
/// Free pages a SQLite file gives back per step (16 MB at 4 KB a page).
const VACUUM_RUN: u64 = 4_096;
/// SQLite's `auto_vacuum` mode that gives free pages back on request.
const INCREMENTAL: i64 = 2;

impl SqlStore {
    /// Compacts the store under `policy` (see the module), stopping between two pieces of
    /// work once `stop` is set. The work of folding runs on the caller's thread; the database
    /// calls on the store's own runtime.
    pub(super) async fn compact_now(
        &self,
        policy: &Compaction,
        stop: &AtomicBool,
    ) -> Result<Compacted, StoreError> {
        let stopped = || stop.load(Ordering::Relaxed);
        let at = chrono::Utc::now().timestamp_millis();
        let (file, wal) = self.call(|db| async move { db.size().await }).await?;
        let last = self
            .call(|db| async move { db.compaction_get().await })
            .await?;
        let mut done = Compacted {
            at,
            bytes_before: file + wal,
            folded_to: last.map_or(0, |c| c.folded_to),
            ..Compacted::default()
        };
        let newest = self
            .call(|db| async move { db.snapshot_newest().await })
            .await?;
        // No snapshot: every event is needed to recover.
        let Some((snapshot, _)) = newest else {
            done.bytes_after = done.bytes_before;
            return Ok(done);
        };
        done.snapshot = snapshot;
        let cut = self.cut(policy, snapshot, at).await?;
        if cut > done.folded_to {
            done.tasks_archived = self.archive_tasks(done.folded_to, cut, stop).await?;
            if stopped() {
                return Ok(done);
            }
            done.folded_to = cut;
            // Recorded before any event goes (its sizes are made good at the end).
            done.bytes_after = done.bytes_before;
            self.call(|db| async move { db.compaction_put(done).await })
                .await?;
        }
        done.events_pruned = self.prune_events(done.folded_to, stop).await?;
        done.snapshots_pruned = self
            .call(|db| async move { db.snapshots_delete_before(snapshot).await })
            .await?;
        if !stopped() {
            self.give_space_back(stop).await?;
        }
        let (file, wal) = self.call(|db| async move { db.size().await }).await?;
        done.bytes_after = file + wal;
        self.call(|db| async move { db.compaction_put(done).await })
            .await?;
        Ok(done)
    }

    /// The newest version to prune up to (at most `snapshot`): events older than the window,
    /// and past the byte budget kept, counted from the snapshot down.
    async fn cut(&self, policy: &Compaction, snapshot: u64, now: i64) -> Result<u64, StoreError> {
        let before = now.saturating_sub(policy.keep_events.as_millis() as i64);
        let by_time = self
            .call(|db| async move { db.last_event_before(snapshot, before).await })
            .await?;
        let budget = policy.keep_events_bytes;
        let (mut kept, mut upto) = (0u64, snapshot);
        loop {
            let page = self
                .call(|db| async move { db.event_sizes_desc(by_time, upto, PAGE).await })
                .await?;
            for &(version, bytes) in &page {
                kept += bytes;
                if kept > budget {
                    return Ok(version.max(by_time));
                }
            }
            match page.last() {
                Some(&(oldest, _)) if page.len() == PAGE => upto = oldest - 1,
                _ => return Ok(by_time),
            }
        }
    }

    /// Brings the record of every task with events in `(above, upto]` up to `upto`; returns
    /// how many were written.
    async fn archive_tasks(
        &self,
        above: u64,
        upto: u64,
        stop: &AtomicBool,
    ) -> Result<u64, StoreError> {
        let tasks = self
            .call(|db| async move { db.tasks_between(above, upto).await })
            .await?;
        let mut written = 0;
        for task in tasks {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let mut fold = TaskFold::new(&task, self.archived(&task).await?);
            loop {
                let page = self.task_events(&task, fold.version(), FOLD_PAGE).await?;
                page.iter()
                    .take_while(|e| e.version <= upto)
                    .for_each(|e| fold.apply(e));
                let past = page.last().is_none_or(|e| e.version >= upto);
                if past || page.len() < FOLD_PAGE {
                    break;
                }
            }
            let Some(record) = fold.finish(upto) else {
                continue;
            };
            let body = serde_json::to_string(&record).map_err(|e| StoreError::BadArchive {
                task: task.as_str().to_owned(),
                why: e.to_string(),
            })?;
            self.call(|db| async move { db.archive_put(task, record.version, body).await })
                .await?;
            written += 1;
        }
        Ok(written)
    }

    /// Deletes the events up to `upto`, a run at a time; returns how many.
    async fn prune_events(&self, upto: u64, stop: &AtomicBool) -> Result<u64, StoreError> {
        let first = self
            .call(|db| async move { db.first_event().await })
            .await?;
        let Some(mut from) = first else {
            return Ok(0);
        };
        let mut pruned = 0;
        while from <= upto && !stop.load(Ordering::Relaxed) {
            let to = (from + DELETE_RUN - 1).min(upto);
            pruned += self
                .call(|db| async move { db.events_delete(from, to).await })
                .await?;
            from = to + 1;
        }
        Ok(pruned)
    }

    /// SQLite: gives free pages back to the file system and truncates the `-wal`. A file made
    /// before incremental auto-vacuum is rewritten once, when at least a quarter of it is free
    /// (the rewrite copies only what is live); until then SQLite reuses its free pages.
    async fn give_space_back(&self, stop: &AtomicBool) -> Result<(), StoreError> {
        let pages = self
            .call(|db| async move { db.sqlite_pages().await })
            .await?;
        let Some((mode, total, mut free)) = pages else {
            return Ok(());
        };
        if mode != INCREMENTAL {
            if free > 0 && free * 4 >= total {
                tracing::info!("rewriting the store once, to give its space back from now on");
                self.call(|db| async move { db.sqlite_vacuum().await })
                    .await?;
            }
        } else {
            while free > 0 && !stop.load(Ordering::Relaxed) {
                let left = self
                    .call(|db| async move { db.sqlite_vacuum_step(VACUUM_RUN).await })
                    .await?;
                // A step that frees nothing would free nothing the next time either.
                if left >= free {
                    break;
                }
                free = left;
            }
        }
        self.call(|db| async move { db.sqlite_checkpoint().await })
            .await
    }
}
