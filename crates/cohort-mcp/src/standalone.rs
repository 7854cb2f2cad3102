//! A streamable HTTP session is used only once the server has answered the GET of its
//! standalone SSE stream (the one rmcp opens after `initialized`, for what the server sends
//! unasked): [`serve`] hands a session over after that, or after [`GRACE`] at most.
//!
//! Why: rmcp opens that stream from a task of its own, so under load its GET could reach the
//! server after the session's first requests. A server may then take that GET for the
//! client's reconnection of a request's stream (MCP's conformance server for `sse-retry` does:
//! it sent the call's result there, and the client's timed reconnection, the thing it checks,
//! never came). Waiting for the GET's answer makes sure the server saw it first; it costs a
//! connect about one round trip, as the GET goes out as soon as `initialized` is answered.

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::service::{ClientInitializeError, RoleClient, RunningService, Service, ServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse,
};
use sse_stream::{Error as SseError, Sse};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// How long a new session waits for its standalone stream before it is used without it: a
/// server that holds back its answer to that GET costs a connect this much, never more.
pub(crate) const GRACE: Duration = Duration::from_secs(2);

/// Why no session was started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeError {
    #[error("no answer within the connect budget")]
    Timeout,
    #[error(transparent)]
    Refused(Box<ClientInitializeError>),
}

/// Where a session's standalone stream stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Standalone {
    /// No session yet, or a server that gives none: without a session there is no
    /// standalone stream (rmcp opens none), so nothing to wait for.
    NoSession,
    /// In a session whose standalone GET the server has not answered yet.
    Opening,
    /// The server answered that GET: with the stream, a refusal (405: it has none) or an
    /// error; or rmcp gave the GET up. Either way, the server has had its chance to see it.
    Settled,
}

/// An rmcp HTTP client (`C`) that tells where the standalone stream of its session stands;
/// every request goes to `C` as it came.
#[derive(Clone)]
pub(crate) struct StandaloneFirst<C> {
    inner: C,
    standalone: Arc<watch::Sender<Standalone>>,
}

impl<C> StandaloneFirst<C> {
    pub(crate) fn new(inner: C) -> StandaloneFirst<C> {
        StandaloneFirst {
            inner,
            standalone: Arc::new(watch::Sender::new(Standalone::NoSession)),
        }
    }

    /// A request is sent in a session (`initialized` is the first): its standalone GET comes.
    fn in_session(&self, session_id: &Option<Arc<str>>) {
        if session_id.is_some() {
            self.standalone.send_if_modified(|s| {
                let first = *s == Standalone::NoSession;
                if first {
                    *s = Standalone::Opening;
                }
                first
            });
        }
    }

    /// For the standalone GET, what settles its stream once the GET is over: answered, failed
    /// or given up (dropped) alike. A GET with a `Last-Event-ID` resumes a request's stream,
    /// and one without a session is no standalone stream: neither settles anything.
    fn settles_on_answer(
        &self,
        session_id: &Option<Arc<str>>,
        last_event_id: &Option<String>,
    ) -> Option<Settles<'_>> {
        (session_id.is_some() && last_event_id.is_none()).then_some(Settles(&self.standalone))
    }

    /// Waits at most `grace` for the standalone stream to settle; where it stands then
    /// (`Opening`: waiting was given up).
    pub(crate) async fn settled(&self, grace: Duration) -> Standalone {
        let mut seen = self.standalone.subscribe();
        let settled = seen.wait_for(|s| *s != Standalone::Opening);
        match tokio::time::timeout(grace, settled).await {
            Ok(Ok(now)) => *now,
            // The sender lives as long as `self`; only the time can run out.
            _ => Standalone::Opening,
        }
    }
}

/// Settles the standalone stream when dropped.
struct Settles<'a>(&'a watch::Sender<Standalone>);

impl Drop for Settles<'_> {
    fn drop(&mut self) {
        self.0.send_replace(Standalone::Settled);
    }
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for StandaloneFirst<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.in_session(&session_id);
        self.inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.in_session(&session_id);
        self.inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let _settles = self.settles_on_answer(&session_id, &last_event_id);
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let _settles = self.settles_on_answer(&session_id, &last_event_id);
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

