//! MCP's older HTTP+SSE transport (protocol 2024-11-05), which rmcp's client does not speak:
//! the client opens a server-sent event stream with `GET url`; the server's first event,
//! `endpoint`, names where to POST; each JSON-RPC message the client sends is a POST there,
//! and each the server sends is a `message` event on the stream. Many servers still speak only
//! this (seed 002 §4.1 reaches remote servers so). The stream ending ends the transport, as a
//! child's exit ends a stdio one: the client's next call connects again.

use bytes::Bytes;
use futures::{Stream, StreamExt};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use std::time::Duration;
use tokio::sync::mpsc;

/// The largest event the stream may carry (a server's message, or one growing without end).
pub const MOST_EVENT_BYTES: usize = 16 << 20;
/// Messages from the server waiting for the client at most; the stream waits beyond it.
const WAITING: usize = 64;

/// Why the transport failed.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("the SSE stream could not be opened: {0}")]
    Open(String),
    #[error("the server answered the SSE request with {status}: {body}")]
    Status { status: u16, body: String },
    #[error("the server's stream is not server-sent events (content type `{0}`)")]
    NotSse(String),
    #[error("the server's stream ended before it said where to send messages (its `endpoint`)")]
    NoEndpoint,
    #[error("the server's `endpoint` event is not a URL it can be reached at: {0}")]
    BadEndpoint(String),
    #[error("a message could not be sent: {0}")]
    Send(String),
    #[error("the server refused a message with {status}: {body}")]
    Refused { status: u16, body: String },
}

/// One session over HTTP+SSE.
pub struct SseTransport {
    http: reqwest::Client,
    /// Where the client's messages go (the server's `endpoint`).
    post_to: reqwest::Url,
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    /// Reads the stream; ends the session when dropped.
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl SseTransport {
    /// Opens the stream at `url` and waits (within `budget`) for the server's `endpoint`.
    pub async fn connect(url: &str, budget: Duration) -> Result<SseTransport, SseError> {
        let http = reqwest::Client::new();
        let base = reqwest::Url::parse(url).map_err(|e| SseError::Open(e.to_string()))?;
        let opening = async {
            let response = http
                .get(base.clone())
                .header(reqwest::header::ACCEPT, "text/event-stream")
                .send()
                .await
                .map_err(|e| SseError::Open(e.to_string()))?;
            let response =
                successful(response, |status, body| SseError::Status { status, body }).await?;
            let kind = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            if !kind.starts_with("text/event-stream") {
                return Err(SseError::NotSse(kind));
            }
            let mut events = Box::pin(sse_stream::SseStream::from_bytes_stream(bounded(
                response.bytes_stream(),
            )));
            let post_to = endpoint(&base, &mut events).await?;
            Ok((post_to, events))
        };
        let (post_to, events) = tokio::time::timeout(budget, opening)
            .await
            .map_err(|_| SseError::Open(format!("no `endpoint` event within {budget:?}")))??;
        let (tx, incoming) = mpsc::channel(WAITING);
        let reader = tokio::spawn(read_messages(events, tx));
        Ok(SseTransport {
            http,
            post_to,
            incoming,
            reader,
        })
    }
}

/// Waits for the `endpoint` event (skipping anything before it) and resolves it against the
/// stream's own URL, which must keep its scheme, host and port: a server may not send the
/// client's messages elsewhere.
async fn endpoint<S>(base: &reqwest::Url, events: &mut S) -> Result<reqwest::Url, SseError>
where
    S: Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Unpin,
{
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| SseError::Open(e.to_string()))?;
        if event.event.as_deref() != Some("endpoint") {
            continue;
        }
        let data = event.data.unwrap_or_default();
        let url = base
            .join(data.trim())
            .map_err(|e| SseError::BadEndpoint(format!("`{data}`: {e}")))?;
        if url.origin() != base.origin() {
            return Err(SseError::BadEndpoint(format!(
                "`{url}` is not on {}",
                base.origin().ascii_serialization()
            )));
        }
        return Ok(url);
    }
    Err(SseError::NoEndpoint)
}

