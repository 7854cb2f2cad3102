//! What a standing-by node serves: every request passed on to the node that runs the team, so
//! any node's address serves the REST API, the websocket and the console (a load balancer may
//! send people to any node). Until it knows which node runs the team, or when that node cannot
//! be reached, it answers 503 with what it knows, and `Retry-After: 1`.
//!
//! A request is sent on a connection of its own to the running node, with its body (at most
//! [`BODY_LIMIT`](crate::api::BODY_LIMIT)) and headers, `X-Forwarded-For` extended with the
//! caller's address (which the running node believes only from addresses in its
//! `http.trusted_proxies`). A websocket upgrade is checked against this node's own allowed
//! origins, then passed on as from the running node's own origin; once both sides have
//! switched protocols, the bytes are copied both ways until either side closes, or until
//! neither has sent anything for the tunnel's idle deadline (the running node pings every
//! feed, so only a connection that broke without a close goes that long). With NATS, the
//! states feed is not passed on: the node serves it from its own follower of the team's
//! event stream ([`super::local_feed`]).

use super::local_feed::LocalFeeds;
use crate::api::reason::{Fault, Malformed};
use crate::api::{AppError, Wording};
use axum::Router;
use axum::body::Body;
use axum::extract::connect_info::ConnectInfo;
use axum::http::{HeaderValue, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The header every answer of a node carries: the name of the node that made it (the one
/// running the team, also when a standing-by node passed the request on).
pub const NODE_HEADER: &str = "cohort-node";
/// The header a standing-by node adds to the answers it passes on: its own name.
pub const VIA_HEADER: &str = "cohort-via";

/// `app` with every answer saying that node `name` made it ([`NODE_HEADER`]).
pub fn named(app: Router, name: &str) -> Router {
    let value = HeaderValue::from_str(name).unwrap_or_else(|_| HeaderValue::from_static("?"));
    app.layer(axum::middleware::map_response(move |mut res: Response| {
        let value = value.clone();
        async move {
            res.headers_mut().insert(NODE_HEADER, value);
            res
        }
    }))
}

/// The node that runs the team, as this node last heard.
#[derive(Clone, Debug, Default)]
pub enum Running {
    #[default]
    Unknown,
    /// This node's own previous run (killed): its lease runs out before anyone takes over.
    PreviousRun,
    /// Another node, at this API address.
    Node { name: String, address: String },
}

/// Where a standing-by node keeps what it last heard of the running node.
pub type Leader = Arc<Mutex<Running>>;

/// How long a request waits to reach the running node and for its answer to begin.
const FORWARD_DEADLINE: Duration = Duration::from_secs(30);

/// The router of a standing-by node `me`, which allows websockets from `origins` and closes a
/// websocket's tunnel that carried nothing for `idle`.
/// With `local`, a states feed (`GET /ws`) is served by this node itself, from its follower of
/// the team's event stream ([`super::local_feed`]). Its own answers are worded in `wording`,
/// the team's language.
pub fn router(
    me: String,
    leader: Leader,
    (origins, idle): (Vec<String>, Duration),
    local: Option<Arc<LocalFeeds>>,
    wording: Wording,
) -> Router {
    let shared = Arc::new((me, leader, origins));
    let app = Router::new().fallback(move |req: Request<Body>| {
        let (shared, local) = (shared.clone(), local.clone());
        async move {
            let (me, leader, origins) = &*shared;
            let req = match &local {
                Some(local) => match local.serve(req, origins).await {
                    Ok(served) => return served,
                    Err(req) => req,
                },
                None => req,
            };
            let running = leader.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let node = me.clone();
            let (leader, address) = match running {
                Running::Node { name, address } => (name, address),
                Running::Unknown => {
                    return unavailable(me, None, Fault::StandbyLeaderUnknown { node });
                }
                Running::PreviousRun => {
                    return unavailable(me, None, Fault::StandbyPreviousRun { node });
                }
            };
            let at = Some((leader.as_str(), address.as_str()));
            // Passed on once already: the node it went to stands by too (the team is changing
            // nodes). Never twice, so two nodes with stale news cannot pass it back and forth.
            if req.headers().contains_key(VIA_HEADER) {
                let (leader, address) = (leader.clone(), address.clone());
                let why = Fault::StandbyLeaderStandingBy {
                    node,
                    leader,
                    address,
                };
                return unavailable(me, at, why);
            }
            match forward(&address, (origins, idle), req).await {
                Ok(mut res) => {
                    if let Ok(v) = HeaderValue::from_str(me) {
                        res.headers_mut().insert(VIA_HEADER, v);
                    }
                    res
                }
                Err(Refused::Origin(refused)) => refused.into_response(),
                Err(Refused::TooLarge) => {
                    let why = Malformed::BodyOverRouteLimit.into();
                    AppError::Rejected(StatusCode::PAYLOAD_TOO_LARGE, why).into_response()
                }
                Err(Refused::Unreachable(detail)) => {
                    let (leader, address) = (leader.clone(), address.clone());
                    let why = Fault::StandbyLeaderUnreachable {
                        node,
                        leader,
                        address,
                        detail,
                    };
                    unavailable(me, at, why)
                }
            }
        }
    });
    app.layer(axum::middleware::from_fn_with_state(
        wording,
        crate::api::error::in_team_language,
    ))
}

/// 503 from a standing-by node: why, and which node runs the team when it knows.
fn unavailable(me: &str, leader: Option<(&str, &str)>, why: Fault) -> Response {
    let (node, address) = leader.unwrap_or_default();
    let mut extra = serde_json::Map::new();
    extra.insert("node".into(), me.into());
    extra.insert("role".into(), "standby".into());
    let leader = serde_json::json!({"node": node, "address": address});
    extra.insert("leader".into(), leader);
    let mut res = crate::api::error::answer(StatusCode::SERVICE_UNAVAILABLE, why.into(), extra);
    res.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    if let Ok(v) = HeaderValue::from_str(me) {
        res.headers_mut().insert(VIA_HEADER, v);
    }
    res
}

enum Refused {
    Origin(AppError),
    TooLarge,
    Unreachable(String),
}

/// Passes `req` on to the node at `address`; its answer (a websocket's switch of protocols,
/// with the bytes copied both ways behind it until either side closes or both are `idle`).
async fn forward(
    address: &str,
    (origins, idle): (&[String], Duration),
    mut req: Request<Body>,
) -> Result<Response, Refused> {
    let upgrade = req.headers().contains_key(header::UPGRADE);
    if upgrade {
        crate::api::ws::check_origin(req.headers(), origins).map_err(Refused::Origin)?;
        let own = HeaderValue::from_str(&format!("http://{address}"))
            .map_err(|e| Refused::Unreachable(e.to_string()))?;
        req.headers_mut().insert(header::ORIGIN, own);
    }
    // Marked as passed on, so the node it reaches never passes it on again.
    req.headers_mut()
        .insert(VIA_HEADER, HeaderValue::from_static("standby"));
    let from = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    if let Some(ip) = from {
        let chain = match req
            .headers()
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok())
        {
            Some(before) => format!("{before}, {ip}"),
            None => ip.to_string(),
        };
        if let Ok(v) = HeaderValue::from_str(&chain) {
            req.headers_mut().insert("x-forwarded-for", v);
        }
    }
    let downstream = upgrade.then(|| hyper::upgrade::on(&mut req));
    let (parts, body) = req.into_parts();
    // An upload may carry one attached file; the node that runs the team checks who sends it.
    let limit = if crate::api::attachments::is_upload(&parts) {
        crate::api::attachments::UPLOAD_LIMIT
    } else {
        crate::api::BODY_LIMIT
    };
    let body = http_body_util::Limited::new(body, limit)
        .collect()
        .await
        .map_err(|_| Refused::TooLarge)?
        .to_bytes();
    let unreachable = |e: &dyn std::fmt::Display| Refused::Unreachable(e.to_string());
    let sent = async {
        let tcp = tokio::net::TcpStream::connect(address)
            .await
            .map_err(|e| unreachable(&e))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| unreachable(&e))?;
        tokio::spawn(async move {
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!("a connection to the running node ended: {e}");
            }
        });
        let req = Request::from_parts(parts, http_body_util::Full::new(body));
        sender.send_request(req).await.map_err(|e| unreachable(&e))
    };
    let mut res = tokio::time::timeout(FORWARD_DEADLINE, sent)
        .await
        .map_err(|_| Refused::Unreachable(format!("no answer within {FORWARD_DEADLINE:?}")))??;
    if let (StatusCode::SWITCHING_PROTOCOLS, Some(downstream)) = (res.status(), downstream) {
        let upstream = hyper::upgrade::on(&mut res);
        tokio::spawn(async move {
            let (Ok(up), Ok(down)) = (upstream.await, downstream.await) else {
                return;
            };
            tunnel(TokioIo::new(up), TokioIo::new(down), idle).await;
        });
    }
    Ok(res.map(Body::new))
}

