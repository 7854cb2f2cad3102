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

use super::error::ApiQuery;
use super::{ApiState, AppError};
use crate::ids::AgentId;
use crate::monitor::{Monitor, Published};
use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocketUpgrade, close_code};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use futures::{Sink, SinkExt, Stream, StreamExt};
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};
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
}

impl Default for FeedConfig {
    fn default() -> Self {
        FeedConfig::from(crate::config::Feeds::default())
    }
}

impl From<crate::config::Feeds> for FeedConfig {
    fn from(f: crate::config::Feeds) -> Self {
        FeedConfig {
            send_timeout: f.send_timeout,
            max_per_human: f.per_human,
            max_total: f.total,
            max_batch: 512,
            frame_interval: f.frame_interval,
        }
    }
}

/// Why a feed ended.
#[derive(Debug, PartialEq, Eq)]
pub enum FeedEnd {
    /// The client closed the socket or it broke.
    ClientGone,
    /// A frame waited longer than `send_timeout`.
    Stalled,
    /// Sending failed (the connection is gone).
    SendFailed,
    /// The server is shutting down.
    ServerClosing,
    /// The monitor (the team) is gone.
    MonitorGone,
    /// Over the connection limits: refused with this reason.
    Refused(String),
}

#[derive(Deserialize)]
pub struct WsQuery {
    pub token: Option<String>,
}

/// `GET /ws?token=…`. Browsers cannot set headers on a websocket, so the token comes in the
/// query; the Origin check keeps other sites' pages from opening the feed with it.
pub async fn upgrade(
    State(state): State<ApiState>,
    headers: HeaderMap,
    ApiQuery(q): ApiQuery<WsQuery>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, AppError> {
    let inner = &state.inner;
    check_origin(&headers, &inner.allowed_origins)?;
    let token = q
        .token
        .ok_or_else(|| AppError::Unauthorized("add `?token=<token>` to the URL".into()))?;
    let human = inner
        .sessions
        .human(&token)
        .ok_or_else(|| AppError::Unauthorized("the token is invalid or expired".into()))?;
    let ws = ws
        .map_err(|r| AppError::Rejected(r.status(), r.body_text()))?
        // The feed takes no commands: refuse anything but small control frames from clients.
        .max_message_size(4 * 1024)
        .max_frame_size(4 * 1024);
    let monitor = inner.monitor.clone();
    let closing = inner.closing.subscribe();
    let cfg = inner.feed;
    // Taken before the upgrade, so a burst of connections cannot overshoot the limits.
    let slot = inner.feed_slots.take(&human, &cfg);
    Ok(ws.on_upgrade(move |socket| async move {
        let (mut sink, stream) = socket.split();
        let end = match slot {
            Ok(_slot) => run_feed(sink, stream, &monitor, &human, cfg, closing).await,
            Err(why) => {
                let bye = Message::Close(Some(CloseFrame {
                    code: close_code::AGAIN,
                    reason: why.clone().into(),
                }));
                let _ = tokio::time::timeout(cfg.send_timeout, sink.send(bye)).await;
                FeedEnd::Refused(why)
            }
        };
        tracing::debug!(human = %human, ?end, "websocket feed ended");
    }))
}

/// 403 when a browser (which always sends `Origin`) opens the socket from a page whose origin
/// is not allowed. Clients that send no `Origin` are not browsers and are let through (the
/// token still guards them).
fn check_origin(headers: &HeaderMap, allowed: &[String]) -> Result<(), AppError> {
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
        Err(AppError::Forbidden(format!(
            "websocket connections from origin `{origin}` are not allowed"
        )))
    }
}

/// Streams the monitor to `viewer` until it leaves, stalls, or the server closes.
///
/// It subscribes *before* taking the snapshot and drops events whose version the snapshot
/// already covers, so nothing is lost between the two and nothing arrives twice.
pub async fn run_feed<S, R, E>(
    sink: S,
    incoming: R,
    monitor: &Monitor,
    viewer: &AgentId,
    cfg: FeedConfig,
    closing: watch::Receiver<bool>,
) -> FeedEnd
where
    S: Sink<Message> + Unpin,
    R: Stream<Item = Result<Message, E>> + Unpin,
{
    let events = monitor.subscribe();
    feed_from(events, sink, incoming, monitor, viewer, cfg, closing).await
}

