//! The newest LLM calls of a team, each as it was sent (system and user message) with the raw
//! reply or the error, so a person can see why an agent did what it did (`GET
//! /api/step/{id}/calls`, the console's step view). In memory only, and capped: the newest
//! `KEPT` calls, older ones forgotten, so the cost stays flat however long the team runs.

use super::{Answered, ChatModel, ChatReply, ChatRequest, LlmError};
use crate::ids::{AgentId, StepId};
use crate::state::TokenUsage;
use futures::future::BoxFuture;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Calls kept (a prompt is a few kB to a few tens of kB: some MB at most).
pub const KEPT: usize = 300;

/// One LLM call as sent and answered.
#[derive(Clone, Debug, Serialize)]
pub struct Call {
    pub step_id: StepId,
    pub agent_id: AgentId,
    pub skill: String,
    /// When it was sent and when its answer came, ms since the Unix epoch.
    pub sent_at: i64,
    pub answered_at: i64,
    pub system: String,
    pub prompt: String,
    /// Tool-loop rounds sent with it (calls and results), when any.
    pub tool_rounds: usize,
    pub reply: Option<String>,
    pub error: Option<String>,
    pub usage: TokenUsage,
    pub cut_off: bool,
}

/// The newest calls of a team, shared by its models and read by the API.
#[derive(Debug, Default)]
pub struct CallLog {
    calls: Mutex<VecDeque<Call>>,
}

impl CallLog {
    fn push(&self, call: Call) {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        if calls.len() == KEPT {
            calls.pop_front();
        }
        calls.push_back(call);
    }

    /// The calls of one step still kept, oldest first (a re-asked answer makes several).
    pub fn of_step(&self, step: &StepId) -> Vec<Call> {
        let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        calls.iter().filter(|c| &c.step_id == step).cloned().collect()
    }
}

/// A model whose calls go to a [`CallLog`].
pub struct Recorded {
    inner: Arc<dyn ChatModel>,
    log: Arc<CallLog>,
}

impl Recorded {
    pub fn new(inner: Arc<dyn ChatModel>, log: Arc<CallLog>) -> Arc<Self> {
        Arc::new(Recorded { inner, log })
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl ChatModel for Recorded {
    fn carry_on(&self, answered: &[Answered]) {
        self.inner.carry_on(answered);
    }

    fn prompt_budget(&self) -> Option<usize> {
        self.inner.prompt_budget()
    }

    fn native_tools(&self) -> bool {
        self.inner.native_tools()
    }

    fn constrains_answers(&self) -> bool {
        self.inner.constrains_answers()
    }

    fn chat(&self, request: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>> {
        let log = self.log.clone();
        let mut call = Call {
            step_id: request.step_id.clone(),
            agent_id: request.agent_id.clone(),
            skill: request.skill.clone(),
            sent_at: now_ms(),
            answered_at: 0,
            system: request.system.clone(),
            prompt: request.prompt.clone(),
            tool_rounds: request.rounds.len(),
            reply: None,
            error: None,
            usage: TokenUsage::default(),
            cut_off: false,
        };
        let answer = self.inner.chat(request);
        Box::pin(async move {
            let result = answer.await;
            call.answered_at = now_ms();
            match &result {
                Ok(r) => {
                    call.reply = Some(r.text.clone());
                    call.usage = r.usage;
                    call.cut_off = r.cut_off;
                }
                Err(e) => call.error = Some(e.to_string()),
            }
            log.push(call);
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::scripted::{Script, ScriptedModel};

    #[tokio::test]
    async fn a_call_is_kept_with_its_prompt_and_reply_and_the_oldest_go_first() {
        let dir = std::env::temp_dir().join(format!("cohort-recorded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("s.yaml");
        std::fs::write(&f, "replies:\n  w:\n    think:\n      - when: x\n        text: '<think>ok</think>'\n").unwrap();
        let log = Arc::new(CallLog::default());
        let m = Recorded::new(ScriptedModel::new(Script::load(&f).unwrap()), log.clone());
        let req = ChatRequest {
            system: "SYSTEM".into(),
            prompt: "THE PROMPT".into(),
            answer_format: None,
            tools: Vec::new(),
            rounds: Vec::new(),
            agent_id: "w".into(),
            skill: "think".into(),
            task_id: "T1".into(),
            stage_id: crate::ids::StageRef::NoRelative,
            step_id: "P1".into(),
            template: None,
            step_text: "x".into(),
            progress: None,
            retry: 0,
        };
        for _ in 0..KEPT + 1 {
            m.chat(req.clone()).await.unwrap();
        }
        let calls = log.of_step(&req.step_id);
        assert_eq!(calls.len(), KEPT, "capped");
        assert_eq!(calls[0].prompt, "THE PROMPT");
        assert_eq!(calls[0].reply.as_deref(), Some("<think>ok</think>"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
