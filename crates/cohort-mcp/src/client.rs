//! The one shared MCP client of a team (SPEC §8). It connects to a server lazily on first use,
//! keeps the session, caches the server's description, and serves every agent's calls
//! concurrently through that one session: no lock is held across a call, only a per-server
//! lock while connecting. A child server that dies fails the calls in flight at once
//! (`ServerGone`) and the next call starts it again; `shutdown` — or dropping the client —
//! stops every child process.

use super::process::{EXIT_GRACE, INHERITED_VARS, Process, spawn};
use super::schema::check_arguments;
use crate::cache::ResultCache;
use crate::describe::list;
use crate::elicit::{Askers, Elicitation, Elicitor, Handler};
use crate::oauth::{Consent, MOST_AUTHORIZATIONS, OAuth, TokenPlace};
use crate::sse::SseTransport;
use crate::standalone::{self, ServeError};
use cohort_core::call::McpCall;
use cohort_core::config::mcp_servers::{HttpFlavor, McpServerConfig, McpTransport};
use cohort_core::server_description::{ServerDescription, ToolDescription};
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, GetPromptRequestParams, JsonObject, ReadResourceRequestParams,
};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};
use rmcp::transport::common::client_side_sse::FixedInterval;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the client needs besides the server configs.
#[derive(Clone, Debug)]
pub struct McpOptions {
    /// The `cohort` binary: built-in servers run as `cohort mcp serve NAME -- ARGS…`.
    pub cohort_exe: PathBuf,
    /// The variables of our own environment children inherit (`INHERITED_VARS`: PATH, HOME).
    pub inherited_env: Vec<(String, String)>,
    /// The variables servers' `pass_env` name, as our environment has them.
    pub passed_env: BTreeMap<String, String>,
    /// Where the OAuth tokens of `url` servers are kept.
    pub oauth_tokens: TokenPlace,
    /// Who consents when a server needs an OAuth authorization (None: nobody; the call fails
    /// saying how to log in).
    pub consent: Option<SharedConsent>,
    /// A recorded run's tool calls, answering this client's calls instead of the servers
    /// (`cohort replay`; descriptions still come from the servers).
    pub replay: Option<Arc<crate::replay::ToolRecord>>,
    /// Variables given to the builtin servers only (the team's store, for attached files).
    pub builtin_env: BTreeMap<String, String>,
    /// The team's texts: why a tool is as risky as it is is said in its language.
    pub texts: Arc<cohort_core::texts::Texts>,
}

/// A [`Consent`] the options can carry.
#[derive(Clone)]
pub struct SharedConsent(pub Arc<dyn Consent>);

impl std::fmt::Debug for SharedConsent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedConsent")
    }
}

impl McpOptions {
    /// Options for a client started by `cohort_exe`; `vars` reads our environment, of which
    /// only `INHERITED_VARS` is passed on.
    pub fn new(cohort_exe: impl Into<PathBuf>, vars: &dyn Fn(&str) -> Option<String>) -> Self {
        let inherited_env = INHERITED_VARS
            .iter()
            .filter_map(|k| vars(k).map(|v| ((*k).to_owned(), v)))
            .collect();
        McpOptions {
            cohort_exe: cohort_exe.into(),
            inherited_env,
            passed_env: BTreeMap::new(),
            oauth_tokens: TokenPlace::from_env(vars),
            consent: None,
            replay: None,
            builtin_env: BTreeMap::new(),
            texts: cohort_core::texts::Texts::english(),
        }
    }

    /// These options with the variables `servers` name in their `pass_env`, read through
    /// `vars` (one that is not set is not passed).
    pub fn passing_env_of(
        mut self,
        servers: &[McpServerConfig],
        vars: &dyn Fn(&str) -> Option<String>,
    ) -> Self {
        for s in servers {
            let names: Vec<&String> = match &s.transport {
                McpTransport::Stdio { pass_env, .. } | McpTransport::Builtin { pass_env, .. } => {
                    pass_env.iter().collect()
                }
                // An OAuth client's secret is read by the client itself, never passed on.
                McpTransport::Http { oauth, .. } => oauth
                    .iter()
                    .filter_map(|o| o.client_secret_env.as_ref())
                    .collect(),
            };
            for name in names {
                if let Some(v) = vars(name) {
                    self.passed_env.insert(name.clone(), v);
                }
            }
        }
        self
    }
}

