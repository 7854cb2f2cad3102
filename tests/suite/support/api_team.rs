//! Shared by the api, ws and console tests: starts the fixture team (a scripted manager plus
//! the people alice, an operator, and bob, a member, whose password hashes are made here at
//! test time) and logs in.

pub use super::scratch;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use cohort::actors::{Host, Team, start_team};
use cohort::api::{ApiState, router};
use cohort::config::{TeamConfig, load_team};
use scratch::Scratch;
use serde_json::Value;
use std::path::Path;
use std::sync::OnceLock;
use tower::ServiceExt;

pub const ALICE_PASSWORD: &str = "alice-correct-horse";
pub const BOB_PASSWORD: &str = "bob-battery-staple";

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// Argon2 is slow in debug builds: hash once per test binary.
fn hashes() -> &'static (String, String) {
    static HASHES: OnceLock<(String, String)> = OnceLock::new();
    HASHES.get_or_init(|| {
        (
            cohort::auth::hash_password(ALICE_PASSWORD).unwrap(),
            cohort::auth::hash_password(BOB_PASSWORD).unwrap(),
        )
    })
}

/// A fixture's team file plus `more` (YAML of its own keys) and a `humans:` list, written to a
/// fresh folder (with its scripts).
fn write_team(fixture: &Path, more: &str) -> Scratch {
    let dir = Scratch::new("api-test");
    // Its scripts (every file but the team file itself; a named model may have its own).
    for entry in std::fs::read_dir(fixture).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if path.is_file() && name != "team.yaml" {
            std::fs::copy(&path, dir.join(name)).unwrap();
        }
    }
    let (alice, bob) = hashes();
    let mut team = std::fs::read_to_string(fixture.join("team.yaml")).unwrap();
    team.push_str(more);
    team.push_str(&format!(
        "humans:\n  - {{id: alice, name: Alice, role: designer, access: operator, password_hash: \"{alice}\"}}\n  \
         - {{id: bob, name: Bob, role: reviewer, password_hash: \"{bob}\"}}\n"
    ));
    std::fs::write(dir.join("team.yaml"), team).unwrap();
    dir
}

/// Starts the fixture team (inside an actix system).
pub fn start() -> (Team, TeamConfig) {
    start_fixture("api")
}

/// Starts the team of `tests/fixtures/<fixture>` with alice and bob (inside an actix system).
pub fn start_fixture(fixture: &str) -> (Team, TeamConfig) {
    start_dir(&Path::new(FIXTURES).join(fixture))
}

/// Starts the team of folder `dir` (its `team.yaml` and `script.yaml`; an example's, say) with
/// alice and bob (inside an actix system).
pub fn start_dir(fixture: &Path) -> (Team, TeamConfig) {
    start_with(fixture, "")
}

/// Starts the fixture team in Chinese (`language: zh`).
pub fn start_zh() -> (Team, TeamConfig) {
    start_with(&Path::new(FIXTURES).join("api"), "language: zh\n")
}

/// Starts the team of folder `dir` with `more` added to its team file.
fn start_with(fixture: &Path, more: &str) -> (Team, TeamConfig) {
    let dir = write_team(fixture, more);
    let cfg = load_team(&dir.join("team.yaml")).unwrap();
    let team = start_team(&cfg, &Host::new(&|_| None, env!("CARGO_BIN_EXE_cohort"))).unwrap();
    // The started team has read its files, so the folder can go now (its guard also removes
    // it if loading or starting panics).
    drop(dir);
    (team, cfg)
}

/// The API over a started team (no web console; websocket from `http://console.test`).
pub fn api(team: &Team, cfg: &TeamConfig) -> ApiState {
    ApiState::new(team, &cfg.humans, None, vec!["http://console.test".into()])
}

/// Logs in through the router; the token.
pub async fn login(state: &ApiState, human: &str, password: &str) -> String {
    let body = serde_json::json!({ "human_agent_id": human, "password": password });
    let res = router(state.clone())
        .oneshot(
            Request::post("/api/bind_human_agent")
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK, "login of {human}");
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    v["token"].as_str().unwrap().to_owned()
}

/// Polls `check` until it returns Some, for up to ten seconds.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    for _ in 0..500 {
        if let Some(v) = check().await {
            return v;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}
