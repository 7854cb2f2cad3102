-- The files people attach to goals and answers, each under its id (made from its name and
-- bytes), with its name, type and size; messages and tasks keep only the reference. Each file
-- is capped by the runtime, and only the newest (by `seq`: the order they were kept in) are kept.
-- Portable SQL: the same file runs on SQLite and Postgres. The bytes are kept as base64 text.
CREATE TABLE IF NOT EXISTS attachments (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    mime TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS attachments_by_seq ON attachments (seq);
