//! The websocket monitor feed, `GET /ws?token=…`: a snapshot of every state, then each
//! `StateEvent` as it happens.
//!
//! Backpressure: the runtime never waits for a client. Events reach a feed through the
//! monitor's bounded broadcast channel, whose sender never blocks; a feed that falls behind
//! gets `Lagged` and is sent a fresh snapshot instead of the events it missed. Each frame is
//! sent with a timeout, and a client that accepts nothing for that long is disconnected.
//!
//! The feed loop (`run_feed`) is generic over the socket's `Sink`/`Stream` halves so it can be
//! tested without a socket.

use super::error::ApiQuery;
use super::{ApiState, AppError};
use crate::monitor::{Monitor, StateEvent};
use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocketUpgrade, close_code};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use futures::{Sink, SinkExt, Stream, StreamExt};
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::watch;

/// Settings of every websocket feed.
#[derive(Clone, Copy, Debug)]
pub struct FeedConfig {
    /// How long one frame may wait for the client before the client counts as stalled and
    /// is disconnected.
    pub send_timeout: Duration,
}

impl Default for FeedConfig {
    fn default() -> Self {
        FeedConfig {
            send_timeout: Duration::from_secs(10),
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
    Ok(ws.on_upgrade(move |socket| async move {
        let (sink, stream) = socket.split();
        let end = run_feed(sink, stream, &monitor, cfg, closing).await;
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

/// Streams the monitor to one client until it leaves, stalls, or the server closes.
///
/// It subscribes *before* taking the snapshot and drops events whose version the snapshot
/// already covers, so nothing is lost between the two and nothing arrives twice.
pub async fn run_feed<S, R, E>(
    sink: S,
    incoming: R,
    monitor: &Monitor,
    cfg: FeedConfig,
    closing: watch::Receiver<bool>,
) -> FeedEnd
where
    S: Sink<Message> + Unpin,
    R: Stream<Item = Result<Message, E>> + Unpin,
{
    let events = monitor.subscribe();
    feed_from(events, sink, incoming, monitor, cfg, closing).await
}

/// `run_feed` from a subscription taken before this call: events in it that the snapshot
/// already holds are skipped.
async fn feed_from<S, R, E>(
    mut events: broadcast::Receiver<StateEvent>,
    mut sink: S,
    mut incoming: R,
    monitor: &Monitor,
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
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Ok(ev) if ev.version <= seen => {}
                Ok(ev) => {
                    seen = ev.version;
                    if let Err(end) = send(&mut sink, event_frame(&ev), cfg).await {
                        return end;
                    }
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::debug!(missed, "websocket client lagged; sending a fresh snapshot");
                    // Start again from the newest event rather than wading through the backlog.
                    events = events.resubscribe();
                    seen = match send_snapshot(&mut sink, monitor, cfg).await {
                        Ok(v) => v,
                        Err(end) => return end,
                    };
                }
                Err(RecvError::Closed) => return FeedEnd::MonitorGone,
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

/// Sends `{"type": "snapshot", "version", "states"}`; returns its version. The version is read
/// before the states, so every event up to it is in the snapshot (some later ones may be too;
/// they are sent again as events, in order, and applying them changes nothing).
async fn send_snapshot<S: Sink<Message> + Unpin>(
    sink: &mut S,
    monitor: &Monitor,
    cfg: FeedConfig,
) -> Result<u64, FeedEnd> {
    let version = monitor.version();
    let frame = json!({ "type": "snapshot", "version": version, "states": monitor.all() });
    send(sink, frame.to_string(), cfg).await?;
    Ok(version)
}

fn event_frame(ev: &StateEvent) -> String {
    json!({
        "type": "event",
        "kind": ev.kind,
        "id": ev.id,
        "version": ev.version,
        "state": ev.state,
    })
    .to_string()
}

async fn send<S: Sink<Message> + Unpin>(
    sink: &mut S,
    text: String,
    cfg: FeedConfig,
) -> Result<(), FeedEnd> {
    match tokio::time::timeout(cfg.send_timeout, sink.send(Message::Text(text.into()))).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(FeedEnd::SendFailed),
        Err(_) => Err(FeedEnd::Stalled),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::StateKind;
    use futures::channel::mpsc;
    use serde_json::Value;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    fn cfg(ms: u64) -> FeedConfig {
        FeedConfig {
            send_timeout: Duration::from_millis(ms),
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
        m.publish(StateKind::Task, "t1", &json!({"n": 1}));
        m.publish(StateKind::Agent, "a1", &json!({"n": 2}));
        let (tx, mut rx) = mpsc::channel(64);
        let (_close, closing) = watch::channel(false);
        let feed = tokio::spawn({
            let m = m.clone();
            async move { run_feed(tx, silent(), &m, cfg(5_000), closing).await }
        });
        let snap = text(rx.next().await.unwrap());
        assert_eq!(snap["type"], "snapshot");
        assert_eq!(snap["version"], 2);
        assert_eq!(snap["states"]["task"]["t1"]["n"], 1);
        assert_eq!(snap["states"]["agent"]["a1"]["n"], 2);
        for i in 3..=6 {
            m.publish(StateKind::Step, &format!("s{i}"), &json!({"i": i}));
        }
        for want in 3..=6u64 {
            let ev = text(rx.next().await.unwrap());
            assert_eq!(ev["type"], "event");
            assert_eq!(ev["kind"], "step");
            assert_eq!(ev["version"], want);
            assert_eq!(ev["state"]["i"], want);
        }
        feed.abort();
    }

    #[tokio::test]
    async fn events_already_in_the_snapshot_are_not_sent_again() {
        let m = Monitor::new(64);
        // Subscribed first, as run_feed does: these three are both queued and in the snapshot.
        let events = m.subscribe();
        for i in 1..=3 {
            m.publish(StateKind::Step, "s", &json!({"i": i}));
        }
        let (tx, mut rx) = mpsc::channel(64);
        let (_close, closing) = watch::channel(false);
        let feed = tokio::spawn({
            let m = m.clone();
            async move { feed_from(events, tx, silent(), &m, cfg(5_000), closing).await }
        });
        let snap = text(rx.next().await.unwrap());
        assert_eq!(snap["version"], 3);
        assert_eq!(snap["states"]["step"]["s"]["i"], 3);
        m.publish(StateKind::Step, "s", &json!({"i": 4}));
        let ev = text(rx.next().await.unwrap());
        assert_eq!(
            ev["version"], 4,
            "the first event after the snapshot comes next"
        );
        feed.abort();
    }

    #[tokio::test]
    async fn a_lagging_client_gets_a_fresh_snapshot_instead_of_the_missed_events() {
        let m = Monitor::new(16);
        // Room for the snapshot and a few events; then the feed waits on the client.
        let (tx, mut rx) = mpsc::channel(2);
        let (_close, closing) = watch::channel(false);
        let feed = tokio::spawn({
            let m = m.clone();
            async move { run_feed(tx, silent(), &m, cfg(5_000), closing).await }
        });
        let first = text(rx.next().await.unwrap());
        assert_eq!(
            (first["type"].as_str(), first["version"].as_u64()),
            (Some("snapshot"), Some(0))
        );
        for i in 1..=200u64 {
            m.publish(StateKind::Step, "s", &json!({"i": i}));
        }
        let mut frames = vec![first];
        loop {
            let f = text(rx.next().await.unwrap());
            let done = f["type"] == "snapshot" && f["states"]["step"]["s"]["i"] == 200
                || f["type"] == "event" && f["version"] == 200;
            frames.push(f);
            if done {
                break;
            }
        }
        let snapshots = frames.iter().filter(|f| f["type"] == "snapshot").count();
        assert!(snapshots >= 2, "the lag was answered with a new snapshot");
        assert!(frames.len() < 60, "the missed events were not replayed");
        let versions: Vec<u64> = frames
            .iter()
            .filter(|f| f["type"] == "event")
            .map(|f| f["version"].as_u64().unwrap())
            .collect();
        assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
        feed.abort();
    }

    #[tokio::test]
    async fn a_stalled_client_is_dropped_and_never_blocks_publishing() {
        let m = Monitor::new(16);
        let (_close, closing) = watch::channel(false);
        let feed = tokio::spawn({
            let m = m.clone();
            async move { run_feed(Stuck, silent(), &m, cfg(50), closing).await }
        });
        for i in 0..1_000 {
            m.publish(StateKind::Step, "s", &json!({"i": i}));
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
            run_feed(tx, incoming, &m, cfg(1_000), closing).await,
            FeedEnd::ClientGone
        );
        let (tx, _rx) = mpsc::channel(8);
        let (close, closing) = watch::channel(false);
        close.send_replace(true);
        assert_eq!(
            run_feed(tx, silent(), &m, cfg(1_000), closing).await,
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
