//! `cohort eval`: a suite of goals (see `config::eval_suite`) run against a team, each goal a
//! number of times, `jobs` runs at once; each run judged by its expected outcome and its
//! checks; the results gathered per goal into rates, times, tokens and costs (see [`report`]),
//! and compared with an earlier run of the suite (see [`stats`]).
//!
//! - [`stats`]: medians, the two-proportion test, bootstrap intervals.
//! - [`report`]: the table, the JSON and the HTML report, and a comparison.

pub mod report;
pub mod stats;

use crate::actors::Host;
use crate::config::eval_suite::{Check, Expected, Suite, SuiteGoal};
use crate::config::load_team;
use crate::run::{RunOptions, RunOutcome, run_goal};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// One run of one goal, judged.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Judged {
    /// The goal's id in the suite.
    pub goal: String,
    /// Which run of the goal (from 1).
    pub run: usize,
    /// How the run ended, as `cohort run` says it (`finished`, `failed`, `stalled`, …).
    pub outcome: String,
    /// It ended as the goal expects and met every check.
    pub passed: bool,
    /// What it claimed matches what it did: it did not report a finished task whose checks
    /// fail.
    pub honest: bool,
    /// Each check: its name, whether it held, and what was found when it did not.
    pub checks: Vec<CheckResult>,
    pub wall_ms: u64,
    pub steps: usize,
    pub prompt_tokens: u64,
    pub cached_prompt_tokens: u64,
    pub completion_tokens: u64,
    pub usd: f64,
    /// Repairs the runtime made to the models' answers, by rule.
    pub repairs: BTreeMap<String, u64>,
}

/// A check's verdict on one run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CheckResult {
    pub check: String,
    pub held: bool,
    /// Why it did not hold.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why: String,
    /// A judge's reasons for its verdict, either way.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasons: String,
}

/// What a run left that the checks read.
pub struct RunFacts {
    pub outcome: RunOutcome,
    /// The summaries of the tasks the goal made, as the operator reads them (the managers'
    /// words with what the runtime added).
    pub summaries: Vec<String>,
    /// The managers' words alone: an answer asked for as JSON is there, before anything the
    /// runtime added.
    pub words: Vec<String>,
    pub steps: usize,
    pub tokens: u64,
    /// The team file's folder (where `file_exists` paths start).
    pub team_dir: PathBuf,
}

/// The name an outcome has in a report.
pub fn outcome_name(o: &RunOutcome) -> &'static str {
    match o {
        RunOutcome::Finished => "finished",
        RunOutcome::Failed => "failed",
        RunOutcome::TimedOut => "timed_out",
        RunOutcome::MaxSteps(_) => "max_steps",
        RunOutcome::Stalled => "stalled",
        RunOutcome::Interrupted => "interrupted",
    }
}

/// Whether `outcome` is the one `expect` names.
fn as_expected(outcome: &RunOutcome, expect: Expected) -> bool {
    matches!(
        (outcome, expect),
        (RunOutcome::Finished, Expected::Finished)
            | (RunOutcome::Failed, Expected::Failed)
            | (RunOutcome::Stalled, Expected::Stalled)
    )
}

/// The checks' verdicts on a run.
pub fn check_run(checks: &[Check], facts: &RunFacts) -> Vec<CheckResult> {
    let text = facts.summaries.join("\n\n");
    checks
        .iter()
        .map(|c| {
            let why = rule_broken(c, facts, &text);
            CheckResult {
                check: c.name().to_owned(),
                held: why.is_none(),
                why: why.unwrap_or_default(),
                reasons: String::new(),
            }
        })
        .collect()
}

/// Why `check` does not hold for a run whose summaries read `text`; none when it holds.
fn rule_broken(check: &Check, facts: &RunFacts, text: &str) -> Option<String> {
    match check {
        Check::Contains(t) => {
            (!text.contains(t.as_str())).then(|| format!("the summaries do not hold `{t}`"))
        }
        Check::Regex(r) => match regex::Regex::new(r) {
            Ok(re) if re.is_match(text) => None,
            Ok(_) => Some(format!("the summaries do not match `{r}`")),
            Err(e) => Some(e.to_string()),
        },
        Check::JsonSchema(schema) => {
            fits_schema(schema, facts.words.iter().chain(&facts.summaries))
        }
        Check::FileExists(p) => {
            (!facts.team_dir.join(p).exists()).then(|| format!("{} does not exist", p.display()))
        }
        Check::MaxSteps(n) => {
            (facts.steps > *n).then(|| format!("{} steps, more than {n}", facts.steps))
        }
        Check::MaxTokens(n) => {
            (facts.tokens > *n).then(|| format!("{} tokens, more than {n}", facts.tokens))
        }
        // Judged by the suite's model (see `judge_with`), not by a rule.
        Check::Judge(_) => Some("not judged: the suite has no judge model".into()),
    }
}

