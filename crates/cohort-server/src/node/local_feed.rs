//! A standing-by node's own websocket feed (`GET /ws?token=…`, the states): served from the
//! node's [`Follower`] rather than passed on to the node running the team, so a console open on
//! any node sees every change once and in order, and goes on seeing them while the team
//! changes nodes. The person's session is read from the store (sessions are kept there), the
//! feed is the running node's own loop ([`crate::api::ws::run_feed`]) over the follower's
//! monitor, and the session is looked at again every [`SESSION_CHECK`], so a logout on any
//! node closes it. A task's flow (`format=flow`), and a person's feed while the follower has
//! not loaded the team yet, is passed on as before; a person's feed starts the follower when
//! it had stopped (it follows only while a feed here wants it), a refused one starts nothing.

use crate::api::AppError;
use crate::api::feed_slots::FeedSlots;
use crate::api::reason::{Denied, Fault, Malformed};
use crate::api::session::token_hash;
use crate::api::ws::{Closing, FeedConfig, Viewer, check_origin, run_feed};
use axum::body::Body;
use axum::extract::ws::{CloseFrame, Message, WebSocketUpgrade, close_code};
use axum::extract::{FromRequest, Query};
use axum::http::{HeaderValue, Method, Request};
use axum::response::{IntoResponse, Response};
use cohort_core::config::{Access, TeamConfig};
use cohort_core::ids::AgentId;
use cohort_runtime::node::follower::{Follower, Wanted};
use cohort_store::SqlStore;
use futures::{SinkExt, StreamExt};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How often an open feed's session is looked up again in the store.
pub const SESSION_CHECK: Duration = Duration::from_secs(5);

/// What a standing-by node needs to serve feeds of its own.
pub struct LocalFeeds {
    me: String,
    follower: Follower,
    store: Arc<SqlStore>,
    access: HashMap<AgentId, Access>,
    feed: FeedConfig,
    slots: Arc<FeedSlots>,
    /// Set when the node stops standing by: its feeds close.
    closing: watch::Sender<bool>,
}

impl LocalFeeds {
    /// The feeds of node `me`, from `follower`, for the people of `cfg`.
    pub fn new(me: &str, follower: Follower, store: Arc<SqlStore>, cfg: &TeamConfig) -> Self {
        LocalFeeds {
            me: me.to_owned(),
            follower,
            store,
            access: cfg
                .humans
                .iter()
                .map(|h| (h.id.clone(), h.access))
                .collect(),
            feed: FeedConfig::from(cfg.feeds),
            slots: Arc::default(),
            closing: watch::Sender::new(false),
        }
    }

    /// Closes every feed served here.
    pub fn close(&self) {
        self.closing.send_replace(true);
    }

    /// Serves `req` if it is a states feed and the team is loaded, refuses it if its person may
    /// not open it; otherwise gives it back to be passed on.
    pub async fn serve(
        self: &Arc<Self>,
        req: Request<Body>,
        origins: &[String],
    ) -> Result<Response, Request<Body>> {
        let Some(token) = feed_token(&req) else {
            return Err(req);
        };
        // Only a feed its person may open wants the states: one from a foreign page or with a
        // token that opens no session is refused here, and starts nothing.
        if let Err(e) = check_origin(req.headers(), origins) {
            return Ok(e.into_response());
        }
        let session = match self.admit(&token).await {
            Ok(session) => session,
            Err(e) => return Ok(e.into_response()),
        };
        // Wanted before the follower's readiness is read: a follower that stopped starts again
        // (this feed is passed on while it loads), and one following does not stop while this
        // feed is served from it.
        let wanted = self.follower.want();
        if self.follower.monitor().is_none() {
            return Err(req);
        }
        Ok(match self.upgrade(req, &token, session, wanted).await {
            Ok(res) => res,
            Err(e) => e.into_response(),
        })
    }

    /// The person `token` was given to and when their session ends; 401 if it opens none.
    async fn admit(&self, token: &str) -> Result<(AgentId, i64), AppError> {
        self.session(token)
            .await?
            .ok_or_else(|| AppError::Unauthorized(Denied::InvalidToken.into()))
    }

