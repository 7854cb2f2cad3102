//! The files people attach (see `cohort_core::attachment`), kept in the store so that every
//! node of a team, and the bundled workspace server each node starts, reads the same file.
//! Written before the upload is acknowledged; bounded: the newest
//! [`ATTACHMENTS_KEPT`](super::ATTACHMENTS_KEPT) are kept.

use super::StoreError;
use super::sql::{Db, SCHEMA_ATTACHMENTS};
use base64::Engine;
use cohort_core::attachment::{Attachment, AttachmentId};
use sqlx::Row;

impl Db {
    /// Keeps `file` with its `bytes` (the same id again is the same file: made newest), then
    /// lets the oldest beyond the cap go.
    pub(super) async fn attachment_put(
        &self,
        file: Attachment,
        bytes: Vec<u8>,
    ) -> Result<(), StoreError> {
        if self.schema < SCHEMA_ATTACHMENTS {
            return Err(StoreError::Corrupt {
                url: self.url.clone(),
                why: "this store was written by an older cohort and keeps no attachments; \
                      open it with `cohort serve` once to bring it up to date"
                    .into(),
            });
        }
        let body = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let mut tx = self.pool.begin().await?;
        sqlx::query("DELETE FROM attachments WHERE id = $1")
            .bind(file.id.as_str().to_owned())
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO attachments (id, name, mime, bytes, seq, body) \
             SELECT $1, $2, $3, $4, COALESCE(MAX(seq), 0) + 1, $5 FROM attachments",
        )
        .bind(file.id.as_str().to_owned())
        .bind(file.name)
        .bind(file.mime)
        .bind(file.bytes as i64)
        .bind(body)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM attachments WHERE seq < \
             (SELECT seq FROM attachments ORDER BY seq DESC LIMIT 1 OFFSET $1)",
        )
        .bind(super::ATTACHMENTS_KEPT as i64 - 1)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// A kept file and, when `with_bytes`, its bytes; none if the store does not have it.
    pub(super) async fn attachment_get(
        &self,
        id: AttachmentId,
        with_bytes: bool,
    ) -> Result<Option<super::KeptAttachment>, StoreError> {
        if self.schema < SCHEMA_ATTACHMENTS {
            return Ok(None);
        }
        let sql = if with_bytes {
            "SELECT name, mime, bytes, body FROM attachments WHERE id = $1"
        } else {
            "SELECT name, mime, bytes, '' FROM attachments WHERE id = $1"
        };
        let row = sqlx::query(sql)
            .bind(id.as_str().to_owned())
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let (name, mime, size, body): (String, String, i64, String) = (
            row.try_get(0)?,
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
        );
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(body)
            .map_err(|e| StoreError::Corrupt {
                url: self.url.clone(),
                why: format!("attachment {id} is not base64: {e}"),
            })?;
        let file = Attachment {
            id,
            name,
            mime,
            bytes: size.max(0) as u64,
        };
        Ok(Some((file, bytes)))
    }
}
