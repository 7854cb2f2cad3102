//! The states API, read from the monitor's states (never from the actors):
//! `GET /api/states?type=task|stage|agent|step` → `{id: state}` a page at a time, and
//! `GET /api/state/{id}` → `{"kind", "state"}` for whichever kind has that id, and
//! `GET /api/step/{id}/calls` → the step's LLM calls as sent and answered.

use super::access::View;
use super::error::{ApiPath, ApiQuery};
use super::reads::Built;
use super::reason::{Fault, Malformed, Missing};
use super::{ApiState, AppError, Caller};
use axum::Json;
use axum::extract::RawQuery;
use axum::extract::State;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use cohort_core::ids::TaskId;
use cohort_runtime::monitor::StateKind;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatesQuery {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// At most this many states (default and maximum: [`PAGE_MAX`]).
    pub limit: Option<usize>,
    /// At most about this many bytes of JSON (default [`PAGE_BYTES`], at most
    /// [`PAGE_BYTES_MAX`]); a page always holds one state at least.
    pub max_bytes: Option<usize>,
    /// Only states whose id sorts after this one (the `x-cohort-next-after` of the page before).
    pub after: Option<String>,
    /// Only the states of this task (its stages, steps, group's agents; or the task itself).
    pub task: Option<TaskId>,
    /// Tasks with their pools (only with `task=`: a list of tasks gives their pools' sizes).
    #[serde(default)]
    pub full: bool,
}

/// The most states one `/api/states` answer holds.
pub const PAGE_MAX: usize = 1_000;
/// How many bytes a page holds unless asked otherwise, and the most it may be asked to hold.
pub const PAGE_BYTES: usize = 1 << 20;
pub const PAGE_BYTES_MAX: usize = 16 << 20;

/// The kind a `type=` names.
pub fn parse_kind(name: &str) -> Option<StateKind> {
    StateKind::parse(name)
}

/// What a page asks for, checked.
struct PageAsk {
    kind: StateKind,
    limit: usize,
    max_bytes: usize,
    after: Option<String>,
    task: Option<TaskId>,
    full: bool,
}

impl PageAsk {
    fn of(q: StatesQuery) -> Result<PageAsk, AppError> {
        let kinds = || {
            StateKind::ALL
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join("|")
        };
        let bad = |why: Malformed| AppError::BadRequest(why.into());
        let name = q
            .kind
            .ok_or_else(|| bad(Malformed::MissingType { kinds: kinds() }))?;
        let kind = parse_kind(&name).ok_or_else(|| {
            bad(Malformed::UnknownType {
                name: name.clone(),
                kinds: kinds(),
            })
        })?;
        let limit = match q.limit {
            Some(0) => return Err(bad(Malformed::LimitTooSmall)),
            Some(n) if n > PAGE_MAX => {
                return Err(bad(Malformed::LimitTooLarge { max: PAGE_MAX }));
            }
            Some(n) => n,
            None => PAGE_MAX,
        };
        let max_bytes = match q.max_bytes {
            Some(n) if !(1024..=PAGE_BYTES_MAX).contains(&n) => {
                return Err(bad(Malformed::MaxBytesOutOfRange {
                    max: PAGE_BYTES_MAX,
                }));
            }
            Some(n) => n,
            None => PAGE_BYTES,
        };
        if q.full && (kind != StateKind::Task || q.task.is_none()) {
            return Err(bad(Malformed::FullNeedsTask));
        }
        Ok(PageAsk {
            kind,
            limit,
            max_bytes,
            after: q.after,
            task: q.task,
            full: q.full,
        })
    }

