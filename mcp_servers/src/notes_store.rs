//! The `notes` server's store: keyed text notes kept in memory and persisted to one JSON file
//! after every change, atomically (write a temporary file in the same folder, flush it, rename it
//! over the old one), so a crash leaves either the old notes or the new ones, never half a file.
//!
//! The server owns the file while it runs: it reads it once at start and writes it whole.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::Mutex;

/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 200;
/// Longest note text, in bytes.
pub const MAX_TEXT_BYTES: usize = 256 * 1024;

/// One note.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Note {
    pub text: String,
    /// When it was last set, RFC 3339 (UTC).
    pub updated: String,
}

/// The file's shape; `version` lets a later format be told apart.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NotesFile {
    version: u32,
    notes: BTreeMap<String, Note>,
}

const FORMAT_VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum NotesError {
    #[error("the key is empty")]
    EmptyKey,
    #[error("key `{0}` is not usable: {1}")]
    BadKey(String, &'static str),
    #[error("the note is too long ({0} bytes; at most {MAX_TEXT_BYTES})")]
    TooLong(usize),
    #[error("no note `{0}` (list_notes shows the keys)")]
    Missing(String),
    #[error("cannot read the notes file {}: {message}", path.display())]
    Load { path: PathBuf, message: String },
    #[error("cannot save the notes file {}: {source}", path.display())]
    Save { path: PathBuf, source: io::Error },
}

/// The notes and the file they live in.
#[derive(Debug)]
pub struct NotesStore {
    file: PathBuf,
    /// A tokio mutex: it is held across the save, so saves land in the order of the changes.
    notes: Mutex<BTreeMap<String, Note>>,
}

impl NotesStore {
    /// Reads `file`; a missing or empty file is an empty store. A file that does not parse is
    /// an error rather than a fresh start, so notes are never silently overwritten.
    pub fn open(file: &Path) -> Result<Self, NotesError> {
        let load_err = |message: String| NotesError::Load {
            path: file.to_path_buf(),
            message,
        };
        let notes = match std::fs::read_to_string(file) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(load_err(e.to_string())),
            Ok(text) if text.trim().is_empty() => BTreeMap::new(),
            Ok(text) => {
                let parsed: NotesFile =
                    serde_json::from_str(&text).map_err(|e| load_err(e.to_string()))?;
                if parsed.version != FORMAT_VERSION {
                    return Err(load_err(format!(
                        "format version {} is not {FORMAT_VERSION}",
                        parsed.version
                    )));
                }
                parsed.notes
            }
        };
        Ok(Self {
            file: file.to_path_buf(),
            notes: Mutex::new(notes),
        })
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Sets `key` to `text`; `true` if the note is new.
    pub async fn set(&self, key: &str, text: &str) -> Result<bool, NotesError> {
        check_key(key)?;
        if text.len() > MAX_TEXT_BYTES {
            return Err(NotesError::TooLong(text.len()));
        }
        let mut notes = self.notes.lock().await;
        let mut next = notes.clone();
        let note = Note {
            text: text.to_owned(),
            updated: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        };
        let created = next.insert(key.to_owned(), note).is_none();
        // Saved first, swapped in after: a failed save leaves memory and file in agreement.
        self.save(&next).await?;
        *notes = next;
        Ok(created)
    }

    pub async fn get(&self, key: &str) -> Result<Note, NotesError> {
        check_key(key)?;
        self.notes
            .lock()
            .await
            .get(key)
            .cloned()
            .ok_or_else(|| NotesError::Missing(key.to_owned()))
    }

    /// Notes whose key starts with `prefix` (all if empty), in key order.
    pub async fn list(&self, prefix: &str) -> Vec<(String, Note)> {
        self.notes
            .lock()
            .await
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, n)| (k.clone(), n.clone()))
            .collect()
    }

    pub async fn delete(&self, key: &str) -> Result<Note, NotesError> {
        check_key(key)?;
        let mut notes = self.notes.lock().await;
        let mut next = notes.clone();
        let gone = next
            .remove(key)
            .ok_or_else(|| NotesError::Missing(key.to_owned()))?;
        self.save(&next).await?;
        *notes = next;
        Ok(gone)
    }

    async fn save(&self, notes: &BTreeMap<String, Note>) -> Result<(), NotesError> {
        let body = serde_json::to_string_pretty(&NotesFile {
            version: FORMAT_VERSION,
            notes: notes.clone(),
        })
        .map_err(|e| NotesError::Save {
            path: self.file.clone(),
            source: io::Error::other(e),
        })?;
        let file = self.file.clone();
        tokio::task::spawn_blocking(move || write_atomically(&file, body.as_bytes()))
            .await
            .map_err(io::Error::other)
            .and_then(|r| r)
            .map_err(|source| NotesError::Save {
                path: self.file.clone(),
                source,
            })
    }
}

