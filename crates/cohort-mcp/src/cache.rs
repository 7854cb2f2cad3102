//! Results of a server's read-only tools, kept for the same call made again within the
//! server's `cache_secs` (seed 003 §6.1): a read whose answer cannot have been changed by the
//! call itself need not reach the server twice. Off unless a server's file sets it; bounded by
//! entries and bytes (the oldest leave first); a result that was an error is never kept.

use serde_json::{Map, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Calls kept at most, per server.
pub const ENTRIES: usize = 256;
/// Bytes of results kept at most, per server.
pub const BYTES: usize = 8 << 20;

/// One server's cache.
pub(crate) struct ResultCache {
    ttl: Duration,
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    by_call: HashMap<String, Entry>,
    /// Calls in the order they were kept (the oldest first).
    order: VecDeque<String>,
    bytes: usize,
}

struct Entry {
    at: Instant,
    result: Value,
    bytes: usize,
}

/// A call as the cache knows it: the tool and its arguments in one canonical form (the
/// arguments' keys are sorted: serde_json's map is ordered).
fn key(tool: &str, arguments: &Map<String, Value>) -> String {
    format!("{tool}\u{0}{}", Value::Object(arguments.clone()))
}

impl ResultCache {
    pub(crate) fn new(ttl: Duration) -> ResultCache {
        ResultCache {
            ttl,
            kept: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The result of the same call made less than the TTL ago, and how long ago.
    pub(crate) fn get(
        &self,
        tool: &str,
        arguments: &Map<String, Value>,
    ) -> Option<(Value, Duration)> {
        let k = key(tool, arguments);
        let mut kept = self.lock();
        let entry = kept.by_call.get(&k)?;
        let age = entry.at.elapsed();
        if age < self.ttl {
            return Some((entry.result.clone(), age));
        }
        let stale = kept.by_call.remove(&k).map_or(0, |e| e.bytes);
        kept.bytes -= stale;
        kept.order.retain(|o| o != &k);
        None
    }

    /// Keeps `result` for the call; the oldest calls leave while the cache is over its bounds.
    pub(crate) fn put(&self, tool: &str, arguments: &Map<String, Value>, result: &Value) {
        let k = key(tool, arguments);
        let bytes = k.len() + result.to_string().len();
        if bytes > BYTES {
            return;
        }
        let mut kept = self.lock();
        let entry = Entry {
            at: Instant::now(),
            result: result.clone(),
            bytes,
        };
        if let Some(old) = kept.by_call.insert(k.clone(), entry) {
            kept.bytes -= old.bytes;
            kept.order.retain(|o| o != &k);
        }
        kept.bytes += bytes;
        kept.order.push_back(k);
        while kept.order.len() > ENTRIES || kept.bytes > BYTES {
            let Some(oldest) = kept.order.pop_front() else {
                break;
            };
            let gone = kept.by_call.remove(&oldest).map_or(0, |e| e.bytes);
            kept.bytes -= gone;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn the_same_call_within_the_ttl_is_served_again_and_others_are_not() {
        let cache = ResultCache::new(Duration::from_secs(60));
        let a = args(json!({"path": "a", "depth": 1}));
        cache.put("read", &a, &json!({"content": "A"}));
        // The same arguments in another order are the same call.
        let same = args(json!({"depth": 1, "path": "a"}));
        assert_eq!(cache.get("read", &same).unwrap().0, json!({"content": "A"}));
        assert!(
            cache
                .get("read", &args(json!({"path": "b", "depth": 1})))
                .is_none()
        );
        assert!(cache.get("list", &a).is_none());
        let expired = ResultCache::new(Duration::ZERO);
        expired.put("read", &a, &json!(1));
        assert!(expired.get("read", &a).is_none());
    }

    #[test]
    fn the_oldest_calls_leave_past_the_bounds() {
        let cache = ResultCache::new(Duration::from_secs(60));
        for i in 0..ENTRIES + 5 {
            cache.put("read", &args(json!({"i": i})), &json!(i));
        }
        assert!(cache.get("read", &args(json!({"i": 0}))).is_none());
        assert!(
            cache
                .get("read", &args(json!({"i": ENTRIES + 4})))
                .is_some()
        );
        let big = json!("x".repeat(BYTES / 3));
        for i in 0..4 {
            cache.put("big", &args(json!({"i": i})), &big);
        }
        assert!(cache.lock().bytes <= BYTES);
        assert!(cache.get("big", &args(json!({"i": 0}))).is_none());
    }
}
