-- The model calls of failed steps (each as sent and answered: system message, prompt, raw reply
-- or error), so a person can still read why a step failed after a restart; the newest calls of
-- every step live in memory only. Each text is capped, and only the newest rows are kept.
-- Portable SQL: the same file runs on SQLite and Postgres.
CREATE TABLE IF NOT EXISTS step_calls (
    step_id TEXT PRIMARY KEY,
    at BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS step_calls_by_time ON step_calls (at);
