//! The HTTP face of a running team (SPEC §9): the human REST API (login, send, conversations,
//! pending questions), the states API, the websocket monitor feed and the web console's static
//! files, as one axum `Router` over an `ApiState` that holds only actor addresses and the
//! monitor. Handlers ask actors; they never touch actor state.
//!
//! - [`error`]: `AppError` (every failure as `{"success": false, "error_code": …, "error": …,
//!   "message": …}`, the message in the team's language) and extractors whose rejections
//!   become `AppError`s; [`reason`]: why a request failed, each failure with its code and its
//!   text in the team's catalog.
//! - [`session`]: the session table (login, logout, expiry).
//! - [`login_limit`]: the failed-login back-off.
//! - [`human`]: `POST /api/bind_human_agent`, `POST /api/send_message`, a human's conversations
//!   and pending questions.
//! - [`states`]: `GET /api/states?type=…` and `GET /api/state/{id}`; [`nodes`]: `GET
//!   /api/nodes`, where a team across machines runs.
//! - [`ws`]: `GET /ws?token=…`, the monitor feed (snapshot, then live events).
//! - [`feed_slots`]: the caps on open feeds, per person and in all; [`goal_limit`]: the caps on
//!   people's goals (tasks running, goals per person in a window).
//! - [`metrics`]: `GET /metrics`, the team's figures for Prometheus.
//! - [`server`]: serving connections under the `http:` limits; [`connections`]: what each
//!   open connection is doing, its deadline, and which one gives way when the table fills;
//!   [`body_deadline`]: a request's body must arrive in time.
//! - [`client_addr`]: who a request comes from (trusted reverse proxies);
//!   [`password_checks`]: the bound on password checks running at once.

pub mod access;
pub mod approvals;
pub mod attachments;
pub mod body_deadline;
pub mod client_addr;
pub mod connections;
pub mod console;
pub mod control;
pub mod error;
pub mod feed_slots;
pub mod flow_hub;
pub mod goal_limit;
pub mod human;
pub mod login_limit;
pub mod metrics;
pub mod nodes;
pub mod password_checks;
pub mod reads;
pub mod reason;
pub mod server;
pub mod session;
pub mod states;
pub mod task_events;
pub mod ws;

pub use error::{AppError, Wording};
pub use login_limit::LoginLimits;
pub use server::{serve, serve_router};
pub use session::SESSION_TTL;
pub use ws::FeedConfig;

use actix::Addr;
use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{MethodRouter, any, get, post};
use cohort_core::config::HumanEntry;
use cohort_core::ids::{AgentId, TaskId};
use cohort_runtime::actors::{AgentActor, Team};
use cohort_runtime::monitor::Monitor;
use login_limit::LoginLimiter;
use reason::{Denied, Missing, OperatorAction};
use session::Sessions;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::watch;

/// Largest request body accepted (larger ones get 413).
pub const BODY_LIMIT: usize = 64 * 1024;

/// How long a request waits for the store to confirm what it changed.
pub(crate) const STORE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// What the handlers share: actor addresses, the monitor, sessions. Cheap to clone.
#[derive(Clone)]
pub struct ApiState {
    inner: Arc<Inner>,
}

struct Inner {
    monitor: Monitor,
    /// Where verdicts on agents' tool calls go.
    dispatcher: Addr<cohort_runtime::actors::Dispatcher>,
    /// Where a person's control of tasks goes.
    sync: Addr<cohort_runtime::actors::SyncStateActor>,
    /// The base task, where everyone is (members see it only in part).
    base_task: TaskId,
    humans: HashMap<AgentId, HumanAccount>,
    sessions: Sessions,
    limiter: LoginLimiter,
    web_dir: Option<PathBuf>,
    allowed_origins: Vec<String>,
    feed: FeedConfig,
    feed_slots: Arc<feed_slots::FeedSlots>,
    goals: goal_limit::GoalLimiter,
    /// The longest message a person may send, in characters (the team's retention setting).
    message_chars: usize,
    /// The most bytes of steps an agent may have queued before a person's message to it waits.
    agent_queue_bytes: usize,
    /// Large reads, built a few at a time and shared.
    reads: reads::Reads,
    /// Where finished tasks that left memory are still read from.
    store: Option<Arc<dyn cohort_store::Store>>,
    /// The team's newest LLM calls, as sent and answered.
    calls: Arc<cohort_llm::recorded::CallLog>,
    /// Turns true when the server shuts down, so websocket feeds (which outlive the HTTP
    /// connection they were upgraded from) end too.
    closing: watch::Sender<bool>,
    /// How the server treats connections (`http:` in the team file).
    http: cohort_core::config::Http,
    /// Whose forwarded-for headers name the client (from `http.trusted_proxies`).
    proxies: client_addr::TrustedProxies,
    password_checks: password_checks::PasswordChecks,
    /// A node of a team across machines: the store that lists the nodes and leases, and how
    /// long a node unheard of counts as up (its lease's term, in ms).
    nodes: std::sync::OnceLock<(Arc<cohort_store::SqlStore>, u128)>,
    /// The team's tool servers, for the plan's risk a task's flow starts with.
    mcp: Option<Arc<cohort_mcp::McpClient>>,
    /// The task event streams' hub, started by the first follower.
    flow_hub: std::sync::OnceLock<Arc<flow_hub::FlowHub>>,
    /// The team's memory budget (`retention.memory_mib`), for the metrics of its use.
    memory: cohort_core::config::MemoryBudget,
    /// The team's language and catalog, which error answers' `message` is written in.
    wording: Wording,
    /// What became of the team's spans, when it sends traces.
    traces: Option<Arc<cohort_runtime::otel::TraceStats>>,
}

