//! Files a person attaches to a goal or an answer (seeds 001 §1, 003 §2.1, 004 V1 §5): checked
//! here (name, size, type, and bytes that agree with the type), kept in the team's store under
//! an id made from their name and bytes, carried on the message by reference, listed on the
//! task, and read by agents through the bundled workspace server's `read_attachment` tool.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The most bytes one attached file may have.
pub const MOST_ATTACHMENT_BYTES: usize = 4 << 20;
/// The most files one message may carry.
pub const MOST_ATTACHMENTS_PER_MESSAGE: usize = 8;
/// The most files a task lists (the first ones attached; later ones stay on their messages).
pub const MOST_ATTACHMENTS_PER_TASK: usize = 32;
/// The longest file name, in bytes.
pub const MOST_NAME_BYTES: usize = 120;
/// The tool of the bundled workspace server that reads an attached file.
pub const READ_TOOL: &str = "read_attachment";
/// The variable in which the runtime gives the builtin servers it starts the team's store
/// (a path or a URL), which the workspace server reads attached files from.
pub const STORE_VAR: &str = "COHORT_ATTACHMENTS_STORE";

/// An attachment's id: `att-` and 24 hex digits of the SHA-256 of its name and bytes, so the
/// same file attached twice is one attachment.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct AttachmentId(String);

impl AttachmentId {
    /// The id of the file `name` with these bytes.
    pub fn of(name: &str, bytes: &[u8]) -> AttachmentId {
        let mut hash = Sha256::new();
        hash.update(name.as_bytes());
        hash.update([0]);
        hash.update(bytes);
        let hex: String = hash.finalize()[..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        AttachmentId(format!("att-{hex}"))
    }

    /// An id as a person or a URL gives it; none when it cannot be one.
    pub fn parse(text: &str) -> Option<AttachmentId> {
        let hex = text.strip_prefix("att-")?;
        (hex.len() == 24 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| AttachmentId(format!("att-{}", hex.to_ascii_lowercase())))
    }

    /// The id as its wire string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for AttachmentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An attached file as a message and a task refer to it (its bytes are in the store).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// Its id in the store.
    pub id: AttachmentId,
    /// The file's name as the person gave it (no folders).
    pub name: String,
    /// Its type (`text/csv`, `image/png`, …), checked against its bytes.
    pub mime: String,
    /// Its size.
    pub bytes: u64,
}

/// Why a file was not taken. Its text ([`AttachmentError::render`], in the team's language)
/// is what the REST API answers.
#[derive(Debug, PartialEq)]
#[allow(missing_docs)]
pub enum AttachmentError {
    Empty,
    TooLarge {
        bytes: usize,
    },
    BadName(String),
    TypeNotTaken {
        mime: String,
    },
    /// `why` is the check's own words (in English).
    NotItsType {
        mime: String,
        why: &'static str,
    },
    TooMany(usize),
}

impl AttachmentError {
    /// Why, in the language of `t`.
    pub fn render(&self, t: &crate::texts::Texts) -> String {
        use AttachmentError as E;
        match self {
            E::Empty => t.attachment_empty(),
            E::TooLarge { bytes } => t.attachment_too_large(bytes, MOST_ATTACHMENT_BYTES),
            E::BadName(name) => t.attachment_bad_name(name, MOST_NAME_BYTES),
            E::TypeNotTaken { mime } => {
                let taken = TAKEN.iter().map(|t| t.mime).collect::<Vec<_>>().join(", ");
                t.attachment_type_not_taken(mime, taken)
            }
            E::NotItsType { mime, why } => t.attachment_not_its_type(mime, why),
            E::TooMany(count) => t.attachment_too_many(MOST_ATTACHMENTS_PER_MESSAGE, count),
        }
    }
}

/// In English, as logs show it.
impl std::fmt::Display for AttachmentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(&crate::texts::Texts::english()))
    }
}

impl std::error::Error for AttachmentError {}

