//! Expensive reads (a page of states, a task in full, a person's conversations) are built at
//! most a few at a time and shared: requests for the same thing by the same view get the one
//! answer built since they arrived, serialised once. Two hundred clients polling the task list
//! cost one build per change of the team, not two hundred copies of it in memory; past the
//! permits a request waits briefly, then is told to come back (503 with Retry-After).

use super::AppError;
use super::reason::{Fault, Limited};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OnceCell, Semaphore};

/// Reads built at once (each holds the monitor's lock while it copies what it shows, then
/// serialises off the async workers).
pub const READS_AT_ONCE: usize = 4;
/// How long a read waits for a permit before it is answered 503.
pub const READ_WAIT: Duration = Duration::from_secs(2);
/// Distinct reads remembered; past this the built ones are forgotten (they are cheap to build
/// again, and stale after the next change anyway).
const KEPT: usize = 256;

/// A built answer: its JSON body and the headers that go with it (paging).
#[derive(Debug, Default)]
pub struct Built {
    pub body: Bytes,
    pub headers: Vec<(&'static str, String)>,
}

struct Slot {
    /// The team's version when the build was asked for: it shows at least that much.
    version: u64,
    built: OnceCell<Arc<Built>>,
}

pub struct Reads {
    permits: Arc<Semaphore>,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

impl Default for Reads {
    fn default() -> Self {
        Reads {
            permits: Arc::new(Semaphore::new(READS_AT_ONCE)),
            slots: Mutex::default(),
        }
    }
}

fn busy() -> AppError {
    AppError::Overloaded(
        Limited::ReadsBusy {
            reads: READS_AT_ONCE,
        }
        .into(),
    )
}

impl Reads {
    /// The answer for `key` built at the team's `version` or later: one being built or built
    /// already is shared, else `build` runs (on a blocking thread, once a permit is free).
    pub async fn shared(
        &self,
        key: String,
        version: u64,
        build: impl FnOnce() -> Result<Built, AppError> + Send + 'static,
    ) -> Result<Arc<Built>, AppError> {
        let slot = self.slot(key.clone(), version);
        let permits = self.permits.clone();
        let built = slot.built.get_or_try_init(|| async move {
            let permit = tokio::time::timeout(READ_WAIT, permits.acquire_owned())
                .await
                .map_err(|_| busy())?
                .map_err(|e| {
                    let detail = e.to_string();
                    AppError::Internal(Fault::Internal { detail }.into())
                })?;
            // The permit goes with the build: a client that leaves does not free it early.
            let built = tokio::task::spawn_blocking(move || {
                let _permit = permit;
                build()
            })
            .await
            .map_err(|e| {
                let detail = e.to_string();
                AppError::Internal(Fault::ReadFailed { detail }.into())
            })??;
            Ok(Arc::new(built))
        });
        // However many wait on one build, each waits at most this long.
        match tokio::time::timeout(2 * READ_WAIT, built).await {
            Ok(Ok(b)) => Ok(b.clone()),
            Ok(Err(e)) => {
                self.forget(&key, &slot);
                Err(e)
            }
            Err(_) => Err(busy()),
        }
    }

    /// A slot whose build failed is forgotten (the next ask builds again).
    fn forget(&self, key: &str, slot: &Arc<Slot>) {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if slots.get(key).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            slots.remove(key);
        }
    }

    fn slot(&self, key: String, version: u64) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = slots.get(&key).filter(|s| s.version >= version) {
            return s.clone();
        }
        if slots.len() >= KEPT {
            // Forget them all: reads still being built finish for those who wait on them.
            slots.clear();
        }
        let slot = Arc::new(Slot {
            version,
            built: OnceCell::new(),
        });
        slots.insert(key, slot.clone());
        slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counting(
        n: &Arc<AtomicUsize>,
        text: &'static str,
    ) -> impl FnOnce() -> Result<Built, AppError> + use<> {
        let n = n.clone();
        move || {
            n.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(50));
            Ok(Built {
                body: Bytes::from_static(text.as_bytes()),
                headers: Vec::new(),
            })
        }
    }

    #[tokio::test]
    async fn concurrent_reads_of_one_version_share_one_build() {
        let reads = Arc::new(Reads::default());
        let n = Arc::new(AtomicUsize::new(0));
        let all = (0..50).map(|_| {
            let (reads, n) = (reads.clone(), n.clone());
            tokio::spawn(async move { reads.shared("k".into(), 7, counting(&n, "a")).await })
        });
        for r in futures::future::join_all(all).await {
            assert_eq!(r.unwrap().unwrap().body, "a");
        }
        assert_eq!(n.load(Ordering::SeqCst), 1);
        // A read that arrives after a change is built again; an older one shares the newer.
        reads
            .shared("k".into(), 8, counting(&n, "b"))
            .await
            .unwrap();
        let old = reads
            .shared("k".into(), 5, counting(&n, "c"))
            .await
            .unwrap();
        assert_eq!((n.load(Ordering::SeqCst), &old.body[..]), (2, &b"b"[..]));
    }

    #[tokio::test]
    async fn past_its_permits_a_read_is_told_to_come_back() {
        let reads = Arc::new(Reads::default());
        let _held: Vec<_> = (0..READS_AT_ONCE)
            .map(|_| reads.permits.clone().try_acquire_owned().unwrap())
            .collect();
        let n = Arc::new(AtomicUsize::new(0));
        tokio::time::pause();
        let e = reads
            .shared("k".into(), 1, counting(&n, "a"))
            .await
            .unwrap_err();
        assert!(matches!(e, AppError::Overloaded(_)), "{e}");
        assert_eq!(n.load(Ordering::SeqCst), 0);
    }
}
