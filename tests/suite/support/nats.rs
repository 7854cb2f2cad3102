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

    /// A team's event stream `stream`, read back whole: each change's version and JSON (a
    /// message holds consecutive changes, a line each, its headers naming the first and the
    /// last, which are checked against them), and how many messages held them.
    pub async fn stream_events(&self, stream: &str) -> (u64, Vec<(u64, serde_json::Value)>) {
        use cohort::node::relay::{lines_of, versions_of};
        let options = match self.auth() {
            Some((user, password)) => {
                async_nats::ConnectOptions::with_user_and_password(user, password)
            }
            None => async_nats::ConnectOptions::new(),
        };
        let client = options.connect(self.url()).await.unwrap();
        let js = async_nats::jetstream::new(client);
        let mut stream = js.get_stream(stream).await.unwrap();
        let count = stream.info().await.unwrap().state.messages;
        let mut out = Vec::new();
        for seq in 1..=count {
            let m = stream.get_raw_message(seq).await.unwrap();
            let (first, last) = versions_of(&m.headers).unwrap();
            let held: Vec<serde_json::Value> = lines_of(&m.payload)
                .map(|l| serde_json::from_slice(l).unwrap())
                .collect();
            assert_eq!(held.len() as u64, last - first + 1, "message {seq}");
            for (v, json) in (first..=last).zip(held) {
                assert_eq!(json["version"], v, "message {seq}");
                out.push((v, json));
            }
        }
        (count, out)
    }
}