/// Copies bytes both ways between `a` and `b` until either side closes, or until neither has
/// sent anything for `idle`.
async fn tunnel<A, B>(a: A, b: B, idle: Duration)
where
    A: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    B: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let heard = Arc::new(Mutex::new(tokio::time::Instant::now()));
    let (mut a, mut b) = (Heard::new(a, &heard), Heard::new(b, &heard));
    let quiet = async {
        loop {
            let last = *heard.lock().unwrap_or_else(|e| e.into_inner());
            if last.elapsed() >= idle {
                return;
            }
            tokio::time::sleep_until(last + idle).await;
        }
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut a, &mut b) => {}
        _ = quiet => tracing::debug!("a websocket tunnel carried nothing for {idle:?}: closed"),
    }
}

/// An end of a tunnel that notes when it last read anything.
struct Heard<T> {
    io: T,
    heard: Arc<Mutex<tokio::time::Instant>>,
}

impl<T> Heard<T> {
    fn new(io: T, heard: &Arc<Mutex<tokio::time::Instant>>) -> Heard<T> {
        Heard {
            io,
            heard: heard.clone(),
        }
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Heard<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let read = std::pin::Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            *self.heard.lock().unwrap_or_else(|e| e.into_inner()) = tokio::time::Instant::now();
        }
        read
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Heard<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, data)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_tunnel_carries_bytes_both_ways_and_closes_once_both_sides_are_quiet() {
        let (mut client, near) = tokio::io::duplex(64);
        let (far, mut server) = tokio::io::duplex(64);
        let idle = Duration::from_secs(120);
        let t = tokio::spawn(tunnel(near, far, idle));
        let mut buf = [0u8; 4];
        for _ in 0..5 {
            // Something every minute (a ping and its pong) keeps it open.
            tokio::time::sleep(Duration::from_secs(60)).await;
            client.write_all(b"ping").await.unwrap();
            server.read_exact(&mut buf).await.unwrap();
            server.write_all(b"pong").await.unwrap();
            client.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"pong");
        }
        assert!(!t.is_finished());
        let closed = tokio::time::timeout(idle + Duration::from_secs(1), t).await;
        assert!(closed.is_ok(), "quiet for longer than its deadline");
        // Both ends see it closed.
        assert_eq!(client.read(&mut buf).await.unwrap(), 0);
    }
}
