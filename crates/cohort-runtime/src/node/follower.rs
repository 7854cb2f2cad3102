//! Following the team on a node that does not run it: a monitor of the node's own, kept at the
//! team's states by the team's JetStream event stream, so the node serves its websocket feeds
//! itself, every change once and in order, also while the team changes nodes.
//!
//! It starts from what the store holds (the latest snapshot and the events after it), then
//! reads the stream from the first message holding a later version (found by its
//! `Cohort-Version` header, the last version it holds: a binary search over the stream's
//! sequences). A change the stream lacks (one too
//! large for NATS, one that left the stream, one the relay has not published yet while NATS or
//! the team's node is down) is read from the store: whenever the stream is quiet for a
//! [`QUIET`], the store is asked for what came after the follower's version, so a follower
//! never falls further behind the store than that. Only when the store no longer has the
//! missing changes either (compacted) does it load the team anew, and its feeds take a fresh
//! snapshot.
//!
//! It follows only while it is wanted: from the first feed that asks for the states here
//! ([`Follower::want`]) until [`LINGER`] after the last one ended. A node nobody watches
//! spends nothing on the team's events (following took a third of a standing-by node's CPU
//! in the nodes bench's wide goal); a feed asked of it meanwhile is passed on to the node
//! running the team, as while the follower loads.

use super::bus::Bus;
use super::relay::{lines_of, version_of, versions_of};
use crate::monitor::Monitor;
use async_nats::jetstream;
use cohort_core::config::MemoryBudget;
use cohort_core::event::Event;
use cohort_store::{SqlStore, Store};
use futures::StreamExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long the stream may be quiet before the store is asked what came since.
pub const QUIET: Duration = Duration::from_secs(1);
/// Events read from the store at once.
const PAGE: usize = 256;
/// The longest pause between two tries when NATS or the store fails.
const MOST_PAUSE: Duration = Duration::from_secs(5);
/// The monitor's feed buffer (as the running node's).
const BUFFER: usize = 8192;
/// How long a follower goes on following after the last feed that wanted it ended (a console
/// reloaded, a phone back online, is served from it again without loading the team anew).
pub const LINGER: Duration = Duration::from_secs(60);

/// The follower of one node, running on the bus's thread until dropped.
pub struct Follower {
    monitor: Monitor,
    ready: Arc<AtomicBool>,
    demand: Arc<Demand>,
    task: tokio::task::JoinHandle<()>,
    /// Answers being written, told by the team's node ([`super::writing`]).
    glimpses: tokio::task::JoinHandle<()>,
}

impl Follower {
    /// The follower of the team whose store is `store` and whose stream `bus` reaches: it
    /// starts following once it is wanted ([`Follower::want`]).
    pub fn start(bus: Arc<Bus>, store: Arc<SqlStore>, memory: MemoryBudget) -> Follower {
        let monitor = Monitor::following(BUFFER, Default::default(), 0, memory);
        let ready = Arc::new(AtomicBool::new(false));
        let demand = Arc::new(Demand::default());
        let on = bus.clone();
        let (m, r, d) = (monitor.clone(), ready.clone(), demand.clone());
        let glimpses = super::writing::take_in(bus.clone(), monitor.clone());
        let task = on.spawn(async move { follow(&bus, &store, &m, &r, &d, memory).await });
        Follower {
            monitor,
            ready,
            demand,
            task,
            glimpses,
        }
    }

    /// Wants the team's states here while the answer lives, and for [`LINGER`] after: the
    /// follower starts (loading the team first) if it had stopped, and does not stop meanwhile,
    /// so a monitor [`Follower::monitor`] gave while this is held stays followed.
    pub fn want(&self) -> Wanted {
        Demand::want(&self.demand)
    }

    /// The followed team's monitor, once it holds what the store held when it started.
    pub fn monitor(&self) -> Option<&Monitor> {
        self.ready.load(Ordering::Acquire).then_some(&self.monitor)
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.task.abort();
        self.glimpses.abort();
    }
}

