//! One task's flow as the seeds name it, from the [`FlowHub`]: as server-sent events at
//! `GET /api/task/{id}/events` (`event: FLOW_START`, `id: …`, `data: {json}`), or on the
//! websocket with `/ws?token=…&format=flow&task={id}` (one text frame per event,
//! `{"type": "flow", "name", "id", "data"}`). A client that
//! reconnects with `Last-Event-ID` (or `?last_event_id=`) is sent what it missed; when that is
//! no longer held, a `stream_reset` event comes first and the whole flow follows again.
//! `?names=seed004` names the text and step events as seed 004 does (`agent_stream_chunk`,
//! `process_event`). The stream ends a little after the task does, when the server shuts down,
//! or when the person's session ends; it holds one of the person's feed slots meanwhile.

use super::error::{ApiPath, ApiQuery};
use super::flow_hub::{FlowHub, Following, Told};
use super::reason::{Limited, Malformed, Missing};
use super::ws::{Closing, feed_closing};
use super::{ApiState, AppError, Caller};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use cohort_core::event::flow::FlowEvent;
use cohort_core::ids::TaskId;
use futures::{Stream, StreamExt};
use serde::Deserialize;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// How long a stream stays open after its task ended, for the steps set aside with it.
pub const AFTER_THE_END: Duration = Duration::from_secs(2);

/// Which seed's names the events go by.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Names {
    /// Seed 000's FLOW_*/STEP_*/TEXT_ADD.
    #[default]
    Seed000,
    /// Seed 004's `agent_stream_chunk` and `process_event` where it names them.
    Seed004,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Only on the websocket: its token (browsers cannot set headers there).
    pub token: Option<String>,
    /// Only on the websocket: `flow`.
    pub format: Option<String>,
    /// Only on the websocket: the task to follow.
    task: Option<TaskId>,
    #[serde(default)]
    names: Names,
    /// For clients that cannot set headers: the `Last-Event-ID` they had.
    last_event_id: Option<String>,
}

/// A caller's way into one task's flow, checked: they may see the task, have a feed slot to
/// spare, and the hub follows it for them.
fn follow(
    state: &ApiState,
    human: &cohort_core::ids::AgentId,
    view: impl FnOnce(&cohort_core::event::States) -> bool,
    task: TaskId,
    names: Names,
    last: Option<&str>,
    token: &str,
) -> Result<(Telling, Following), AppError> {
    let inner = &state.inner;
    // What a member may not see answers as if it did not exist.
    if !inner.monitor.read(view) {
        return Err(AppError::NotFound(Missing::TaskInMemory { task }.into()));
    }
    let slot = inner
        .feed_slots
        .take(human, &inner.feed)
        .map_err(|why| AppError::TooManyRequests(Limited::FeedSlot(why).into(), 1))?;
    let hub = state.flow_hub();
    let following = hub.follow(&task, last).map_err(|e| match e {
        super::flow_hub::FollowError::NoSuchTask(task) => {
            AppError::NotFound(Missing::TaskInMemory { task }.into())
        }
        super::flow_hub::FollowError::TooMany => {
            let max = super::flow_hub::FOLLOWED_TASKS;
            AppError::TooManyRequests(Limited::TooManyFollowed { max }.into(), 5)
        }
    })?;
    let telling = Telling {
        hub,
        task,
        names,
        queued: VecDeque::new(),
        seq: 0,
        ended: false,
        closing: feed_closing(state, token),
        _slot: slot,
    };
    Ok((telling, following))
}

impl EventsQuery {
    /// Nothing but a token (the websocket's states feed).
    pub fn only_token(&self) -> bool {
        self.format.is_none()
            && self.task.is_none()
            && self.names == Names::default()
            && self.last_event_id.is_none()
    }
}

