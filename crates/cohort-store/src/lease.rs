//! A team across machines: the nodes that serve one team on a shared Postgres store, and the
//! leases that say which node owns what, each with a fencing token.
//!
//! The leases are rows of the store itself, not of another system: a write is refused when its
//! fence's token is no longer the lease's, and that check runs in the write's own transaction.
//! The locks are chosen so that only a takeover waits for writes: a write holds the lease row
//! `FOR KEY SHARE` while it commits; a takeover locks it `FOR UPDATE` first (which waits for
//! those writes, and makes every later write of the old owner see the new token); a renewal
//! or a release is a plain `UPDATE` of the expiry, which a write's lock does not hold up, so a
//! long snapshot never delays the renewal that keeps its node the owner. Expiry is by the
//! database's clock, so the nodes' clocks need not agree.

use super::sql::{Backend, SCHEMA_NODES};
use super::{SqlStore, StoreError};
use sqlx::{AssertSqlSafe, Row};
use std::time::Duration;

/// The lease of the whole team: its agents and SyncState run on the node that holds it.
pub const TEAM_LEASE: &str = "team";

/// The lease of agent `agent`: it runs on the node that holds it (granted by the team's node).
pub fn agent_lease(agent: &str) -> String {
    format!("agent/{agent}")
}

/// Now, in milliseconds since the Unix epoch, by the database's clock.
const NOW_MS: &str = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)";

/// A node as it joins: its name, the process serving as it, where it serves, and the hash of
/// its team file.
#[derive(Clone, Debug)]
pub struct Seat {
    pub node: String,
    pub instance: String,
    pub address: String,
    pub team_hash: String,
}

/// A hold on a lease: which, by which node's process, and the fencing token of this term.
#[derive(Clone, Debug, PartialEq)]
pub struct Fence {
    pub resource: String,
    pub node: String,
    pub instance: String,
    pub token: i64,
}

/// An agent's lease as a write was made under: the token the team's node granted the node the
/// agent runs on. A write that carries it is refused, in its own transaction, unless the token
/// is still the lease's ([`SqlStore`]'s `append_as`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct AgentWrite {
    pub agent: String,
    pub token: i64,
}

/// What taking a lease came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Taken {
    Held(Fence),
    /// Another node holds it (serving its API at `address`), for this long yet.
    HeldBy {
        node: String,
        address: String,
        expires_in_ms: i64,
    },
}

/// A node as the store lists it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NodeRow {
    pub name: String,
    /// The process serving as it now.
    pub instance: String,
    pub address: String,
    pub team_hash: String,
    pub started_at: i64,
    /// How long ago it was last heard from.
    pub seen_ms_ago: i64,
    /// When it stopped on a signal (None while it runs, or when it died without saying).
    pub stopped_at: Option<i64>,
}

/// A lease as the store lists it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LeaseRow {
    pub resource: String,
    pub node: String,
    pub token: i64,
    /// Negative once it has expired.
    pub expires_in_ms: i64,
}

impl Fence {
    /// Refuses the transaction `tx` belongs to unless this fence's token still holds the
    /// lease; the row stays locked (`FOR KEY SHARE`) until `tx` ends, so nobody takes the
    /// lease over while the write commits.
    pub(super) async fn check(
        &self,
        tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    ) -> Result<(), StoreError> {
        let row = sqlx::query(
            "SELECT node, instance, token FROM leases WHERE resource = $1 FOR KEY SHARE",
        )
        .bind(self.resource.clone())
        .fetch_optional(&mut **tx)
        .await?;
        let (node, instance, token): (String, String, i64) = match row {
            Some(r) => (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?),
            None => (String::new(), String::new(), 0),
        };
        if token == self.token && instance == self.instance {
            return Ok(());
        }
        Err(StoreError::Fenced {
            resource: self.resource.clone(),
            token: self.token,
            held_by: node,
            token_now: token,
        })
    }
}

