//! A tool call's risk (LOW / MEDIUM / HIGH) with the reason for it: from the MCP tool's
//! annotations, unless the server's YAML says otherwise (`risk:`). Read as the MCP spec
//! defines the hints' defaults: a tool that does not say it is read-only may change things,
//! and one that does not say it is not destructive may destroy them.

use crate::server_description::ToolAnnotations;
use crate::texts::Texts;
use serde::{Deserialize, Serialize};
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

impl Risk {
    /// The level as people read it, in the team's language.
    pub fn word(self, t: &Texts) -> String {
        match self {
            Risk::Low => t.risk_low(),
            Risk::Medium => t.risk_medium(),
            Risk::High => t.risk_high(),
        }
    }
}

/// The risk of calling `tool`, whose MCP annotations are `annotations` (as its server described
/// it), on a server with `overrides`; its reason in `t`'s language.
pub fn judge(
    tool: &str,
    annotations: Option<&ToolAnnotations>,
    overrides: &RiskOverrides,
    t: &Texts,
) -> ToolRisk {
    if let Some(r) = overrides.get(tool) {
        return ToolRisk {
            risk: *r,
            reason: t.risk_configured_tool(tool, r.word(t)),
        };
    }
    if let Some(r) = overrides.get("*") {
        return ToolRisk {
            risk: *r,
            reason: t.risk_configured_all(r.word(t)),
        };
    }
    let hint = |of: fn(&ToolAnnotations) -> Option<bool>| annotations.and_then(of);
    let (risk, reason) = if hint(|a| a.read_only_hint) == Some(true) {
        (Risk::Low, t.risk_read_only())
    } else if hint(|a| a.destructive_hint) == Some(false) {
        let reason = if hint(|a| a.open_world_hint) == Some(false) {
            t.risk_additive_closed()
        } else {
            t.risk_additive_open()
        };
        (Risk::Medium, reason)
    } else if annotations.is_none() {
        (Risk::High, t.risk_unannotated())
    } else {
        (Risk::High, t.risk_destructive())
    };
    ToolRisk { risk, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn en() -> std::sync::Arc<Texts> {
        Texts::english()
    }

    /// Annotations giving these hints: read-only, destructive, open-world.
    fn hints(
        read_only: Option<bool>,
        destructive: Option<bool>,
        open_world: Option<bool>,
    ) -> ToolAnnotations {
        ToolAnnotations {
            read_only_hint: read_only,
            destructive_hint: destructive,
            open_world_hint: open_world,
            ..ToolAnnotations::default()
        }
    }

    #[test]
    fn annotations_give_the_risk_and_its_reason() {
        let none = RiskOverrides::new();
        let read = hints(Some(true), None, None);
        assert_eq!(
            judge("read_file", Some(&read), &none, &en()).risk,
            Risk::Low
        );
        let append = hints(None, Some(false), Some(false));
        assert_eq!(
            judge("append_file", Some(&append), &none, &en()).risk,
            Risk::Medium
        );
        let write = hints(None, Some(true), Some(false));
        let w = judge("write_file", Some(&write), &none, &en());
        assert_eq!(w.risk, Risk::High);
        assert!(w.reason.contains("destructiveHint"));
        assert_eq!(judge("mystery", None, &none, &en()).risk, Risk::High);
        assert_eq!(
            judge("mystery", Some(&ToolAnnotations::default()), &none, &en()).risk,
            Risk::High
        );
    }

    #[test]
    fn the_servers_configuration_overrides_the_annotations() {
        let o: RiskOverrides = [
            ("write_file".to_owned(), Risk::Low),
            ("*".to_owned(), Risk::Medium),
        ]
        .into_iter()
        .collect();
        let read = hints(Some(true), None, None);
        assert_eq!(judge("write_file", None, &o, &en()).risk, Risk::Low);
        let r = judge("read_file", Some(&read), &o, &en());
        assert_eq!(r.risk, Risk::Medium);
        assert!(r.reason.contains("configuration"));
    }

    #[test]
    fn the_reason_is_said_in_the_teams_language() {
        let zh = Texts::builtin(crate::texts::Language::Zh);
        let read = hints(Some(true), None, None);
        assert_eq!(
            judge("read_file", Some(&read), &RiskOverrides::new(), &zh).reason,
            "它只读取（readOnlyHint）"
        );
        let o: RiskOverrides = [("*".to_owned(), Risk::High)].into();
        assert_eq!(
            judge("x", None, &o, &zh).reason,
            "服务器的配置把它的工具都设为高风险"
        );
        assert_eq!(
            judge("x", None, &o, &en()).reason,
            "the server's configuration sets its tools to HIGH"
        );
    }
}
