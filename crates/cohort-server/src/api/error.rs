//! `AppError`: every way a request can fail, each with its status; all of them answer
//! `{"success": false, "error": "…"}`. Also the extractors (`ApiJson`, `ApiQuery`, `ApiPath`)
//! that turn axum's rejections into an `AppError`, so a malformed request gets a 4xx with the
//! reason in the same JSON shape, never a panic or a plain-text body.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The request is well-formed but asks for something invalid.
    #[error("{0}")]
    BadRequest(String),
    /// No token, an unknown or expired token, or a failed login.
    #[error("{0}")]
    Unauthorized(String),
    /// A valid token used for another human.
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    /// Too many failed logins; retry after this many seconds.
    #[error("too many failed logins; try again in {0} s")]
    TooManyRequests(u64),
    /// A goal the team takes no more of now (seed 000 §10.3's caps); retry after this many
    /// seconds.
    #[error("{0}")]
    Held(String, u64),
    /// The server is too busy for this right now (too many password checks); retry in a
    /// second.
    #[error("{0}")]
    Busy(String),
    /// axum refused the request before our handler saw it (bad JSON, wrong content type,
    /// body too large, bad query string, bad path segment): its status and reason.
    #[error("{1}")]
    Rejected(StatusCode, String),
    /// The server is at its limit for this kind of request now (large reads, memory); retry
    /// in a second.
    #[error("{0}")]
    Overloaded(String),
    /// The team behind the API is gone (an actor's mailbox is closed).
    #[error("the team is not running: {0}")]
    Unavailable(String),
    #[error("internal error: {0}")]
    Internal(String),
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::TooManyRequests(_) | AppError::Busy(_) | AppError::Held(..) => {
                StatusCode::TOO_MANY_REQUESTS
            }
            AppError::Rejected(s, _) => *s,
            AppError::Unavailable(_) | AppError::Overloaded(_) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        // A busy answer is the server holding to its limits under load, not a fault.
        if status.is_server_error() && !matches!(self, AppError::Overloaded(_)) {
            tracing::warn!("api: {self}");
        }
        let body = json!({ "success": false, "error": self.to_string() });
        let mut res = (status, axum::Json(body)).into_response();
        let retry = match self {
            AppError::TooManyRequests(secs) | AppError::Held(_, secs) => Some(secs.max(1)),
            AppError::Busy(_) | AppError::Overloaded(_) => Some(1),
            _ => None,
        };
        if let Some(secs) = retry {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        res
    }
}

impl From<actix::MailboxError> for AppError {
    fn from(e: actix::MailboxError) -> Self {
        AppError::Unavailable(e.to_string())
    }
}

impl From<JsonRejection> for AppError {
    fn from(r: JsonRejection) -> Self {
        AppError::Rejected(r.status(), r.body_text())
    }
}

impl From<QueryRejection> for AppError {
    fn from(r: QueryRejection) -> Self {
        AppError::Rejected(r.status(), r.body_text())
    }
}

impl From<PathRejection> for AppError {
    fn from(r: PathRejection) -> Self {
        // A path that does not parse is a client error whatever axum thinks of it.
        let status = if r.status().is_server_error() {
            StatusCode::BAD_REQUEST
        } else {
            r.status()
        };
        AppError::Rejected(status, r.body_text())
    }
}

/// Turns axum's bare 405 (an empty body) into the JSON error every other failure answers,
/// naming the methods the path takes (also kept in the `Allow` header).
pub async fn method_not_allowed_as_json(req: Request, next: axum::middleware::Next) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let res = next.run(req).await;
    if res.status() != StatusCode::METHOD_NOT_ALLOWED {
        return res;
    }
    let allow = res.headers().get(header::ALLOW).cloned();
    let takes = allow
        .as_ref()
        .and_then(|a| a.to_str().ok())
        .filter(|a| !a.is_empty())
        .map_or_else(
            || "no method".to_owned(),
            |a| a.split(',').map(str::trim).collect::<Vec<_>>().join(", "),
        );
    let mut json = AppError::Rejected(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed on {path}; it takes {takes}"),
    )
    .into_response();
    if let Some(allow) = allow {
        json.headers_mut().insert(header::ALLOW, allow);
    }
    json
}

/// `axum::Json` whose rejection is an `AppError`.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = AppError;
    async fn from_request(req: Request, state: &S) -> Result<Self, AppError> {
        let axum::Json(v) = axum::Json::<T>::from_request(req, state).await?;
        Ok(ApiJson(v))
    }
}

/// `axum::extract::Query` whose rejection is an `AppError`.
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = AppError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        let axum::extract::Query(v) =
            axum::extract::Query::<T>::from_request_parts(parts, state).await?;
        Ok(ApiQuery(v))
    }
}

/// `axum::extract::Path` whose rejection is an `AppError`.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = AppError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        let axum::extract::Path(v) =
            axum::extract::Path::<T>::from_request_parts(parts, state).await?;
        Ok(ApiPath(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn errors_answer_json_with_their_status_and_retry_after() {
        let res = AppError::TooManyRequests(42).into_response();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(res.headers()[header::RETRY_AFTER], "42");
        let body = axum::body::to_bytes(res.into_body(), 1 << 16)
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["success"], false);
        assert!(v["error"].as_str().unwrap().contains("42"));
        let res = AppError::Forbidden("not yours".into()).into_response();
        assert_eq!(res.status(), StatusCode::FORBIDDEN);
    }
}
