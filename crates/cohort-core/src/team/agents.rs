//! The agent_manager instructions as SyncState carries them out: init_new_agent puts a new
//! member on the roster (the actor then starts it from its template) and add_task_participant
//! adds an existing agent to a task's group.

use super::{Applied, Malformed, Member, SyncCore, SyncError};
use crate::event::{Change, TaskChange};
use crate::ids::{AgentId, StageRef};
use crate::message::{AgentInstruction, Instruction, Message, TASK_STATE_SENDER};

impl SyncCore {
    pub(super) fn check_agent_instruction(
        &self,
        asker: &AgentId,
        i: &AgentInstruction,
    ) -> Result<(), SyncError> {
        match i {
            AgentInstruction::InitNewAgent {
                template, agent_id, ..
            } => {
                let Some(t) = self.catalog.template(template) else {
                    let known = self.catalog.templates.iter().map(|t| t.name.clone());
                    return Err(SyncError::Invalid(Malformed::NoTemplate {
                        template: template.clone(),
                        known: known.collect(),
                    }));
                };
                let hired = self.roster.iter().filter(|m| m.template.is_some()).count();
                if hired >= self.catalog.max_hired {
                    return Err(SyncError::Invalid(Malformed::HiredLimit { hired }));
                }
                if self.knows(agent_id) {
                    return Err(SyncError::Invalid(Malformed::AgentIdTaken(
                        agent_id.clone(),
                    )));
                }
                if let Some(missing) = self.catalog.missing_tools(t).first() {
                    return Err(SyncError::Invalid(Malformed::TemplateLacksServer {
                        template: template.clone(),
                        file: t.file.display().to_string(),
                        server: (*missing).to_owned(),
                    }));
                }
                Ok(())
            }
            AgentInstruction::AddTaskParticipant { task_id, agent_id } => {
                let task = self
                    .tasks
                    .get(task_id)
                    .ok_or_else(|| SyncError::UnknownTask(task_id.clone()))?;
                if &task.task_manager != asker {
                    return Err(SyncError::NotManager {
                        agent: asker.clone(),
                        task: task_id.clone(),
                    });
                }
                if task.execution_state.is_over() {
                    return Err(SyncError::TaskOver(task_id.clone(), task.execution_state));
                }
                if !self.knows(agent_id) {
                    return Err(SyncError::UnknownAgent(agent_id.clone()));
                }
                Ok(())
            }
        }
    }