/// Why following stopped short.
#[derive(Debug, thiserror::Error)]
enum Stop {
    /// The changes the follower lacks are gone from the stream and the store: load anew.
    #[error("changes {from} to {to} are no longer in the store (compacted)")]
    Lost { from: u64, to: u64 },
    #[error("the store failed: {0}")]
    Store(#[from] cohort_store::StoreError),
}

/// Who wants the followed states on this node: the feeds that hold a [`Wanted`], and until
/// when the last one that ended still counts.
#[derive(Default)]
struct Demand {
    state: Mutex<Wants>,
    /// Told at every want and every end of one.
    changed: Notify,
}

#[derive(Default)]
struct Wants {
    open: usize,
    until: Option<Instant>,
}

impl Wants {
    /// Whether the states are wanted now: a feed holds a want, or the last one ended within
    /// the linger.
    fn now(&self) -> bool {
        self.open > 0 || self.until.is_some_and(|t| Instant::now() < t)
    }
}

impl Demand {
    fn lock(&self) -> std::sync::MutexGuard<'_, Wants> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn want(this: &Arc<Demand>) -> Wanted {
        this.lock().open += 1;
        this.changed.notify_waiters();
        Wanted(this.clone())
    }

    /// Resolves once someone wants the states (now or within the linger of the last).
    async fn wanted(&self) {
        loop {
            let changed = self.changed.notified();
            if self.lock().now() {
                return;
            }
            changed.await;
        }
    }

    /// Resolves once nobody wants the states any more, `ready` cleared under the same lock a
    /// want takes: a feed that wanted them first keeps them followed.
    async fn unwanted(&self, ready: &AtomicBool) {
        loop {
            let changed = self.changed.notified();
            // Wanted: until a change, or (no feed holding a want) the linger's end.
            let linger_ends = {
                let w = self.lock();
                if !w.now() {
                    ready.store(false, Ordering::Release);
                    return;
                }
                w.until.filter(|_| w.open == 0)
            };
            match linger_ends {
                None => changed.await,
                Some(at) => tokio::select! {
                    () = changed => {}
                    () = tokio::time::sleep_until(at) => {}
                },
            }
        }
    }
}

/// A feed's want of the followed states (see [`Follower::want`]).
pub struct Wanted(Arc<Demand>);

impl Drop for Wanted {
    fn drop(&mut self) {
        let mut w = self.0.lock();
        w.open -= 1;
        if w.open == 0 {
            w.until = Some(Instant::now() + LINGER);
        }
        drop(w);
        self.0.changed.notify_waiters();
    }
}

/// Follows the team while it is wanted, and waits for the next want after.
async fn follow(
    bus: &Bus,
    store: &SqlStore,
    monitor: &Monitor,
    ready: &AtomicBool,
    demand: &Demand,
    memory: MemoryBudget,
) {
    let stamp = super::relay::store_id(store).await;
    loop {
        demand.wanted().await;
        tokio::select! {
            never = keep_following(bus, store, monitor, ready, memory, &stamp) => match never {},
            () = demand.unwanted(ready) => {
                tracing::debug!("no feed here wants the team's states: following stops");
            }
        }
    }
}

/// Loads the team and follows it, loading it again whenever the changes it lacks are gone.
async fn keep_following(
    bus: &Bus,
    store: &SqlStore,
    monitor: &Monitor,
    ready: &AtomicBool,
    memory: MemoryBudget,
    stamp: &str,
) -> std::convert::Infallible {
    let mut pause = Duration::from_millis(50);
    loop {
        match cohort_store::load(store).await {
            Ok(loaded) => {
                monitor.reset_followed(loaded.states, loaded.version, memory);
                ready.store(true, Ordering::Release);
                pause = Duration::from_millis(50);
                let why = follow_stream(bus, store, monitor, stamp).await;
                tracing::warn!("following the team again from the store: {why}");
            }
            Err(e) => {
                tracing::warn!("the follower could not load the team (retrying): {e}");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MOST_PAUSE);
            }
        }
    }
}