/// Refuses the transaction `tx` belongs to unless every one of `writers` still holds its
/// agent's lease; the rows stay locked (`FOR KEY SHARE`) until `tx` ends, so no grant to
/// another node commits between the check and the write (a grant waits for it, and the
/// writes after it see the new token).
pub(super) async fn check_agents(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    writers: &[AgentWrite],
) -> Result<(), StoreError> {
    // One statement per few hundred agents, not one each: a batch of a busy team holds the
    // changes of hundreds of agents.
    for chunk in writers.chunks(AGENTS_PER_CHECK) {
        let marks: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "SELECT resource, node, token FROM leases WHERE resource IN ({}) FOR KEY SHARE",
            marks.join(", ")
        );
        // Only placeholders are put together here; the names go in as parameters.
        let mut q = sqlx::query(AssertSqlSafe(sql));
        for w in chunk {
            q = q.bind(agent_lease(&w.agent));
        }
        let mut now = std::collections::HashMap::new();
        for r in q.fetch_all(&mut **tx).await? {
            let (resource, node, token): (String, String, i64) =
                (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?);
            now.insert(resource, (node, token));
        }
        for w in chunk {
            let resource = agent_lease(&w.agent);
            let (held_by, token_now) = now.get(&resource).cloned().unwrap_or_default();
            if token_now != w.token {
                return Err(StoreError::Fenced {
                    resource,
                    token: w.token,
                    held_by,
                    token_now,
                });
            }
        }
    }
    Ok(())
}

/// Agents' leases read by one statement at most.
const AGENTS_PER_CHECK: usize = 500;

impl SqlStore {
    /// Enters `seat` in the list of nodes (a node restarted under its name replaces its old
    /// process), refused when another node heard from within `live_within` runs another team
    /// file: every node of a team must run the same one. The check and the entry are one
    /// transaction under a lock of the list that joins take one at a time (heartbeats wait
    /// for it too, for as long as a join takes), so two nodes with different files that start
    /// at the same moment cannot both be let in.
    pub async fn join(&self, seat: &Seat, live_within: Duration) -> Result<(), StoreError> {
        let seat = seat.clone();
        self.call(move |db| async move {
            if !matches!(db.backend, Backend::Postgres) || db.schema < SCHEMA_NODES {
                return Err(StoreError::NodesNeedPostgres {
                    url: db.url.clone(),
                });
            }
            let mut tx = db.pool.begin().await?;
            sqlx::query("LOCK TABLE nodes IN SHARE ROW EXCLUSIVE MODE")
                .execute(&mut *tx)
                .await?;
            let differing = sqlx::query(AssertSqlSafe(format!(
                "SELECT name FROM nodes WHERE name <> $1 AND team_hash <> $2 \
                 AND stopped_at IS NULL AND seen_at > {NOW_MS} - $3 ORDER BY name LIMIT 1"
            )))
            .bind(seat.node.clone())
            .bind(seat.team_hash.clone())
            .bind(live_within.as_millis() as i64)
            .fetch_optional(&mut *tx)
            .await?;
            if let Some(r) = differing {
                return Err(StoreError::TeamDiffers {
                    node: seat.node.clone(),
                    other: r.try_get(0)?,
                });
            }
            sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO nodes (name, instance, address, team_hash, started_at, seen_at) \
                 VALUES ($1, $2, $3, $4, {NOW_MS}, {NOW_MS}) ON CONFLICT (name) DO UPDATE SET \
                 instance = excluded.instance, address = excluded.address, \
                 team_hash = excluded.team_hash, started_at = excluded.started_at, \
                 seen_at = excluded.seen_at, stopped_at = NULL"
            )))
            .bind(seat.node.clone())
            .bind(seat.instance.clone())
            .bind(seat.address.clone())
            .bind(seat.team_hash.clone())
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    /// Says that `seat`'s node is alive.
    pub async fn heartbeat(&self, seat: &Seat) -> Result<(), StoreError> {
        self.stamp_node(seat, "seen_at").await
    }

    /// Says that `seat`'s node stopped (on a signal): it is listed as gone at once.
    pub async fn leave(&self, seat: &Seat) -> Result<(), StoreError> {
        self.stamp_node(seat, "stopped_at").await
    }

