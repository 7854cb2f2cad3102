//! The server's open connections: what each is doing (its [`Phase`]), when it must be closed
//! (its deadline under the `http:` timeouts), and which one gives way when the table fills.
//!
//! The cap keeps room for newcomers: past [`ConnLimits::evict_at`] every new connection
//! closes the connection that has waited longest without a request being worked on (idle
//! between requests, still sending its head or body, or stalled on a response its client does
//! not read), so a crowd of idle or half-sent connections cannot keep a login out; only when
//! every connection is at work (a request being handled, a websocket) is a newcomer refused.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The limits a connection is held to. At most `cap` connections are open, and for a moment
/// up to `cap - evict_at` more while those asked to make room close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnLimits {
    /// A request head (and body) must arrive within this of its first byte, a fresh
    /// connection's first request within this of the connect.
    pub header_timeout: Duration,
    /// A keep-alive connection may wait this long for its next request, and a response may
    /// wait this long for a client that reads nothing.
    pub idle_timeout: Duration,
    /// Connections open at most (websockets included); a newcomer past it is refused.
    pub cap: usize,
    /// From this many open connections on, each newcomer closes the longest-waiting one.
    pub evict_at: usize,
}

impl ConnLimits {
    /// `cap` connections at most, keeping the last eighth of them (at least two) for
    /// newcomers while idle connections are closed to make room.
    pub fn new(header_timeout: Duration, idle_timeout: Duration, cap: usize) -> Self {
        let cap = cap.max(2);
        ConnLimits {
            header_timeout,
            idle_timeout,
            cap,
            evict_at: cap - (cap / 8).max(1).min(cap / 2),
        }
    }
}

/// What a connection is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a request head since `since`: just connected, or bytes of a next request
    /// began to arrive.
    Head { since: Instant },
    /// Between requests since `since`, nothing received.
    Idle { since: Instant },
    /// A request's head arrived at `since`; its body is being read.
    Body { since: Instant },
    /// A request is being handled or its response written.
    Handling,
    /// Handed over to a websocket: no longer HTTP, and held to the feeds' own limits.
    Upgraded,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// Requests whose responses are not fully written yet.
    in_flight: usize,
    /// Since when a write has waited for the client to read.
    stalled_since: Option<Instant>,
}

/// One open connection, shared by the table, its socket, its requests and its task.
#[derive(Debug)]
pub struct Conn {
    id: u64,
    state: Mutex<State>,
    /// Requests begun on it, for `max_requests_per_connection`.
    requests: AtomicUsize,
    /// Chosen to make room (or the server stops): its task closes it.
    closing: AtomicBool,
    close: Notify,
    /// Its deadline may have moved earlier: its task looks again.
    changed: Notify,
}

impl Conn {
    fn new(id: u64, now: Instant) -> Self {
        Conn {
            id,
            state: Mutex::new(State {
                phase: Phase::Head { since: now },
                in_flight: 0,
                stalled_since: None,
            }),
            requests: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            close: Notify::new(),
            changed: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // No code panics while holding it; a poisoned lock still holds a usable state.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn phase(&self) -> Phase {
        self.state().phase
    }

    /// When it must be closed, if nothing changes before then.
    pub fn deadline(&self, limits: &ConnLimits) -> Option<Instant> {
        let s = self.state();
        match s.phase {
            Phase::Head { since } => Some(since + limits.header_timeout),
            Phase::Idle { since } => Some(since + limits.idle_timeout),
            // The body's own deadline answers 408 first (see `body_deadline`); this one only
            // catches a client that does not take even that answer.
            Phase::Body { since } => Some(since + limits.header_timeout * 2),
            Phase::Handling => s.stalled_since.map(|t| t + limits.idle_timeout),
            Phase::Upgraded => None,
        }
    }

    /// Since when it has waited without a request being worked on (None: it is at work).
    fn waiting_since(&self) -> Option<Instant> {
        let s = self.state();
        match s.phase {
            Phase::Head { since } | Phase::Idle { since } | Phase::Body { since } => Some(since),
            Phase::Handling => s.stalled_since,
            Phase::Upgraded => None,
        }
    }

    /// Bytes arrived: a connection idle between requests begins its next request head.
    pub fn read_some(&self, now: Instant) {
        let mut s = self.state();
        if let Phase::Idle { .. } = s.phase {
            s.phase = Phase::Head { since: now };
            drop(s);
            self.changed.notify_one();
        }
    }

    /// A write waits for the client (`blocked`), or went through.
    pub fn write_blocked(&self, blocked: bool, now: Instant) {
        let mut s = self.state();
        match (blocked, s.stalled_since) {
            (true, None) => {
                s.stalled_since = Some(now);
                drop(s);
                self.changed.notify_one();
            }
            (false, Some(_)) => s.stalled_since = None,
            _ => {}
        }
    }

    /// A request head arrived: its body is read next. The guard ends the request when its
    /// response has been written (or dropped).
    pub fn request_started(self: &Arc<Self>, now: Instant) -> RequestGuard {
        let mut s = self.state();
        s.in_flight += 1;
        if s.phase != Phase::Upgraded {
            s.phase = Phase::Body { since: now };
        }
        drop(s);
        let number = self.requests.fetch_add(1, Ordering::Relaxed) + 1;
        RequestGuard {
            conn: self.clone(),
            number,
        }
    }

    /// The request's body has been read: it is being handled.
    pub fn body_read(&self) {
        let mut s = self.state();
        if let Phase::Body { .. } = s.phase {
            s.phase = Phase::Handling;
        }
    }

    fn request_ended(&self, now: Instant) {
        let mut s = self.state();
        s.in_flight = s.in_flight.saturating_sub(1);
        if s.in_flight == 0 && s.phase != Phase::Upgraded {
            s.phase = Phase::Idle { since: now };
            s.stalled_since = None;
        }
    }

    /// Whether a request is in flight on it (the server lets it finish when stopping).
    pub fn at_work(&self) -> bool {
        self.state().in_flight > 0
    }

    /// Asks its task to close it.
    pub fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        self.close.notify_one();
    }

