//! An eval suite file (`cohort eval SUITE.yaml`): goals for a team, each run a number of times
//! and checked by rules, with the finish rate each must reach. Every problem names the file
//! and the field, as a team file's do.

use crate::problem::Problem;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A suite as its file says, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Suite {
    /// `name:`, for the report (default: the file's name).
    pub name: String,
    /// The file it came from.
    pub file: PathBuf,
    /// `team:`, the team file goals run with unless they name their own (resolved against the
    /// suite's folder); `cohort eval --team` replaces it.
    pub team: Option<PathBuf>,
    /// `repeat:`, runs per goal (default 1; `--repeat` replaces it).
    pub repeat: usize,
    /// `min_rate:`, the finish rate (0 to 1) every goal must reach for the suite to pass
    /// (default 1: every run).
    pub min_rate: f64,
    /// `timeout_secs:`, how long one run may take (default 300).
    pub timeout: Duration,
    /// `goals:`, at least one.
    pub goals: Vec<SuiteGoal>,
    /// `judge:`, the model that judges `judge` checks (an llm block, as in a team file).
    pub judge: Option<super::LlmConfig>,
}

/// One goal of a suite.
#[derive(Clone, Debug, PartialEq)]
pub struct SuiteGoal {
    /// `id:`, unique in the suite: the report's row.
    pub id: String,
    /// `goal:`, as the operator would give it.
    pub goal: String,
    /// `team:`, this goal's own team file (resolved against the suite's folder).
    pub team: Option<PathBuf>,
    /// `expect:`, the outcome a good run ends in (default `finished`; `failed` for a goal the
    /// team must refuse).
    pub expect: Expected,
    /// `checks:`, what a good run's result must show besides.
    pub checks: Vec<Check>,
    /// `answers:`, a scripted operator's: each question an agent asks a person and waits on
    /// gets the next, in order (none: questions wait, as with nobody there).
    pub answers: Vec<String>,
}

/// The outcome a good run of a goal ends in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[serde(expecting = "`finished`, `failed` or `stalled`")]
pub enum Expected {
    /// Its tasks finished.
    #[default]
    Finished,
    /// A task failed (the goal was refused, or could not be reached and said so).
    Failed,
    /// The team waits for a person (a question its scripted operator has no answer for).
    Stalled,
}

/// One rule a good run's result must meet.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// The tasks' summaries hold this text.
    Contains(String),
    /// The tasks' summaries match this regular expression.
    Regex(String),
    /// A task's summary is a JSON object fitting this schema.
    JsonSchema(serde_json::Value),
    /// This file exists after the run (relative to the team file's folder).
    FileExists(PathBuf),
    /// The run took at most this many steps.
    MaxSteps(usize),
    /// The run spent at most this many tokens (prompt and completion).
    MaxTokens(u64),
    /// The suite's judge model finds that the result meets this rubric (its verdict and its
    /// reasons are kept with the run).
    Judge(String),
}

impl Check {
    /// The check's name, as the report shows it.
    pub fn name(&self) -> &'static str {
        match self {
            Check::Contains(_) => "contains",
            Check::Regex(_) => "regex",
            Check::JsonSchema(_) => "json_schema",
            Check::FileExists(_) => "file_exists",
            Check::MaxSteps(_) => "max_steps",
            Check::MaxTokens(_) => "max_tokens",
            Check::Judge(_) => "judge",
        }
    }
}

/// A check as its file writes it: a mapping with one key.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(
    expecting = "one check: contains, regex, json_schema, file_exists, max_steps, max_tokens or judge"
)]
struct RawCheck {
    #[serde(default)]
    contains: Option<String>,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    json_schema: Option<serde_json::Value>,
    #[serde(default)]
    file_exists: Option<PathBuf>,
    #[serde(default)]
    max_steps: Option<usize>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    judge: Option<String>,
}