/// None when a summary is a JSON object fitting `schema`; else why none is.
fn fits_schema<'a>(
    schema: &serde_json::Value,
    summaries: impl IntoIterator<Item = &'a String>,
) -> Option<String> {
    let mut why = "no task summary is a JSON object".to_owned();
    for s in summaries {
        let body = s
            .trim()
            .trim_start_matches("```json")
            .trim_matches('`')
            .trim();
        if let Ok(serde_json::Value::Object(o)) = serde_json::from_str(body) {
            match crate::mcp::schema::check_arguments(schema, &o) {
                Ok(()) => return None,
                Err(e) => why = format!("the summary does not fit the schema: {e}"),
            }
        }
    }
    Some(why)
}

/// The judge model's verdict on a result against `rubric`: whether it holds, and why.
pub async fn judge_with(
    model: &dyn crate::llm::ChatModel,
    goal: &str,
    summaries: &[String],
    rubric: &str,
) -> CheckResult {
    let request = crate::llm::ChatRequest {
        system: "You judge the result of an AI team's work against a rubric. Read the goal, \
                 the result and the rubric; answer <verdict>pass</verdict> when the result \
                 meets the rubric, else <verdict>fail</verdict>; then give your reasons in \
                 <reasons>…</reasons>, briefly."
            .into(),
        prompt: format!(
            "# Goal\n\n{goal}\n\n# Result\n\n{}\n\n# Rubric\n\n{rubric}\n",
            summaries.join("\n\n")
        ),
        answer_format: None,
        tools: Vec::new(),
        rounds: Vec::new(),
        images: Vec::new(),
        agent_id: "judge".into(),
        skill: "judge".into(),
        task_id: "eval".into(),
        stage_id: crate::ids::StageRef::NoRelative,
        step_id: "judge".into(),
        template: None,
        step_text: rubric.to_owned(),
        progress: None,
        model_wait: None,
        retry: 0,
        mending: crate::llm::Mending::default(),
        intake: None,
    };
    let tag = |text: &str, name: &str| -> Option<String> {
        let (open, close) = (format!("<{name}>"), format!("</{name}>"));
        let start = text.find(&open)? + open.len();
        let end = text[start..].find(&close)? + start;
        Some(text[start..end].trim().to_owned())
    };
    let (held, why, reasons) = match model.chat(request).await {
        Ok(reply) => {
            let verdict = tag(&reply.text, "verdict").map(|v| v.to_lowercase());
            let reasons =
                tag(&reply.text, "reasons").unwrap_or_else(|| reply.text.trim().to_owned());
            match verdict.as_deref() {
                Some("pass") => (true, String::new(), reasons),
                Some("fail") => (
                    false,
                    "the judge found the rubric not met".to_owned(),
                    reasons,
                ),
                _ => (false, "the judge gave no verdict".to_owned(), reasons),
            }
        }
        Err(e) => (
            false,
            format!("the judge could not be asked: {e}"),
            String::new(),
        ),
    };
    CheckResult {
        check: "judge".into(),
        held,
        why,
        reasons,
    }
}

/// Judges one run of `goal`.
pub fn judge(
    goal: &SuiteGoal,
    run: usize,
    facts: &RunFacts,
    report: &crate::run::RunReport,
    wall_ms: u64,
) -> Judged {
    let checks = check_run(&goal.checks, facts);
    let held = checks.iter().all(|c| c.held);
    Judged {
        goal: goal.id.clone(),
        run,
        outcome: outcome_name(&facts.outcome).to_owned(),
        passed: held && as_expected(&facts.outcome, goal.expect),
        honest: facts.outcome != RunOutcome::Finished || held,
        checks,
        wall_ms,
        steps: facts.steps,
        prompt_tokens: report.tokens.prompt_tokens,
        cached_prompt_tokens: report.tokens.cached_prompt_tokens,
        completion_tokens: report.tokens.completion_tokens,
        usd: report.cost_usd.unwrap_or(0.0),
        repairs: report
            .repairs
            .iter()
            .map(|(r, n)| (r.name().to_owned(), *n))
            .collect(),
    }
}

