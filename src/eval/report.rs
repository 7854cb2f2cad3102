//! What an eval run says: per goal, its finish rate, honest rate, median time and tokens,
//! cached share, cost and repairs by rule, as a table (stdout), JSON (to compare later) and a
//! self-contained HTML page with charts; and two runs of a suite side by side, each
//! difference marked when it is beyond noise.

use super::Judged;
use super::stats::{median, median_difference_interval, two_proportion_p};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A run of a suite, as its JSON keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SuiteResult {
    pub suite: String,
    /// The lowest finish rate each goal had to reach.
    pub min_rate: f64,
    /// When it ran (local time, `2025-06-13 10:30:22`).
    pub ran_at: String,
    pub rows: Vec<GoalRow>,
    pub runs: Vec<Judged>,
}

/// One goal's figures.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GoalRow {
    pub goal: String,
    pub runs: usize,
    pub passed: usize,
    pub honest: usize,
    pub median_wall_ms: f64,
    pub median_tokens: f64,
    /// Of the prompt tokens, the share the endpoint served from its cache.
    pub cached_share: f64,
    pub usd: f64,
    pub repairs: BTreeMap<String, u64>,
}

impl GoalRow {
    pub fn rate(&self) -> f64 {
        self.passed as f64 / self.runs.max(1) as f64
    }
}

/// Each goal's figures, in the order the runs name the goals.
pub fn rows(runs: &[Judged]) -> Vec<GoalRow> {
    let mut order: Vec<&str> = Vec::new();
    for r in runs {
        if !order.contains(&r.goal.as_str()) {
            order.push(&r.goal);
        }
    }
    order
        .into_iter()
        .map(|goal| {
            let of: Vec<&Judged> = runs.iter().filter(|r| r.goal == goal).collect();
            let prompt: u64 = of.iter().map(|r| r.prompt_tokens).sum();
            let cached: u64 = of.iter().map(|r| r.cached_prompt_tokens).sum();
            let mut repairs = BTreeMap::new();
            for r in &of {
                for (rule, n) in &r.repairs {
                    *repairs.entry(rule.clone()).or_insert(0) += n;
                }
            }
            GoalRow {
                goal: goal.to_owned(),
                runs: of.len(),
                passed: of.iter().filter(|r| r.passed).count(),
                honest: of.iter().filter(|r| r.honest).count(),
                median_wall_ms: median(&walls(&of)).unwrap_or(0.0),
                median_tokens: median(&tokens(&of)).unwrap_or(0.0),
                cached_share: if prompt == 0 {
                    0.0
                } else {
                    cached as f64 / prompt as f64
                },
                usd: of.iter().map(|r| r.usd).sum(),
                repairs,
            }
        })
        .collect()
}

fn walls(runs: &[&Judged]) -> Vec<f64> {
    runs.iter().map(|r| r.wall_ms as f64).collect()
}

fn tokens(runs: &[&Judged]) -> Vec<f64> {
    runs.iter()
        .map(|r| (r.prompt_tokens + r.completion_tokens) as f64)
        .collect()
}

/// The goals below `min_rate`.
pub fn below(rows: &[GoalRow], min_rate: f64) -> Vec<&GoalRow> {
    rows.iter().filter(|r| r.rate() + 1e-9 < min_rate).collect()
}

/// The table a person reads (Markdown).
pub fn table(rows: &[GoalRow]) -> String {
    let mut t = String::from(
        "| goal | runs | finish rate | honest rate | median time | median tokens | cached | USD | repairs |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let repairs: Vec<String> = r.repairs.iter().map(|(k, n)| format!("{k} {n}")).collect();
        t.push_str(&format!(
            "| {} | {} | {:.0} % ({}/{}) | {:.0} % | {:.1} s | {:.0} | {:.0} % | {:.4} | {} |\n",
            r.goal,
            r.runs,
            r.rate() * 100.0,
            r.passed,
            r.runs,
            r.honest as f64 / r.runs.max(1) as f64 * 100.0,
            r.median_wall_ms / 1000.0,
            r.median_tokens,
            r.cached_share * 100.0,
            r.usd,
            if repairs.is_empty() {
                "-".into()
            } else {
                repairs.join(", ")
            },
        ));
    }
    t
}