    /// Resolves once it was asked to close.
    pub async fn closed(&self) {
        self.close.notified().await
    }

    /// Resolves when its deadline may have moved earlier.
    pub async fn changed(&self) {
        self.changed.notified().await
    }
}

/// One request on a connection, from its head to its response's end.
#[derive(Debug)]
pub struct RequestGuard {
    conn: Arc<Conn>,
    number: usize,
}

impl RequestGuard {
    /// Which request of its connection this is (1 for the first).
    pub fn number(&self) -> usize {
        self.number
    }

    /// The request became a websocket.
    pub fn upgraded(&self) {
        self.conn.state().phase = Phase::Upgraded;
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.conn.request_ended(Instant::now());
    }
}

/// A request's connection, in its extensions (for the body deadline).
#[derive(Clone, Debug)]
pub struct ConnHandle(pub Arc<Conn>);

/// The open connections.
#[derive(Debug)]
pub struct Connections {
    limits: ConnLimits,
    open: Mutex<HashMap<u64, Arc<Conn>>>,
    next_id: AtomicU64,
}

/// Whether a new connection may open.
pub enum Admission {
    Open(Arc<Conn>, Slot),
    /// Every slot is taken by a connection at work: refuse it.
    Full,
}

impl Connections {
    pub fn new(limits: ConnLimits) -> Arc<Self> {
        Arc::new(Connections {
            limits,
            open: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        })
    }

    fn open(&self) -> MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Connections open now (those asked to close count until they have).
    pub fn len(&self) -> usize {
        self.open().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Admits a new connection, first closing the longest-waiting one when the table is past
    /// `evict_at`; or refuses it when the table is full of connections at work. Connections
    /// already asked to close are on their way out and make room at once (up to the room
    /// kept, `cap - evict_at`), so a burst of newcomers is not refused while they close.
    pub fn admit(self: &Arc<Self>, now: Instant) -> Admission {
        let mut open = self.open();
        let mut leaving = open
            .values()
            .filter(|c| c.closing.load(Ordering::SeqCst))
            .count();
        if open.len() - leaving >= self.limits.evict_at {
            let victim = open
                .values()
                .filter(|c| !c.closing.load(Ordering::SeqCst))
                .filter_map(|c| c.waiting_since().map(|t| (t, c)))
                .min_by_key(|(t, c)| (*t, c.id))
                .map(|(_, c)| c.clone());
            if let Some(victim) = victim {
                tracing::debug!(
                    conn = victim.id,
                    "closing the longest-waiting connection to make room"
                );
                victim.close();
                leaving += 1;
            }
        }
        let room = self.limits.cap - self.limits.evict_at;
        if open.len() - leaving.min(room) >= self.limits.cap {
            return Admission::Full;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn::new(id, now));
        open.insert(id, conn.clone());
        Admission::Open(
            conn,
            Slot {
                table: self.clone(),
                id,
            },
        )
    }
}

/// A connection's place in the table, held by its socket: freed when the socket closes
/// (after a websocket upgrade, when the websocket ends).
#[derive(Debug)]
pub struct Slot {
    table: Arc<Connections>,
    id: u64,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.table.open().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn table(cap: usize) -> Arc<Connections> {
        Connections::new(ConnLimits::new(10 * S, 60 * S, cap))
    }

