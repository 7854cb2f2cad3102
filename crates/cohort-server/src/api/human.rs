//! The human REST API: log in as a human agent, send as that human (through its agent actor,
//! so a reply carries the wait id it answers), read the human's conversations and the
//! questions still waiting for an answer.

use super::client_addr::ClientAddr;
use super::error::{ApiJson, ApiPath};
use super::reason::{Denied, Fault, Limited, Malformed, Missing, Refused};
use super::{ApiState, AppError, Caller};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use cohort_core::event::trace_context::TraceParent;
use cohort_core::ids::{AgentId, StageRef, TaskId, WaitId};
use cohort_core::state::{ConversationPool, ExecutionState, PrivateMessage};
use cohort_core::step::{HumanError, HumanMessage, gives_a_goal};
use cohort_core::team::SyncError;
use cohort_runtime::actors::{HumanSend, SendRefused};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// An Argon2id hash (default parameters) of a password nobody has: checked against when the
/// id is unknown, so an unknown id costs as much time as a wrong password.
const DECOY_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$qIVw8Eu6JsTGe+zNRuUUXA$tGtxKMJ1YzfoJr2OQJ0mAH+O4pxycXXphB26DCfRazY";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BindBody {
    pub human_agent_id: String,
    pub password: String,
}

/// `POST /api/bind_human_agent {human_agent_id, password}` → `{success, human_agent_id, token}`.
/// Failed logins back off per client (see `login_limit`), and password checks wait in a short
/// line (see `password_checks`): a crowd of wrong logins gets 429s, not the server's memory.
pub async fn bind(
    State(state): State<ApiState>,
    from: ClientAddr,
    ApiJson(body): ApiJson<BindBody>,
) -> Result<Json<Value>, AppError> {
    let inner = &state.inner;
    let ip = from.client;
    let in_line = inner
        .password_checks
        .enter(ip)
        .map_err(|e| AppError::Busy(Limited::PasswordCheck(e).into()))?;
    let attempt = inner
        .limiter
        .begin(&body.human_agent_id, ip)
        .map_err(|secs| AppError::TooManyRequests(Limited::TooManyLogins { secs }.into(), secs))?;
    let id = AgentId::from(body.human_agent_id);
    let known = inner.humans.get(&id).map(|h| h.password_hash.clone());
    let is_known = known.is_some();
    let hash = known.unwrap_or_else(|| DECOY_HASH.to_owned());
    let verified = match in_line.verify(body.password, hash).await {
        Ok(v) => v,
        Err(e) => {
            // Nothing was checked: the attempt does not count as a failure.
            inner.limiter.succeeded(attempt);
            let failed = matches!(e, super::password_checks::CheckRefused::Failed(_));
            let reason = Limited::PasswordCheck(e).into();
            return Err(match failed {
                true => AppError::Internal(reason),
                false => AppError::Busy(reason),
            });
        }
    };
    if !(verified && is_known) {
        match from.peer.filter(|p| Some(*p) != ip) {
            Some(proxy) => tracing::info!(human = %id, ?ip, %proxy, "failed login"),
            None => tracing::info!(human = %id, ?ip, "failed login"),
        }
        return Err(AppError::Unauthorized(Denied::LoginFailed.into()));
    }
    inner.limiter.succeeded(attempt);
    let token = inner.sessions.open(id.clone()).await.map_err(|e| {
        let detail = e.to_string();
        AppError::Unavailable(Fault::SessionNotStored { detail }.into())
    })?;
    Ok(Json(
        json!({ "success": true, "human_agent_id": id, "token": token }),
    ))
}

/// `POST /api/logout`: ends the session of the token the request carries (any other session
/// of the same person stays open). `{success: true}`.
pub async fn logout(
    State(state): State<ApiState>,
    _caller: Caller,
    headers: axum::http::HeaderMap,
) -> Result<Json<Value>, AppError> {
    let token = super::bearer(&headers)
        .ok_or_else(|| AppError::Unauthorized(Denied::NoBearerToken.into()))?;
    state.inner.sessions.close(token).await.map_err(|e| {
        let detail = e.to_string();
        AppError::Unavailable(Fault::LogoutNotStored { detail }.into())
    })?;
    Ok(Json(json!({ "success": true })))
}