    /// The page as `caller` sees it now: `{id: state}` in list order (steps by when they were
    /// created, the rest by id), as many as fit.
    fn build(&self, s: &cohort_core::event::States, view: &View) -> Built {
        let mut ids = s.ids(self.kind, self.task.as_ref());
        if *view != View::All {
            // Nothing of a task they cannot see, not even which of their agents are in it.
            if self.task.as_ref().is_some_and(|t| !view.sees_task(t)) {
                ids.clear();
            }
            ids.retain(|id| view.sees(s, self.kind, id));
        }
        let start = match &self.after {
            Some(a) => s.page_start(self.kind, &ids, a),
            None => 0,
        };
        let mut body = Vec::with_capacity(4096);
        body.push(b'{');
        // How many were shown, and how far down the ids the page went (some may be unreadable).
        let (mut shown, mut end) = (0, start);
        for id in ids[start..].iter().take(self.limit) {
            let state = if self.full {
                view.json(s, self.kind, id)
            } else {
                view.listed(s, self.kind, id)
            };
            let json = state.and_then(|s| serde_json::to_vec(&s).ok());
            let Some(json) = json else {
                end += 1;
                continue;
            };
            let entry = id.len() + json.len() + 4;
            if shown > 0 && body.len() + entry > self.max_bytes {
                break;
            }
            end += 1;
            if shown > 0 {
                body.push(b',');
            }
            serde_json::to_writer(&mut body, id).ok();
            body.push(b':');
            body.extend_from_slice(&json);
            shown += 1;
        }
        body.push(b'}');
        let mut headers = vec![("x-cohort-total", ids.len().to_string())];
        if end < ids.len() && end > start {
            headers.push(("x-cohort-next-after", ids[end - 1].clone()));
        }
        Built {
            body: body.into(),
            headers,
        }
    }
}

/// `GET /api/states?type=…[&limit=N][&max_bytes=B][&after=ID][&task=ID][&full=true]` →
/// `{id: state}` in list order (steps by when they were created, then id; the rest by id),
/// one page at a time (at most `limit` states and about
/// `max_bytes` of JSON). Tasks come without their pools (their sizes instead) unless one task's
/// `full` record is asked for. When more remain, the `x-cohort-next-after` header names the id
/// to ask `after`; `x-cohort-total` counts every match. The same page for the same person is
/// built once per change of the team and shared (see [`super::reads`]).
pub async fn states(
    State(state): State<ApiState>,
    caller: Caller,
    RawQuery(raw): RawQuery,
    ApiQuery(q): ApiQuery<StatesQuery>,
) -> Result<Response, AppError> {
    let ask = PageAsk::of(q)?;
    let monitor = state.inner.monitor.clone();
    let key = format!("states:{}:{}", caller.read_key(), raw.unwrap_or_default());
    let built = state
        .inner
        .reads
        .shared(key, monitor.version(), move || {
            Ok(monitor.read(|s| ask.build(s, &caller.view(s))))
        })
        .await?;
    Ok(respond(&built))
}

/// A shared answer as a response (its body is not copied).
pub fn respond(built: &Built) -> Response {
    let mut res = (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        built.body.clone(),
    )
        .into_response();
    for (name, value) in &built.headers {
        if let Ok(v) = HeaderValue::from_str(value) {
            res.headers_mut().insert(*name, v);
        }
    }
    res
}