#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("no MCP server named `{0}`")]
    UnknownServer(String),
    #[error("cannot connect to MCP server `{server}`: {reason}")]
    Connect { server: String, reason: String },
    #[error("MCP server `{server}` did not answer within {after:?}")]
    Timeout { server: String, after: Duration },
    #[error("MCP server `{server}` went away during the call: {reason}")]
    ServerGone { server: String, reason: String },
    #[error("MCP server `{server}` has no tool `{tool}` (it has: {})", available.join(", "))]
    UnknownTool {
        server: String,
        tool: String,
        available: Vec<String>,
    },
    #[error("invalid arguments for tool `{tool}` of MCP server `{server}`: {reason}")]
    InvalidArguments {
        server: String,
        tool: String,
        reason: String,
    },
    #[error("tool `{tool}` of MCP server `{server}` failed: {message}")]
    ToolFailed {
        server: String,
        tool: String,
        message: String,
    },
    #[error("MCP server `{server}` refused the request: {reason}")]
    Request { server: String, reason: String },
    /// The server refused the request's parameters (JSON-RPC `invalid params`): for a tool
    /// call, its arguments (see `step::tool_refusal`).
    #[error("MCP server `{server}` refused the request's parameters: {reason}")]
    ParamsRefused { server: String, reason: String },
    #[error(
        "MCP server `{server}` refused the request without an authorization it accepts: {reason}"
    )]
    Unauthorized {
        server: String,
        /// Its `WWW-Authenticate` challenge (a 401 or a 403), which says what it wants.
        challenge: String,
        reason: String,
    },
    #[error("MCP server `{server}`: {reason}")]
    Authorization { server: String, reason: String },
    /// A replayed call's recorded failure, as it was said then.
    #[error("{0}")]
    Replayed(String),
    #[error(
        "tool `{tool}` of MCP server `{server}` answered outside its own output schema: {reason}"
    )]
    BadResult {
        server: String,
        tool: String,
        reason: String,
    },
}

impl McpError {
    /// Whether the failure may pass if the call is made again: the server did not answer in
    /// time, could not be reached, or went away during the call (see `policy::tool_retry`).
    /// A tool's own error, a refusal or bad arguments fail the same way again.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            McpError::Timeout { .. } | McpError::Connect { .. } | McpError::ServerGone { .. }
        )
    }
}

/// The shared client; hand it to agents as `Arc<McpClient>`.
pub struct McpClient {
    servers: Vec<McpServerConfig>,
    /// One per server, in the same order as `servers`.
    slots: Vec<Slot>,
    opts: McpOptions,
    closed: AtomicBool,
    /// Who answers a server's questions during a call.
    elicitation: Elicitation,
    /// The OAuth tokens of its `url` servers, and who consents.
    oauth: OAuth,
}

struct Slot {
    /// Held only while looking up or (re)connecting the session, never across a call.
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    /// The server's description once it was asked for (or answered from a replay's record).
    description: Mutex<Option<Arc<ServerDescription>>>,
    /// Who answers for each call under way (`call_asking`).
    askers: Arc<Askers>,
    /// Its read-only tools' results, when its file sets `cache_secs`.
    cache: Option<ResultCache>,
}

impl Slot {
    fn new(server: &McpServerConfig) -> Slot {
        Slot {
            session: tokio::sync::Mutex::default(),
            description: Mutex::default(),
            askers: Arc::default(),
            cache: server.cache.map(ResultCache::new),
        }
    }
}

struct Session {
    peer: Peer<RoleClient>,
    /// Taken by `close`; dropping it also ends the session.
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, Handler>>>,
    process: Option<Process>,
}

impl McpClient {
    /// A client that declines every question a server asks during a call.
    pub fn new(servers: Vec<McpServerConfig>, opts: McpOptions) -> Arc<McpClient> {
        Self::with_elicitation(servers, opts, Elicitation::Nobody)
    }

    /// A client whose servers' questions during a call (MCP elicitation) go where
    /// `elicitation` says.
    pub fn with_elicitation(
        servers: Vec<McpServerConfig>,
        opts: McpOptions,
        elicitation: Elicitation,
    ) -> Arc<McpClient> {
        let consent = opts.consent.clone().map(|c| c.0);
        Arc::new(McpClient {
            slots: servers.iter().map(Slot::new).collect(),
            servers,
            oauth: OAuth::new(opts.oauth_tokens.clone(), consent),
            opts,
            closed: AtomicBool::new(false),
            elicitation,
        })
    }

