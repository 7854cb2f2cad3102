//! Asking the model again when its answer cannot be used (a missing tag, broken JSON, a plan
//! that names an executor it may not use): the same prompt, followed by the exact error and
//! the answer it gave, at most `repairs.reasks` times (seed 000: JSON_GEN_MAX_TRIAL) before
//! the step fails; an echo, under `echo_asked_afresh`, as the same prompt alone. Each try is
//! recorded on the step (`execute_result.reasked`), so it stays visible.

use crate::call::ChatRequest;
use crate::policy::{Repair, Repairs};
use crate::state::{TokenUsage, Try};

/// How much of a bad answer goes back into the prompt (its start and its end).
const ANSWER_SHOWN: usize = 1_000;

/// A step's LLM call in progress, with what its earlier tries gave.
#[derive(Clone, Debug)]
pub struct Asking {
    /// The request as first sent.
    pub request: ChatRequest,
    /// One per answer that could not be used.
    pub tries: Vec<Try>,
    /// Tokens the unusable answers cost.
    pub spent: TokenUsage,
    /// The model's endpoint stayed down past `waits.model_secs`: why (its task fails).
    pub endpoint_down: Option<String>,
    /// How many times an unusable answer is asked about again (`repairs.reasks`).
    pub reasks: usize,
    /// The rule each try fired (`reask`, `echo`, `echo_asked_afresh`), counted once the step
    /// ends.
    pub fired: Vec<Repair>,
    /// Whether a model giving the same unusable answer twice is asked no more (`reask_stuck`).
    stuck_stops: bool,
    /// Whether an echo is asked again as the same prompt alone (`echo_asked_afresh`).
    echo_afresh: bool,
    /// The runtime's texts in the agent's language: how a re-ask is framed.
    texts: std::sync::Arc<crate::texts::Texts>,
}

impl Asking {
    /// The first try of `request`, re-asked as the team's repair policy says (in the language
    /// of `texts`), none used yet.
    pub fn new(
        request: ChatRequest,
        repairs: &Repairs,
        texts: std::sync::Arc<crate::texts::Texts>,
    ) -> Self {
        Asking {
            request,
            tries: Vec::new(),
            spent: TokenUsage::default(),
            endpoint_down: None,
            reasks: repairs.reasks(),
            fired: Vec::new(),
            stuck_stops: repairs.allows(Repair::ReaskStuck),
            echo_afresh: repairs.allows(Repair::EchoAskedAfresh),
            texts,
        }
    }

    /// Whether another unusable answer may still be asked again.
    pub fn may_ask_again(&self) -> bool {
        self.tries.len() < self.reasks
    }

    /// Whether `answer` shows the model stuck (`reask_stuck`): it is the unusable answer the
    /// model gave last time, word for word, to the same question with the error beneath it, so
    /// it is not asked a third time. After an echo asked afresh (a new sample of the same
    /// prompt), the same answer again is not taken as stuck.
    pub fn stuck_on(&self, answer: &str) -> bool {
        self.stuck_stops
            && self.fired.last() != Some(&Repair::EchoAskedAfresh)
            && self
                .tries
                .last()
                .is_some_and(|t| t.answer == self.shown(answer))
    }

    /// Records an unusable answer, a firing of `rule`; returns the request that asks again.
    pub fn again(
        &mut self,
        error: &str,
        answer: &str,
        usage: TokenUsage,
        rule: Repair,
    ) -> ChatRequest {
        self.spent.add(usage);
        self.fired.push(rule);
        let shown = self.shown(answer);
        self.tries.push(Try {
            error: error.to_owned(),
            answer: shown.clone(),
        });
        let mut request = self.request.clone();
        request.retry = self.tries.len() as u32;
        if rule == Repair::Echo && self.echo_afresh {
            // `echo_asked_afresh`: the same prompt, sampled again (more freely under
            // `reask_temperature`), nothing quoted.
            self.fired.push(Repair::EchoAskedAfresh);
            return request;
        }
        request.prompt = self.texts.reask(&self.request.prompt, error, shown);
        request
    }

