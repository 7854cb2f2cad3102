-- A snapshot in parts of about a megabyte each: a database copies a value it is given (and
-- again into its record), so one row of tens of megabytes cost the process three times its
-- size while it was written. A snapshot row whose body is empty has its body here, in order.
-- Portable SQL: the same file runs on SQLite and Postgres.
CREATE TABLE IF NOT EXISTS snapshot_parts (
    version BIGINT NOT NULL,
    part BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (version, part)
);
