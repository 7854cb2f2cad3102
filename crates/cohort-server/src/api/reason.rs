//! `Reason`: why a REST request failed, one variant per failure the API words, its facts typed.
//! Each has a stable English `code` (the answer's `error_code`, for programs) and its text in a
//! catalog's language (`render`: the answer's `error` in English, its `message` in the team's
//! language; see [`super::error`]). The failures are grouped by what went wrong: who asks
//! ([`Denied`]), what they ask for ([`Missing`]), how they ask ([`Malformed`]), what the team
//! will not do ([`Refused`]), the limits that hold them back ([`Limited`]), and what broke
//! ([`Fault`]). A domain error that words itself (`SyncError`, `HumanError`, …) is carried whole
//! and rendered through its own `render`; a library's or the store's error is carried as its
//! English `detail` inside a lead sentence of ours.

use super::feed_slots::SlotRefused;
use super::goal_limit::Held;
use super::password_checks::CheckRefused;
use axum::http::Method;
use cohort_core::attachment::AttachmentError;
use cohort_core::ids::{AgentId, StageId, StepId, TaskId};
use cohort_core::state::ChoiceError;
use cohort_core::step::HumanError;
use cohort_core::step::approval::VerdictError;
use cohort_core::step::cancel::CancelError;
use cohort_core::team::SyncError;
use cohort_core::texts::Texts;

/// Why a request failed.
#[derive(Debug, PartialEq)]
pub enum Reason {
    /// Who asks may not (a login, a token, an operator's right, what a member may reach).
    Denied(Denied),
    /// What is asked for is not there (or not for the caller to see).
    Missing(Missing),
    /// The request itself is wrong: its body, query, path, method or parameters.
    Malformed(Malformed),
    /// A well-formed request the team will not carry out.
    Refused(Refused),
    /// A limit holds the request back for now; retrying later may succeed.
    Limited(Limited),
    /// The team, its store or the server failed to answer.
    Fault(Fault),
}

impl Reason {
    /// The stable English code programs match on (`error_code`).
    pub fn code(&self) -> &'static str {
        match self {
            Reason::Denied(r) => r.code(),
            Reason::Missing(r) => r.code(),
            Reason::Malformed(r) => r.code(),
            Reason::Refused(r) => r.code(),
            Reason::Limited(r) => r.code(),
            Reason::Fault(r) => r.code(),
        }
    }

    /// The failure, in the language of `t`.
    pub fn render(&self, t: &Texts) -> String {
        match self {
            Reason::Denied(r) => r.render(t),
            Reason::Missing(r) => r.render(t),
            Reason::Malformed(r) => r.render(t),
            Reason::Refused(r) => r.render(t),
            Reason::Limited(r) => r.render(t),
            Reason::Fault(r) => r.render(t),
        }
    }
}

/// In English, as the answer's `error` and the logs say it.
impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(&Texts::english()))
    }
}

/// What only an operator may do, as a refusal names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperatorAction {
    SeeNodes,
    ReadMetrics,
    CancelStep,
    CancelTask,
    PauseTask,
    PauseAgent,
    CancelStage,
    RetryStage,
    Decide,
}

/// Who asks may not.
#[derive(Debug, PartialEq)]
pub enum Denied {
    LoginFailed,
    /// A logout without a bearer token.
    NoBearerToken,
    /// A protected route without `Authorization: Bearer`.
    NoToken,
    /// The websocket without `?token=`.
    NoTokenInUrl,
    InvalidToken,
    /// A handler reached without the caller `require_token` sets.
    NotLoggedIn,
    OperatorOnly(OperatorAction),
    /// A token of `holder` used for `human`.
    NotYourToken {
        holder: AgentId,
        human: AgentId,
    },
    NotInTask {
        task: TaskId,
    },
    ReceiverOutOfReach {
        agent: AgentId,
    },
    OriginNotAllowed {
        origin: String,
    },
}

