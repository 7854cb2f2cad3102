//! `cohort run --attach FILE`: the files given with the goal, checked as the REST upload checks
//! them (name, size, type read from the extension, bytes that agree with it) and kept in the
//! run's store, where the bundled workspace server reads them.

use anyhow::Context as _;
use cohort::attachment::{self, Attachment};
use cohort::store::Store;
use std::path::PathBuf;

/// Keeps each of `files` in `store`; the references the goal carries.
pub async fn keep(files: &[PathBuf], store: Option<&dyn Store>) -> anyhow::Result<Vec<Attachment>> {
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let Some(store) = store else {
        anyhow::bail!(
            "--attach keeps the files in the team's store, and this run has none: give --data FILE (or --database URL)"
        );
    };
    if files.len() > attachment::MOST_ATTACHMENTS_PER_MESSAGE {
        anyhow::bail!("{}", attachment::AttachmentError::TooMany(files.len()));
    }
    let mut kept = Vec::new();
    for path in files {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mime = attachment::normalise_mime("", &name);
        let file = attachment::check(&name, &mime, &bytes)
            .with_context(|| format!("{} cannot be attached", path.display()))?;
        store
            .put_attachment(file.clone(), bytes)
            .await
            .with_context(|| format!("keeping {} in the store", path.display()))?;
        kept.push(file);
    }
    Ok(kept)
}
