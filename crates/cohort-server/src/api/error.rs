//! `AppError`: every way a request can fail, each with its status and its [`Reason`]; all of
//! them answer `{"success": false, "error_code": "…", "error": "…", "message": "…"}`: the
//! reason's stable code, its text in English, and the same in the team's language (written by
//! [`in_team_language`], the one layer that knows the team's catalog). Also the extractors
//! (`ApiJson`, `ApiQuery`, `ApiPath`) that turn axum's rejections into an `AppError`, so a
//! malformed request gets a 4xx with the reason in the same JSON shape, never a panic or a
//! plain-text body.

use super::reason::{Fault, Malformed, Reason};
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cohort_core::texts::{Language, Texts};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::sync::Arc;

#[derive(Debug)]
pub enum AppError {
    /// The request is well-formed but asks for something invalid.
    BadRequest(Reason),
    /// No token, an unknown or expired token, or a failed login.
    Unauthorized(Reason),
    /// A valid token used for another human.
    Forbidden(Reason),
    NotFound(Reason),
    /// Too many of something now (failed logins, a person's goals, the team's running tasks,
    /// feeds); retry after this many seconds.
    TooManyRequests(Reason, u64),
    /// The server is too busy for this right now (too many password checks); retry in a
    /// second.
    Busy(Reason),
    /// axum refused the request before our handler saw it (bad JSON, wrong content type,
    /// body too large, bad query string, bad path segment), or a refusal with a status of its
    /// own (409, 413, 422, …): its status and reason.
    Rejected(StatusCode, Reason),
    /// The server is at its limit for this kind of request now (large reads, memory); retry
    /// in a second.
    Overloaded(Reason),
    /// The team behind the API, or its store, did not answer.
    Unavailable(Reason),
    Internal(Reason),
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::TooManyRequests(..) | AppError::Busy(_) => StatusCode::TOO_MANY_REQUESTS,
            AppError::Rejected(s, _) => *s,
            AppError::Unavailable(_) | AppError::Overloaded(_) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Why the request failed.
    pub fn reason(&self) -> &Reason {
        match self {
            AppError::BadRequest(r)
            | AppError::Unauthorized(r)
            | AppError::Forbidden(r)
            | AppError::NotFound(r)
            | AppError::TooManyRequests(r, _)
            | AppError::Busy(r)
            | AppError::Rejected(_, r)
            | AppError::Overloaded(r)
            | AppError::Unavailable(r)
            | AppError::Internal(r) => r,
        }
    }

    fn into_reason(self) -> Reason {
        match self {
            AppError::BadRequest(r)
            | AppError::Unauthorized(r)
            | AppError::Forbidden(r)
            | AppError::NotFound(r)
            | AppError::TooManyRequests(r, _)
            | AppError::Busy(r)
            | AppError::Rejected(_, r)
            | AppError::Overloaded(r)
            | AppError::Unavailable(r)
            | AppError::Internal(r) => r,
        }
    }

    /// The seconds a client is told to wait before trying again, for a failure that passes.
    fn retry_after(&self) -> Option<u64> {
        match self {
            AppError::TooManyRequests(_, secs) => Some((*secs).max(1)),
            AppError::Busy(_) | AppError::Overloaded(_) => Some(1),
            _ => None,
        }
    }
}

/// In English, as the logs say it.
impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.reason().fmt(f)
    }
}

impl std::error::Error for AppError {}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        // A busy answer is the server holding to its limits under load, not a fault.
        if status.is_server_error() && !matches!(self, AppError::Overloaded(_)) {
            tracing::warn!("api: {self}");
        }
        let retry = self.retry_after();
        let mut res = answer(status, self.into_reason(), Map::new());
        if let Some(secs) = retry {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        res
    }
}

/// The answer refusing a request for `reason`, with `status` and the body's `extra` fields:
/// its `message` in English, until [`in_team_language`] writes it in the team's.
pub fn answer(status: StatusCode, reason: Reason, extra: Map<String, Value>) -> Response {
    let body = Wording::english().body(&reason, extra.clone());
    let mut res = (status, axum::Json(body)).into_response();
    res.extensions_mut().insert(Worded {
        reason: Arc::new(reason),
        extra,
    });
    res
}

/// What an error answer was written from, kept on the response for [`in_team_language`].
#[derive(Clone)]
struct Worded {
    reason: Arc<Reason>,
    extra: Map<String, Value>,
}

/// The team's language and its catalog: what an error answer's `message` is written in.
#[derive(Clone)]
pub struct Wording {
    pub language: Language,
    pub texts: Arc<Texts>,
}

impl Wording {
    /// English, the built-in catalog (a team's default).
    pub fn english() -> Self {
        Wording {
            language: Language::En,
            texts: Texts::english(),
        }
    }

