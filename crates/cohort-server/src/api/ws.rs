//! The websocket monitor feed, `GET /ws?token=…`: a snapshot of every state at version V,
//! then the changes after V, as `{"type": "events", "events": [event, …]}` frames (each event
//! as the monitor serialised it once for every client; a client applies them in order).
//!
//! Backpressure: the runtime never waits for a client. Events reach a feed through the
//! monitor's bounded broadcast channel, whose sender never blocks; a feed that falls behind
//! gets `Lagged` and is sent a fresh snapshot instead of the events it missed (never a silent
//! gap). Each frame is sent with a timeout, and a client that accepts nothing for that long is
//! disconnected. Events waiting for a feed go out together in one frame, so a busy team costs a
//! client fewer, larger frames rather than falling behind. A person's private changes (their
//! chats and notices) go only to that person's feeds.
//!
//! The feed loop (`run_feed`) is generic over the socket's `Sink`/`Stream` halves so it can be
//! tested without a socket.

use super::access::View;
use super::error::ApiQuery;
use super::reason::{Denied, Malformed};
use super::{ApiState, AppError};
use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocketUpgrade, close_code};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use cohort_core::config::Access;
use cohort_core::ids::AgentId;
use cohort_runtime::monitor::feed::{FeedReceiver, RecvError, TryRecvError};
use cohort_runtime::monitor::{Monitor, Published};
use futures::{Sink, SinkExt, Stream, StreamExt};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Settings of every websocket feed.
#[derive(Clone, Copy, Debug)]
pub struct FeedConfig {
    /// How long one frame may wait for the client before the client counts as stalled and
    /// is disconnected.
    pub send_timeout: Duration,
    /// Open feeds one person may have at once (tabs, devices).
    pub max_per_human: usize,
    /// Open feeds in all.
    pub max_total: usize,
    /// At most this many events go in one frame.
    pub max_batch: usize,
    /// The shortest time between two event frames of one feed. Events that arrive sooner wait
    /// and go out together: a busy team costs each client a few larger frames a second rather
    /// than one per change, which is what keeps a hundred clients cheap to serve.
    pub frame_interval: Duration,
    /// How often a feed pings its client; three pings without a word back end it.
    pub ping: Duration,
}

impl Default for FeedConfig {
    fn default() -> Self {
        FeedConfig::from(cohort_core::config::Feeds::default())
    }
}

impl From<cohort_core::config::Feeds> for FeedConfig {
    fn from(f: cohort_core::config::Feeds) -> Self {
        FeedConfig {
            send_timeout: f.send_timeout,
            max_per_human: f.per_human,
            max_total: f.total,
            max_batch: 512,
            frame_interval: f.frame_interval,
            ping: f.ping,
        }
    }
}

/// Why a feed ended.
#[derive(Debug, PartialEq, Eq)]
pub enum FeedEnd {
    /// The client closed the socket or it broke.
    ClientGone,
    /// The client sent nothing, not even a pong, for three pings.
    Silent,
    /// A frame waited longer than `send_timeout`.
    Stalled,
    /// Sending failed (the connection is gone).
    SendFailed,
    /// The server is shutting down.
    ServerClosing,
    /// The person's session ended (logout or expiry).
    SessionEnded,
    /// The monitor (the team) is gone.
    MonitorGone,
    /// Over the connection limits: refused with this reason.
    Refused(String),
}

/// About the most bytes of events one frame carries (more wait for the next frame).
pub const FRAME_BYTES: usize = 1 << 20;

