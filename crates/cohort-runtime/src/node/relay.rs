//! The event relay: every change the store commits is published on the team's JetStream event
//! stream, in version order and each once, so that anything outside the node (another node, a
//! dashboard, an audit log) can follow the team and replay it from any point.
//!
//! The store is the outbox: a change is committed there first (the journal's transaction), and
//! the relay publishes what the store holds after the last version the stream has. So a node
//! killed between the two leaves nothing unpublished: the next node to run the team starts
//! from the stream's last version. Each message carries its last version as `Nats-Msg-Id` and
//! expects the stream's sequence of the message before it (`Nats-Expected-Last-Subject-Sequence`,
//! which JetStream keeps across its restarts): JetStream drops a repeat and refuses a message out
//! of order, so two relays (one of a node that just lost the lease) can never publish a version
//! twice or out of order.
//!
//! A message holds consecutive events, each's JSON as the store keeps it (`{"version", "at",
//! …change}`) on a line of its own, up to a budget of bytes (one message for a page of changes,
//! not each: a wide team commits tens of thousands a second), with headers
//! `Cohort-First-Version` and `Cohort-Version` (the last it holds; `Nats-Msg-Id` too). An event
//! larger than NATS takes is published alone and empty, with header `Cohort-Too-Large: true`:
//! read that version from the store (`GET /api/…`, `cohort export`).

use super::bus::Bus;
use crate::monitor::Monitor;
use async_nats::HeaderMap;
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use cohort_store::{SqlStore, Store};
use std::sync::Arc;
use std::time::Duration;

/// Events read from the store, and published before their acknowledgements are awaited.
const PAGE: usize = 256;
/// The longest pause between two tries when NATS or the store fails.
const MOST_PAUSE: Duration = Duration::from_secs(5);

/// The relay of one node's term as the team's node, running until dropped or, once the
/// monitor's journal has closed, until it has published all that the store holds.
pub struct Relay {
    task: tokio::task::JoinHandle<()>,
    /// Answers being written, passed on to the nodes that follow the team ([`super::writing`]).
    glimpses: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// Starts relaying on the bus's thread.
    pub fn start(bus: Arc<Bus>, store: Arc<SqlStore>, monitor: Monitor) -> Relay {
        let on = bus.clone();
        Relay {
            glimpses: super::writing::pass_on(bus.clone(), &monitor),
            task: on.spawn(async move { relay(&bus, &store, &monitor).await }),
        }
    }

    /// Waits up to `max` for the relay to publish what the store holds (after the journal
    /// closed); then stops it wherever it is (the next node to run the team goes on from the
    /// stream's last version).
    pub async fn finish(mut self, max: Duration) {
        if tokio::time::timeout(max, &mut self.task).await.is_err() {
            tracing::warn!("the event relay did not catch up within {max:?}; the next node does");
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
        self.glimpses.abort();
    }
}

async fn relay(bus: &Bus, store: &SqlStore, monitor: &Monitor) {
    // Subscribed before anything is read, so no change falls between catching up and live.
    let mut feed = monitor.subscribe();
    let mut pause = Duration::from_millis(50);
    let mut noted = Noted::default();
    let mut cursor: Option<Cursor> = None;
    let bus = &Stamped {
        bus,
        store: store_id(store).await,
    };
    loop {
        let at = match cursor {
            Some(v) => v,
            None => match last_published(bus.bus).await {
                Ok((_, Some(other))) if other != bus.store => {
                    tracing::error!(
                        "the stream {} holds the events of another store ({other}): this \
                         team's events are not published; give it a name of its own, or a NATS \
                         of its own",
                        bus.bus.names.events_stream
                    );
                    return;
                }
                Ok((at, _)) => at,
                Err(why) => {
                    tracing::warn!("reading the event stream's last version failed: {why}");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MOST_PAUSE);
                    continue;
                }
            },
        };
        match step(bus, store, monitor, &mut feed, at).await {
            Ok(Step::Published(to)) => {
                cursor = Some(to);
                pause = Duration::from_millis(50);
                noted.now_and_then(store, to.version).await;
            }
            Ok(Step::Done) => {
                noted.finally(store, at.version).await;
                return;
            }
            Err(why) => {
                // The stream's last version is read again: a message may have landed.
                tracing::warn!("publishing the team's events failed (retrying): {why}");
                cursor = None;
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MOST_PAUSE);
            }
        }
    }
}