/// One goal in two runs of a suite.
#[derive(Clone, Debug, PartialEq)]
pub struct Compared {
    pub goal: String,
    /// Finish rates then and now.
    pub rates: (f64, f64),
    /// The two-proportion test's p-value.
    pub p: f64,
    /// The difference of median times (now − then), a 95 % interval in ms.
    pub wall: Option<(f64, f64)>,
    /// The same for tokens.
    pub tokens: Option<(f64, f64)>,
}

impl Compared {
    /// The rates differ beyond noise (p < 0.05).
    pub fn rate_differs(&self) -> bool {
        self.p < 0.05
    }
}

/// Each goal both runs have, then (`then`) against now (`now`).
pub fn compare(then: &SuiteResult, now: &SuiteResult) -> Vec<Compared> {
    now.rows
        .iter()
        .filter_map(|n| {
            let t = then.rows.iter().find(|t| t.goal == n.goal)?;
            let (a, b) = (of_goal(then, &n.goal), of_goal(now, &n.goal));
            Some(Compared {
                goal: n.goal.clone(),
                rates: (t.rate(), n.rate()),
                p: two_proportion_p(t.passed, t.runs, n.passed, n.runs),
                wall: median_difference_interval(&walls(&a), &walls(&b)),
                tokens: median_difference_interval(&tokens(&a), &tokens(&b)),
            })
        })
        .collect()
}

/// The runs of one goal.
fn of_goal<'a>(result: &'a SuiteResult, goal: &str) -> Vec<&'a Judged> {
    result.runs.iter().filter(|j| j.goal == goal).collect()
}

/// A comparison as a person reads it.
pub fn compared_table(rows: &[Compared]) -> String {
    let interval = |i: Option<(f64, f64)>, unit: f64| match i {
        Some((lo, hi)) => {
            let beyond = lo > 0.0 || hi < 0.0;
            format!(
                "[{:+.1}, {:+.1}]{}",
                lo / unit,
                hi / unit,
                if beyond { " beyond noise" } else { "" }
            )
        }
        None => "-".into(),
    };
    let mut t = String::from(
        "| goal | finish rate then → now | p | differs | median time Δ (s) | median tokens Δ |\n|---|---|---|---|---|---|\n",
    );
    for c in rows {
        t.push_str(&format!(
            "| {} | {:.0} % → {:.0} % | {:.3} | {} | {} | {} |\n",
            c.goal,
            c.rates.0 * 100.0,
            c.rates.1 * 100.0,
            c.p,
            if c.rate_differs() {
                "yes"
            } else {
                "no (within noise)"
            },
            interval(c.wall, 1000.0),
            interval(c.tokens, 1.0),
        ));
    }
    t
}

