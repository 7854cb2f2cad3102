//! The HTTP server: accepts TCP connections and serves each with hyper's HTTP/1 connection
//! under the team's `http:` limits, which `axum::serve` cannot set. Each connection is held to
//! its deadlines (a request head within `header_timeout`, the next request within
//! `idle_timeout`; see [`connections`](super::connections)), carries at most
//! `max_requests_per_connection` requests, and counts against a cap that stays under the
//! process's open-file limit, so the server never runs out of file descriptors; past the cap
//! the longest-waiting connections give way to newcomers. Websocket upgrades keep working (and
//! keep their connection's place until they end); requests carry `ConnectInfo<SocketAddr>`.
//!
//! hyper's own `header_read_timeout` is not used: its timer also runs while a keep-alive
//! connection sits idle, so it cannot give an idle connection longer than a request head.

use super::connections::{Admission, Conn, ConnHandle, ConnLimits, Connections, Slot};
use super::reason::{Limited, Reason};
use super::{ApiState, Wording, router};
use axum::Router;
use axum::body::Body;
use axum::extract::connect_info::ConnectInfo;
use axum::http::{HeaderValue, Request, StatusCode, header};
use cohort_core::config::Http;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::Service;

/// File descriptors kept for everything but client connections (the store, MCP servers'
/// pipes, connections to model endpoints, the runtime's own), besides an eighth of the limit.
const FDS_KEPT: u64 = 64;
/// The fewest connections the cap is lowered to, whatever the open-file limit.
const MIN_CAP: usize = 8;
/// hyper's read and write buffers per connection at most: bounds what one connection (a
/// client sending an endless head, say) makes the server hold. Heads larger than this get 431.
const MAX_BUF: usize = 64 * 1024;

/// Serves the API on `listener` until `shutdown` completes; then stops accepting, closes the
/// websocket feeds and idle connections, and waits for requests in flight to finish.
pub async fn serve(
    listener: TcpListener,
    state: ApiState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let (http, wording) = (state.inner.http.clone(), state.wording());
    let app = router(state.clone());
    let closing = move || state.close_feeds();
    serve_router(listener, (app, &wording), &http, closing, shutdown).await
}

/// Serves `app` on `listener` under `http`'s limits until `shutdown` completes; then stops
/// accepting, runs `closing` (which ends long-lived responses such as feeds), closes idle
/// connections and waits for requests in flight to finish. A connection refused for want of
/// room is told so in `wording`, the team's language.
pub async fn serve_router(
    listener: TcpListener,
    (app, wording): (Router, &Wording),
    http: &Http,
    closing: impl FnOnce(),
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let refusal = wording
        .body(
            &Reason::from(Limited::TooManyConnections),
            Default::default(),
        )
        .to_string();
    let limits = conn_limits(http, open_file_limit());
    let table = Connections::new(limits);
    let (stop_tx, stop_rx) = watch::channel(false);
    // Every connection task holds a receiver; `closed` resolves once all have ended.
    let (alive_tx, alive_rx) = watch::channel(());
    let max_requests = http.max_requests_per_connection;
    let mut last_warned: Option<Instant> = None;
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    accept_failed(e, &mut last_warned).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Without TCP_NODELAY a small websocket frame waits for the client's delayed ACK
        // (Nagle's algorithm): up to 40 ms on every change a console is sent.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("could not set TCP_NODELAY on a connection: {e}");
        }
        match table.admit(Instant::now()) {
            Admission::Full => refuse(&tcp, peer, &refusal),
            Admission::Open(conn, slot) => {
                let task = Connection {
                    conn,
                    peer,
                    app: app.clone(),
                    limits,
                    max_requests,
                };
                let (stop, alive) = (stop_rx.clone(), alive_rx.clone());
                tokio::spawn(async move {
                    task.run(tcp, slot, stop).await;
                    drop(alive);
                });
            }
        }
    }
    drop(listener);
    closing();
    stop_tx.send_replace(true);
    drop(alive_rx);
    alive_tx.closed().await;
    Ok(())
}

/// The connection cap under `http`: `max_connections`, lowered to what the open-file limit
/// allows once the descriptors the rest of the process needs are kept aside.
pub fn conn_limits(http: &Http, open_files: Option<u64>) -> ConnLimits {
    let allowed = open_files.map(|l| {
        let spare = l.saturating_sub(FDS_KEPT + l / 8);
        usize::try_from(spare).unwrap_or(usize::MAX).max(MIN_CAP)
    });
    let cap = match allowed {
        Some(a) if a < http.max_connections => {
            tracing::info!(
                "at most {a} HTTP connections (http.max_connections is {}, but the open-file \
                 limit is {}; raise it with `ulimit -n` for more)",
                http.max_connections,
                open_files.unwrap_or_default()
            );
            a
        }
        _ => http.max_connections,
    };
    ConnLimits::new(http.header_timeout, http.idle_timeout, cap)
}

/// The process's open-file limit (`ulimit -n`), when it has one.
#[cfg(unix)]
pub fn open_file_limit() -> Option<u64> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given, which lives on this stack frame.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) };
    (read == 0 && rl.rlim_cur != libc::RLIM_INFINITY).then_some(rl.rlim_cur)
}

#[cfg(not(unix))]
pub fn open_file_limit() -> Option<u64> {
    None
}