/// The store's own id (which its events carry on the stream), read until the store answers.
pub async fn store_id(store: &SqlStore) -> String {
    loop {
        match store.store_id().await {
            Ok(id) => return id,
            Err(e) => {
                tracing::warn!("reading the store's id failed (retrying): {e}");
                tokio::time::sleep(MOST_PAUSE).await;
            }
        }
    }
}

/// The bus, and the id of the store whose events go out on it.
struct Stamped<'a> {
    bus: &'a Bus,
    store: String,
}

/// Where the stream is: the version of its last message, and that message's sequence in it
/// (0 and 0 for an empty stream).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    pub version: u64,
    pub seq: u64,
}

/// What one step of the relay came to.
enum Step {
    /// Published up to here.
    Published(Cursor),
    /// The journal has closed and everything it stored is published.
    Done,
}

/// Publishes what comes after `cursor`: from the store while the stream is behind what the
/// monitor has shown (at the start, or after the relay fell behind its feed), else the next
/// changes of the feed as they are committed (their JSON as the websocket sends it).
async fn step(
    bus: &Stamped<'_>,
    store: &SqlStore,
    monitor: &Monitor,
    feed: &mut crate::monitor::feed::FeedReceiver,
    cursor: Cursor,
) -> Result<Step, String> {
    if cursor.version < monitor.version() {
        return catch_up(bus, store, cursor).await;
    }
    let first = tokio::select! {
        got = feed.recv() => got,
        // The journal closed: what it stored last is in the store.
        _ = monitor.durable(u64::MAX) => {
            return Ok(match from_store(bus, store, cursor).await? {
                Some(v) => Step::Published(v),
                None => Step::Done,
            });
        }
    };
    let Ok(first) = first else {
        // Fell behind the feed (or it closed): the store has every change.
        return catch_up(bus, store, cursor).await;
    };
    let mut batch = vec![first];
    while batch.len() < PAGE {
        match feed.try_recv() {
            Ok(p) => batch.push(p),
            Err(_) => break,
        }
    }
    batch.retain(|p| p.event.version > cursor.version);
    if batch
        .first()
        .is_some_and(|p| p.event.version != cursor.version + 1)
    {
        return catch_up(bus, store, cursor).await;
    }
    let events = batch.iter().map(|p| (p.event.version, p.json().clone()));
    publish(bus, events, cursor)
        .await
        .map(|v| Step::Published(v.unwrap_or(cursor)))
}

