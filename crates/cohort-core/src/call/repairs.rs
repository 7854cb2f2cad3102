//! The call's repairs on a reply, before its skill reads it: an answer the provider stopped in
//! a loop (`loop_cut`, found by [`super::repetition`]) is recorded, and a constrained one stopped
//! inside its JSON is closed where it stopped (`closed_json`).

use super::ChatReply;
use crate::policy::{Fired, Repair, Repairs};
use crate::texts::Texts;

/// The repairs a reply gets before its skill reads it: an answer the provider stopped in a
/// loop is recorded (`loop_cut`), and a constrained one stopped inside its JSON is closed where
/// it stopped (`closed_json`), rather than asked again into the same loop.
pub fn mend_reply(repairs: &Repairs, reply: &mut ChatReply, fired: &mut Vec<Fired>, t: &Texts) {
    if reply.cut != Some(super::Cut::Repetition) {
        return;
    }
    fired.push(Fired::new(Repair::LoopCut, t.repair_loop_cut()));
    if !repairs.allows(Repair::ClosedJson) {
        return;
    }
    if let Some(tagged) = crate::parse::closed_object(&reply.text)
        .and_then(|closed| super::structured::tagged_answer(&closed))
    {
        reply.text = tagged;
        fired.push(Fired::new(Repair::ClosedJson, t.repair_closed_json()));
    }
}