    pub fn server(&self, name: &str) -> Option<&McpServerConfig> {
        self.servers.iter().find(|s| s.name == name)
    }

    pub fn servers(&self) -> &[McpServerConfig] {
        &self.servers
    }

    /// The server's description if it was fetched already (never connects).
    pub fn cached_description(&self, server: &str) -> Option<Arc<ServerDescription>> {
        let i = self.servers.iter().position(|s| s.name == server)?;
        self.slots[i]
            .description
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// `tool` of `server` as its description fetched already tells it (never connects); `None`
    /// when not described yet or it has no such tool.
    pub fn cached_tool(&self, server: &str, tool: &str) -> Option<ToolDescription> {
        self.cached_description(server)?.tool(tool).cloned()
    }

    /// The server's instructions, tools (with their schemas and annotations), resources,
    /// resource templates and prompts; a capability the server lacks is an empty list. Cached
    /// after the first success.
    pub async fn describe(&self, server: &str) -> Result<Arc<ServerDescription>, McpError> {
        self.description(server, false).await
    }

    /// Whether `call` may be made again after a restart cut it off: reading a resource or a
    /// prompt always, a tool only when its annotations say it is read-only or idempotent (a
    /// server that cannot be asked says no).
    pub async fn safe_to_repeat(&self, server: &str, call: &McpCall) -> bool {
        match call {
            McpCall::Describe | McpCall::Resource { .. } | McpCall::Prompt { .. } => true,
            McpCall::Tool { name, .. } => match self.description(server, false).await {
                Ok(d) => d.tool(name).is_some_and(ToolDescription::repeatable),
                Err(e) => {
                    tracing::warn!(server, tool = %name, "cannot tell if the call may be repeated: {e}");
                    false
                }
            },
        }
    }

    /// The team's texts, which its risks' reasons are said in.
    pub fn texts(&self) -> &Arc<cohort_core::texts::Texts> {
        &self.opts.texts
    }

    /// How risky calling `tool` on `server` is: from its annotations and the server's `risk:`
    /// overrides. A server that cannot be asked makes the call HIGH.
    pub async fn tool_risk(&self, server: &str, tool: &str) -> cohort_core::policy::ToolRisk {
        let overrides = self
            .server(server)
            .map(|s| s.risk.clone())
            .unwrap_or_default();
        match self.description(server, false).await {
            Ok(d) => {
                let annotations = d.tool(tool).and_then(|t| t.annotations.as_ref());
                cohort_core::policy::judge(tool, annotations, &overrides, &self.opts.texts)
            }
            Err(e) if overrides.is_empty() => cohort_core::policy::ToolRisk {
                risk: cohort_core::policy::Risk::High,
                reason: self.opts.texts.risk_server_unreachable(e),
            },
            Err(_) => cohort_core::policy::judge(tool, None, &overrides, &self.opts.texts),
        }
    }

    /// The risk of each tool of `server` as its description fetched already tells it (never
    /// connects); `None` when it was not described yet.
    pub fn known_risks(
        &self,
        server: &str,
    ) -> Option<Vec<(String, cohort_core::policy::ToolRisk)>> {
        let description = self.cached_description(server)?;
        let overrides = self
            .server(server)
            .map(|s| s.risk.clone())
            .unwrap_or_default();
        let judged = |t: &ToolDescription| {
            let annotations = t.annotations.as_ref();
            let risk =
                cohort_core::policy::judge(&t.name, annotations, &overrides, &self.opts.texts);
            (t.name.clone(), risk)
        };
        Some(description.tools.iter().map(judged).collect())
    }

    /// [`call`](Self::call), with a question the server asks during it going to `asker`
    /// (a client made with [`Elicitation::PerCall`]).
    pub async fn call_asking(
        &self,
        server: &str,
        call: &McpCall,
        asker: Arc<dyn Elicitor>,
    ) -> Result<Value, McpError> {
        let (_, slot) = self.lookup(server)?;
        let _asking = slot.askers.asking(asker);
        self.call(server, call).await
    }

    /// Runs one call; a tool's result is the full `CallToolResult` as JSON.
    pub async fn call(&self, server: &str, call: &McpCall) -> Result<Value, McpError> {
        if let Some(record) = &self.opts.replay {
            match record.answer(server, call) {
                Some(Ok(described)) if matches!(call, McpCall::Describe) => {
                    // Described as then: what later prompts show of the server.
                    let (_, slot) = self.lookup(server)?;
                    match serde_json::from_value::<ServerDescription>(described.clone()) {
                        Ok(then) => *slot.description.lock().expect("poisoned") = Some(then.into()),
                        // Not a description this client wrote: the server describes itself
                        // when asked.
                        Err(e) => {
                            tracing::warn!(server, "its recorded description is unreadable: {e}")
                        }
                    }
                    return Ok(described);
                }
                Some(outcome) => return outcome.map_err(McpError::Replayed),
                // A fork's own way: the server is called.
                None if record.then_live() => {}
                None => {
                    return Err(McpError::Replayed(format!(
                        "replay: the recorded run made no such call to MCP server `{server}` \
                         (this run calls what the recorded one did not)"
                    )));
                }
            }
        }
        match call {
            McpCall::Describe => Ok(to_json(&*self.describe(server).await?)),
            McpCall::Tool { name, arguments } => self.call_tool(server, name, arguments).await,
            McpCall::Resource { uri } => {
                let params = ReadResourceRequestParams::new(uri.clone());
                let result = self
                    .request(server, |peer| {
                        let params = params.clone();
                        async move { peer.read_resource(params).await }
                    })
                    .await?;
                Ok(to_json(&result))
            }
            McpCall::Prompt { name, arguments } => {
                // Prompt arguments are strings in MCP; other JSON values go as their JSON
                // text, and a null means the argument was left out.
                let arguments: JsonObject = arguments
                    .iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| {
                        let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                        (k.clone(), Value::String(text))
                    })
                    .collect();
                let params = GetPromptRequestParams::new(name.clone()).with_arguments(arguments);
                let result = self
                    .request(server, |peer| {
                        let params = params.clone();
                        async move { peer.get_prompt(params).await }
                    })
                    .await?;
                Ok(to_json(&result))
            }
        }
    }