/// `GET /ws?token=…`. Browsers cannot set headers on a websocket, so the token comes in the
/// query; the Origin check keeps other sites' pages from opening the feed with it. With
/// `&format=flow&task=…` the socket carries that task's flow instead ([`super::task_events`]).
pub async fn upgrade(
    State(state): State<ApiState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<super::task_events::EventsQuery>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, AppError> {
    let inner = &state.inner;
    check_origin(&headers, &inner.allowed_origins)?;
    let token = q
        .token
        .clone()
        .ok_or_else(|| AppError::Unauthorized(Denied::NoTokenInUrl.into()))?;
    let human = inner
        .sessions
        .human(&token)
        .ok_or_else(|| AppError::Unauthorized(Denied::InvalidToken.into()))?;
    let ws = ws
        .map_err(|r| {
            let detail = r.body_text();
            AppError::Rejected(r.status(), Malformed::NotAWebsocket { detail }.into())
        })?
        // The feed takes no commands: refuse anything but small control frames from clients.
        .max_message_size(4 * 1024)
        .max_frame_size(4 * 1024);
    match q.format.as_deref() {
        Some("flow") => {
            return super::task_events::over_websocket(&state, human, &token, q, ws).await;
        }
        Some(other) => {
            let format = other.to_owned();
            return Err(AppError::BadRequest(
                Malformed::UnknownFormat { format }.into(),
            ));
        }
        None if !q.only_token() => {
            return Err(AppError::BadRequest(Malformed::FlowOnlyParams.into()));
        }
        None => {}
    }
    let monitor = inner.monitor.clone();
    let closing = feed_closing(&state, &token);
    let cfg = inner.feed;
    // Taken before the upgrade, so a burst of connections cannot overshoot the limits.
    let slot = inner.feed_slots.take(&human, &cfg);
    let access = state.access_of(&human);
    let base = inner.base_task.clone();
    Ok(ws.on_upgrade(move |socket| async move {
        let (mut sink, stream) = socket.split();
        let end = match slot {
            Ok(_slot) => {
                let viewer = Viewer {
                    id: &human,
                    access,
                    base: Some(&base),
                };
                run_feed(sink, stream, &monitor, viewer, cfg, closing).await
            }
            Err(why) => {
                let bye = Message::Close(Some(CloseFrame {
                    code: close_code::AGAIN,
                    reason: why.to_string().into(),
                }));
                let _ = tokio::time::timeout(cfg.send_timeout, sink.send(bye)).await;
                FeedEnd::Refused(why.to_string())
            }
        };
        tracing::debug!(human = %human, ?end, "websocket feed ended");
    }))
}

/// 403 when a browser (which always sends `Origin`) opens the socket from a page whose origin
/// is not allowed. Clients that send no `Origin` are not browsers and are let through (the
/// token still guards them). A standing-by node checks its own origins with it too.
pub fn check_origin(headers: &HeaderMap, allowed: &[String]) -> Result<(), AppError> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("").trim_end_matches('/');
    let ok = allowed
        .iter()
        .any(|a| a == "*" || a.trim_end_matches('/').eq_ignore_ascii_case(origin));
    if ok {
        Ok(())
    } else {
        let origin = origin.to_owned();
        Err(AppError::Forbidden(
            Denied::OriginNotAllowed { origin }.into(),
        ))
    }
}

/// Who a feed is for: the person, their access, and the team's base task.
#[derive(Clone, Copy)]
pub struct Viewer<'a> {
    pub id: &'a AgentId,
    pub access: Access,
    pub base: Option<&'a cohort_core::ids::TaskId>,
}

/// Streams the monitor to `viewer` until it leaves, stalls, or the server closes.
///
/// It subscribes *before* taking the snapshot and drops events whose version the snapshot
/// already covers, so nothing is lost between the two and nothing arrives twice.
pub async fn run_feed<S, R, E>(
    sink: S,
    incoming: R,
    monitor: &Monitor,
    viewer: Viewer<'_>,
    cfg: FeedConfig,
    closing: watch::Receiver<Option<Closing>>,
) -> FeedEnd
where
    S: Sink<Message> + Unpin,
    R: Stream<Item = Result<Message, E>> + Unpin,
{
    let events = monitor.subscribe();
    feed_from(events, sink, incoming, monitor, viewer, cfg, closing).await
}

/// An answer being written, sent on to a viewer who sees its step.
async fn pass_writing<S: Sink<Message> + Unpin>(
    sink: &mut S,
    w: &cohort_runtime::monitor::Writing,
    monitor: &Monitor,
    view: &View,
    cfg: FeedConfig,
) -> Result<(), FeedEnd> {
    if *view != View::All && !monitor.read(|s| view.sees_step(s, &w.step_id)) {
        return Ok(());
    }
    let text = Utf8Bytes::try_from(w.json().clone()).unwrap_or_default();
    send(sink, text, cfg).await
}

