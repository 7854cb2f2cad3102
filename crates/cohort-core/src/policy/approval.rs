//! When a tool call waits for a person (`tool_approval:` of the team or an agent): calls up
//! to a risk level run at once, riskier ones wait. An approval is bound to the exact
//! arguments by their hash: other arguments need an approval of their own. The same policy
//! says whether a person checks the agent's plans before they run (`check_plans`).

use super::Risk;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `tool_approval: {auto_run_up_to: low | medium | high | none, check_plans: bool}`: calls
/// up to that risk run without asking; `none` asks for every call; `high` (the default) never
/// asks. With `check_plans`, each plan of a planning step waits for a person's check; with
/// `ask_for_params` (by default where there is an operator), a call refused for its arguments
/// waits for a person to fill them in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalPolicy {
    /// `None`: every call waits for a person.
    pub auto_run_up_to: Option<Risk>,
    /// A person confirms, edits or rejects the agent's plans before they run.
    #[serde(default)]
    pub check_plans: bool,
    /// A tool call refused for bad or missing arguments waits for a person to fill them in
    /// (`Some(true)`), never does (`Some(false)`), or, as seed 000 says (`None`), does when the
    /// team has an operator and the call is a step of its own (a native tool loop's model sees
    /// the refusal and writes the call again itself).
    #[serde(default)]
    pub ask_for_params: Option<bool>,
    /// A call its annotations let run on its own is judged by the agent's model first, for
    /// its exact arguments; the judgement may only raise its risk.
    #[serde(default)]
    pub judge_with_llm: bool,
    /// A manager's `add_stage` waits for a person to confirm, edit or reject the stages.
    #[serde(default)]
    pub check_stages: bool,
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        ApprovalPolicy {
            auto_run_up_to: Some(Risk::High),
            check_plans: false,
            ask_for_params: None,
            judge_with_llm: false,
            check_stages: false,
        }
    }
}

impl ApprovalPolicy {
    /// Whether a call of `risk` waits for a person: it is past `auto_run_up_to`, or that is `None`.
    pub fn needs_approval(&self, risk: Risk) -> bool {
        self.auto_run_up_to.is_none_or(|limit| risk > limit)
    }
}

/// The hex SHA-256 of `arguments` as canonical JSON (object keys sorted, as serde_json's map
/// keeps them), so the same arguments always give the same hash.
pub fn args_hash(arguments: &Value) -> String {
    use sha2::Digest;
    let text = serde_json::to_string(arguments).unwrap_or_default();
    let digest = sha2::Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn calls_past_the_level_wait_and_none_asks_for_all() {
        let medium = ApprovalPolicy {
            auto_run_up_to: Some(Risk::Medium),
            ..Default::default()
        };
        assert!(!medium.needs_approval(Risk::Low));
        assert!(!medium.needs_approval(Risk::Medium));
        assert!(medium.needs_approval(Risk::High));
        let always = ApprovalPolicy {
            auto_run_up_to: None,
            ..Default::default()
        };
        assert!(always.needs_approval(Risk::Low));
        assert!(!ApprovalPolicy::default().needs_approval(Risk::High));
    }

    #[test]
    fn the_hash_is_of_the_exact_arguments_whatever_their_key_order() {
        let a = args_hash(&json!({"path": "a.txt", "content": "x"}));
        let b: Value = serde_json::from_str(r#"{"content": "x", "path": "a.txt"}"#).unwrap();
        assert_eq!(a, args_hash(&b));
        assert_ne!(a, args_hash(&json!({"path": "a.txt", "content": "y"})));
        assert_eq!(a.len(), 64);
    }
}