    /// Closes every session and stops every child process (each gets its stdin closed and
    /// `EXIT_GRACE` to exit, then is killed). Idempotent; later calls fail with `Connect`.
    pub async fn shutdown(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let closing = self.slots.iter().map(|slot| async move {
            let session = slot.session.lock().await.take();
            if let Some(session) = session {
                session.close().await;
            }
        });
        futures::future::join_all(closing).await;
    }

    async fn call_tool(
        &self,
        server: &str,
        tool: &str,
        arguments: &Map<String, Value>,
    ) -> Result<Value, McpError> {
        self.check_tool_call(server, tool, arguments).await?;
        let (_, slot) = self.lookup(server)?;
        let description = self.description(server, false).await?;
        // A read-only tool's result, when the server's results are cached and this call's is.
        let described = description.tool(tool);
        let cache = slot
            .cache
            .as_ref()
            .filter(|_| described.is_some_and(ToolDescription::only_reads));
        if let Some((mut json, age)) = cache.and_then(|c| c.get(tool, arguments)) {
            json["cached"] = json!({ "age_ms": age.as_millis() as u64 });
            return Ok(json);
        }
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments.clone());
        let result = self
            .request(server, |peer| {
                let params = params.clone();
                async move { peer.call_tool(params).await }
            })
            .await?;
        let json = to_json(&result);
        if result.is_error == Some(true) {
            return Err(McpError::ToolFailed {
                server: server.into(),
                tool: tool.into(),
                message: text_of(&json["content"]),
            });
        }
        let output = described.and_then(|t| t.output_schema.as_ref());
        if let Some(schema) = output.filter(|s| s.is_object()) {
            check_structured(schema, result.structured_content.as_ref()).map_err(|reason| {
                McpError::BadResult {
                    server: server.into(),
                    tool: tool.into(),
                    reason,
                }
            })?;
        }
        if let Some(c) = cache {
            c.put(tool, arguments, &json);
        }
        Ok(json)
    }

    /// Whether the server has `tool` and `arguments` fit its input schema (see
    /// `mcp::schema`), without calling it.
    pub async fn check_tool_call(
        &self,
        server: &str,
        tool: &str,
        arguments: &Map<String, Value>,
    ) -> Result<(), McpError> {
        let mut description = self.description(server, false).await?;
        if description.tool(tool).is_none() {
            // The server's tools may have changed since they were cached: look once more.
            description = self.description(server, true).await?;
        }
        let Some(described) = description.tool(tool) else {
            let names: BTreeSet<&String> = description.tools.iter().map(|t| &t.name).collect();
            return Err(McpError::UnknownTool {
                server: server.into(),
                tool: tool.into(),
                available: names.into_iter().cloned().collect(),
            });
        };
        check_arguments(&described.input_schema, arguments).map_err(|reason| {
            McpError::InvalidArguments {
                server: server.into(),
                tool: tool.into(),
                reason,
            }
        })
    }

    async fn description(
        &self,
        server: &str,
        refresh: bool,
    ) -> Result<Arc<ServerDescription>, McpError> {
        let (_, slot) = self.lookup(server)?;
        if !refresh && let Some(cached) = slot.description.lock().expect("poisoned").clone() {
            return Ok(cached);
        }
        let listed = Arc::new(self.request(server, list).await?);
        *slot.description.lock().expect("poisoned") = Some(listed.clone());
        Ok(listed)
    }

    fn lookup(&self, server: &str) -> Result<(&McpServerConfig, &Slot), McpError> {
        let i = self
            .servers
            .iter()
            .position(|s| s.name == server)
            .ok_or_else(|| McpError::UnknownServer(server.into()))?;
        Ok((&self.servers[i], &self.slots[i]))
    }

    /// Runs one request (see [`request_once`](Self::request_once)); a server that refuses it
    /// for want of an authorization is authorized as its challenge says (at most
    /// [`MOST_AUTHORIZATIONS`] times) and asked again.
    async fn request<T, F, Fut>(&self, server: &str, f: F) -> Result<T, McpError>
    where
        F: Fn(Peer<RoleClient>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let mut authorized = 0;
        loop {
            match self.request_once(server, &f).await {
                Err(McpError::Unauthorized { challenge, .. })
                    if authorized < MOST_AUTHORIZATIONS =>
                {
                    authorized += 1;
                    self.authorize(server, &challenge, authorized == 1).await?;
                }
                outcome => return outcome,
            }
        }
    }

    /// Authorizes `server` as its `challenge` asks (`may_refresh`: a refresh of the kept tokens
    /// may do), then drops its session: the next request connects with the new tokens.
    async fn authorize(
        &self,
        server: &str,
        challenge: &str,
        may_refresh: bool,
    ) -> Result<(), McpError> {
        let (config, slot) = self.lookup(server)?;
        let McpTransport::Http {
            url,
            oauth: Some(settings),
            ..
        } = &config.transport
        else {
            return Err(McpError::Authorization {
                server: server.into(),
                reason: format!(
                    "it asks for an OAuth authorization ({challenge}); add `oauth: {{}}` to {}",
                    config.file.display()
                ),
            });
        };
        let secret = settings
            .client_secret_env
            .as_ref()
            .and_then(|v| self.opts.passed_env.get(v).cloned());
        let file = config.file.display().to_string();
        self.oauth
            .authorize(
                (server, &file),
                url,
                (settings, secret),
                challenge,
                may_refresh,
            )
            .await
            .map_err(|e| McpError::Authorization {
                server: server.into(),
                reason: e.to_string(),
            })?;
        if let Some(old) = slot.session.lock().await.take() {
            old.close().await;
        }
        Ok(())
    }

    /// Runs one request on the server's session (connecting first if needed), bounded by the
    /// server's `call_timeout` and cut short if the server process dies meanwhile.
    async fn request_once<T, F, Fut>(&self, server: &str, f: &F) -> Result<T, McpError>
    where
        F: Fn(Peer<RoleClient>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let (config, slot) = self.lookup(server)?;
        let session = self.session(config, slot).await?;
        let after = config.call_timeout;
        // Dropping the request future (timeout, death) tells the server it was cancelled.
        let mut outcome = tokio::select! {
            result = tokio::time::timeout(after, f(session.peer.clone())) => match result {
                Ok(result) => result.map_err(|e| service_error(server, e)),
                Err(_) => Err(McpError::Timeout { server: server.into(), after }),
            },
            reason = session.died() => Err(McpError::ServerGone { server: server.into(), reason }),
        };
        if let Err(McpError::ServerGone { reason, .. }) = &mut outcome {
            // If the connection broke because the child died, say how it ended.
            if let Some(p) = &session.process
                && let Ok(died) = tokio::time::timeout(Duration::from_millis(500), p.died()).await
            {
                *reason = died;
            }
            // Forget the dead session (unless someone already replaced it): the next call
            // starts the server again.
            let mut current = slot.session.lock().await;
            if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &session)) {
                *current = None;
            }
        }
        outcome
    }

    /// The live session of a server, started if there is none or the last one died.
    async fn session(
        &self,
        config: &McpServerConfig,
        slot: &Slot,
    ) -> Result<Arc<Session>, McpError> {
        let mut current = slot.session.lock().await;
        if self.closed.load(Ordering::SeqCst) {
            return Err(McpError::Connect {
                server: config.name.clone(),
                reason: "the MCP client has been shut down".into(),
            });
        }
        if let Some(session) = current.as_ref().filter(|s| s.alive()) {
            return Ok(session.clone());
        }
        if let Some(dead) = current.take() {
            dead.close().await;
        }
        let session = Arc::new(self.connect(config, &slot.askers).await?);
        *current = Some(session.clone());
        Ok(session)
    }

    async fn connect(
        &self,
        config: &McpServerConfig,
        askers: &Arc<Askers>,
    ) -> Result<Session, McpError> {
        let handler = Handler::new(&config.name, self.elicitation.clone(), askers.clone());
        match &config.transport {
            McpTransport::Http { url, flavor, oauth } => {
                self.connect_http(config, (url, *flavor, oauth.is_some()), handler)
                    .await
            }
            McpTransport::Stdio {
                command,
                args,
                env,
                pass_env,
                cwd,
            } => {
                let launch = Launch {
                    program: PathBuf::from(command),
                    fixed: Vec::new(),
                    args,
                    env,
                    pass_env,
                    cwd,
                };
                self.connect_process(config, launch, handler).await
            }
            McpTransport::Builtin {
                server,
                args,
                env,
                pass_env,
                cwd,
            } => {
                let mut env = env.clone();
                env.extend(self.opts.builtin_env.clone());
                let launch = Launch {
                    program: self.opts.cohort_exe.clone(),
                    fixed: vec!["mcp", "serve", server.as_str(), "--"],
                    args,
                    env: &env,
                    pass_env,
                    cwd,
                };
                self.connect_process(config, launch, handler).await
            }
        }
    }

    /// A session over HTTP: with an OAuth token when the server's file has `oauth:` (a
    /// refusal for want of one comes back with the server's challenge), else as `flavor` says.
    async fn connect_http(
        &self,
        config: &McpServerConfig,
        (url, flavor, oauth): (&str, HttpFlavor, bool),
        handler: Handler,
    ) -> Result<Session, McpError> {
        let failed = |reason: String| McpError::Connect {
            server: config.name.clone(),
            reason,
        };
        let budget = config.connect_timeout;
        let service = if oauth {
            let manager = self
                .oauth
                .manager(url)
                .await
                .map_err(|e| failed(e.to_string()))?;
            authorized(url, budget, handler, manager)
                .await
                .map_err(|(challenge, reason)| match challenge {
                    Some(challenge) => McpError::Unauthorized {
                        server: config.name.clone(),
                        challenge,
                        reason,
                    },
                    None => failed(reason),
                })?
        } else {
            over_http(url, flavor, budget, handler)
                .await
                .map_err(failed)?
        };
        Ok(Session::new(service, None))
    }

    /// A session with a child process started as `launch` says, over its stdio.
    async fn connect_process(
        &self,
        config: &McpServerConfig,
        launch: Launch<'_>,
        handler: Handler,
    ) -> Result<Session, McpError> {
        let failed = |reason: String| McpError::Connect {
            server: config.name.clone(),
            reason,
        };
        let budget = config.connect_timeout;
        let mut env = launch.env.clone();
        for name in launch.pass_env {
            if let Some(v) = self.opts.passed_env.get(name) {
                env.insert(name.clone(), v.clone());
            }
        }
        let (process, stdin, stdout) = spawn(
            &config.name,
            &launch.program,
            &launch.fixed,
            launch.args,
            &env,
            launch.cwd,
            &self.opts.inherited_env,
        )
        .map_err(failed)?;
        let program = launch.program.display();
        // On any failure below, dropping `process` makes the reaper kill the child.
        let service = tokio::select! {
            result = tokio::time::timeout(budget, handler.serve((stdout, stdin))) => match result {
                Ok(Ok(service)) => service,
                Ok(Err(e)) => {
                    // Most often the process exited: say how, with its last stderr lines.
                    let why = tokio::time::timeout(Duration::from_millis(500), process.died())
                        .await
                        .unwrap_or_else(|_| format!("it is still running{}", process.stderr_note()));
                    return Err(failed(format!("{e}; {why}")));
                }
                Err(_) => return Err(failed(format!(
                    "`{program}` did not complete the MCP handshake within {budget:?}{}",
                    process.stderr_note()
                ))),
            },
            reason = process.died() => return Err(failed(reason)),
        };
        Ok(Session::new(service, Some(process)))
    }
}