/// Follows the stream (reopened after any error) and the store, until changes are lost.
async fn follow_stream(bus: &Bus, store: &SqlStore, monitor: &Monitor, stamp: &str) -> Stop {
    let mut pause = Duration::from_millis(50);
    loop {
        let read = match open(bus, monitor.version()).await {
            Ok(messages) => {
                pause = Duration::from_millis(50);
                read_stream(messages, store, monitor, stamp).await
            }
            Err(why) => {
                tracing::debug!("the follower cannot read the event stream now: {why}");
                Ok(())
            }
        };
        // Whatever the stream could not give, the store can.
        let caught = match read {
            Ok(()) => catch_up(store, monitor).await,
            Err(stop) => Err(stop),
        };
        match caught {
            Err(Stop::Lost { from, to }) => return Stop::Lost { from, to },
            Err(Stop::Store(e)) => tracing::warn!("the follower's store read failed: {e}"),
            Ok(()) => {}
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MOST_PAUSE);
    }
}

/// An ordered consumer of the team's stream from the first message after `version`.
async fn open(bus: &Bus, version: u64) -> Result<jetstream::consumer::pull::Ordered, String> {
    let mut stream = bus
        .jetstream
        .get_stream(&bus.names.events_stream)
        .await
        .map_err(|e| e.to_string())?;
    let start = first_after(&mut stream, version).await?;
    let config = jetstream::consumer::pull::OrderedConfig {
        filter_subject: bus.names.events_subject.clone(),
        deliver_policy: jetstream::consumer::DeliverPolicy::ByStartSequence {
            start_sequence: start,
        },
        ..Default::default()
    };
    stream
        .create_consumer(config)
        .await
        .map_err(|e| e.to_string())?
        .messages()
        .await
        .map_err(|e| e.to_string())
}

