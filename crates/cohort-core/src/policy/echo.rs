//! Whether an answer only hands back what it was asked (its instruction, its goal, a task's
//! intention): what a small model writes when it does not do the work. The echo rule of the
//! repair policy asks again on it, and a task's outcome refuses a summary that is one.

/// Whether `answer` only hands back `asked`, word for word give or take punctuation and case:
/// most of it from its start, or all of it with a few words added.
/// `slack`: the characters an answer may add to its instruction and still hand it back
/// (`repairs.echo_slack`).
pub fn hands_back(answer: &str, asked: &str, slack: usize) -> bool {
    let plain = |s: &str| {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let (said, asked) = (plain(answer), plain(asked));
    // Copied from its start: most of the instruction, or all of it with a few words added.
    // A short answer from a long instruction ("yes" to "answer yes or no") is fine, and so
    // is a passage taken from further in (a plan may carry the draft its step is to give).
    !said.is_empty()
        && !asked.is_empty()
        && ((asked.starts_with(&said) && 2 * said.len() >= asked.len())
            || (said.starts_with(&asked) && said.len() < asked.len() + slack))
}

/// The longest step text that reads as an instruction. A longer one is the plan's draft of the
/// result, and handing it back delivers it: a real 1.5B planner wrote its draft into the text
/// of the step that was to give it (400 characters), and asked again as an echo, the step
/// handed the draft back for 25 minutes.
pub const INSTRUCTION_CHARS: usize = 200;

/// Whether `answer` only hands back a step's `text` that reads as an instruction (at most
/// [`INSTRUCTION_CHARS`]); a longer text handed back is delivered, not echoed.
pub fn hands_back_instruction(answer: &str, text: &str, slack: usize) -> bool {
    text.chars().count() <= INSTRUCTION_CHARS && hands_back(answer, text, slack)
}