impl Denied {
    fn code(&self) -> &'static str {
        match self {
            Denied::LoginFailed => "login_failed",
            Denied::NoBearerToken => "no_bearer_token",
            Denied::NoToken => "no_token",
            Denied::NoTokenInUrl => "no_token_in_url",
            Denied::InvalidToken => "invalid_token",
            Denied::NotLoggedIn => "not_logged_in",
            Denied::OperatorOnly(_) => "operator_only",
            Denied::NotYourToken { .. } => "not_your_token",
            Denied::NotInTask { .. } => "not_in_task",
            Denied::ReceiverOutOfReach { .. } => "receiver_out_of_reach",
            Denied::OriginNotAllowed { .. } => "origin_not_allowed",
        }
    }

    fn render(&self, t: &Texts) -> String {
        match self {
            Denied::LoginFailed => t.api_login_failed(),
            Denied::NoBearerToken => t.api_no_bearer_token(),
            Denied::NoToken => t.api_no_token(),
            Denied::NoTokenInUrl => t.api_no_token_in_url(),
            Denied::InvalidToken => t.api_invalid_token(),
            Denied::NotLoggedIn => t.api_not_logged_in(),
            Denied::OperatorOnly(what) => operator_only(*what, t),
            Denied::NotYourToken { holder, human } => t.api_not_your_token(holder, human),
            Denied::NotInTask { task } => t.api_not_in_task(task),
            Denied::ReceiverOutOfReach { agent } => t.api_receiver_out_of_reach(agent),
            Denied::OriginNotAllowed { origin } => t.api_origin_not_allowed(origin),
        }
    }
}

/// A whole sentence each: what only an operator does reads differently in each language.
fn operator_only(what: OperatorAction, t: &Texts) -> String {
    match what {
        OperatorAction::SeeNodes => t.api_operator_only_nodes(),
        OperatorAction::ReadMetrics => t.api_operator_only_metrics(),
        OperatorAction::CancelStep => t.api_operator_only_cancel_step(),
        OperatorAction::CancelTask => t.api_operator_only_cancel_task(),
        OperatorAction::PauseTask => t.api_operator_only_pause_task(),
        OperatorAction::PauseAgent => t.api_operator_only_pause_agent(),
        OperatorAction::CancelStage => t.api_operator_only_cancel_stage(),
        OperatorAction::RetryStage => t.api_operator_only_retry_stage(),
        OperatorAction::Decide => t.api_operator_only_decide(),
    }
}

/// What is asked for is not there. A member asking for what they may not see is told the same,
/// so ids of other people's work cannot be probed.
#[derive(Debug, PartialEq)]
pub enum Missing {
    /// A path under `/api/` that names no route; `routes` lists those there are.
    Route {
        method: Method,
        path: String,
        routes: String,
    },
    Task {
        task: TaskId,
    },
    /// A task to follow that is not in memory.
    TaskInMemory {
        task: TaskId,
    },
    Stage {
        stage: StageId,
    },
    Step {
        step: StepId,
    },
    Agent {
        agent: AgentId,
    },
    Human {
        human: AgentId,
    },
    /// No task, stage, agent or step has this id.
    State {
        id: String,
    },
    Attachment {
        id: String,
    },
    Blob {
        id: String,
    },
    /// A path other than `/metrics` on the metrics listener.
    OnlyMetrics,
}

impl Missing {
    fn code(&self) -> &'static str {
        match self {
            Missing::Route { .. } => "no_such_route",
            Missing::Task { .. } => "no_such_task",
            Missing::TaskInMemory { .. } => "task_not_in_memory",
            Missing::Stage { .. } => "no_such_stage",
            Missing::Step { .. } => "no_such_step",
            Missing::Agent { .. } => "no_such_agent",
            Missing::Human { .. } => "no_such_human",
            Missing::State { .. } => "no_such_state",
            Missing::Attachment { .. } => "no_such_attachment",
            Missing::Blob { .. } => "no_such_blob",
            Missing::OnlyMetrics => "only_metrics_here",
        }
    }

    fn render(&self, t: &Texts) -> String {
        match self {
            Missing::Route {
                method,
                path,
                routes,
            } => t.api_no_such_route(method, path, routes),
            Missing::Task { task } => t.api_no_such_task(task),
            Missing::TaskInMemory { task } => t.api_task_not_in_memory(task),
            Missing::Stage { stage } => t.api_no_such_stage(stage),
            Missing::Step { step } => t.api_no_such_step(step),
            Missing::Agent { agent } => t.api_no_such_agent(agent),
            Missing::Human { human } => t.api_no_such_human(human),
            Missing::State { id } => t.api_no_such_state(id),
            Missing::Attachment { id } => t.api_no_such_attachment(id),
            Missing::Blob { id } => t.api_no_such_blob(id),
            Missing::OnlyMetrics => t.api_only_metrics(),
        }
    }
}

