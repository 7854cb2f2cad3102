//! Newtype ids for tasks, stages, agents, steps and wait ids, plus `StageRef` ("a stage id, or
//! `no_relative`"), so that an id of one kind can never be passed where another is expected.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
            schemars::JsonSchema,
        )]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// A fresh random id (UUID v4).
            pub fn random() -> Self {
                Self(uuid::Uuid::new_v4().to_string())
            }
            /// The id as its wire string.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

/// Whether `id` can name an agent or a person: not empty, no whitespace or angle brackets (ids
/// appear inside tags), and no leading `[`, which runtime senders sign with (`[TaskState]`,
/// `[SyncState]`) so that nobody can pass for the runtime.
pub fn check_agent_id(id: &str) -> Result<(), BadAgentId> {
    if id.is_empty()
        || id.starts_with('[')
        || id
            .chars()
            .any(|c| c.is_whitespace() || c == '<' || c == '>')
    {
        return Err(BadAgentId(id.to_owned()));
    }
    Ok(())
}

/// An id that cannot name an agent or a person (see [`check_agent_id`]); a model that chose
/// it for a new agent reads why in its team's language.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadAgentId(pub String);

impl BadAgentId {
    /// Why the id cannot be used, in the language of `t`.
    pub fn render(&self, t: &crate::texts::Texts) -> String {
        t.refusal_bad_agent_id(&self.0)
    }
}

/// In English, as a team file's check reports it.
impl fmt::Display for BadAgentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(&crate::texts::Texts::english()))
    }
}

string_id!(
    /// Identifies one task (and its task group).
    TaskId
);
string_id!(
    /// Identifies one stage of a task.
    StageId
);
string_id!(
    /// Identifies one agent; for configured agents it is the id written in the team config.
    AgentId
);
string_id!(
    /// Identifies one step of one agent.
    StepId
);
string_id!(
    /// One fresh id per receiver of a message whose sender waits for the reply.
    WaitId
);

/// The wire word for "not tied to any stage".
pub const NO_RELATIVE: &str = "no_relative";

/// Which stage a step or message belongs to: a stage, or none (`"no_relative"` on the wire).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StageRef {
    /// Belongs to this stage.
    Stage(StageId),
    /// Outside any stage (`"no_relative"`).
    NoRelative,
}

impl StageRef {
    /// The stage it names, or `None` for `no_relative`.
    pub fn stage(&self) -> Option<&StageId> {
        match self {
            StageRef::Stage(id) => Some(id),
            StageRef::NoRelative => None,
        }
    }

    /// Parses the wire form: `no_relative` (or an empty string) means no stage.
    pub fn parse(s: &str) -> Self {
        let s = s.trim();
        if s.is_empty() || s == NO_RELATIVE || s == "no_stage" {
            StageRef::NoRelative
        } else {
            StageRef::Stage(StageId::from(s))
        }
    }

    /// The wire form: the stage id, or `no_relative`.
    pub fn as_str(&self) -> &str {
        match self {
            StageRef::Stage(id) => id.as_str(),
            StageRef::NoRelative => NO_RELATIVE,
        }
    }
}

impl From<StageId> for StageRef {
    fn from(id: StageId) -> Self {
        StageRef::Stage(id)
    }
}

impl fmt::Display for StageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for StageRef {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StageRef {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Option::<String>::deserialize(d)?;
        Ok(s.map(|s| StageRef::parse(&s))
            .unwrap_or(StageRef::NoRelative))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_ref_round_trips_through_its_wire_form() {
        let s: StageRef = serde_json::from_str("\"no_relative\"").unwrap();
        assert_eq!(s, StageRef::NoRelative);
        let s: StageRef = serde_json::from_str("null").unwrap();
        assert_eq!(s, StageRef::NoRelative);
        let s: StageRef = serde_json::from_str("\"abc\"").unwrap();
        assert_eq!(s, StageRef::Stage(StageId::from("abc")));
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"abc\"");
        assert_eq!(
            serde_json::to_string(&StageRef::NoRelative).unwrap(),
            "\"no_relative\""
        );
    }

    #[test]
    fn random_ids_differ() {
        assert_ne!(TaskId::random(), TaskId::random());
    }
}