/// `run_feed` from a subscription taken before this call: events in it that the snapshot
/// already holds are skipped.
async fn feed_from<S, R, E>(
    mut events: FeedReceiver,
    mut sink: S,
    mut incoming: R,
    monitor: &Monitor,
    who: Viewer<'_>,
    cfg: FeedConfig,
    mut closing: watch::Receiver<Option<Closing>>,
) -> FeedEnd
where
    S: Sink<Message> + Unpin,
    R: Stream<Item = Result<Message, E>> + Unpin,
{
    let (mut seen, mut view) = match send_snapshot(&mut sink, monitor, who, cfg).await {
        Ok(v) => v,
        Err(end) => return end,
    };
    let mut last_frame = tokio::time::Instant::now();
    let mut writing = monitor.subscribe_writing();
    let mut keepalive = Keepalive::new(cfg.ping);
    loop {
        tokio::select! {
            // An answer being written: passed on as it is, never batched or replayed (the
            // step's result replaces it; a frame missed is only a glimpse missed).
            w = writing.recv() => match w {
                Ok(w) => {
                    if let Err(end) = pass_writing(&mut sink, &w, monitor, &view, cfg).await {
                        return end;
                    }
                }
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return FeedEnd::MonitorGone,
            },
            ev = events.recv() => {
                let first = match ev {
                    Ok(ev) => Some(ev),
                    Err(RecvError::Lagged(_)) => None,
                    Err(RecvError::Closed) => return FeedEnd::MonitorGone,
                };
                // Let what follows soon join this frame (see `frame_interval`).
                tokio::time::sleep_until(last_frame + cfg.frame_interval).await;
                let (mut batch, lagged) = frame_batch(first, &mut events, cfg);
                // A member who joined a task (or left one that left memory) needs its whole
                // state, not only the changes from now on: a fresh snapshot, as after a lag.
                let regrown = view != View::All
                    && monitor.read(|s| View::of(who.id, who.access, who.base, s)) != view;
                if lagged || regrown {
                    tracing::debug!(lagged, "sending a websocket client a fresh snapshot");
                    // Start again from the newest event rather than wading through the backlog.
                    events = events.resubscribe();
                    (seen, view) = match send_snapshot(&mut sink, monitor, who, cfg).await {
                        Ok(v) => v,
                        Err(end) => return end,
                    };
                    continue;
                }
                keep_visible(&mut batch, seen, who.id, &view, monitor);
                if let Some(last) = batch.last() {
                    seen = last.event.version;
                    if let Err(end) = send(&mut sink, events_frame(&batch), cfg).await {
                        return end;
                    }
                    last_frame = tokio::time::Instant::now();
                }
            },
            msg = incoming.next() => match msg {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return FeedEnd::ClientGone,
                // Pings are answered by the socket itself; the feed takes no commands.
                Some(Ok(_)) => keepalive.heard(),
            },
            ping = keepalive.due() => {
                if let Err(end) = keepalive_step(&mut sink, ping, cfg).await {
                    return end;
                }
            },
            why = closed(&mut closing) => return close(&mut sink, why, cfg).await,
        }
    }
}

/// A frame's events: `first` (None: the feed lagged) and whatever else is waiting, up to the
/// frame's size; true if the feed lagged.
fn frame_batch(
    first: Option<Arc<Published>>,
    events: &mut FeedReceiver,
    cfg: FeedConfig,
) -> (Vec<Arc<Published>>, bool) {
    let mut lagged = first.is_none();
    let mut batch: Vec<_> = first.into_iter().collect();
    let mut bytes = batch.first().map_or(0, |p| p.json().len());
    while !lagged && batch.len() < cfg.max_batch && bytes < FRAME_BYTES {
        match events.try_recv() {
            Ok(ev) => {
                bytes += ev.json().len();
                batch.push(ev);
            }
            Err(TryRecvError::Lagged(_)) => lagged = true,
            Err(TryRecvError::Empty | TryRecvError::Closed) => break,
        }
    }
    (batch, lagged)
}