/// The request itself is wrong. A `detail` is axum's or the JSON reader's own words (English).
#[derive(Debug, PartialEq)]
pub enum Malformed {
    /// The body is not JSON.
    Json {
        detail: String,
    },
    /// The JSON body does not fit the route's (a field missing, unknown or of the wrong type).
    JsonMismatch {
        detail: String,
    },
    /// The body is not sent as JSON.
    NotJson {
        detail: String,
    },
    /// axum could not take the body.
    Body {
        detail: String,
    },
    Query {
        detail: String,
    },
    Path {
        detail: String,
    },
    NotAWebsocket {
        detail: String,
    },
    /// `takes`: the methods the path takes (empty: none).
    MethodNotAllowed {
        method: Method,
        path: String,
        takes: Vec<String>,
    },
    BodyTimeout {
        secs: u64,
    },
    BodyTooLarge {
        limit: usize,
    },
    /// Over its route's limit, as a standing-by node passing it on found.
    BodyOverRouteLimit,
    BodyUnreadable {
        detail: String,
    },
    /// A cancel's body that is neither empty nor `{reason}`.
    CancelBody {
        detail: String,
    },
    /// `/api/states` without `type`; `kinds` are those there are.
    MissingType {
        kinds: String,
    },
    UnknownType {
        name: String,
        kinds: String,
    },
    LimitTooSmall,
    LimitTooLarge {
        max: usize,
    },
    MaxBytesOutOfRange {
        max: usize,
    },
    /// `full` asked of more than one task.
    FullNeedsTask,
    /// An approval's body of no known shape.
    ApproveShape,
    /// Parameter values that are not a JSON object.
    ValuesNotObject,
    /// The websocket's parameters on the event stream.
    WebsocketOnlyParams,
    FlowNeedsTask,
    UnknownFormat {
        format: String,
    },
    /// A flow's parameters without `format=flow`.
    FlowOnlyParams,
    MessageTooLong {
        chars: usize,
        limit: usize,
    },
}

