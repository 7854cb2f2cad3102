//! A tool call's risk (LOW / MEDIUM / HIGH) with the reason for it: from the MCP tool's
//! annotations, unless the server's YAML says otherwise (`risk:`). Read as the MCP spec
//! defines the hints' defaults: a tool that does not say it is read-only may change things,
//! and one that does not say it is not destructive may destroy them.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// How much harm a tool call may do, ordered `Low < Medium < High`: `tool_approval.auto_run_up_to`
/// lets calls up to a level run without asking (`low`, `medium`, `high` in YAML).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[serde(expecting = "one of low, medium, high")]
pub enum Risk {
    /// Only reads (`readOnlyHint`), or the server's `risk:` says so.
    Low,
    /// Changes things, but only adds to them (`destructiveHint: false`), or `risk:` says so.
    Medium,
    /// May overwrite or delete things, or says nothing of its effects, or `risk:` says so.
    High,
}

impl std::fmt::Display for Risk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Risk::Low => "LOW",
            Risk::Medium => "MEDIUM",
            Risk::High => "HIGH",
        })
    }
}

/// A call's risk and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolRisk {
    /// The call's risk level.
    pub risk: Risk,
    /// Why, in words: shown to the person asked to approve the call.
    pub reason: String,
}

/// A server's `risk:` in its YAML: a level per tool name, `"*"` for every other tool.
pub type RiskOverrides = BTreeMap<String, Risk>;

/// The risk of calling `tool`, whose MCP annotations are `annotations` (the JSON the server
/// described, camelCase hints), on a server with `overrides`.
pub fn judge(tool: &str, annotations: Option<&Value>, overrides: &RiskOverrides) -> ToolRisk {
    if let Some(r) = overrides.get(tool) {
        return ToolRisk {
            risk: *r,
            reason: format!("the server's configuration sets `{tool}` to {r}"),
        };
    }
    if let Some(r) = overrides.get("*") {
        return ToolRisk {
            risk: *r,
            reason: format!("the server's configuration sets its tools to {r}"),
        };
    }
    let hint = |name: &str| {
        annotations
            .and_then(|a| a.get(name))
            .and_then(Value::as_bool)
    };
    let (risk, reason) = if hint("readOnlyHint") == Some(true) {
        (Risk::Low, "it only reads (readOnlyHint)".to_owned())
    } else if hint("destructiveHint") == Some(false) {
        let reach = if hint("openWorldHint") == Some(false) {
            "within its own domain"
        } else {
            "possibly in the outside world (openWorldHint)"
        };
        (
            Risk::Medium,
            format!("it changes things, but only additively (destructiveHint false), {reach}"),
        )
    } else if annotations.is_none() {
        (
            Risk::High,
            "the tool says nothing of its effects, so it may change or delete things".to_owned(),
        )
    } else {
        (
            Risk::High,
            "it may overwrite or delete things (destructiveHint)".to_owned(),
        )
    };
    ToolRisk { risk, reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn annotations_give_the_risk_and_its_reason() {
        let none = RiskOverrides::new();
        let read = json!({"readOnlyHint": true});
        assert_eq!(judge("read_file", Some(&read), &none).risk, Risk::Low);
        let append = json!({"destructiveHint": false, "openWorldHint": false});
        assert_eq!(
            judge("append_file", Some(&append), &none).risk,
            Risk::Medium
        );
        let write = json!({"destructiveHint": true, "openWorldHint": false});
        let w = judge("write_file", Some(&write), &none);
        assert_eq!(w.risk, Risk::High);
        assert!(w.reason.contains("destructiveHint"));
        assert_eq!(judge("mystery", None, &none).risk, Risk::High);
        assert_eq!(judge("mystery", Some(&json!({})), &none).risk, Risk::High);
    }

    #[test]
    fn the_servers_configuration_overrides_the_annotations() {
        let o: RiskOverrides = [
            ("write_file".to_owned(), Risk::Low),
            ("*".to_owned(), Risk::Medium),
        ]
        .into_iter()
        .collect();
        let read = json!({"readOnlyHint": true});
        assert_eq!(judge("write_file", None, &o).risk, Risk::Low);
        let r = judge("read_file", Some(&read), &o);
        assert_eq!(r.risk, Risk::Medium);
        assert!(r.reason.contains("configuration"));
    }
}
