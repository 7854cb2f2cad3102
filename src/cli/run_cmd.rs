//! `cohort run`: start the team, give it the goal, print progress on stderr while it works,
//! then the tasks' summaries on stdout and one closing line whose words and exit code match
//! the tasks' final states.

use super::output::{Paint, duration};
use anyhow::Context as _;
use cohort::actors::Host;
use cohort::config::load_team;
use cohort::run::{Progress, RunOptions, run_goal};
use cohort::state::{ExecutionState, StepExecutionState};
use std::path::Path;

/// Runs the goal; the exit code is the outcome's (see `RunOutcome::exit_code`). `data` is the
/// store the run keeps its state in (`--data` / `--database` as given), for the advice on how
/// to answer a person's wait the run stalled on.
pub async fn run(
    team: &Path,
    goal: &str,
    json: bool,
    opts: &RunOptions,
    data: Option<&str>,
) -> anyhow::Result<u8> {
    if goal.trim().is_empty() {
        anyhow::bail!("the goal is empty: say what the team should do with --goal \"…\"");
    }
    let cfg = load_team(team).with_context(|| format!("loading {}", team.display()))?;
    let vars = |k: &str| std::env::var(k).ok();
    let mut host = Host::new(
        &vars,
        std::env::current_exe().context("locating the cohort binary")?,
    );
    host.attachments = opts.store_spec.clone();
    let paint = Paint(super::output::colour());
    // How the tasks ended, and how the run did, is said in the team's language.
    let texts = cfg.prompt_set()?.texts().clone();
    let t = texts.as_ref();
    let report = run_goal(&cfg, goal, opts, &host, |p| {
        eprintln!("{}", line(&p, &paint, t))
    })
    .await?;
    print_results(&report, json, t)?;
    let tokens = report.tokens;
    let cost = report
        .cost_usd
        .map(|usd| format!(", ${usd:.4}"))
        .unwrap_or_default();
    let code = report.outcome.exit_code();
    let said = report.outcome.describe(opts.timeout, t);
    let what = match (&report.outcome, why_failed(&report.tasks, t)) {
        (cohort::run::RunOutcome::Failed, Some(why)) => t.run_task_failed(why),
        (cohort::run::RunOutcome::Finished, _) => match failed_stages(&report.tasks, t) {
            Some(which) => t.run_with_failed_stages(said, which),
            None => said,
        },
        (cohort::run::RunOutcome::Stalled, _) if !report.waiting.is_empty() => {
            for w in &report.waiting {
                eprintln!("{} {}", paint.yellow("WAIT"), w.render());
            }
            stalled_on_people(&report.waiting, team, data, t)
        }
        _ => said,
    };
    let repairs = cohort::policy::repairs::counted(&report.repairs)
        .map(|r| format!(", {r}"))
        .unwrap_or_default();
    let steps = match report.steps_run {
        1 => t.run_one_step(),
        n => t.run_steps(n),
    };
    let tasks = match report.tasks.len() {
        1 => t.run_one_task(),
        n => t.run_tasks(n),
    };
    let totals = t.run_totals(
        steps,
        tokens.prompt_tokens,
        cached(tokens, t),
        tokens.completion_tokens,
        cost,
        tasks,
        repairs,
    );
    let what = if code == 0 {
        paint.green(&what)
    } else {
        paint.red(&what)
    };
    eprintln!("{what} {totals}");
    Ok(code)
}

/// What the run gave, on stdout: its final states as JSON, or each task's summary (and how it
/// ended, when there is more to say than its state).
fn print_results(
    report: &cohort::run::RunReport,
    json: bool,
    texts: &cohort::prompt::Texts,
) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&report.states)?);
        return Ok(());
    }
    for t in &report.tasks {
        println!(
            "# {}\n\n{}\n",
            t.task_name,
            t.task_summary
                .clone()
                .unwrap_or_else(|| texts.run_no_summary())
        );
        if let Some(end) = &t.outcome {
            println!(
                "({} {}: {})\n",
                t.task_name,
                t.execution_state,
                end.render(texts)
            );
        }
    }
    Ok(())
}

/// The closing line of a run that stalled waiting for people: whom it waits for (each wait
/// was said on a line of its own above) and how to answer, which `run` cannot do.
fn stalled_on_people(
    waiting: &[cohort::run::PersonWait],
    team: &Path,
    data: Option<&str>,
    t: &cohort::prompt::Texts,
) -> String {
    let mut people: Vec<String> = Vec::new();
    for w in waiting {
        let who = w
            .person
            .as_ref()
            .map_or_else(|| t.run_an_operator(), |p| format!("`{p}`"));
        if !people.contains(&who) {
            people.push(who);
        }
    }
    let answer = match data {
        Some(d) => t.run_answer_in_console(team.display(), d),
        None => t.run_answer_without_data(team.display()),
    };
    t.run_stalled_on(people.join(", "), answer)
}

/// Why the first failed task failed: what its record says, or its summary's first line.
fn why_failed(tasks: &[cohort::state::TaskState], texts: &cohort::prompt::Texts) -> Option<String> {
    let t = tasks
        .iter()
        .find(|t| t.execution_state == cohort::state::ExecutionState::Failed)?;
    let said = t
        .outcome
        .as_ref()
        .map(|e| e.render(texts))
        .filter(|r| !r.is_empty());
    said.or_else(|| {
        let summary = t.task_summary.as_deref()?;
        summary
            .lines()
            .find(|l| !l.trim().is_empty())
            .map(str::to_owned)
    })
}