impl Malformed {
    fn code(&self) -> &'static str {
        use Malformed as M;
        match self {
            M::Json { .. } => "malformed_json",
            M::JsonMismatch { .. } => "json_mismatch",
            M::NotJson { .. } => "not_json",
            M::Body { .. } => "body_rejected",
            M::Query { .. } => "malformed_query",
            M::Path { .. } => "malformed_path",
            M::NotAWebsocket { .. } => "not_a_websocket",
            M::MethodNotAllowed { .. } => "method_not_allowed",
            M::BodyTimeout { .. } => "body_timeout",
            M::BodyTooLarge { .. } => "body_too_large",
            M::BodyOverRouteLimit => "body_over_route_limit",
            M::BodyUnreadable { .. } => "body_unreadable",
            M::CancelBody { .. } => "bad_cancel_body",
            M::MissingType { .. } => "missing_type",
            M::UnknownType { .. } => "unknown_type",
            M::LimitTooSmall => "limit_too_small",
            M::LimitTooLarge { .. } => "limit_too_large",
            M::MaxBytesOutOfRange { .. } => "max_bytes_out_of_range",
            M::FullNeedsTask => "full_needs_task",
            M::ApproveShape => "bad_approval",
            M::ValuesNotObject => "values_not_object",
            M::WebsocketOnlyParams => "websocket_only_params",
            M::FlowNeedsTask => "flow_needs_task",
            M::UnknownFormat { .. } => "unknown_format",
            M::FlowOnlyParams => "flow_only_params",
            M::MessageTooLong { .. } => "message_too_long",
        }
    }

    fn render(&self, t: &Texts) -> String {
        use Malformed as M;
        match self {
            M::Json { detail } => t.api_malformed_json(detail),
            M::JsonMismatch { detail } => t.api_json_mismatch(detail),
            M::NotJson { detail } => t.api_not_json(detail),
            M::Body { detail } => t.api_body_rejected(detail),
            M::Query { detail } => t.api_malformed_query(detail),
            M::Path { detail } => t.api_malformed_path(detail),
            M::NotAWebsocket { detail } => t.api_not_a_websocket(detail),
            M::MethodNotAllowed {
                method,
                path,
                takes,
            } => {
                let takes = match takes.is_empty() {
                    true => t.api_no_method(),
                    false => takes.join(", "),
                };
                t.api_method_not_allowed(method, path, takes)
            }
            M::BodyTimeout { secs } => t.api_body_timeout(secs),
            M::BodyTooLarge { limit } => t.api_body_too_large(limit),
            M::BodyOverRouteLimit => t.api_body_over_route_limit(),
            M::BodyUnreadable { detail } => t.api_body_unreadable(detail),
            M::CancelBody { detail } => t.api_bad_cancel_body(detail),
            M::MissingType { kinds } => t.api_missing_type(kinds),
            M::UnknownType { name, kinds } => t.api_unknown_type(name, kinds),
            M::LimitTooSmall => t.api_limit_too_small(),
            M::LimitTooLarge { max } => t.api_limit_too_large(max),
            M::MaxBytesOutOfRange { max } => t.api_max_bytes_out_of_range(max),
            M::FullNeedsTask => t.api_full_needs_task(),
            M::ApproveShape => t.api_approve_shape(),
            M::ValuesNotObject => t.api_values_not_object(),
            M::WebsocketOnlyParams => t.api_websocket_only_params(),
            M::FlowNeedsTask => t.api_flow_needs_task(),
            M::UnknownFormat { format } => t.api_unknown_format(format),
            M::FlowOnlyParams => t.api_flow_only_params(),
            M::MessageTooLong { chars, limit } => t.api_message_too_long(chars, limit),
        }
    }
}

/// A well-formed request the team will not carry out: the domain's own refusals, and the
/// API's.
#[derive(Debug, PartialEq)]
pub enum Refused {
    /// Not a message this person may send.
    Message(HumanError),
    /// The message's model or MCP servers do not fit a receiver.
    Choice(ChoiceError),
    /// The file cannot be attached.
    Attachment(AttachmentError),
    /// A message names a file not uploaded; `path` is where uploads go.
    AttachmentNotUploaded { id: String, path: &'static str },
    /// Attached files need the team's store, and it runs without one.
    NoStore,
    /// SyncState refused the message or the control.
    Sync(SyncError),
    /// The step could not be cancelled.
    Cancel(CancelError),
    /// The verdict was refused.
    Verdict(VerdictError),
    /// A rejection of a step that waits for no person.
    NotWaitingForVerdict { step: StepId },
    /// A rejection that would cancel the base task.
    BaseTaskNotCancelled,
    /// A rejection that cancels a task, without a reason.
    RejectionNeedsReason,
}

impl Refused {
    fn code(&self) -> &'static str {
        match self {
            Refused::Message(e) => human_code(e),
            Refused::Choice(ChoiceError::Model { .. }) => "model_not_allowed",
            Refused::Choice(ChoiceError::Server { .. }) => "mcp_server_not_allowed",
            Refused::Attachment(e) => attachment_code(e),
            Refused::AttachmentNotUploaded { .. } => "attachment_not_uploaded",
            Refused::NoStore => "no_store",
            Refused::Sync(e) => sync_code(e),
            Refused::Cancel(e) => cancel_code(e),
            Refused::Verdict(e) => verdict_code(e),
            Refused::NotWaitingForVerdict { .. } => "not_waiting_for_verdict",
            Refused::BaseTaskNotCancelled => "base_task_not_cancelled",
            Refused::RejectionNeedsReason => "rejection_needs_reason",
        }
    }