/// A person who can log in: their agent's address, their password hash and what they may see.
struct HumanAccount {
    addr: Addr<AgentActor>,
    password_hash: String,
    access: cohort_core::config::Access,
}

impl ApiState {
    /// `humans` are the team config's people (with their password hashes); each must be an
    /// agent of `team`. `allowed_origins` lists the exact `Origin`s (e.g.
    /// `http://localhost:8080`, or `*` for any) a browser may open the websocket from.
    pub fn new(
        team: &Team,
        humans: &[HumanEntry],
        web_dir: Option<PathBuf>,
        allowed_origins: Vec<String>,
    ) -> Self {
        let humans = humans
            .iter()
            .filter_map(|h| match team.agents.get(&h.id) {
                Some(addr) => Some((
                    h.id.clone(),
                    HumanAccount {
                        addr: addr.clone(),
                        password_hash: h.password_hash.clone(),
                        access: h.access,
                    },
                )),
                None => {
                    tracing::warn!(human = %h.id, "not an agent of the team; cannot log in");
                    None
                }
            })
            .collect();
        ApiState {
            inner: Arc::new(Inner {
                monitor: team.monitor.clone(),
                dispatcher: team.dispatcher.clone(),
                sync: team.sync.clone(),
                base_task: team.base_task.clone(),
                humans,
                sessions: Sessions::default(),
                limiter: LoginLimiter::new(LoginLimits::default()),
                web_dir,
                allowed_origins,
                feed: FeedConfig::default(),
                feed_slots: Arc::default(),
                goals: goal_limit::GoalLimiter::new(&cohort_core::config::Http::default()),
                message_chars: team.retention.message_chars,
                agent_queue_bytes: team.retention.memory.agent_queue(),
                reads: reads::Reads::default(),
                store: None,
                calls: team.calls.clone(),
                closing: watch::Sender::new(false),
                http: cohort_core::config::Http::default(),
                proxies: client_addr::TrustedProxies::default(),
                password_checks: password_checks::PasswordChecks::default(),
                nodes: std::sync::OnceLock::new(),
                mcp: team.mcp.clone(),
                flow_hub: std::sync::OnceLock::new(),
                traces: team.traces.as_ref().map(|t| t.stats()),
                memory: team.retention.memory,
                wording: Wording {
                    language: team.language,
                    texts: team.texts.clone(),
                },
            }),
        }
    }

    /// The task event streams' hub, started on first use.
    fn flow_hub(&self) -> Arc<flow_hub::FlowHub> {
        let inner = &self.inner;
        inner
            .flow_hub
            .get_or_init(|| {
                let mcp = inner.mcp.clone();
                let risk: flow_hub::RiskOf =
                    Arc::new(move |s, task| plan_risk(s, task, mcp.as_deref()));
                flow_hub::FlowHub::start(inner.monitor.clone(), risk)
            })
            .clone()
    }

    /// Other failed-login limits (call before the state is cloned).
    pub fn with_login_limits(mut self, limits: LoginLimits) -> Self {
        self.inner_mut().limiter = LoginLimiter::new(limits);
        self
    }

    /// The team's `http:` settings: connection limits for `serve`, and the trusted reverse
    /// proxies (call before the state is cloned).
    pub fn with_http(mut self, http: cohort_core::config::Http) -> Self {
        let inner = self.inner_mut();
        inner.proxies = client_addr::TrustedProxies::new(http.trusted_proxies.clone());
        inner.goals = goal_limit::GoalLimiter::new(&http);
        inner.http = http;
        self
    }