/// The body of `POST /api/send_message`. A field it does not know is refused (422 naming
/// it): a misspelt `need_replay: false` would otherwise send with `need_reply: true`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendBody {
    pub human_agent_id: AgentId,
    pub task_id: TaskId,
    pub receiver: Vec<AgentId>,
    pub content: String,
    #[serde(default = "no_relative")]
    pub stage_relative: StageRef,
    #[serde(default = "yes")]
    pub need_reply: bool,
    #[serde(default)]
    pub waiting: bool,
    #[serde(default)]
    pub wait_secs: Option<u64>,
    /// The ids of files uploaded to `POST /api/attachments`, sent with the message.
    #[serde(default)]
    pub attachments: Vec<String>,
    /// One of the team's named models for the receivers' work on the message (each receiver
    /// must list it in its `models`).
    #[serde(default)]
    pub llm: Option<String>,
    /// The MCP servers that work may use (of each receiver's tools; empty: none).
    #[serde(default)]
    pub mcp_servers: Option<Vec<String>>,
}

fn no_relative() -> StageRef {
    StageRef::NoRelative
}

fn yes() -> bool {
    true
}

impl SendBody {
    /// Who sends, and what; in the trace of `traceparent`, when the caller sent one.
    fn into_message(self, traceparent: Option<TraceParent>) -> (AgentId, HumanMessage) {
        let SendBody {
            human_agent_id,
            task_id,
            receiver,
            content,
            stage_relative,
            need_reply,
            waiting,
            wait_secs,
            attachments: _,
            llm,
            mcp_servers,
        } = self;
        let choice = cohort_core::state::Choice { llm, mcp_servers };
        let message = HumanMessage {
            attachments: Vec::new(),
            task_id,
            receiver,
            content,
            stage_relative,
            need_reply,
            waiting,
            wait_secs,
            traceparent,
            choice: (!choice.is_empty()).then_some(choice),
        };
        (human_agent_id, message)
    }
}

/// The caller's W3C trace context. One that cannot be read is ignored, as W3C Trace Context
/// asks of a receiver (the message's work then roots a trace of its own).
fn caller_trace(headers: &axum::http::HeaderMap) -> Option<TraceParent> {
    let text = headers.get("traceparent")?.to_str().ok()?;
    match text.parse() {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::debug!("a request's traceparent is ignored: {e}");
            None
        }
    }
}

use super::STORE_DEADLINE;

/// `POST /api/send_message` → `{success, message, sent: [Message]}`.
pub async fn send_message(
    State(state): State<ApiState>,
    caller: Caller,
    headers: axum::http::HeaderMap,
    ApiJson(mut body): ApiJson<SendBody>,
) -> Result<Json<Value>, AppError> {
    let files = std::mem::take(&mut body.attachments);
    // A goal (a message in the base task) joins the caller's trace; a message in a task
    // travels in the task's trace whoever sends it (SyncState puts it there).
    let traceparent = caller_trace(&headers).filter(|_| body.task_id == state.inner.base_task);
    let (sender, mut m) = body.into_message(traceparent);
    caller.must_be(&sender)?;
    m.attachments = super::attachments::resolve(&state, &files).await?;
    let human = state.human(&sender)?;
    check_reach(&state, &caller, &m)?;
    check_room(&state, &m)?;
    check_choice(&state, &m)?;
    admit_goal(&state, &sender, &m)?;
    let sent = human.send(HumanSend(m)).await?.map_err(|e| match e {
        SendRefused::Human(e @ HumanError::BadAnswer { .. }) => {
            AppError::Rejected(StatusCode::UNPROCESSABLE_ENTITY, Refused::Message(e).into())
        }
        SendRefused::Human(e) => AppError::BadRequest(Refused::Message(e).into()),
        SendRefused::Refused(e @ cohort_core::team::SyncError::MemoryFull { .. }) => {
            AppError::Overloaded(e.into())
        }
        SendRefused::Refused(e) => AppError::BadRequest(e.into()),
        SendRefused::NotRunning(detail) => {
            AppError::Unavailable(Fault::TeamNotRunning { detail }.into())
        }
    })?;
    // Acknowledged only once stored (with a store): the person's send is on record before
    // they are told it went out.
    let monitor = &state.inner.monitor;
    let recorded = monitor.assigned_version();
    match tokio::time::timeout(STORE_DEADLINE, monitor.durable(recorded)).await {
        Ok(true) => {}
        _ => {
            return Err(AppError::Unavailable(Fault::MessageNotConfirmed.into()));
        }
    }
    let note = match sent.len() {
        1 => "sent to 1 receiver".to_owned(),
        n => format!("sent to {n} receivers"),
    };
    Ok(Json(
        json!({ "success": true, "message": note, "sent": sent }),
    ))
}