/// How a type's bytes are checked.
#[derive(Clone, Copy)]
enum Content {
    /// UTF-8 text without NUL bytes.
    Text,
    /// Bytes that begin with this signature.
    Magic(&'static [u8]),
    /// A RIFF container of this format (`WEBP`).
    Riff(&'static [u8]),
}

struct Taken {
    mime: &'static str,
    content: Content,
}

/// The types a person may attach: text an agent can read, and the images and documents a
/// model or a tool can take. Anything a browser would run (HTML, SVG, scripts) is refused.
const TAKEN: &[Taken] = &[
    Taken {
        mime: "text/plain",
        content: Content::Text,
    },
    Taken {
        mime: "text/markdown",
        content: Content::Text,
    },
    Taken {
        mime: "text/csv",
        content: Content::Text,
    },
    Taken {
        mime: "text/tab-separated-values",
        content: Content::Text,
    },
    Taken {
        mime: "application/json",
        content: Content::Text,
    },
    Taken {
        mime: "application/yaml",
        content: Content::Text,
    },
    Taken {
        mime: "application/pdf",
        content: Content::Magic(b"%PDF-"),
    },
    Taken {
        mime: "image/png",
        content: Content::Magic(b"\x89PNG\r\n\x1a\n"),
    },
    Taken {
        mime: "image/jpeg",
        content: Content::Magic(b"\xff\xd8\xff"),
    },
    Taken {
        mime: "image/gif",
        content: Content::Magic(b"GIF8"),
    },
    Taken {
        mime: "image/webp",
        content: Content::Riff(b"WEBP"),
    },
];

/// The type a browser or a client names, as taken here: parameters dropped, lower case, and
/// the usual aliases (`text/x-markdown`, `text/yaml`, …) and a generic type guessed from the
/// name's extension (a browser sends `application/octet-stream` or nothing for `.md`).
pub fn normalise_mime(given: &str, name: &str) -> String {
    let base = given
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let generic = base.is_empty() || base == "application/octet-stream";
    let guessed = if generic { by_extension(name) } else { None };
    let mime = guessed.map_or(base, str::to_owned);
    match mime.as_str() {
        "text/x-markdown" => "text/markdown".into(),
        "text/yaml" | "text/x-yaml" | "application/x-yaml" => "application/yaml".into(),
        "text/json" => "application/json".into(),
        "image/jpg" => "image/jpeg".into(),
        _ => mime,
    }
}

fn by_extension(name: &str) -> Option<&'static str> {
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        _ => return None,
    })
}

/// Checks a file a person attaches (`mime` as [`normalise_mime`] gives it) and names it.
pub fn check(name: &str, mime: &str, bytes: &[u8]) -> Result<Attachment, AttachmentError> {
    let bad_name = name.is_empty()
        || name.len() > MOST_NAME_BYTES
        || name == "."
        || name == ".."
        || name
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_control());
    if bad_name {
        return Err(AttachmentError::BadName(name.chars().take(200).collect()));
    }
    if bytes.is_empty() {
        return Err(AttachmentError::Empty);
    }
    if bytes.len() > MOST_ATTACHMENT_BYTES {
        return Err(AttachmentError::TooLarge { bytes: bytes.len() });
    }
    let taken = TAKEN
        .iter()
        .find(|t| t.mime == mime)
        .ok_or_else(|| AttachmentError::TypeNotTaken { mime: mime.into() })?;
    let not_it = |why| AttachmentError::NotItsType {
        mime: mime.into(),
        why,
    };
    match taken.content {
        Content::Text if std::str::from_utf8(bytes).is_err() => {
            return Err(not_it("it is not UTF-8 text"));
        }
        Content::Text if bytes.contains(&0) => return Err(not_it("it holds NUL bytes")),
        Content::Magic(sig) if !bytes.starts_with(sig) => {
            return Err(not_it("its first bytes are not that type's signature"));
        }
        Content::Riff(format)
            if !(bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(format)) =>
        {
            return Err(not_it("its first bytes are not that type's signature"));
        }
        _ => {}
    }
    Ok(Attachment {
        id: AttachmentId::of(name, bytes),
        name: name.to_owned(),
        mime: mime.to_owned(),
        bytes: bytes.len() as u64,
    })
}

/// Whether an attachment of this type reads as text (else the tool returns it as an image or
/// describes it).
pub fn is_text(mime: &str) -> bool {
    TAKEN
        .iter()
        .any(|t| t.mime == mime && matches!(t.content, Content::Text))
}

/// A size for people: `812 B`, `4.2 kB`, `1.3 MB`.
pub fn show_size(bytes: u64) -> String {
    match bytes {
        b if b < 1000 => format!("{b} B"),
        b if b < 1_000_000 => format!("{:.1} kB", b as f64 / 1e3),
        b => format!("{:.1} MB", b as f64 / 1e6),
    }
}

/// The lines a prompt shows for `files` below `heading` (which says how to read one; empty
/// when there are none): each file's name, type, size and id.
pub fn render(heading: &str, files: &[Attachment], t: &crate::texts::Texts) -> String {
    if files.is_empty() {
        return String::new();
    }
    let mut out = format!("\n\n{heading}");
    for f in files {
        out.push('\n');
        out.push_str(&t.attachment_line(&f.name, &f.mime, show_size(f.bytes), &f.id));
    }
    out
}