    fn render(&self, t: &Texts) -> String {
        match self {
            Refused::Message(e) => e.render(t),
            Refused::Choice(e) => e.render(t),
            Refused::Attachment(e) => e.render(t),
            Refused::AttachmentNotUploaded { id, path } => t.api_attachment_not_uploaded(id, path),
            Refused::NoStore => t.api_no_store(),
            Refused::Sync(e) => e.render(t),
            Refused::Cancel(e) => e.render(t),
            Refused::Verdict(e) => e.render(t),
            Refused::NotWaitingForVerdict { step } => t.api_not_waiting_for_verdict(step),
            Refused::BaseTaskNotCancelled => t.api_base_task_not_cancelled(),
            Refused::RejectionNeedsReason => t.api_rejection_needs_reason(),
        }
    }
}

fn human_code(e: &HumanError) -> &'static str {
    match e {
        HumanError::NotHuman(_) => "not_a_human",
        HumanError::NoReceiver => "no_receiver",
        HumanError::Empty => "empty_message",
        HumanError::ToSelf => "message_to_self",
        HumanError::BadWait => "bad_wait_secs",
        // The same failure as an upload's: the same code.
        HumanError::Attachments(e) => attachment_code(e),
        HumanError::BadAnswer { .. } => "answer_does_not_fit",
    }
}

fn attachment_code(e: &AttachmentError) -> &'static str {
    match e {
        AttachmentError::Empty => "empty_file",
        AttachmentError::TooLarge { .. } => "file_too_large",
        AttachmentError::BadName(_) => "bad_file_name",
        AttachmentError::TypeNotTaken { .. } => "file_type_not_taken",
        AttachmentError::NotItsType { .. } => "file_not_its_type",
        AttachmentError::TooMany(_) => "too_many_files",
    }
}

fn sync_code(e: &SyncError) -> &'static str {
    match e {
        SyncError::UnknownTask(_) => "unknown_task",
        SyncError::UnknownStage { .. } => "unknown_stage",
        SyncError::UnknownAgent(_) => "unknown_agent",
        SyncError::NotManager { .. } => "not_manager",
        SyncError::TaskOver(..) => "task_over",
        SyncError::BaseTask => "base_task_fixed",
        SyncError::StageNotRunning { .. } => "stage_not_running",
        SyncError::RunLimit { .. } => "stage_run_limit",
        SyncError::AddTaskOutsideBase(_) => "add_task_outside_base",
        SyncError::OpenTasks { .. } => "open_tasks_limit",
        SyncError::TasksPerGoal { .. } => "tasks_per_goal_limit",
        SyncError::StagesPerTask { .. } => "stages_per_task_limit",
        SyncError::BaseMessages { .. } => "base_messages_limit",
        SyncError::MemoryFull { .. } => "memory_full",
        SyncError::HollowFinish(_) => "hollow_finish",
        SyncError::Invalid(_) => "invalid",
    }
}

fn cancel_code(e: &CancelError) -> &'static str {
    match e {
        CancelError::NoStep(..) => "agent_has_no_step",
        CancelError::Over(..) => "step_over",
        CancelError::Ending(_) => "step_ending",
        CancelError::Unavailable(_) => "agent_did_not_answer",
    }
}

fn verdict_code(e: &VerdictError) -> &'static str {
    match e {
        VerdictError::NotWaiting(_) => "not_waiting_for_approval",
        VerdictError::StaleHash => "stale_hash",
        VerdictError::BadArguments => "arguments_not_object",
        VerdictError::NoReason => "reason_needed",
        VerdictError::WrongKind(..) => "wrong_kind_of_wait",
        VerdictError::BadPlan(_) => "plan_cannot_run",
        VerdictError::BadParams(_) => "params_do_not_fit",
        VerdictError::Unavailable(_) => "verdict_not_checked",
    }
}

