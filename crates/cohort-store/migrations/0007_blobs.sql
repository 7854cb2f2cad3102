-- The images and sounds tools returned (MCP image and audio content), each under the SHA-256 of
-- its bytes, with its MIME type; a step's result keeps only the reference. Each blob is capped
-- by the runtime, and only the newest (by `seq`: the order they were last kept in) are kept.
-- Portable SQL: the same file runs on SQLite and Postgres. The bytes are kept as base64 text.
CREATE TABLE IF NOT EXISTS blobs (
    id TEXT PRIMARY KEY,
    mime TEXT NOT NULL,
    seq BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS blobs_by_seq ON blobs (seq);
