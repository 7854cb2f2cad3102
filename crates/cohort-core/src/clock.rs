//! Wall-clock timestamps for records (conversation pools, shared info, private chats), in the
//! team's local time as `%Y-%m-%d %H:%M:%S`. Formatting a date costs more than the rest of
//! recording a message, so each thread formats a given second only once.

use std::cell::RefCell;

thread_local! {
    static LAST: RefCell<(i64, String)> = const { RefCell::new((i64::MIN, String::new())) };
}

/// One moment, both as the team's local time (memory keys, records) and as an instant
/// (deadlines, which must not move with the time zone or daylight saving).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Now {
    /// The team's local wall-clock time, without a zone.
    pub local: chrono::NaiveDateTime,
    /// Milliseconds since the Unix epoch.
    pub unix_ms: i64,
}

impl Now {
    /// The moment of the call, read from the system clock.
    pub fn current() -> Now {
        let t = chrono::Local::now();
        Now {
            local: t.naive_local(),
            unix_ms: t.timestamp_millis(),
        }
    }

    /// As a record's timestamp, `2025-06-13 10:30:22`.
    pub fn stamp(&self) -> String {
        self.local.format("%Y-%m-%d %H:%M:%S").to_string()
    }
}

/// A span of seconds as people read it, in the catalog's language: `45 s`, `3 min`,
/// `2 h 5 min`.
pub fn span(secs: u64, t: &crate::texts::Texts) -> String {
    match secs {
        0..=89 => t.span_seconds(secs),
        90..=3_599 => t.span_minutes((secs + 30) / 60),
        _ => match (secs / 3_600, secs % 3_600 / 60) {
            (h, 0) => t.span_hours(h),
            (h, m) => t.span_hours_minutes(h, m),
        },
    }
}

/// Now, as `2025-06-13 10:30:22` (local time).
pub fn local_timestamp() -> String {
    // The second from the system clock alone: finding the local offset is the costly part,
    // done only when the second changes.
    let second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != second {
            let now = chrono::Local::now();
            *last = (second, now.format("%Y-%m-%d %H:%M:%S").to_string());
        }
        last.1.clone()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn spans_read_in_the_unit_people_use() {
        use crate::texts::{Language, Texts};
        let en = Texts::builtin(Language::En);
        assert_eq!(super::span(45, &en), "45 s");
        assert_eq!(super::span(180, &en), "3 min");
        assert_eq!(super::span(7_500, &en), "2 h 5 min");
        assert_eq!(super::span(7_200, &en), "2 h");
        assert_eq!(
            super::span(7_500, &Texts::builtin(Language::Zh)),
            "2 小时 5 分钟"
        );
    }

    #[test]
    fn timestamps_have_the_record_format() {
        let t = super::local_timestamp();
        assert!(
            chrono::NaiveDateTime::parse_from_str(&t, "%Y-%m-%d %H:%M:%S").is_ok(),
            "{t}"
        );
        assert_eq!(super::local_timestamp().len(), t.len());
    }
}
