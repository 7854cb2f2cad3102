//! The `scripted` provider: replies from a YAML script, selected by agent and skill and
//! consumed in order, for offline runs and tests. Replies are keyed by agent id or, for agents
//! a manager creates at run time (whose ids a script cannot know in advance), by the name of
//! the template they were created from; an agent's own id wins when the script has both. A
//! reply may name the ids of the step that asks (`{{task_id}}`, `{{stage_id}}`, `{{step_id}}`,
//! `{{agent_id}}`). A script that runs out fails that step with a clear message.
//!
//! An entry with a `delay_ms` is written out over that pause (the text so far told to the
//! request's progress, in four pieces), so the console shows it being written as it would a
//! streamed answer.
//!
//! An entry with `when` is a rule instead: never used up, it answers every step whose intention
//! or text contains that string (the first matching rule wins; the entries without `when` are
//! the fallback, in order). A script made of rules answers the same however many goals run at
//! once and wherever a restart cut in.
//!
//! ```yaml
//! replies:
//!   writer:                      # agent id (or template name)
//!     think:                     # skill
//!       - "<think>…</think>"
//!       - text: "<think>…</think>"
//!         delay_ms: 200          # optional: answer after a pause
//!       - when: "Check it"       # optional: a rule for steps that say this
//!         text: "<think>…</think>"
//! ```

use super::{Answered, ChatModel, ChatReply, ChatRequest, LlmError};
pub use cohort_core::config::script::{
    CORRECT_ARGUMENTS, OTHER_CALLS, REFUSAL_JUDGE, RISK_JUDGE, SUMMARIZE_HISTORY, Script,
};
use cohort_core::config::script::{Entry, render};
use cohort_core::state::TokenUsage;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Serves a script; one cursor per (script key, skill), shared by every agent that uses it — so
/// agents made from one template take that template's replies in turn.
pub struct ScriptedModel {
    script: Script,
    cursors: Mutex<HashMap<(String, String), usize>>,
}

impl ScriptedModel {
    pub fn new(script: Script) -> Arc<Self> {
        Arc::new(ScriptedModel {
            script,
            cursors: Mutex::new(HashMap::new()),
        })
    }

    /// The script key of an agent: its own id first; its template only when the script never
    /// names the agent. Also whether that is the template.
    fn key<'a>(&self, agent: &'a str, template: Option<&'a str>) -> (&'a str, bool) {
        let named = |key: &str| self.script.replies.contains_key(key);
        match template {
            Some(t) if !named(agent) && named(t) => (t, true),
            _ => (agent, false),
        }
    }

    /// The rule that answers a step of `key` with `skill` saying `step_text`, if one does.
    fn rule(&self, key: &str, skill: &str, step_text: &str) -> Option<&Entry> {
        self.script
            .split
            .get(key)?
            .get(skill)?
            .rules
            .iter()
            .find(|e| e.when().is_some_and(|w| step_text.contains(w)))
    }

    fn next(&self, req: &ChatRequest) -> Result<Entry, LlmError> {
        let agent = req.agent_id.as_str();
        let (key, by_template) = self.key(agent, req.template.as_deref());
        let template = by_template.then_some(key);
        if let Some(rule) = self.rule(key, &req.skill, &req.step_text) {
            return Ok(rule.clone());
        }
        let list = self.script.split.get(key).and_then(|s| s.get(&req.skill));
        let mut cursors = self.cursors.lock().unwrap_or_else(|p| p.into_inner());
        let used = cursors
            .entry((key.to_owned(), req.skill.clone()))
            .or_insert(0);
        let entry = list
            .and_then(|l| l.in_order.get(*used).cloned())
            .ok_or_else(|| LlmError::ScriptExhausted {
                agent: match template {
                    Some(t) => format!("{agent} (template {t})"),
                    None => agent.to_owned(),
                },
                skill: req.skill.clone(),
                used: *used,
            })?;
        *used += 1;
        Ok(entry)
    }
}

