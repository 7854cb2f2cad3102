//! A send_message answer as the model wrote it: `<send_message>` (a message to send) or
//! `<get_more_info>` (a step to take first), read leniently.

use crate::ids::{AgentId, StageRef};
use crate::parse::{At, Obj, ParseError, StepRequest, has_tag, step_request, tagged_json};

/// What the send_message skill decided.
#[derive(Clone, Debug, PartialEq)]
pub enum SendMessageAnswer {
    /// Send this message (`<send_message>`).
    Send(SendMessageDraft),
    /// The agent needs to know more before it can write the message.
    GetMoreInfo(StepRequest),
}

/// A message as the model wrote it; the skill adds the task, the sender and wait ids.
#[derive(Clone, Debug, PartialEq)]
pub struct SendMessageDraft {
    /// At least one agent, without duplicates.
    pub receiver: Vec<AgentId>,
    /// The message text.
    pub message: String,
    /// The stage the message is about; `no_relative` when the model left it out.
    pub stage_relative: StageRef,
    /// Whether the receivers are asked to reply; false when left out.
    pub need_reply: bool,
    /// Whether the sender waits for the replies (one wait id per receiver on its step lock);
    /// false when left out.
    pub waiting: bool,
    /// A structured question for a person (`"ask": {"mode": "text" | "select" | "form", …}`).
    pub ask: Option<crate::state::Ask>,
}

const SEND: &str = "send_message";
const MORE: &str = "get_more_info";

/// `<send_message>{receiver, message, stage_relative?, need_reply?, waiting?}` or
/// `<get_more_info>{step_intention, text_content}`; when both appear, the message is sent.
/// `receiver` may be one id or a list; `need_reply` defaults to false (an omitted field must not start a reply ping-pong), `waiting` to false,
/// `stage_relative` to `no_relative`.
pub fn read(text: &str) -> Result<SendMessageAnswer, ParseError> {
    if has_tag(text, SEND) {
        let value = tagged_json(text, SEND)?;
        let o = Obj::new(SEND, At::Whole, &value)?;
        let stage_relative = o
            .opt_str("stage_relative")?
            .map_or(StageRef::NoRelative, |s| StageRef::parse(&s));
        Ok(SendMessageAnswer::Send(SendMessageDraft {
            receiver: o
                .str_list("receiver")?
                .into_iter()
                .map(AgentId::from)
                .collect(),
            message: o.str("message")?,
            stage_relative,
            need_reply: o.bool_or("need_reply", false)?,
            waiting: o.bool_or("waiting", false)?,
            ask: match o.get("ask") {
                None => None,
                Some(v) => {
                    Some(
                        serde_json::from_value(v.clone()).map_err(|e| ParseError::InvalidAsk {
                            tag: SEND,
                            reason: e.to_string(),
                        })?,
                    )
                }
            },
        }))
    } else if has_tag(text, MORE) {
        let value = tagged_json(text, MORE)?;
        step_request(MORE, &value).map(SendMessageAnswer::GetMoreInfo)
    } else {
        Err(ParseError::MissingEitherTag {
            first: SEND,
            second: MORE,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::StageId;

    fn draft(receiver: &[&str], message: &str) -> SendMessageDraft {
        SendMessageDraft {
            receiver: receiver.iter().map(|r| AgentId::from(*r)).collect(),
            message: message.into(),
            stage_relative: StageRef::NoRelative,
            need_reply: false,
            waiting: false,
            ask: None,
        }
    }

    #[test]
    fn a_clean_message_is_read() {
        let text = r#"<send_message>{"receiver": ["bob", "carol"], "message": "Status?", "stage_relative": "s1", "need_reply": false, "waiting": true}</send_message>"#;
        let SendMessageAnswer::Send(d) = read(text).unwrap() else {
            panic!("not a send")
        };
        assert_eq!(
            d.receiver,
            vec![AgentId::from("bob"), AgentId::from("carol")]
        );
        assert_eq!(d.stage_relative, StageRef::Stage(StageId::from("s1")));
        assert!(!d.need_reply);
        assert!(d.waiting);
    }

    #[test]
    fn defaults_and_a_single_receiver_are_filled_in() {
        let text = "I'll write to Bob.\n```json\n<send_message>\n{'receiver': 'bob', 'message': '你好 👋',}\n</send_message>\n```";
        assert_eq!(
            read(text).unwrap(),
            SendMessageAnswer::Send(draft(&["bob"], "你好 👋"))
        );
        let text = "<send_message>{\"receiver\": [\"a\", \"a\"], \"message\": \"m\", \"stage_relative\": null}";
        assert_eq!(
            read(text).unwrap(),
            SendMessageAnswer::Send(draft(&["a"], "m"))
        );
    }

    #[test]
    fn smart_quotes_and_comments_are_read() {
        let text = "<send_message>\n{\n  “receiver”: “bob”, # the PM\n  “message”: “你好 👋”\n}\n</send_message>";
        assert_eq!(
            read(text).unwrap(),
            SendMessageAnswer::Send(draft(&["bob"], "你好 👋"))
        );
    }

    #[test]
    fn python_booleans_and_string_booleans_are_read() {
        let text = "<send_message>{\"receiver\": \"b\", \"message\": \"m\", \"need_reply\": False, \"waiting\": \"true\"}</send_message>";
        let SendMessageAnswer::Send(d) = read(text).unwrap() else {
            panic!("not a send")
        };
        assert!(!d.need_reply);
        assert!(d.waiting);
    }

    #[test]
    fn get_more_info_asks_for_a_step_and_send_wins_over_it() {
        let text = "<get_more_info>{\"step_intention\": \"Find the deadline\", \"text_content\": \"ask PM\"}</get_more_info>";
        assert_eq!(
            read(text).unwrap(),
            SendMessageAnswer::GetMoreInfo(StepRequest {
                step_intention: "Find the deadline".into(),
                text_content: "ask PM".into()
            })
        );
        let both = format!(
            "{text}\n<send_message>{{\"receiver\": \"b\", \"message\": \"m\"}}</send_message>"
        );
        assert_eq!(
            read(&both).unwrap(),
            SendMessageAnswer::Send(draft(&["b"], "m"))
        );
    }

    #[test]
    fn broken_messages_say_what_is_wrong() {
        let err = |t: &str| read(t).unwrap_err().to_string();
        assert_eq!(
            err("Hello Bob!"),
            "the answer has neither a <send_message> nor a <get_more_info> tag"
        );
        assert_eq!(
            err("<send_message>{\"message\": \"m\"}</send_message>"),
            "<send_message> field `receiver` is missing"
        );
        assert_eq!(
            err("<send_message>{\"receiver\": [], \"message\": \"m\"}</send_message>"),
            "<send_message> field `receiver` is empty"
        );
        assert_eq!(
            err("<send_message>{\"receiver\": 7, \"message\": \"m\"}</send_message>"),
            "<send_message> field `receiver` should be a string or a list of strings, found a number"
        );
        assert_eq!(
            err(
                "<send_message>{\"receiver\": \"b\", \"message\": \"m\", \"waiting\": 1}</send_message>"
            ),
            "<send_message> field `waiting` should be true or false, found a number"
        );
        assert_eq!(
            err("<send_message>{\"receiver\": \"b\"\n    \"message\": \"m\"}</send_message>"),
            "<send_message> is not valid JSON: expected `,` or `}` at line 2 column 5"
        );
        assert_eq!(
            err("<get_more_info>{\"text_content\": \"x\"}</get_more_info>"),
            "<get_more_info> field `step_intention` is missing"
        );
    }
}