/// How a server's child process is started: the program, its fixed arguments (a built-in
/// server's `mcp serve NAME --`), the file's arguments, environment and folder.
struct Launch<'a> {
    program: PathBuf,
    fixed: Vec<&'a str>,
    args: &'a [String],
    env: &'a BTreeMap<String, String>,
    pass_env: &'a [String],
    cwd: &'a std::path::Path,
}

/// A session with the server at `url` over the HTTP transport `flavor` names, within
/// `budget`. `Auto` tries streamable HTTP first and, when the server refuses it, the older
/// HTTP+SSE transport (MCP's own advice for a client that meets an older server).
async fn over_http(
    url: &str,
    flavor: HttpFlavor,
    budget: Duration,
    handler: Handler,
) -> Result<RunningService<RoleClient, Handler>, String> {
    let streamable = async |handler: Handler| {
        // A server that went away must fail the call in flight, not be reconnected to
        // forever (rmcp's default): two retries, a second apart.
        let mut retry = FixedInterval::default();
        retry.max_times = Some(2);
        let mut http = StreamableHttpClientTransportConfig::with_uri(url);
        http.retry_config = Arc::new(retry);
        let client = standalone::http_client().map_err(|e| Refused::Other(e.to_string()))?;
        match standalone::serve(client, http, handler, budget).await {
            Ok(service) => Ok(service),
            Err(ServeError::Timeout) => Err(Refused::Timeout(format!(
                "no answer from {url} within {budget:?}"
            ))),
            Err(ServeError::Refused(e)) => Err(Refused::Other(format!("{url}: {e}"))),
        }
    };
    let sse = async |handler: Handler| {
        let started = tokio::time::Instant::now();
        let transport = SseTransport::connect(url, budget)
            .await
            .map_err(|e| format!("{url} (SSE): {e}"))?;
        let left = budget.saturating_sub(started.elapsed());
        tokio::time::timeout(left, handler.serve(transport))
            .await
            .map_err(|_| format!("no answer from {url} (SSE) within {budget:?}"))?
            .map_err(|e| format!("{url} (SSE): {e}"))
    };
    match flavor {
        HttpFlavor::StreamableHttp => streamable(handler).await.map_err(Refused::into_reason),
        HttpFlavor::Sse => sse(handler).await,
        HttpFlavor::Auto => match streamable(handler.clone()).await {
            Ok(service) => Ok(service),
            // A server that does not answer at all is not asked a second way.
            Err(Refused::Timeout(why)) => Err(why),
            Err(Refused::Other(first)) => sse(handler).await.map_err(|second| {
                format!("it speaks neither streamable HTTP ({first}) nor HTTP+SSE ({second})")
            }),
        },
    }
}

