//! The repair policy end to end: under `repairs: strict` a scripted team's answers are taken
//! exactly as the script gives them (no rule alters one, none is counted); with every rule on,
//! a slip is mended, recorded on its step, counted in its task and named in `cohort run`'s
//! closing line.

use crate::support::scratch;
use crate::support::states;

use cohort::actors::Host;
use cohort::config::load_team;
use cohort::policy::{Preset, Repairs};
use cohort::run::{RunOptions, RunOutcome, run_goal};
use scratch::Scratch;
use serde_json::Value;
use states::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const GOAL: &str = "Write a haiku about autumn rain";

fn host(vars: &dyn Fn(&str) -> Option<String>) -> Host<'_> {
    Host::new(vars, env!("CARGO_BIN_EXE_cohort"))
}

/// The script's own text of the quickstart manager's last answer, the task summary.
const SCRIPTED_SUMMARY: &str = "Final haiku:\n  Cold rain on the eaves\n  the maple lets go its red\n  one leaf at a time\nDrafted by the writer, reviewed by the reviewer, then polished.";

#[actix::test]
async fn under_strict_the_scripted_answers_are_the_results_exactly() {
    let mut cfg = load_team(Path::new("examples/quickstart/team.yaml")).unwrap();
    cfg.repairs = Repairs::preset(Preset::Strict);
    let report = run_goal(&cfg, GOAL, &RunOptions::default(), &host(&|_| None), |_| {})
        .await
        .unwrap();
    assert_eq!(report.outcome, RunOutcome::Finished);
    assert!(report.repairs.is_empty(), "{:?}", report.repairs);
    let s = &report.states;
    let task = the_task(s);
    assert_eq!(task["task_summary"], SCRIPTED_SUMMARY);
    assert!(task.get("repairs").is_none(), "{task}");
    for st in steps(s) {
        assert!(
            st["execute_result"].get("repairs").is_none(),
            "a step was repaired: {st}"
        );
    }
    let mut thoughts: Vec<&str> = steps(s)
        .into_iter()
        .filter(|st| st["agent_id"] == "writer" && st["executor"] == "think")
        .map(|st| st["execute_result"]["think"].as_str().unwrap())
        .collect();
    thoughts.sort();
    assert_eq!(
        thoughts,
        [
            "Draft:\n  Rain on the eaves\n  the maple lets go its red\n  one leaf at a time",
            "Final:\n  Cold rain on the eaves\n  the maple lets go its red\n  one leaf at a time"
        ]
    );
}

/// The quickstart team in a folder of its own, its writer's first thought handing back the
/// step's instruction (a small model's slip), under `repairs`: the folder's guard and the team
/// file.
fn slipping_team(tag: &str, repairs: &str) -> (Scratch, PathBuf) {
    let dir = Scratch::new(&format!("repairs-{tag}"));
    let script = std::fs::read_to_string("examples/quickstart/script.yaml").unwrap();
    let echo = "      - \"<think>Write a first 5-7-5 draft about autumn rain.</think>\"\n";
    let slipped = script.replacen("    think:\n", &format!("    think:\n{echo}"), 1);
    assert_ne!(slipped, script);
    std::fs::write(dir.join("script.yaml"), slipped).unwrap();
    let team = std::fs::read_to_string("examples/quickstart/team.yaml").unwrap();
    let f = dir.join("team.yaml");
    std::fs::write(&f, format!("{team}\nrepairs: {repairs}\n")).unwrap();
    (dir, f)
}

fn run_cli(team: &Path) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["run", "--json", "--goal", GOAL, "--team"])
        .arg(team)
        .output()
        .unwrap();
    let states = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), states, stderr)
}

#[test]
fn a_mended_slip_is_recorded_on_its_step_counted_in_its_task_and_named_at_the_end() {
    let (_dir, team) = slipping_team("small", "small_model");
    let (code, s, stderr) = run_cli(&team);
    assert_eq!(code, 0, "{stderr}");
    let closing = stderr.lines().last().unwrap();
    // The echo, asked again as the same prompt alone; and the writer's first summary, which
    // tells of its draft without giving it, gets its results added.
    assert!(
        closing.contains("3 repairs: echo, echo_asked_afresh, summary_results_added"),
        "{closing}"
    );
    let task = the_task(&s);
    assert_eq!(task["repairs"]["echo"], 1, "{task}");
    assert_eq!(task["repairs"]["echo_asked_afresh"], 1, "{task}");
    assert_eq!(task["repairs"]["summary_results_added"], 1, "{task}");
    let asked_again: Vec<&Value> = steps(&s)
        .into_iter()
        .filter(|st| st["execute_result"]["reasked"].is_array())
        .collect();
    assert_eq!(asked_again.len(), 1);
    assert!(
        asked_again[0]["execute_result"]["reasked"][0]["error"]
            .as_str()
            .unwrap()
            .contains("only repeats this step's instruction or your goal")
    );
}

/// An echo produced nothing: even under `strict` it is asked about again (a re-ask changes no
/// answer), and the thought kept is the model's next answer, word for word.
#[test]
fn under_strict_an_echo_is_asked_again_and_never_kept_as_the_result() {
    let (_dir, team) = slipping_team("strict", "strict");
    let (code, s, stderr) = run_cli(&team);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.lines().last().unwrap().contains("1 repair: echo"),
        "{stderr}"
    );
    let thoughts: Vec<&Value> = steps(&s)
        .into_iter()
        .filter(|st| st["agent_id"] == "writer" && st["executor"] == "think")
        .map(|st| &st["execute_result"]["think"])
        .collect();
    assert!(
        !thoughts.contains(&&Value::from(
            "Write a first 5-7-5 draft about autumn rain."
        )),
        "the echo is no thought: {thoughts:?}"
    );
    // Nothing else is mended under strict: the other answers are the script's.
    let task = the_task(&s);
    let fired: Vec<&String> = task["repairs"].as_object().unwrap().keys().collect();
    assert_eq!(fired, ["echo"], "{task}");
}
