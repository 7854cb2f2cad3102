//! The files people attached to goals and answers, as the `workspace` server reads them: from
//! the team's store (the runtime names it to the builtin server it starts, in
//! [`STORE_VAR`]), through a [`Shelf`] the binary opens on it, so this crate needs no database.
//! `read_attachment` gives a text file as text and an image as an image; with `save_as` it
//! also copies the file into the workspace, where the other tools reach it.

use cohort_core::attachment::{self, AttachmentId};
use rmcp::model::{CallToolResult, ContentBlock as Content};
use schemars::JsonSchema;
use serde::Deserialize;
use std::future::Future;
use std::pin::Pin;

pub use cohort_core::attachment::STORE_VAR;

/// The most text one read returns (a longer file is cut there, saying so).
pub const MOST_TEXT_BYTES: usize = 256 * 1024;

/// A file as the store keeps it.
#[derive(Clone, Debug)]
pub struct Kept {
    pub name: String,
    pub mime: String,
    pub bytes: Vec<u8>,
}

/// Where attached files are read from.
pub trait Shelf: Send + Sync + std::fmt::Debug {
    /// The file `id`, if it is kept; an error says why the store could not be read.
    fn read<'a>(
        &'a self,
        id: &'a AttachmentId,
    ) -> Pin<Box<dyn Future<Output = Result<Option<Kept>, String>> + Send + 'a>>;
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// The file's id, as the message or the task lists it (`att-` and 24 hex digits).
    pub id: String,
    /// Also save the file in the workspace at this path (relative to the root), e.g.
    /// `inputs/data.csv`; needed for a PDF, which is not returned as text.
    #[serde(default)]
    pub save_as: Option<String>,
}

/// The file `id` from `shelf`, or why it cannot be read.
pub async fn fetch(shelf: &dyn Shelf, id: &str) -> Result<Kept, String> {
    let wanted = AttachmentId::parse(id).ok_or_else(|| {
        format!("`{id}` is not an attachment id: copy it as the message lists it (`att-` and 24 hex digits)")
    })?;
    shelf
        .read(&wanted)
        .await
        .map_err(|e| format!("the team's store could not be read: {e}"))?
        .ok_or_else(|| format!("no attached file `{id}` is kept (any more)"))
}

/// What `read_attachment` returns for `file` (`saved`: where it was saved in the workspace).
pub fn result(file: &Kept, saved: Option<&str>) -> CallToolResult {
    use base64::Engine;
    let mut head = format!(
        "`{}` ({}, {})",
        file.name,
        file.mime,
        attachment::show_size(file.bytes.len() as u64)
    );
    if let Some(path) = saved {
        head.push_str(&format!(", saved in the workspace as `{path}`"));
    }
    let content = if attachment::is_text(&file.mime) {
        let text = String::from_utf8_lossy(&file.bytes);
        let cut = text.len() > MOST_TEXT_BYTES;
        let mut end = MOST_TEXT_BYTES.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let more = if cut {
            "\n… (cut here: the file is longer; save it with `save_as` and search it)"
        } else {
            ""
        };
        vec![Content::text(format!("{head}:\n\n{}{more}", &text[..end]))]
    } else if file.mime.starts_with("image/") {
        let data = base64::engine::general_purpose::STANDARD.encode(&file.bytes);
        vec![
            Content::text(format!("{head}: the image follows")),
            Content::image(data, file.mime.clone()),
        ]
    } else {
        let hint = if saved.is_some() {
            ""
        } else {
            " Its content is not text: give `save_as` to put it in the workspace for a tool that reads it."
        };
        vec![Content::text(format!("{head}.{hint}"))]
    };
    CallToolResult::success(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct One(Option<Kept>);

    impl Shelf for One {
        fn read<'a>(
            &'a self,
            _id: &'a AttachmentId,
        ) -> Pin<Box<dyn Future<Output = Result<Option<Kept>, String>> + Send + 'a>> {
            let found = self.0.clone();
            Box::pin(async move { Ok(found) })
        }
    }

    fn text_of(r: &CallToolResult) -> String {
        r.content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect()
    }

    #[tokio::test]
    async fn a_text_file_reads_as_text_and_an_unknown_id_says_so() {
        let csv = Kept {
            name: "data.csv".into(),
            mime: "text/csv".into(),
            bytes: b"a,b\n1,2\n".to_vec(),
        };
        let shelf = One(Some(csv));
        let id = AttachmentId::of("data.csv", b"a,b\n1,2\n");
        let file = fetch(&shelf, id.as_str()).await.unwrap();
        let text = text_of(&result(&file, None));
        assert!(
            text.contains("`data.csv` (text/csv, 8 B)") && text.contains("1,2"),
            "{text}"
        );
        let e = fetch(&shelf, "data.csv").await.unwrap_err();
        assert!(e.contains("not an attachment id"), "{e}");
        let e = fetch(&One(None), id.as_str()).await.unwrap_err();
        assert!(e.contains("no attached file"), "{e}");
    }

    #[test]
    fn an_image_is_returned_as_an_image_and_a_pdf_asks_to_be_saved() {
        let png = Kept {
            name: "p.png".into(),
            mime: "image/png".into(),
            bytes: b"\x89PNG\r\n\x1a\nxx".to_vec(),
        };
        let r = result(&png, None);
        assert!(r.content.iter().any(|c| c.as_image().is_some()));
        let pdf = Kept {
            name: "r.pdf".into(),
            mime: "application/pdf".into(),
            bytes: b"%PDF-1.7".to_vec(),
        };
        assert!(text_of(&result(&pdf, None)).contains("save_as"));
        assert!(
            text_of(&result(&pdf, Some("in/r.pdf")))
                .contains("saved in the workspace as `in/r.pdf`")
        );
    }

    #[test]
    fn a_long_text_is_cut_saying_so() {
        let long = Kept {
            name: "l.txt".into(),
            mime: "text/plain".into(),
            bytes: "é".repeat(MOST_TEXT_BYTES).into_bytes(),
        };
        let text = text_of(&result(&long, None));
        assert!(text.len() < MOST_TEXT_BYTES + 300 && text.contains("cut here"));
    }
}
