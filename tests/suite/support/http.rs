//! Shared by the api and access tests: one request through the real router (tower
//! `oneshot`) and what came back, and the checks on an error reply.

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use serde_json::Value;
use tower::ServiceExt;

pub struct Reply {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub body: Value,
    pub text: String,
}

pub async fn call(
    app: &Router,
    method: &str,
    uri: &str,
    token: Option<&str>,
    body: Option<String>,
) -> Reply {
    let mut req = Request::builder()
        .method(Method::from_bytes(method.as_bytes()).unwrap())
        .uri(uri);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    if body.is_some() {
        req = req.header(header::CONTENT_TYPE, "application/json");
    }
    let req = req.body(body.map(Body::from).unwrap_or_default()).unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 24)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Reply {
        status,
        headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        text,
    }
}

pub async fn get(app: &Router, uri: &str, token: &str) -> Reply {
    call(app, "GET", uri, Some(token), None).await
}

pub async fn post(app: &Router, uri: &str, token: Option<&str>, body: Value) -> Reply {
    call(app, "POST", uri, token, Some(body.to_string())).await
}

/// A JSON error: the status, a code, a non-empty reason and its message.
pub fn assert_error(r: &Reply, status: StatusCode, what: &str) {
    assert_eq!(r.status, status, "{what}: {}", r.text);
    for field in ["error_code", "error", "message"] {
        assert!(
            r.body[field].as_str().is_some_and(|e| !e.is_empty()),
            "{what}: no `{field}` in {}",
            r.text
        );
    }
    assert_eq!(r.body["success"], false, "{what}: {}", r.text);
}

pub fn base_task(team: &cohort::actors::Team) -> String {
    team.base_task.as_str().to_owned()
}
