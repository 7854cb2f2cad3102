-- Every model call a team made, as sent and answered (the whole request and reply, the step it
-- served), so a run can be replayed without the model and a failure read long after: numbered
-- by `seq` in the order the calls were sent, a ring of the newest `bytes` per agent (the team's
-- `retention.recorded_calls_mib`). Secrets are never part of a request.
-- Portable SQL: the same file runs on SQLite and Postgres.
CREATE TABLE IF NOT EXISTS model_calls (
    seq BIGINT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    task_id TEXT,
    step_id TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS model_calls_by_agent ON model_calls (agent_id, seq);
CREATE INDEX IF NOT EXISTS model_calls_by_task ON model_calls (task_id, seq);
