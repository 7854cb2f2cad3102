//! How far a team's events have been published on its NATS event stream (nodes started with
//! `--nats`): the relay notes it after each batch, so `cohort inspect` can say how far behind
//! the stream is without reaching NATS. The stream itself stays the truth the relay goes on from.

use super::{SqlStore, StoreError};
use sqlx::Row;

impl SqlStore {
    /// Notes that the events up to `version` are on the event stream.
    pub async fn note_published(&self, version: u64) -> Result<(), StoreError> {
        self.call(move |db| async move {
            sqlx::query(
                "INSERT INTO cohort_meta (key, value) VALUES ('published_to', $1) \
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )
            .bind(version.to_string())
            .execute(&db.pool)
            .await?;
            Ok(())
        })
        .await
    }

    /// This store's own id, made (at random) the first time it is asked for: the relay stamps
    /// it on each message, so a stream that holds another store's events is known as such.
    pub async fn store_id(&self) -> Result<String, StoreError> {
        let made = cohort_core::auth::new_token()[..32].to_owned();
        self.call(move |db| async move {
            sqlx::query(
                "INSERT INTO cohort_meta (key, value) VALUES ('store_id', $1) \
                 ON CONFLICT (key) DO NOTHING",
            )
            .bind(made)
            .execute(&db.pool)
            .await?;
            let row = sqlx::query("SELECT value FROM cohort_meta WHERE key = 'store_id'")
                .fetch_one(&db.pool)
                .await?;
            Ok(row.try_get(0)?)
        })
        .await
    }

    /// The version the events were last noted published up to (None: never published).
    pub async fn published_to(&self) -> Result<Option<u64>, StoreError> {
        self.call(|db| async move {
            let row = sqlx::query("SELECT value FROM cohort_meta WHERE key = 'published_to'")
                .fetch_optional(&db.pool)
                .await?;
            Ok(row.and_then(|r| r.try_get::<String, _>(0).ok()?.parse().ok()))
        })
        .await
    }
}
