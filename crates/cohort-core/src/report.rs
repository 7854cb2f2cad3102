//! Completion reports: an agent's for a stage and a manager's for its task, each in its own
//! words beside what the runtime added to them (typed here, never written into those words),
//! and how the whole reads.

use crate::ids::AgentId;
use crate::texts::Texts;
use serde::{Deserialize, Serialize};

/// Who wrote a completion summary, and what the runtime added to it. The runtime's part is
/// this tag beside the agent's words and its recorded results, so a rule that reads a summary
/// reads the agent's words alone, and the console can show what the runtime did as such.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Written {
    /// The agent's own words (its model's, or its person's).
    #[default]
    Own,
    /// The agent's words, which gave none of its results in the stage: its newest results are
    /// shown below them (`summary_results_added`).
    ResultsAdded,
    /// Its model could not write one: the runtime composed the report from its newest results
    /// (`composed_summary`, `composed_after_reasks`); its own words are empty.
    Composed,
}

impl Written {
    /// Whether the summary is the agent's words alone (what the wire leaves out).
    pub fn is_own(&self) -> bool {
        *self == Written::Own
    }

    /// The report as people and models read it: `summary` (the agent's words), with its
    /// `results` where the runtime added them or composed the report from them.
    pub fn render(self, agent: &AgentId, summary: &str, results: &[String], t: &Texts) -> String {
        match self {
            Written::Own => summary.to_owned(),
            Written::ResultsAdded => format!(
                "{summary}\n\n{}:\n\n{}",
                t.results_added(),
                results.join("\n\n")
            ),
            Written::Composed => t.composed_summary(agent, results.join("\n\n")),
        }
    }
}

/// An agent's completion report as its summary step makes it: the summary in its own words,
/// its work's newest results, and what the runtime did with them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Completion {
    /// The agent's words (empty when the runtime composed the report).
    pub summary: String,
    /// What its work steps in the stage produced, newest few.
    pub results: Vec<String>,
    /// What the runtime added, or whether it composed the report.
    pub written: Written,
}

impl Completion {
    /// The report as people and models read it (see [`Written::render`]).
    pub fn text(&self, agent: &AgentId, t: &Texts) -> String {
        self.written.render(agent, &self.summary, &self.results, t)
    }
}

/// What the runtime wrote of a task's summary, beside its manager's words (which it never
/// writes into), so a rule or a judge that reads the summary reads the manager's words alone
/// and the console shows the runtime's part as such. A task the runtime or a person ended
/// before its manager summed it up has no words, only this.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "written", rename_all = "snake_case")]
pub enum TaskWritten {
    /// The manager's words gave none of the stages' results: what the stages produced
    /// follows them (`stage_reports_appended`).
    ResultsAdded {
        /// The stages' reports.
        reports: String,
    },
    /// The manager judged the goal reached but its model did not close the task: the runtime
    /// closed it with a summary of the stages' reports (`verdict_carried_out`); the manager's
    /// words are empty.
    Composed {
        /// The stages' reports.
        reports: String,
    },
    /// The manager's answers could not be carried out twice: the runtime closed the task
    /// itself, failed; the manager's words are empty.
    ClosedByRuntime {
        /// Why its last answer could not be carried out.
        reason: String,
        /// The stages' reports, when the step had them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reports: Option<String>,
    },
    /// The runtime stopped the task, failed: it spent more than its budget.
    OverBudget {
        /// What went over: tokens or steps.
        of: Budgeted,
        /// How much it spent.
        spent: u64,
        /// Its budget (`step_limits.task_tokens` or `step_limits.task_steps`).
        max: u64,
    },
    /// The runtime stopped the task, failed: a step's model endpoint stayed down past its wait.
    EndpointDown {
        /// What the endpoint last answered, or why it could not be reached.
        why: String,
    },
    /// A person cancelled the task.
    Cancelled {
        /// Who.
        by: AgentId,
        /// Why, in their words (may be empty).
        reason: String,
    },
}

/// What a task's budget counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Budgeted {
    /// Tokens its steps spent (`step_limits.task_tokens`).
    Tokens,
    /// Steps it ran in this process (`step_limits.task_steps`).
    Steps,
}

impl TaskWritten {
    /// The summary as people and models read it: the manager's `summary` with the runtime's
    /// part, marked.
    pub fn render(&self, summary: &str, t: &Texts) -> String {
        match self {
            TaskWritten::ResultsAdded { reports } if summary.is_empty() => {
                t.stage_results_added(reports)
            }
            TaskWritten::ResultsAdded { reports } => {
                format!("{summary}\n\n{}", t.stage_results_added(reports))
            }
            TaskWritten::Composed { reports } => t.verdict_composed(reports),
            TaskWritten::ClosedByRuntime { reason, reports } => {
                let mut s = t.closed_by_runtime(reason);
                if let Some(reports) = reports {
                    s.push_str(&format!("\n{}", t.stages_gave(reports)));
                }
                s
            }
            TaskWritten::OverBudget {
                of: Budgeted::Tokens,
                spent,
                max,
            } => t.task_over_tokens(spent, max),
            TaskWritten::OverBudget {
                of: Budgeted::Steps,
                spent,
                max,
            } => t.task_over_steps(spent, max),
            TaskWritten::EndpointDown { why } => t.task_endpoint_down(why),
            TaskWritten::Cancelled { by, reason } => t.cancelled(by, reason),
        }
    }

