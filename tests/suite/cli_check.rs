//! `cohort check`: a good team passes; broken ones list every problem with file and field.

use crate::support::scratch;

use scratch::Scratch;
use std::path::PathBuf;
use std::process::Command;

fn check(path: &std::path::Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["check", "--team"])
        .arg(path)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `text` as `team.yaml` in a fresh folder: the folder (removed when dropped) and the file.
fn temp(name: &str, text: &str) -> (Scratch, PathBuf) {
    let dir = Scratch::new(&format!("check-{name}"));
    let f = dir.join("team.yaml");
    std::fs::write(&f, text).unwrap();
    (dir, f)
}

#[test]
fn the_examples_pass_check() {
    for team in [
        "examples/quickstart/team.yaml",
        "examples/quickstart_zh/team.yaml",
        "examples/openai/team.yaml",
        "examples/tools/team.yaml",
        "examples/tools/approval.yaml",
        "tests/fixtures/failures/team.yaml",
        "examples/operator/team.yaml",
        "examples/hiring/team.yaml",
        "tests/fixtures/retry/team.yaml",
    ] {
        let (code, out) = check(std::path::Path::new(team));
        assert_eq!(code, 0, "{team}: {out}");
    }
}

/// The team file the README shows passes `cohort check` beside the quickstart's script.
#[test]
fn the_readme_sample_team_passes_check() {
    let readme = std::fs::read_to_string("README.md").unwrap();
    let start = readme
        .find("```yaml\nname: quickstart")
        .expect("the README's team file")
        + 8;
    let sample = &readme[start..start + readme[start..].find("```").unwrap()];
    let (_dir, f) = temp("readme", sample);
    std::fs::copy(
        "examples/quickstart/script.yaml",
        f.parent().unwrap().join("script.yaml"),
    )
    .unwrap();
    let (code, out) = check(&f);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn malformed_yaml_names_file_and_field() {
    let (_dir, f) = temp(
        "yaml",
        "agents:\n  - id: a\n    role: r\n    skills: planning\n",
    );
    let (code, out) = check(&f);
    assert_eq!(code, 1);
    assert!(out.contains(&f.display().to_string()), "{out}");
    assert!(out.contains("agents[0].skills"), "{out}");
}

#[test]
fn every_problem_is_listed_including_the_script() {
    let (dir, f) = temp(
        "sem",
        "llm: {provider: scripted, script: script.yaml}\nagents:\n  - {id: m, role: r, skills: [task_manager, telepathy]}\n  - {id: m, role: r, skills: [think]}\n",
    );
    std::fs::write(
        dir.join("script.yaml"),
        "replies:\n  ghost:\n    planning: [x]\n",
    )
    .unwrap();
    let (code, out) = check(&f);
    assert_eq!(code, 1);
    assert!(
        out.contains("agents[0].skills[1]: unknown skill `telepathy`"),
        "{out}"
    );
    assert!(out.contains("agents[1].id: id `m` is used twice"), "{out}");
    assert!(
        out.contains("script.yaml: replies.ghost: the team has no agent or agent template `ghost`"),
        "{out}"
    );
}

#[test]
fn a_bad_template_file_is_named_with_its_field() {
    let (_dir, f) = temp(
        "template",
        "llm: {provider: openai, model: m}\nagents:\n  - {id: m, role: r, skills: [task_manager, agent_manager]}\nagent_templates: [templates]\n",
    );
    let templates = f.parent().unwrap().join("templates");
    std::fs::create_dir_all(&templates).unwrap();
    std::fs::write(
        templates.join("coder.yaml"),
        "role: coder\nskills: [planning, telepathy]\n",
    )
    .unwrap();
    let (code, out) = check(&f);
    assert_eq!(code, 1);
    let want = format!(
        "{}: skills[1]: unknown skill `telepathy`",
        templates.join("coder.yaml").display()
    );
    assert!(out.contains(&want), "{out}");
}

#[test]
fn check_counts_templates_and_notes_one_this_team_cannot_hire_from() {
    let (code, out) = check(std::path::Path::new("examples/hiring/team.yaml"));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("2 agents, 2 agent templates"), "{out}");
    let (_dir, f) = temp(
        "tool-note",
        "llm: {provider: openai, model: m}\nagents:\n  - {id: m, role: manager, skills: [task_manager, agent_manager]}\n\
         agent_templates:\n  - {name: browser, role: r, skills: [instruction_generation], tools: [web]}\n",
    );
    let (code, out) = check(&f);
    assert_eq!(
        code, 0,
        "a template the team cannot hire from is not an error: {out}"
    );
    assert!(
        out.contains("warning:")
            && out.contains("template `browser` names MCP server `web`, which this team lacks"),
        "{out}"
    );
    let strict = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["check", "--strict", "--team"])
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(strict.status.code(), Some(1), "--strict fails on a warning");
    assert_eq!(
        String::from_utf8_lossy(&strict.stderr),
        "1 warning (--strict)\n"
    );
}

