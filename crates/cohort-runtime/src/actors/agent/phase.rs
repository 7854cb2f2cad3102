//! What the agent actor is doing, as one `Phase`: the steps of its own under way, each with
//! its `Run` (running with its call in flight or not, held for a person, its end being
//! stored), a plan waiting for a person's check, or stopped. Each handler moves it; nothing
//! else says what the agent does.

use super::verdict::PendingVerdict;
use actix::SpawnHandle;
use cohort_core::ids::StepId;
use std::collections::BTreeMap;

/// What one step of the agent's own is doing.
pub(super) enum Run {
    /// It runs. `call`: the future of its LLM, tool or lookup call while one is out, abandoned
    /// (dropped) when the step's stage or task ends first. `rebuilt_for_context`: its prompt was
    /// built again after the endpoint refused it as longer than its context window (once per
    /// step: the model now knows the window). `asked`: a question the server asks during its
    /// tool call, waiting for a person (its number, and where the answer goes; dropped with the
    /// run, which answers `cancel`).
    Running {
        call: Option<SpawnHandle>,
        rebuilt_for_context: bool,
        asked: Option<(u64, Asked)>,
    },
    /// A tool call that waits for a person's verdict (approval, or arguments filled in); the
    /// verdict runs the call or ends the step.
    HeldForPerson,
    /// SyncState stores its end (it can no longer be cancelled). `verdict`: a person's verdict
    /// on it that came meanwhile (its wait was published a moment before this agent had
    /// SyncState's answer), decided once the end is stored.
    Settling { verdict: Option<PendingVerdict> },
}

/// Where a person's answer to a server's question goes.
pub(super) type Asked =
    tokio::sync::oneshot::Sender<cohort_core::step::elicitation::ElicitationAnswer>;

impl Run {
    fn running() -> Self {
        Run::Running {
            call: None,
            rebuilt_for_context: false,
            asked: None,
        }
    }
}

/// What the agent is doing. It runs one step of its own at a time, except the ready steps of
/// one graph plan, up to `parallel_steps` together (see `next_step.rs`). A plan waiting for a
/// person's check holds it as a step would.
#[derive(Default)]
pub(super) struct Phase {
    /// Its steps under way, by id.
    runs: BTreeMap<StepId, Run>,
    /// The plan its step made that waits for a person's check. That step is settled; nothing
    /// else starts until they decide (or the wait's deadline passes).
    plan_check: Option<StepId>,
    /// SyncState could not be reached to store a step's end (the team is stopping): nothing
    /// of it was stored, and the agent starts nothing more.
    stopped: bool,
    /// The number of the last server's question asked (see [`Run::Running`]).
    questions: u64,
}

impl Phase {
    /// Step `step` starts running.
    pub(super) fn start(&mut self, step: StepId) {
        self.runs.insert(step, Run::running());
    }

    /// Whether it is on no step, waits for no plan's check and is not stopped.
    pub(super) fn idle(&self) -> bool {
        self.runs.is_empty() && self.plan_check.is_none() && !self.stopped
    }

    /// The steps under way.
    pub(super) fn steps(&self) -> impl Iterator<Item = &StepId> {
        self.runs.keys()
    }

    /// Whether another step may start beside those under way: none waits for a person, no plan
    /// waits for its check, and the agent is not stopped.
    pub(super) fn may_add(&self) -> bool {
        !self.stopped
            && self.plan_check.is_none()
            && !self.runs.values().any(|r| matches!(r, Run::HeldForPerson))
    }

    /// Whether the agent is on a step of its own (running, held, settling) or stopped; idle
    /// or waiting for a plan's check, it is not.
    pub(super) fn busy(&self) -> bool {
        !self.runs.is_empty() || self.stopped
    }

    /// Whether none of its steps under way is running or being stored (any it has wait for a
    /// person): nothing it does is lost if it stops now.
    pub(super) fn quiet(&self) -> bool {
        self.runs.values().all(|r| matches!(r, Run::HeldForPerson))
    }

    /// Whether step `id`'s end is being stored.
    pub(super) fn settling(&self, id: &StepId) -> bool {
        matches!(self.runs.get(id), Some(Run::Settling { .. }))
    }