/// Publishes a page of what the store holds after `cursor`, for a relay behind what the
/// monitor has shown.
async fn catch_up(bus: &Stamped<'_>, store: &SqlStore, cursor: Cursor) -> Result<Step, String> {
    let published = from_store(bus, store, cursor).await?;
    if published.is_none() {
        // Shown but not in the store cannot be (it is stored first): do not spin on it.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(Step::Published(published.unwrap_or(cursor)))
}

/// Publishes a page of the stored events after `cursor`; the last version published (None:
/// the store holds nothing after it).
async fn from_store(
    bus: &Stamped<'_>,
    store: &SqlStore,
    cursor: Cursor,
) -> Result<Option<Cursor>, String> {
    let events = store
        .events_after(cursor.version, PAGE)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(first) = events.first()
        && first.version > cursor.version + 1
    {
        tracing::warn!(
            "events {} to {} left the store before they were published (compacted): the stream \
             skips them",
            cursor.version + 1,
            first.version - 1
        );
    }
    let mut json = Vec::with_capacity(events.len());
    for e in &events {
        json.push((
            e.version,
            bytes::Bytes::from(serde_json::to_vec(e).map_err(|e| e.to_string())?),
        ));
    }
    publish(bus, json.into_iter(), cursor).await
}

/// How far the relay got, told to the store at most once a second (each note is a commit,
/// which would otherwise compete with the journal's), and once more at the end.
#[derive(Default)]
struct Noted {
    at: Option<std::time::Instant>,
    version: u64,
}

impl Noted {
    async fn now_and_then(&mut self, store: &SqlStore, version: u64) {
        if self
            .at
            .is_some_and(|at| at.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        self.finally(store, version).await;
    }

    async fn finally(&mut self, store: &SqlStore, version: u64) {
        if version == self.version {
            return;
        }
        match store.note_published(version).await {
            Ok(()) => (self.at, self.version) = (Some(std::time::Instant::now()), version),
            Err(e) => tracing::debug!("the store was not told how far the relay got: {e}"),
        }
    }
}

/// Publishes `events` (version and JSON, in order, following `cursor`), as few messages as
/// fit, and waits for JetStream to take them; the last version published (None for no
/// events).
async fn publish(
    stamped: &Stamped<'_>,
    events: impl Iterator<Item = (u64, bytes::Bytes)>,
    cursor: Cursor,
) -> Result<Option<Cursor>, String> {
    let bus = stamped.bus;
    let budget = message_budget(bus.client.server_info().max_payload);
    let mut acks = Vec::new();
    let mut last = cursor.version;
    // Only this relay publishes on the subject: each message lands right after the one before.
    for (batch, expected) in batches(events, budget).into_iter().zip(cursor.seq..) {
        let message = PublishMessage::build()
            .message_id(batch.last.to_string())
            .expected_last_subject_sequence(expected)
            .header(VERSION, batch.last.to_string())
            .header(FIRST_VERSION, batch.first.to_string())
            .header("Cohort-Store", stamped.store.as_str());
        let subject = bus.names.events_subject.clone();
        let sent = match bus
            .jetstream
            .send_publish(subject.clone(), message.clone().payload(batch.lines))
            .await
        {
            // Only a change alone in its message can be too large (see `batches`).
            Err(err) if err.kind() == PublishErrorKind::MaxPayloadExceeded => {
                let stub = message.header("Cohort-Too-Large", "true");
                bus.jetstream.send_publish(subject, stub).await
            }
            other => other,
        };
        acks.push(sent.map_err(|e| e.to_string())?);
        last = batch.last;
    }
    let mut seq = cursor.seq;
    for ack in acks {
        seq = ack.await.map_err(|e| e.to_string())?.sequence;
    }
    Ok((last > cursor.version).then_some(Cursor { version: last, seq }))
}

/// The most bytes of changes the relay puts in one message: well under what the server takes
/// (its headers need room too), and small enough that a follower applies a message at once.
fn message_budget(max_payload: usize) -> usize {
    (max_payload.saturating_sub(4096) / 2).clamp(1, 256 * 1024)
}

/// Consecutive changes published as one message of the stream: their JSON lines.
struct Batch {
    first: u64,
    last: u64,
    lines: bytes::Bytes,
}

/// `events` cut into batches of at most `budget` bytes each (a change larger than that alone
/// in its own), in order: one JetStream message, one store write and one acknowledgement for a
/// page of changes instead of each (a wide team commits tens of thousands a second).
fn batches(events: impl Iterator<Item = (u64, bytes::Bytes)>, budget: usize) -> Vec<Batch> {
    let mut out: Vec<Batch> = Vec::new();
    let mut lines = bytes::BytesMut::new();
    // The first and last version of the batch being filled.
    let mut span: Option<(u64, u64)> = None;
    for (version, json) in events {
        if let Some((first, last)) = span {
            if lines.len() + 1 + json.len() > budget {
                let lines = lines.split().freeze();
                out.push(Batch { first, last, lines });
                span = None;
            } else {
                lines.extend_from_slice(b"\n");
            }
        }
        lines.extend_from_slice(&json);
        span = Some((span.map_or(version, |(first, _)| first), version));
    }
    if let Some((first, last)) = span {
        out.push(Batch {
            first,
            last,
            lines: lines.freeze(),
        });
    }
    out
}

/// Where the team's stream is (0 and 0 when it is empty), and the id of the store its last
/// message came from.
pub async fn last_published(bus: &Bus) -> Result<(Cursor, Option<String>), String> {
    let stream = bus
        .jetstream
        .get_stream_no_info(&bus.names.events_stream)
        .await
        .map_err(|e| e.to_string())?;
    match stream
        .get_last_raw_message_by_subject(&bus.names.events_subject)
        .await
    {
        Ok(m) => {
            let store = m.headers.get("Cohort-Store").map(|s| s.as_str().to_owned());
            let at = Cursor {
                version: version_of(&m.headers).unwrap_or(0),
                seq: m.sequence,
            };
            Ok((at, store))
        }
        Err(e)
            if e.kind()
                == async_nats::jetstream::stream::LastRawMessageErrorKind::NoMessageFound =>
        {
            Ok((Cursor::default(), None))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The header of a message of the event stream naming the last version it holds.
pub const VERSION: &str = "Cohort-Version";
/// The header naming the first version a message holds; a message without it holds only the
/// version [`VERSION`] names (as each did before changes were published a page at a time).
pub const FIRST_VERSION: &str = "Cohort-First-Version";

/// The last version a message of the event stream holds (its [`VERSION`] header).
pub fn version_of(headers: &HeaderMap) -> Option<u64> {
    headers.get(VERSION)?.as_str().parse().ok()
}

/// The first and the last version a message of the event stream holds.
pub fn versions_of(headers: &HeaderMap) -> Option<(u64, u64)> {
    let last = version_of(headers)?;
    let first = match headers.get(FIRST_VERSION) {
        Some(v) => v.as_str().parse().ok()?,
        None => last,
    };
    Some((first, last))
}

/// The changes' JSON a message of the event stream holds, one per line (JSON as serde writes
/// it has no raw line breaks).
pub fn lines_of(payload: &[u8]) -> impl Iterator<Item = &[u8]> {
    payload.split(|b| *b == b'\n').filter(|l| !l.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(versions: std::ops::RangeInclusive<u64>, size: usize) -> Vec<(u64, bytes::Bytes)> {
        versions
            .map(|v| (v, bytes::Bytes::from(format!("{v:0size$}"))))
            .collect()
    }

    #[test]
    fn changes_go_out_a_page_to_a_message_within_the_budget_and_a_large_one_alone() {
        // 10-byte changes, a 31-byte budget: two to a message (10 + 1 + 10; a third would
        // make it 32).
        let got = batches(events(1..=5, 10).into_iter(), 31);
        let spans: Vec<_> = got.iter().map(|b| (b.first, b.last)).collect();
        assert_eq!(spans, [(1, 2), (3, 4), (5, 5)]);
        assert_eq!(&got[0].lines[..], b"0000000001\n0000000002");
        let read: Vec<_> = lines_of(&got[1].lines).collect();
        assert_eq!(read, [&b"0000000003"[..], &b"0000000004"[..]]);
        // One larger than the budget goes alone, between the others.
        let mut mixed = events(1..=1, 10);
        mixed.extend(events(2..=2, 100));
        mixed.extend(events(3..=3, 10));
        let spans: Vec<_> = batches(mixed.into_iter(), 31)
            .iter()
            .map(|b| (b.first, b.last))
            .collect();
        assert_eq!(spans, [(1, 1), (2, 2), (3, 3)]);
        assert!(batches(std::iter::empty(), 31).is_empty());
        let spans: Vec<_> = batches(events(1..=3, 10).into_iter(), 32)
            .iter()
            .map(|b| (b.first, b.last))
            .collect();
        assert_eq!(spans, [(1, 3)], "exactly the budget fits");
        assert_eq!(message_budget(1024 * 1024), 256 * 1024);
        assert_eq!(message_budget(64 * 1024), 30 * 1024);
    }

    #[test]
    fn a_messages_versions_are_read_from_its_headers_and_one_without_a_first_holds_one() {
        let mut h = HeaderMap::new();
        h.insert(VERSION, "9");
        assert_eq!(versions_of(&h), Some((9, 9)));
        h.insert(FIRST_VERSION, "7");
        assert_eq!(versions_of(&h), Some((7, 9)));
        assert_eq!(versions_of(&HeaderMap::new()), None);
    }
}