#[test]
fn an_unset_api_key_variable_is_a_warning_and_fails_strict() {
    let run = |strict: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cohort"));
        c.arg("check").args(strict.then_some("--strict"));
        c.args(["--team", "examples/openai/team.yaml"])
            .env_remove("OPENAI_API_KEY")
            .output()
            .unwrap()
    };
    let out = run(false);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("warning:") && stdout.contains("`OPENAI_API_KEY`, which is not set"),
        "{stdout}"
    );
    assert_eq!(run(true).status.code(), Some(1));
}

#[test]
fn one_problem_is_one_problem() {
    let (_dir, f) = temp(
        "one",
        "llm: {provider: openai, model: m}\nagents:\n  - {id: m, role: manager, skills: [task_manager, telepathy]}\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["check", "--team"])
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "1 problem found\n");
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let (code, out) = check(std::path::Path::new("no/such/team.yaml"));
    assert_eq!(code, 1);
    assert!(
        out.contains("no/such/team.yaml") && out.contains("cannot read"),
        "{out}"
    );
}

/// Two independent schema errors (a wrong type, an unknown key) and a wrong value are all
/// listed in one go, each with its file and field; `check` no longer stops at the first.
#[test]
fn every_schema_problem_is_listed_not_only_the_first() {
    let (_dir, f) = temp(
        "schema",
        "llm: gpt-4\nagents:\n  - {id: m, role: manager, skills: [task_manager], colour: red}\n  - {id: w, role: writer, skills: [telepathy]}\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["check", "--team"])
        .arg(&f)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let file = f.display().to_string();
    for want in [
        format!(
            "{file}: llm: must be a mapping with `provider` (openai or scripted) and its settings, not the text \"gpt-4\""
        ),
        format!("{file}: agents[0].colour: unknown field `colour`"),
        format!("{file}: agents[1].skills[0]: unknown skill `telepathy`"),
    ] {
        assert!(stdout.contains(&want), "{want}\nin:\n{stdout}");
    }
    assert_eq!(
        stdout.lines().count(),
        3,
        "nothing that only follows from them:\n{stdout}"
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "3 problems found\n");
}

/// What a person reads about a YAML file names its keys and YAML's kinds of value, never the
/// Rust type that reads it (`expected struct RawLlm`, `usize`, `untagged enum OneOrMany`).
#[test]
fn yaml_errors_never_name_a_rust_type() {
    let rust = [
        "Raw",
        "struct ",
        "enum ",
        "usize",
        "u64",
        "u32",
        "f32",
        "Value::",
        "OneOrMany",
        "YAML tag",
        "variant",
    ];
    let agent = "agents: [{id: m, role: manager, skills: [task_manager]}]\n";
    let llm = "llm: {provider: openai, model: m}\n";
    for bad in [
        "llm: gpt-4\n",
        "llm: {provider: openai, model: m, temperature: hot, max_tokens: -1}\n",
        "mcp_servers: {a: 1}\n",
        "tool_approval: [1]\n",
        "tool_approval: {auto_run_up_to: [1]}\n",
        "retention: 5\n",
        "repairs: [1]\n",
        "repairs: {preset: [loud]}\n",
        "agent_templates: 5\n",
        "agent_templates: [{name: t, role: r, skills: [think], llm: 3}]\n",
        "humans: [{id: h, password_hash: x, access: [1]}]\n",
        "humans: [5]\n",
        "step_limits: {per_stage: x, task_tokens: 1.5}\n",
        "waits: {human_secs: soon}\n",
        "language: [1]\n",
        "max_hired_agents: many\n",
    ] {
        let text = format!(
            "{}{}{bad}",
            if bad.starts_with("llm") { "" } else { llm },
            agent
        );
        let (_dir, f) = temp("no-rust", &text);
        let (code, out) = check(&f);
        assert_eq!(code, 1, "{bad}: {out}");
        for name in rust {
            assert!(!out.contains(name), "{bad}: `{name}` in:\n{out}");
        }
    }
    // A server file and a template file are read the same way.
    let dir = Scratch::new("check-no-rust-files");
    std::fs::write(
        dir.join("srv.yaml"),
        "name: [x]\ndescription: 5\ntimeout_secs: soon\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["mcp", "describe"])
        .arg(dir.join("srv.yaml"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("srv.yaml: name: must be a string, not a list"),
        "{err}"
    );
    assert!(
        err.contains("timeout_secs: must be a whole number"),
        "{err}"
    );
    for name in rust {
        assert!(!err.contains(name), "`{name}` in:\n{err}");
    }
}
