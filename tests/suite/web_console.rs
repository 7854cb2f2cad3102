//! The web console in a real browser: `cohort serve` runs the operator example (a person,
//! `operator`, and a scripted team whose manager asks the person a waiting question), and
//! `tests/web/console.test.mjs` drives headless Chromium through it with playwright-core: log
//! in, send the manager a goal, watch the task and its stages appear, answer the waiting
//! question, see the manager's step lock released and the task finish.
//!
//! A second run serves `tests/fixtures/plan-graph`, whose writer plans a graph (four parts side
//! by side, then a join), and `tests/web/plan_graph.test.mjs` checks the plan graph in the
//! stage card (nodes, edges, the join waiting for the parts), the timeline's rows side by side
//! and its ready mark, on a laptop and on a 390 px phone in dark mode.
//!
//! A third serves `tests/fixtures/outcome`, and `tests/web/outcome.test.mjs` checks honest
//! outcomes: a task whose manager declared success on nothing is shown failed with the reason
//! (badge, summary card, failures panel), and one that finished with a stage that gave nothing
//! is flagged with that stage named.
//!
//! A fourth serves the operator example again for `tests/web/first_hour.test.mjs`: what waits
//! for the person is at the top of the page and answered in place (one click for a choice),
//! the goal-giver is told the outcome, pause shows at once, a cancelled task is not a success,
//! and every text reads at 4.5:1 in both themes with nothing wider than a 390 px phone.
//!
//! A fifth serves `tests/fixtures/elicitation` with server-everything, and
//! `tests/web/elicitation.test.mjs` answers the question the server asks during the clerk's
//! call in its "Waiting for you" card (the server's message, its form with defaults filled in).
//!
//! A sixth serves `tests/fixtures/attachments`, and `tests/web/attachments.test.mjs` attaches
//! a file to a goal in the composer, sees the task list it, and downloads it; a seventh has
//! `tests/web/choice.test.mjs` choose a message's model and tools in the composer.
//!
//! An eighth serves `examples/operator_zh` (a team whose language is zh) for
//! `tests/web/zh.test.mjs`: the console in Chinese from the sign-in page to every tab of a
//! finished task, no English word left, at 4.5:1 and within a 390 px phone, and switched to
//! English and back by the person.
//!
//! Needs what `.ci/run` installs: Debian's chromium (`/usr/bin/chromium`) and
//! `tests/web/node_modules` (`npm install --prefix tests/web`). Missing either fails the test.
//! Artifacts: `target/web-console.png` (the console at the end), `target/web-console-agents.png`,
//! `target/web-console-plan-check.png` (a plan waiting for the operator),
//! `target/web-console-plan-graph*.png`, `target/web-console-outcome*.png` and `target/web-console*-server.log`.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const USER: &str = "operator";
const PASSWORD: &str = "cohort-demo";
const CHROMIUM: &str = "/usr/bin/chromium";
/// The browser script waits up to 60 s per phase; this bounds the whole run.
const BROWSER_DEADLINE: Duration = Duration::from_secs(480);
const SERVER_DEADLINE: Duration = Duration::from_secs(60);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A child process that is stopped when dropped, also when the test panics.
struct Guard {
    child: Child,
    what: &'static str,
}

impl Guard {
    fn stop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SIGTERM first so the server shuts down its team cleanly, then SIGKILL.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{} did not stop on SIGTERM; killing it", self.what);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free local port")
}