/// A session with the OAuth-protected server at `url` over streamable HTTP, its requests
/// carrying the access token `manager` holds (refreshed when it runs out), within `budget`.
/// A refusal for want of an authorization comes back with the server's challenge.
async fn authorized(
    url: &str,
    budget: Duration,
    handler: Handler,
    manager: rmcp::transport::AuthorizationManager,
) -> Result<RunningService<RoleClient, Handler>, (Option<String>, String)> {
    let mut retry = FixedInterval::default();
    retry.max_times = Some(2);
    let mut http = StreamableHttpClientTransportConfig::with_uri(url);
    http.retry_config = Arc::new(retry);
    let client = rmcp::transport::AuthClient::new(reqwest::Client::default(), manager);
    match standalone::serve(client, http, handler, budget).await {
        Ok(service) => Ok(service),
        Err(ServeError::Refused(e)) => {
            let challenge = match &*e {
                rmcp::service::ClientInitializeError::TransportError { error, .. } => {
                    challenge_in(error)
                }
                _ => None,
            };
            Err((challenge, format!("{url}: {e}")))
        }
        Err(ServeError::Timeout) => Err((None, format!("no answer from {url} within {budget:?}"))),
    }
}

/// Why streamable HTTP did not start a session.
enum Refused {
    Timeout(String),
    Other(String),
}

