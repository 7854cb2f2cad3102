//! Every model call of a team, kept in the store (see the migration `0008_model_calls.sql`):
//! the request and the reply whole, so a run can be replayed from them and a failure read
//! after a restart. A ring per agent: the newest calls within a byte cap each, the oldest of
//! an agent leaving as its new ones come. A call's system prompt, the same call after call,
//! is kept once (`0009_model_call_texts.sql`): writing it with every call was most of the
//! cost of recording.

use super::StoreError;
use super::sql::{Db, ROWS_PER_INSERT, SCHEMA_CALL_TEXTS, SCHEMA_MODEL_CALLS, values_sql};
use cohort_core::ids::{AgentId, StepId, TaskId};
use sqlx::{AssertSqlSafe, Row};
use std::collections::{BTreeMap, BTreeSet};

/// One recorded model call as the store keeps it: its place, whose it is, and its JSON (the
/// runtime's `llm::recorded::Call`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredModelCall {
    /// Its place among the team's calls (larger: sent later).
    pub seq: u64,
    pub agent_id: AgentId,
    pub task_id: Option<TaskId>,
    pub step_id: StepId,
    /// The call as JSON; without its system prompt when `system` holds it.
    pub body: String,
    /// Its system prompt, kept apart (once for every call that sent the same).
    pub system: Option<SystemText>,
}

/// A call's system prompt as the store keeps it: once, under its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemText {
    /// The hex SHA-256 of the text.
    pub id: String,
    /// The text; `None` when the writer knows the store has it already (written with an
    /// earlier batch since the last trim), so it is not written again.
    pub text: Option<String>,
    /// Its length in bytes.
    pub bytes: usize,
}

impl SystemText {
    /// The id of `text` (the hex SHA-256 of its bytes, as a blob's).
    pub fn id_of(text: &str) -> String {
        cohort_core::call::media::BlobId::of(text.as_bytes())
            .as_str()
            .to_owned()
    }
}

/// The JSON of a call whose system prompt was kept apart, whole again: `text` under `system`.
fn with_system(body: String, text: String) -> String {
    match serde_json::from_str::<serde_json::Value>(&body) {
        Ok(serde_json::Value::Object(mut call)) => {
            call.insert("system".into(), serde_json::Value::String(text));
            serde_json::Value::Object(call).to_string()
        }
        _ => body,
    }
}

/// Which agents' rings are trimmed with a batch: the oldest calls of each go while its calls
/// hold more than `bytes_per_agent`. A writer trims an agent now and then (after an eighth of
/// its cap was written, say), not with every call: a trim reads the agent's whole ring.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trim {
    pub bytes_per_agent: u64,
    pub agents: BTreeSet<AgentId>,
}

/// Recorded calls stored with the batch of events they led to, in its transaction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    pub calls: Vec<StoredModelCall>,
    pub trim: Trim,
}

impl Db {
    /// Keeps `calls` (a call kept already is kept once), then trims the rings `trim` names.
    pub(super) async fn model_calls_put(
        &self,
        calls: Vec<StoredModelCall>,
        trim: Trim,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        write(&mut tx, Recorded { calls, trim }, self.nameless()).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The kept calls after `after` (by `seq`), oldest first, at most `limit`; of one task
    /// only when `task` names it. None from a store written before calls were recorded.
    pub(super) async fn model_calls_get(
        &self,
        task: Option<TaskId>,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredModelCall>, StoreError> {
        if self.schema < SCHEMA_MODEL_CALLS {
            return Ok(Vec::new());
        }
        // A store from before the texts were kept apart has every call whole.
        let sql = if self.schema >= SCHEMA_CALL_TEXTS {
            "SELECT seq, agent_id, task_id, step_id, body, \
             (SELECT t.body FROM model_call_texts t WHERE t.id = model_calls.system_id) \
             FROM model_calls WHERE seq > $1 AND ($2 IS NULL OR task_id = $2) \
             ORDER BY seq LIMIT $3"
        } else {
            "SELECT seq, agent_id, task_id, step_id, body, CAST(NULL AS TEXT) FROM model_calls \
             WHERE seq > $1 AND ($2 IS NULL OR task_id = $2) ORDER BY seq LIMIT $3"
        };
        let rows = sqlx::query(sql)
            .bind(after as i64)
            .bind(task.map(|t| t.as_str().to_owned()))
            .bind(limit as i64)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                let body: String = r.try_get(4)?;
                let body = match r.try_get::<Option<String>, _>(5)? {
                    Some(text) => with_system(body, text),
                    None => body,
                };
                Ok(StoredModelCall {
                    seq: r.try_get::<i64, _>(0)? as u64,
                    agent_id: AgentId::from(r.try_get::<String, _>(1)?.as_str()),
                    task_id: r
                        .try_get::<Option<String>, _>(2)?
                        .map(|t| TaskId::from(t.as_str())),
                    step_id: StepId::from(r.try_get::<String, _>(3)?.as_str()),
                    body,
                    system: None,
                })
            })
            .collect()
    }
}

