//! A throwaway NATS server with JetStream for tests (`cohort::bench::servers::Nats`, which says
//! where the binary comes from), panicking with what to install when there is none.

pub struct Nats(cohort::bench::servers::Nats);

impl Nats {
    pub fn start(name: &str) -> Nats {
        Nats(cohort::bench::servers::Nats::start(name, None).unwrap_or_else(|e| panic!("{e}")))
    }

    /// A server that lets in only `user` with `password`.
    pub fn start_with_user(name: &str, user: &str, password: &str) -> Nats {
        let auth = Some((user.to_owned(), password.to_owned()));
        Nats(cohort::bench::servers::Nats::start(name, auth).unwrap_or_else(|e| panic!("{e}")))
    }

    pub fn url(&self) -> String {
        self.0.url()
    }

    pub fn auth(&self) -> Option<(String, String)> {
        self.0.auth.clone()
    }

    /// Kills the server and starts it again on the same port and streams.
    pub fn restart(&mut self) {
        self.0.restart().unwrap_or_else(|e| panic!("{e}"));
    }
}
