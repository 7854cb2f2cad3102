//! `cohort backup`: a consistent copy of a SQLite store, taken while the team may be running
//! (SQLite's `VACUUM INTO` copies one read transaction's view, so it waits for no writer and
//! no writer waits for it beyond a page at a time). A Postgres store is backed up with
//! `pg_dump`, which does the same on the server; the copy is refused with that advice.

use super::sql::{Backend, Db};
use super::{SqlStore, StoreError};
use std::path::{Path, PathBuf};

/// What a backup wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backup {
    /// The store copied, as shown to people.
    pub from: String,
    pub to: PathBuf,
    /// The copy's size in bytes.
    pub bytes: u64,
}

/// Copies the store `spec` (a SQLite file, or a `postgres://` URL, which is refused) to the new
/// file `to`, without taking the store's lock.
pub async fn backup(spec: &str, to: &Path) -> Result<Backup, StoreError> {
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        return Err(StoreError::BackupPostgres {
            url: super::sql::without_password(spec),
        });
    }
    if to.exists() {
        return Err(StoreError::BackupExists(to.to_owned()));
    }
    let store = SqlStore::open_reader(spec).await?;
    let target = to.to_owned();
    store
        .call(|db| async move { db.sqlite_copy_to(&target).await })
        .await?;
    let bytes = std::fs::metadata(to).map_or(0, |m| m.len());
    Ok(Backup {
        from: store.url().to_owned(),
        to: to.to_owned(),
        bytes,
    })
}

impl Db {
    /// Writes the whole database, as one read transaction sees it, to the new file `to`.
    async fn sqlite_copy_to(&self, to: &Path) -> Result<(), StoreError> {
        if !matches!(self.backend, Backend::Sqlite(_)) {
            return Err(StoreError::BackupPostgres {
                url: self.url.clone(),
            });
        }
        let mut conn = self.pool.acquire().await?;
        sqlx::query("VACUUM INTO $1")
            .bind(to.display().to_string())
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}
