//! Asking the model again when its answer cannot be used (a missing tag, broken JSON, a plan
//! that names an executor it may not use): the same prompt, followed by the exact error and
//! the answer it gave, at most `repairs.reasks` times (seed 000: JSON_GEN_MAX_TRIAL) before
//! the step fails. Each try is recorded on the step (`execute_result.reasked`), so it stays visible.

use crate::call::ChatRequest;
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
    /// The rule each try fired (`reask`, or `echo`), counted once the step ends.
    pub fired: Vec<crate::policy::Repair>,
}

impl Asking {
    /// The first try of `request`, with `reasks` re-asks allowed and none used.
    pub fn new(request: ChatRequest, reasks: usize) -> Self {
        Asking {
            request,
            tries: Vec::new(),
            spent: TokenUsage::default(),
            endpoint_down: None,
            reasks,
            fired: Vec::new(),
        }
    }

    /// Whether another unusable answer may still be asked again.
    pub fn may_ask_again(&self) -> bool {
        self.tries.len() < self.reasks
    }

    /// Whether `answer` is the unusable answer the model gave last time, word for word: a model
    /// stuck on one answer gives it again (Qwen2.5 1.5B gave the same one four times in a row,
    /// a minute each), so it is not asked a third time.
    pub fn gave_before(&self, answer: &str) -> bool {
        self.tries.last().is_some_and(|t| t.answer == shown(answer))
    }

    /// Records an unusable answer, a firing of `rule`; returns the request that asks again.
    pub fn again(
        &mut self,
        error: &str,
        answer: &str,
        usage: TokenUsage,
        rule: crate::policy::Repair,
    ) -> ChatRequest {
        self.spent.add(usage);
        self.fired.push(rule);
        self.tries.push(Try {
            error: error.to_owned(),
            answer: shown(answer),
        });
        let mut request = self.request.clone();
        request.retry = self.tries.len() as u32;
        request.prompt = format!(
            "{}\n\n# Your previous answer could not be used\n\nError: {error}\n\nYour answer \
             was:\n\n```\n{}\n```\n\nAnswer again, in exactly the format asked for above.",
            self.request.prompt,
            shown(answer)
        );
        request
    }
}

/// The start and the end of a long answer, with the cut marked.
fn shown(answer: &str) -> String {
    let n = answer.chars().count();
    if n <= 2 * ANSWER_SHOWN {
        return answer.to_owned();
    }
    let head: String = answer.chars().take(ANSWER_SHOWN).collect();
    let tail: String = answer.chars().skip(n - ANSWER_SHOWN).collect();
    format!(
        "{head}\n[… {} characters cut …]\n{tail}",
        n - 2 * ANSWER_SHOWN
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> ChatRequest {
        ChatRequest {
            prompt: "PROMPT".into(),
            ..ChatRequest::test("a", "think")
        }
    }

    #[test]
    fn each_try_carries_the_error_and_the_answer_and_the_tries_run_out() {
        let mut a = Asking::new(request(), 3);
        let usage = TokenUsage::new(10, 2);
        let again = a.again(
            "no <think> tag",
            "hello",
            usage,
            crate::policy::Repair::Reask,
        );
        assert!(
            again
                .prompt
                .starts_with("PROMPT\n\n# Your previous answer could not be used")
        );
        assert!(again.prompt.contains("Error: no <think> tag") && again.prompt.contains("hello"));
        let third = {
            a.again("e2", "x", usage, crate::policy::Repair::Reask);
            a.again("e3", "y", usage, crate::policy::Repair::Echo)
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
            a.gave_before("y") && !a.gave_before("x"),
            "only the last answer counts"
        );
        assert_eq!(a.spent.prompt_tokens, 30);
    }

    #[test]
    fn a_long_answer_goes_back_cut_in_the_middle() {
        let long = format!("{}{}", "a".repeat(3_000), "b".repeat(3_000));
        let s = shown(&long);
        assert!(s.starts_with(&"a".repeat(ANSWER_SHOWN)) && s.ends_with(&"b".repeat(ANSWER_SHOWN)));
        assert!(s.contains("4000 characters cut"));
    }
}
