-- People's sessions: a hash of each token (never the token), whose it is, and when it expires.
CREATE TABLE IF NOT EXISTS sessions (
    token_hash TEXT PRIMARY KEY,
    human TEXT NOT NULL,
    expires_at BIGINT NOT NULL
);
