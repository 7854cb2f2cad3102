//! Images and audio in a tool's result (MCP `image` and `audio` content): taken out of the
//! result as blobs with their MIME type, each named by the hash of its bytes, and left in the
//! result as a reference (`{"type": "image", "mimeType", "blob", "bytes"}`). The step keeps the
//! small reference, the team's blob store the bytes (bounded); a prompt shows the reference (a
//! description, never kilobytes of base64), and a model that takes images is sent them.

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The most bytes one image or sound may have to be kept; a larger one is described only.
pub const MOST_BLOB_BYTES: usize = 4 << 20;

/// A blob's name: the SHA-256 of its bytes, in hex.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BlobId(String);

impl BlobId {
    /// The id of these bytes.
    pub fn of(bytes: &[u8]) -> BlobId {
        let digest = Sha256::digest(bytes);
        BlobId(digest.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// An id as a person or a URL gives it: 64 hex digits, or none.
    pub fn parse(text: &str) -> Option<BlobId> {
        (text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| BlobId(text.to_ascii_lowercase()))
    }

    /// The id as 64 hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for BlobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An image or a sound taken out of a result.
#[derive(Clone, Debug, PartialEq)]
pub struct Blob {
    /// The hash of its bytes.
    pub id: BlobId,
    /// What it is (`image/png`, `audio/wav`, …), as the tool said.
    pub mime: String,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// A reference to a blob, as a result keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaRef {
    /// The blob it refers to.
    pub blob: BlobId,
    /// What it is, as the tool said.
    #[serde(rename = "mimeType")]
    pub mime: String,
    /// How many bytes it has.
    pub bytes: usize,
}

impl MediaRef {
    /// Whether a model that takes images can be sent it.
    pub fn is_image(&self) -> bool {
        self.mime.starts_with("image/")
    }
}

/// Takes the images and sounds out of `result`'s `content` (and out of a tool loop's list of
/// results), leaving references: the blobs to keep. One that is not valid base64, or is over
/// [`MOST_BLOB_BYTES`], is left as a note of what it was.
pub fn take_media(result: &mut Value) -> Vec<Blob> {
    let mut taken = Vec::new();
    let Some(content) = result.get_mut("content").and_then(Value::as_array_mut) else {
        return taken;
    };
    for block in content.iter_mut() {
        let kind = block["type"].as_str().unwrap_or_default();
        if !matches!(kind, "image" | "audio") {
            continue;
        }
        let mime = block["mimeType"]
            .as_str()
            .unwrap_or("application/octet-stream")
            .to_owned();
        let data = block["data"].as_str().unwrap_or_default();
        let decoded = base64::engine::general_purpose::STANDARD.decode(data.trim());
        *block = match decoded {
            Ok(bytes) if bytes.len() <= MOST_BLOB_BYTES => {
                let r = MediaRef {
                    blob: BlobId::of(&bytes),
                    mime: mime.clone(),
                    bytes: bytes.len(),
                };
                let reference =
                    json!({"type": kind, "mimeType": r.mime, "blob": r.blob, "bytes": r.bytes});
                taken.push(Blob {
                    id: r.blob,
                    mime,
                    bytes,
                });
                reference
            }
            Ok(bytes) => json!({"type": kind, "mimeType": mime, "bytes": bytes.len(),
                "omitted": format!("over {MOST_BLOB_BYTES} bytes: not kept")}),
            Err(e) => json!({"type": kind, "mimeType": mime,
                "omitted": format!("its data is not base64: {e}")}),
        };
    }
    taken
}

/// How a result's image or sound is told of in words (`[image: image/png, 1234 bytes]`); none
/// for another kind of content.
pub fn told(block: &Value) -> Option<String> {
    let kind = block["type"]
        .as_str()
        .filter(|k| matches!(*k, "image" | "audio"))?;
    let mime = block["mimeType"].as_str().unwrap_or("of an unknown type");
    Some(match block["bytes"].as_u64() {
        Some(n) => format!("[{kind}: {mime}, {n} bytes]"),
        None => format!("[{kind}: {mime}]"),
    })
}

/// How deep [`media_in`] looks into a result for references.
const MEDIA_DEPTH: usize = 6;

/// The media references anywhere in `values` (a step's output: a tool's result, or a tool
/// loop's calls), in the order they appear; a reference is an object with `type` image or
/// audio and a `blob` (what [`take_media`] leaves).
pub fn media_in<'a>(values: impl IntoIterator<Item = &'a Value>) -> Vec<MediaRef> {
    fn walk(v: &Value, depth: usize, found: &mut Vec<MediaRef>) {
        match v {
            Value::Object(o) if o.contains_key("blob") => {
                if matches!(
                    o.get("type").and_then(Value::as_str),
                    Some("image" | "audio")
                ) && let Ok(r) = serde_json::from_value(v.clone())
                {
                    found.push(r);
                }
            }
            Value::Object(o) if depth > 0 => o.values().for_each(|v| walk(v, depth - 1, found)),
            Value::Array(a) if depth > 0 => a.iter().for_each(|v| walk(v, depth - 1, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    for v in values {
        walk(v, MEDIA_DEPTH, &mut found);
    }
    found
}

/// A blob as a model that takes images is sent it: a `data:` URL.
pub fn data_url(mime: &str, bytes: &[u8]) -> String {
    let data = base64::engine::general_purpose::STANDARD.encode(bytes);
    format!("data:{mime};base64,{data}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_and_sounds_leave_a_result_as_references_to_their_blobs() {
        let png = [0x89, b'P', b'N', b'G', 1, 2, 3];
        let data = base64::engine::general_purpose::STANDARD.encode(png);
        let mut result = json!({"content": [
            {"type": "text", "text": "here"},
            {"type": "image", "mimeType": "image/png", "data": data},
            {"type": "audio", "mimeType": "audio/wav", "data": "not base64!"},
        ]});
        let blobs = take_media(&mut result);
        assert_eq!(blobs.len(), 1);
        assert_eq!(blobs[0].bytes, png);
        assert_eq!(blobs[0].id, BlobId::of(&png));
        assert_eq!(result["content"][0]["text"], "here");
        assert_eq!(result["content"][1]["blob"], blobs[0].id.as_str());
        assert_eq!(result["content"][1]["bytes"], 7);
        assert!(result["content"][1].get("data").is_none(), "no base64 left");
        assert_eq!(
            told(&result["content"][1]).unwrap(),
            "[image: image/png, 7 bytes]"
        );
        assert_eq!(told(&result["content"][0]), None);
        assert!(
            result["content"][2]["omitted"]
                .as_str()
                .unwrap()
                .contains("not base64")
        );
        let refs = media_in([&result]);
        assert_eq!(refs.len(), 1);
        let nested = json!({"calls": [{"result": result.clone()}]});
        assert_eq!(
            media_in([&nested]),
            refs,
            "found wherever a step keeps the result"
        );
        assert!(refs[0].is_image());
        assert!(data_url("image/png", &png).starts_with("data:image/png;base64,iVBORw"));
        assert_eq!(
            BlobId::parse(blobs[0].id.as_str()),
            Some(blobs[0].id.clone())
        );
        assert_eq!(BlobId::parse("../etc"), None);
    }
}
