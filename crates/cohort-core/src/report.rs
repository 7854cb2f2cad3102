//! An agent's completion report for a stage: its summary in its own words, what the runtime
//! added to it (typed here, never written into those words), and how the whole reads.

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
}