/// A limit holds the request back for now.
#[derive(Debug, PartialEq)]
pub enum Limited {
    /// Too many failed logins; `secs` until the next try.
    TooManyLogins { secs: u64 },
    /// The password check could not run (or failed to).
    PasswordCheck(CheckRefused),
    /// A goal held back by seed 000 §10.3's caps.
    Goal(Held),
    /// No feed slot for the person, or the server.
    FeedSlot(SlotRefused),
    /// The most tasks are followed already.
    TooManyFollowed { max: usize },
    /// The most large reads are being built.
    ReadsBusy { reads: usize },
    /// A receiver has its share of work queued.
    ReceiverBusy {
        agent: AgentId,
        steps: usize,
        bytes: usize,
    },
    /// Every connection place is taken by one at work.
    TooManyConnections,
}

impl Limited {
    fn code(&self) -> &'static str {
        match self {
            Limited::TooManyLogins { .. } => "too_many_logins",
            Limited::PasswordCheck(CheckRefused::ClientBusy) => "login_in_progress",
            Limited::PasswordCheck(CheckRefused::Busy) => "password_checks_busy",
            Limited::PasswordCheck(CheckRefused::Failed(_)) => "password_check_failed",
            Limited::Goal(Held::Running { .. }) => "goal_held",
            Limited::Goal(Held::Rate { .. }) => "goal_rate_limited",
            Limited::FeedSlot(SlotRefused::PerPerson { .. }) => "feed_limit_per_person",
            Limited::FeedSlot(SlotRefused::Total { .. }) => "feed_limit_total",
            Limited::TooManyFollowed { .. } => "too_many_followed",
            Limited::ReadsBusy { .. } => "reads_busy",
            Limited::ReceiverBusy { .. } => "receiver_busy",
            Limited::TooManyConnections => "too_many_connections",
        }
    }

    fn render(&self, t: &Texts) -> String {
        match self {
            Limited::TooManyLogins { secs } => t.api_too_many_logins(secs),
            // A check that failed to run is the server's fault, said as one.
            Limited::PasswordCheck(e @ CheckRefused::Failed(_)) => t.api_internal(e.render(t)),
            Limited::PasswordCheck(e) => e.render(t),
            Limited::Goal(held) => held.render(t),
            Limited::FeedSlot(why) => why.render(t),
            Limited::TooManyFollowed { max } => t.api_too_many_followed(max),
            Limited::ReadsBusy { reads } => t.api_reads_busy(reads),
            Limited::ReceiverBusy {
                agent,
                steps,
                bytes,
            } => t.api_receiver_busy(agent, steps, bytes),
            Limited::TooManyConnections => t.api_too_many_connections(),
        }
    }
}

/// The team, its store or the server failed to answer. A `detail` is the mailbox's, the
/// store's or the library's own words (English).
#[derive(Debug, PartialEq)]
pub enum Fault {
    /// The team's actors are gone.
    TeamNotRunning {
        detail: String,
    },
    /// An agent on another node did not answer.
    AgentUnreachable {
        agent: AgentId,
        detail: String,
    },
    /// A message sent whose storing was not confirmed in time.
    MessageNotConfirmed,
    SessionNotStored {
        detail: String,
    },
    LogoutNotStored {
        detail: String,
    },
    /// The store cannot say whose a token is.
    SessionsUnreadable {
        detail: String,
    },
    /// The store did not answer.
    StoreUnavailable {
        detail: String,
    },
    StoreUnreadable {
        detail: String,
    },
    FileNotKeptInTime,
    FileNotKept {
        detail: String,
    },
    /// Reading a task back from the store failed.
    StoreReadFailed {
        detail: String,
    },
    StoredCallsUnreadable {
        detail: String,
    },
    /// A shared read failed to build.
    ReadFailed {
        detail: String,
    },
    /// Anything else that should not happen.
    Internal {
        detail: String,
    },
    /// Node `node` stands by and does not know which node runs the team.
    StandbyLeaderUnknown {
        node: String,
    },
    /// … its own previous run holds the team's lease.
    StandbyPreviousRun {
        node: String,
    },
    /// … the node it heard runs the team (`leader` at `address`) stands by too.
    StandbyLeaderStandingBy {
        node: String,
        leader: String,
        address: String,
    },
    /// … the node running the team cannot be reached.
    StandbyLeaderUnreachable {
        node: String,
        leader: String,
        address: String,
        detail: String,
    },
}

