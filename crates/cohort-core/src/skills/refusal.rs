
#[cfg(test)]
mod tests {
    use super::*;
    use crate::texts::{Language, english_words};

    fn rejected() -> Vec<RejectedStep> {
        let step = |n, why| RejectedStep {
            n,
            intention: "写初稿".into(),
            why,
        };
        vec![
            step(1, StepRefusal::UnknownSkill("dance".into())),
            step(2, StepRefusal::NoSkill(Skill::Think)),
            step(
                3,
                StepRefusal::NotPlannable {
                    skill: Skill::Summary,
                    planner: Skill::Decision,
                },
            ),
            step(4, StepRefusal::ManagerSkill(Skill::Think)),
            step(5, StepRefusal::ManagerTool("web".into())),
            step(6, StepRefusal::NoTool("web".into())),
            step(7, StepRefusal::BadType("job".into())),
        ]
    }

    /// Every refusal, with facts a Chinese team would give (ids, its own words).
    fn every_refusal() -> Vec<Refusal> {
        let mut all = vec![
            Refusal::NoReceiver,
            Refusal::MessageToSelf,
            Refusal::AskToAgent("a1".into()),
            Refusal::AskLimit { asked: 3, cap: 3 },
            Refusal::NoStages,
            Refusal::RefusedJustNow("add_stage"),
            Refusal::StageUndecided("s1".into()),
            Refusal::NoTaskIntention,
            Refusal::NoGoal {
                agent: "a1".into(),
                intention: String::new(),
            },
            Refusal::NoGoal {
                agent: "a1".into(),
                intention: "写一首俳句".into(),
            },
            Refusal::MustReact,
            Refusal::MustManage,
            Refusal::PartGraph(rejected()),
            Refusal::SummaryOutsideStage,
            Refusal::SummaryEchoes,
            Refusal::NoToolStep,
            Refusal::BadAgentId(BadAgentId("a 1".into())),
        ];
        all.extend(
            [
                AskError::BadOptions,
                AskError::BadFields,
                AskError::FieldOptions("颜色".into()),
                AskError::BadBounds("数量".into()),
                AskError::TooLong,
            ]
            .map(Refusal::Unanswerable),
        );
        all.extend(
            [
                InstructionError::NotAnObject,
                InstructionError::Arguments("[1]".into()),
                InstructionError::NoUri,
                InstructionError::NoCapability,
            ]
            .map(Refusal::ToolInstruction),
        );
        all.extend(
            [
                GraphError::DuplicateId("1".into()),
                GraphError::UnknownDependency {
                    step: "2".into(),
                    missing: "9".into(),
                },
                GraphError::SelfDependency("3".into()),
                GraphError::Cycle(vec!["1".into(), "2".into(), "1".into()]),
                GraphError::UnknownReplan("8".into()),
            ]
            .map(Refusal::Graph),
        );
        all
    }

    #[test]
    fn a_chinese_team_reads_every_refusal_without_an_english_word() {
        let zh = Texts::builtin(Language::Zh);
        for r in every_refusal() {
            let text = r.render(&zh);
            assert!(english_words(&text, &[]).is_empty(), "{r:?}: {text}");
        }
        let empty = super::super::SkillError::EmptyPlan(rejected()).render(&zh);
        assert!(english_words(&empty, &[]).is_empty(), "{empty}");
    }

    #[test]
    fn the_english_refusals_keep_their_wording() {
        let two = rejected()[1..=2].to_vec();
        assert_eq!(
            Refusal::PartGraph(two).to_string(),
            "step 2 (写初稿): the agent has no `think` skill; step 3 (写初稿): `summary` may not \
             be planned by decision; the plan's steps depend on each other, so it runs whole or \
             not at all: plan it again"
        );
        assert_eq!(
            Refusal::NoGoal {
                agent: "w".into(),
                intention: " ".into()
            }
            .to_string(),
            "the allocation gives `w` no goal (none, a placeholder, or only its name): give each \
             agent what it is to do in the stage, e.g. {\"w\":\"what it is to do, in the task's \
             words\"}"
        );
        assert_eq!(
            Refusal::Unanswerable(AskError::FieldOptions("c".into())).to_string(),
            "the question in `ask` cannot be answered: form field `c` is a select field without \
             2 or more options"
        );
        assert_eq!(
            Refusal::Graph(GraphError::Cycle(vec!["a".into(), "b".into(), "a".into()]))
                .to_string(),
            "the steps a → b → a depend on each other in a circle, so none of them could start"
        );
    }
}
