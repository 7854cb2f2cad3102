//! Calls between the nodes of a team over NATS, in the order they are made: every call a node
//! makes goes out through one sender (a bounded queue read by a thread of its own), so two
//! calls of one agent never overtake each other on the way. A call that wants its answer waits
//! for it on the node's own inbox, until its deadline; a call nobody listens for (the node it
//! is for is gone) is answered at once by NATS, and fails so.

use super::bus::Bus;
use bytes::Bytes;
use cohort_core::event::trace_context::TraceParent;
use futures::StreamExt;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// The header a call about a message carries its trace context in (W3C Trace Context).
pub const TRACEPARENT: &str = "traceparent";

/// Calls queued to go out at most; a caller beyond it waits (as it waits for a full journal).
const QUEUED: usize = 65_536;

/// Why a call got no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LinkError {
    #[error("no node listens on {0}")]
    NoResponders(String),
    #[error("no answer within {0:?}")]
    Deadline(Duration),
    #[error("this node's NATS link is closed")]
    Closed,
    #[error("this node's NATS link could not start: {0}")]
    Start(String),
}

/// One node's way of calling the others.
#[derive(Clone)]
pub struct Link {
    inner: Arc<Inner>,
}

struct Inner {
    queue: SyncSender<Outgoing>,
    waiting: Mutex<HashMap<u64, oneshot::Sender<Result<Bytes, LinkError>>>>,
    next: AtomicU64,
    inbox: String,
}

struct Outgoing {
    subject: String,
    payload: Bytes,
    reply: Option<String>,
    /// The trace context of the message the call carries, sent as a W3C `traceparent`
    /// header, so whatever reads the subject (a node, a tap, a NATS tracing proxy) can follow
    /// the trace without reading the payload.
    traceparent: Option<TraceParent>,
}

impl Link {
    /// The link of a node connected to NATS through `bus`.
    pub async fn start(bus: &Arc<Bus>) -> Result<Link, LinkError> {
        let client = bus.client.clone();
        let inbox = client.new_inbox();
        let mut answers = client
            .subscribe(format!("{inbox}.*"))
            .await
            .map_err(|e| LinkError::Start(e.to_string()))?;
        let (queue, queued) = std::sync::mpsc::sync_channel::<Outgoing>(QUEUED);
        let inner = Arc::new(Inner {
            queue,
            waiting: Mutex::default(),
            next: AtomicU64::new(1),
            inbox,
        });
        let weak = Arc::downgrade(&inner);
        bus.spawn(async move {
            while let Some(m) = answers.next().await {
                let Some(inner) = weak.upgrade() else { return };
                let Some(id) = m.subject.rsplit('.').next().and_then(|i| i.parse().ok()) else {
                    continue;
                };
                let Some(waiter) = inner.waiting().remove(&id) else {
                    continue;
                };
                let answer = match m.status {
                    Some(async_nats::StatusCode::NO_RESPONDERS) => {
                        Err(LinkError::NoResponders(m.subject.to_string()))
                    }
                    _ => Ok(m.payload),
                };
                let _ = waiter.send(answer);
            }
        });
        let handle = bus.handle();
        std::thread::Builder::new()
            .name("cohort-link".into())
            .spawn(move || {
                // Ends when the last handle to the link is dropped (the queue closes).
                while let Ok(o) = queued.recv() {
                    let headers = o.traceparent.map(|t| {
                        let mut h = async_nats::HeaderMap::new();
                        h.insert(TRACEPARENT, t.to_string().as_str());
                        h
                    });
                    let sent = handle.block_on(async {
                        match (o.reply, headers) {
                            (Some(r), Some(h)) => {
                                client
                                    .publish_with_reply_and_headers(o.subject, r, h, o.payload)
                                    .await
                            }
                            (Some(r), None) => {
                                client.publish_with_reply(o.subject, r, o.payload).await
                            }
                            (None, Some(h)) => {
                                client.publish_with_headers(o.subject, h, o.payload).await
                            }
                            (None, None) => client.publish(o.subject, o.payload).await,
                        }
                    });
                    if let Err(e) = sent {
                        tracing::warn!("a call to another node was not sent: {e}");
                    }
                }
            })
            .map_err(|e| LinkError::Start(e.to_string()))?;
        Ok(Link { inner })
    }

    /// Sends `payload` on `subject`, wanting no answer.
    pub fn tell(&self, subject: String, payload: Bytes) {
        self.queue(Outgoing {
            subject,
            payload,
            reply: None,
            traceparent: None,
        });
    }

    /// Sends `payload` (a call about a message in trace `traceparent`, if any) on `subject`
    /// and waits up to `deadline` for its answer.
    pub fn ask(
        &self,
        subject: String,
        payload: Bytes,
        traceparent: Option<TraceParent>,
        deadline: Duration,
    ) -> impl Future<Output = Result<Bytes, LinkError>> + Send + 'static + use<> {
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.inner.waiting().insert(id, tx);
        let reply = Some(format!("{}.{id}", self.inner.inbox));
        let queued = self.queue(Outgoing {
            subject,
            payload,
            reply,
            traceparent,
        });
        let inner = self.inner.clone();
        async move {
            if !queued {
                inner.waiting().remove(&id);
                return Err(LinkError::Closed);
            }
            let answer = tokio::time::timeout(deadline, rx).await;
            inner.waiting().remove(&id);
            match answer {
                Ok(Ok(a)) => a,
                Ok(Err(_)) => Err(LinkError::Closed),
                Err(_) => Err(LinkError::Deadline(deadline)),
            }
        }
    }

    /// Queues a call; false once the sender has stopped.
    fn queue(&self, o: Outgoing) -> bool {
        match self.inner.queue.try_send(o) {
            Ok(()) => true,
            // Full: the caller waits for room, as a publisher waits for a full journal.
            Err(TrySendError::Full(o)) => self.inner.queue.send(o).is_ok(),
            Err(TrySendError::Disconnected(_)) => false,
        }
    }
}

impl Inner {
    fn waiting(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Result<Bytes, LinkError>>>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}
