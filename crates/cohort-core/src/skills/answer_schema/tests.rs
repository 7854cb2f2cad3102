//! Tests of what every answer schema shares: its object form, its memory block, and that a
//! constrained answer reads like the tagged one. Each skill's own schema is tested in its folder.
use super::*;
use crate::call::structured::tagged_answer;
use crate::parse;
use crate::skills::test_support::{agent, running};

#[test]
fn a_constrained_answer_reads_like_the_tagged_one() {
    let answer = json!({
        "planned_step": [{"step_intention": "i", "type": "skill", "executor": "think",
                          "text_content": "say \"hi\" </planned_step>"}],
        "persistent_memory": null,
    })
    .to_string();
    let tagged = tagged_answer(&answer).unwrap();
    let steps = crate::skills::plan::answer::planned_steps(&tagged).unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0].text_content, "say \"hi\" </planned_step>");
    assert!(!tagged.contains("persistent_memory"));

    let think = tagged_answer(r#"{"think": "a <b> c"}"#).unwrap();
    assert_eq!(parse::tagged_text(&think, "think").unwrap(), "a <b> c");

    let digest = tagged_answer(
        r#"{"text": "read it", "react_action": {"step_intention": "s", "text_content": "t"}}"#,
    )
    .unwrap();
    assert_eq!(
        crate::skills::process_message::answer::digest(&digest),
        "read it"
    );
    assert!(
        crate::skills::process_message::answer::react_action(&digest)
            .unwrap()
            .is_some()
    );

    let fenced = tagged_answer("```json\n{\"quick_think\": \"x\"}\n```").unwrap();
    assert_eq!(parse::tagged_text(&fenced, "quick_think").unwrap(), "x");
    assert_eq!(tagged_answer("<think>plain</think>"), None);
    assert_eq!(tagged_answer("[1, 2]"), None);
}

#[test]
fn every_skill_has_an_object_schema_with_an_optional_memory_block() {
    let a = agent(&Skill::ALL);
    for skill in Skill::ALL {
        let step = running(&mut a.clone(), skill, "");
        let schema = answer_schema(skill, &a, &step, &["w".into(), "x".into()]);
        let objects = match schema.get("anyOf") {
            Some(Value::Array(v)) => v.clone(),
            _ => vec![schema.clone()],
        };
        for o in objects {
            assert_eq!(o["type"], "object", "{skill}");
            assert!(o["properties"]["persistent_memory"].is_object(), "{skill}");
            let required = o["required"].as_array().unwrap();
            assert!(!required.contains(&json!("persistent_memory")), "{skill}");
        }
    }
}