/// `GET /api/state/{id}`: `{kind, state}` from memory; a finished task that left memory
/// (retention) comes from the store, as `{kind: "task", state, stages, archived: true}`.
pub async fn state(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, AppError> {
    // What a member may not see answers as if it did not exist: 404, never 403, so ids of
    // other people's work cannot be probed.
    let not_found = || AppError::NotFound(Missing::State { id: id.clone() }.into());
    let monitor = state.inner.monitor.clone();
    let key = format!("state:{}:{id}", caller.read_key());
    let (asked, who) = (id.clone(), caller.clone());
    // A task in full may hold megabytes of pools: built once per change and shared.
    let live = state
        .inner
        .reads
        .shared(key, monitor.version(), move || {
            Ok(monitor.read(|s| live_state(s, &who.view(s), &asked)))
        })
        .await?;
    match live.headers.first().map(|(_, v)| v.as_str()) {
        Some(LIVE) => return Ok(respond(&live)),
        Some(HIDDEN) => return Err(not_found()),
        _ => {}
    }
    let Some(store) = &state.inner.store else {
        return Err(not_found());
    };
    let view = state.inner.monitor.read(|s| caller.view(s));
    match cohort_store::stored_task(store.as_ref(), &TaskId::from(id.as_str())).await {
        // A member reads back only a task whose group held them.
        Ok(Some((task, _))) if view != View::All && !task.task_group.contains(&caller.0) => {
            Err(not_found())
        }
        Ok(Some((task, stages))) => Ok(Json(
            json!({ "kind": "task", "state": task, "stages": stages, "archived": true }),
        )
        .into_response()),
        Ok(None) => Err(not_found()),
        Err(e) => {
            let detail = e.to_string();
            Err(AppError::Internal(Fault::StoreReadFailed { detail }.into()))
        }
    }
}

/// Whether [`live_state`] found the state (its `x-cohort-state` header).
const LIVE: &str = "live";
const HIDDEN: &str = "hidden";
const GONE: &str = "gone";

/// `{kind, state}` of whichever kind has `id` in memory, as `view` may see it.
fn live_state(s: &cohort_core::event::States, view: &View, id: &str) -> Built {
    let found = StateKind::ALL.into_iter().find_map(|k| {
        let exists = s.json(k, id).is_some();
        exists.then(|| {
            view.json(s, k, id)
                .map(|st| json!({ "kind": k.name(), "state": st }))
        })
    });
    let (mark, body) = match found {
        Some(Some(v)) => (LIVE, serde_json::to_vec(&v).unwrap_or_default()),
        Some(None) => (HIDDEN, Vec::new()),
        None => (GONE, Vec::new()),
    };
    Built {
        body: body.into(),
        headers: vec![("x-cohort-state", mark.to_owned())],
    }
}

/// `GET /api/step/{id}/calls` → `{step_id, calls: [{system, prompt, reply | error, usage, …}],
/// kept}`: the step's LLM calls as sent and answered (a re-asked answer makes several), while
/// they are among the team's newest `kept` calls; a failed step's, also from the store once
/// they are not (after a restart; then with `"stored": true`). Operators only: a prompt carries the agent's
/// long-term memory and history from other work, which a member's view leaves out; to anyone
/// else the step is a 404.
pub async fn step_calls(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, AppError> {
    let step = cohort_core::ids::StepId::from(id.as_str());
    let seen = state
        .inner
        .monitor
        .read(|s| s.step(&step).is_some() && caller.view(s) == View::All);
    if !seen {
        return Err(AppError::NotFound(Missing::Step { step }.into()));
    }
    let calls = state.inner.calls.of_step(&step);
    if calls.is_empty()
        && let Some(stored) = stored_calls(&state, &step).await?
    {
        return Ok(Json(json!({
            "step_id": id,
            "calls": stored,
            "kept": cohort_llm::recorded::KEPT,
            "stored": true,
        })));
    }
    Ok(Json(json!({
        "step_id": id,
        "calls": calls,
        "kept": cohort_llm::recorded::KEPT,
    })))
}

/// A failed step's calls as the store kept them (they outlive a restart; the call log does
/// not), when the team has a store.
async fn stored_calls(
    state: &ApiState,
    step: &cohort_core::ids::StepId,
) -> Result<Option<Value>, AppError> {
    let Some(store) = &state.inner.store else {
        return Ok(None);
    };
    let json = store.step_calls(step).await.map_err(|e| {
        let detail = e.to_string();
        AppError::Internal(Fault::StoredCallsUnreadable { detail }.into())
    })?;
    Ok(json.and_then(|j| serde_json::from_str(&j).ok()))
}

/// `GET /api/blob/{id}` → an image or a sound a tool returned (see `call::media`), with its
/// MIME type: held in memory lately, else read from the store. Any person logged in may read
/// one: its id is the hash of its bytes, known only from a result they were shown.
pub async fn blob(
    State(state): State<ApiState>,
    _caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<axum::response::Response, AppError> {
    use axum::response::IntoResponse;
    let gone = || AppError::NotFound(Missing::Blob { id: id.clone() }.into());
    let blob_id = cohort_core::call::media::BlobId::parse(&id).ok_or_else(gone)?;
    let held = state.inner.monitor.blob(&blob_id).map(|b| (*b).clone());
    let blob = match (held, &state.inner.store) {
        (Some(b), _) => b,
        (None, Some(store)) => store
            .blob(&blob_id)
            .await
            .map_err(|e| {
                let detail = e.to_string();
                AppError::Unavailable(Fault::StoreUnreadable { detail }.into())
            })?
            .ok_or_else(gone)?,
        (None, None) => return Err(gone()),
    };
    let headers = [
        (axum::http::header::CONTENT_TYPE, blob.mime),
        // The same id is the same bytes for ever.
        (
            axum::http::header::CACHE_CONTROL,
            "private, max-age=31536000, immutable".to_owned(),
        ),
        (
            axum::http::header::X_CONTENT_TYPE_OPTIONS,
            "nosniff".to_owned(),
        ),
    ];
    Ok((headers, blob.bytes).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_are_the_four_kinds() {
        assert_eq!(parse_kind("step"), Some(StateKind::Step));
        assert_eq!(parse_kind("task"), Some(StateKind::Task));
        assert_eq!(parse_kind("Task"), None);
        assert_eq!(parse_kind(""), None);
    }
}
