//! The trace context a message carries, as W3C Trace Context writes it (`traceparent:
//! 00-{trace id}-{span id}-01`): the trace a sender's step is in and that step's span, so the
//! step the message causes joins the same trace (and links to the sender's span) on whatever
//! node it runs. Stored in a message and a step as that text.

use super::trace::{SpanId, TraceId};
use crate::state::StepState;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A span in a trace: where a message came from, as a `traceparent` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TraceParent {
    /// The trace the sender's step is in.
    pub trace: TraceId,
    /// The sender step's span.
    pub span: SpanId,
}

/// Why a text is not a `traceparent` Cohort can follow.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TraceContextError {
    /// Not four `-`-separated fields of 2, 32, 16 and 2 hex digits.
    #[error("a traceparent is `00-<32 hex>-<16 hex>-<2 hex>`, not `{0}`")]
    Shape(String),
    /// Version `ff` is forbidden by W3C Trace Context.
    #[error("traceparent version ff is invalid")]
    Version,
    /// An all-zero trace or span id, which W3C Trace Context forbids.
    #[error("a traceparent's trace and span ids must not be all zeros")]
    Zero,
}

impl TraceParent {
    /// The context of what `step` sends: its trace and its span (none for a step stored
    /// before steps carried their trace).
    pub fn of_step(step: &StepState) -> Option<TraceParent> {
        step.trace_id.map(|trace| TraceParent {
            trace,
            span: SpanId::of("step", step.step_id.as_str()),
        })
    }
}

fn hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

fn write_hex(bytes: &[u8], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    bytes.iter().try_for_each(|b| write!(f, "{b:02x}"))
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(&self.0, f)
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(&self.0, f)
    }
}

impl FromStr for TraceId {
    type Err = TraceContextError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let id =
            hex::<16>(s).ok_or_else(|| TraceContextError::Shape(s.chars().take(80).collect()))?;
        if id == [0; 16] {
            return Err(TraceContextError::Zero);
        }
        Ok(TraceId(id))
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Version 00, sampled: every span Cohort plans is recorded.
        write!(f, "00-{}-{}-01", self.trace, self.span)
    }
}

impl FromStr for TraceParent {
    type Err = TraceContextError;
    /// Reads a `traceparent` header. A later version's extra fields are ignored, as W3C Trace
    /// Context asks of a reader of version 00.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let shape = || TraceContextError::Shape(s.chars().take(80).collect());
        let mut parts = s.trim().split('-');
        let (Some(version), Some(trace), Some(span), Some(flags)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(shape());
        };
        let version = hex::<1>(version).ok_or_else(shape)?[0];
        if version == 0xff {
            return Err(TraceContextError::Version);
        }
        if hex::<1>(flags).is_none() || (version == 0 && parts.next().is_some()) {
            return Err(shape());
        }
        let trace = TraceId(hex::<16>(trace).ok_or_else(shape)?);
        let span = SpanId(hex::<8>(span).ok_or_else(shape)?);
        if trace.0 == [0; 16] || span.0 == [0; 8] {
            return Err(TraceContextError::Zero);
        }
        Ok(TraceParent { trace, span })
    }
}

impl Serialize for TraceParent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TraceParent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl Serialize for TraceId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TraceId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A trace id where a model may have written anything: what is not one reads as none.
pub fn lenient_trace<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TraceId>, D::Error> {
    let any = serde_json::Value::deserialize(d)?;
    Ok(any.as_str().and_then(|s| s.parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_reads_back_as_written_and_bad_ones_are_refused_with_a_reason() {
        let tp = TraceParent {
            trace: TraceId::of("step", "s1"),
            span: SpanId::of("step", "s1"),
        };
        let text = tp.to_string();
        assert_eq!(text.len(), 55);
        assert!(text.starts_with("00-") && text.ends_with("-01"));
        assert_eq!(text.parse::<TraceParent>(), Ok(tp));
        let json = serde_json::to_string(&tp).unwrap();
        assert_eq!(json, format!("\"{text}\""));
        assert_eq!(serde_json::from_str::<TraceParent>(&json).unwrap(), tp);
        // The W3C spec's own example.
        let w3c: TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            .parse()
            .unwrap();
        assert_eq!(w3c.trace.to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(w3c.span.to_string(), "00f067aa0ba902b7");
        // A later version may add fields; version 00 may not.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra";
        assert_eq!(later.parse::<TraceParent>(), Ok(w3c));
        for bad in [
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bz-01",
            "hello",
        ] {
            assert!(
                matches!(bad.parse::<TraceParent>(), Err(TraceContextError::Shape(_))),
                "{bad}"
            );
        }
        let zero = "00-00000000000000000000000000000000-00f067aa0ba902b7-01";
        assert_eq!(zero.parse::<TraceParent>(), Err(TraceContextError::Zero));
        let zeros = "00000000000000000000000000000000".parse::<TraceId>();
        assert_eq!(zeros, Err(TraceContextError::Zero));
        let ff = "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(ff.parse::<TraceParent>(), Err(TraceContextError::Version));
    }
}