/// " (1800 cached)": the prompt tokens the endpoint served from its cache, when it reported any.
fn cached(u: cohort::state::TokenUsage, t: &cohort::prompt::Texts) -> String {
    match u.cached_prompt_tokens {
        0 => String::new(),
        n => format!(" {}", t.run_cached(n)),
    }
}

/// Which stages of a finished task gave no result, and why; `None` when all gave one.
fn failed_stages(
    tasks: &[cohort::state::TaskState],
    texts: &cohort::prompt::Texts,
) -> Option<String> {
    tasks
        .iter()
        .filter_map(|t| t.outcome.as_ref())
        .map(|e| e.render(texts))
        .find(|r| !r.is_empty())
}

/// One progress line (two for a failed step: its reason).
pub fn line(p: &Progress<'_>, paint: &Paint, t: &cohort::prompt::Texts) -> String {
    match p {
        Progress::Step { step, agent, took } => {
            let mark = match step.execution_state {
                StepExecutionState::Finished => paint.green("ok  "),
                StepExecutionState::Cancelled => paint.yellow("STOP"),
                _ => paint.red("FAIL"),
            };
            let took = took
                .map(|d| format!("{}, ", duration(d)))
                .unwrap_or_default();
            let mut line = format!(
                "{mark} {:<10} {:<22} {} {}",
                agent,
                step.executor.name(),
                step.step_intention.lines().next().unwrap_or_default(),
                paint.dim(&format!(
                    "({took}{}{}+{} tok)",
                    step.token_usage.prompt_tokens,
                    cached(step.token_usage, t),
                    step.token_usage.completion_tokens
                )),
            );
            // Why it failed, or why it was set aside (a person's cancel, its work ending).
            let set_aside = (step.execution_state == StepExecutionState::Cancelled)
                .then(|| step.execute_result.as_ref()?.error.as_deref())
                .flatten();
            if let Some(reason) = step.failure_reason().or(set_aside) {
                line.push_str(&format!("\n       reason: {reason}"));
            }
            line
        }
        Progress::Stage { stage, agents } => {
            let word = match stage.execution_state {
                ExecutionState::Running => paint.bold("stage started "),
                ExecutionState::Finished => paint.green("stage finished"),
                ExecutionState::Cancelled => paint.yellow("stage cancelled"),
                _ => paint.red("stage failed  "),
            };
            format!(
                "{word} {} ({})",
                stage.stage_intention.lines().next().unwrap_or_default(),
                agents.join(", ")
            )
        }
        Progress::ModelWait {
            step,
            agent,
            reason,
        } => format!(
            "{} {:<10} {:<22} the model endpoint is not answering; waiting for it (waits.model_secs)\n       reason: {reason}",
            paint.yellow("WAIT"),
            agent,
            step.executor.name(),
        ),
        Progress::Waiting { elapsed, running } => {
            let now = if running.is_empty() {
                "nothing is running; waiting for a message or a person".to_owned()
            } else {
                running
                    .iter()
                    .map(|r| format!("{} {} {}", r.agent, r.executor, duration(r.running_for)))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            paint.dim(&format!("…    {} in: {now}", duration(*elapsed)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cohort::run::Running;
    use cohort::state::{Executor, Skill, StageState, StepState};
    use std::time::Duration;

    #[test]
    fn progress_lines_say_what_ended_how_long_it_took_and_what_still_runs() {
        let plain = Paint(false);
        let english = cohort::prompt::Texts::english();
        let mut step = StepState::new(
            "t".into(),
            cohort::ids::StageRef::NoRelative,
            "writer".into(),
            Executor::Skill(Skill::Think),
            "Draft the haiku",
            "",
        );
        step.execution_state = StepExecutionState::Finished;
        step.token_usage.prompt_tokens = 812;
        step.token_usage.completion_tokens = 64;
        let took = Some(Duration::from_millis(2_100));
        assert_eq!(
            line(
                &Progress::Step {
                    step: &step,
                    agent: "Wren",
                    took
                },
                &plain,
                &english
            ),
            "ok   Wren       think                  Draft the haiku (2.1 s, 812+64 tok)"
        );
        // Prompt tokens the endpoint served from its cache are said apart.
        step.token_usage.cached_prompt_tokens = 700;
        let shown = line(
            &Progress::Step {
                step: &step,
                agent: "Wren",
                took,
            },
            &plain,
            &english,
        );
        assert!(
            shown.ends_with("(2.1 s, 812 (700 cached)+64 tok)"),
            "{shown}"
        );
        let mut stage = StageState::new(
            "t".into(),
            "Draft it".into(),
            [
                ("writer".into(), "draft".into()),
                ("reviewer".into(), "review".into()),
            ]
            .into(),
        );
        stage.execution_state = ExecutionState::Running;
        assert_eq!(
            line(
                &Progress::Stage {
                    stage: &stage,
                    agents: vec!["Rook".into(), "Wren".into()]
                },
                &plain,
                &english
            ),
            "stage started  Draft it (Rook, Wren)"
        );
        let waiting = Progress::Waiting {
            elapsed: Duration::from_secs(95),
            running: vec![Running {
                agent: "Mira".into(),
                executor: "task_manager".into(),
                running_for: Duration::from_secs(48),
            }],
        };
        assert_eq!(
            line(&waiting, &plain, &english),
            "…    1m 35s in: Mira task_manager 48.0 s"
        );
        assert!(line(&waiting, &Paint(true), &english).starts_with("\x1b[2m"));
    }
}
