//! The newest LLM calls of a team, each as it was sent (system and user message) with the raw
//! reply or the error, so a person can see why an agent did what it did (`GET
//! /api/step/{id}/calls`, the console's step view). In memory only, and capped: the newest
//! [`KEPT`] calls within [`BYTES_KEPT`], each text cut to [`TEXT_KEPT`], older calls forgotten,
//! so the cost stays flat however long the team runs and however large its prompts. Beside
//! them, how long every call took, by model and outcome, in buckets (the metrics' LLM latency).
//! A node that runs agents for the team's node forwards its calls there instead
//! ([`CallLog::forward_to`]), so the team's log holds every agent's calls wherever they ran.

use super::{ChatModel, ChatReply, ChatRequest, LlmError};
use cohort_core::call::Intake;
use cohort_core::event::tally::Histogram;
use cohort_core::ids::{AgentId, StepId, TaskId};
use cohort_core::state::TokenUsage;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

/// Calls kept at most.
pub const KEPT: usize = 300;
/// The most text the kept calls hold together.
pub const BYTES_KEPT: usize = 16 << 20;
/// The most of one text (system message, prompt, reply) kept: its head and tail.
pub const TEXT_KEPT: usize = 64 << 10;

/// One LLM call as sent and answered. The log keeps each text capped; the record of every
/// call (see [`CallLog::record_to`]) keeps them whole, and what a replay needs besides: the
/// task, the order, the rounds and functions sent, the calls the model asked for.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Call {
    pub step_id: StepId,
    pub agent_id: AgentId,
    pub skill: String,
    /// The task of the step it served.
    #[serde(default)]
    pub task_id: Option<TaskId>,
    /// Its place among the team's calls: later calls have larger numbers, also across
    /// restarts (microseconds since the Unix epoch, made strictly increasing).
    #[serde(default)]
    pub seq: u64,
    /// The model it went to (`provider/model`).
    #[serde(default)]
    pub model: String,
    /// What its step asks (intention and text): a replay tells an agent's calls made side by
    /// side apart by it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub step_text: String,
    /// When it was sent and when its answer came, ms since the Unix epoch.
    pub sent_at: i64,
    pub answered_at: i64,
    /// Its answer's place on the clock of [`Call::seq`], among the team's asks and answers: a
    /// replay gives each answer in the turn it came. 0: no answer came (abandoned), or a
    /// record from before answers were placed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub answered_seq: u64,
    /// How many messages its agent had taken when it was asked (see `call::Intake`): a replay
    /// starts the agent's steps and gives it its messages in this order again. None: a record
    /// from before these were kept, or a call no agent counted for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_at_ask: Option<u64>,
    /// How many it had taken when the answer came: a replay gives the answer once the agent
    /// has taken as many. None as above, or no answer came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taken_at_answer: Option<u64>,
    /// The texts are shared (`Arc`): the log's copy and the record's are one allocation, so
    /// recording a call copies no text on the step's path.
    pub system: Arc<str>,
    pub prompt: Arc<str>,
    /// Tool-loop rounds sent with it (calls and results), when any.
    pub tool_rounds: usize,
    /// Those rounds (in the record only: the log shows their count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<crate::ToolRound>,
    /// The functions offered (their names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<String>,
    /// The answer's schema, by name, when the answer was constrained by one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// How many unusable answers of its step came before it (0: the first ask).
    #[serde(default)]
    pub retry: u32,
    pub reply: Option<Arc<str>>,
    /// The functions the model asked to call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<crate::ToolCall>,
    pub error: Option<String>,
    pub usage: TokenUsage,
    /// Why the answer was cut short, when it was.
    pub cut: Option<crate::Cut>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Call {
    /// The bytes of its texts, about what it takes to keep.
    pub fn bytes(&self) -> usize {
        let rounds: usize = self
            .rounds
            .iter()
            .map(|r| r.text.len() + r.results.iter().map(String::len).sum::<usize>())
            .sum();
        self.system.len() + self.prompt.len() + self.reply.as_ref().map_or(0, |r| r.len()) + rounds
    }

    /// As the log keeps it: each text capped (moved, not copied, when it is short), the
    /// rounds counted only.
    fn capped(mut self) -> Call {
        let cap = |t: Arc<str>| {
            if t.len() <= TEXT_KEPT {
                t
            } else {
                Arc::from(kept_text(&t))
            }
        };
        self.system = cap(self.system);
        self.prompt = cap(self.prompt);
        self.reply = self.reply.take().map(cap);
        self.rounds = Vec::new();
        self
    }
}