    /// Where a verdict on step `id` waits while the step's end is stored (None when it is not
    /// being stored, or a verdict already waits).
    pub(super) fn verdict_slot(&mut self, id: &StepId) -> Option<&mut Option<PendingVerdict>> {
        match self.runs.get_mut(id) {
            Some(Run::Settling { verdict }) if verdict.is_none() => Some(verdict),
            _ => None,
        }
    }

    /// The steps held for a person's verdict, and the plan waiting for their check.
    pub(super) fn held(&self) -> Vec<StepId> {
        let held = self
            .runs
            .iter()
            .filter(|(_, r)| matches!(r, Run::HeldForPerson))
            .map(|(id, _)| id.clone());
        held.chain(self.plan_check.clone()).collect()
    }

    /// Step `id`, a tool call, now waits for a person's verdict.
    pub(super) fn hold(&mut self, id: StepId) {
        self.runs.insert(id, Run::HeldForPerson);
    }

    /// The plan step `id` made now waits for a person's check.
    pub(super) fn check_plan(&mut self, id: StepId) {
        self.plan_check = Some(id);
    }

    /// Whether step `id` waits for a person (held, or its plan checked).
    pub(super) fn waits_for_person(&self, id: &StepId) -> bool {
        matches!(self.runs.get(id), Some(Run::HeldForPerson))
            || self.plan_check.as_ref() == Some(id)
    }

    /// Step `id` no longer waits for a person: a held tool call runs on (its verdict is being
    /// carried out, or it is ending), a plan's wait is over.
    pub(super) fn stop_waiting(&mut self, id: &StepId) {
        if let Some(run @ Run::HeldForPerson) = self.runs.get_mut(id) {
            *run = Run::running();
        }
        if self.plan_check.as_ref() == Some(id) {
            self.plan_check = None;
        }
    }

    /// Forgets step `id` as under way (it left the agent while it was held).
    pub(super) fn forget(&mut self, id: &StepId) {
        self.runs.remove(id);
    }

    /// Step `id`'s call went out as the future `handle`.
    pub(super) fn call_out(&mut self, id: &StepId, handle: SpawnHandle) {
        if let Some(Run::Running { call, .. }) = self.runs.get_mut(id) {
            *call = Some(handle);
        }
    }

    /// Step `id`'s call answered (its future is done): a question its server asked is over.
    pub(super) fn call_returned(&mut self, id: &StepId) {
        if let Some(Run::Running { call, asked, .. }) = self.runs.get_mut(id) {
            *call = None;
            *asked = None;
        }
    }

    /// The call in flight for step `id`, taken to be abandoned.
    pub(super) fn take_call(&mut self, id: &StepId) -> Option<SpawnHandle> {
        match self.runs.get_mut(id) {
            Some(Run::Running { call, .. }) => call.take(),
            _ => None,
        }
    }

    /// A server asks a question during step `id`'s call, whose answer goes to `to`: its
    /// number, or None when the step has no call in flight or a question waits already.
    pub(super) fn ask(&mut self, id: &StepId, to: Asked) -> Option<u64> {
        match self.runs.get_mut(id) {
            Some(Run::Running {
                call: Some(_),
                asked: asked @ None,
                ..
            }) => {
                self.questions += 1;
                *asked = Some((self.questions, to));
                Some(self.questions)
            }
            _ => None,
        }
    }

    /// Where the answer to the question waiting on step `id` goes (only question `no`'s, when
    /// given), taken: the question is over.
    pub(super) fn take_asked(&mut self, id: &StepId, no: Option<u64>) -> Option<Asked> {
        match self.runs.get_mut(id) {
            Some(Run::Running { asked, .. })
                if asked
                    .as_ref()
                    .is_some_and(|(n, _)| no.is_none_or(|no| *n == no)) =>
            {
                asked.take().map(|(_, to)| to)
            }
            _ => None,
        }
    }