    /// Carries out an instruction that `check_agent_instruction` accepted.
    pub(super) fn run_agent_instruction(&mut self, i: &AgentInstruction, applied: &mut Applied) {
        match i {
            AgentInstruction::InitNewAgent {
                template,
                agent_id,
                name,
            } => {
                let Some(t) = self.catalog.template(template) else {
                    return;
                };
                let member = Member {
                    id: agent_id.clone(),
                    name: name.clone().unwrap_or_else(|| agent_id.to_string()),
                    role: t.role.clone(),
                    profile: t.profile.clone(),
                    skills: t.skills.clone(),
                    tools: t.tools.clone(),
                    human: false,
                    operator: false,
                    template: Some(t.name.clone()),
                };
                self.enrol(member.clone());
                applied.new_agents.push(member);
            }
            AgentInstruction::AddTaskParticipant { task_id, agent_id } => {
                if !self.tasks.contains_key(task_id) {
                    return;
                }
                self.tell_if_paused(task_id, std::slice::from_ref(agent_id), applied);
                self.emit(
                    applied,
                    Change::Task(TaskChange::Joined {
                        task_id: task_id.clone(),
                        agents: vec![agent_id.clone()],
                    }),
                );
                // The agent now holds the task in its working memory (seed §2.4.1).
                applied.messages.push(Message::instruction(
                    task_id.clone(),
                    AgentId::from(TASK_STATE_SENDER),
                    vec![agent_id.clone()],
                    StageRef::NoRelative,
                    &Instruction::UpdateWorkingMemory {
                        task_id: task_id.clone(),
                        stage_id: None,
                    },
                    &self.texts,
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Catalog, ExecuteOutput, SyncCore};
    use super::*;
    use crate::config::{AgentTemplate, LlmConfig};
    use crate::ids::TaskId;
    use crate::message::{StagePlan, TaskInstruction};
    use crate::state::Skill;

    fn core() -> SyncCore {
        core_with_limit(3)
    }

    fn core_with_limit(max_hired: usize) -> SyncCore {
        let template = |name: &str, tools: &[&str]| AgentTemplate {
            name: name.into(),
            role: format!("{name} role"),
            profile: String::new(),
            skills: vec![Skill::Planning],
            tools: tools.iter().map(|t| t.to_string()).collect(),
            llm: LlmConfig::Scripted {
                script: "s.yaml".into(),
                max_in_flight: 1,
            },
            file: "team.yaml".into(),
        };
        let catalog = Catalog {
            templates: vec![template("analyst", &[]), template("browser", &["web"])],
            skills: vec![],
            tools: vec![("workspace".into(), "files".into())],
            max_hired,
        };
        SyncCore::new(
            vec![Member::new("m", "manager"), Member::new("a", "worker")],
            &["m".into()],
            &[],
        )
        .with_catalog(catalog)
    }

    fn agent_out(by: &str, i: AgentInstruction) -> ExecuteOutput {
        ExecuteOutput {
            agent_id: Some(by.into()),
            agent_instruction: Some(i),
            ..Default::default()
        }
    }

    /// `by`'s step in the base task (where add_task is given), giving `i`.
    fn task_out(c: &SyncCore, by: &str, i: TaskInstruction) -> ExecuteOutput {
        ExecuteOutput {
            agent_id: Some(by.into()),
            task_id: Some(c.base_task().clone()),
            task_instruction: Some(i),
            ..Default::default()
        }
    }

    fn hire(template: &str, id: &str) -> AgentInstruction {
        AgentInstruction::InitNewAgent {
            template: template.into(),
            agent_id: id.into(),
            name: Some("Ana".into()),
        }
    }

    #[test]
    fn a_new_agent_joins_the_roster_and_can_be_allocated_at_once() {
        let mut c = core();
        let a = c.apply(&agent_out("m", hire("analyst", "ana")), "now");
        assert!(a.refused.is_none(), "{:?}", a.refused);
        assert_eq!(a.new_agents.len(), 1);
        let m = &a.new_agents[0];
        assert_eq!(
            (m.id.as_str(), m.name.as_str(), m.role.as_str()),
            ("ana", "Ana", "analyst role")
        );
        assert_eq!(m.template.as_deref(), Some("analyst"));
        assert_eq!(m.skills, vec![Skill::Planning]);

        let t = TaskId::from("t");
        let add = TaskInstruction::AddTask {
            attachments: Vec::new(),
            task_id: t.clone(),
            task_name: "n".into(),
            task_intention: "i".into(),
            requested_by: None,
            goal_step: None,
            trace_id: None,
        };
        assert!(c.apply(&task_out(&c, "m", add), "now").refused.is_none());
        let stage = TaskInstruction::AddStage {
            task_id: t.clone(),
            stages: vec![StagePlan {
                stage_intention: "analyse".into(),
                agent_allocation: [(AgentId::from("ana"), "analyse it".to_owned())].into(),
            }],
        };
        let a = c.apply(&task_out(&c, "m", stage), "now");
        assert!(a.refused.is_none(), "{:?}", a.refused);
        assert!(c.task(&t).unwrap().task_group.contains(&"ana".into()));
        assert!(
            a.messages
                .iter()
                .any(|m| m.receiver == vec![AgentId::from("ana")]
                    && matches!(m.instruction_body(), Some(Instruction::StartStage { .. })))
        );
    }

    #[test]
    fn unknown_template_taken_id_and_missing_tool_are_refused_with_the_reason() {
        let mut c = core();
        for (i, want) in [
            (
                hire("poet", "p1"),
                "there is no agent template `poet` (templates: analyst, browser)",
            ),
            (hire("analyst", "a"), "agent id `a` is taken"),
            (hire("analyst", "m"), "agent id `m` is taken"),
            (
                hire("browser", "b1"),
                "template `browser` (team.yaml) names MCP server `web`, which this team does not have",
            ),
        ] {
            let a = c.apply(&agent_out("m", i), "now");
            let why = a.refused.expect("refused").to_string();
            assert!(why.contains(want), "{why}");
            assert!(a.new_agents.is_empty());
        }
        // A second agent with the same new id is refused too.
        assert!(
            c.apply(&agent_out("m", hire("analyst", "ana")), "now")
                .refused
                .is_none()
        );
        let why = c
            .apply(&agent_out("m", hire("analyst", "ana")), "now")
            .refused
            .unwrap();
        assert!(why.to_string().contains("`ana` is taken"));
    }

    #[test]
    fn hiring_stops_at_the_teams_limit() {
        let mut c = core_with_limit(2);
        for id in ["h1", "h2"] {
            assert!(
                c.apply(&agent_out("m", hire("analyst", id)), "now")
                    .refused
                    .is_none()
            );
        }
        let a = c.apply(&agent_out("m", hire("analyst", "h3")), "now");
        let why = a.refused.expect("over the limit").to_string();
        assert!(
            why.contains("already has 2 agents created by managers"),
            "{why}"
        );
        assert!(a.new_agents.is_empty() && !c.knows(&"h3".into()));
    }

    #[test]
    fn add_task_participant_joins_the_group_and_updates_working_memory() {
        let mut c = core();
        let t = TaskId::from("t");
        let add = TaskInstruction::AddTask {
            attachments: Vec::new(),
            task_id: t.clone(),
            task_name: "n".into(),
            task_intention: "i".into(),
            requested_by: None,
            goal_step: None,
            trace_id: None,
        };
        c.apply(&task_out(&c, "m", add), "now");
        let join = |task: &str, agent: &str| AgentInstruction::AddTaskParticipant {
            task_id: task.into(),
            agent_id: agent.into(),
        };
        let a = c.apply(&agent_out("m", join("t", "a")), "now");
        assert!(a.refused.is_none());
        assert_eq!(
            c.task(&t).unwrap().task_group,
            vec![AgentId::from("m"), AgentId::from("a")]
        );
        let m = &a.messages[0];
        assert_eq!(m.receiver, vec![AgentId::from("a")]);
        assert_eq!(
            m.instruction_body().cloned().unwrap(),
            Instruction::UpdateWorkingMemory {
                task_id: t.clone(),
                stage_id: None
            }
        );
        // Joining twice keeps one entry.
        c.apply(&agent_out("m", join("t", "a")), "now");
        assert_eq!(c.task(&t).unwrap().task_group.len(), 2);

        for (by, i, want) in [
            ("a", join("t", "a"), "not the manager"),
            ("m", join("t", "ghost"), "no agent `ghost`"),
            ("m", join("nope", "a"), "no task `nope`"),
        ] {
            let why = c.apply(&agent_out(by, i), "now").refused.expect("refused");
            assert!(why.to_string().contains(want), "{why}");
        }
        crate::team::tests::stage_done(&mut c, &t);
        let done = TaskInstruction::FinishTask {
            task_id: t.clone(),
            task_summary: String::new(),
            outcome: Default::default(),
            summary_written: None,
        };
        c.apply(&task_out(&c, "m", done), "now");
        let why = c
            .apply(&agent_out("m", join("t", "a")), "now")
            .refused
            .unwrap();
        assert!(why.to_string().contains("already finished"), "{why}");
    }
}
