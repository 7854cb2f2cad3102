//! `cohort run`: start the team, give it the goal, print progress on stderr while it works,
//! then the tasks' summaries on stdout and one closing line whose words and exit code match
//! the tasks' final states.

use super::output::Paint;
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
                eprintln!(
                    "{} {}",
                    paint.yellow(&pad(&t.run_mark_wait(), MARK)),
                    w.render(t)
                );
            }
            stalled_on_people(&report.waiting, team, data, t)
        }
        _ => said,
    };
    let repairs = cohort::policy::repairs::counted(&report.repairs, t)
        .map(|r| t.run_repairs(r))
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
            t.summary_text(texts)
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
        let summary = t.summary_text(texts)?;
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

/// The widths, in a terminal's columns, a step's mark and a stage's word are padded to, so
/// the lines' columns meet (`ok  `, `FAIL`; `stage started `, `stage finished`).
const MARK: usize = 4;
const STAGE_WORD: usize = 14;

/// One progress line (two for a failed step: its reason), in the team's language.
pub fn line(p: &Progress<'_>, paint: &Paint, t: &cohort::prompt::Texts) -> String {
    match p {
        Progress::Step { step, agent, took } => step_line(step, agent, *took, paint, t),
        Progress::Stage { stage, agents } => {
            let word = match stage.execution_state {
                ExecutionState::Running => paint.bold(&pad(&t.run_stage_started(), STAGE_WORD)),
                ExecutionState::Finished => paint.green(&pad(&t.run_stage_finished(), STAGE_WORD)),
                ExecutionState::Cancelled => {
                    paint.yellow(&pad(&t.run_stage_cancelled(), STAGE_WORD))
                }
                _ => paint.red(&pad(&t.run_stage_failed(), STAGE_WORD)),
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
            "{} {} {:<22} {}\n       {}",
            paint.yellow(&pad(&t.run_mark_wait(), MARK)),
            pad(agent, 10),
            step.executor.name(),
            t.run_model_wait(),
            t.run_reason(reason),
        ),
        Progress::Waiting { elapsed, running } => {
            let now = if running.is_empty() {
                t.run_nothing_running()
            } else {
                running
                    .iter()
                    .map(|r| format!("{} {} {}", r.agent, r.executor, span(r.running_for, t)))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            paint.dim(&t.run_waiting(span(*elapsed, t), now))
        }
    }
}

/// A step that ended: its mark, agent, executor, intention and tokens, and why it failed.
fn step_line(
    step: &cohort::state::StepState,
    agent: &str,
    took: Option<std::time::Duration>,
    paint: &Paint,
    t: &cohort::prompt::Texts,
) -> String {
    let mark = match step.execution_state {
        StepExecutionState::Finished => paint.green(&pad(&t.run_mark_ok(), MARK)),
        StepExecutionState::Cancelled => paint.yellow(&pad(&t.run_mark_stopped(), MARK)),
        _ => paint.red(&pad(&t.run_mark_failed(), MARK)),
    };
    let u = step.token_usage;
    let prompt = format!("{}{}", u.prompt_tokens, cached(u, t));
    let usage = match took {
        Some(d) => t.run_usage_took(span(d, t), prompt, u.completion_tokens),
        None => t.run_usage(prompt, u.completion_tokens),
    };
    let mut line = format!(
        "{mark} {} {:<22} {} {}",
        pad(agent, 10),
        step.executor.name(),
        step.step_intention.lines().next().unwrap_or_default(),
        paint.dim(&usage),
    );
    // Why it failed, or why it was set aside (a person's cancel, its work ending).
    let set_aside = (step.execution_state == StepExecutionState::Cancelled)
        .then(|| step.execute_result.as_ref()?.error.as_deref())
        .flatten();
    if let Some(reason) = step.failure_reason().or(set_aside) {
        line.push_str(&format!("\n       {}", t.run_reason(reason)));
    }
    line
}

/// `850 ms`, `12.3 s`, `2m 05s`, in the team's language.
fn span(d: std::time::Duration, t: &cohort::prompt::Texts) -> String {
    let ms = d.as_millis();
    if ms < 1_000 {
        t.run_ms(ms)
    } else if ms < 60_000 {
        t.run_s(format!("{:.1}", d.as_secs_f64()))
    } else {
        t.run_min_s(d.as_secs() / 60, format!("{:02}", d.as_secs() % 60))
    }
}

/// `text` padded with spaces to `width` terminal columns (a CJK character takes two).
fn pad(text: &str, width: usize) -> String {
    let cols: usize = text
        .chars()
        .map(|c| if c.len_utf8() >= 3 { 2 } else { 1 })
        .sum();
    format!("{text}{}", " ".repeat(width.saturating_sub(cols)))
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

    #[test]
    fn spans_and_marks_read_in_the_teams_language_and_keep_their_columns() {
        use std::time::Duration;
        let en = cohort::prompt::Texts::english();
        assert_eq!(span(Duration::from_millis(850), &en), "850 ms");
        assert_eq!(span(Duration::from_millis(12_340), &en), "12.3 s");
        assert_eq!(span(Duration::from_secs(125), &en), "2m 05s");
        let zh = cohort::prompt::Texts::builtin(cohort::prompt::Language::Zh);
        assert_eq!(span(Duration::from_secs(125), &zh), "2 分 05 秒");
        // A Chinese mark takes as many columns as the English one it stands for.
        assert_eq!(pad(&zh.run_mark_ok(), MARK), "完成");
        assert_eq!(pad(&en.run_mark_ok(), MARK), "ok  ");
        assert_eq!(pad(&zh.run_stage_started(), STAGE_WORD), "阶段开始      ");
        let waiting = Progress::Waiting {
            elapsed: Duration::from_secs(95),
            running: vec![],
        };
        assert_eq!(
            line(&waiting, &Paint(false), &zh),
            "…    已用 1 分 35 秒，正在运行：没有在运行的步骤；在等一条消息或一个人"
        );
    }
}
