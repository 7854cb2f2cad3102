//! The images and sounds tools returned, kept in the store under the hash of their bytes (see
//! `cohort_core::call::media`): a step's result keeps a reference, and a person reading it
//! after a restart still sees the picture. Bounded: the runtime caps each blob, and the newest
//! [`BLOBS_KEPT`](super::BLOBS_KEPT) are kept.

use super::StoreError;
use super::sql::{Db, SCHEMA_BLOBS};
use base64::Engine;
use cohort_core::call::media::{Blob, BlobId};
use sqlx::Row;

impl Db {
    /// Keeps `blob` (again: the same bytes are the same blob, kept once and made newest), then
    /// lets the oldest beyond the cap go.
    pub(super) async fn blob_put(&self, blob: Blob) -> Result<(), StoreError> {
        let body = base64::engine::general_purpose::STANDARD.encode(&blob.bytes);
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM blobs WHERE id = $1")
            .bind(blob.id.as_str().to_owned())
            .execute(&mut *tx)
            .await?;
        // Numbered in the order kept (a clock's milliseconds would tie in a burst).
        sqlx::query(
            "INSERT INTO blobs (id, mime, seq, body) \
             SELECT $1, $2, COALESCE(MAX(seq), 0) + 1, $3 FROM blobs",
        )
        .bind(blob.id.as_str().to_owned())
        .bind(blob.mime)
        .bind(body)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM blobs WHERE seq < \
             (SELECT seq FROM blobs ORDER BY seq DESC LIMIT 1 OFFSET $1)",
        )
        .bind(super::BLOBS_KEPT as i64 - 1)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// A kept blob; none from a store written before blobs were kept.
    pub(super) async fn blob_get(&self, id: BlobId) -> Result<Option<Blob>, StoreError> {
        if self.schema < SCHEMA_BLOBS {
            return Ok(None);
        }
        let row = sqlx::query("SELECT mime, body FROM blobs WHERE id = $1")
            .bind(id.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let (mime, body): (String, String) = (row.try_get(0)?, row.try_get(1)?);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(body)
            .map_err(|e| StoreError::Corrupt {
                url: self.url.clone(),
                why: format!("blob {id} is not base64: {e}"),
            })?;
        Ok(Some(Blob { id, mime, bytes }))
    }
}
