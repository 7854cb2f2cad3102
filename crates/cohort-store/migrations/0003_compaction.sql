-- Compaction: what is kept of a task once its events are pruned, and the last compaction.
-- Portable SQL: the same file runs on SQLite and Postgres.
-- A task's state and stages as of `version`, the newest event folded into them: its events up
-- to there may be gone, and a reader applies only its events after `version`.
CREATE TABLE IF NOT EXISTS task_archive (
    task_id TEXT PRIMARY KEY,
    version BIGINT NOT NULL,
    at BIGINT NOT NULL,
    body TEXT NOT NULL
);
-- One row (id 1): the last compaction. Events up to `folded_to` are in the archive and the
-- newest snapshot; any still in `events` are leftovers of a compaction that was interrupted.
CREATE TABLE IF NOT EXISTS compaction (
    id BIGINT PRIMARY KEY,
    at BIGINT NOT NULL,
    snapshot BIGINT NOT NULL,
    folded_to BIGINT NOT NULL,
    events_pruned BIGINT NOT NULL,
    snapshots_pruned BIGINT NOT NULL,
    tasks_archived BIGINT NOT NULL,
    bytes_before BIGINT NOT NULL,
    bytes_after BIGINT NOT NULL
);