fn tail(path: &Path, max: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let start = text.len().saturating_sub(max);
    let start = (start..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    text[start..].to_owned()
}

/// `GET /` answers 200 (the console's index.html is served).
fn console_served(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!("GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 64];
    let n = s.read(&mut head).unwrap_or(0);
    let status = String::from_utf8_lossy(&head[..n]);
    status.starts_with("HTTP/1.1 200") || status.starts_with("HTTP/1.0 200")
}

fn require_prerequisites(root: &Path) {
    let pw = root.join("tests/web/node_modules/playwright-core/package.json");
    assert!(
        pw.is_file(),
        "{} is missing: run .ci/run (it runs `npm install --prefix tests/web`) to install the browser test's client",
        pw.display()
    );
    assert!(
        Path::new(CHROMIUM).is_file(),
        "{CHROMIUM} is missing: run .ci/run (it installs Debian's chromium package) before the web console test"
    );
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.as_ref().is_ok_and(|o| o.status.success()),
        "node is not on PATH ({:?}): run .ci/run, the web console test needs Node.js",
        node.err()
    );
}

#[test]
fn the_console_in_chromium_runs_the_operator_example_to_its_end() {
    drive(&Run {
        name: "web-console",
        team: "examples/operator/team.yaml".into(),
        script: "tests/web/console.test.mjs",
        prepare: None,
    });
}

#[test]
fn the_console_draws_a_graph_plan_and_its_parallel_steps() {
    drive(&Run {
        name: "web-console-plan-graph",
        team: "tests/fixtures/plan-graph/team.yaml".into(),
        script: "tests/web/plan_graph.test.mjs",
        prepare: None,
    });
}

#[test]
fn the_console_shows_why_a_task_failed_and_which_stages_gave_nothing() {
    drive(&Run {
        name: "web-console-outcome",
        team: "tests/fixtures/outcome/team.yaml".into(),
        script: "tests/web/outcome.test.mjs",
        prepare: None,
    });
}

#[test]
fn the_operators_first_hour_nothing_that_waits_is_hidden_in_either_theme_or_on_a_phone() {
    drive(&Run {
        name: "web-console-first-hour",
        team: "examples/operator/team.yaml".into(),
        script: "tests/web/first_hour.test.mjs",
        prepare: None,
    });
}

#[test]
fn the_console_of_a_chinese_team_is_chinese_on_a_laptop_and_a_phone_and_switches_to_english() {
    drive(&Run {
        name: "web-console-zh",
        team: "examples/operator_zh/team.yaml".into(),
        script: "tests/web/zh.test.mjs",
        prepare: None,
    });
}

#[test]
fn a_graph_plan_is_checked_as_a_graph_edited_and_run_as_edited() {
    drive(&Run {
        name: "web-console-plan-check-graph",
        team: "tests/fixtures/plan-graph/checked.yaml".into(),
        script: "tests/web/plan_check_graph.test.mjs",
        prepare: None,
    });
}

#[test]
fn a_high_call_waits_with_its_warning_and_a_reject_cancels_its_task() {
    // A copy of the tools example, so the file its clerk writes lands in the copy.
    let copy = root().join("target/web-console-approval-warning-tools");
    let _ = std::fs::remove_dir_all(&copy);
    copy_dir(&root().join("examples/tools"), &copy);
    drive(&Run {
        name: "web-console-approval-warning",
        team: copy.join("approval.yaml").display().to_string(),
        script: "tests/web/approval_warning.test.mjs",
        prepare: None,
    });
    assert!(
        !copy.join("workspace/hello.txt").exists(),
        "the rejected call never ran"
    );
}

/// Copies a folder, with what it holds.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn a_multi_select_and_a_form_of_every_field_kind_are_answered_in_the_console() {
    let run = Run {
        name: "web-console-asks",
        team: "tests/fixtures/ask-forms/team.yaml".into(),
        script: "tests/web/ask_forms.test.mjs",
        prepare: None,
    };
    drive(&run);
    // What the writer got, as the store keeps the operator's replies: checked and typed.
    let data = root().join("target/web-console-asks-data/team.db");
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["export", "--data", data.to_str().unwrap()])
        .output()
        .unwrap();
    let replies: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["op"] == "conversation" && l["entry"]["message"]["sender_id"] == "operator")
        .filter_map(|l| l["entry"]["message"]["message"].as_str().map(str::to_owned))
        .collect();
    assert!(
        replies.iter().any(|r| r == r#"["spring","Autumn"]"#),
        "the keys: {replies:?}"
    );
    let form = replies
        .iter()
        .filter_map(|r| serde_json::from_str::<serde_json::Value>(r).ok())
        .find(|v| v.get("title").is_some())
        .unwrap_or_else(|| panic!("no form answer in {replies:?}"));
    assert_eq!(
        form,
        serde_json::json!({"title": "Four seasons", "notes": "Short poems.\nOne per season.",
            "count": 2, "urgent": true, "colour": "blue"})
    );
}

#[test]
fn a_forked_task_names_the_task_it_forks_and_a_failed_step_offers_the_fork() {
    drive(&Run {
        name: "web-console-fork",
        team: "tests/fixtures/outcome/team.yaml".into(),
        script: "tests/web/fork.test.mjs",
        prepare: Some(forked_store),
    });
}

