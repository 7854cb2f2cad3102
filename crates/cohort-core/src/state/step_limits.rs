//! StepLimits: how far one agent may go on in one stage, and how much one task may spend (the
//! team file's `step_limits:`; enforced by `step::limits` and SyncState's budgets).

/// The team file's `step_limits:`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepLimits {
    /// Steps one agent may run in one stage (default 25).
    pub per_stage: usize,
    /// How many times in a row one agent may run the same step (same executor, intention and text)
    /// in one stage before the next such step is stopped (default 3).
    pub repeats: usize,
    /// Tokens one task may spend before it is stopped (no limit by default).
    pub task_tokens: Option<u64>,
    /// Steps one task may run before it is stopped (no limit by default).
    pub task_steps: Option<u64>,
    /// Structured questions (send_message `ask`) one agent may put to people in one stage
    /// (default 3); then it goes on with what it has.
    pub asks: usize,
    /// Reflections one agent may run in one stage (default 4): the last one closes its part
    /// with a summary whatever it plans (a 1.5B writer's reflections planned "write the fifth
    /// line of the haiku", then the sixth, the seventh, ...).
    pub reflections: usize,
    /// Tool calls of one model reply a native tool loop makes at once (default 4); the results
    /// go back to the model in the order of the calls.
    pub parallel_tool_calls: usize,
    /// Replans (a graph plan's `replan`) one agent may run in one stage (default 3); a plan
    /// past them runs on as planned.
    pub replans: usize,
    /// Ready steps of one graph plan an agent runs at once (default 4; 1 runs one step at a
    /// time, as a plain list does).
    pub parallel_steps: usize,
}

impl Default for StepLimits {
    fn default() -> Self {
        StepLimits {
            per_stage: 25,
            repeats: 3,
            task_tokens: None,
            task_steps: None,
            asks: 3,
            reflections: 4,
            parallel_tool_calls: 4,
            replans: 3,
            parallel_steps: 4,
        }
    }
}