/// A session of `service` over streamable HTTP as `config` says, through `client`, started
/// within `budget`; handed over once its standalone stream settled (at most [`GRACE`] later).
pub(crate) async fn serve<C, S>(
    client: C,
    config: StreamableHttpClientTransportConfig,
    service: S,
    budget: Duration,
) -> Result<RunningService<RoleClient, S>, ServeError>
where
    C: StreamableHttpClient + Sync,
    S: Service<RoleClient>,
{
    let client = StandaloneFirst::new(client);
    let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
    let running = tokio::time::timeout(budget, service.serve(transport))
        .await
        .map_err(|_| ServeError::Timeout)?
        .map_err(|e| ServeError::Refused(Box::new(e)))?;
    let started = tokio::time::Instant::now();
    let standalone = client.settled(GRACE).await;
    let waited = started.elapsed();
    if standalone == Standalone::Opening {
        tracing::warn!(
            "the server did not answer the GET of its standalone SSE stream within {GRACE:?}; \
             the session is used without waiting for it"
        );
    } else {
        tracing::debug!(?standalone, ?waited, "standalone SSE stream settled");
    }
    Ok(running)
}

/// The HTTP client rmcp's own streamable HTTP transport uses, as rmcp 3.9 builds it (privately,
/// so the client [`StandaloneFirst`] wraps is built here): no idle connections kept (rmcp: a
/// reused connection whose last answer was not read to its end stalls ~40 ms on delayed ACKs),
/// and only same-origin 307 and 308 redirects followed, which keep a POST's body and never
/// carry the session id to another host.
pub(crate) fn http_client() -> Result<reqwest::Client, reqwest::Error> {
    let same_origin = reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MOST_REDIRECTS {
            attempt.error(format!("more than {MOST_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(same_origin)
        .build()
}

/// As rmcp's default client.
const MOST_REDIRECTS: usize = 10;

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use rmcp::model::{InitializeResult, ListToolsResult, ProtocolVersion, ServerJsonRpcMessage};
    use rmcp::model::{ServerCapabilities, ServerResult};
    use std::sync::Mutex;

    /// How long the scripted server takes to answer the standalone GET: a server under load.
    const ANSWER_AFTER: Duration = Duration::from_millis(100);

    /// How the scripted server answers the standalone GET.
    #[derive(Clone, Copy)]
    enum Get {
        /// With the stream (which then sends nothing).
        Stream,
        /// With 405: it has no standalone stream.
        Refused,
        /// Not at all.
        Never,
    }

    /// A server as rmcp's client sees it: it answers `initialize` (giving `session`, or none),
    /// `notifications/initialized` and `tools/list` at once, the standalone GET as `get` says,
    /// and writes down what it was sent, and when it answered the GET.
    #[derive(Clone)]
    struct Scripted {
        session: Option<&'static str>,
        get: Get,
        seen: Arc<Mutex<Vec<String>>>,
    }

    impl Scripted {
        fn new(session: Option<&'static str>, get: Get) -> Scripted {
            Scripted {
                session,
                get,
                seen: Arc::default(),
            }
        }

        fn saw(&self, what: impl Into<String>) {
            self.seen.lock().expect("poisoned").push(what.into());
        }

        fn seen(&self) -> Vec<String> {
            self.seen.lock().expect("poisoned").clone()
        }
    }

    impl StreamableHttpClient for Scripted {
        type Error = std::io::Error;

        async fn post_message(
            &self,
            _uri: Arc<str>,
            message: ClientJsonRpcMessage,
            _session_id: Option<Arc<str>>,
            _auth_header: Option<String>,
            _custom_headers: HashMap<HeaderName, HeaderValue>,
        ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
            let json = serde_json::to_value(&message)?;
            let method = json["method"].as_str().unwrap_or_default().to_owned();
            self.saw(method.as_str());
            let ClientJsonRpcMessage::Request(request) = message else {
                return Ok(StreamableHttpPostResponse::Accepted);
            };
            let (result, session) = match method.as_str() {
                "initialize" => {
                    let mut init = InitializeResult::new(ServerCapabilities::default());
                    init.protocol_version = ProtocolVersion::V_2025_11_25;
                    let session = self.session.map(str::to_owned);
                    (ServerResult::InitializeResult(init), session)
                }
                "tools/list" => (
                    ServerResult::ListToolsResult(ListToolsResult::default()),
                    None,
                ),
                other => {
                    let why = format!("the scripted server has no `{other}`");
                    return Err(StreamableHttpError::UnexpectedServerResponse(why.into()));
                }
            };
            let answer = ServerJsonRpcMessage::response(result, request.id);
            Ok(StreamableHttpPostResponse::Json(answer, session))
        }

        async fn delete_session(
            &self,
            _uri: Arc<str>,
            _session_id: Arc<str>,
            _auth_header: Option<String>,
            _custom_headers: HashMap<HeaderName, HeaderValue>,
        ) -> Result<(), StreamableHttpError<Self::Error>> {
            Ok(())
        }

        async fn get_stream(
            &self,
            _uri: Arc<str>,
            _session_id: Option<Arc<str>>,
            _last_event_id: Option<String>,
            _auth_header: Option<String>,
            _custom_headers: HashMap<HeaderName, HeaderValue>,
        ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>>
        {
            self.saw("GET");
            tokio::time::sleep(ANSWER_AFTER).await;
            match self.get {
                Get::Stream => {
                    self.saw("GET answered");
                    Ok(futures::stream::pending().boxed())
                }
                Get::Refused => {
                    self.saw("GET answered");
                    Err(StreamableHttpError::ServerDoesNotSupportSse)
                }
                Get::Never => std::future::pending().await,
            }
        }
    }

    fn config() -> StreamableHttpClientTransportConfig {
        StreamableHttpClientTransportConfig::with_uri("http://scripted.test/mcp")
    }

    /// A session with `server` as rmcp starts it, not waited for, and the wrapper that watched.
    async fn started(
        server: &Scripted,
    ) -> (StandaloneFirst<Scripted>, RunningService<RoleClient, ()>) {
        let client = StandaloneFirst::new(server.clone());
        let transport = StreamableHttpClientTransport::with_client(client.clone(), config());
        (client, ().serve(transport).await.expect("initialized"))
    }

    // Time is paused: it moves on only when every task waits for it, so the server's slow GET
    // is answered after whatever the client does at once, and before `GRACE` runs out.

    #[tokio::test(start_paused = true)]
    async fn a_session_sends_its_first_request_only_after_the_standalone_get_was_answered() {
        let server = Scripted::new(Some("session-1"), Get::Stream);
        let budget = Duration::from_secs(10);
        let running = serve(server.clone(), config(), (), budget).await.unwrap();
        running.peer().list_tools(None).await.unwrap();
        assert_eq!(
            server.seen(),
            [
                "initialize",
                "notifications/initialized",
                "GET",
                "GET answered",
                "tools/list"
            ]
        );
        running.cancel().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_standalone_get_settles_the_stream_and_the_session_goes_on() {
        let server = Scripted::new(Some("session-1"), Get::Refused);
        let (client, running) = started(&server).await;
        assert_eq!(client.settled(GRACE).await, Standalone::Settled);
        running.peer().list_tools(None).await.unwrap();
        assert_eq!(server.seen()[2..], ["GET", "GET answered", "tools/list"]);
        running.cancel().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_standalone_get_never_answered_is_waited_for_no_longer_than_the_grace() {
        let server = Scripted::new(Some("session-1"), Get::Never);
        let (client, running) = started(&server).await;
        assert_eq!(client.settled(GRACE).await, Standalone::Opening);
        running.cancel().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_without_sessions_has_no_standalone_stream_to_wait_for() {
        let server = Scripted::new(None, Get::Stream);
        let (client, running) = started(&server).await;
        assert_eq!(client.settled(GRACE).await, Standalone::NoSession);
        running.peer().list_tools(None).await.unwrap();
        assert!(!server.seen().iter().any(|s| s.starts_with("GET")));
        running.cancel().await.unwrap();
    }
}