/// A failed accept. A connection that went away before it was accepted is nothing; anything
/// else (out of file descriptors, above all) is logged at most once a second, and accepting
/// pauses a moment so the loop does not spin.
async fn accept_failed(e: io::Error, last_warned: &mut Option<Instant>) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    if last_warned.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
        tracing::warn!("cannot accept a connection: {e}");
        *last_warned = Some(Instant::now());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// The answer to a connection refused because every place is taken by one at work (`body`,
/// the error's JSON): written without waiting (a client that does not read it loses nothing
/// but this answer).
fn refuse(tcp: &TcpStream, peer: SocketAddr, body: &str) {
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tcp.try_write(answer.as_bytes());
    tracing::debug!(%peer, "refused a connection: every place is taken by one at work");
}

/// One accepted connection and what it is served with.
struct Connection {
    conn: Arc<Conn>,
    peer: SocketAddr,
    app: Router,
    limits: ConnLimits,
    max_requests: usize,
}

impl Connection {
    /// Serves the connection until it ends, passes its deadline, is closed to make room or,
    /// once the server stops, has finished the request it is working on.
    async fn run(self, tcp: TcpStream, slot: Slot, mut stop: watch::Receiver<bool>) {
        let io = TokioIo::new(TrackedIo {
            tcp,
            conn: self.conn.clone(),
            _slot: slot,
        });
        let conn = self.conn.clone();
        let limits = self.limits;
        let served = hyper::server::conn::http1::Builder::new()
            .header_read_timeout(None)
            .max_buf_size(MAX_BUF)
            .serve_connection(
                io,
                Self::service(conn.clone(), self.peer, self.app.clone(), self.max_requests),
            )
            .with_upgrades();
        tokio::pin!(served);
        let mut stopping = false;
        loop {
            let deadline = conn.deadline(&limits);
            let expiry = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                done = served.as_mut() => {
                    if let Err(e) = done {
                        tracing::debug!(peer = %self.peer, "connection ended: {e}");
                    }
                    return;
                }
                () = conn.closed() => return,
                () = conn.changed() => {}
                () = expiry => {
                    if conn.deadline(&limits).is_some_and(|at| at <= Instant::now()) {
                        tracing::debug!(peer = %self.peer, phase = ?conn.phase(), "connection timed out");
                        return;
                    }
                }
                _ = stop.changed(), if !stopping => {
                    stopping = true;
                    if !conn.at_work() {
                        return;
                    }
                    served.as_mut().graceful_shutdown();
                }
            }
        }
    }

    /// The router, for one connection: each request carries its peer's address and its
    /// connection, and is counted; the last one allowed closes the connection.
    fn service(
        conn: Arc<Conn>,
        peer: SocketAddr,
        app: Router,
        max: usize,
    ) -> impl hyper::service::Service<
        Request<Incoming>,
        Response = axum::response::Response,
        Error = Infallible,
        Future = impl Send,
    > {
        hyper::service::service_fn(move |mut req: Request<Incoming>| {
            let request = conn.request_started(Instant::now());
            req.extensions_mut().insert(ConnectInfo(peer));
            req.extensions_mut().insert(ConnHandle(conn.clone()));
            let mut app = app.clone();
            async move {
                let Ok(mut res) = app.call(req).await;
                if res.status() == StatusCode::SWITCHING_PROTOCOLS {
                    request.upgraded();
                } else if request.number() >= max {
                    res.headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                // The request lasts until its response has been written (or dropped).
                Ok(res.map(|body| {
                    Body::new(body.map_frame(move |frame| {
                        let _ = &request;
                        frame
                    }))
                }))
            }
        })
    }
}

/// The socket of a connection, telling it when bytes arrive and when writes wait for the
/// client; it holds the connection's place in the table until it is closed.
struct TrackedIo {
    tcp: TcpStream,
    conn: Arc<Conn>,
    _slot: Slot,
}

impl AsyncRead for TrackedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.tcp).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.conn.read_some(Instant::now());
        }
        read
    }
}

impl AsyncWrite for TrackedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let wrote = Pin::new(&mut self.tcp).poll_write(cx, buf);
        self.conn.write_blocked(wrote.is_pending(), Instant::now());
        wrote
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let wrote = Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs);
        self.conn.write_blocked(wrote.is_pending(), Instant::now());
        wrote
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_stays_under_the_open_file_limit() {
        let http = Http::default();
        assert_eq!(conn_limits(&http, None).cap, 1024);
        assert_eq!(conn_limits(&http, Some(1 << 20)).cap, 1024);
        // 256 - 64 - 32.
        assert_eq!(conn_limits(&http, Some(256)).cap, 160);
        assert_eq!(conn_limits(&http, Some(1024)).cap, 832);
        assert_eq!(conn_limits(&http, Some(20)).cap, MIN_CAP);
        let small = Http {
            max_connections: 100,
            ..Http::default()
        };
        assert_eq!(conn_limits(&small, Some(1024)).cap, 100);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_open_file_limit_is_the_soft_limit_the_kernel_reports() {
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .unwrap();
        let soft = line.split_whitespace().nth(3).unwrap();
        assert_eq!(
            open_file_limit().map(|l| l.to_string()),
            soft.parse::<u64>().ok().map(|l| l.to_string()),
            "{line}"
        );
    }
}