/// A self-contained HTML page: the table and a bar chart of finish rates (inline SVG, no
/// script, no outside file).
pub fn html(result: &SuiteResult) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let bar_h = 26;
    let height = result.rows.len() * bar_h + 30;
    let mut bars = String::new();
    for (i, r) in result.rows.iter().enumerate() {
        let y = i * bar_h + 10;
        let w = (r.rate() * 400.0).round();
        let colour = if r.rate() + 1e-9 < result.min_rate {
            "#c0392b"
        } else {
            "#2e7d32"
        };
        bars.push_str(&format!(
            "<text x=\"0\" y=\"{ty}\" font-size=\"13\">{goal}</text>\
             <rect x=\"200\" y=\"{y}\" width=\"{w}\" height=\"18\" fill=\"{colour}\"/>\
             <text x=\"{tx}\" y=\"{ty}\" font-size=\"12\">{pct:.0} %</text>",
            ty = y + 14,
            goal = esc(&r.goal),
            tx = 206.0 + w,
            pct = r.rate() * 100.0,
        ));
    }
    let min_x = 200.0 + result.min_rate * 400.0;
    let rows: String = result
        .rows
        .iter()
        .map(|r| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{:.0} %</td><td>{:.0} %</td><td>{:.1} s</td><td>{:.0}</td><td>{:.0} %</td><td>{:.4}</td></tr>",
                esc(&r.goal),
                r.runs,
                r.rate() * 100.0,
                r.honest as f64 / r.runs.max(1) as f64 * 100.0,
                r.median_wall_ms / 1000.0,
                r.median_tokens,
                r.cached_share * 100.0,
                r.usd
            )
        })
        .collect();
    format!(
        "<!doctype html><html lang=\"en\"><meta charset=\"utf-8\"><title>{name} · cohort eval</title>\
         <style>body{{font:14px system-ui,sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}td:first-child,th:first-child{{text-align:left}}</style>\
         <h1>{name}</h1><p>ran {ran}; each goal must finish at least {min:.0} % of its runs.</p>\
         <h2>Finish rate</h2><svg width=\"680\" height=\"{height}\" role=\"img\" aria-label=\"finish rate per goal\">{bars}\
         <line x1=\"{min_x}\" x2=\"{min_x}\" y1=\"0\" y2=\"{height}\" stroke=\"#555\" stroke-dasharray=\"4 3\"/></svg>\
         <h2>Figures</h2><table><tr><th>goal</th><th>runs</th><th>finish rate</th><th>honest rate</th>\
         <th>median time</th><th>median tokens</th><th>cached</th><th>USD</th></tr>{rows}</table></html>\n",
        name = esc(&result.suite),
        ran = esc(&result.ran_at),
        min = result.min_rate * 100.0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(goal: &str, passed: bool, wall_ms: u64) -> Judged {
        Judged {
            goal: goal.into(),
            run: 1,
            outcome: if passed { "finished" } else { "failed" }.into(),
            passed,
            honest: true,
            checks: Vec::new(),
            wall_ms,
            steps: 10,
            prompt_tokens: 1_000,
            cached_prompt_tokens: 250,
            completion_tokens: 100,
            usd: 0.01,
            repairs: BTreeMap::from([("reask".to_owned(), 1)]),
        }
    }

    #[test]
    fn rows_gather_each_goals_runs_and_a_comparison_tells_a_real_change_from_noise() {
        let mut then: Vec<Judged> = (0..20).map(|i| run("haiku", true, 1_000 + i)).collect();
        then.extend((0..20).map(|i| run("lookup", i % 2 == 0, 2_000 + i)));
        let r = rows(&then);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].runs, r[0].passed, r[0].rate()), (20, 20, 1.0));
        assert_eq!(r[0].cached_share, 0.25);
        assert_eq!(r[0].repairs["reask"], 20);
        assert_eq!(
            below(&r, 0.9)
                .iter()
                .map(|r| r.goal.as_str())
                .collect::<Vec<_>>(),
            ["lookup"]
        );
        assert!(table(&r).contains("| haiku | 20 | 100 % (20/20) |"));

        // Now the haiku breaks (a prompt broken on purpose); the lookup is as it was.
        let mut now: Vec<Judged> = (0..20).map(|i| run("haiku", i < 4, 1_000 + i)).collect();
        now.extend((0..20).map(|i| run("lookup", i % 2 == 1, 2_000 + i)));
        let result = |runs: Vec<Judged>| SuiteResult {
            suite: "s".into(),
            min_rate: 0.9,
            ran_at: "now".into(),
            rows: rows(&runs),
            runs,
        };
        let c = compare(&result(then), &result(now.clone()));
        assert!(c[0].rate_differs(), "{c:?}");
        assert!(!c[1].rate_differs(), "{c:?}");
        let shown = compared_table(&c);
        assert!(shown.contains("| haiku | 100 % → 20 % |") && shown.contains("no (within noise)"));
        let page = html(&result(now));
        assert!(
            page.starts_with("<!doctype html>") && page.contains("<svg") && page.contains("lookup")
        );
        assert!(!page.contains("<script"), "self-contained, no script");
    }
}
