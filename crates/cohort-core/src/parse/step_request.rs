//! A step the model asks for, `{step_intention, text_content}`: the shape of send_message's
//! `<get_more_info>` and process_message's `<react_action>`.

use super::fields::Obj;
use super::{At, ParseError};
use serde_json::Value;

/// A step the model asks for (`{step_intention, text_content}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepRequest {
    /// What the requested step is for, in one line.
    pub step_intention: String,
    /// The requested step's input text; empty when the model left it out.
    pub text_content: String,
}

/// `{step_intention, text_content}` in `tag`: a step the model asks for (send_message's
/// `<get_more_info>`, process_message's `<react_action>`).
pub fn step_request(tag: &'static str, value: &Value) -> Result<StepRequest, ParseError> {
    let o = Obj::new(tag, At::Whole, value)?;
    Ok(StepRequest {
        step_intention: o.str("step_intention")?,
        text_content: o.text("text_content")?,
    })
}