impl Refused {
    fn into_reason(self) -> String {
        match self {
            Refused::Timeout(why) | Refused::Other(why) => why,
        }
    }
}

impl Session {
    fn new(service: RunningService<RoleClient, Handler>, process: Option<Process>) -> Session {
        Session {
            peer: service.peer().clone(),
            service: tokio::sync::Mutex::new(Some(service)),
            process,
        }
    }

    fn alive(&self) -> bool {
        !self.peer.is_transport_closed()
            && self
                .process
                .as_ref()
                .is_none_or(|p| p.gone.borrow().is_none())
    }

    /// Resolves (with the reason) when the server process has exited; never for HTTP.
    async fn died(&self) -> String {
        match &self.process {
            Some(p) => p.died().await,
            None => std::future::pending().await,
        }
    }

    /// Ends the session, then stops the child (closing its stdin first lets it exit cleanly).
    async fn close(&self) {
        let service = self.service.lock().await.take();
        if let Some(mut service) = service {
            let _ = service.close_with_timeout(EXIT_GRACE).await;
        }
        if let Some(p) = &self.process {
            if let Some(stop) = p.stop.lock().expect("poisoned").take() {
                let _ = stop.send(());
            }
            p.died().await;
        }
    }
}

fn service_error(server: &str, e: ServiceError) -> McpError {
    let server = server.to_owned();
    if let ServiceError::TransportSend(d) = &e
        && let Some(challenge) = challenge_in(d)
    {
        return McpError::Unauthorized {
            server,
            reason: e.to_string(),
            challenge,
        };
    }
    match e {
        ServiceError::McpError(data) if data.code == rmcp::model::ErrorCode::INVALID_PARAMS => {
            McpError::ParamsRefused {
                server,
                reason: data.message.into_owned(),
            }
        }
        ServiceError::McpError(data) => McpError::Request {
            server,
            reason: data.message.into_owned(),
        },
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => McpError::ServerGone {
            server,
            reason: format!("the connection closed ({e})"),
        },
        ServiceError::Timeout { timeout } => McpError::Timeout {
            server,
            after: timeout,
        },
        other => McpError::Request {
            server,
            reason: other.to_string(),
        },
    }
}