/// A goal (a message in the base task that answers nothing) is taken only within seed 000
/// §10.3's caps: the tasks running, and the goals its sender gave lately
/// ([`super::goal_limit`]).
fn admit_goal(state: &ApiState, sender: &AgentId, m: &HumanMessage) -> Result<(), AppError> {
    let base = &state.inner.base_task;
    let running = state.inner.monitor.read(|s| {
        let person = s.agents.get(sender)?;
        gives_a_goal(person, m, base).then(|| {
            s.tasks
                .values()
                .filter(|t| &t.task_id != base && t.execution_state == ExecutionState::Running)
                .count()
        })
    });
    let Some(running) = running else {
        return Ok(());
    };
    state.inner.goals.admit(sender, running).map_err(|held| {
        let secs = held.retry_after();
        AppError::TooManyRequests(Limited::Goal(held).into(), secs)
    })
}

/// A member posts only into their own tasks, to agents they can see.
fn check_reach(state: &ApiState, caller: &Caller, m: &HumanMessage) -> Result<(), AppError> {
    let outside = state.inner.monitor.read(|s| {
        let view = caller.view(s);
        if !view.sees_task(&m.task_id) {
            let task = m.task_id.clone();
            return Some(Denied::NotInTask { task });
        }
        m.receiver
            .iter()
            .find(|r| !view.sees_agent(r))
            .map(|r| Denied::ReceiverOutOfReach { agent: r.clone() })
    });
    match outside {
        Some(why) => Err(AppError::Forbidden(why.into())),
        None => Ok(()),
    }
}

/// The model and MCP servers the message chooses are ones each receiver may be given.
fn check_choice(state: &ApiState, m: &HumanMessage) -> Result<(), AppError> {
    let Some(choice) = &m.choice else {
        return Ok(());
    };
    let refused = state.inner.monitor.read(|s| {
        m.receiver
            .iter()
            .filter_map(|r| s.agents.get(r))
            .find_map(|a| choice.check(a).err())
    });
    match refused {
        Some(why) => Err(AppError::Rejected(
            StatusCode::UNPROCESSABLE_ENTITY,
            Refused::Choice(why).into(),
        )),
        None => Ok(()),
    }
}

/// The message fits (checked here first because the agent records the send, and marks the
/// question it answers as replied, before SyncState sees the message), its task and receivers
/// exist, and each receiver has room for it.
fn check_room(state: &ApiState, m: &HumanMessage) -> Result<(), AppError> {
    let limit = state.inner.message_chars;
    let chars = m.content.chars().count();
    if chars > limit {
        return Err(AppError::Rejected(
            StatusCode::PAYLOAD_TOO_LARGE,
            Malformed::MessageTooLong { chars, limit }.into(),
        ));
    }
    let (task_known, unknown) = state.inner.monitor.read(|s| {
        (
            s.tasks.contains_key(&m.task_id),
            m.receiver
                .iter()
                .find(|r| !s.agents.contains_key(*r))
                .cloned(),
        )
    });
    // Worded as SyncState would refuse them, had the message reached it.
    if !task_known {
        let unknown = SyncError::UnknownTask(m.task_id.clone());
        return Err(AppError::NotFound(unknown.into()));
    }
    if let Some(r) = unknown {
        return Err(AppError::BadRequest(SyncError::UnknownAgent(r).into()));
    }
    if let Some(why) = state.inner.monitor.read(|s| {
        busy_receiver(
            s,
            &m.receiver,
            m.content.len(),
            state.inner.agent_queue_bytes,
        )
    }) {
        return Err(AppError::Overloaded(why.into()));
    }
    Ok(())
}