    async fn upgrade(
        self: &Arc<Self>,
        req: Request<Body>,
        token: &str,
        (human, expires_at): (AgentId, i64),
        wanted: Wanted,
    ) -> Result<Response, AppError> {
        let ws = WebSocketUpgrade::from_request(req, &())
            .await
            .map_err(|r| {
                let detail = r.body_text();
                AppError::Rejected(r.status(), Malformed::NotAWebsocket { detail }.into())
            })?
            .max_message_size(4 * 1024)
            .max_frame_size(4 * 1024);
        let slot = self.slots.take(&human, &self.feed);
        let closing = self.feed_closing(token, expires_at);
        let access = self.access.get(&human).copied().unwrap_or(Access::Member);
        let this = self.clone();
        let mut res = ws.on_upgrade(move |socket| async move {
            let _wanted = wanted;
            let Some(monitor) = this.follower.monitor() else {
                return;
            };
            let (mut sink, stream) = socket.split();
            let _slot = match slot {
                Ok(slot) => slot,
                Err(why) => {
                    // Over the limits: closed at once, saying why (a client tries again later).
                    let bye = Message::Close(Some(CloseFrame {
                        code: close_code::AGAIN,
                        reason: why.to_string().into(),
                    }));
                    let _ = tokio::time::timeout(this.feed.send_timeout, sink.send(bye)).await;
                    return;
                }
            };
            let base = monitor.read(|s| s.tasks_in_order().first().map(|t| t.task_id.clone()));
            let viewer = Viewer {
                id: &human,
                access,
                base: base.as_ref(),
            };
            let end = run_feed(sink, stream, monitor, viewer, this.feed, closing).await;
            tracing::debug!(human = %human, ?end, "a standing-by node's websocket feed ended");
        });
        if let Ok(v) = HeaderValue::from_str(&self.me) {
            res.headers_mut().insert(super::standby::NODE_HEADER, v);
        }
        Ok(res)
    }

    /// The person a token was given to and when their session ends, from the store.
    async fn session(&self, token: &str) -> Result<Option<(AgentId, i64)>, AppError> {
        let now = chrono::Utc::now().timestamp_millis();
        let live = self.store.live_session(&token_hash(token), now).await;
        let live = live.map_err(|e| {
            let detail = e.to_string();
            AppError::Unavailable(Fault::SessionsUnreadable { detail }.into())
        })?;
        Ok(live.map(|s| (s.human, s.expires_at)))
    }

    /// The closing channel of one feed: set when the node stops standing by, when the
    /// session expires, or when it is no longer in the store (a logout on any node).
    fn feed_closing(
        self: &Arc<Self>,
        token: &str,
        expires_at: i64,
    ) -> watch::Receiver<Option<Closing>> {
        let (tx, rx) = watch::channel(None);
        let mut stopping = self.closing.subscribe();
        let left = (expires_at - chrono::Utc::now().timestamp_millis()).max(0) as u64;
        let (this, token) = (self.clone(), token.to_owned());
        tokio::spawn(async move {
            let expiry = tokio::time::sleep(Duration::from_millis(left));
            tokio::pin!(expiry);
            let mut check = tokio::time::interval(SESSION_CHECK);
            check.tick().await;
            let why = loop {
                tokio::select! {
                    // The guard `wait_for` gives is not Send: dropped inside.
                    () = async { drop(stopping.wait_for(|c| *c).await) } => {
                        break Closing::ServerDown;
                    }
                    () = &mut expiry => break Closing::SessionEnded,
                    _ = check.tick() => {
                        // A store that cannot answer leaves the feed open: it was let in.
                        if let Ok(None) = this.session(&token).await {
                            break Closing::SessionEnded;
                        }
                    }
                    () = tx.closed() => return,
                }
            };
            tx.send_replace(Some(why));
        });
        rx
    }
}

/// The token of a states feed request (`GET /ws?token=…` without `format`), if it is one.
fn feed_token(req: &Request<Body>) -> Option<String> {
    if req.method() != Method::GET || req.uri().path() != "/ws" {
        return None;
    }
    let Query(q) = Query::<HashMap<String, String>>::try_from_uri(req.uri()).ok()?;
    if q.contains_key("format") {
        return None;
    }
    q.get("token").cloned()
}
