//! A stalled task's goal-giver is told, once: the watchdog of a served team finds tasks nobody
//! works on (`event::stall::idle_tasks`) and reports each that stays so; SyncState, which owns
//! the tasks, decides whether anyone is to be told.

use super::{Applied, SyncCore, notices};
use crate::ids::TaskId;

impl SyncCore {
    /// `task` has had no work in it for `idle_secs`: its goal-giver is told, the first time
    /// only, while it is open. Nothing happens for a task that is over, paused, unknown or
    /// nobody's goal.
    pub fn report_stall(&mut self, task: &TaskId, idle_secs: u64) -> Applied {
        let mut applied = Applied::default();
        let Some(t) = self.tasks.get(task) else {
            return applied;
        };
        if t.execution_state.is_over() || t.paused || self.stall_told.contains(task) {
            return applied;
        }
        if let Some(m) = notices::task_stalled(t, idle_secs, &self.roster, &self.texts) {
            self.stall_told.insert(task.clone());
            applied.messages.push(m);
        }
        applied
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::AgentId;
    use crate::notice::Notice;
    use crate::team::tests::{add_task_for, with_a_person};

    #[test]
    fn a_stalled_task_tells_its_goal_giver_once() {
        let mut c = with_a_person();
        let t = add_task_for(&mut c, Some("op"));
        let told = c.report_stall(&t, 180);
        assert_eq!(told.messages.len(), 1);
        let m = &told.messages[0];
        assert_eq!(m.receiver, [AgentId::from("op")]);
        assert!(matches!(
            m.notice_body(),
            Some(Notice::TaskStalled { idle_secs: 180, .. })
        ));
        let text = m
            .notice_body()
            .unwrap()
            .render(&crate::texts::Texts::english());
        assert!(
            text.contains("\"Haiku\" has stalled") && text.contains("3 min"),
            "{text}"
        );
        assert!(c.report_stall(&t, 400).messages.is_empty(), "told once");
        assert!(c.report_stall(&TaskId::random(), 400).messages.is_empty());
    }
}