    fn open(t: &Arc<Connections>, at: Instant) -> (Arc<Conn>, Slot) {
        match t.admit(at) {
            Admission::Open(c, s) => (c, s),
            Admission::Full => panic!("refused"),
        }
    }

    #[test]
    fn room_is_kept_for_newcomers() {
        assert_eq!(ConnLimits::new(S, S, 160).evict_at, 140);
        assert_eq!(ConnLimits::new(S, S, 16).evict_at, 14);
        assert_eq!(ConnLimits::new(S, S, 2).evict_at, 1);
    }

    #[test]
    fn deadlines_follow_the_phase() {
        let t0 = Instant::now();
        let l = ConnLimits::new(10 * S, 60 * S, 16);
        let t = Connections::new(l);
        let (c, _slot) = open(&t, t0);
        assert_eq!(
            c.deadline(&l),
            Some(t0 + 10 * S),
            "a fresh connection's first head"
        );
        let req = c.request_started(t0 + S);
        assert_eq!(c.phase(), Phase::Body { since: t0 + S });
        c.body_read();
        assert_eq!(
            c.deadline(&l),
            None,
            "a request being handled has no deadline"
        );
        c.write_blocked(true, t0 + 2 * S);
        assert_eq!(c.deadline(&l), Some(t0 + 62 * S), "a response nobody reads");
        c.write_blocked(false, t0 + 3 * S);
        assert_eq!(c.deadline(&l), None);
        assert_eq!(req.number(), 1);
        drop(req);
        let Phase::Idle { since } = c.phase() else {
            panic!("{:?}", c.phase())
        };
        assert_eq!(
            c.deadline(&l),
            Some(since + 60 * S),
            "idle between requests"
        );
        c.read_some(since + S);
        assert_eq!(c.deadline(&l), Some(since + 11 * S), "the next head began");
        let ws = c.request_started(since + 2 * S);
        ws.upgraded();
        drop(ws);
        assert_eq!(c.phase(), Phase::Upgraded);
        assert_eq!(c.deadline(&l), None);
    }

    #[test]
    fn past_evict_at_the_longest_waiting_connection_makes_room() {
        let t = table(16);
        let t0 = Instant::now();
        let mut conns = Vec::new();
        for i in 0..14 {
            conns.push(open(&t, t0 + S * i));
        }
        // The oldest is at work, so the next oldest waiting one goes.
        let _work = conns[0].0.request_started(t0 + S * 20);
        conns[0].0.body_read();
        assert!(!conns[1].0.closing.load(Ordering::SeqCst));
        let newcomer = open(&t, t0 + S * 30);
        assert!(
            conns[1].0.closing.load(Ordering::SeqCst),
            "the oldest waiting one"
        );
        assert!(
            !conns[0].0.closing.load(Ordering::SeqCst),
            "not the one at work"
        );
        // The next newcomer picks another victim (the first has not closed yet).
        let _second = open(&t, t0 + S * 31);
        assert!(conns[2].0.closing.load(Ordering::SeqCst));
        drop(newcomer);
        assert_eq!(t.len(), 15);
    }

    #[test]
    fn a_table_full_of_connections_at_work_refuses_newcomers() {
        let t = table(16);
        let now = Instant::now();
        let mut busy = Vec::new();
        for _ in 0..16 {
            let (c, slot) = open(&t, now);
            let req = c.request_started(now);
            c.body_read();
            busy.push((c, slot, req));
        }
        assert!(matches!(t.admit(now), Admission::Full));
        // One request ends: its connection waits again and gives way to the next newcomer,
        // which is let in while it closes.
        let (c, _slot, req) = busy.pop().unwrap();
        drop(req);
        let (newcomer, _its_slot) = open(&t, now);
        assert!(c.closing.load(Ordering::SeqCst));
        assert_eq!(t.len(), 17, "one over the cap, on its way out");
        let _its_request = newcomer.request_started(now);
        newcomer.body_read();
        assert!(matches!(t.admit(now), Admission::Full), "none else waits");
    }
}
