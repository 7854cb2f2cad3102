//! `cohort mcp conformance-client URL`: the client MCP's conformance suite
//! (`@modelcontextprotocol/conformance client`) drives, one scenario a run, named by
//! `MCP_CONFORMANCE_SCENARIO`. It is the team's own client ([`McpClient`], the one agents call
//! tools through), asked to do what each scenario checks; a question a server asks during a
//! call (elicitation) is answered as a person who leaves every field as offered would answer
//! it. In the `auth/*` scenarios the server wants OAuth: the client authorizes as the agents'
//! client does ([`crate::oauth`]), its consent given by the suite's authorization server at
//! once ([`FollowRedirect`]), its tokens in memory; a pre-registered client's id and secret
//! come in `MCP_CONFORMANCE_CONTEXT`.

use super::client::{McpClient, McpError, McpOptions};
use super::elicit::{Elicitation, Elicitor, Question};
use crate::oauth::{FollowRedirect, TokenPlace};
use cohort_core::call::McpCall;
use cohort_core::config::mcp_servers::{HttpFlavor, McpServerConfig, McpTransport, OAuthSettings};
use cohort_core::step::elicitation::ElicitationAnswer;
use futures::future::BoxFuture;
use serde_json::{Map, json};
use std::sync::Arc;
use std::time::Duration;

/// Why a scenario could not be run.
#[derive(Debug, thiserror::Error)]
pub enum ConformanceError {
    #[error("no scenario named `{0}` (this client knows: {known})", known = SCENARIOS.join(", "))]
    UnknownScenario(String),
    #[error("the server lists no tool `{0}`")]
    NoTool(String),
    #[error(transparent)]
    Mcp(#[from] McpError),
}

/// The scenarios this client knows: the suite's `core` client scenarios.
pub const SCENARIOS: &[&str] = &[
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
];

/// The address of this client's metadata document, named where an authorization server takes
/// URL client ids: the one the suite expects a client under test to name (it checks the id,
/// and fetches no document).
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// The variable a pre-registered client's secret is read from (set from the context here).
const SECRET_VAR: &str = "MCP_CONFORMANCE_CLIENT_SECRET";

/// What `MCP_CONFORMANCE_CONTEXT` gives: a pre-registered client.
#[derive(Debug, Default, serde::Deserialize)]
struct Context {
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    client_secret: Option<String>,
}

/// The name the client gives the server it tests.
const SERVER: &str = "under-test";

/// Answers every question by accepting the form as offered: nothing filled in, so the form's
/// defaults stand (SEP-1034: the client fills them in).
struct AcceptAsOffered;

impl Elicitor for AcceptAsOffered {
    fn ask(&self, _question: Question) -> BoxFuture<'static, ElicitationAnswer> {
        Box::pin(async { ElicitationAnswer::Accept(Map::new()) })
    }
}

/// Runs `scenario` against the server at `url`; `context` is `MCP_CONFORMANCE_CONTEXT`.
pub async fn run(
    url: &str,
    scenario: &str,
    context: Option<&str>,
    mut opts: McpOptions,
) -> Result<(), ConformanceError> {
    if !SCENARIOS.contains(&scenario) {
        return Err(ConformanceError::UnknownScenario(scenario.to_owned()));
    }
    let oauth = scenario.starts_with("auth/").then(|| {
        let context: Context = context
            .and_then(|c| serde_json::from_str(c).ok())
            .unwrap_or_default();
        if let Some(secret) = context.client_secret {
            opts.passed_env.insert(SECRET_VAR.into(), secret);
        }
        opts.oauth_tokens = TokenPlace::Memory;
        opts.consent = Some(crate::client::SharedConsent(Arc::new(FollowRedirect)));
        OAuthSettings {
            client_secret_env: context.client_id.as_ref().map(|_| SECRET_VAR.into()),
            client_id: context.client_id,
            client_metadata_url: Some(CLIENT_METADATA_URL.into()),
            scopes: Vec::new(),
        }
    });
    let server = McpServerConfig {
        risk: Default::default(),
        cache: None,
        name: SERVER.into(),
        description: format!("the conformance suite's server for `{scenario}`"),
        transport: McpTransport::Http {
            url: url.to_owned(),
            flavor: HttpFlavor::Auto,
            oauth,
        },
        call_timeout: Duration::from_secs(20),
        connect_timeout: Duration::from_secs(10),
        file: "conformance.yaml".into(),
    };
    let answerer = Elicitation::Always(Arc::new(AcceptAsOffered));
    let client = McpClient::with_elicitation(vec![server], opts, answerer);
    let done = act(&client, scenario).await;
    client.shutdown().await;
    done
}

/// What `scenario` asks of a client once it is connected.
async fn act(client: &McpClient, scenario: &str) -> Result<(), ConformanceError> {
    let described = client.describe(SERVER).await?;
    let tools: Vec<&str> = described.tools.iter().map(|t| t.name.as_str()).collect();
    let call = async |name: &str, arguments: serde_json::Value| {
        if !tools.contains(&name) {
            return Err(ConformanceError::NoTool(name.to_owned()));
        }
        let arguments = arguments.as_object().cloned().unwrap_or_default();
        let call = McpCall::Tool {
            name: name.to_owned(),
            arguments,
        };
        client.call(SERVER, &call).await?;
        Ok(())
    };
    match scenario {
        "tools_call" => call("add_numbers", json!({"a": 2, "b": 3})).await,
        "elicitation-sep1034-client-defaults" => {
            call("test_client_elicitation_defaults", json!({})).await
        }
        // A call whose answer comes after the server closed its stream and the client came
        // back for it.
        "sse-retry" => match tools.first() {
            Some(tool) => call(tool, json!({})).await,
            None => Err(ConformanceError::NoTool("(any)".into())),
        },
        // Authorized, the client uses the server: it calls each tool.
        auth if auth.starts_with("auth/") => {
            for tool in &tools {
                call(tool, json!({})).await?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}
