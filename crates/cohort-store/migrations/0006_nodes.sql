-- A team across machines (`cohort serve --node NAME` on a shared Postgres store): the nodes that
-- serve it and the leases that say which node owns what. Every time is in milliseconds since
-- the Unix epoch by the database's clock, so nodes whose clocks differ agree on expiry.
-- Portable SQL: the same file runs on SQLite and Postgres (only Postgres stores have nodes).
CREATE TABLE IF NOT EXISTS nodes (
    name TEXT PRIMARY KEY,
    -- The process now serving as this node (a node restarted under its name replaces it).
    instance TEXT NOT NULL,
    -- Where the node serves its API, for people and for nodes that point to the leader.
    address TEXT NOT NULL,
    -- SHA-256 of the node's team file: every live node must run the same one.
    team_hash TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    seen_at BIGINT NOT NULL,
    stopped_at BIGINT
);
-- A lease: `resource` (the whole team today) is owned by one node's process until
-- `expires_at`. `token` goes up by one each time another process takes it: every write of the
-- owner checks it in the write's own transaction, so a node that lost its lease cannot write.
CREATE TABLE IF NOT EXISTS leases (
    resource TEXT PRIMARY KEY,
    node TEXT NOT NULL,
    instance TEXT NOT NULL,
    token BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    taken_at BIGINT NOT NULL
);