/// Why a message of `bytes` to `receivers` cannot be taken now: one of them has more than `cap`
/// bytes of steps queued (each message becomes a step; a person who posts faster than an agent
/// works would grow its queue without end). None when every receiver has room.
fn busy_receiver(
    s: &cohort_core::event::States,
    receivers: &[AgentId],
    bytes: usize,
    cap: usize,
) -> Option<Limited> {
    receivers.iter().find_map(|r| {
        let agent = s.agents.get(r)?;
        let queued: usize = agent
            .agent_step
            .todo()
            .filter_map(|id| agent.agent_step.get(id))
            .map(cohort_core::state::Held::held_bytes)
            .sum();
        (queued + bytes > cap).then(|| Limited::ReceiverBusy {
            agent: r.clone(),
            steps: agent.agent_step.todo_len(),
            bytes: queued,
        })
    })
}

/// `GET /api/human/{id}/conversations` → the human's `conversation_pool`, as stored (built
/// once per change of the team and shared by the person's tabs).
pub async fn conversations(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<AgentId>,
) -> Result<axum::response::Response, AppError> {
    caller.must_be(&id)?;
    state.human(&id)?;
    let monitor = state.inner.monitor.clone();
    let key = format!("conversations:{id}");
    let built = state
        .inner
        .reads
        .shared(key, monitor.version(), move || {
            let body = monitor.read(|s| {
                let pool = s.agents.get(&id).and_then(|a| a.conversation_pool.as_ref());
                match pool {
                    Some(p) => serde_json::to_vec(p),
                    None => serde_json::to_vec(&ConversationPool::default()),
                }
            });
            let body = body.map_err(|e| {
                let detail = e.to_string();
                AppError::Internal(Fault::Internal { detail }.into())
            })?;
            Ok(super::reads::Built {
                body: body.into(),
                headers: Vec::new(),
            })
        })
        .await?;
    Ok(super::states::respond(&built))
}

/// One message the human has not answered yet.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Pending {
    pub task_id: TaskId,
    pub sender_id: AgentId,
    pub content: String,
    pub stage_relative: StageRef,
    pub timestamp: String,
    /// Whether the sender is blocked until the answer arrives.
    pub waiting: bool,
    /// The wait id the answer will carry back (sent automatically by `/api/send_message`).
    pub return_waiting_id: Option<WaitId>,
    /// A structured question: the answer must fit it (an option, or a form's JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<cohort_core::state::Ask>,
}

/// `GET /api/human/{id}/pending` → `{human_agent_id, pending: [Pending]}`, oldest first.
pub async fn pending(
    State(state): State<ApiState>,
    caller: Caller,
    ApiPath(id): ApiPath<AgentId>,
) -> Result<Json<Value>, AppError> {
    caller.must_be(&id)?;
    state.human(&id)?;
    let pending = state.inner.monitor.read(|s| {
        s.agents
            .get(&id)
            .and_then(|a| a.conversation_pool.as_ref())
            .map(|p| pending_in(p, &id))
            .unwrap_or_default()
    });
    Ok(Json(json!({ "human_agent_id": id, "pending": pending })))
}

