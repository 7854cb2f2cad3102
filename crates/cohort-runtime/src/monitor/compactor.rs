//! The monitor's compactor: a thread of its own that compacts the team's store every
//! `store.compact_every_s` (see [`cohort_store::compact`]), never on the journal's thread, so
//! commits are not held up by it; each of its transactions is short, so a commit waits for at
//! most one of them.

use cohort_core::config::Compaction;
use cohort_store::Store;
use cohort_store::stats::human_bytes;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The first compaction comes this soon after the start (or after `every`, if sooner): a store
/// left large by an earlier release or a long run shrinks without waiting a whole period.
const FIRST_AFTER: Duration = Duration::from_secs(5);
/// How long stopping waits for a compaction to reach a point where it can stop (a SQLite
/// rewrite cannot be cut short).
const STOP_DEADLINE: Duration = Duration::from_secs(30);

pub(super) struct Compactor {
    stop: Arc<AtomicBool>,
    /// Dropped to wake the thread at once (nothing is ever sent on it).
    wake: Mutex<Option<SyncSender<()>>>,
    /// Told (closed) when the thread ends.
    ended: Mutex<Option<Receiver<()>>>,
}

impl Compactor {
    pub(super) fn start(store: Arc<dyn Store>, policy: Compaction) -> Compactor {
        let (wake, asleep) = std::sync::mpsc::sync_channel(0);
        let (ended_tx, ended) = std::sync::mpsc::channel::<()>();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let started = std::thread::Builder::new()
            .name("cohort-compact".into())
            .spawn(move || {
                let _ended = ended_tx;
                run(store.as_ref(), &policy, &asleep, &stopping);
            });
        if let Err(e) = started {
            tracing::error!("the store's compaction could not start (it keeps growing): {e}");
        }
        Compactor {
            stop,
            wake: Mutex::new(Some(wake)),
            ended: Mutex::new(Some(ended)),
        }
    }

    /// Stops the thread and waits (a while) for it to end: the store is not compacted while
    /// the journal takes its last snapshot, nor after.
    pub(super) fn stop(&self) {
        self.signal();
        let ended = self.ended.lock().ok().and_then(|mut e| e.take());
        if let Some(ended) = ended
            && let Err(RecvTimeoutError::Timeout) = ended.recv_timeout(STOP_DEADLINE)
        {
            tracing::warn!("the store's compaction did not stop within {STOP_DEADLINE:?}");
        }
    }

    fn signal(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Ok(mut wake) = self.wake.lock() {
            wake.take();
        }
    }
}

impl Drop for Compactor {
    fn drop(&mut self) {
        // The monitor is gone: end the thread (it lets go of the store), without waiting.
        self.signal();
    }
}

fn run(store: &dyn Store, policy: &Compaction, asleep: &Receiver<()>, stop: &AtomicBool) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("the store's compaction could not start its runtime: {e}");
            return;
        }
    };
    let mut wait = FIRST_AFTER.min(policy.every);
    loop {
        match asleep.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        if stop.load(Ordering::Relaxed) {
            return;
        }
        match rt.block_on(store.compact(policy, stop)) {
            Ok(c) if c.events_pruned + c.snapshots_pruned > 0 => tracing::info!(
                "compacted the store: {} events up to version {} and {} snapshot(s) pruned, {} \
                 task(s) archived; {} -> {}",
                c.events_pruned,
                c.folded_to,
                c.snapshots_pruned,
                c.tasks_archived,
                human_bytes(c.bytes_before),
                human_bytes(c.bytes_after)
            ),
            Ok(_) => tracing::debug!("compacted the store: nothing to prune"),
            Err(e) => tracing::error!(
                "compacting the store failed (tried again in {:?}): {e}",
                policy.every
            ),
        }
        wait = policy.every;
    }
}
