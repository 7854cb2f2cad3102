//! A throwaway Postgres cluster for tests (`cohort::bench::servers::Postgres`: `initdb` into a
//! fresh folder, `pg_ctl start` on a free port, stopped and removed when dropped), panicking
//! with what to install when Postgres is missing.

pub struct Cluster(cohort::bench::servers::Postgres);

impl Cluster {
    pub fn start(name: &str) -> Cluster {
        Cluster(cohort::bench::servers::Postgres::start(name).unwrap_or_else(|e| panic!("{e}")))
    }

    pub fn url(&self) -> String {
        self.0.url()
    }

    pub fn port(&self) -> u16 {
        self.0.port
    }

    /// Stops Postgres as a crash would, waits `down`, and starts it again.
    pub fn restart(&self, down: std::time::Duration) {
        self.0.restart(down).unwrap_or_else(|e| panic!("{e}"));
    }
}