    /// At most `permits` password checks at once (default: one per core, at most four; call
    /// before the state is cloned).
    pub fn with_password_checks(mut self, permits: usize) -> Self {
        self.inner_mut().password_checks = password_checks::PasswordChecks::new(permits);
        self
    }

    /// The most password checks that ran at once so far.
    pub fn password_checks_peak(&self) -> usize {
        self.inner.password_checks.peak()
    }

    /// Other websocket feed settings (call before the state is cloned).
    pub fn with_feed_config(mut self, feed: FeedConfig) -> Self {
        self.inner_mut().feed = feed;
        self
    }

    /// The team's store: sessions kept in it (so people stay logged in across restarts),
    /// lasting `ttl`, and tasks that left memory read back from it (call before the state is
    /// cloned).
    pub async fn with_store(
        mut self,
        ttl: std::time::Duration,
        store: Arc<dyn cohort_store::Store>,
    ) -> Result<Self, cohort_store::StoreError> {
        self.inner_mut().sessions = Sessions::stored(ttl, store.clone()).await?;
        self.inner_mut().store = Some(store);
        Ok(self)
    }

    /// Serves as a node of a team across machines whose nodes and leases `store` lists; a node
    /// unheard of for `term` counts as gone (`GET /api/nodes`).
    pub fn show_nodes(&self, store: Arc<cohort_store::SqlStore>, term: std::time::Duration) {
        let _ = self.inner.nodes.set((store, term.as_millis()));
    }

    /// Sessions lasting `ttl`, in memory only (call before the state is cloned).
    pub fn with_session_ttl(mut self, ttl: std::time::Duration) -> Self {
        self.inner_mut().sessions = Sessions::with_ttl(ttl);
        self
    }

    fn inner_mut(&mut self) -> &mut Inner {
        Arc::get_mut(&mut self.inner).expect("configure ApiState before cloning it")
    }

    /// What `human` may see (a member, unless the team file says otherwise).
    pub fn access_of(&self, human: &AgentId) -> cohort_core::config::Access {
        self.inner
            .humans
            .get(human)
            .map_or(cohort_core::config::Access::Member, |h| h.access)
    }

    /// The team's language and catalog, which its error answers are worded in (the router's,
    /// the metrics listener's, a connection refused for want of room).
    pub fn wording(&self) -> Wording {
        self.inner.wording.clone()
    }

    /// Ends every open websocket feed (also done by `serve` when its shutdown signal fires).
    pub fn close_feeds(&self) {
        self.inner.closing.send_replace(true);
    }
}

/// The plan's risk of `task`: the highest of the tools its plan may call, as the team's tool
/// servers described them. A task's flow starts as it is made, before its manager planned its
/// stages, so its plan may then call the tools of any agent of the team.
fn plan_risk(
    s: &cohort_core::event::States,
    task: &TaskId,
    mcp: Option<&cohort_mcp::McpClient>,
) -> Option<cohort_core::event::flow::FlowRisk> {
    let (mcp, task) = (mcp?, s.tasks.get(task)?);
    let agents: Vec<&cohort_core::state::AgentState> = match task.stage_list.is_empty() {
        true => s.agents.values().collect(),
        false => task
            .task_group
            .iter()
            .filter_map(|a| s.agents.get(a))
            .collect(),
    };
    let servers: std::collections::BTreeSet<&str> = agents
        .into_iter()
        .flat_map(|a| a.tools.iter().map(String::as_str))
        .collect();
    cohort_core::event::flow::plan_risk(
        servers
            .into_iter()
            .map(|name| (name, mcp.known_risks(name))),
        mcp.texts(),
    )
}

/// One route that needs `Authorization: Bearer <token>`. The router is built from
/// `PROTECTED_ROUTES`, so every route listed there is protected and every protected route is
/// listed (the tests walk the table).
pub struct ApiRoute {
    pub method: &'static str,
    pub path: &'static str,
    /// A concrete path for this route (path parameters filled with the example human
    /// `alice`), for tests and docs.
    pub example: &'static str,
    handler: fn() -> MethodRouter<ApiState>,
}

