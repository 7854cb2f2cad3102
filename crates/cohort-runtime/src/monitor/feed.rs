//! The monitor's live feed: every published event, in order, to every subscriber (websocket
//! feeds, `cohort run`), from a ring held to a count *and* a byte cap. A ring of events by count
//! alone is not bounded: 8,192 events that each carry a 16 KB message (and its JSON, made for
//! the first feed that sends it) held hundreds of megabytes while one slow reader lagged. A
//! subscriber that falls behind the oldest event kept gets `Lagged` (the websocket then sends
//! a fresh snapshot, never a silent gap). The sender never waits for a reader; with no
//! subscriber nothing is kept.

use super::Published;
use cohort_core::event::{AgentChange, Change, StepChange, TaskChange};
use cohort_core::state::{Held, value_bytes};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;
pub use tokio::sync::broadcast::error::{RecvError, TryRecvError};

/// What the ring may hold: this many events, this many bytes (estimated; an event's JSON
/// counts as much again as its change).
#[derive(Clone, Copy, Debug)]
pub struct FeedCap {
    pub events: usize,
    pub bytes: usize,
}

struct Ring {
    events: VecDeque<Arc<Published>>,
    /// The sequence number of `events[0]`; the next pushed gets `first + events.len()`.
    first: u64,
    bytes: usize,
    cap: FeedCap,
    receivers: usize,
    closed: bool,
}