/// Where every call goes as it ends, whole (the team's record of its model calls); it is
/// handed its own copy, to store off the step's path.
pub type Record = Box<dyn Fn(Call) + Send + Sync>;

/// The upper bounds of the LLM-call duration buckets, in seconds.
pub const CALL_SECONDS: &[f64] = &[
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0, 300.0,
];

/// How a call ended, as the timings count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// The model answered.
    Answered,
    /// The call failed (after its retries).
    Failed,
    /// Its step let it go before an answer came.
    Abandoned,
}

impl CallOutcome {
    /// Its label in the metrics.
    pub fn name(self) -> &'static str {
        match self {
            CallOutcome::Answered => "answered",
            CallOutcome::Failed => "failed",
            CallOutcome::Abandoned => "abandoned",
        }
    }
}

/// How long the calls took, by model (`provider/model`) and outcome: a label set per model a
/// team file names, three outcomes each.
pub type Timings = BTreeMap<(String, CallOutcome), Histogram>;

/// Where a node that keeps no log of its own sends each call as it ends, with its model's
/// name and outcome.
pub type Forward = Box<dyn Fn(Call, &str, CallOutcome) + Send + Sync>;

/// The newest calls of a team, shared by its models and read by the API.
#[derive(Default)]
pub struct CallLog {
    kept: Mutex<Kept>,
    timings: Mutex<Timings>,
    forward: OnceLock<Forward>,
    record: OnceLock<Record>,
}

impl std::fmt::Debug for CallLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallLog")
            .field("forwards", &self.forward.get().is_some())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct Kept {
    calls: VecDeque<Call>,
    bytes: usize,
}

impl CallLog {
    /// From now on each call goes to `forward` as it ends, and is neither kept nor timed here
    /// (a node running agents for the team's node, whose log is the team's). Once only: false
    /// if the log forwards already.
    pub fn forward_to(&self, forward: Forward) -> bool {
        self.forward.set(forward).is_ok()
    }

    /// From now on each call that ends (here or on another node) also goes to `record`,
    /// whole. Once only: false if the log records already.
    pub fn record_to(&self, record: Record) -> bool {
        self.record.set(record).is_ok()
    }

    /// Keeps and times a call that ended on another node (what that node's log forwarded).
    pub fn keep(&self, call: Call, model: &str, outcome: CallOutcome) {
        self.time(model, outcome, &call);
        if let Some(record) = self.record.get() {
            record(call.clone());
        }
        self.push(call.capped());
    }

    /// A call that ended here: forwarded, or kept.
    fn ended(&self, call: Call, model: &str, outcome: CallOutcome) {
        match self.forward.get() {
            Some(forward) => forward(call, model, outcome),
            None => self.keep(call, model, outcome),
        }
    }