/// Messages from others that need a reply and have none yet, oldest first.
pub fn pending_in(pool: &ConversationPool, me: &AgentId) -> Vec<Pending> {
    let mut out: Vec<Pending> = pool
        .conversation_privates
        .values()
        .flatten()
        .filter(|p: &&PrivateMessage| &p.sender_id != me && p.need_reply && !p.replied)
        .map(|p| Pending {
            task_id: p.task_id.clone(),
            sender_id: p.sender_id.clone(),
            content: p.content.clone(),
            stage_relative: p.stage_relative.clone(),
            timestamp: p.timestamp.clone(),
            waiting: p.waiting,
            return_waiting_id: p.return_waiting_id.clone(),
            ask: p.ask.clone(),
        })
        .collect();
    // Timestamps are "%Y-%m-%d %H:%M:%S", so text order is time order; the sort is stable.
    out.sort_by(|a, b| a.timestamp.cmp(&b.timestamp));
    out
}

impl ApiState {
    fn human(
        &self,
        id: &AgentId,
    ) -> Result<&actix::Addr<cohort_runtime::actors::AgentActor>, AppError> {
        self.inner
            .humans
            .get(id)
            .map(|h| &h.addr)
            .ok_or_else(|| AppError::NotFound(Missing::Human { human: id.clone() }.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(sender: &str, need_reply: bool, replied: bool, ts: &str) -> PrivateMessage {
        PrivateMessage {
            attachments: Vec::new(),
            task_id: "t".into(),
            sender_id: sender.into(),
            content: format!("from {sender}"),
            stage_relative: StageRef::NoRelative,
            timestamp: ts.into(),
            need_reply,
            waiting: need_reply,
            return_waiting_id: need_reply.then(|| WaitId::from("w")),
            replied,
            ask: None,
            reply_by_ms: None,
        }
    }

    #[test]
    fn pending_lists_unanswered_questions_from_others_oldest_first() {
        let mut pool = ConversationPool::default();
        pool.conversation_privates.insert(
            "mgr".into(),
            vec![
                msg("mgr", true, true, "2025-01-01 10:00:00"),
                msg("mgr", true, false, "2025-01-01 10:05:00"),
                msg("alice", true, false, "2025-01-01 10:06:00"),
            ],
        );
        pool.conversation_privates.insert(
            "dev".into(),
            vec![
                msg("dev", false, false, "2025-01-01 09:00:00"),
                msg("dev", true, false, "2025-01-01 10:01:00"),
            ],
        );
        let p = pending_in(&pool, &"alice".into());
        let from: Vec<_> = p.iter().map(|p| p.sender_id.as_str()).collect();
        assert_eq!(from, ["dev", "mgr"]);
        assert_eq!(p[1].return_waiting_id, Some("w".into()));
    }

    #[test]
    fn a_message_waits_while_its_receiver_has_its_share_of_work_queued() {
        use cohort_core::event::{AgentChange, Change, StepChange};
        use cohort_core::state::{AgentState, Executor, Skill, StepState};
        let mut s = cohort_core::event::States::default();
        let agent = AgentState::new("w".into(), "W".into(), "worker".into(), "".into());
        s.apply(&Change::Agent(AgentChange::Added {
            agent: Box::new(agent),
        }));
        let receivers = [AgentId::from("w")];
        assert_eq!(busy_receiver(&s, &receivers, 1000, 50_000), None);
        for n in 0..5 {
            let step = StepState::new(
                "t".into(),
                StageRef::NoRelative,
                "w".into(),
                Executor::Skill(Skill::ProcessMessage),
                format!("message {n}"),
                "x".repeat(10_000),
            );
            s.apply(&Change::Step(StepChange::Added {
                agent_id: "w".into(),
                step: Box::new(step),
                list_at: n,
                todo_at: Some(n),
                remember: true,
            }));
        }
        let why = busy_receiver(&s, &receivers, 1000, 50_000).unwrap();
        let why = crate::api::reason::Reason::from(why).to_string();
        assert!(
            why.contains("5 steps") && why.contains("memory_mib"),
            "{why}"
        );
        assert_eq!(busy_receiver(&s, &receivers, 1000, 100_000), None);
    }

    #[test]
    fn the_decoy_hash_is_a_valid_argon2id_hash() {
        cohort_core::auth::check_hash(DECOY_HASH).unwrap();
    }
}
