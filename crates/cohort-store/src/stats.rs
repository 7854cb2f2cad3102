//! What a store holds, in counts and bytes: `cohort inspect` shows it, and the tests and the
//! bench hold the store's size on disk to what it must keep.

use super::Compacted;

/// A store's figures, read in one go (not one transaction: a running team may write between
/// two of them).
#[derive(Clone, Debug, PartialEq)]
pub struct StoreStats {
    /// The SQLite file, or the Postgres tables with their indexes.
    pub file_bytes: u64,
    /// SQLite's `-wal` file (0 on Postgres).
    pub wal_bytes: u64,
    /// Free pages inside the SQLite file, waiting to be reused or given back (0 on Postgres).
    pub free_bytes: u64,
    pub events: u64,
    pub event_bytes: u64,
    pub events_after_snapshot: u64,
    pub event_bytes_after_snapshot: u64,
    pub snapshots: u64,
    pub snapshot_bytes: u64,
    /// The newest snapshot's version and size.
    pub newest_snapshot: Option<(u64, u64)>,
    /// Tasks with an archived record, and the records' size.
    pub archived: u64,
    pub archive_bytes: u64,
    pub last_compaction: Option<Compacted>,
}

impl StoreStats {
    /// What the store must keep, in bytes: the newest snapshot and the events after it
    /// (recovery) and the archived records (readers of tasks whose events were pruned).
    pub fn live_bytes(&self) -> u64 {
        self.newest_snapshot.map_or(0, |(_, b)| b)
            + self.event_bytes_after_snapshot
            + self.archive_bytes
    }

    /// The store's size on disk: the file and its `-wal`.
    pub fn disk_bytes(&self) -> u64 {
        self.file_bytes + self.wal_bytes
    }

    /// The size on disk over what must be kept (how much of the disk is history or slack).
    pub fn ratio(&self) -> f64 {
        self.disk_bytes() as f64 / self.live_bytes().max(1) as f64
    }
}

/// Bytes as people read them: `512 B`, `3.4 KB`, `12.0 MB`, `1.2 GB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_read_as_people_read_them() {
        assert_eq!(super::human_bytes(512), "512 B");
        assert_eq!(super::human_bytes(3 * 1024 + 400), "3.4 KB");
        assert_eq!(super::human_bytes(12 * 1024 * 1024), "12.0 MB");
        assert_eq!(super::human_bytes(5 << 40), "5.0 TB");
    }
}
