//! `cohort eval` as a person uses it: the bundled suite (`evals/suite.yaml`, twelve goals the
//! scripted eval team attempts: writing, JSON, a file written and one read through the
//! workspace server, a plan run in parallel, two stages, a review by message, a goal refused,
//! a question to a person; the haiku also judged by the suite's judge model) passes, with its
//! table, JSON and HTML report; and a comparison of
//! a good run with one whose answers were broken on purpose marks the drop as beyond noise
//! and fails the suite's rate.

use crate::support::scratch;

use scratch::Scratch;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn cohort(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_bundled_suite_passes_with_its_table_json_and_html() {
    let dir = Scratch::new("eval-bundled");
    let (json, html) = (dir.join("bundled.json"), dir.join("bundled.html"));
    let out = cohort(&[
        "eval",
        "evals/suite.yaml",
        "--jobs",
        "2",
        "--json",
        &json.display().to_string(),
        "--html",
        &html.display().to_string(),
    ]);
    let (table, said) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{table}\n{said}");
    let result: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = result["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 12, "{table}");
    for r in rows {
        assert_eq!(r["passed"], r["runs"], "{r}");
    }
    let refused = result["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["goal"] == "refuse-harm")
        .unwrap();
    assert_eq!(refused["outcome"], "failed");
    // The question to a person is answered by the suite's scripted operator, and the answer
    // reaches the result.
    let asked = result["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["goal"] == "ask-a-person")
        .unwrap();
    assert_eq!(asked["outcome"], "finished", "{asked}");
    // The judge's verdict on the haiku, with its reasons.
    let haiku = result["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["goal"] == "haiku")
        .unwrap();
    let judged = haiku["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "judge")
        .unwrap();
    assert_eq!(judged["held"], true, "{judged}");
    assert!(
        judged["reasons"]
            .as_str()
            .unwrap()
            .contains("Three short lines"),
        "{judged}"
    );
    assert!(
        table.contains("| weather-json | 1 | 100 % (1/1) | 100 % |"),
        "{table}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("parallel-plan"));
    assert!(Path::new("evals/workspace/eval-out/greeting.txt").is_file());
}

#[test]
fn a_broken_answer_shows_as_a_drop_beyond_noise_and_fails_the_rate() {
    let dir = Scratch::new("eval-compare");
    // The eval team, and a copy whose haiku has lost its rain (an answer broken on purpose).
    let broken = dir.join("broken");
    std::fs::create_dir_all(broken.join("servers")).unwrap();
    let script = std::fs::read_to_string("evals/script.yaml").unwrap();
    std::fs::write(
        broken.join("script.yaml"),
        script.replace("Cold rain on the eaves", "Dry sun on the eaves"),
    )
    .unwrap();
    std::fs::copy("evals/team.yaml", broken.join("team.yaml")).unwrap();
    let root = std::fs::canonicalize("evals/workspace").unwrap();
    std::fs::write(
        broken.join("servers/workspace.yaml"),
        format!(
            "name: workspace\ndescription: files\nbuiltin: workspace\nargs: [--root, {}]\n",
            root.display()
        ),
    )
    .unwrap();
    let suite = dir.join("suite.yaml");
    let team = std::fs::canonicalize("evals/team.yaml").unwrap();
    std::fs::write(
        &suite,
        format!(
            "name: haiku-only\nteam: {}\nrepeat: 6\nmin_rate: 0.9\ngoals:\n\
             - id: haiku\n  goal: EVAL-HAIKU Write a haiku about autumn rain.\n  checks: [{{contains: rain}}]\n",
            team.display()
        ),
    )
    .unwrap();
    let then = dir.join("then.json");
    let out = cohort(&[
        "eval",
        &suite.display().to_string(),
        "--jobs",
        "2",
        "--json",
        &then.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));

    let now = dir.join("now.json");
    let out = cohort(&[
        "eval",
        &suite.display().to_string(),
        "--team",
        &broken.join("team.yaml").display().to_string(),
        "--jobs",
        "2",
        "--json",
        &now.display().to_string(),
        "--compare",
        &then.display().to_string(),
    ]);
    let (table, said) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{table}\n{said}");
    assert!(
        said.contains("below the finish rate of 90 %: haiku"),
        "{said}"
    );
    assert!(said.contains("the summaries do not hold `rain`"), "{said}");
    assert!(table.contains("| haiku | 100 % → 0 % |"), "{table}");
    assert!(
        table.contains("| yes |"),
        "the drop is beyond noise: {table}"
    );
}

#[test]
fn a_bad_suite_names_its_file_and_field() {
    let dir = Scratch::new("eval-bad");
    let suite = dir.join("suite.yaml");
    std::fs::write(
        &suite,
        "goals:\n  - id: a\n    goal: g\n    checks: [{regex: '(a'}]\n",
    )
    .unwrap();
    let out = cohort(&[
        "eval",
        &suite.display().to_string(),
        "--team",
        "evals/team.yaml",
    ]);
    let (_, said) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(
        said.contains("suite.yaml") && said.contains("goals[0].checks[0].regex"),
        "{said}"
    );
}
