//! The console on a large team: a served team of scripted workers that runs thousands of steps
//! while headless Chromium watches each view (`tests/web/console.bench.mjs`, with the
//! playwright-core and Chromium `.ci/run` installs): frame gaps, long tasks and drawing times.

use super::scenarios::Figures;
use super::serve::{PASSWORD, Served, start_served, team_with_operator};
use super::team::TeamShape;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The browser script, from the source tree (the bench is run from a checkout).
fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/web/console.bench.mjs")
}

/// How long the browser may take in all.
const DEADLINE: Duration = Duration::from_secs(900);

/// `workers` workers planning `steps` think steps each (each reply `delay_ms` late), watched by
/// the console from before the goal is given until every step is in.
pub fn console(workers: usize, steps: usize, delay_ms: u64, web: Option<PathBuf>) -> Figures {
    let script = script();
    let modules = script.with_file_name("node_modules/playwright-core");
    if !script.exists() || !modules.exists() {
        return Err(format!(
            "needs {} and {} (run from a checkout after .ci/run has installed the test tools)",
            script.display(),
            modules.display()
        ));
    }
    let shape = TeamShape {
        workers,
        steps,
        delay_ms,
        max_in_flight: 64,
        goals: 1,
    };
    let (scratch, cfg) = team_with_operator("console", shape)?;
    // Each worker's planning, think steps, reflection and summary, and the manager's steps.
    let total = workers * (steps + 3) + super::team::MANAGER_CALLS as usize;
    let ready = scratch.0.join("browser-ready");
    let system = actix::System::new();
    system.block_on(async move {
        let mut s = start_served(&cfg, 4, web).await?;
        let mut browser = tokio::process::Command::new("node")
            .arg(&script)
            .env("COHORT_URL", format!("http://{}", s.addr))
            .env("COHORT_USER", "operator")
            .env("COHORT_PASSWORD", PASSWORD)
            .env("COHORT_STEPS", total.to_string())
            .env("COHORT_START", &ready)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start node: {e}"))?;
        until_signed_in(&ready).await?;
        give_goal(&s).await?;
        let mut stdout = browser.stdout.take().ok_or("no stdout")?;
        let read = async {
            use tokio::io::AsyncReadExt;
            let mut text = String::new();
            stdout.read_to_string(&mut text).await.map(|_| text)
        };
        let text = tokio::time::timeout(DEADLINE, read)
            .await
            .map_err(|_| "the browser took over 15 minutes".to_owned())?
            .map_err(|e| e.to_string())?;
        let status = browser.wait().await.map_err(|e| e.to_string())?;
        if let Some(stop) = s.stop.take() {
            let _ = stop.send(());
        }
        s.team.shutdown().await;
        if !status.success() {
            return Err(format!("the browser script failed ({status})"));
        }
        let mut v: Value = serde_json::from_str(text.trim())
            .map_err(|e| format!("the browser answered `{text}`: {e}"))?;
        v["steps"] = json!(total);
        v["agents"] = json!(workers + 2);
        Ok(v)
    })
}

/// Waits (up to 2 minutes) for the browser script to say it signed in (by creating `ready`).
async fn until_signed_in(ready: &Path) -> Result<(), String> {
    let started = Instant::now();
    while !ready.exists() {
        if started.elapsed() > Duration::from_secs(120) {
            return Err("the browser did not sign in within 2 minutes".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// The operator gives the manager the goal, over HTTP as the console would.
async fn give_goal(s: &Served) -> Result<(), String> {
    let goal = reqwest::Client::new()
        .post(format!("http://{}/api/send_message", s.addr))
        .bearer_auth(&s.token)
        .json(
            &json!({"human_agent_id": "operator", "task_id": s.team.base_task,
            "receiver": ["manager"], "content": "goal 0", "need_reply": false}),
        )
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !goal.status().is_success() {
        return Err(format!("the goal was refused: {}", goal.status()));
    }
    Ok(())
}
