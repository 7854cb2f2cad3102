//! What the agent actor is doing, as one `Phase`: idle, running a step (with its call in
//! flight or not), holding a tool call for a person, waiting for a person's check of a plan,
//! storing a step's end, or stopped. Each handler moves it; nothing else says what it does.

use super::verdict::PendingVerdict;
use crate::ids::StepId;
use actix::SpawnHandle;

/// What the agent is doing. It runs one step of its own at a time; while it is anything but
/// `Idle` it starts no other (a plan's check holds it as a step would).
#[derive(Default)]
pub(super) enum Phase {
    /// No step of its own is under way: it starts the next one when its step lock, its queue
    /// and a pause allow.
    #[default]
    Idle,
    /// Its step `step` runs. `call`: the future of the step's LLM, tool or lookup call while
    /// one is out, abandoned (dropped) when the step's stage or task ends first.
    /// `rebuilt_for_context`: the step's prompt was built again after the endpoint refused it
    /// as longer than its context window (once per step: the model now knows the window).
    Running {
        step: StepId,
        call: Option<SpawnHandle>,
        rebuilt_for_context: bool,
    },
    /// Its step `step`, a tool call, waits for a person's verdict (approval, or arguments
    /// filled in); the verdict runs the call or ends the step.
    HeldForPerson { step: StepId },
    /// The plan its step `plan` made waits for a person's check. The step itself is settled;
    /// nothing else starts until they decide (or the wait's deadline passes).
    PlanCheck { plan: StepId },
    /// SyncState stores the end of step `step` (it can no longer be cancelled). `verdict`: a
    /// person's verdict on it that came meanwhile (its wait was published a moment before this
    /// agent had SyncState's answer), decided once the end is stored. `plan`: a plan still
    /// waiting for its check, which the agent goes back to afterwards (the step was a queued
    /// one a person cancelled while the plan waited).
    Settling {
        step: StepId,
        verdict: Option<PendingVerdict>,
        plan: Option<StepId>,
    },
    /// SyncState could not be reached to store a step's end (the team is stopping): nothing
    /// of it was stored, and the agent starts nothing more.
    Stopped,
}

impl Phase {
    /// Step `step` starts running.
    pub(super) fn running(step: StepId) -> Self {
        Phase::Running {
            step,
            call: None,
            rebuilt_for_context: false,
        }
    }

    /// Whether the agent is on a step of its own (running, held, settling) or stopped; idle
    /// or waiting for a plan's check, it is not.
    pub(super) fn busy(&self) -> bool {
        !matches!(self, Phase::Idle | Phase::PlanCheck { .. })
    }

    /// Whether step `id`'s end is being stored.
    pub(super) fn settling(&self, id: &StepId) -> bool {
        matches!(self, Phase::Settling { step, .. } if step == id)
    }

    /// The step held for a person's verdict, or the plan waiting for their check.
    pub(super) fn held(&self) -> Option<&StepId> {
        match self {
            Phase::HeldForPerson { step } | Phase::PlanCheck { plan: step } => Some(step),
            _ => None,
        }
    }

    /// Whether step `id` waits for a person (held, or its plan checked, also while a
    /// cancelled step's end is stored meanwhile).
    pub(super) fn waits_for_person(&self, id: &StepId) -> bool {
        match self {
            Phase::Settling { plan, .. } => plan.as_ref() == Some(id),
            _ => self.held() == Some(id),
        }
    }

    /// Step `id` no longer waits for a person: a held tool call runs on (its verdict is being
    /// carried out, or it is ending), a plan's wait is over.
    pub(super) fn stop_waiting(&mut self, id: &StepId) {
        match self {
            Phase::HeldForPerson { step } if step == id => *self = Phase::running(id.clone()),
            Phase::PlanCheck { plan } if plan == id => *self = Phase::Idle,
            Phase::Settling { plan, .. } if plan.as_ref() == Some(id) => *plan = None,
            _ => {}
        }
    }

    /// The running step's call went out as the future `handle`.
    pub(super) fn call_out(&mut self, handle: SpawnHandle) {
        if let Phase::Running { call, .. } = self {
            *call = Some(handle);
        }
    }

    /// The running step's call answered (its future is done).
    pub(super) fn call_returned(&mut self) {
        if let Phase::Running { call, .. } = self {
            *call = None;
        }
    }

