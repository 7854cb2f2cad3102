-- A recorded model call's system prompt, kept once however many calls sent it (an agent sends
-- the same one call after call): a call names its text by `system_id`, the SHA-256 of the
-- text. Texts no kept call names are let go when a ring is trimmed.
-- Portable SQL: the same file runs on SQLite and Postgres.
CREATE TABLE IF NOT EXISTS model_call_texts (
    id TEXT PRIMARY KEY,
    body TEXT NOT NULL
);
ALTER TABLE model_calls ADD COLUMN system_id TEXT;
CREATE INDEX IF NOT EXISTS model_calls_by_system ON model_calls (system_id);