/// The `WWW-Authenticate` challenge of a 401 or 403 somewhere in `e`'s chain of causes.
fn challenge_in(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(challenge) = c
            .downcast_ref::<StreamableHttpError<reqwest::Error>>()
            .and_then(|h| h.auth_challenge())
        {
            return Some(challenge.to_owned());
        }
        cause = c.source();
    }
    None
}

/// Whether a tool's structured result fits its output schema: MCP has a tool that declares one
/// give its result as an object that fits it.
fn check_structured(schema: &Value, structured: Option<&Value>) -> Result<(), String> {
    match structured {
        None => Err("it declares an output schema but gave no structured content".into()),
        Some(Value::Object(content)) => check_arguments(schema, content),
        Some(other) => Err(format!("its structured content is not an object: {other}")),
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| json!({"unserializable": e.to_string()}))
}

/// The text blocks of a result's content, joined; the whole content if there are none.
fn text_of(content: &Value) -> String {
    let texts: Vec<&str> = content
        .as_array()
        .into_iter()
        .flatten()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect();
    if texts.is_empty() {
        content.to_string()
    } else {
        texts.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_structured_result_must_fit_the_output_schema_its_tool_declares() {
        let schema =
            json!({"type": "object", "properties": {"t": {"type": "number"}}, "required": ["t"]});
        assert_eq!(check_structured(&schema, Some(&json!({"t": 3}))), Ok(()));
        let wrong = check_structured(&schema, Some(&json!({"t": "hot"}))).unwrap_err();
        assert!(wrong.contains('t'), "{wrong}");
        let missing = check_structured(&schema, Some(&json!({}))).unwrap_err();
        assert!(missing.contains("missing required"), "{missing}");
        assert!(
            check_structured(&schema, None)
                .unwrap_err()
                .contains("no structured content")
        );
        assert!(
            check_structured(&schema, Some(&json!([1])))
                .unwrap_err()
                .contains("not an object")
        );
    }
}
