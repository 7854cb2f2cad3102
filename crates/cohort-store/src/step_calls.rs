//! The model calls of failed steps, kept in the store: the team's call log is memory only (its
//! newest calls), and a person looking into a failure after a restart still needs the prompt
//! and the raw reply. Bounded: the runtime caps each text, and the newest
//! [`STEP_CALLS_KEPT`](super::STEP_CALLS_KEPT) steps are kept.

use super::StoreError;
use super::sql::{Db, SCHEMA_STEP_CALLS};
use cohort_core::ids::StepId;
use sqlx::Row;

impl Db {
    /// Keeps (or replaces) a step's calls, then lets the oldest rows beyond the cap go.
    pub(super) async fn step_calls_put(
        &self,
        step: StepId,
        body: String,
    ) -> Result<(), StoreError> {
        let at = chrono::Utc::now().timestamp_millis();
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM step_calls WHERE step_id = $1")
            .bind(step.as_str().to_owned())
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO step_calls (step_id, at, body) VALUES ($1, $2, $3)")
            .bind(step.as_str().to_owned())
            .bind(at)
            .bind(body)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "DELETE FROM step_calls WHERE at < \
             (SELECT at FROM step_calls ORDER BY at DESC LIMIT 1 OFFSET $1)",
        )
        .bind(super::STEP_CALLS_KEPT as i64 - 1)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// A step's kept calls (their JSON); none from a store written before they were kept.
    pub(super) async fn step_calls_get(&self, step: StepId) -> Result<Option<String>, StoreError> {
        if self.schema < SCHEMA_STEP_CALLS {
            return Ok(None);
        }
        let row = sqlx::query("SELECT body FROM step_calls WHERE step_id = $1")
            .bind(step.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| r.try_get::<String, _>(0)).transpose()?)
    }
}