/// Keeps `calls` in the transaction `tx` (a call kept already is replaced), then trims the
/// rings `trim` names. Many rows to a statement (a wide team records thousands of calls a
/// second; one statement each cost a round trip each, on the journal's path).
pub(super) async fn write(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    Recorded { mut calls, trim }: Recorded,
    nameless: bool,
) -> Result<(), StoreError> {
    // Each text once (a call may send one a later call names), taken before calls are made
    // one per seq: a statement may not touch a row twice.
    let mut texts = BTreeMap::new();
    for s in calls.iter_mut().filter_map(|c| c.system.as_mut()) {
        if let Some(text) = s.text.take() {
            texts.entry(s.id.clone()).or_insert(text);
        }
    }
    insert_texts(tx, texts.into_iter().collect(), nameless).await?;
    let calls: BTreeMap<u64, StoredModelCall> = calls.into_iter().map(|c| (c.seq, c)).collect();
    insert_calls(tx, calls.into_values().collect(), nameless).await?;
    let trimmed = !trim.agents.is_empty();
    for agent in trim.agents {
        // The newest calls whose bytes, added up from the newest, stay within the cap.
        sqlx::query(
            "DELETE FROM model_calls WHERE agent_id = $1 AND seq <= COALESCE((\
               SELECT MAX(seq) FROM (SELECT seq, SUM(bytes) OVER (ORDER BY seq DESC) AS total \
               FROM model_calls WHERE agent_id = $1) newest WHERE total > $2), -1)",
        )
        .bind(agent.as_str().to_owned())
        .bind(trim.bytes_per_agent as i64)
        .execute(&mut **tx)
        .await?;
    }
    if trimmed {
        sqlx::query(
            "DELETE FROM model_call_texts WHERE NOT EXISTS \
             (SELECT 1 FROM model_calls c WHERE c.system_id = model_call_texts.id)",
        )
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Keeps the system texts `texts` (id and text; one kept already stays).
async fn insert_texts(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    mut texts: Vec<(String, String)>,
    nameless: bool,
) -> Result<(), StoreError> {
    while !texts.is_empty() {
        let chunk: Vec<_> = texts.drain(..texts.len().min(ROWS_PER_INSERT)).collect();
        let sql = values_sql(
            "INSERT INTO model_call_texts (id, body) VALUES ",
            2,
            chunk.len(),
            nameless,
            " ON CONFLICT (id) DO NOTHING",
        );
        let mut q = sqlx::query(AssertSqlSafe(sql));
        for (id, text) in chunk {
            q = q.bind(id).bind(text);
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}

/// Keeps `calls` (one per seq; a call kept already is replaced).
async fn insert_calls(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    mut calls: Vec<StoredModelCall>,
    nameless: bool,
) -> Result<(), StoreError> {
    while !calls.is_empty() {
        let chunk: Vec<_> = calls.drain(..calls.len().min(ROWS_PER_INSERT)).collect();
        let sql = values_sql(
            "INSERT INTO model_calls (seq, agent_id, task_id, step_id, bytes, body, system_id) \
             VALUES ",
            7,
            chunk.len(),
            nameless,
            " ON CONFLICT (seq) DO UPDATE SET agent_id = excluded.agent_id, \
             task_id = excluded.task_id, step_id = excluded.step_id, bytes = excluded.bytes, \
             body = excluded.body, system_id = excluded.system_id",
        );
        let mut q = sqlx::query(AssertSqlSafe(sql));
        for c in chunk {
            // A call's bytes count its system prompt, kept once or not: the ring holds as
            // many calls as before.
            let text_bytes = c.system.as_ref().map_or(0, |s| s.bytes);
            q = q
                .bind(c.seq as i64)
                .bind(c.agent_id.as_str().to_owned())
                .bind(c.task_id.as_ref().map(|t| t.as_str().to_owned()))
                .bind(c.step_id.as_str().to_owned())
                .bind((c.body.len() + text_bytes) as i64)
                .bind(c.body)
                .bind(c.system.map(|s| s.id));
        }
        q.execute(&mut **tx).await?;
    }
    Ok(())
}
