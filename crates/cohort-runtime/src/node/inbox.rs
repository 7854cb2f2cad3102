//! Per-agent inboxes on JetStream: the messages of an agent that runs on another node than the
//! team's go through the team's inbox stream (`COHORT_<team>_INBOX`, subject
//! `cohort.<team>.inbox.<agent>`, work-queue retention, file-backed), read on the agent's node by
//! a durable consumer of its own (kept in NATS's memory; see `messages`): in order, one in
//! flight (`max_ack_pending` 1), acknowledged only once the agent's receipt is stored by the
//! team's node (the deliveries ledger's transaction), with *progress* sent while that waits, and
//! delivered again otherwise.
//!
//! The ledger stays the record: each placement of an agent starts with an empty inbox (its
//! consumer deleted and its subject purged), and the messages the record says the agent has not
//! taken are routed to it again, so what a lost node had in hand is never lost and the order
//! is the record's. Within one placement ([`Hold`]) a repeat is dropped by JetStream
//! (`Nats-Msg-Id` = hold and message number) or by the agent, which takes a number once; a
//! copy from an older placement is dropped by the host; a copy under a *newer* hold than the
//! host's tells the host it is stale (the agent runs elsewhere now): it stops reading and
//! leaves the message to the new node.

use super::bus::Bus;
use super::link::TRACEPARENT;
use super::wire::Hold;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::{self, AckKind};
use cohort_core::ids::AgentId;
use cohort_core::message::Message;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::time::Duration;

/// How long a delivered message may go without an ack or progress before it is delivered
/// again.
pub const ACK_WAIT: Duration = Duration::from_secs(6);
/// How often a message waiting for its receipt to be stored tells JetStream it is in progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);
/// How long the host waits for the receipt to be stored before it leaves the message to be
/// delivered again.
const RECEIPT_DEADLINE: Duration = Duration::from_secs(30);
/// How long a message whose receipt was not stored waits before it is delivered again.
const AGAIN_AFTER: Duration = Duration::from_secs(1);
/// An inactive consumer (its agent moved, or its node went) is removed by NATS after this.
const INACTIVE_CONSUMER: Duration = Duration::from_secs(3600);

/// One message in an agent's inbox.
#[derive(Debug, Serialize, Deserialize)]
pub struct Delivery {
    /// The placement it was sent under.
    pub hold: Hold,
    /// Its number in the ledger (0: a message no one tracks).
    pub no: u64,
    pub message: Message,
}

/// Starts `agent`'s inbox afresh for a new placement: its consumer deleted (a node that read it
/// before reads nothing more) and what its subject holds purged (the record routes again what
/// the agent has not taken).
pub async fn clear(bus: &Bus, agent: &AgentId) -> Result<(), String> {
    let stream = inbox_stream(bus).await?;
    let name = bus.names.inbox_consumer(agent);
    match stream.delete_consumer(&name).await {
        Ok(_) => {}
        Err(e) if not_found(e.kind()) => {}
        Err(e) => return Err(format!("deleting consumer {name}: {e}")),
    }
    stream
        .purge()
        .filter(bus.names.inbox_subject(agent))
        .await
        .map(|_| ())
        .map_err(|e| format!("purging {agent}'s inbox: {e}"))
}

/// Whether a consumer call failed because there is no such consumer (nothing to delete).
fn not_found(kind: jetstream::stream::ConsumerErrorKind) -> bool {
    matches!(kind, jetstream::stream::ConsumerErrorKind::JetStream(e)
        if e.error_code() == jetstream::ErrorCode::CONSUMER_NOT_FOUND)
}

/// Puts message `no` into `agent`'s inbox under `hold`; its sequence in the stream once
/// JetStream has stored it.
pub async fn put(
    bus: &Bus,
    agent: &AgentId,
    hold: Hold,
    no: u64,
    message: &Message,
) -> Result<u64, String> {
    let traceparent = message.traceparent;
    let delivery = Delivery {
        hold,
        no,
        message: message.clone(),
    };
    let json = serde_json::to_vec(&delivery).map_err(|e| e.to_string())?;
    let mut publish = PublishMessage::build()
        .message_id(format!("{}.{}.{no}", hold.term, hold.token))
        .payload(json.into());
    if let Some(tp) = traceparent {
        publish = publish.header(TRACEPARENT, tp.to_string().as_str());
    }
    let ack = bus
        .jetstream
        .send_publish(bus.names.inbox_subject(agent), publish)
        .await
        .map_err(|e| e.to_string())?;
    Ok(ack.await.map_err(|e| e.to_string())?.sequence)
}

async fn inbox_stream(bus: &Bus) -> Result<jetstream::stream::Stream<()>, String> {
    bus.jetstream
        .get_stream_no_info(&bus.names.inbox_stream)
        .await
        .map_err(|e| format!("the inbox stream: {e}"))
}

/// How the host reads one agent's inbox.
pub trait Receiver: Send + Sync + 'static {
    /// Gives the agent message `no`; resolves once the agent has taken it (its receipt went
    /// out), false if the agent is gone.
    fn deliver(&self, no: u64, message: Message) -> impl Future<Output = bool> + Send;
    /// Resolves true once everything the agent sent so far (its receipt of the message at
    /// `seq` of its inbox) is stored.
    fn stored(&self, seq: u64) -> impl Future<Output = bool> + Send;
}