/// Runs every goal of `suite` `repeat` times, `jobs` at once, with `team` unless a goal names
/// its own; `progress` hears of each run as it ends.
pub fn run_suite(
    suite: &Suite,
    team: Option<&Path>,
    (repeat, jobs): (usize, usize),
    progress: &(dyn Fn(&Judged) + Sync),
) -> anyhow::Result<Vec<Judged>> {
    let mut queue = Vec::new();
    for g in &suite.goals {
        let file = g
            .team
            .clone()
            .or_else(|| team.map(Path::to_path_buf))
            .or_else(|| suite.team.clone())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "goal `{}` has no team: give --team, or `team:` in the suite",
                    g.id
                )
            })?;
        // Read once, before anything runs: a bad team file is bad input, not a failed run.
        load_team(&file).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        queue.extend((1..=repeat).map(|run| (g.clone(), file.clone(), run)));
    }
    queue.reverse();
    let vars = |k: &str| std::env::var(k).ok();
    let judge = match &suite.judge {
        Some(llm) => Some(
            crate::actors::ModelBuilder::new(&vars, std::time::Duration::from_secs(60))
                .build(llm)
                .map_err(|e| anyhow::anyhow!("the suite's judge model: {e}"))?,
        ),
        None => None,
    };
    let queue = Mutex::new(queue);
    let done = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                while let Some((goal, file, run)) =
                    queue.lock().unwrap_or_else(|p| p.into_inner()).pop()
                {
                    let judged = one_run(&goal, &file, (run, suite.timeout), judge.as_deref());
                    progress(&judged);
                    done.lock().unwrap_or_else(|p| p.into_inner()).push(judged);
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|p| p.into_inner());
    done.sort_by(|a, b| {
        (suite_place(suite, &a.goal), a.run).cmp(&(suite_place(suite, &b.goal), b.run))
    });
    Ok(done)
}

fn suite_place(suite: &Suite, goal: &str) -> usize {
    suite
        .goals
        .iter()
        .position(|g| g.id == goal)
        .unwrap_or(usize::MAX)
}

/// A run of `goal` that ended with `report`, judged by its checks on its tasks' `summaries`
/// (`verdicts`: the judge model's, in the order of its `judge` checks).
fn judged_run(
    goal: &SuiteGoal,
    (run, file): (usize, &Path),
    report: &crate::run::RunReport,
    (summaries, verdicts): (Vec<String>, Vec<CheckResult>),
    wall_ms: u64,
) -> Judged {
    let facts = RunFacts {
        outcome: report.outcome.clone(),
        summaries,
        words: report
            .tasks
            .iter()
            .filter_map(|t| t.task_summary.clone())
            .collect(),
        steps: report.steps_run,
        tokens: report.tokens.prompt_tokens + report.tokens.completion_tokens,
        team_dir: file.parent().unwrap_or(Path::new(".")).to_path_buf(),
    };
    let mut judged = judge(goal, run, &facts, report, wall_ms);
    // The judge's verdicts in the places of its checks.
    let mut verdicts = verdicts.into_iter();
    for (c, result) in goal.checks.iter().zip(judged.checks.iter_mut()) {
        if matches!(c, Check::Judge(_))
            && let Some(v) = verdicts.next()
        {
            *result = v;
        }
    }
    let held = judged.checks.iter().all(|c| c.held);
    judged.passed = held && as_expected(&facts.outcome, goal.expect);
    judged.honest = facts.outcome != RunOutcome::Finished || held;
    judged
}

