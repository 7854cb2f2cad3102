//! The attached files a bundled workspace server reads: the team's store, named by the runtime
//! in `COHORT_ATTACHMENTS_STORE`, opened read-only on the first read (a store that cannot be
//! opened then is tried again on the next read rather than leaving the server without files).

use cohort::attachment::AttachmentId;
use cohort::bundled::attachments::{Kept, STORE_VAR, Shelf};
use cohort::store::{SqlStore, Store};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The team's store, as a shelf of attached files.
pub struct StoreShelf {
    spec: String,
    store: tokio::sync::OnceCell<SqlStore>,
}

impl std::fmt::Debug for StoreShelf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The address may hold a password: never printed.
        f.write_str("StoreShelf")
    }
}

impl StoreShelf {
    /// The shelf the runtime named in our environment, if it named one.
    pub fn from_env() -> cohort::bundled::SharedShelf {
        let spec = std::env::var(STORE_VAR).ok().filter(|s| !s.is_empty())?;
        Some(Arc::new(StoreShelf {
            spec,
            store: tokio::sync::OnceCell::new(),
        }))
    }
}

impl Shelf for StoreShelf {
    fn read<'a>(
        &'a self,
        id: &'a AttachmentId,
    ) -> Pin<Box<dyn Future<Output = Result<Option<Kept>, String>> + Send + 'a>> {
        Box::pin(async move {
            let store = self
                .store
                .get_or_try_init(|| SqlStore::open_reader(&self.spec))
                .await
                .map_err(|e| e.to_string())?;
            let found = store
                .attachment(id, true)
                .await
                .map_err(|e| e.to_string())?;
            Ok(found.map(|(file, bytes)| Kept {
                name: file.name,
                mime: file.mime,
                bytes,
            }))
        })
    }
}