impl Fault {
    fn code(&self) -> &'static str {
        match self {
            Fault::TeamNotRunning { .. } => "team_not_running",
            Fault::AgentUnreachable { .. } => "agent_unreachable",
            Fault::MessageNotConfirmed => "message_not_confirmed",
            Fault::SessionNotStored { .. } => "session_not_stored",
            Fault::LogoutNotStored { .. } => "logout_not_stored",
            Fault::SessionsUnreadable { .. } => "sessions_unreadable",
            Fault::StoreUnavailable { .. } => "store_unavailable",
            Fault::StoreUnreadable { .. } => "store_unreadable",
            Fault::FileNotKeptInTime => "file_not_kept_in_time",
            Fault::FileNotKept { .. } => "file_not_kept",
            Fault::StoreReadFailed { .. } => "store_read_failed",
            Fault::StoredCallsUnreadable { .. } => "stored_calls_unreadable",
            Fault::ReadFailed { .. } => "read_failed",
            Fault::Internal { .. } => "internal_error",
            Fault::StandbyLeaderUnknown { .. } => "standby_leader_unknown",
            Fault::StandbyPreviousRun { .. } => "standby_previous_run",
            Fault::StandbyLeaderStandingBy { .. } => "standby_leader_standing_by",
            Fault::StandbyLeaderUnreachable { .. } => "standby_leader_unreachable",
        }
    }

    fn render(&self, t: &Texts) -> String {
        match self {
            Fault::TeamNotRunning { detail } => t.api_team_not_running(detail),
            Fault::AgentUnreachable { agent, detail } => t.api_agent_unreachable(agent, detail),
            Fault::MessageNotConfirmed => t.api_message_not_confirmed(),
            Fault::SessionNotStored { detail } => t.api_session_not_stored(detail),
            Fault::LogoutNotStored { detail } => t.api_logout_not_stored(detail),
            Fault::SessionsUnreadable { detail } => t.api_sessions_unreadable(detail),
            Fault::StoreUnavailable { detail } => t.api_store_unavailable(detail),
            Fault::StoreUnreadable { detail } => t.api_store_unreadable(detail),
            Fault::FileNotKeptInTime => t.api_file_not_kept_in_time(),
            Fault::FileNotKept { detail } => t.api_file_not_kept(detail),
            Fault::StoreReadFailed { detail } => t.api_store_read_failed(detail),
            Fault::StoredCallsUnreadable { detail } => t.api_stored_calls_unreadable(detail),
            Fault::ReadFailed { detail } => t.api_read_failed(detail),
            Fault::Internal { detail } => t.api_internal(detail),
            Fault::StandbyLeaderUnknown { node } => t.api_standby_leader_unknown(node),
            Fault::StandbyPreviousRun { node } => t.api_standby_previous_run(node),
            Fault::StandbyLeaderStandingBy {
                node,
                leader,
                address,
            } => t.api_standby_leader_standing_by(node, leader, address),
            Fault::StandbyLeaderUnreachable {
                node,
                leader,
                address,
                detail,
            } => t.api_standby_leader_unreachable(node, leader, address, detail),
        }
    }
}

impl From<Denied> for Reason {
    fn from(r: Denied) -> Self {
        Reason::Denied(r)
    }
}

impl From<Missing> for Reason {
    fn from(r: Missing) -> Self {
        Reason::Missing(r)
    }
}

impl From<Malformed> for Reason {
    fn from(r: Malformed) -> Self {
        Reason::Malformed(r)
    }
}

impl From<Refused> for Reason {
    fn from(r: Refused) -> Self {
        Reason::Refused(r)
    }
}

impl From<Limited> for Reason {
    fn from(r: Limited) -> Self {
        Reason::Limited(r)
    }
}

impl From<Fault> for Reason {
    fn from(r: Fault) -> Self {
        Reason::Fault(r)
    }
}

impl From<SyncError> for Reason {
    fn from(e: SyncError) -> Self {
        Reason::Refused(Refused::Sync(e))
    }
}

#[cfg(test)]
mod tests;