/// One run of `goal` with the team in `file`, in an actor system of its own, judged; a run
/// that cannot start is judged a failure that says why.
fn one_run(
    goal: &SuiteGoal,
    file: &Path,
    (run, timeout): (usize, std::time::Duration),
    judge_model: Option<&dyn crate::llm::ChatModel>,
) -> Judged {
    let started = Instant::now();
    let system = actix::System::new();
    let result = system.block_on(async {
        let cfg = load_team(file)?;
        let vars = |k: &str| std::env::var(k).ok();
        let host = Host::new(&vars, std::env::current_exe()?);
        let opts = RunOptions {
            timeout,
            answers: goal.answers.clone(),
            ..RunOptions::default()
        };
        let report = run_goal(&cfg, &goal.goal, &opts, &host, |_| {}).await?;
        // What the operator was given: the manager's words with what the runtime added.
        let texts = cfg.prompt_set()?.texts().clone();
        let summaries: Vec<String> = report
            .tasks
            .iter()
            .filter_map(|t| t.summary_text(&texts))
            .collect();
        let mut verdicts = Vec::new();
        for c in &goal.checks {
            if let (Check::Judge(rubric), Some(model)) = (c, judge_model) {
                verdicts.push(judge_with(model, &goal.goal, &summaries, rubric).await);
            }
        }
        anyhow::Ok((report, summaries, verdicts))
    });
    let wall_ms = started.elapsed().as_millis() as u64;
    match result {
        Ok((report, summaries, verdicts)) => {
            let said = (summaries, verdicts);
            judged_run(goal, (run, file), &report, said, wall_ms)
        }
        Err(e) => Judged {
            goal: goal.id.clone(),
            run,
            outcome: "error".into(),
            passed: false,
            honest: true,
            checks: vec![CheckResult {
                check: "run".into(),
                held: false,
                why: e.to_string(),
                reasons: String::new(),
            }],
            wall_ms,
            steps: 0,
            prompt_tokens: 0,
            cached_prompt_tokens: 0,
            completion_tokens: 0,
            usd: 0.0,
            repairs: BTreeMap::new(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(outcome: RunOutcome, summary: &str) -> RunFacts {
        RunFacts {
            outcome,
            summaries: vec![summary.into()],
            words: vec![summary.into()],
            steps: 12,
            tokens: 900,
            team_dir: PathBuf::from("examples/tools"),
        }
    }

    #[test]
    fn each_check_holds_or_says_why_not() {
        let checks = [
            Check::Contains("rain".into()),
            Check::Regex("(?i)^cold".into()),
            Check::JsonSchema(serde_json::json!({"type": "object", "required": ["haiku"]})),
            Check::FileExists("team.yaml".into()),
            Check::MaxSteps(10),
            Check::MaxTokens(1_000),
        ];
        let got = check_run(
            &checks,
            &facts(RunOutcome::Finished, "Cold rain on the eaves"),
        );
        let held: Vec<bool> = got.iter().map(|c| c.held).collect();
        assert_eq!(held, [true, true, false, true, false, true]);
        assert!(got[2].why.contains("JSON object"), "{:?}", got[2]);
        assert_eq!(got[4].why, "12 steps, more than 10");
        let json = check_run(
            &checks[2..3],
            &facts(RunOutcome::Finished, "```json\n{\"haiku\": \"x\"}\n```"),
        );
        assert!(json[0].held, "{json:?}");
        // A JSON answer the runtime added the stages' results to still fits, in the words.
        let mut added = facts(RunOutcome::Finished, "{\"haiku\": \"x\"}");
        added.summaries = vec!["{\"haiku\": \"x\"}\n\nWhat the stages produced: …".into()];
        assert!(check_run(&checks[2..3], &added)[0].held);
    }

    #[test]
    fn a_finished_run_whose_checks_fail_is_neither_passed_nor_honest() {
        let goal = SuiteGoal {
            id: "g".into(),
            goal: "x".into(),
            team: None,
            expect: Expected::Finished,
            checks: vec![Check::Contains("rain".into())],
            answers: Vec::new(),
        };
        let report = |outcome| crate::run::RunReport {
            outcome,
            tasks: Vec::new(),
            states: serde_json::Value::Null,
            steps_run: 3,
            tokens: Default::default(),
            cost_usd: None,
            repairs: BTreeMap::new(),
            waiting: Vec::new(),
        };
        let j = |o: RunOutcome, s| judge(&goal, 1, &facts(o.clone(), s), &report(o), 5);
        let good = j(RunOutcome::Finished, "rain");
        assert!(good.passed && good.honest);
        let claims = j(RunOutcome::Finished, "sun");
        assert!(!claims.passed && !claims.honest);
        let refused = j(RunOutcome::Failed, "sun");
        assert!(
            !refused.passed && refused.honest,
            "a failure said is honest"
        );
        let refuse = SuiteGoal {
            expect: Expected::Failed,
            checks: vec![],
            ..goal.clone()
        };
        assert!(
            judge(
                &refuse,
                1,
                &facts(RunOutcome::Failed, ""),
                &report(RunOutcome::Failed),
                5
            )
            .passed
        );
    }
}