/// A store holding a run whose writer's step failed (the outcome fixture's hollow goal) and,
/// beside it, that run forked at the failed step with an edited text (`cohort replay
/// --fork-at`), written to `data`.
fn forked_store(root: &Path, data: &Path) {
    let team = "tests/fixtures/outcome/team.yaml";
    let recorded = data.with_file_name("recorded.db");
    let cohort = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
            .current_dir(root)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let rec = recorded.to_str().unwrap();
    cohort(&[
        "run",
        "--team",
        team,
        "--goal",
        "HOLLOW# write the haiku",
        "--data",
        rec,
        "--timeout",
        "60",
    ]);
    let (_, exported, _) = cohort(&["export", "--data", rec]);
    let failed = exported
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|l| l.get("model_call").cloned())
        .find(|c| c["skill"] == "think")
        .expect("the writer's think call is recorded");
    let step = failed["step_id"].as_str().unwrap();
    let (code, _, said) = cohort(&[
        "replay",
        "--team",
        team,
        "--data",
        rec,
        "--fork-at",
        step,
        "--step-text",
        "FORKED# Write a haiku about autumn rain",
        "--out",
        data.to_str().unwrap(),
        "--timeout",
        "60",
    ]);
    assert!(
        said.contains("The fork (task"),
        "the fork ({code:?}): {said}"
    );
}

#[test]
fn the_operator_answers_a_servers_question_in_the_console_and_the_call_goes_on() {
    // The elicitation team (tests/fixtures/elicitation), its server file naming
    // server-everything where .ci/run installed it.
    let dir = root().join("target/web-console-elicitation-team");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("servers")).unwrap();
    for f in ["team.yaml", "script.yaml"] {
        std::fs::copy(
            root().join("tests/fixtures/elicitation").join(f),
            dir.join(f),
        )
        .unwrap();
    }
    let everything =
        mcp_cache().join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        everything.is_file(),
        "{} is missing: run .ci/run",
        everything.display()
    );
    let server = format!(
        "name: everything\ndescription: MCP's reference test server\ncommand: node\nargs: [{:?}, stdio]\n",
        everything.display().to_string()
    );
    std::fs::write(dir.join("servers/everything.yaml"), server).unwrap();
    drive(&Run {
        name: "web-console-elicitation",
        team: dir.join("team.yaml").display().to_string(),
        script: "tests/web/elicitation.test.mjs",
        prepare: None,
    });
}

#[test]
fn a_refused_calls_fields_are_asked_for_in_plain_words_and_the_filled_call_runs() {
    // The rooms server, served by this test; the team's booker writes a date the server
    // refuses, and the operator fills it in.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (url, bookings) = rt.block_on(crate::support::rooms::serve());
    let dir = root().join("target/web-console-refusal-team");
    let _ = std::fs::remove_dir_all(&dir);
    let booker = crate::tool_refusal::worker(
        "booker",
        "book_room",
        r#"{"room": "A", "date": "next monday"}"#,
        "",
    );
    let team = crate::tool_refusal::write_team(
        &dir,
        &url,
        &[("booker", booker)],
        crate::tool_refusal::OPERATOR,
    );
    drive(&Run {
        name: "web-console-refusal",
        team: team.display().to_string(),
        script: "tests/web/refusal.test.mjs",
        prepare: None,
    });
    let asked = bookings.lock().unwrap().clone();
    assert_eq!(
        asked,
        [
            ("A".to_owned(), "next monday".to_owned()),
            ("A".to_owned(), "2026-12-07".to_owned())
        ],
        "refused, then made with the date the operator filled in"
    );
}

#[test]
fn a_file_attached_in_the_console_is_listed_on_the_task_and_read_by_the_agent() {
    // The attachments team, copied so that its workspace is made under target/.
    let fixture = root().join("tests/fixtures/attachments");
    let dir = root().join("target/web-console-attachments-team");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("servers")).unwrap();
    for f in ["team.yaml", "script.yaml", "servers/workspace.yaml"] {
        std::fs::copy(fixture.join(f), dir.join(f)).unwrap();
    }
    drive(&Run {
        name: "web-console-attachments",
        team: dir.join("team.yaml").display().to_string(),
        script: "tests/web/attachments.test.mjs",
        prepare: None,
    });
    assert_eq!(
        std::fs::read(dir.join("workspace/inputs/sales.csv")).unwrap(),
        std::fs::read(fixture.join("sales.csv")).unwrap(),
        "the analyst saved the attached file in the workspace"
    );
}