/// `run_feed` from a subscription taken before this call: events in it that the snapshot
/// already holds are skipped.
async fn feed_from<S, R, E>(
    mut events: broadcast::Receiver<Arc<Published>>,
    mut sink: S,
    mut incoming: R,
    monitor: &Monitor,
    viewer: &AgentId,
    cfg: FeedConfig,
    mut closing: watch::Receiver<bool>,
) -> FeedEnd
where
    S: Sink<Message> + Unpin,
    R: Stream<Item = Result<Message, E>> + Unpin,
{
    let mut seen = match send_snapshot(&mut sink, monitor, cfg).await {
        Ok(v) => v,
        Err(end) => return end,
    };
    let mut last_frame = tokio::time::Instant::now();
    loop {
        tokio::select! {
            ev = events.recv() => {
                let mut batch = Vec::new();
                let mut lagged = false;
                match ev {
                    Ok(ev) => batch.push(ev),
                    Err(RecvError::Lagged(_)) => lagged = true,
                    Err(RecvError::Closed) => return FeedEnd::MonitorGone,
                }
                // Let what follows soon join this frame (see `frame_interval`).
                tokio::time::sleep_until(last_frame + cfg.frame_interval).await;
                // Whatever else is waiting goes in the same frame.
                while !lagged && batch.len() < cfg.max_batch {
                    match events.try_recv() {
                        Ok(ev) => batch.push(ev),
                        Err(TryRecvError::Lagged(_)) => lagged = true,
                        Err(TryRecvError::Empty | TryRecvError::Closed) => break,
                    }
                }
                if lagged {
                    tracing::debug!("websocket client lagged; sending a fresh snapshot");
                    // Start again from the newest event rather than wading through the backlog.
                    events = events.resubscribe();
                    seen = match send_snapshot(&mut sink, monitor, cfg).await {
                        Ok(v) => v,
                        Err(end) => return end,
                    };
                    continue;
                }
                batch.retain(|p| {
                    p.event.version > seen
                        && p.event.change.private_to().is_none_or(|owner| owner == viewer)
                });
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
                Some(Ok(_)) => {}
            },
            () = shutting_down(&mut closing) => {
                let bye = Message::Close(Some(CloseFrame {
                    code: close_code::AWAY,
                    reason: "the server is shutting down".into(),
                }));
                let _ = tokio::time::timeout(cfg.send_timeout, sink.send(bye)).await;
                return FeedEnd::ServerClosing;
            }
        }
    }
}

/// Resolves once the server shuts down (or the state that signals it is gone).
async fn shutting_down(closing: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not Send: drop it before anything else is awaited.
    let _ = closing.wait_for(|c| *c).await.is_ok();
}