/// `GET /api/task/{id}/events`.
pub async fn task_events(
    State(state): State<ApiState>,
    caller: Caller,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> Result<Response, AppError> {
    if q.token.is_some() || q.format.is_some() || q.task.is_some() {
        return Err(AppError::BadRequest(Malformed::WebsocketOnlyParams.into()));
    }
    let task = TaskId::from(id.as_str());
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or(q.last_event_id);
    let token = super::bearer(&headers).unwrap_or_default().to_owned();
    let sees = |s: &cohort_core::event::States| caller.view(s).sees_task(&task);
    let (telling, following) = follow(
        &state,
        &caller.0,
        sees,
        task.clone(),
        q.names,
        last.as_deref(),
        &token,
    )?;
    let events = telling
        .start(following)
        .map(|item| Ok::<_, Infallible>(item.sse()));
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

/// `/ws?token=…&format=flow&task={id}[&names=…][&last_event_id=…]`: the same events on the
/// websocket, for `human` (whose token it is), one text frame each.
pub async fn over_websocket(
    state: &ApiState,
    human: cohort_core::ids::AgentId,
    token: &str,
    q: EventsQuery,
    ws: axum::extract::ws::WebSocketUpgrade,
) -> Result<Response, AppError> {
    use axum::extract::ws::{Message, Utf8Bytes};
    use futures::{SinkExt, StreamExt};
    let task = q
        .task
        .ok_or_else(|| AppError::BadRequest(Malformed::FlowNeedsTask.into()))?;
    let (access, base) = (state.access_of(&human), state.inner.base_task.clone());
    let sees = |s: &cohort_core::event::States| {
        super::access::View::of(&human, access, Some(&base), s).sees_task(&task)
    };
    let last = q.last_event_id.clone();
    let (telling, following) = follow(
        state,
        &human,
        sees,
        task.clone(),
        q.names,
        last.as_deref(),
        token,
    )?;
    let cfg = state.inner.feed;
    let send_timeout = cfg.send_timeout;
    Ok(ws.on_upgrade(move |socket| async move {
        let (mut sink, mut incoming) = socket.split();
        let events = telling.start(following);
        futures::pin_mut!(events);
        let mut keepalive = super::ws::Keepalive::new(cfg.ping);
        loop {
            tokio::select! {
                item = events.next() => {
                    let Some(item) = item else { break };
                    let frame = Message::Text(Utf8Bytes::from(item.frame()));
                    match tokio::time::timeout(send_timeout, sink.send(frame)).await {
                        Ok(Ok(())) => {}
                        _ => break,
                    }
                }
                // The client only closes (or goes): anything else it sends only says it is
                // there.
                msg = incoming.next() => match msg {
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                    Some(Ok(_)) => keepalive.heard(),
                },
                ping = keepalive.due() => {
                    if super::ws::keepalive_step(&mut sink, ping, cfg).await.is_err() {
                        return;
                    }
                },
            }
        }
        let _ = tokio::time::timeout(send_timeout, sink.send(Message::Close(None))).await;
        tracing::debug!(human = %human, task = %task, "flow feed ended");
    }))
}

/// What waits to be sent.
enum Queued {
    /// What the client had is no longer held: the whole flow follows again.
    Reset,
    Told(Arc<Told>),
}

/// One event as a transport sends it: its name (as the stream's `names` say), id and JSON.
pub struct Item {
    name: &'static str,
    id: Option<String>,
    json: bytes::Bytes,
}

impl Item {
    fn sse(&self) -> Event {
        let data = std::str::from_utf8(&self.json).unwrap_or("{}");
        let event = Event::default().event(self.name).data(data);
        match &self.id {
            Some(id) => event.id(id),
            None => event,
        }
    }

    fn frame(&self) -> String {
        let data = std::str::from_utf8(&self.json).unwrap_or("{}");
        let id = serde_json::to_string(&self.id).unwrap_or_else(|_| "null".into());
        format!(
            r#"{{"type": "flow", "name": "{}", "id": {id}, "data": {data}}}"#,
            self.name
        )
    }
}

/// One stream's state between events.
struct Telling {
    hub: Arc<FlowHub>,
    task: TaskId,
    names: Names,
    queued: VecDeque<Queued>,
    /// The seq of the newest event sent (what a catch-up after a lag goes on from).
    seq: u64,
    /// The task ended: the stream closes once nothing came for [`AFTER_THE_END`].
    ended: bool,
    closing: watch::Receiver<Option<Closing>>,
    _slot: super::feed_slots::FeedSlot,
}

impl Telling {
    fn start(mut self, f: Following) -> impl Stream<Item = Item> {
        self.queue(f.backlog, f.reset);
        let (live, guard) = (f.live, f.guard);
        futures::stream::unfold((self, live, guard), |(mut t, mut live, guard)| async move {
            let item = t.next(&mut live).await?;
            Some((item, (t, live, guard)))
        })
    }

    fn queue(&mut self, events: Vec<Arc<Told>>, reset: bool) {
        if reset {
            self.queued.clear();
            self.queued.push_back(Queued::Reset);
        }
        self.queued.extend(events.into_iter().map(Queued::Told));
    }

    /// The next event to send; `None` ends the stream.
    async fn next(&mut self, live: &mut broadcast::Receiver<Arc<Told>>) -> Option<Item> {
        loop {
            match self.queued.pop_front() {
                Some(Queued::Told(told)) => return Some(self.render(&told)),
                Some(Queued::Reset) => {
                    let data = serde_json::json!({"event": "stream_reset", "task_id": self.task});
                    return Some(Item {
                        name: "stream_reset",
                        id: None,
                        json: data.to_string().into(),
                    });
                }
                None => {}
            }
            let ended = self.ended;
            let linger = async move {
                if ended {
                    tokio::time::sleep(AFTER_THE_END).await
                } else {
                    std::future::pending().await
                }
            };
            let r = tokio::select! {
                r = live.recv() => r,
                _ = self.closing.wait_for(Option::is_some) => return None,
                () = linger => return None,
            };
            match r {
                Ok(told) if told.seq > self.seq => self.queued.push_back(Queued::Told(told)),
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let (events, reset) = self.hub.catch_up(&self.task, self.seq);
                    self.queue(events, reset);
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    fn render(&mut self, told: &Told) -> Item {
        self.seq = self.seq.max(told.seq);
        if matches!(
            told.event,
            FlowEvent::FlowSuccess { .. }
                | FlowEvent::FlowFailed { .. }
                | FlowEvent::FlowCancel { .. }
        ) {
            self.ended = true;
        }
        let name = match self.names {
            Names::Seed000 => told.event.name(),
            Names::Seed004 => told.event.seed004_name(),
        };
        Item {
            name,
            id: told.id.clone(),
            json: told.json.clone(),
        }
    }
}