impl RawCheck {
    /// The check, when exactly one key is given.
    fn check(self) -> Option<Check> {
        let given = [
            self.contains.map(Check::Contains),
            self.regex.map(Check::Regex),
            self.json_schema.map(Check::JsonSchema),
            self.file_exists.map(Check::FileExists),
            self.max_steps.map(Check::MaxSteps),
            self.max_tokens.map(Check::MaxTokens),
            self.judge.map(Check::Judge),
        ];
        let mut given = given.into_iter().flatten();
        let one = given.next()?;
        given.next().is_none().then_some(one)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(
    expecting = "an eval suite: a mapping with `goals` (and name, team, repeat, min_rate, timeout_secs)"
)]
struct RawSuite {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    team: Option<PathBuf>,
    #[serde(default)]
    repeat: Option<usize>,
    #[serde(default)]
    min_rate: Option<f64>,
    #[serde(default)]
    timeout_secs: Option<u64>,
    #[serde(default)]
    judge: Option<super::RawLlm>,
    goals: Vec<RawGoal>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(expecting = "a goal: a mapping with `id`, `goal` (and team, expect, checks, answers)")]
struct RawGoal {
    id: String,
    goal: String,
    #[serde(default)]
    team: Option<PathBuf>,
    #[serde(default)]
    expect: Expected,
    #[serde(default)]
    checks: Vec<RawCheck>,
    #[serde(default)]
    answers: Vec<String>,
}

/// Reads and checks a suite file; every problem names the file and the field.
pub fn load_suite(file: &Path) -> Result<Suite, Vec<Problem>> {
    let raw: RawSuite = super::yaml::load(file)?;
    let dir = file.parent().unwrap_or(Path::new("."));
    // Each problem as (field, what is wrong).
    let mut slips: Vec<(String, String)> = Vec::new();
    let min_rate = raw.min_rate.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&min_rate) {
        slips.push(("min_rate".into(), format!("{min_rate} is not from 0 to 1")));
    }
    for (field, v) in [
        ("repeat", raw.repeat.map(|n| n as u64)),
        ("timeout_secs", raw.timeout_secs),
    ] {
        if v == Some(0) {
            slips.push((field.into(), "must be at least 1".into()));
        }
    }
    if raw.goals.is_empty() {
        slips.push(("goals".into(), "a suite needs at least one goal".into()));
    }
    let mut goals: Vec<SuiteGoal> = Vec::new();
    for (i, g) in raw.goals.into_iter().enumerate() {
        let goal = suite_goal(i, g, dir, &goals, &mut slips);
        goals.push(goal);
    }
    let judge = judge_model(raw.judge.as_ref(), &goals, dir, &mut slips);
    if !slips.is_empty() {
        return Err(slips
            .into_iter()
            .map(|(field, message)| Problem {
                file: file.to_path_buf(),
                field,
                message,
            })
            .collect());
    }
    Ok(Suite {
        judge,
        name: raw.name.unwrap_or_else(|| {
            file.file_stem()
                .map_or("suite".into(), |s| s.to_string_lossy().into_owned())
        }),
        file: file.to_path_buf(),
        team: raw.team.map(|t| dir.join(t)),
        repeat: raw.repeat.unwrap_or(1),
        min_rate,
        timeout: Duration::from_secs(raw.timeout_secs.unwrap_or(300)),
        goals,
    })
}

/// Goal `i` of the suite, checked (its id unique among `before`); its slips added to `slips`.
fn suite_goal(
    i: usize,
    g: RawGoal,
    dir: &Path,
    before: &[SuiteGoal],
    slips: &mut Vec<(String, String)>,
) -> SuiteGoal {
    let at = |f: &str| format!("goals[{i}].{f}");
    if g.id.trim().is_empty() || before.iter().any(|o| o.id == g.id) {
        slips.push((at("id"), format!("`{}` is empty or used twice", g.id)));
    }
    if g.goal.trim().is_empty() {
        slips.push((at("goal"), "the goal is empty".into()));
    }
    let mut checks = Vec::new();
    for (k, raw) in g.checks.into_iter().enumerate() {
        let Some(c) = raw.check() else {
            slips.push((
                at(&format!("checks[{k}]")),
                "give exactly one check (contains, regex, json_schema, file_exists, \
                 max_steps, max_tokens or judge)"
                    .into(),
            ));
            continue;
        };
        if let Check::Regex(r) = &c
            && let Err(e) = regex::Regex::new(r)
        {
            slips.push((at(&format!("checks[{k}].regex")), e.to_string()));
        }
        checks.push(c);
    }
    SuiteGoal {
        id: g.id,
        goal: g.goal,
        team: g.team.map(|t| dir.join(t)),
        expect: g.expect,
        checks,
        answers: g.answers,
    }
}