/// Keeps of `batch` what `viewer` has not had yet (after version `seen`) and may see: not
/// another person's private changes, and with a member's view only what it shows.
fn keep_visible(
    batch: &mut Vec<Arc<Published>>,
    seen: u64,
    viewer: &AgentId,
    view: &View,
    monitor: &Monitor,
) {
    batch.retain(|p| {
        p.event.version > seen
            && p.event
                .change
                .private_to()
                .is_none_or(|owner| owner == viewer)
    });
    if *view != View::All {
        monitor.read(|s| batch.retain(|p| view.sees_change(s, &p.event.change)));
    }
}

/// Tells the client why its feed closes (as far as it still listens), then ends the feed.
async fn close<S: Sink<Message> + Unpin>(sink: &mut S, why: Closing, cfg: FeedConfig) -> FeedEnd {
    let (code, reason, end) = match why {
        Closing::SessionEnded => (
            close_code::POLICY,
            "the session ended (logout or expiry): log in again",
            FeedEnd::SessionEnded,
        ),
        Closing::ServerDown => (
            close_code::AWAY,
            "the server is shutting down",
            FeedEnd::ServerClosing,
        ),
    };
    let bye = Message::Close(Some(CloseFrame {
        code,
        reason: reason.into(),
    }));
    let _ = tokio::time::timeout(cfg.send_timeout, sink.send(bye)).await;
    end
}

/// A feed's pings to its client, and when it last heard from it ([`FeedConfig::ping`]): a
/// connection that broke without a close (a laptop shut, a network cut) sends nothing more,
/// and is let go after three pings instead of holding its feed for ever.
pub(super) struct Keepalive {
    every: Duration,
    ticks: tokio::time::Interval,
    heard: tokio::time::Instant,
}

/// What is due: a ping, or the end of a client that has been silent for three.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Ping {
    Send,
    Silent,
}

impl Keepalive {
    pub(super) fn new(every: Duration) -> Keepalive {
        let now = tokio::time::Instant::now();
        let mut ticks = tokio::time::interval_at(now + every, every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Keepalive {
            every,
            ticks,
            heard: now,
        }
    }

    /// The client sent something (a pong, a ping, anything).
    pub(super) fn heard(&mut self) {
        self.heard = tokio::time::Instant::now();
    }

    /// Waits for the next ping, and says whether the client is silent by then.
    pub(super) async fn due(&mut self) -> Ping {
        self.ticks.tick().await;
        if self.heard.elapsed() >= 3 * self.every {
            Ping::Silent
        } else {
            Ping::Send
        }
    }
}

/// Sends a ping, or closes a silent client's socket (code 1001) and says it ended.
pub(super) async fn keepalive_step<S: Sink<Message> + Unpin>(
    sink: &mut S,
    ping: Ping,
    cfg: FeedConfig,
) -> Result<(), FeedEnd> {
    let frame = match ping {
        Ping::Send => Message::Ping(Default::default()),
        Ping::Silent => Message::Close(Some(CloseFrame {
            code: close_code::AWAY,
            reason: "nothing heard from the client for three pings".into(),
        })),
    };
    let sent = tokio::time::timeout(cfg.send_timeout, sink.send(frame)).await;
    match (ping, sent) {
        (Ping::Silent, _) => Err(FeedEnd::Silent),
        (Ping::Send, Ok(Ok(()))) => Ok(()),
        (Ping::Send, Ok(Err(_))) => Err(FeedEnd::SendFailed),
        (Ping::Send, Err(_)) => Err(FeedEnd::Stalled),
    }
}

/// Why a feed must close (sent on its `closing` channel; `None` while it may stay open).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closing {
    ServerDown,
    SessionEnded,
}

/// Resolves once the feed must close, with why (the server going, if the sender is gone).
async fn closed(closing: &mut watch::Receiver<Option<Closing>>) -> Closing {
    // The guard `wait_for` returns is not Send: copy the value out before anything is awaited.
    match closing.wait_for(Option::is_some).await {
        Ok(v) => v.unwrap_or(Closing::ServerDown),
        Err(_) => Closing::ServerDown,
    }
}