struct Shared {
    ring: Mutex<Ring>,
    pushed: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The sending side (the monitor's).
pub struct Feed {
    shared: Arc<Shared>,
}

/// One subscriber's place in the feed.
pub struct FeedReceiver {
    shared: Arc<Shared>,
    next: u64,
}

/// What an event costs the ring, roughly: its change's texts, twice (the JSON made of it).
fn cost(p: &Published) -> usize {
    let change = match &p.event.change {
        Change::Step(StepChange::Added { step, .. }) => step.held_bytes(),
        Change::Step(StepChange::Updated { update, .. }) => {
            update.execute_result.as_ref().map_or(0, |r| r.held_bytes())
                + update.instruction_content.as_ref().map_or(0, value_bytes)
        }
        Change::Task(TaskChange::Conversation { entry, .. }) => entry.message.held_bytes(),
        Change::Task(TaskChange::SharedInfo { entry, .. }) => entry.held_bytes(),
        Change::Task(TaskChange::State {
            task_summary,
            summary_written,
            ..
        }) => {
            task_summary.as_ref().map_or(0, String::len)
                + summary_written.as_ref().map_or(0, |w| w.held_bytes())
        }
        Change::Agent(AgentChange::PrivateMessage { entry, .. }) => entry.held_bytes(),
        Change::Agent(AgentChange::Added { agent }) => agent
            .agent_step
            .steps()
            .iter()
            .map(Held::held_bytes)
            .sum::<usize>(),
        _ => 0,
    };
    2 * (change + 256)
}

impl Feed {
    pub fn new(cap: FeedCap) -> Feed {
        Feed {
            shared: Arc::new(Shared {
                ring: Mutex::new(Ring {
                    events: VecDeque::new(),
                    first: 0,
                    bytes: 0,
                    cap,
                    receivers: 0,
                    closed: false,
                }),
                pushed: Notify::new(),
            }),
        }
    }

    /// Passes an event on; the oldest leave while the ring is over its caps. Kept only while
    /// someone subscribes.
    pub fn send(&self, p: Arc<Published>) {
        {
            let mut ring = self.shared.lock();
            if ring.receivers == 0 {
                ring.first += ring.events.len() as u64 + 1;
                ring.events.clear();
                ring.bytes = 0;
                return;
            }
            ring.bytes += cost(&p);
            ring.events.push_back(p);
            while ring.events.len() > 1
                && (ring.events.len() > ring.cap.events || ring.bytes > ring.cap.bytes)
            {
                if let Some(old) = ring.events.pop_front() {
                    ring.bytes = ring.bytes.saturating_sub(cost(&old));
                    ring.first += 1;
                }
            }
        }
        self.shared.pushed.notify_waiters();
    }

    /// Drops every event held and makes every receiver lag (it takes a fresh snapshot): the
    /// states they were following were replaced.
    pub fn skip_all(&self) {
        {
            let mut ring = self.shared.lock();
            ring.first += ring.events.len() as u64 + 1;
            ring.events.clear();
            ring.bytes = 0;
        }
        self.shared.pushed.notify_waiters();
    }

    /// A receiver of the events sent from now on.
    pub fn subscribe(&self) -> FeedReceiver {
        let mut ring = self.shared.lock();
        ring.receivers += 1;
        FeedReceiver {
            shared: self.shared.clone(),
            next: ring.first + ring.events.len() as u64,
        }
    }

    /// Holds the ring to `bytes` from now on.
    pub fn set_bytes(&self, bytes: usize) {
        self.shared.lock().cap.bytes = bytes;
    }

    /// The events held now and their estimated bytes.
    pub fn held(&self) -> (usize, usize) {
        let ring = self.shared.lock();
        (ring.events.len(), ring.bytes)
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.pushed.notify_waiters();
    }
}

impl FeedReceiver {
    /// The next event, waiting for one; `Lagged(n)` once when `n` events left before this
    /// receiver read them (it goes on from the oldest kept), `Closed` when the monitor is gone.
    pub async fn recv(&mut self) -> Result<Arc<Published>, RecvError> {
        let shared = self.shared.clone();
        loop {
            let pushed = shared.pushed.notified();
            tokio::pin!(pushed);
            pushed.as_mut().enable();
            match self.try_recv() {
                Ok(p) => return Ok(p),
                Err(TryRecvError::Lagged(n)) => return Err(RecvError::Lagged(n)),
                Err(TryRecvError::Closed) => return Err(RecvError::Closed),
                Err(TryRecvError::Empty) => pushed.await,
            }
        }
    }

    /// The next event if one is there.
    pub fn try_recv(&mut self) -> Result<Arc<Published>, TryRecvError> {
        let ring = self.shared.lock();
        if self.next < ring.first {
            let missed = ring.first - self.next;
            self.next = ring.first;
            return Err(TryRecvError::Lagged(missed));
        }
        match ring.events.get((self.next - ring.first) as usize) {
            Some(p) => {
                self.next += 1;
                Ok(p.clone())
            }
            None if ring.closed => Err(TryRecvError::Closed),
            None => Err(TryRecvError::Empty),
        }
    }

    /// Every event there now, up to `max`, appended to `out` under one lock (none: nothing
    /// there yet): for a reader that polls rather than waits (it is then never woken by a
    /// sender). `Lagged(n)` as [`recv`](Self::recv) says it, with nothing appended; `Closed`
    /// once the monitor is gone and nothing is left.
    pub fn try_recv_many(
        &mut self,
        max: usize,
        out: &mut Vec<Arc<Published>>,
    ) -> Result<(), RecvError> {
        let ring = self.shared.lock();
        if self.next < ring.first {
            let missed = ring.first - self.next;
            self.next = ring.first;
            return Err(RecvError::Lagged(missed));
        }
        let from = (self.next - ring.first) as usize;
        if from >= ring.events.len() && ring.closed {
            return Err(RecvError::Closed);
        }
        let taken = ring.events.range(from..).take(max);
        let before = out.len();
        out.extend(taken.cloned());
        self.next += (out.len() - before) as u64;
        Ok(())
    }

    /// A receiver of the events sent from now on (skipping what this one has not read).
    pub fn resubscribe(&self) -> FeedReceiver {
        let mut ring = self.shared.lock();
        ring.receivers += 1;
        FeedReceiver {
            shared: self.shared.clone(),
            next: ring.first + ring.events.len() as u64,
        }
    }
}

impl Drop for FeedReceiver {
    fn drop(&mut self) {
        let mut ring = self.shared.lock();
        ring.receivers = ring.receivers.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cohort_core::event::{Event, TaskChange};
    use cohort_core::ids::StageRef;
    use cohort_core::message::Message;
    use cohort_core::state::ConversationEntry;
    use std::sync::OnceLock;

    fn message(n: u64, kb: usize) -> Arc<Published> {
        let message = Arc::new(Message::notice(
            "t".into(),
            "a".into(),
            vec!["b".into()],
            StageRef::NoRelative,
            format!("{n} {}", "x".repeat(kb * 1024)),
        ));
        Arc::new(Published {
            event: Event {
                version: n,
                at: 0,
                change: Change::Task(TaskChange::Conversation {
                    task_id: "t".into(),
                    entry: ConversationEntry {
                        timestamp: "now".into(),
                        message,
                    },
                    message_no: n,
                }),
            },
            json: OnceLock::new(),
        })
    }

    #[tokio::test]
    async fn readers_get_every_event_in_order_and_nothing_is_kept_without_one() {
        let feed = Feed::new(FeedCap {
            events: 100,
            bytes: 1 << 20,
        });
        feed.send(message(1, 0));
        assert_eq!(feed.held().0, 0, "no subscriber, nothing kept");
        let mut rx = feed.subscribe();
        let waiting = tokio::spawn(async move {
            let mut got = Vec::new();
            while got.len() < 3 {
                got.push(rx.recv().await.unwrap().event.version);
            }
            got
        });
        tokio::task::yield_now().await;
        for n in 2..5 {
            feed.send(message(n, 0));
        }
        assert_eq!(waiting.await.unwrap(), [2, 3, 4]);
        drop(feed);
    }

    #[tokio::test]
    async fn the_ring_is_held_to_its_bytes_and_a_reader_behind_it_is_told_it_lagged() {
        let feed = Feed::new(FeedCap {
            events: 10_000,
            bytes: 200 << 10,
        });
        let mut slow = feed.subscribe();
        for n in 1..=100 {
            feed.send(message(n, 16));
        }
        let (events, bytes) = feed.held();
        assert!(bytes <= 200 << 10, "{bytes} bytes held");
        assert!(
            (4..=7).contains(&events),
            "{events} events of 16 KB in 200 KB"
        );
        match slow.try_recv() {
            Err(TryRecvError::Lagged(missed)) => assert_eq!(missed as usize, 100 - events),
            other => panic!("{:?}", other.map(|p| p.event.version)),
        }
        assert_eq!(slow.try_recv().unwrap().event.version, 101 - events as u64);
        drop(feed);
        while slow.try_recv().is_ok() {}
        assert!(matches!(slow.try_recv(), Err(TryRecvError::Closed)));
    }

    #[test]
    fn a_polling_reader_takes_what_is_there_in_order_up_to_its_batch_and_is_told_it_lagged() {
        let feed = Feed::new(FeedCap {
            events: 5,
            bytes: 1 << 20,
        });
        let mut rx = feed.subscribe();
        let mut got = Vec::new();
        rx.try_recv_many(10, &mut got).unwrap();
        assert!(got.is_empty(), "nothing yet");
        for n in 1..=4 {
            feed.send(message(n, 0));
        }
        rx.try_recv_many(3, &mut got).unwrap();
        rx.try_recv_many(3, &mut got).unwrap();
        let versions: Vec<u64> = got.iter().map(|p| p.event.version).collect();
        assert_eq!(versions, [1, 2, 3, 4]);
        for n in 5..=12 {
            feed.send(message(n, 0));
        }
        assert!(matches!(
            rx.try_recv_many(10, &mut got),
            Err(RecvError::Lagged(3))
        ));
        got.clear();
        rx.try_recv_many(10, &mut got).unwrap();
        assert_eq!(got[0].event.version, 8, "on from the oldest kept");
        assert_eq!(got.len(), 5);
        // Closed: what is left is still taken, then it says so.
        feed.send(message(13, 0));
        drop(feed);
        got.clear();
        rx.try_recv_many(10, &mut got).unwrap();
        assert_eq!(got[0].event.version, 13);
        assert!(matches!(
            rx.try_recv_many(10, &mut got),
            Err(RecvError::Closed)
        ));
    }
}