/// The sequence of the stream's first message whose last version is after `version` (the
/// next sequence to come when there is none yet): a binary search, as versions grow with
/// sequences.
async fn first_after(stream: &mut jetstream::stream::Stream, version: u64) -> Result<u64, String> {
    let state = stream
        .info()
        .await
        .map_err(|e| e.to_string())?
        .state
        .clone();
    if state.messages == 0 {
        return Ok(state.last_sequence + 1);
    }
    let (mut lo, mut hi) = (state.first_sequence, state.last_sequence + 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let m = stream
            .get_raw_message(mid)
            .await
            .map_err(|e| format!("reading message {mid} of the stream: {e}"))?;
        if version_of(&m.headers).unwrap_or(0) > version {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Ok(lo)
}

/// Applies the stream's messages until the consumer fails or ends (Ok: the store is asked
/// then); whenever it is quiet for [`QUIET`], what the store holds after the follower's
/// version is applied meanwhile.
async fn read_stream(
    mut messages: jetstream::consumer::pull::Ordered,
    store: &SqlStore,
    monitor: &Monitor,
    stamp: &str,
) -> Result<(), Stop> {
    loop {
        let message = match tokio::time::timeout(QUIET, messages.next()).await {
            Ok(Some(Ok(m))) => m,
            Ok(Some(Err(e))) => {
                tracing::debug!("the event stream's consumer failed: {e}");
                return Ok(());
            }
            Ok(None) => return Ok(()),
            Err(_) => {
                catch_up(store, monitor).await?;
                continue;
            }
        };
        let headers = message.headers.as_ref();
        if headers
            .and_then(|h| h.get("Cohort-Store"))
            .map(|s| s.as_str())
            != Some(stamp)
        {
            // Another store's events (a second deployment of the team's name): not this team.
            tracing::warn!("the event stream holds another store's events; following the store");
            return Ok(());
        }
        let Some((first, last)) = headers.and_then(versions_of) else {
            // Not the relay's: what it should have held comes from the store when it is due.
            tracing::debug!("a message of the event stream names no version: skipped");
            continue;
        };
        apply_message(store, monitor, (first, last), &message.payload).await?;
    }
}

/// Applies the changes `first` to `last` one message of the stream holds (skipping those the
/// follower has already); what it lacks (too large for NATS, published empty; unreadable; a gap
/// before it) is read from the store.
async fn apply_message(
    store: &SqlStore,
    monitor: &Monitor,
    (first, last): (u64, u64),
    payload: &[u8],
) -> Result<(), Stop> {
    if last <= monitor.version() {
        return Ok(());
    }
    let events: Result<Vec<Event>, _> = lines_of(payload).map(serde_json::from_slice).collect();
    let events = match events {
        Ok(events) if events.iter().map(|e| e.version).eq(first..=last) => events,
        _ => return fill(store, monitor, last).await,
    };
    for event in events {
        if event.version <= monitor.version() {
            continue;
        }
        if event.version > monitor.version() + 1 {
            fill(store, monitor, event.version - 1).await?;
        }
        if let Err(gap) = monitor.apply_followed(event) {
            // The store lacks what came between (it cannot: the stream is published from
            // it); the next look at the store goes on from where the follower is.
            tracing::warn!("a followed change was left for the store: {gap}");
        }
    }
    Ok(())
}

/// Applies what the store holds after the monitor's version.
async fn catch_up(store: &SqlStore, monitor: &Monitor) -> Result<(), Stop> {
    fill(store, monitor, u64::MAX).await
}

/// Applies the stored changes after the monitor's version up to `to` (or as far as the store
/// goes).
async fn fill(store: &SqlStore, monitor: &Monitor, to: u64) -> Result<(), Stop> {
    loop {
        let at = monitor.version();
        if at >= to {
            return Ok(());
        }
        let want = usize::try_from(to - at).unwrap_or(PAGE).min(PAGE);
        let page = store.events_after(at, want).await?;
        let Some(first) = page.first() else {
            return Ok(());
        };
        if first.version > at + 1 {
            return Err(Stop::Lost {
                from: at + 1,
                to: first.version - 1,
            });
        }
        for e in page {
            // In order and following: no gap can come of it.
            let _ = monitor.apply_followed(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `f` resolves within `d` of (paused) time.
    async fn within<F: std::future::Future>(d: Duration, f: F) -> bool {
        tokio::time::timeout(d, f).await.is_ok()
    }

    #[tokio::test(start_paused = true)]
    async fn the_states_are_followed_from_a_want_until_the_linger_after_the_last() {
        let demand = Arc::new(Demand::default());
        let ready = AtomicBool::new(true);
        assert!(
            !within(LINGER * 3, demand.wanted()).await,
            "wanted by nobody"
        );
        let first = Demand::want(&demand);
        assert!(within(Duration::ZERO, demand.wanted()).await);
        // Held: never unwanted, however long.
        assert!(!within(LINGER * 3, demand.unwanted(&ready)).await);
        let second = Demand::want(&demand);
        drop(first);
        assert!(
            !within(LINGER * 3, demand.unwanted(&ready)).await,
            "one still held"
        );
        drop(second);
        // The last ended: wanted for the linger, then not.
        assert!(within(Duration::ZERO, demand.wanted()).await);
        assert!(!within(LINGER / 2, demand.unwanted(&ready)).await);
        assert!(
            ready.load(Ordering::Acquire),
            "still followed in the linger"
        );
        // A want in the linger keeps it.
        let again = Demand::want(&demand);
        assert!(!within(LINGER * 3, demand.unwanted(&ready)).await);
        drop(again);
        assert!(within(LINGER + Duration::from_millis(1), demand.unwanted(&ready)).await);
        assert!(
            !ready.load(Ordering::Acquire),
            "a stopped follower's monitor is not given"
        );
        assert!(
            !within(LINGER * 3, demand.wanted()).await,
            "unwanted after the linger"
        );
    }
}
