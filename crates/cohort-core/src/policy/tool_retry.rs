//! Retrying a tool call that failed for a passing reason (seed 000 §5.2, §9.2): a timeout, a
//! dropped connection, a server that went away. The call is made again within its step, after
//! a growing pause, at most [`MAX_RETRIES`] times, and only when the tool says a repeat is
//! harmless (`readOnlyHint` or `idempotentHint`): a call that may have acted is never made
//! twice. Every retry is kept on the step (`StepResult::tool_retries`).

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The most times one call is made again.
pub const MAX_RETRIES: usize = 5;
/// The first pause; each next one doubles, up to [`LONGEST_PAUSE`].
pub const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// The longest pause between two tries.
pub const LONGEST_PAUSE: Duration = Duration::from_secs(4);

/// One try of a call that failed and was made again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolRetry {
    /// Why that try failed.
    pub error: String,
    /// How long the call waited before it was made again, in ms.
    pub waited_ms: u64,
}

/// The pause before the call is made again, when it should be: none once `made` retries were
/// made already, for a failure that does not pass (`transient` false), or for a tool a repeat
/// may harm (`repeatable` false).
pub fn pause_before_retry(made: usize, transient: bool, repeatable: bool) -> Option<Duration> {
    if !transient || !repeatable || made >= MAX_RETRIES {
        return None;
    }
    let doubled = FIRST_PAUSE.saturating_mul(1 << made.min(16) as u32);
    Some(doubled.min(LONGEST_PAUSE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passing_failure_of_a_harmless_call_is_retried_with_growing_pauses_five_times() {
        let pauses: Vec<_> = (0..7).map(|n| pause_before_retry(n, true, true)).collect();
        let ms = |m| Some(Duration::from_millis(m));
        assert_eq!(
            pauses,
            [ms(250), ms(500), ms(1000), ms(2000), ms(4000), None, None]
        );
    }

    #[test]
    fn a_lasting_failure_or_a_call_that_may_have_acted_is_not_retried() {
        assert_eq!(pause_before_retry(0, false, true), None);
        assert_eq!(pause_before_retry(0, true, false), None);
    }
}