    /// The steps whose call is in flight.
    pub(super) fn calling(&self) -> Vec<StepId> {
        self.runs
            .iter()
            .filter(|(_, r)| matches!(r, Run::Running { call: Some(_), .. }))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Marks running step `id`'s prompt as built again for the model's context window; false
    /// when it was already (or `id` is not running): it is not built again.
    pub(super) fn rebuild_for_context(&mut self, id: &StepId) -> bool {
        match self.runs.get_mut(id) {
            Some(Run::Running {
                rebuilt_for_context: rebuilt @ false,
                ..
            }) => {
                *rebuilt = true;
                true
            }
            _ => false,
        }
    }

    /// Step `id`'s end goes to SyncState to be stored (a plan waiting for its check, another
    /// step's, is waited for on).
    pub(super) fn settle(&mut self, id: StepId) {
        self.runs.insert(id, Run::Settling { verdict: None });
    }

    /// Step `id`'s end is stored: it is no longer under way; the verdict that waited for the
    /// end, if one did. Nothing changes when `id` is not settling.
    pub(super) fn settled(&mut self, id: &StepId) -> Option<PendingVerdict> {
        if !self.settling(id) {
            return None;
        }
        match self.runs.remove(id) {
            Some(Run::Settling { verdict }) => verdict,
            _ => None,
        }
    }

    /// The team is stopping: the agent starts nothing more.
    pub(super) fn stop(&mut self) {
        self.stopped = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> StepId {
        StepId::from(s)
    }

    #[test]
    fn a_plan_waiting_for_its_check_is_waited_for_again_after_a_cancelled_steps_end() {
        let mut phase = Phase::default();
        phase.check_plan(id("plan"));
        assert!(
            !phase.busy(),
            "a plan's check lets a queued step's cancel end it"
        );
        phase.settle(id("queued"));
        assert!(phase.busy() && phase.settling(&id("queued")));
        assert!(phase.waits_for_person(&id("plan")));
        assert!(phase.settled(&id("queued")).is_none());
        assert_eq!(phase.held(), vec![id("plan")]);
        assert!(!phase.idle() && !phase.may_add());
    }

    #[test]
    fn a_verdict_runs_a_held_call_on_and_ends_a_plans_wait() {
        let mut phase = Phase::default();
        phase.start(id("call"));
        phase.hold(id("call"));
        assert!(!phase.may_add(), "nothing starts beside a held call");
        phase.stop_waiting(&id("other"));
        assert_eq!(
            phase.held(),
            vec![id("call")],
            "another step's verdict changes nothing"
        );
        phase.stop_waiting(&id("call"));
        assert!(phase.held().is_empty() && phase.may_add());
        assert!(phase.rebuild_for_context(&id("call")), "it runs again");
        let mut plan = Phase::default();
        plan.check_plan(id("plan"));
        plan.stop_waiting(&id("plan"));
        assert!(plan.idle());
    }

    #[test]
    fn several_steps_run_and_settle_each_on_its_own() {
        let mut phase = Phase::default();
        phase.start(id("a"));
        phase.start(id("b"));
        assert_eq!(phase.steps().count(), 2);
        phase.settle(id("a"));
        assert!(phase.settling(&id("a")) && !phase.settling(&id("b")));
        assert!(phase.settled(&id("b")).is_none(), "b is not being stored");
        phase.settled(&id("a"));
        assert_eq!(phase.steps().collect::<Vec<_>>(), vec![&id("b")]);
        phase.settle(id("b"));
        phase.settled(&id("b"));
        assert!(phase.idle());
    }

    #[test]
    fn a_prompt_is_built_again_for_the_context_window_once_per_running_step() {
        let mut phase = Phase::default();
        phase.start(id("s"));
        assert!(!phase.rebuild_for_context(&id("other")));
        assert!(phase.rebuild_for_context(&id("s")));
        assert!(!phase.rebuild_for_context(&id("s")));
    }

    #[test]
    fn only_a_steps_own_call_is_taken_to_be_abandoned() {
        let mut phase = Phase::default();
        phase.start(id("s"));
        phase.start(id("t"));
        phase.call_out(&id("s"), SpawnHandle::default());
        assert_eq!(phase.calling(), vec![id("s")]);
        assert!(phase.take_call(&id("t")).is_none());
        assert!(phase.take_call(&id("s")).is_some());
        assert!(phase.calling().is_empty() && phase.busy());
        phase.stop();
        assert!(!phase.may_add() && !phase.idle());
    }
}