    /// How long the calls took so far.
    pub fn timings(&self) -> Timings {
        self.timings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn time(&self, model: &str, outcome: CallOutcome, call: &Call) {
        let secs = (call.answered_at - call.sent_at).max(0) as f64 / 1000.0;
        let mut t = self.timings.lock().unwrap_or_else(|p| p.into_inner());
        t.entry((model.to_owned(), outcome))
            .or_default()
            .observe(CALL_SECONDS, secs);
    }

    fn push(&self, call: Call) {
        let mut k = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        k.bytes += call.bytes();
        k.calls.push_back(call);
        while k.calls.len() > KEPT || (k.bytes > BYTES_KEPT && k.calls.len() > 1) {
            if let Some(old) = k.calls.pop_front() {
                k.bytes -= old.bytes();
            }
        }
    }

    /// The calls of one step still kept, oldest first (a re-asked answer makes several).
    pub fn of_step(&self, step: &StepId) -> Vec<Call> {
        self.map_step(step, Call::clone)
    }

    /// What `f` makes of each call of one step still kept, oldest first: for readers that need
    /// a few of a call's fields, not copies of its texts.
    pub fn map_step<R>(&self, step: &StepId, f: impl FnMut(&Call) -> R) -> Vec<R> {
        let k = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        k.calls
            .iter()
            .filter(|c| &c.step_id == step)
            .map(f)
            .collect()
    }
}

/// A model whose calls go to a [`CallLog`].
pub struct Recorded {
    inner: Arc<dyn ChatModel>,
    log: Arc<CallLog>,
    /// The model's name in the timings (`provider/model`).
    model: Arc<str>,
}

impl Recorded {
    pub fn new(inner: Arc<dyn ChatModel>, log: Arc<CallLog>, model: &str) -> Arc<Self> {
        Arc::new(Recorded {
            inner,
            log,
            model: model.into(),
        })
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The next call's place ([`Call::seq`]): the time in microseconds, or one more than the last
/// when the clock has not moved on (or went back).
fn next_seq() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = chrono::Utc::now().timestamp_micros().max(0) as u64;
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

/// A text as kept: whole up to [`TEXT_KEPT`], else its head and tail with what was left out.
fn kept_text(text: &str) -> String {
    if text.len() <= TEXT_KEPT {
        return text.to_owned();
    }
    let half = TEXT_KEPT / 2;
    let head = text.floor_char_boundary(half);
    let tail = text.ceil_char_boundary(text.len() - half);
    format!(
        "{}\n[… {} bytes left out …]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

/// A call on its way: recorded when answered, or, if its future is dropped first (the step was
/// cancelled or its work ended), recorded as abandoned.
struct Pending {
    call: Option<Call>,
    log: Arc<CallLog>,
    model: Arc<str>,
    /// The asking agent's count of messages taken, read again when the answer comes.
    intake: Option<Intake>,
}

impl Pending {
    fn answered(&mut self, result: &Result<ChatReply, LlmError>) {
        if let Some(mut call) = self.call.take() {
            call.answered_at = now_ms();
            call.answered_seq = next_seq();
            call.taken_at_answer = self.intake.as_ref().map(Intake::taken);
            let outcome = match result {
                Ok(r) => {
                    call.reply = Some(Arc::from(r.text.as_str()));
                    call.tool_calls = r.tool_calls.clone();
                    call.usage = r.usage;
                    call.cut = r.cut;
                    CallOutcome::Answered
                }
                Err(e) => {
                    call.error = Some(e.to_string());
                    CallOutcome::Failed
                }
            };
            self.log.ended(call, &self.model, outcome);
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(mut call) = self.call.take() {
            call.answered_at = now_ms();
            call.error = Some(
                "abandoned before an answer came (the step was cancelled or its work ended)".into(),
            );
            self.log.ended(call, &self.model, CallOutcome::Abandoned);
        }
    }
}

impl ChatModel for Recorded {
    super::delegate_to_inner!();

    fn chat(&self, request: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>> {
        let mut pending = Pending {
            call: Some(Call {
                step_id: request.step_id.clone(),
                agent_id: request.agent_id.clone(),
                skill: request.skill.clone(),
                task_id: Some(request.task_id.clone()),
                seq: next_seq(),
                model: self.model.to_string(),
                step_text: request.step_text.clone(),
                sent_at: now_ms(),
                answered_at: 0,
                answered_seq: 0,
                taken_at_ask: request.intake.as_ref().map(Intake::at_request),
                taken_at_answer: None,
                system: Arc::from(request.system.as_str()),
                prompt: Arc::from(request.prompt.as_str()),
                tool_rounds: request.rounds.len(),
                rounds: request.rounds.clone(),
                functions: request.tools.iter().map(|t| t.name.clone()).collect(),
                schema: request.answer_format.as_ref().map(|f| f.name.clone()),
                retry: request.retry,
                reply: None,
                tool_calls: Vec::new(),
                error: None,
                usage: TokenUsage::default(),
                cut: None,
            }),
            log: self.log.clone(),
            model: self.model.clone(),
            intake: request.intake.clone(),
        };
        let answer = self.inner.chat(request);
        Box::pin(async move {
            let result = answer.await;
            pending.answered(&result);
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripted::{Script, ScriptedModel};

    /// A test's folder in the temp folder, removed on drop: also when the test fails.
    struct Scratch(std::path::PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[tokio::test]
    async fn a_call_is_kept_with_its_prompt_and_reply_and_the_oldest_go_first() {
        let dir = std::env::temp_dir().join(format!("cohort-recorded-{}", std::process::id()));
        let _cleanup = Scratch(dir.clone());
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("s.yaml");
        std::fs::write(
            &f,
            "replies:\n  w:\n    think:\n      - when: x\n        text: '<think>ok</think>'\n",
        )
        .unwrap();
        let log = Arc::new(CallLog::default());
        let m = Recorded::new(
            ScriptedModel::new(Script::load(&f).unwrap()),
            log.clone(),
            "scripted/x",
        );
        let mut req = ChatRequest {
            system: "SYSTEM".into(),
            stage_id: cohort_core::ids::StageRef::NoRelative,
            step_text: "x".into(),
            ..ChatRequest::test("w", "think")
        };
        for i in 0..KEPT + 2 {
            req.prompt = format!("PROMPT {i}");
            m.chat(req.clone()).await.unwrap();
        }
        let calls = log.of_step(&req.step_id);
        assert_eq!(calls.len(), KEPT, "capped");
        assert_eq!(&*calls[0].prompt, "PROMPT 2", "the oldest two left");
        assert_eq!(&*calls[KEPT - 1].prompt, format!("PROMPT {}", KEPT + 1));
        assert_eq!(calls[0].reply.as_deref(), Some("<think>ok</think>"));

        // A call whose answer is never awaited is kept as abandoned.
        req.prompt = "DROPPED".into();
        drop(m.chat(req.clone()));
        let last = log.of_step(&req.step_id).pop().unwrap();
        assert_eq!(&*last.prompt, "DROPPED");
        assert!(last.error.unwrap().contains("abandoned"));

        // A call keeps how many messages its agent had taken when its request was made and
        // when its answer came.
        let intake = Intake::default();
        intake.took_one();
        req.intake = Some(intake.for_request());
        req.prompt = "x".into();
        let answer = m.chat(req.clone());
        intake.took_one();
        answer.await.unwrap();
        let last = log.of_step(&req.step_id).pop().unwrap();
        assert_eq!(
            (last.taken_at_ask, last.taken_at_answer),
            (Some(1), Some(2))
        );

        // Every call is timed, however it ended, and none is forgotten with the calls.
        let timings = log.timings();
        let count = |o| timings[&("scripted/x".to_owned(), o)].count;
        assert_eq!(count(CallOutcome::Answered), KEPT as u64 + 3);
        assert_eq!(count(CallOutcome::Abandoned), 1);
    }

    #[tokio::test]
    async fn a_forwarding_log_hands_each_call_on_as_it_ends_and_keeps_none() {
        let dir = std::env::temp_dir().join(format!("cohort-forward-{}", std::process::id()));
        let _cleanup = Scratch(dir.clone());
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("s.yaml");
        std::fs::write(
            &f,
            "replies:\n  w:\n    think:\n      - text: '<think>ok</think>'\n",
        )
        .unwrap();
        let here = Arc::new(CallLog::default());
        let team = Arc::new(CallLog::default());
        let to = team.clone();
        assert!(here.forward_to(Box::new(move |call, model, outcome| {
            // As a node sends it: through JSON.
            let call: Call = serde_json::from_slice(&serde_json::to_vec(&call).unwrap()).unwrap();
            to.keep(call, model, outcome)
        })));
        assert!(!here.forward_to(Box::new(|_, _, _| ())), "once only");
        let m = Recorded::new(
            ScriptedModel::new(Script::load(&f).unwrap()),
            here.clone(),
            "scripted/x",
        );
        let req = ChatRequest {
            prompt: "PROMPT".into(),
            ..ChatRequest::test("w", "think")
        };
        m.chat(req.clone()).await.unwrap();
        drop(m.chat(req.clone()));
        assert!(here.of_step(&req.step_id).is_empty());
        assert!(here.timings().is_empty());
        let calls = team.of_step(&req.step_id);
        assert_eq!(calls.len(), 2);
        assert_eq!(&*calls[0].prompt, "PROMPT");
        assert_eq!(calls[0].reply.as_deref(), Some("<think>ok</think>"));
        assert!(calls[1].error.as_deref().unwrap().contains("abandoned"));
        let timings = team.timings();
        assert_eq!(
            timings[&("scripted/x".to_owned(), CallOutcome::Answered)].count,
            1
        );
        assert_eq!(
            timings[&("scripted/x".to_owned(), CallOutcome::Abandoned)].count,
            1
        );
    }

    #[test]
    fn a_huge_text_keeps_its_head_and_tail() {
        let text = format!("{}{}", "a".repeat(TEXT_KEPT), "z".repeat(TEXT_KEPT));
        let kept = kept_text(&text);
        assert!(kept.len() < TEXT_KEPT + 100);
        assert!(kept.starts_with('a') && kept.ends_with('z') && kept.contains("bytes left out"));
    }
}