/// Sends the monitor's shared snapshot frame `{"type": "snapshot", "version", "states"}`;
/// returns its version. Every event up to that version is in it.
async fn send_snapshot<S: Sink<Message> + Unpin>(
    sink: &mut S,
    monitor: &Monitor,
    cfg: FeedConfig,
) -> Result<u64, FeedEnd> {
    let (version, frame) = monitor.snapshot_json();
    let text = Utf8Bytes::try_from(frame).map_err(|_| FeedEnd::MonitorGone)?;
    send(sink, text, cfg).await?;
    Ok(version)
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
mod tests {
    use super::*;
    use crate::event::{Change, TaskChange};
    use crate::state::TaskState;
    use futures::channel::mpsc;
    use serde_json::Value;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    fn cfg(ms: u64) -> FeedConfig {
        FeedConfig {
            send_timeout: Duration::from_millis(ms),
            ..FeedConfig::default()
        }
    }

    fn me() -> AgentId {
        "alice".into()
    }

    /// A change that puts a task `id` with `n` in its summary into the states.
    fn task(id: &str, n: u64) -> Vec<Change> {
        let mut t = TaskState::new(id.into(), "n".into(), "i".into(), "m".into());
        t.task_summary = Some(n.to_string());
        vec![Change::Task(TaskChange::Created { task: t })]
    }

    /// The events of a frame, or the frame itself if it is a snapshot.
    fn events(f: &Value) -> Vec<Value> {
        match f["type"].as_str() {
            Some("events") => f["events"].as_array().unwrap().clone(),
            _ => vec![f.clone()],
        }
    }

    fn text(m: Message) -> Value {
        match m {
            Message::Text(t) => serde_json::from_str(t.as_str()).unwrap(),
            other => panic!("not a text frame: {other:?}"),
        }
    }

    /// A client that never reads: every send stays pending.
    struct Stuck;
    impl Sink<Message> for Stuck {
        type Error = ();
        fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
            Poll::Pending
        }
        fn start_send(self: Pin<&mut Self>, _: Message) -> Result<(), ()> {
            Ok(())
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
            Poll::Pending
        }
        fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn silent() -> futures::stream::Pending<Result<Message, ()>> {
        futures::stream::pending()
    }

    #[tokio::test]
    async fn a_snapshot_comes_first_then_each_later_event_once_in_order() {
        let m = Monitor::new(64);
        m.publish(task("t1", 1));
        m.publish(task("t2", 2));
        let (tx, mut rx) = mpsc::channel(64);
        let (_close, closing) = watch::channel(false);
        let feed = tokio::spawn({
            let m = m.clone();
            async move { run_feed(tx, silent(), &m, &me(), cfg(5_000), closing).await }
        });
        let snap = text(rx.next().await.unwrap());
        assert_eq!(snap["type"], "snapshot");
        assert_eq!(snap["version"], 2);
        assert_eq!(snap["states"]["task"]["t1"]["task_summary"], "1");
        assert_eq!(snap["states"]["task"]["t2"]["task_summary"], "2");
        for i in 3..=6 {
            m.publish(task(&format!("t{i}"), i));
        }
        let mut got = Vec::new();
        while got.len() < 4 {
            got.extend(events(&text(rx.next().await.unwrap())));
        }
        for (ev, want) in got.iter().zip(3..=6u64) {
            assert_eq!(
                (ev["kind"].as_str(), ev["op"].as_str()),
                (Some("task"), Some("created"))
            );
            assert_eq!(ev["version"], want);
            assert_eq!(ev["task"]["task_summary"], want.to_string());
        }
        feed.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn changes_within_the_frame_interval_go_out_in_one_frame() {
        let m = Monitor::new(64);
        let (tx, mut rx) = mpsc::channel(64);
        let (_close, closing) = watch::channel(false);
        let cfg = FeedConfig {
            frame_interval: Duration::from_millis(200),
            ..cfg(5_000)
        };
        let feed = tokio::spawn({
            let m = m.clone();
            async move { run_feed(tx, silent(), &m, &me(), cfg, closing).await }
        });
        assert_eq!(text(rx.next().await.unwrap())["type"], "snapshot");
        m.publish(task("t1", 1));
        // The feed has the first change by now, and holds it for the rest of the interval.
        tokio::time::sleep(Duration::from_millis(50)).await;
        m.publish(task("t2", 2));
        m.publish(task("t3", 3));
        let versions: Vec<_> = events(&text(rx.next().await.unwrap()))
            .iter()
            .map(|e| e["version"].as_u64().unwrap())
            .collect();
        assert_eq!(versions, [1, 2, 3]);
        feed.abort();
    }

    #[tokio::test]
    async fn events_already_in_the_snapshot_are_not_sent_again() {
        let m = Monitor::new(64);
        // Subscribed first, as run_feed does: these three are both queued and in the snapshot.
        let events_rx = m.subscribe();
        for i in 1..=3 {
            m.publish(task(&format!("t{i}"), i));
        }
        let (tx, mut rx) = mpsc::channel(64);
        let (_close, closing) = watch::channel(false);
        let feed = tokio::spawn({
            let m = m.clone();
            async move { feed_from(events_rx, tx, silent(), &m, &me(), cfg(5_000), closing).await }
        });
        let snap = text(rx.next().await.unwrap());
        assert_eq!(snap["version"], 3);
        assert_eq!(snap["states"]["task"].as_object().unwrap().len(), 3);
        m.publish(task("t4", 4));
        let ev = events(&text(rx.next().await.unwrap()));
        assert_eq!(ev.len(), 1);
        assert_eq!(
            ev[0]["version"], 4,
            "the first event after the snapshot comes next"
        );
        feed.abort();
    }

    #[tokio::test]
    async fn a_lagging_client_gets_a_fresh_snapshot_instead_of_the_missed_events() {
        let m = Monitor::new(16);
        // Room for the snapshot and a frame; then the feed waits on the client.
        let (tx, mut rx) = mpsc::channel(1);
        let (_close, closing) = watch::channel(false);
        let feed = tokio::spawn({
            let m = m.clone();
            async move { run_feed(tx, silent(), &m, &me(), cfg(5_000), closing).await }
        });
        let first = text(rx.next().await.unwrap());
        assert_eq!(
            (first["type"].as_str(), first["version"].as_u64()),
            (Some("snapshot"), Some(0))
        );
        for i in 1..=200u64 {
            m.publish(task(&format!("t{i}"), i));
        }
        let mut frames = vec![first];
        loop {
            let f = text(rx.next().await.unwrap());
            let done = f["type"] == "snapshot" && f["version"] == 200
                || events(&f).last().is_some_and(|e| e["version"] == 200);
            frames.push(f);
            if done {
                break;
            }
        }
        let snapshots = frames.iter().filter(|f| f["type"] == "snapshot").count();
        assert!(snapshots >= 2, "the lag was answered with a new snapshot");
        let replayed: usize = frames
            .iter()
            .filter(|f| f["type"] == "events")
            .map(|f| events(f).len())
            .sum();
        assert!(replayed < 60, "the missed events were not replayed");
        // Nothing is lost: the last snapshot and the events after it hold every task.
        let last = frames
            .iter()
            .rposition(|f| f["type"] == "snapshot")
            .unwrap();
        let mut tasks = frames[last]["states"]["task"].as_object().unwrap().len();
        let mut version = frames[last]["version"].as_u64().unwrap();
        for f in &frames[last + 1..] {
            for e in events(f) {
                assert!(e["version"].as_u64().unwrap() > version, "in order, once");
                version = e["version"].as_u64().unwrap();
                tasks += 1;
            }
        }
        assert_eq!(tasks, 200);
        feed.abort();
    }

    #[tokio::test]
    async fn events_waiting_for_a_client_go_out_in_one_frame() {
        let m = Monitor::new(1024);
        let (tx, mut rx) = mpsc::channel(1);
        let (_close, closing) = watch::channel(false);
        let feed = tokio::spawn({
            let m = m.clone();
            async move { run_feed(tx, silent(), &m, &me(), cfg(5_000), closing).await }
        });
        text(rx.next().await.unwrap());
        for i in 1..=50u64 {
            m.publish(task(&format!("t{i}"), i));
        }
        let mut frames = 0;
        let mut n = 0;
        while n < 50 {
            n += events(&text(rx.next().await.unwrap())).len();
            frames += 1;
        }
        assert!(frames < 50, "{frames} frames for 50 events");
        feed.abort();
    }

    #[tokio::test]
    async fn a_persons_private_changes_reach_only_their_own_feed() {
        use crate::event::AgentChange;
        let m = Monitor::new(64);
        let (tx, mut rx) = mpsc::channel(64);
        let (_close, closing) = watch::channel(false);
        let feed = tokio::spawn({
            let m = m.clone();
            async move { run_feed(tx, silent(), &m, &me(), cfg(5_000), closing).await }
        });
        text(rx.next().await.unwrap());
        let notice = |who: &str| {
            vec![Change::Agent(AgentChange::Notice {
                agent_id: who.into(),
                text: format!("for {who}"),
            })]
        };
        m.publish(notice("bob"));
        m.publish(notice("alice"));
        m.publish(task("t", 1));
        let mut got = Vec::new();
        while got.len() < 2 {
            got.extend(events(&text(rx.next().await.unwrap())));
        }
        assert_eq!(got[0]["text"], "for alice");
        assert_eq!(got[1]["op"], "created");
        feed.abort();
    }

    #[tokio::test]
    async fn a_stalled_client_is_dropped_and_never_blocks_publishing() {
        let m = Monitor::new(16);
        let (_close, closing) = watch::channel(false);
        let feed = tokio::spawn({
            let m = m.clone();
            async move { run_feed(Stuck, silent(), &m, &me(), cfg(50), closing).await }
        });
        for i in 0..1_000 {
            m.publish(task(&format!("t{i}"), i));
        }
        assert_eq!(feed.await.unwrap(), FeedEnd::Stalled);
    }

    #[tokio::test]
    async fn the_feed_ends_when_the_client_closes_or_the_server_shuts_down() {
        let m = Monitor::new(16);
        let (tx, _rx) = mpsc::channel(8);
        let (_close, closing) = watch::channel(false);
        let incoming = futures::stream::iter([Ok::<_, ()>(Message::Close(None))]);
        assert_eq!(
            run_feed(tx, incoming, &m, &me(), cfg(1_000), closing).await,
            FeedEnd::ClientGone
        );
        let (tx, _rx) = mpsc::channel(8);
        let (close, closing) = watch::channel(false);
        close.send_replace(true);
        assert_eq!(
            run_feed(tx, silent(), &m, &me(), cfg(1_000), closing).await,
            FeedEnd::ServerClosing
        );
    }

    #[test]
    fn origins_must_be_listed_when_present() {
        let allowed = vec!["http://localhost:8080".to_owned()];
        let mut h = HeaderMap::new();
        assert!(
            check_origin(&h, &allowed).is_ok(),
            "no Origin: not a browser"
        );
        h.insert(header::ORIGIN, "http://localhost:8080".parse().unwrap());
        assert!(check_origin(&h, &allowed).is_ok());
        h.insert(header::ORIGIN, "http://evil.example".parse().unwrap());
        assert!(check_origin(&h, &allowed).is_err());
        assert!(check_origin(&h, &["*".to_owned()]).is_ok());
    }
}
