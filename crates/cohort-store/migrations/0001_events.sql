-- The state event log, snapshots of the states, and the store's own settings.
-- Portable SQL: the same file runs on SQLite and Postgres.
CREATE TABLE IF NOT EXISTS events (
    version BIGINT PRIMARY KEY,
    at BIGINT NOT NULL,
    task_id TEXT,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_task ON events (task_id, version);
CREATE TABLE IF NOT EXISTS snapshots (
    version BIGINT PRIMARY KEY,
    at BIGINT NOT NULL,
    body TEXT NOT NULL
);