/// The closing channel of one feed opened with `token`: set when the server shuts down, when
/// the session is logged out, or when it expires. The watcher ends with the feed.
pub(super) fn feed_closing(state: &ApiState, token: &str) -> watch::Receiver<Option<Closing>> {
    let (tx, rx) = watch::channel(None);
    let mut server = state.inner.closing.subscribe();
    let mut ended = state.inner.sessions.watch_ended();
    let expires_in = state
        .inner
        .sessions
        .expires_at(token)
        .map(|at| (at - chrono::Utc::now().timestamp_millis()).max(0) as u64)
        .unwrap_or(0);
    let (state, token) = (state.clone(), token.to_owned());
    tokio::spawn(async move {
        let expiry = tokio::time::sleep(std::time::Duration::from_millis(expires_in));
        tokio::pin!(expiry);
        let why = loop {
            tokio::select! {
                r = server.wait_for(|c| *c) => {
                    let _ = r.map(|_| ());
                    break Closing::ServerDown;
                }
                r = ended.changed() => {
                    if r.is_err() || state.inner.sessions.human(&token).is_none() {
                        break Closing::SessionEnded;
                    }
                }
                () = &mut expiry => break Closing::SessionEnded,
                () = tx.closed() => return,
            }
        };
        tx.send_replace(Some(why));
    });
    rx
}

/// Sends the snapshot frame `{"type": "snapshot", "version", "states"}`: the monitor's
/// shared one for an operator, one of what they see for a member. Returns its version
/// (every event up to it is in it) and the view it was made for.
async fn send_snapshot<S: Sink<Message> + Unpin>(
    sink: &mut S,
    monitor: &Monitor,
    who: Viewer<'_>,
    cfg: FeedConfig,
) -> Result<(u64, View), FeedEnd> {
    let (version, view, frame) = match who.access {
        // One frame per version, shared by every operator's feed.
        Access::Operator => {
            let (version, frame) = monitor.snapshot_json();
            (version, View::All, frame)
        }
        // A member's own: only a few are built at once (each is a copy of what they see).
        Access::Member => {
            let _building = tokio::time::timeout(cfg.send_timeout, monitor.snapshot_send())
                .await
                .map_err(|_| FeedEnd::Stalled)?
                .ok_or(FeedEnd::MonitorGone)?;
            member_snapshot(monitor, who)
        }
    };
    let text = Utf8Bytes::try_from(frame).map_err(|_| FeedEnd::MonitorGone)?;
    send(sink, text, cfg).await?;
    Ok((version, view))
}

/// The snapshot frame of what a member sees now: its version, their view, the frame.
fn member_snapshot(monitor: &Monitor, who: Viewer<'_>) -> (u64, View, bytes::Bytes) {
    monitor.read_at(|s, version| {
        let view = View::of(who.id, who.access, who.base, s);
        let body = serde_json::json!({
            "type": "snapshot",
            "version": version,
            "states": view.all_json(s),
        });
        let frame = serde_json::to_vec(&body).unwrap_or_default();
        (version, view, frame.into())
    })
}

/// `{"type": "events", "events": [...]}` from the events' shared JSON.
fn events_frame(batch: &[Arc<Published>]) -> Utf8Bytes {
    let len: usize = batch.iter().map(|p| p.json().len() + 1).sum();
    let mut out = Vec::with_capacity(len + 32);
    out.extend_from_slice(br#"{"type":"events","events":["#);
    for (i, p) in batch.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(p.json());
    }
    out.extend_from_slice(b"]}");
    // Made of serde_json's own output, so it is UTF-8.
    Utf8Bytes::try_from(out).unwrap_or_default()
}

async fn send<S: Sink<Message> + Unpin>(
    sink: &mut S,
    text: Utf8Bytes,
    cfg: FeedConfig,
) -> Result<(), FeedEnd> {
    match tokio::time::timeout(cfg.send_timeout, sink.send(Message::Text(text))).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(FeedEnd::SendFailed),
        Err(_) => Err(FeedEnd::Stalled),
    }
}

#[cfg(test)]
mod tests;
