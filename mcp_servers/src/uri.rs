//! Resource URIs of the bundled servers: `SCHEME:///percent-encoded-name`, e.g.
//! `workspace:///docs/plan%20v2.md` or `notes:///design/api`. Names are encoded byte-wise so any
//! file name or note key round-trips; `/` stays readable.

use std::fmt::Write;

/// Why a URI was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum UriError {
    #[error("`{uri}` is not a {scheme}:/// URI (expected e.g. `{scheme}:///{example}`)")]
    Scheme {
        uri: String,
        scheme: &'static str,
        example: &'static str,
    },
    #[error("`{0}` has a query or fragment; encode `?` and `#` in names as %3F and %23")]
    QueryOrFragment(String),
    #[error("`{0}` has a malformed percent escape or does not decode to UTF-8 text")]
    BadEscape(String),
}

/// `SCHEME:///name`, with every byte outside the unreserved set and `/` percent-encoded.
pub fn encode(scheme: &str, name: &str) -> String {
    let mut out = format!("{scheme}:///");
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The decoded name in `uri`. Only the exact `SCHEME:///` form is accepted (no host, no
/// `file://`), so one resource has one URI. The name is *not* checked here: the caller applies
/// the same rules as to a plain path, after decoding, so `%2E%2E/` is refused like `../`.
pub fn decode(uri: &str, scheme: &'static str, example: &'static str) -> Result<String, UriError> {
    let rest = uri
        .strip_prefix(scheme)
        .and_then(|r| r.strip_prefix(":///"))
        .ok_or_else(|| UriError::Scheme {
            uri: uri.to_owned(),
            scheme,
            example,
        })?;
    if rest.contains(['?', '#']) {
        return Err(UriError::QueryOrFragment(uri.to_owned()));
    }
    let bad = || UriError::BadEscape(uri.to_owned());
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or_else(bad)?;
            // `from_str_radix` alone would accept a sign (`%+1`).
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return Err(bad());
            }
            let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_uris() {
        for name in ["a/b.txt", "plan v2 (final)?.md", "ü/%/#", ""] {
            let uri = encode("workspace", name);
            assert_eq!(decode(&uri, "workspace", "a").unwrap(), name, "{uri}");
        }
        assert_eq!(encode("notes", "a b/c"), "notes:///a%20b/c");
    }

    #[test]
    fn other_forms_are_refused() {
        let d = |u: &str| decode(u, "workspace", "a.txt");
        assert!(matches!(
            d("file:///etc/passwd"),
            Err(UriError::Scheme { .. })
        ));
        assert!(matches!(
            d("workspace://host/a"),
            Err(UriError::Scheme { .. })
        ));
        assert!(matches!(d("workspace:/a"), Err(UriError::Scheme { .. })));
        assert!(matches!(
            d("workspace:///a?x=1"),
            Err(UriError::QueryOrFragment(_))
        ));
        assert!(matches!(d("workspace:///a%2"), Err(UriError::BadEscape(_))));
        assert!(matches!(
            d("workspace:///a%zz"),
            Err(UriError::BadEscape(_))
        ));
        assert!(matches!(
            d("workspace:///a%+1"),
            Err(UriError::BadEscape(_))
        ));
        assert!(matches!(d("workspace:///%FF"), Err(UriError::BadEscape(_))));
        // Decoding is all this does; the path rules refuse what it decodes to.
        assert_eq!(d("workspace:///%2E%2E/x").unwrap(), "../x");
        assert_eq!(d("workspace:////etc/passwd").unwrap(), "/etc/passwd");
    }
}