    /// The call in flight for step `id`, taken to be abandoned (`id` None: for any step).
    pub(super) fn take_call(&mut self, id: Option<&StepId>) -> Option<(StepId, SpawnHandle)> {
        match self {
            Phase::Running { step, call, .. } if id.is_none_or(|id| id == step) => {
                call.take().map(|h| (step.clone(), h))
            }
            _ => None,
        }
    }

    /// The step whose call is in flight.
    pub(super) fn calling(&self) -> Option<&StepId> {
        match self {
            Phase::Running {
                step,
                call: Some(_),
                ..
            } => Some(step),
            _ => None,
        }
    }

    /// Marks running step `id`'s prompt as built again for the model's context window; false
    /// when it was already (or `id` is not the running step): it is not built again.
    pub(super) fn rebuild_for_context(&mut self, id: &StepId) -> bool {
        match self {
            Phase::Running {
                step,
                rebuilt_for_context: rebuilt @ false,
                ..
            } if step == id => {
                *rebuilt = true;
                true
            }
            _ => false,
        }
    }

    /// Step `id`'s end goes to SyncState to be stored. A plan waiting for its check (another
    /// step's) is waited for again afterwards.
    pub(super) fn settle(&mut self, id: StepId) {
        let plan = match std::mem::take(self) {
            Phase::PlanCheck { plan }
            | Phase::Settling {
                plan: Some(plan), ..
            } if plan != id => Some(plan),
            _ => None,
        };
        *self = Phase::Settling {
            step: id,
            verdict: None,
            plan,
        };
    }

    /// Step `id`'s end is stored: the agent goes back to the plan it waited for, or is idle;
    /// the verdict that waited for the end, if one did. Nothing changes when the agent is not
    /// settling `id` (a later step's end took its place).
    pub(super) fn settled(&mut self, id: &StepId) -> Option<PendingVerdict> {
        if !self.settling(id) {
            return None;
        }
        let Phase::Settling { verdict, plan, .. } = std::mem::take(self) else {
            return None;
        };
        if let Some(plan) = plan {
            *self = Phase::PlanCheck { plan };
        }
        verdict
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
        let mut phase = Phase::PlanCheck { plan: id("plan") };
        assert!(
            !phase.busy(),
            "a plan's check lets a queued step's cancel end it"
        );
        phase.settle(id("queued"));
        assert!(phase.busy() && phase.settling(&id("queued")));
        assert!(phase.waits_for_person(&id("plan")));
        assert!(
            phase.held().is_none(),
            "nothing is held while an end is stored"
        );
        assert!(phase.settled(&id("queued")).is_none());
        assert_eq!(phase.held(), Some(&id("plan")));
    }

    #[test]
    fn a_verdict_runs_a_held_call_on_and_ends_a_plans_wait() {
        let mut held = Phase::HeldForPerson { step: id("call") };
        held.stop_waiting(&id("other"));
        assert_eq!(
            held.held(),
            Some(&id("call")),
            "another step's verdict changes nothing"
        );
        held.stop_waiting(&id("call"));
        assert!(matches!(held, Phase::Running { ref step, call: None, .. } if *step == id("call")));
        let mut plan = Phase::PlanCheck { plan: id("plan") };
        plan.stop_waiting(&id("plan"));
        assert!(matches!(plan, Phase::Idle));
    }

    #[test]
    fn a_steps_end_stored_after_a_later_one_took_its_place_changes_nothing() {
        let mut phase = Phase::Idle;
        phase.settle(id("a"));
        phase.settle(id("b"));
        assert!(phase.settled(&id("a")).is_none());
        assert!(phase.settling(&id("b")));
        phase.settled(&id("b"));
        assert!(matches!(phase, Phase::Idle));
    }

    #[test]
    fn a_prompt_is_built_again_for_the_context_window_once_per_running_step() {
        let mut phase = Phase::running(id("s"));
        assert!(!phase.rebuild_for_context(&id("other")));
        assert!(phase.rebuild_for_context(&id("s")));
        assert!(!phase.rebuild_for_context(&id("s")));
        assert!(!Phase::Idle.rebuild_for_context(&id("s")));
    }

    #[test]
    fn only_the_running_steps_call_is_taken_to_be_abandoned() {
        let mut phase = Phase::running(id("s"));
        phase.call_out(SpawnHandle::default());
        assert_eq!(phase.calling(), Some(&id("s")));
        assert!(phase.take_call(Some(&id("other"))).is_none());
        assert_eq!(
            phase.take_call(Some(&id("s"))).map(|(s, _)| s),
            Some(id("s"))
        );
        assert!(phase.calling().is_none() && phase.busy());
    }
}