fn check_key(key: &str) -> Result<(), NotesError> {
    if key.is_empty() {
        return Err(NotesError::EmptyKey);
    }
    let bad = |why| Err(NotesError::BadKey(key.to_owned(), why));
    if key.len() > MAX_KEY_BYTES {
        return bad("longer than 200 bytes");
    }
    if key.chars().any(char::is_control) {
        return bad("it contains control characters");
    }
    if key.trim() != key {
        return bad("it starts or ends with whitespace");
    }
    Ok(())
}

/// Distinguishes temporary files of concurrent saves within one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to a temporary sibling of `file`, flushes it to disk, then renames it over
/// `file` (atomic on one filesystem, which a sibling guarantees).
pub fn write_atomically(file: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let name = file
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let temp = dir.join(format!(
        ".{}.tmp-{}-{n}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut f = std::fs::File::create(&temp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&temp, file)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::test_dir::TestDir;

    /// A notes file in a sub-folder not made yet, in a fresh folder: the folder's guard (it
    /// removes the folder when dropped) and the file.
    fn file(tag: &str) -> (TestDir, PathBuf) {
        let d = TestDir::new(&format!("notes-{tag}"));
        let f = d.join("sub/notes.json");
        (d, f)
    }

    #[tokio::test]
    async fn notes_persist_across_reopen_and_leave_no_temp_files() {
        let (_dir, f) = file("persist");
        let store = NotesStore::open(&f).unwrap();
        assert!(store.set("design/api", "REST first").await.unwrap());
        assert!(!store.set("design/api", "REST, then gRPC").await.unwrap());
        store.set("design/db", "sqlite").await.unwrap();
        store.set("todo", "write tests").await.unwrap();
        store.delete("todo").await.unwrap();

        let again = NotesStore::open(&f).unwrap();
        assert_eq!(
            again.get("design/api").await.unwrap().text,
            "REST, then gRPC"
        );
        assert!(matches!(
            again.get("todo").await,
            Err(NotesError::Missing(_))
        ));
        let keys: Vec<_> = again
            .list("design/")
            .await
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, ["design/api", "design/db"]);
        let leftovers: Vec<_> = std::fs::read_dir(f.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, ["notes.json"]);
    }

    #[tokio::test]
    async fn a_corrupt_file_is_refused_not_overwritten() {
        let (_dir, f) = file("corrupt");
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, "{not json").unwrap();
        assert!(matches!(NotesStore::open(&f), Err(NotesError::Load { .. })));
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "{not json");
    }

    #[tokio::test]
    async fn a_failed_save_changes_nothing() {
        let (_dir, f) = file("failed");
        let store = NotesStore::open(&f).unwrap();
        store.set("a", "1").await.unwrap();
        // The file's place is taken by a folder: the rename fails.
        std::fs::remove_file(&f).unwrap();
        std::fs::create_dir_all(f.join("x")).unwrap();
        assert!(matches!(
            store.set("a", "2").await,
            Err(NotesError::Save { .. })
        ));
        assert_eq!(store.get("a").await.unwrap().text, "1");
    }

    #[tokio::test]
    async fn keys_and_texts_are_checked() {
        let (_dir, f) = file("keys");
        let store = NotesStore::open(&f).unwrap();
        assert!(matches!(
            store.set("", "x").await,
            Err(NotesError::EmptyKey)
        ));
        assert!(matches!(
            store.set(" a", "x").await,
            Err(NotesError::BadKey(..))
        ));
        assert!(matches!(
            store.set("a\nb", "x").await,
            Err(NotesError::BadKey(..))
        ));
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        assert!(matches!(
            store.set(&long, "x").await,
            Err(NotesError::BadKey(..))
        ));
        let big = "x".repeat(MAX_TEXT_BYTES + 1);
        assert!(matches!(
            store.set("a", &big).await,
            Err(NotesError::TooLong(_))
        ));
    }
}