    /// Sets `seat`'s node's time `column` to now.
    async fn stamp_node(&self, seat: &Seat, column: &'static str) -> Result<(), StoreError> {
        let seat = seat.clone();
        self.call(move |db| async move {
            sqlx::query(AssertSqlSafe(format!(
                "UPDATE nodes SET {column} = {NOW_MS} WHERE name = $1 AND instance = $2"
            )))
            .bind(seat.node)
            .bind(seat.instance)
            .execute(&db.leases)
            .await?;
            Ok(())
        })
        .await
    }

    /// Takes `resource`'s lease for `seat` for `ttl` if nobody holds it (never taken, expired
    /// or released), with the next fencing token; else says who holds it.
    pub async fn take_lease(
        &self,
        resource: &str,
        seat: &Seat,
        ttl: Duration,
    ) -> Result<Taken, StoreError> {
        let (resource, seat) = (resource.to_owned(), seat.clone());
        self.call(move |db| async move {
            let mut tx = db.pool.begin().await?;
            // First the row alone, `FOR UPDATE`: waits for the writes under way of whoever
            // holds it (their `FOR KEY SHARE`), so none commits under a token taken over.
            sqlx::query("SELECT token FROM leases WHERE resource = $1 FOR UPDATE")
                .bind(resource.clone())
                .fetch_optional(&mut *tx)
                .await?;
            let took = sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO leases (resource, node, instance, token, expires_at, taken_at) \
                 VALUES ($1, $2, $3, 1, {NOW_MS} + $4, {NOW_MS}) ON CONFLICT (resource) DO UPDATE \
                 SET node = excluded.node, instance = excluded.instance, \
                 token = leases.token + 1, expires_at = excluded.expires_at, \
                 taken_at = excluded.taken_at \
                 WHERE leases.expires_at < {NOW_MS} OR leases.instance = excluded.instance \
                 RETURNING token"
            )))
            .bind(resource.clone())
            .bind(seat.node.clone())
            .bind(seat.instance.clone())
            .bind(ttl.as_millis() as i64)
            .fetch_optional(&mut *tx)
            .await?;
            tx.commit().await?;
            if let Some(r) = took {
                return Ok(Taken::Held(Fence {
                    resource,
                    node: seat.node,
                    instance: seat.instance,
                    token: r.try_get(0)?,
                }));
            }
            let r = sqlx::query(AssertSqlSafe(format!(
                "SELECT l.node, l.expires_at - {NOW_MS}, COALESCE(n.address, '') FROM leases l \
                 LEFT JOIN nodes n ON n.name = l.node WHERE l.resource = $1"
            )))
            .bind(resource)
            .fetch_one(&db.pool)
            .await?;
            Ok(Taken::HeldBy {
                node: r.try_get(0)?,
                expires_in_ms: r.try_get(1)?,
                address: r.try_get(2)?,
            })
        })
        .await
    }

    /// Extends `fence`'s lease by `ttl` from now; false when it is no longer this fence's (taken
    /// over, or given up: a renewal that lands after the release does not undo it).
    pub async fn renew_lease(&self, fence: &Fence, ttl: Duration) -> Result<bool, StoreError> {
        let fence = fence.clone();
        self.call(move |db| async move {
            let done = sqlx::query(AssertSqlSafe(format!(
                "UPDATE leases SET expires_at = {NOW_MS} + $1 \
                 WHERE resource = $2 AND instance = $3 AND token = $4 AND expires_at > 0"
            )))
            .bind(ttl.as_millis() as i64)
            .bind(fence.resource)
            .bind(fence.instance)
            .bind(fence.token)
            .execute(&db.leases)
            .await?;
            Ok(done.rows_affected() == 1)
        })
        .await
    }

    /// Grants agent `agent`'s lease to node `node`'s process `instance` for `ttl`, with the
    /// next fencing token, whoever held it: only the team's node places agents, so the grant is
    /// refused unless `team` (its hold on the team's lease) still holds, checked in the same
    /// transaction.
    pub async fn grant_agent_lease(
        &self,
        team: &Fence,
        agent: &str,
        (node, instance): (&str, &str),
        ttl: Duration,
    ) -> Result<i64, StoreError> {
        let (team, resource) = (team.clone(), agent_lease(agent));
        let (node, instance) = (node.to_owned(), instance.to_owned());
        self.call(move |db| async move {
            let mut tx = db.pool.begin().await?;
            team.check(&mut tx).await?;
            // As a takeover: waits for the writes under way under the agent's old token (their
            // `FOR KEY SHARE`), so none commits once the next node has the agent.
            sqlx::query("SELECT token FROM leases WHERE resource = $1 FOR UPDATE")
                .bind(resource.clone())
                .fetch_optional(&mut *tx)
                .await?;
            let r = sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO leases (resource, node, instance, token, expires_at, taken_at) \
                 VALUES ($1, $2, $3, 1, {NOW_MS} + $4, {NOW_MS}) ON CONFLICT (resource) DO UPDATE \
                 SET node = excluded.node, instance = excluded.instance, \
                 token = leases.token + 1, expires_at = excluded.expires_at, \
                 taken_at = excluded.taken_at RETURNING token"
            )))
            .bind(resource)
            .bind(node)
            .bind(instance)
            .bind(ttl.as_millis() as i64)
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(r.try_get(0)?)
        })
        .await
    }

    /// Extends by `ttl` the agents' leases `seat`'s process holds: a node renews them all in
    /// one statement, as often as it says it is alive.
    pub async fn renew_agent_leases(&self, seat: &Seat, ttl: Duration) -> Result<(), StoreError> {
        let seat = seat.clone();
        self.call(move |db| async move {
            sqlx::query(AssertSqlSafe(format!(
                "UPDATE leases SET expires_at = {NOW_MS} + $1 \
                 WHERE node = $2 AND instance = $3 AND resource LIKE 'agent/%'"
            )))
            .bind(ttl.as_millis() as i64)
            .bind(seat.node)
            .bind(seat.instance)
            .execute(&db.leases)
            .await?;
            Ok(())
        })
        .await
    }

    /// Gives `fence`'s lease up at once, so another node takes it without waiting for it to
    /// expire (a node stopping on a signal).
    pub async fn release_lease(&self, fence: &Fence) -> Result<(), StoreError> {
        let fence = fence.clone();
        self.call(move |db| async move {
            sqlx::query(
                "UPDATE leases SET expires_at = 0 \
                 WHERE resource = $1 AND instance = $2 AND token = $3",
            )
            .bind(fence.resource)
            .bind(fence.instance)
            .bind(fence.token)
            .execute(&db.pool)
            .await?;
            Ok(())
        })
        .await
    }

    /// The nodes and leases of the team (none for a store that has no nodes: SQLite, or one
    /// an older cohort wrote).
    pub async fn placement(&self) -> Result<(Vec<NodeRow>, Vec<LeaseRow>), StoreError> {
        self.call(|db| async move {
            if !matches!(db.backend, Backend::Postgres) || db.schema < SCHEMA_NODES {
                return Ok((Vec::new(), Vec::new()));
            }
            let nodes = sqlx::query(AssertSqlSafe(format!(
                "SELECT name, address, team_hash, started_at, {NOW_MS} - seen_at, stopped_at, \
                 instance FROM nodes ORDER BY name"
            )))
            .fetch_all(&db.pool)
            .await?
            .iter()
            .map(|r| {
                Ok(NodeRow {
                    name: r.try_get(0)?,
                    address: r.try_get(1)?,
                    team_hash: r.try_get(2)?,
                    started_at: r.try_get(3)?,
                    seen_ms_ago: r.try_get(4)?,
                    stopped_at: r.try_get(5)?,
                    instance: r.try_get(6)?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
            let leases = sqlx::query(AssertSqlSafe(format!(
                "SELECT resource, node, token, expires_at - {NOW_MS} FROM leases ORDER BY resource"
            )))
            .fetch_all(&db.pool)
            .await?
            .iter()
            .map(|r| {
                Ok(LeaseRow {
                    resource: r.try_get(0)?,
                    node: r.try_get(1)?,
                    token: r.try_get(2)?,
                    expires_in_ms: r.try_get(3)?,
                })
            })
            .collect::<Result<Vec<_>, sqlx::Error>>()?;
            Ok((nodes, leases))
        })
        .await
    }
}