/// Adds `more` to a task's list, each once, up to [`MOST_ATTACHMENTS_PER_TASK`].
pub fn list_on_task(list: &mut Vec<Attachment>, more: &[Attachment]) {
    for a in more {
        if list.len() >= MOST_ATTACHMENTS_PER_TASK {
            return;
        }
        if !list.iter().any(|b| b.id == a.id) {
            list.push(a.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_file_is_taken_and_named_by_its_name_and_bytes() {
        let a = check("data.csv", "text/csv", b"a,b\n1,2\n").unwrap();
        assert_eq!(a.bytes, 8);
        assert_eq!(a.id, AttachmentId::of("data.csv", b"a,b\n1,2\n"));
        assert_ne!(a.id, AttachmentId::of("other.csv", b"a,b\n1,2\n"));
        assert_eq!(AttachmentId::parse(a.id.as_str()), Some(a.id.clone()));
        assert_eq!(AttachmentId::parse("att-xyz"), None);
        assert_eq!(AttachmentId::parse("../etc/passwd"), None);
    }

    #[test]
    fn a_file_whose_bytes_are_not_its_type_is_refused() {
        let e = check("x.png", "image/png", b"not a png").unwrap_err();
        assert!(matches!(e, AttachmentError::NotItsType { .. }), "{e}");
        let e = check("x.txt", "text/plain", &[0xff, 0xfe, 0x00]).unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
        assert!(check("x.png", "image/png", b"\x89PNG\r\n\x1a\n....").is_ok());
        assert!(check("x.webp", "image/webp", b"RIFF\0\0\0\0WEBPVP8 ").is_ok());
        assert!(check("x.webp", "image/webp", b"RIFF\0\0\0\0WAVEfmt ").is_err());
    }

    #[test]
    fn a_type_a_browser_would_run_is_not_taken_and_the_error_lists_the_taken() {
        let e = check("x.html", "text/html", b"<script>").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("text/html") && text.contains("text/csv"),
            "{text}"
        );
        assert!(check("x.svg", "image/svg+xml", b"<svg/>").is_err());
    }

    #[test]
    fn names_sizes_and_emptiness_are_checked() {
        for name in ["", "a/b.txt", "..", "a\\b", "a\nb", &"x".repeat(121)] {
            assert!(
                matches!(
                    check(name, "text/plain", b"hi"),
                    Err(AttachmentError::BadName(_))
                ),
                "{name:?}"
            );
        }
        assert_eq!(
            check("a.txt", "text/plain", b""),
            Err(AttachmentError::Empty)
        );
        let big = vec![b'a'; MOST_ATTACHMENT_BYTES + 1];
        assert!(matches!(
            check("a.txt", "text/plain", &big),
            Err(AttachmentError::TooLarge { .. })
        ));
    }

    #[test]
    fn a_browsers_type_is_normalised_and_a_generic_one_guessed_from_the_name() {
        assert_eq!(
            normalise_mime("text/plain; charset=utf-8", "a.txt"),
            "text/plain"
        );
        assert_eq!(normalise_mime("", "notes.MD"), "text/markdown");
        assert_eq!(
            normalise_mime("application/octet-stream", "a.yml"),
            "application/yaml"
        );
        assert_eq!(
            normalise_mime("application/octet-stream", "a.bin"),
            "application/octet-stream"
        );
        assert_eq!(normalise_mime("image/jpg", "a.jpg"), "image/jpeg");
    }

    #[test]
    fn a_prompt_lists_each_file_with_its_id_and_the_tool_that_reads_it() {
        use crate::texts::{Language, Texts};
        let a = check("data.csv", "text/csv", b"a,b\n").unwrap();
        for lang in Language::ALL {
            let t = Texts::builtin(lang);
            let heading = t.attached_to_message(READ_TOOL);
            let text = render(&heading, std::slice::from_ref(&a), &t);
            assert!(
                text.contains("`data.csv`") && text.contains("4 B"),
                "{text}"
            );
            assert!(
                text.contains(a.id.as_str()) && text.contains(READ_TOOL),
                "{text}"
            );
            assert_eq!(render(&heading, &[], &t), "");
        }
        let en = render(
            "Files",
            std::slice::from_ref(&a),
            &Texts::builtin(Language::En),
        );
        assert!(en.contains("`data.csv` (text/csv, 4 B)"), "{en}");
        assert_eq!(show_size(4_200), "4.2 kB");
    }

    #[test]
    fn a_task_lists_each_file_once_up_to_its_cap() {
        let files: Vec<Attachment> = (0..40)
            .map(|i| check(&format!("{i}.txt"), "text/plain", b"x").unwrap())
            .collect();
        let mut list = Vec::new();
        list_on_task(&mut list, &files[..2]);
        list_on_task(&mut list, &files[..2]);
        assert_eq!(list.len(), 2);
        list_on_task(&mut list, &files);
        assert_eq!(list.len(), MOST_ATTACHMENTS_PER_TASK);
    }
}