/// The suite's judge model: needed when a goal has a `judge` check.
fn judge_model(
    raw: Option<&super::RawLlm>,
    goals: &[SuiteGoal],
    dir: &Path,
    slips: &mut Vec<(String, String)>,
) -> Option<super::LlmConfig> {
    let judged = goals
        .iter()
        .any(|g| g.checks.iter().any(|c| matches!(c, Check::Judge(_))));
    let Some(raw) = raw else {
        if judged {
            slips.push((
                "judge".into(),
                "a goal has a `judge` check: name the judge's model here (an llm block)".into(),
            ));
        }
        return None;
    };
    match super::agent::llm_config(raw, dir) {
        Ok(c) => Some(c),
        Err((field, why)) => {
            slips.push((format!("judge.{field}"), why));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &crate::config::test_files::TestDir, name: &str, text: &str) -> PathBuf {
        let f = dir.join(format!("{name}.yaml"));
        std::fs::write(&f, text).unwrap();
        f
    }

    #[test]
    fn a_suite_reads_with_its_goals_checks_and_paths() {
        let dir = crate::config::test_files::tmp("suite-ok");
        let f = write(
            &dir,
            "ok",
            "name: small\nteam: ../team.yaml\nrepeat: 3\nmin_rate: 0.5\ngoals:\n\
             - id: haiku\n  goal: Write a haiku\n  checks:\n    - contains: rain\n    - max_steps: 40\n\
             - id: refuse\n  goal: Do harm\n  expect: failed\n  team: other.yaml\n\
             - id: ask\n  goal: Ask me\n  answers: [teal]\n",
        );
        let s = load_suite(&f).unwrap();
        assert_eq!((s.name.as_str(), s.repeat, s.min_rate), ("small", 3, 0.5));
        assert_eq!(s.team, Some(f.parent().unwrap().join("../team.yaml")));
        assert_eq!(
            s.goals[0].checks,
            [Check::Contains("rain".into()), Check::MaxSteps(40)]
        );
        assert_eq!(s.goals[1].expect, Expected::Failed);
        assert_eq!(s.goals[2].answers, ["teal"]);
        assert_eq!(
            s.goals[1].team,
            Some(f.parent().unwrap().join("other.yaml"))
        );
    }

    #[test]
    fn a_suites_slips_name_their_fields() {
        let cases = [
            ("goals: []\n", "goals"),
            ("min_rate: 2\ngoals: [{id: a, goal: g}]\n", "min_rate"),
            (
                "goals: [{id: a, goal: g}, {id: a, goal: h}]\n",
                "goals[1].id",
            ),
            (
                "goals: [{id: a, goal: g, checks: [{regex: '(a'}]}]\n",
                "goals[0].checks[0].regex",
            ),
            (
                "goals: [{id: a, goal: g, checks: [{smells: x}]}]\n",
                "goals[0].checks[0]",
            ),
            (
                "goals: [{id: a, goal: g, checks: [{contains: x, max_steps: 3}]}]\n",
                "goals[0].checks[0]",
            ),
            (
                "goals: [{id: a, goal: g, expect: maybe}]\n",
                "goals[0].expect",
            ),
        ];
        let dir = crate::config::test_files::tmp("suite-bad");
        for (i, (yaml, field)) in cases.iter().enumerate() {
            let p = load_suite(&write(&dir, &format!("bad{i}"), yaml)).unwrap_err();
            assert!(
                p.iter().any(|p| p.field.starts_with(field)),
                "{yaml}: {p:?}"
            );
        }
    }
}
