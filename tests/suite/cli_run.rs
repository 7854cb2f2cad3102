//! `cohort run` as a person sees it: the summary on stdout, progress and one closing line on
//! stderr, and an exit code that match the tasks' final states, also under `--max-steps`
//! pressure and on Ctrl-C. Golden files hold what does not vary from run to run.

use crate::support::scratch;

use scratch::Scratch;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn cohort(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

const HAIKU: &str = "Write a haiku about autumn rain";

fn golden(name: &str) -> String {
    std::fs::read_to_string(format!("tests/golden/{name}")).unwrap()
}

#[test]
fn the_quickstart_run_prints_its_summary_stage_lines_and_a_true_closing_line() {
    let out = cohort(&[
        "run",
        "--team",
        "examples/quickstart/team.yaml",
        "--goal",
        HAIKU,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        golden("quickstart_run.stdout")
    );
    // Stages in order, with their agents; the two stage-one agents' steps interleave freely.
    let stages: Vec<&str> = stderr.lines().filter(|l| l.starts_with("stage ")).collect();
    assert_eq!(stages.join("\n") + "\n", golden("quickstart_run.stages"));
    let steps: Vec<&str> = stderr.lines().filter(|l| l.starts_with("ok ")).collect();
    assert_eq!(steps.len(), 20, "{stderr}");
    // Each step line says how long it ran and what it cost.
    assert!(
        steps
            .iter()
            .all(|l| l.contains(" ms, ") || l.contains(" s, ")),
        "{stderr}"
    );
    assert!(!stderr.contains('\x1b'), "no colour without a terminal");
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with("task finished (20 steps, ") && last.ends_with(" in 1 task)"),
        "{last}"
    );
}

/// The last step lands exactly on the limit: the task finished, and the run says so.
#[test]
fn a_run_that_finishes_on_its_step_limit_reports_the_finish_and_exits_zero() {
    let out = cohort(&[
        "run",
        "--team",
        "examples/quickstart/team.yaml",
        "--goal",
        HAIKU,
        "--max-steps",
        "20",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr
            .lines()
            .last()
            .unwrap()
            .starts_with("task finished (20 steps"),
        "{stderr}"
    );
}

/// `--max-steps N` runs N steps exactly, though several agents work side by side: no agent
/// starts a step past the limit (it was checked as steps ended, and 3 became 4, or 9).
#[test]
fn max_steps_stops_after_exactly_that_many_steps() {
    for n in ["1", "3", "7"] {
        let out = cohort(&[
            "run",
            "--team",
            "examples/quickstart/team.yaml",
            "--goal",
            HAIKU,
            "--max-steps",
            n,
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        let steps = stderr
            .lines()
            .filter(|l| l.starts_with("ok ") || l.starts_with("FAIL"))
            .count();
        assert_eq!(steps.to_string(), n, "{stderr}");
        let last = stderr.lines().last().unwrap();
        let unit = if n == "1" { "step" } else { "steps" };
        assert!(
            last.starts_with(&format!(
                "stopped after {n} {unit} (--max-steps) before the task finished ({n} {unit}, "
            )),
            "{last}"
        );
    }
}

#[test]
fn an_empty_goal_is_bad_input() {
    let out = cohort(&[
        "run",
        "--team",
        "examples/quickstart/team.yaml",
        "--goal",
        "  ",
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: the goal is empty: say what the team should do with --goal \"…\"\n"
    );
}

/// A missing or unknown argument is bad input (3), never a limit's code (2); help is not an
/// error.
#[test]
fn argument_errors_exit_3_with_the_argument_named() {
    let out = cohort(&["run", "--team", "examples/quickstart/team.yaml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("required arguments were not provided") && stderr.contains("--goal"),
        "{stderr}"
    );
    let out = cohort(&["run", "--goal", "x", "--team", "t.yaml", "--max-step", "3"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("--max-step"), "{stderr}");
    let out = cohort(&[
        "run",
        "--goal",
        "x",
        "--team",
        "t.yaml",
        "--max-steps",
        "many",
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(cohort(&[]).status.code(), Some(3), "no command at all");
    assert_eq!(cohort(&["nonsense"]).status.code(), Some(3));
    assert_eq!(cohort(&["run", "--help"]).status.code(), Some(0));
    assert_eq!(cohort(&["--version"]).status.code(), Some(0));
}

#[test]
fn a_missing_api_key_is_said_once_and_is_bad_input() {
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args([
            "run",
            "--team",
            "examples/openai/team.yaml",
            "--goal",
            HAIKU,
        ])
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(stderr.matches("OPENAI_API_KEY").count(), 1, "{stderr}");
    assert_eq!(stderr.matches("not set").count(), 1, "{stderr}");
}

#[test]
fn help_lists_every_exit_code() {
    let out = cohort(&["run", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    for code in ["0 ", "1 ", "2 ", "3 ", "130 "] {
        assert!(help.contains(&format!("\n  {code}")), "{code}: {help}");
    }
}

/// Ctrl-C while an LLM call is in flight: the run stops cleanly and exits 130.
#[test]
fn ctrl_c_ends_the_run_with_exit_130() {
    let dir = Scratch::new("cli-sigint");
    std::fs::write(
        dir.join("script.yaml"),
        "replies:\n  manager:\n    task_manager:\n      - text: '<task_instruction>{\"action\": \"add_task\", \"task_name\": \"t\", \"task_intention\": \"t\"}</task_instruction>'\n        delay_ms: 120000\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("team.yaml"),
        "llm: {provider: scripted, script: script.yaml}\nagents:\n  - {id: manager, role: manager, skills: [task_manager]}\n",
    )
    .unwrap();
    let team = dir.join("team.yaml");
    let child = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["run", "--goal", "wait", "--team"])
        .arg(&team)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Let the team start and its first step begin its (two-minute) LLM call.
    std::thread::sleep(Duration::from_millis(1500));
    let sent = Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr
            .lines()
            .last()
            .unwrap()
            .starts_with("interrupted before the task finished (0 steps"),
        "{stderr}"
    );
    assert!(
        sent.elapsed() < Duration::from_secs(30),
        "stopped in {:?}",
        sent.elapsed()
    );
}

/// A console folder that is not one is refused at start, before the team starts.
#[test]
fn serve_refuses_a_web_folder_without_a_console() {
    let out = cohort(&[
        "serve",
        "--team",
        "examples/quickstart/team.yaml",
        "--no-data",
        "--bind",
        "127.0.0.1:0",
        "--web",
        "/nonexistent",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("--web /nonexistent: no index.html there"),
        "{stderr}"
    );
}

/// A team that needs a person stalls under `run`, which has nobody to answer: the run says who
/// waits for whom, what was asked, and that `serve` is the way to answer (exit 2).
#[test]
fn a_stall_on_a_person_says_who_waits_what_was_asked_and_how_to_answer() {
    let out = cohort(&[
        "run",
        "--team",
        "examples/operator/team.yaml",
        "--goal",
        "Write a haiku",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "WAIT `manager` waits for `operator` to answer: \"Which season should the haiku be about?\""
        ),
        "{stderr}"
    );
    let last = stderr.lines().last().unwrap();
    assert!(
        last.starts_with("the team stalled waiting for `operator`: to answer, run `cohort serve --team examples/operator/team.yaml`"),
        "{last}"
    );
}
