//! `cohort eval SUITE.yaml`: run a suite's goals against a team, print the table, write the
//! JSON and HTML reports, compare with an earlier run, and exit non-zero when a goal's finish
//! rate falls below the suite's `min_rate`.

use anyhow::Context as _;
use cohort::config::eval_suite::load_suite;
use cohort::eval::report::{SuiteResult, below, compare, compared_table, html, rows, table};
use cohort::eval::{Judged, run_suite};
use std::path::{Path, PathBuf};

/// What `cohort eval` was asked.
#[derive(clap::Args)]
pub struct EvalArgs {
    /// The suite file (see evals/suite.yaml).
    pub suite: PathBuf,
    /// The team file the goals run with (instead of the suite's `team:`).
    #[arg(long)]
    pub team: Option<PathBuf>,
    /// Runs per goal (instead of the suite's `repeat:`).
    #[arg(long)]
    pub repeat: Option<usize>,
    /// Runs at once.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Where the results' JSON goes (default: eval-<suite>.json here).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also write a self-contained HTML report here.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// An earlier run's JSON: each goal's figures side by side, each difference marked when
    /// it is beyond noise.
    #[arg(long)]
    pub compare: Option<PathBuf>,
}

/// Runs the suite; exit 0 when every goal reached `min_rate`, 1 when one did not.
pub fn eval(args: &EvalArgs) -> anyhow::Result<u8> {
    let suite = load_suite(&args.suite).map_err(|problems| {
        let lines: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        anyhow::anyhow!("{}", lines.join("\n"))
    })?;
    let then = match &args.compare {
        Some(f) => Some(read_result(f)?),
        None => None,
    };
    let repeat = args.repeat.unwrap_or(suite.repeat).max(1);
    eprintln!(
        "eval `{}`: {} goals × {repeat} runs, {} at once",
        suite.name,
        suite.goals.len(),
        args.jobs.max(1)
    );
    let progress = |j: &Judged| {
        let verdict = if j.passed { "pass" } else { "FAIL" };
        let why: Vec<&str> = j
            .checks
            .iter()
            .filter(|c| !c.held)
            .map(|c| c.why.as_str())
            .collect();
        eprintln!(
            "  {verdict} {} #{} ({}, {:.1} s){}",
            j.goal,
            j.run,
            j.outcome,
            j.wall_ms as f64 / 1000.0,
            if why.is_empty() {
                String::new()
            } else {
                format!(": {}", why.join("; "))
            }
        );
    };
    let runs = run_suite(&suite, args.team.as_deref(), (repeat, args.jobs), &progress)?;
    let result = SuiteResult {
        suite: suite.name.clone(),
        min_rate: suite.min_rate,
        ran_at: cohort::clock::local_timestamp(),
        rows: rows(&runs),
        runs,
    };
    print!("{}", table(&result.rows));
    let json = args
        .json
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("eval-{}.json", suite.name)));
    std::fs::write(&json, serde_json::to_string_pretty(&result)?)
        .with_context(|| format!("writing {}", json.display()))?;
    eprintln!("results: {}", json.display());
    if let Some(page) = &args.html {
        std::fs::write(page, html(&result))
            .with_context(|| format!("writing {}", page.display()))?;
        eprintln!("report: {}", page.display());
    }
    if let Some(then) = &then {
        println!("\nCompared with {} (ran {}):\n", then.suite, then.ran_at);
        print!("{}", compared_table(&compare(then, &result)));
    }
    let low = below(&result.rows, suite.min_rate);
    if low.is_empty() {
        eprintln!(
            "every goal reached its finish rate of {:.0} %",
            suite.min_rate * 100.0
        );
        Ok(0)
    } else {
        let names: Vec<&str> = low.iter().map(|r| r.goal.as_str()).collect();
        eprintln!(
            "below the finish rate of {:.0} %: {}",
            suite.min_rate * 100.0,
            names.join(", ")
        );
        Ok(1)
    }
}

fn read_result(file: &Path) -> anyhow::Result<SuiteResult> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not the JSON of a `cohort eval` run", file.display()))
}
