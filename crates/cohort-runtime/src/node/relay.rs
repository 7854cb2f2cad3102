//! The event relay: every change the store commits is published on the team's JetStream event
//! stream, in version order and each once, so that anything outside the node (another node, a
//! dashboard, an audit log) can follow the team and replay it from any point.
//!
//! The store is the outbox: a change is committed there first (the journal's transaction), and
//! the relay publishes what the store holds after the last version the stream has. So a node
//! killed between the two leaves nothing unpublished: the next node to run the team starts
//! from the stream's last version. Each message carries its version as `Nats-Msg-Id` and
//! expects the previous one as the stream's last (`Nats-Expected-Last-Msg-Id`): JetStream
//! drops a repeat and refuses a message out of order, so two relays (one of a node that just
//! lost the lease) can never publish a version twice or out of order.
//!
//! A message is the event's JSON as the store keeps it (`{"version", "at", …change}`), with
//! header `Cohort-Version`. An event larger than NATS takes is published empty, with header
//! `Cohort-Too-Large: true`: read that version from the store (`GET /api/…`, `cohort export`).

use super::bus::Bus;
use crate::monitor::Monitor;
use crate::store::{SqlStore, Store};
use async_nats::HeaderMap;
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
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
}

impl Relay {
    pub fn start(bus: Arc<Bus>, store: Arc<SqlStore>, monitor: Monitor) -> Relay {
        Relay {
            task: tokio::spawn(async move { relay(&bus, &store, &monitor).await }),
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
    }
}

async fn relay(bus: &Bus, store: &SqlStore, monitor: &Monitor) {
    let mut pause = Duration::from_millis(50);
    let mut last = None;
    loop {
        let cursor = match last {
            Some(v) => v,
            None => match last_published(bus).await {
                Ok(v) => v,
                Err(why) => {
                    tracing::warn!("reading the event stream's last version failed: {why}");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MOST_PAUSE);
                    continue;
                }
            },
        };
        // Woken by the next commit; once the journal has closed, only what is stored is left.
        let open = monitor.durable(cursor + 1).await;
        match publish_page(bus, store, cursor).await {
            Ok(Some(v)) => {
                last = Some(v);
                pause = Duration::from_millis(50);
                if let Err(e) = store.note_published(v).await {
                    tracing::debug!("the store was not told how far the relay got: {e}");
                }
            }
            Ok(None) if !open => return,
            Ok(None) => last = Some(cursor),
            Err(why) => {
                // The stream's last version is read again: a message may have landed.
                tracing::warn!("publishing the team's events failed (retrying): {why}");
                last = None;
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MOST_PAUSE);
            }
        }
    }
}

/// Publishes the stored events after `cursor` (up to a page) and waits for JetStream to take
/// them; the last version published, None when the store holds nothing after `cursor`.
async fn publish_page(bus: &Bus, store: &SqlStore, cursor: u64) -> Result<Option<u64>, String> {
    let events = store
        .events_after(cursor, PAGE)
        .await
        .map_err(|e| e.to_string())?;
    let Some(first) = events.first() else {
        return Ok(None);
    };
    if first.version > cursor + 1 {
        tracing::warn!(
            "events {} to {} left the store before they were published (compacted): the stream \
             skips them",
            cursor + 1,
            first.version - 1
        );
    }
    let mut acks = Vec::with_capacity(events.len());
    let mut previous = cursor;
    for e in &events {
        let json = serde_json::to_vec(e).map_err(|e| e.to_string())?;
        let mut message = PublishMessage::build().message_id(e.version.to_string());
        if previous > 0 {
            message = message.expected_last_message_id(previous.to_string());
        }
        let message = message.header("Cohort-Version", e.version.to_string());
        let sent = match bus
            .jetstream
            .send_publish(
                bus.names.events_subject.clone(),
                message.clone().payload(json.into()),
            )
            .await
        {
            Err(err) if err.kind() == PublishErrorKind::MaxPayloadExceeded => {
                let stub = message.header("Cohort-Too-Large", "true");
                bus.jetstream
                    .send_publish(bus.names.events_subject.clone(), stub)
                    .await
            }
            other => other,
        };
        acks.push(sent.map_err(|e| e.to_string())?);
        previous = e.version;
    }
    for ack in acks {
        ack.await.map_err(|e| e.to_string())?;
    }
    Ok(Some(previous))
}

/// The version of the newest event on the team's stream (0 for an empty stream).
pub async fn last_published(bus: &Bus) -> Result<u64, String> {
    let stream = bus
        .jetstream
        .get_stream_no_info(&bus.names.events_stream)
        .await
        .map_err(|e| e.to_string())?;
    match stream
        .get_last_raw_message_by_subject(&bus.names.events_subject)
        .await
    {
        Ok(m) => Ok(version_of(&m.headers).unwrap_or(0)),
        Err(e)
            if e.kind()
                == async_nats::jetstream::stream::LastRawMessageErrorKind::NoMessageFound =>
        {
            Ok(0)
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The `Cohort-Version` header of a message of the event stream.
pub fn version_of(headers: &HeaderMap) -> Option<u64> {
    headers.get("Cohort-Version")?.as_str().parse().ok()
}
