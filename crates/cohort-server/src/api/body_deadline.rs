//! A request's body must arrive whole within the header timeout of its head, and be at most
//! [`super::BODY_LIMIT`]: a client trickling a body byte by byte would otherwise
//! hold its connection "at work" for as long as it likes, out of reach of the timeouts and of
//! the eviction that keeps room for logins. The body is read here, before any handler, and
//! handed on as it came. An upload of an attached file from a person logged in may be as
//! large as one file may be ([`UPLOAD_LIMIT`](super::attachments::UPLOAD_LIMIT)); nobody else's
//! body is read past the usual limit.

use super::connections::ConnHandle;
use super::reason::Malformed;
use super::{ApiState, AppError, BODY_LIMIT};
use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use http_body_util::{BodyExt, LengthLimitError, Limited};

/// Reads the body within `http.header_timeout`; 408 when it does not come in time, 413 when
/// it is larger than [`BODY_LIMIT`].
pub async fn read_body_in_time(
    State(state): State<ApiState>,
    req: Request,
    next: Next,
) -> Result<Response, AppError> {
    let conn = req.extensions().get::<ConnHandle>().cloned();
    let (parts, body) = req.into_parts();
    let limit = limit_of(&state, &parts);
    let body = if body.is_end_stream() {
        body
    } else {
        let within = state.inner.http.header_timeout;
        let read = tokio::time::timeout(within, Limited::new(body, limit).collect()).await;
        match read {
            Err(_) => {
                let secs = within.as_secs();
                return Err(AppError::Rejected(
                    StatusCode::REQUEST_TIMEOUT,
                    Malformed::BodyTimeout { secs }.into(),
                ));
            }
            Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
                return Err(AppError::Rejected(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    Malformed::BodyTooLarge { limit }.into(),
                ));
            }
            Ok(Err(e)) => {
                let detail = e.to_string();
                return Err(AppError::BadRequest(
                    Malformed::BodyUnreadable { detail }.into(),
                ));
            }
            Ok(Ok(collected)) => Body::from(collected.to_bytes()),
        }
    };
    if let Some(ConnHandle(conn)) = conn {
        conn.body_read();
    }
    Ok(next.run(Request::from_parts(parts, body)).await)
}

/// How large this request's body may be: an upload by a person with a live session may carry
/// one file at its cap; any other request, [`BODY_LIMIT`].
fn limit_of(state: &ApiState, parts: &axum::http::request::Parts) -> usize {
    let upload = super::attachments::is_upload(parts);
    let live =
        || super::bearer(&parts.headers).is_some_and(|t| state.inner.sessions.human(t).is_some());
    if upload && live() {
        super::attachments::UPLOAD_LIMIT
    } else {
        BODY_LIMIT
    }
}
