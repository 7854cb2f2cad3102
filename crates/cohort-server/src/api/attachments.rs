//! Files people attach to a goal or an answer: `POST /api/attachments?name=NAME` takes one
//! file as the request's body (its type in `Content-Type`), checks it (`attachment::check`),
//! and answers with its reference only once the store holds it; `GET /api/attachments/{id}`
//! gives it back; `send_message` names the references in `attachments`.

use super::error::{ApiPath, ApiQuery};
use super::reason::{Fault, Missing, Refused};
use super::{ApiState, AppError, Caller};
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use cohort_core::attachment::{self, Attachment, AttachmentId};
use serde::Deserialize;

/// The most bytes an upload's request body may have: one file at its cap.
pub const UPLOAD_LIMIT: usize = attachment::MOST_ATTACHMENT_BYTES;

/// The path uploads go to (their body may be larger than other requests').
pub const UPLOAD_PATH: &str = "/api/attachments";

/// Whether a request is an upload, whose body may carry one file at its cap.
pub fn is_upload(parts: &axum::http::request::Parts) -> bool {
    parts.method == axum::http::Method::POST && parts.uri.path() == UPLOAD_PATH
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadQuery {
    /// The file's name, as the person's file has it.
    name: String,
}

/// `POST /api/attachments?name=NAME` (the file as the body) → 201 `{success, attachment}`.
pub async fn upload(
    State(state): State<ApiState>,
    _caller: Caller,
    ApiQuery(q): ApiQuery<UploadQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, AppError> {
    let given = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = attachment::normalise_mime(given, &q.name);
    let file = attachment::check(&q.name, &mime, &body).map_err(|e| {
        let status = match e {
            attachment::AttachmentError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            attachment::AttachmentError::TypeNotTaken { .. } => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        AppError::Rejected(status, Refused::Attachment(e).into())
    })?;
    let store = store_of(&state)?;
    tokio::time::timeout(
        super::STORE_DEADLINE,
        store.put_attachment(file.clone(), body.to_vec()),
    )
    .await
    .map_err(|_| AppError::Unavailable(Fault::FileNotKeptInTime.into()))?
    .map_err(|e| {
        let detail = e.to_string();
        AppError::Unavailable(Fault::FileNotKept { detail }.into())
    })?;
    tracing::info!(id = %file.id, name = %file.name, bytes = file.bytes, "a file was attached");
    let body = serde_json::json!({ "success": true, "attachment": file });
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

/// `GET /api/attachments/{id}` → the file, as a download of its type. Any person logged in
/// may read one: its id comes from its name and bytes, known only to whom it was shown.
pub async fn download(
    State(state): State<ApiState>,
    _caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, AppError> {
    let gone = || AppError::NotFound(Missing::Attachment { id: id.clone() }.into());
    let wanted = AttachmentId::parse(&id).ok_or_else(gone)?;
    let store = store_of(&state)?;
    let (file, bytes) = store
        .attachment(&wanted, true)
        .await
        .map_err(unreadable)?
        .ok_or_else(gone)?;
    // Shown by the browser only where that is safe (images, PDF, plain text); saved
    // otherwise; never run (`nosniff`, and no type that could be a page).
    let disposition = format!("attachment; filename*=UTF-8''{}", percent(&file.name));
    let headers = [
        (header::CONTENT_TYPE, file.mime),
        (header::CONTENT_DISPOSITION, disposition),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
        (header::CACHE_CONTROL, "private, max-age=3600".to_owned()),
    ];
    Ok((headers, bytes).into_response())
}

/// The files `ids` name, as the store keeps them (a message refers to none it lacks).
pub async fn resolve(state: &ApiState, ids: &[String]) -> Result<Vec<Attachment>, AppError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    if ids.len() > attachment::MOST_ATTACHMENTS_PER_MESSAGE {
        let e = attachment::AttachmentError::TooMany(ids.len());
        return Err(AppError::Rejected(
            StatusCode::UNPROCESSABLE_ENTITY,
            Refused::Attachment(e).into(),
        ));
    }
    let store = store_of(state)?;
    let mut files = Vec::new();
    for id in ids {
        let unknown = || {
            let (id, path) = (id.clone(), UPLOAD_PATH);
            let why = Refused::AttachmentNotUploaded { id, path };
            AppError::Rejected(StatusCode::UNPROCESSABLE_ENTITY, why.into())
        };
        let wanted = AttachmentId::parse(id).ok_or_else(unknown)?;
        let found = store
            .attachment(&wanted, false)
            .await
            .map_err(unreadable)?
            .ok_or_else(unknown)?;
        if !files.iter().any(|f: &Attachment| f.id == found.0.id) {
            files.push(found.0);
        }
    }
    Ok(files)
}

fn store_of(state: &ApiState) -> Result<&std::sync::Arc<dyn cohort_store::Store>, AppError> {
    state
        .inner
        .store
        .as_ref()
        .ok_or_else(|| AppError::Rejected(StatusCode::CONFLICT, Refused::NoStore.into()))
}

fn unreadable(e: cohort_store::StoreError) -> AppError {
    let detail = e.to_string();
    AppError::Unavailable(Fault::StoreUnreadable { detail }.into())
}

/// `name` for a `filename*` parameter (RFC 8187): every byte outside the safe set escaped.
fn percent(name: &str) -> String {
    name.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_name_is_escaped_for_its_download_header() {
        assert_eq!(super::percent("a b/é.csv"), "a%20b%2F%C3%A9.csv");
    }
}
