//! `<persistent_memory>`: the memory instructions any skill's answer may carry (SPEC §2).

use super::fields::{Obj, list_items, tagged_json};
use super::{At, ParseError};
use crate::state::MemoryOp;

/// `<persistent_memory>[{"add": "text"}, {"delete": "20250613T103022"}]`. Optional: no tag, an
/// empty tag or `null` means no change. An entry holding both keys yields both operations.
pub fn persistent_memory(text: &str) -> Result<Vec<MemoryOp>, ParseError> {
    const TAG: &str = "persistent_memory";
    let value = match tagged_json(text, TAG) {
        Err(ParseError::MissingTag { .. } | ParseError::EmptyTag { .. }) => return Ok(Vec::new()),
        other => other?,
    };
    let mut ops = Vec::new();
    for (i, item) in list_items(TAG, value)?.iter().enumerate() {
        let o = Obj::new(TAG, At::Item(i + 1), item)?;
        let add = o.opt_str("add")?;
        let delete = o.opt_str("delete")?;
        if add.is_none() && delete.is_none() {
            return Err(o.missing("add` or `delete"));
        }
        ops.extend(add.map(MemoryOp::Add));
        ops.extend(delete.map(MemoryOp::Delete));
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_ops_are_read() {
        let text = "Answer.\n<persistent_memory>[{\"add\": \"### 偏好\\nlikes tea\"}, {\"delete\": \"20250613T103022\"},]</persistent_memory>";
        assert_eq!(
            persistent_memory(text).unwrap(),
            vec![
                MemoryOp::Add("### 偏好\nlikes tea".into()),
                MemoryOp::Delete("20250613T103022".into())
            ]
        );
        assert_eq!(
            persistent_memory("<persistent_memory>{'add': 'one'}</persistent_memory>").unwrap(),
            vec![MemoryOp::Add("one".into())]
        );
    }

    #[test]
    fn absent_or_empty_memory_means_no_change() {
        assert_eq!(persistent_memory("no memory here").unwrap(), vec![]);
        assert_eq!(
            persistent_memory("<persistent_memory></persistent_memory>").unwrap(),
            vec![]
        );
        assert_eq!(
            persistent_memory("<persistent_memory>[]</persistent_memory>").unwrap(),
            vec![]
        );
        assert_eq!(
            persistent_memory("<persistent_memory>null</persistent_memory>").unwrap(),
            vec![]
        );
    }

    #[test]
    fn broken_memory_says_what_is_wrong() {
        let err = |t: &str| persistent_memory(t).unwrap_err().to_string();
        assert_eq!(
            err("<persistent_memory>[{\"remember\": \"x\"}]</persistent_memory>"),
            "<persistent_memory> item 1 field `add` or `delete` is missing"
        );
        assert_eq!(
            err("<persistent_memory>[{\"add\": 5}]</persistent_memory>"),
            "<persistent_memory> item 1 field `add` should be a string, found a number"
        );
        assert!(
            err("<persistent_memory>[{\"add\": </persistent_memory>")
                .starts_with("<persistent_memory> is not valid JSON")
        );
    }
}