impl ChatModel for ScriptedModel {
    /// Each answered call that took a reply in order moves its cursor on: a scripted team
    /// restarted on its store goes on with the next reply, not the first one again.
    fn carry_on(&self, answered: &[Answered]) {
        let mut cursors = self.cursors.lock().unwrap_or_else(|p| p.into_inner());
        // What it was told before of these agents is replaced, not added to.
        let told: std::collections::HashSet<&str> = answered
            .iter()
            .map(|a| self.key(a.agent_id.as_str(), a.template.as_deref()).0)
            .collect();
        cursors.retain(|(key, _), _| !told.contains(key.as_str()));
        for a in answered {
            let (key, _) = self.key(a.agent_id.as_str(), a.template.as_deref());
            if self.rule(key, &a.skill, &a.step_text).is_none() {
                *cursors
                    .entry((key.to_owned(), a.skill.clone()))
                    .or_insert(0) += 1;
            }
        }
    }

    fn chat(&self, req: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>> {
        let answer = self.next(&req).and_then(|entry| {
            let vars: HashMap<&str, String> = [
                ("task_id", req.task_id.to_string()),
                ("stage_id", req.stage_id.to_string()),
                ("step_id", req.step_id.to_string()),
                ("agent_id", req.agent_id.to_string()),
            ]
            .into_iter()
            .collect();
            let text = render(entry.text(), &vars, false).map_err(LlmError::Script)?;
            Ok((text, entry.delay()))
        });
        let prompt_tokens = estimate_tokens(&req.system) + estimate_tokens(&req.prompt);
        let progress = req.progress;
        Box::pin(async move {
            let (text, delay) = answer?;
            if !delay.is_zero() {
                // A slow answer is written out over its pause, as a streamed one would be.
                let pieces = match &progress {
                    Some(_) => WRITTEN_IN,
                    None => 1,
                };
                let chars: Vec<char> = text.chars().collect();
                for i in 1..=pieces {
                    tokio::time::sleep(delay / pieces as u32).await;
                    if let (Some(p), true) = (&progress, i < pieces) {
                        let so_far: String = chars[..chars.len() * i / pieces].iter().collect();
                        p.tell(&so_far);
                    }
                }
            }
            let usage = TokenUsage::new(prompt_tokens, estimate_tokens(&text));
            Ok(ChatReply {
                text,
                usage,
                cut: None,
                tool_calls: Vec::new(),
            })
        })
    }
}

/// The pieces a scripted answer with a pause is written out in (when the asker follows it).
const WRITTEN_IN: usize = 4;

/// A scripted model has no tokenizer; it counts about four characters a token, as a rough
/// stand-in so usage figures are non-zero and comparable between runs.
fn estimate_tokens(text: &str) -> u64 {
    cohort_core::prompt::tokens::estimate(text) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(agent: &str, skill: &str) -> ChatRequest {
        req_from(agent, None, skill)
    }

    fn req_from(agent: &str, template: Option<&str>, skill: &str) -> ChatRequest {
        ChatRequest {
            prompt: "p".repeat(40),
            template: template.map(str::to_owned),
            step_text: "Write it\nA haiku about rain".into(),
            ..ChatRequest::test(agent, skill)
        }
    }

    #[tokio::test]
    async fn a_slow_answer_is_written_out_over_its_pause() {
        let script =
            "replies:\n  w:\n    think:\n      - {text: '<think>abcdefgh</think>', delay_ms: 40}\n";
        let m = ScriptedModel::new(Script::parse(script).unwrap());
        let told = std::sync::Arc::new(Mutex::new(Vec::new()));
        let sink = told.clone();
        let mut r = req("w", "think");
        r.progress = Some(crate::AnswerProgress::new(move |t| {
            sink.lock().unwrap().push(t.to_owned())
        }));
        let reply = m.chat(r).await.unwrap();
        let told = told.lock().unwrap().clone();
        assert_eq!(told.len(), WRITTEN_IN - 1, "{told:?}");
        assert!(told.iter().all(|t| reply.text.starts_with(t.as_str())));
        assert!(told.windows(2).all(|w| w[1].len() > w[0].len()));
    }

    #[tokio::test]
    async fn a_restarted_script_goes_on_where_its_answered_steps_left_it() {
        let script = "replies:\n  w:\n    think:\n      - {when: haiku, text: rule}\n      - one\n      - two\n";
        let m = ScriptedModel::new(Script::parse(script).unwrap());
        let answered = |text: &str| Answered {
            agent_id: "w".into(),
            template: None,
            skill: "think".into(),
            step_text: text.into(),
        };
        // Two answered steps before the restart: one by the rule, one in order.
        m.carry_on(&[answered("a haiku"), answered("anything")]);
        let mut r = req("w", "think");
        r.step_text = "something else".into();
        assert_eq!(m.chat(r).await.unwrap().text, "two");
    }

    #[tokio::test]
    async fn rules_answer_every_step_that_says_their_words_and_are_never_used_up() {
        let script = "replies:\n  w:\n    think:\n      - {when: haiku, text: rule}\n      - {when: limerick, text: other}\n      - fallback\n";
        let m = ScriptedModel::new(Script::parse(script).unwrap());
        for _ in 0..3 {
            assert_eq!(m.chat(req("w", "think")).await.unwrap().text, "rule");
        }
        let mut r = req("w", "think");
        r.step_text = "A sonnet".into();
        assert_eq!(m.chat(r.clone()).await.unwrap().text, "fallback");
        let err = m.chat(r).await.unwrap_err().to_string();
        assert!(err.contains("no reply left"), "{err}");
    }

    const SCRIPT: &str = "replies:\n  w:\n    think:\n      - \"<think>in {{task_id}}/{{stage_id}} by {{agent_id}}</think>\"\n      - {text: second, delay_ms: 5}\n";

    #[tokio::test]
    async fn replies_come_in_order_with_ids_filled_in_then_run_out() {
        let m = ScriptedModel::new(Script::parse(SCRIPT).unwrap());
        let r = m.chat(req("w", "think")).await.unwrap();
        assert_eq!(r.text, "<think>in T1/S1 by w</think>");
        assert_eq!(r.usage.prompt_tokens, 10);
        assert_eq!(m.chat(req("w", "think")).await.unwrap().text, "second");
        let err = m.chat(req("w", "think")).await.unwrap_err().to_string();
        assert!(
            err.contains("no reply left for agent `w` skill `think`"),
            "{err}"
        );
        let err = m.chat(req("x", "planning")).await.unwrap_err().to_string();
        assert!(err.contains("agent `x` skill `planning`"), "{err}");
    }

    #[test]
    fn check_reports_unknown_agents_skills_and_placeholders() {
        let s = Script::parse("replies:\n  ghost:\n    dance: [\"{{nope}}\"]\n").unwrap();
        let p = s.check_against(&["w".into()]);
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p[2].1.contains("unknown placeholder {{nope}}"));
    }

