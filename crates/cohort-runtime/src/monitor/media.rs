//! The team's images and sounds (see `call::media`): the newest held in memory, bounded by
//! bytes, for the console and for models that take images; with a store, each is written by
//! the journal before the change that refers to it is committed, so a stored result never
//! names a blob the store lacks (unless the store let it go as one of its oldest).

use cohort_core::call::media::{Blob, BlobId};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// The most bytes of blobs held in memory.
pub const MEMORY_BYTES: usize = 32 << 20;

/// The blobs held, and those waiting for the journal.
#[derive(Default)]
pub struct Media {
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    by_id: HashMap<BlobId, Arc<Blob>>,
    /// Oldest first.
    order: VecDeque<BlobId>,
    bytes: usize,
    /// Kept since the journal last wrote (with a store only).
    pending: Vec<Arc<Blob>>,
}

impl Media {
    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Holds `blob` (made newest if it is held already); `store`: the journal writes it too.
    pub fn keep(&self, blob: Blob, store: bool) {
        let blob = Arc::new(blob);
        let mut held = self.lock();
        if store {
            held.pending.push(blob.clone());
        }
        let size = blob.bytes.len();
        if let Some(old) = held.by_id.insert(blob.id.clone(), blob.clone()) {
            held.bytes -= old.bytes.len();
            held.order.retain(|id| id != &blob.id);
        }
        held.bytes += size;
        held.order.push_back(blob.id.clone());
        while held.bytes > MEMORY_BYTES && held.order.len() > 1 {
            let Some(oldest) = held.order.pop_front() else {
                break;
            };
            if let Some(gone) = held.by_id.remove(&oldest) {
                held.bytes -= gone.bytes.len();
            }
        }
    }

    /// A blob held in memory.
    pub fn get(&self, id: &BlobId) -> Option<Arc<Blob>> {
        self.lock().by_id.get(id).cloned()
    }

    /// The blobs the journal has not written yet, taken.
    pub(super) fn take_pending(&self) -> Vec<Arc<Blob>> {
        std::mem::take(&mut self.lock().pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(n: u8, size: usize) -> Blob {
        let bytes = vec![n; size];
        Blob {
            id: BlobId::of(&bytes),
            mime: "image/png".into(),
            bytes,
        }
    }

    #[test]
    fn the_newest_blobs_are_held_within_the_bytes_and_those_to_store_wait_for_the_journal() {
        let media = Media::default();
        let first = blob(1, 10);
        media.keep(first.clone(), true);
        media.keep(first.clone(), true);
        assert_eq!(media.lock().bytes, 10, "the same bytes are one blob");
        assert_eq!(media.take_pending().len(), 2);
        assert!(media.take_pending().is_empty());
        media.keep(blob(2, MEMORY_BYTES / 2), false);
        media.keep(blob(3, MEMORY_BYTES / 2), false);
        assert!(media.get(&first.id).is_none(), "the oldest left");
        assert!(media.lock().bytes <= MEMORY_BYTES);
        assert!(
            media.take_pending().is_empty(),
            "nothing to store without a store"
        );
    }
}