/// Reads `agent`'s inbox under `hold` for `receiver`, until the task is aborted (the agent
/// left this node), the agent is gone, or a message under a newer hold shows it runs elsewhere.
pub async fn read(bus: &Bus, agent: &AgentId, hold: Hold, receiver: impl Receiver) {
    let mut pause = Duration::from_millis(100);
    loop {
        match messages(bus, agent).await {
            Ok(mut messages) => {
                while let Some(m) = messages.next().await {
                    let Ok(m) = m else { break };
                    match take(&m, hold, &receiver).await {
                        Taken::Next => pause = Duration::from_millis(100),
                        Taken::Stop => return,
                    }
                }
            }
            Err(why) => tracing::warn!(%agent, "the agent's inbox cannot be read now: {why}"),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
}

enum Taken {
    Next,
    Stop,
}

/// Takes one message: given to the agent, acknowledged once its receipt is stored (progress
/// told meanwhile).
async fn take(m: &jetstream::Message, hold: Hold, receiver: &impl Receiver) -> Taken {
    let Ok(d) = serde_json::from_slice::<Delivery>(&m.payload) else {
        tracing::warn!("an unreadable message in an agent's inbox was dropped");
        let _ = m.ack_with(AckKind::Term).await;
        return Taken::Next;
    };
    // An agent's lease token grows with every grant: a higher one is a later placement.
    if d.hold.token > hold.token {
        // The agent was placed again elsewhere: that node reads it from now on.
        let _ = m.ack_with(AckKind::Nak(None)).await;
        return Taken::Stop;
    }
    if d.hold != hold {
        // From an older placement: the record routed it again under this one.
        let _ = m.ack().await;
        return Taken::Next;
    }
    if !receiver.deliver(d.no, d.message).await {
        let _ = m.ack_with(AckKind::Nak(None)).await;
        return Taken::Stop;
    }
    let seq = m.info().map(|i| i.stream_sequence).unwrap_or(0);
    let stored = receiver.stored(seq);
    tokio::pin!(stored);
    let deadline = tokio::time::sleep(RECEIPT_DEADLINE);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            ok = &mut stored => {
                if ok {
                    if let Err(e) = m.double_ack().await {
                        // Delivered again after ACK_WAIT: the agent takes it once.
                        tracing::debug!("an inbox message's ack was not confirmed: {e}");
                    }
                } else {
                    // Again after a pause: a refusal (the agent moved) would otherwise spin
                    // until this node lets the agent go.
                    let _ = m.ack_with(AckKind::Nak(Some(AGAIN_AFTER))).await;
                }
                return Taken::Next;
            }
            () = tokio::time::sleep(PROGRESS_EVERY) => {
                let _ = m.ack_with(AckKind::Progress).await;
            }
            () = &mut deadline => {
                tracing::warn!(no = d.no, "an agent's receipt was not stored in time; the message comes again");
                return Taken::Next;
            }
        }
    }
}

/// `agent`'s durable consumer (made if need be) and its messages. The consumer is kept in NATS's
/// memory, not on its disk: the ledger, not the consumer, says what the agent took, and a work
/// queue holds only what is not acknowledged, so a consumer a restart of NATS lost is made
/// again here and reads what waits. On disk, each one's state was files NATS created and
/// replaced as messages were taken: most of NATS's CPU while a wide goal started on three nodes.
async fn messages(bus: &Bus, agent: &AgentId) -> Result<jetstream::consumer::pull::Stream, String> {
    let stream = inbox_stream(bus).await?;
    let name = bus.names.inbox_consumer(agent);
    let config = jetstream::consumer::pull::Config {
        durable_name: Some(name.clone()),
        filter_subject: bus.names.inbox_subject(agent),
        ack_policy: jetstream::consumer::AckPolicy::Explicit,
        ack_wait: ACK_WAIT,
        max_ack_pending: 1,
        inactive_threshold: INACTIVE_CONSUMER,
        memory_storage: true,
        ..Default::default()
    };
    let consumer = stream
        .get_or_create_consumer(&name, config)
        .await
        .map_err(|e| e.to_string())?;
    consumer.messages().await.map_err(|e| e.to_string())
}

/// How far one agent's node is behind its inbox (`cohort inspect --nats`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InboxLag {
    /// The consumer's name (`inbox-<agent>`).
    pub consumer: String,
    /// Messages not delivered yet.
    pub waiting: u64,
    /// Delivered, not acknowledged yet (at most one).
    pub in_flight: usize,
    /// Delivered more than once so far.
    pub redelivered: usize,
}

/// Every inbox consumer of the team and its lag, most waiting first.
pub async fn lags(bus: &Bus) -> Result<Vec<InboxLag>, String> {
    let stream = inbox_stream(bus).await?;
    let mut consumers = stream.consumers();
    let mut out = Vec::new();
    while let Some(info) = consumers.next().await {
        let info = info.map_err(|e| format!("listing the inbox consumers: {e}"))?;
        out.push(InboxLag {
            consumer: info.name.clone(),
            waiting: info.num_pending,
            in_flight: info.num_ack_pending,
            redelivered: info.num_redelivered,
        });
    }
    out.sort_by(|a, b| b.waiting.cmp(&a.waiting).then(a.consumer.cmp(&b.consumer)));
    Ok(out)
}