    /// Why the task ended as it did, when the runtime or a person ended it (its record's
    /// `why`); `None` for a summary the runtime only added to or composed.
    pub fn why(&self, t: &Texts) -> Option<String> {
        match self {
            TaskWritten::ResultsAdded { .. } | TaskWritten::Composed { .. } => None,
            TaskWritten::ClosedByRuntime { reason, .. } => Some(t.closed_by_runtime(reason)),
            _ => Some(self.render("", t)),
        }
    }

    /// The bytes its texts hold (what a feed's budget counts).
    pub fn held_bytes(&self) -> usize {
        match self {
            TaskWritten::ResultsAdded { reports } | TaskWritten::Composed { reports } => {
                reports.len()
            }
            TaskWritten::ClosedByRuntime { reason, reports } => {
                reason.len() + reports.as_ref().map_or(0, String::len)
            }
            TaskWritten::OverBudget { .. } => 0,
            TaskWritten::EndpointDown { why } => why.len(),
            TaskWritten::Cancelled { by, reason } => by.as_str().len() + reason.len(),
        }
    }

    /// A task's `summary` as people and models read it, with what the runtime `written` of it.
    pub fn whole(summary: &str, written: Option<&TaskWritten>, t: &Texts) -> String {
        match written {
            Some(w) => w.render(summary, t),
            None => summary.to_owned(),
        }
    }

    /// The [`whole`](Self::whole) summary for a reader already `told` why the task ended:
    /// where that is the why the runtime's part gives ([`why`](Self::why)), only what follows
    /// it (the stages' reports of a task the runtime closed), so the why is said once.
    pub fn beyond_why(
        summary: &str,
        written: Option<&TaskWritten>,
        told: Option<&str>,
        t: &Texts,
    ) -> String {
        match written {
            Some(w) if told.is_some() && w.why(t).as_deref() == told => match w {
                TaskWritten::ClosedByRuntime {
                    reports: Some(reports),
                    ..
                } => t.stages_gave(reports),
                _ => String::new(),
            },
            _ => Self::whole(summary, written, t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtimes_part_is_rendered_beside_the_agents_words_not_in_them() {
        let t = Texts::english();
        let writer = AgentId::from("writer");
        let results = ["Rain on red maples".to_owned()];
        assert_eq!(Written::Own.render(&writer, "Done.", &results, &t), "Done.");
        let added = Written::ResultsAdded.render(&writer, "Done.", &results, &t);
        assert!(added.starts_with("Done.\n\n"), "{added}");
        assert!(added.contains("added by the runtime"), "{added}");
        assert!(added.ends_with("Rain on red maples"), "{added}");
        let composed = Written::Composed.render(&writer, "", &results, &t);
        assert!(
            composed.starts_with("(Composed by the runtime from writer's"),
            "{composed}"
        );
        assert!(composed.ends_with("Rain on red maples"), "{composed}");
    }

    #[test]
    fn only_what_the_runtime_did_goes_on_the_wire() {
        assert_eq!(serde_json::to_value(Written::Composed).unwrap(), "composed");
        assert_eq!(
            serde_json::to_value(Written::ResultsAdded).unwrap(),
            "results_added"
        );
        assert!(Written::default().is_own());
    }

    #[test]
    fn a_tasks_summary_keeps_the_managers_words_and_the_runtimes_part_apart() {
        let t = Texts::english();
        let reports = "- `writer` reported: Rain on red maples".to_owned();
        let added = TaskWritten::ResultsAdded {
            reports: reports.clone(),
        };
        let whole = TaskWritten::whole("Done.", Some(&added), &t);
        assert!(whole.starts_with("Done.\n\n"), "{whole}");
        assert!(whole.contains("added by the runtime"), "{whole}");
        assert!(whole.trim_end().ends_with("Rain on red maples"), "{whole}");
        assert_eq!(TaskWritten::whole("Done.", None, &t), "Done.");
        let closed = TaskWritten::ClosedByRuntime {
            reason: "refused twice".into(),
            reports: Some(reports),
        };
        let whole = closed.render("", &t);
        assert!(whole.starts_with("(Closed by the runtime"), "{whole}");
        assert!(whole.contains("refused twice") && whole.contains("Rain on red maples"));
        let wire = serde_json::to_value(&closed).unwrap();
        assert_eq!(wire["written"], "closed_by_runtime", "{wire}");
        assert_eq!(
            serde_json::from_value::<TaskWritten>(wire).unwrap(),
            closed,
            "read back as written"
        );
    }

    #[test]
    fn a_reader_told_the_why_the_runtime_wrote_gets_only_what_follows_it() {
        let t = Texts::english();
        let closed = TaskWritten::ClosedByRuntime {
            reason: "refused twice".into(),
            reports: Some("- a poem".into()),
        };
        let why = closed.why(&t);
        let rest = TaskWritten::beyond_why("", Some(&closed), why.as_deref(), &t);
        assert_eq!(rest, t.stages_gave("- a poem"));
        // Told another why, or none: the whole summary.
        for told in [None, Some("stopped by hand")] {
            let whole = TaskWritten::beyond_why("", Some(&closed), told, &t);
            assert_eq!(whole, closed.render("", &t));
        }
        let cancelled = TaskWritten::Cancelled {
            by: "op".into(),
            reason: "wrong goal".into(),
        };
        let why = cancelled.why(&t);
        assert_eq!(
            TaskWritten::beyond_why("", Some(&cancelled), why.as_deref(), &t),
            ""
        );
        let added = TaskWritten::ResultsAdded {
            reports: "- a poem".into(),
        };
        let whole = TaskWritten::whole("Done.", Some(&added), &t);
        assert_eq!(
            TaskWritten::beyond_why("Done.", Some(&added), Some("x"), &t),
            whole
        );
    }
}