pub const PROTECTED_ROUTES: &[ApiRoute] = &[
    ApiRoute {
        method: "POST",
        path: "/api/send_message",
        example: "/api/send_message",
        handler: || post(human::send_message),
    },
    ApiRoute {
        method: "POST",
        path: attachments::UPLOAD_PATH,
        example: "/api/attachments?name=notes.txt",
        handler: || {
            post(attachments::upload).layer(DefaultBodyLimit::max(attachments::UPLOAD_LIMIT))
        },
    },
    ApiRoute {
        method: "GET",
        path: "/api/attachments/{id}",
        example: "/api/attachments/no-such-file",
        handler: || get(attachments::download),
    },
    ApiRoute {
        method: "GET",
        path: "/api/human/{id}/conversations",
        example: "/api/human/alice/conversations",
        handler: || get(human::conversations),
    },
    ApiRoute {
        method: "GET",
        path: "/api/human/{id}/pending",
        example: "/api/human/alice/pending",
        handler: || get(human::pending),
    },
    ApiRoute {
        method: "GET",
        path: "/api/states",
        example: "/api/states?type=agent",
        handler: || get(states::states),
    },
    ApiRoute {
        method: "GET",
        path: "/api/state/{id}",
        example: "/api/state/alice",
        handler: || get(states::state),
    },
    ApiRoute {
        method: "GET",
        path: "/api/step/{id}/calls",
        example: "/api/step/no-such-step/calls",
        handler: || get(states::step_calls),
    },
    ApiRoute {
        method: "GET",
        path: "/api/blob/{id}",
        example: "/api/blob/no-such-blob",
        handler: || get(states::blob),
    },
    ApiRoute {
        method: "GET",
        path: "/metrics",
        example: "/metrics",
        handler: || get(metrics::metrics),
    },
    ApiRoute {
        method: "GET",
        path: "/api/nodes",
        example: "/api/nodes",
        handler: || get(nodes::nodes),
    },
    ApiRoute {
        method: "GET",
        path: "/api/approvals",
        example: "/api/approvals",
        handler: || get(approvals::approvals),
    },
    ApiRoute {
        method: "POST",
        path: "/api/step/{id}/approve",
        example: "/api/step/no-such-step/approve",
        handler: || post(approvals::approve),
    },
    ApiRoute {
        method: "POST",
        path: "/api/step/{id}/params",
        example: "/api/step/no-such-step/params",
        handler: || post(approvals::fill_params),
    },
    ApiRoute {
        method: "POST",
        path: "/api/step/{id}/reject",
        example: "/api/step/no-such-step/reject",
        handler: || post(approvals::reject),
    },
    ApiRoute {
        method: "POST",
        path: "/api/step/{id}/cancel",
        example: "/api/step/no-such-step/cancel",
        handler: || post(control::cancel_step),
    },
    ApiRoute {
        method: "GET",
        path: "/api/task/{id}/events",
        example: "/api/task/no-such-task/events",
        handler: || get(task_events::task_events),
    },
    ApiRoute {
        method: "POST",
        path: "/api/task/{id}/cancel",
        example: "/api/task/no-such-task/cancel",
        handler: || post(control::cancel_task),
    },
    ApiRoute {
        method: "POST",
        path: "/api/task/{id}/pause",
        example: "/api/task/no-such-task/pause",
        handler: || post(control::pause_task),
    },
    ApiRoute {
        method: "POST",
        path: "/api/task/{id}/resume",
        example: "/api/task/no-such-task/resume",
        handler: || post(control::resume_task),
    },
    ApiRoute {
        method: "POST",
        path: "/api/agent/{id}/pause",
        example: "/api/agent/manager/pause",
        handler: || post(control::pause_agent),
    },
    ApiRoute {
        method: "POST",
        path: "/api/agent/{id}/resume",
        example: "/api/agent/manager/resume",
        handler: || post(control::resume_agent),
    },
    ApiRoute {
        method: "POST",
        path: "/api/stage/{id}/cancel",
        example: "/api/stage/no-such-stage/cancel",
        handler: || post(control::cancel_stage),
    },
    ApiRoute {
        method: "POST",
        path: "/api/stage/{id}/retry",
        example: "/api/stage/no-such-stage/retry",
        handler: || post(control::retry_stage),
    },
    // Last: walking the table with one token, logging out ends it.
    ApiRoute {
        method: "POST",
        path: "/api/logout",
        example: "/api/logout",
        handler: || post(human::logout),
    },
];