    /// The body of an answer refusing a request for `reason`, with `extra` fields after the
    /// four every error answer has.
    pub fn body(&self, reason: &Reason, extra: Map<String, Value>) -> Value {
        let error = reason.to_string();
        let message = match self.language {
            Language::En => error.clone(),
            _ => reason.render(&self.texts),
        };
        let mut body = Map::new();
        body.insert("success".into(), Value::Bool(false));
        body.insert("error_code".into(), reason.code().into());
        body.insert("error".into(), error.into());
        body.insert("message".into(), message.into());
        body.extend(extra);
        Value::Object(body)
    }
}

/// Writes every error answer's `message` in the team's language. Around the whole router, so
/// that the answers made outside the handlers (a 405, a refused token, an extractor's
/// rejection) are worded too; an English team's answers are left as they are.
pub async fn in_team_language(
    State(wording): State<Wording>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    let mut res = next.run(req).await;
    if wording.language == Language::En {
        return res;
    }
    let Some(worded) = res.extensions_mut().remove::<Worded>() else {
        return res;
    };
    let body = wording.body(&worded.reason, worded.extra);
    res.headers_mut().remove(header::CONTENT_LENGTH);
    *res.body_mut() = axum::body::Body::from(body.to_string());
    res
}

impl From<actix::MailboxError> for AppError {
    fn from(e: actix::MailboxError) -> Self {
        AppError::Unavailable(
            Fault::TeamNotRunning {
                detail: e.to_string(),
            }
            .into(),
        )
    }
}

impl From<JsonRejection> for AppError {
    fn from(r: JsonRejection) -> Self {
        let (status, detail) = (r.status(), r.body_text());
        let reason = match r {
            JsonRejection::JsonSyntaxError(_) => Malformed::Json { detail },
            JsonRejection::JsonDataError(_) => Malformed::JsonMismatch { detail },
            JsonRejection::MissingJsonContentType(_) => Malformed::NotJson { detail },
            _ => Malformed::Body { detail },
        };
        AppError::Rejected(status, reason.into())
    }
}

impl From<QueryRejection> for AppError {
    fn from(r: QueryRejection) -> Self {
        let detail = r.body_text();
        AppError::Rejected(r.status(), Malformed::Query { detail }.into())
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
        let detail = r.body_text();
        AppError::Rejected(status, Malformed::Path { detail }.into())
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
        .map(|a| {
            a.split(',')
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let reason = Malformed::MethodNotAllowed {
        method,
        path,
        takes,
    };
    let mut json =
        AppError::Rejected(StatusCode::METHOD_NOT_ALLOWED, reason.into()).into_response();
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
    use crate::api::reason::{Denied, Limited};
    use axum::routing::get;
    use tower::ServiceExt;

    async fn body_of(res: Response) -> Value {
        let body = axum::body::to_bytes(res.into_body(), 1 << 16)
            .await
            .unwrap();
        serde_json::from_slice(&body).unwrap()
    }

    #[tokio::test]
    async fn errors_answer_json_with_their_code_status_and_retry_after() {
        let reason = Limited::TooManyLogins { secs: 42 }.into();
        let res = AppError::TooManyRequests(reason, 42).into_response();
        assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(res.headers()[header::RETRY_AFTER], "42");
        let v = body_of(res).await;
        assert_eq!(v["success"], false);
        assert_eq!(v["error_code"], "too_many_logins");
        assert_eq!(v["error"], "too many failed logins; try again in 42 s");
        assert_eq!(
            v["message"], v["error"],
            "English until a team's layer words it"
        );
        let res = AppError::Forbidden(Denied::NotLoggedIn.into()).into_response();
        assert_eq!(res.status(), StatusCode::FORBIDDEN);
    }

    #[tokio::test]
    async fn the_team_layer_writes_the_message_in_the_teams_language() {
        let app = |language| {
            let wording = Wording {
                language,
                texts: Texts::builtin(language),
            };
            axum::Router::new()
                .route(
                    "/",
                    get(|| async { AppError::Unauthorized(Denied::LoginFailed.into()) }),
                )
                .layer(axum::middleware::from_fn_with_state(
                    wording,
                    in_team_language,
                ))
        };
        let ask = || Request::get("/").body(axum::body::Body::empty()).unwrap();
        let zh = body_of(app(Language::Zh).oneshot(ask()).await.unwrap()).await;
        assert_eq!(zh["error_code"], "login_failed");
        assert_eq!(zh["error"], "wrong human_agent_id or password");
        assert_eq!(zh["message"], "human_agent_id 或密码错误");
        let en = body_of(app(Language::En).oneshot(ask()).await.unwrap()).await;
        assert_eq!(en["message"], en["error"]);
    }
}