    /// The start and the end of a long answer, with the cut marked.
    fn shown(&self, answer: &str) -> String {
        let n = answer.chars().count();
        if n <= 2 * ANSWER_SHOWN {
            return answer.to_owned();
        }
        let head: String = answer.chars().take(ANSWER_SHOWN).collect();
        let tail: String = answer.chars().skip(n - ANSWER_SHOWN).collect();
        let cut = self.texts.answer_cut(n - 2 * ANSWER_SHOWN);
        format!("{head}\n{cut}\n{tail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Preset;

    fn en() -> std::sync::Arc<crate::texts::Texts> {
        crate::texts::Texts::english()
    }

    fn request() -> ChatRequest {
        ChatRequest {
            prompt: "PROMPT".into(),
            ..ChatRequest::test("a", "think")
        }
    }

    #[test]
    fn each_try_carries_the_error_and_the_answer_and_the_tries_run_out() {
        let mut a = Asking::new(request(), &Repairs::preset(Preset::Strict), en());
        let usage = TokenUsage::new(10, 2);
        let again = a.again("no <think> tag", "hello", usage, Repair::Reask);
        assert!(
            again
                .prompt
                .starts_with("PROMPT\n\n# Your previous answer could not be used")
        );
        assert!(again.prompt.contains("Error: no <think> tag") && again.prompt.contains("hello"));
        let third = {
            a.again("e2", "x", usage, Repair::Reask);
            a.again("e3", "y", usage, Repair::Echo)
        };
        // Always the first prompt plus the latest error, never a growing pile of tries.
        assert!(!third.prompt.contains("e2") && third.prompt.contains("e3"));
        assert_eq!(
            third.retry, 3,
            "the request says how many answers were unusable"
        );
        assert!(!a.may_ask_again());
        assert_eq!(a.tries.len(), 3);
        assert!(
            a.stuck_on("y") && !a.stuck_on("x"),
            "only the last answer counts"
        );
        assert_eq!(a.spent.prompt_tokens, 30);
        assert_eq!(a.fired, [Repair::Reask, Repair::Reask, Repair::Echo]);
    }

    #[test]
    fn an_echo_is_asked_afresh_where_the_policy_says_so() {
        let mut a = Asking::new(request(), &Repairs::default(), en());
        let usage = TokenUsage::new(10, 2);
        let echo = "<think>Write a haiku</think>";
        let again = a.again("the answer only repeats …", echo, usage, Repair::Echo);
        // The prompt as first sent, nothing quoted; a re-ask all the same (its temperature).
        assert_eq!(again.prompt, "PROMPT");
        assert_eq!(again.retry, 1);
        assert_eq!(
            a.tries[0].answer, echo,
            "the try stays on the step's record"
        );
        assert_eq!(a.fired, [Repair::Echo, Repair::EchoAskedAfresh]);
        assert!(
            !a.stuck_on(echo),
            "the same echo from a fresh sample is asked again"
        );
        // Other slips are still asked about with the error beneath the prompt.
        let again = a.again("no <think> tag", "prose", usage, Repair::Reask);
        assert!(again.prompt.contains("Error: no <think> tag"));
        assert!(a.stuck_on("prose"));
        // Switched off, an echo is quoted like any other slip.
        let mut off = Repairs::default();
        off.switched.insert(Repair::EchoAskedAfresh, false);
        let mut a = Asking::new(request(), &off, en());
        let again = a.again("the answer only repeats …", echo, usage, Repair::Echo);
        assert!(again.prompt.contains(echo));
        assert_eq!(a.fired, [Repair::Echo]);
    }

    #[test]
    fn a_long_answer_goes_back_cut_in_the_middle() {
        let long = format!("{}{}", "a".repeat(3_000), "b".repeat(3_000));
        let s = Asking::new(request(), &Repairs::default(), en()).shown(&long);
        assert!(s.starts_with(&"a".repeat(ANSWER_SHOWN)) && s.ends_with(&"b".repeat(ANSWER_SHOWN)));
        assert!(s.contains("4000 characters cut"));
    }
}