/// The whole API: public login, the protected routes, the websocket, and the web console
/// (from `web_dir` when set, else the built-in one) for everything else.
pub fn router(state: ApiState) -> Router {
    let wording = state.wording();
    let protected = PROTECTED_ROUTES
        .iter()
        .fold(Router::new(), |r, route| {
            r.route(route.path, (route.handler)())
        })
        .route_layer(middleware::from_fn_with_state(state.clone(), require_token));
    let app = Router::new()
        .route("/api/bind_human_agent", post(human::bind))
        .route("/api/language", get(language))
        .merge(protected)
        .route("/api/{*rest}", any(no_such_route))
        .route("/ws", get(ws::upgrade));
    let app = match &state.inner.web_dir {
        Some(dir) => app.fallback_service(
            tower_http::services::ServeDir::new(dir).append_index_html_on_directories(true),
        ),
        None => app.fallback(console::embedded),
    };
    let app: Router = app
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            body_deadline::read_body_in_time,
        ))
        .with_state(state);
    // Around the whole router, not each route: axum adds a 405's `Allow` header outside the
    // routes' own layers. The team's language is outermost, so the 405 is worded too.
    let json_405 =
        tower::Layer::layer(&middleware::from_fn(error::method_not_allowed_as_json), app);
    let worded = tower::Layer::layer(
        &middleware::from_fn_with_state(wording, error::in_team_language),
        json_405,
    );
    Router::new().fallback_service(worded)
}

/// The team's language (`language:` in its team file), public: the console's sign-in page is
/// drawn in it before anyone signs in.
async fn language(State(state): State<ApiState>) -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "language": state.inner.wording.language.code() }))
}

/// A path under `/api/` that names no route: the answer lists the routes there are, so a
/// person guessing at the API (`/api/states/task`) is told what to use instead.
async fn no_such_route(method: axum::http::Method, uri: axum::http::Uri) -> AppError {
    let routes = ["POST /api/bind_human_agent", "GET /api/language"]
        .into_iter()
        .map(str::to_owned)
        .chain(
            PROTECTED_ROUTES
                .iter()
                .map(|r| format!("{} {}", r.method, r.path)),
        )
        .collect::<Vec<_>>()
        .join(", ");
    let path = uri.path().to_owned();
    AppError::NotFound(
        Missing::Route {
            method,
            path,
            routes,
        }
        .into(),
    )
}

/// The human a request's bearer token belongs to, and their access (set by `require_token`).
#[derive(Clone, Debug)]
pub struct Caller(pub AgentId, pub cohort_core::config::Access, pub TaskId);

impl Caller {
    /// 403 unless the caller is an operator; `what` says what only an operator does.
    pub fn must_be_operator(&self, what: OperatorAction) -> Result<(), AppError> {
        if self.1 == cohort_core::config::Access::Operator {
            Ok(())
        } else {
            Err(AppError::Forbidden(Denied::OperatorOnly(what).into()))
        }
    }

    /// Who shares built reads with whom: every operator sees the same, a member only their own.
    pub fn read_key(&self) -> String {
        match self.1 {
            cohort_core::config::Access::Operator => "all".into(),
            _ => format!("member:{}", self.0),
        }
    }

    /// What the caller may see, as the states are now.
    pub fn view(&self, s: &cohort_core::event::States) -> access::View {
        access::View::of(&self.0, self.1, Some(&self.2), s)
    }

    /// 403 unless the caller is `human`.
    pub fn must_be(&self, human: &AgentId) -> Result<(), AppError> {
        if &self.0 == human {
            Ok(())
        } else {
            let (holder, human) = (self.0.clone(), human.clone());
            Err(AppError::Forbidden(
                Denied::NotYourToken { holder, human }.into(),
            ))
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = AppError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, AppError> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| AppError::Unauthorized(Denied::NotLoggedIn.into()))
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Runs before every protected route (its body, at most [`BODY_LIMIT`], has been read within
/// the header timeout): 401 without a live token.
async fn require_token(
    State(state): State<ApiState>,
    mut req: Request,
    next: Next,
) -> Result<Response, AppError> {
    let token =
        bearer(req.headers()).ok_or_else(|| AppError::Unauthorized(Denied::NoToken.into()))?;
    let human = state
        .inner
        .sessions
        .human(token)
        .ok_or_else(|| AppError::Unauthorized(Denied::InvalidToken.into()))?;
    let access = state.access_of(&human);
    let base = state.inner.base_task.clone();
    req.extensions_mut().insert(Caller(human, access, base));
    Ok(next.run(req).await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn bearer_tokens_are_read_from_the_authorization_header() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer abc"),
        );
        assert_eq!(bearer(&h), Some("abc"));
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer  abc "),
        );
        assert_eq!(bearer(&h), Some("abc"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&h), None);
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer "));
        assert_eq!(bearer(&h), None);
    }

    #[test]
    fn every_protected_route_has_an_example_path() {
        for r in PROTECTED_ROUTES {
            // `/metrics` is where every Prometheus scraper looks by default, so it sits beside
            // the API rather than under it.
            let api = r.path.starts_with("/api/") && r.example.starts_with("/api/");
            assert!(api || (r.path == "/metrics" && r.example == "/metrics"));
            assert!(matches!(r.method, "GET" | "POST"));
        }
    }
}