#[test]
fn a_message_chooses_its_model_and_tools_in_the_composer() {
    // The choice fixture's writer, with the workspace server as its tool, and the operator.
    let fixtures = root().join("tests/fixtures");
    let dir = root().join("target/web-console-choice-team");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("servers")).unwrap();
    for f in ["script.yaml", "strong.yaml"] {
        std::fs::copy(fixtures.join("choice").join(f), dir.join(f)).unwrap();
    }
    std::fs::copy(
        fixtures.join("attachments/servers/workspace.yaml"),
        dir.join("servers/workspace.yaml"),
    )
    .unwrap();
    let team = format!(
        "llm: {{provider: scripted, script: script.yaml}}\nmcp_servers: servers\nmodels:\n  strong: {{provider: scripted, script: strong.yaml}}\n{}agents:\n  - {{id: manager, role: manager, skills: [process_message, decision, task_manager]}}\n  - {{id: writer, role: writer, skills: [process_message, send_message, think, instruction_generation], tools: [workspace], models: [strong]}}\n",
        crate::tool_refusal::OPERATOR
    );
    std::fs::write(dir.join("team.yaml"), team).unwrap();
    drive(&Run {
        name: "web-console-choice",
        team: dir.join("team.yaml").display().to_string(),
        script: "tests/web/choice.test.mjs",
        prepare: None,
    });
}

/// Where `.ci/run` installs the third-party MCP servers (`$COHORT_CI_CACHE`).
fn mcp_cache() -> PathBuf {
    match std::env::var_os("COHORT_CI_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/cohort-ci"),
    }
}

/// One browser run: `cohort serve` with `team` on a fresh store, and the browser `script`
/// against it; artifacts are named after `name` in `target/`.
struct Run {
    name: &'static str,
    team: String,
    script: &'static str,
    /// Fills the store the server starts on (none: a new team).
    prepare: Option<fn(&Path, &Path)>,
}

fn drive(run: &Run) {
    let root = root();
    require_prerequisites(&root);
    let target = root.join("target");
    std::fs::create_dir_all(&target).unwrap();
    let screenshot = target.join(format!("{}.png", run.name));
    let _ = std::fs::remove_file(&screenshot);
    let server_log = target.join(format!("{}-server.log", run.name));

    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let log = File::create(&server_log).unwrap();
    // A fresh store each run, as a new user starts: the console shows a new team.
    let data = target.join(format!("{}-data/team.db", run.name));
    let _ = std::fs::remove_dir_all(data.parent().unwrap());
    if let Some(prepare) = run.prepare {
        std::fs::create_dir_all(data.parent().unwrap()).unwrap();
        prepare(&root, &data);
    }
    let server = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .current_dir(&root)
        .args([
            "serve",
            "--team",
            &run.team,
            "--bind",
            &addr.to_string(),
            "--data",
            data.to_str().unwrap(),
        ])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("cohort serve starts");
    let mut server = Guard {
        child: server,
        what: "cohort serve",
    };

    let until = Instant::now() + SERVER_DEADLINE;
    loop {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!(
                "cohort serve exited ({status}) before serving the console:\n{}",
                tail(&server_log, 4000)
            );
        }
        if console_served(addr) {
            break;
        }
        assert!(
            Instant::now() < until,
            "cohort serve did not serve GET / on {addr} within {SERVER_DEADLINE:?}:\n{}",
            tail(&server_log, 4000)
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let browser_log = target.join(format!("{}-browser.log", run.name));
    let out = File::create(&browser_log).unwrap();
    let browser = Command::new("node")
        .current_dir(&root)
        .arg(run.script)
        .env("COHORT_URL", format!("http://{addr}"))
        .env("COHORT_USER", USER)
        .env("COHORT_PASSWORD", PASSWORD)
        .env("COHORT_SCREENSHOT", &screenshot)
        .env("COHORT_CHROMIUM", CHROMIUM)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("node starts");
    let mut browser = Guard {
        child: browser,
        what: "the browser test",
    };
    let until = Instant::now() + BROWSER_DEADLINE;
    let status = loop {
        if let Some(status) = browser.child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() >= until {
            browser.stop();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = std::fs::read_to_string(&browser_log).unwrap_or_default();
    println!("{output}");
    server.stop();

    match status {
        Some(s) if s.success() => {}
        Some(s) => panic!(
            "the browser test failed ({s}):\n{output}\n--- cohort serve log (end) ---\n{}\nscreenshot: {}",
            tail(&server_log, 4000),
            screenshot.display()
        ),
        None => panic!(
            "the browser test did not finish within {BROWSER_DEADLINE:?}:\n{output}\n--- cohort serve log (end) ---\n{}",
            tail(&server_log, 4000)
        ),
    }
    assert!(
        screenshot.is_file(),
        "the browser test passed but left no screenshot at {}",
        screenshot.display()
    );
    println!("screenshot: {}", screenshot.display());
}