/// Passes the server's messages on until the stream ends or the client is gone. An event
/// that is not a JSON-RPC message is skipped, with a warning: one bad event does not end the
/// session.
async fn read_messages<S>(mut events: S, tx: mpsc::Sender<RxJsonRpcMessage<RoleClient>>)
where
    S: Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Unpin,
{
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!("an MCP server's SSE stream broke: {e}");
                return;
            }
        };
        // `message` is the event that carries one; a nameless event is one too.
        if !matches!(event.event.as_deref(), None | Some("message")) {
            continue;
        }
        let Some(data) = event.data else { continue };
        match serde_json::from_str::<RxJsonRpcMessage<RoleClient>>(&data) {
            Ok(m) => {
                if tx.send(m).await.is_err() {
                    return;
                }
            }
            Err(e) => tracing::warn!("an MCP server sent an event that is not a message: {e}"),
        }
    }
}

/// `response` if its status is a success; otherwise `error` of its status and (the start of)
/// its body.
async fn successful(
    response: reqwest::Response,
    error: impl FnOnce(u16, String) -> SseError,
) -> Result<reqwest::Response, SseError> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = response.text().await.unwrap_or_default();
    Err(error(status.as_u16(), body.chars().take(300).collect()))
}

/// The stream's bytes, failing once an event grows past [`MOST_EVENT_BYTES`] (the parser holds
/// an event whole until its blank line: a server that never ends one must not fill memory).
fn bounded<S>(bytes: S) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static
where
    S: Stream<Item = Result<Bytes, reqwest::Error>> + Send + 'static,
{
    let mut since_blank = 0usize;
    let mut newline = false;
    bytes.map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        for &b in chunk.iter() {
            match b {
                b'\n' if newline => since_blank = 0,
                b'\n' => newline = true,
                b'\r' => {}
                _ => {
                    newline = false;
                    since_blank += 1;
                }
            }
            if since_blank > MOST_EVENT_BYTES {
                return Err(std::io::Error::other(format!(
                    "an event of the SSE stream is over {MOST_EVENT_BYTES} bytes"
                )));
            }
        }
        Ok(chunk)
    })
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        let (http, to) = (self.http.clone(), self.post_to.clone());
        async move {
            let response = http
                .post(to)
                .json(&item)
                .send()
                .await
                .map_err(|e| SseError::Send(e.to_string()))?;
            successful(response, |status, body| SseError::Refused { status, body }).await?;
            Ok(())
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), SseError> {
        self.reader.abort();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(
        text: &'static str,
    ) -> impl Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> + Unpin {
        let bytes = futures::stream::iter([Ok::<_, reqwest::Error>(Bytes::from(text))]);
        Box::pin(sse_stream::SseStream::from_bytes_stream(bounded(bytes)))
    }

    #[tokio::test]
    async fn the_endpoint_is_resolved_against_the_stream_and_may_not_leave_its_origin() {
        let base = reqwest::Url::parse("http://127.0.0.1:9/sse").unwrap();
        let mut ok = events(": hi\n\nevent: endpoint\ndata: /messages/?session_id=abc\n\n");
        let url = endpoint(&base, &mut ok).await.unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:9/messages/?session_id=abc");
        let mut away = events("event: endpoint\ndata: http://evil.example/steal\n\n");
        let e = endpoint(&base, &mut away).await.unwrap_err();
        assert!(matches!(e, SseError::BadEndpoint(_)), "{e}");
        let mut none = events("event: message\ndata: {}\n\n");
        assert!(matches!(
            endpoint(&base, &mut none).await,
            Err(SseError::NoEndpoint)
        ));
    }

    #[tokio::test]
    async fn messages_are_passed_on_and_other_events_skipped() {
        let stream = events(concat!(
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
            "event: ping\ndata: x\n\n",
            "event: message\ndata: not json\n\n",
            "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n",
        ));
        let (tx, mut rx) = mpsc::channel(8);
        read_messages(stream, tx).await;
        let first = rx.recv().await.unwrap();
        assert!(serde_json::to_string(&first).unwrap().contains("\"id\":1"));
        let second = rx.recv().await.unwrap();
        assert!(
            serde_json::to_string(&second)
                .unwrap()
                .contains("list_changed")
        );
        assert!(
            rx.recv().await.is_none(),
            "the stream ended: so does the transport"
        );
    }

    #[tokio::test]
    async fn an_event_that_never_ends_fails_the_stream_at_its_bound() {
        let huge = "x".repeat(MOST_EVENT_BYTES / 4);
        let chunks = (0..5).map(move |i| {
            let line = if i == 0 { "data: " } else { "" };
            Ok::<_, reqwest::Error>(Bytes::from(format!("{line}{huge}")))
        });
        let mut stream = Box::pin(bounded(futures::stream::iter(chunks)));
        let mut failed = false;
        while let Some(chunk) = stream.next().await {
            if chunk.is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed);
    }
}
