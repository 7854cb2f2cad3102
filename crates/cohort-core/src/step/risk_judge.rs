//! A tool call's risk judged by the agent's model for the exact arguments (seed 000's
//! get_tool_risk), where `tool_approval.judge_with_llm` asks for it: the request that asks, and
//! its answer read as `<tool_risk>{"risk", "reason"}</tool_risk>`. The judgement can only raise
//! the risk the annotations gave (a model talked into "low" must not unlock a destructive
//! tool), and an answer that cannot be read counts as HIGH.

use crate::policy::{Risk, ToolRisk};
use crate::texts::Texts;
use serde_json::Value;

/// The longest arguments text shown to the judge, in characters.
const ARGS_SHOWN: usize = 4_000;

/// What the judge is asked about one call (the user part, in the language of `t`; the
/// instructions are the prompt set's `risk_judge` phrase).
pub fn judge_prompt(
    (server, tool): (&str, &str),
    description: &str,
    arguments: &Value,
    intention: &str,
    t: &Texts,
) -> String {
    let mut args = serde_json::to_string_pretty(arguments).unwrap_or_default();
    if args.chars().count() > ARGS_SHOWN {
        let kept: String = args.chars().take(ARGS_SHOWN).collect();
        args = format!("{kept}\n{}", t.json_cut());
    }
    t.risk_judge_prompt(tool, server, description, intention, args)
}

/// The risk after the judge answered `answer` (or failed with it), given the annotations';
/// the reason in `t`'s language.
pub fn with_judgement(annotated: ToolRisk, answer: Result<&str, &str>, t: &Texts) -> ToolRisk {
    let judged = match answer {
        Ok(text) => read(text, t).unwrap_or_else(|why| ToolRisk {
            risk: Risk::High,
            reason: t.risk_judge_unreadable(why),
        }),
        Err(e) => ToolRisk {
            risk: Risk::High,
            reason: t.risk_judge_failed(e),
        },
    };
    if judged.risk > annotated.risk {
        judged
    } else {
        ToolRisk {
            risk: annotated.risk,
            reason: t.risk_judged_lower(&annotated.reason, judged.risk.word(t), &judged.reason),
        }
    }
}

fn read(text: &str, t: &Texts) -> Result<ToolRisk, String> {
    let v = crate::parse::tag_json(text, "tool_risk")
        .ok_or_else(|| t.answer_no_tag("tool_risk"))?
        .map_err(|e| e.render(t))?;
    let risk = match v
        .get("risk")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("low") => Risk::Low,
        Some("medium") => Risk::Medium,
        Some("high") => Risk::High,
        other => return Err(t.risk_judge_bad_level(format!("{other:?}"))),
    };
    let reason = v
        .get("reason")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map_or_else(|| t.risk_no_reason(), str::to_owned);
    Ok(ToolRisk {
        risk,
        reason: t.risk_judged(reason),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn low() -> ToolRisk {
        ToolRisk {
            risk: Risk::Low,
            reason: "it only reads (readOnlyHint)".into(),
        }
    }

    #[test]
    fn the_judge_can_raise_the_risk_but_never_lower_it() {
        let raised = with_judgement(
            low(),
            Ok(r#"<tool_risk>{"risk": "HIGH", "reason": "it reads the secrets file"}</tool_risk>"#),
            &Texts::english(),
        );
        assert_eq!(raised.risk, Risk::High);
        assert!(
            raised
                .reason
                .contains("judged by the model for these arguments: it reads the secrets file")
        );
        let high = ToolRisk {
            risk: Risk::High,
            reason: "destructive".into(),
        };
        let kept = with_judgement(
            high,
            Ok(r#"<tool_risk>{"risk": "low", "reason": "harmless"}</tool_risk>"#),
            &Texts::english(),
        );
        assert_eq!(kept.risk, Risk::High);
        assert!(
            kept.reason
                .starts_with("destructive; the model judged these arguments LOW")
        );
    }

    #[test]
    fn an_answer_that_cannot_be_read_or_a_failed_call_is_high() {
        for answer in [
            Ok("it is fine"),
            Ok(r#"<tool_risk>{"risk": "tiny"}</tool_risk>"#),
            Err("timeout"),
        ] {
            let r = with_judgement(low(), answer, &Texts::english());
            assert_eq!(r.risk, Risk::High, "{answer:?}");
        }
        assert!(
            judge_prompt(
                ("ws", "read_file"),
                "Read a file",
                &serde_json::json!({"path": "a"}),
                "read it",
                &Texts::english(),
            )
            .contains("\"path\": \"a\"")
        );
    }
}