    #[tokio::test]
    async fn agents_made_from_a_template_take_its_replies_in_turn() {
        let m = ScriptedModel::new(
            Script::parse("replies:\n  coder:\n    think: [one, two]\n  c1:\n    think: [own]\n")
                .unwrap(),
        );
        let ask = |agent: &str| m.chat(req_from(agent, Some("coder"), "think"));
        assert_eq!(ask("c2").await.unwrap().text, "one");
        assert_eq!(ask("c3").await.unwrap().text, "two");
        // Named in the script itself: its own replies win over the template's.
        assert_eq!(ask("c1").await.unwrap().text, "own");
        let err = ask("c4").await.unwrap_err().to_string();
        assert!(
            err.contains("agent `c4 (template coder)` skill `think`"),
            "{err}"
        );
        // A template the script does not name: the agent id is what is missing.
        let err = m
            .chat(req_from("c5", Some("critic"), "think"))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("agent `c5` skill `think`"), "{err}");
    }

    #[test]
    fn check_accepts_agent_ids_and_template_names_only() {
        let s = Script::parse(
            "replies:\n  w:\n    think: [a]\n  coder:\n    think: [b]\n  ghost:\n    think: [c]\n",
        )
        .unwrap();
        let p = s.check_against(&["w".into(), "coder".into()]);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].0, "replies.ghost");
        assert!(
            p[0].1.contains("no agent or agent template `ghost`"),
            "{p:?}"
        );
    }
}
