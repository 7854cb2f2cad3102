//! The team's lease as a node keeps it: waiting for it, renewing it, knowing when it is lost.
//!
//! Every node of a team runs `cohort serve --node NAME` on one shared Postgres store. One of
//! them holds the team's lease and runs its actors; the others wait, heartbeating, and take the
//! lease over when its holder stops renewing it (died, cut off) or gives it up (SIGTERM). The
//! holder renews every third of the term and stops acting once it cannot show a renewal within
//! the term ([`LeaseTerm::act_until`]); should it write anyway, the store refuses it by the
//! lease's fencing token.

use cohort_core::lease::LeaseTerm;
use cohort_store::lease::{Fence, Seat, TEAM_LEASE, Taken};
use cohort_store::{SqlStore, StoreError};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::watch;

/// Waits until this node holds the team's lease, saying it is alive meanwhile; `waiting` is
/// told who holds it (the node's name and API address) each time either changes. A store that
/// cannot be reached is tried again.
pub async fn wait_for_lease(
    store: &SqlStore,
    seat: &Seat,
    term: LeaseTerm,
    mut waiting: impl FnMut(&str, &str),
) -> (Fence, Instant) {
    let mut holder = (String::new(), String::new());
    loop {
        let sent = Instant::now();
        // Saying it is alive renews the leases of the agents it runs for the team's node.
        let taken = match store.heartbeat(seat).await {
            Ok(()) => match store.renew_agent_leases(seat, term.ttl).await {
                Ok(()) => store.take_lease(TEAM_LEASE, seat, term.ttl).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        match taken {
            Ok(Taken::Held(fence)) => return (fence, sent),
            Ok(Taken::HeldBy { node, address, .. })
                if (&node, &address) != (&holder.0, &holder.1) =>
            {
                waiting(&node, &address);
                holder = (node, address);
            }
            Ok(Taken::HeldBy { .. }) => {}
            Err(e) => tracing::warn!("looking for the team's lease failed: {e}"),
        }
        tokio::time::sleep(term.look_every()).await;
    }
}

/// A held lease, renewed in the background until dropped or [`Keeper::lost`]. It renews on a
/// thread of its own: a busy actor thread (or one waiting for the journal) never makes the
/// node miss a renewal.
pub struct Keeper {
    lost: watch::Receiver<bool>,
    /// Dropped with the keeper, which ends its thread.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Keeper {
    /// Keeps `fence`'s lease, taken (or last renewed) by a call sent at `sent`.
    pub fn start(
        store: Arc<SqlStore>,
        seat: Seat,
        fence: Fence,
        sent: Instant,
        term: LeaseTerm,
    ) -> Self {
        let (lost_tx, lost) = watch::channel(false);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let renewing = async move {
            tokio::select! {
                why = renew_until_lost(&store, &seat, &fence, sent, term) => {
                    tracing::error!("this node stops acting for the team: {why}");
                    lost_tx.send_replace(true);
                }
                _ = stopped => {}
            }
        };
        let thread = std::thread::Builder::new()
            .name("cohort-lease".into())
            .spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt.block_on(renewing),
                    Err(e) => tracing::error!("the lease keeper could not start its runtime: {e}"),
                }
            });
        // Without it the lease runs out, and the store's refusal of the next write (the
        // fence) stops the team instead.
        if let Err(e) = thread {
            tracing::error!("the lease keeper's thread did not start: {e}");
        }
        Keeper { lost, _stop: stop }
    }

    /// Resolves once this node may no longer act on the lease.
    pub async fn lost(&self) {
        let mut lost = self.lost.clone();
        if lost.wait_for(|l| *l).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Renews the lease every third of its term; returns why the node may act on it no longer:
/// another took it, or no renewal got through in time.
async fn renew_until_lost(
    store: &SqlStore,
    seat: &Seat,
    fence: &Fence,
    mut sent: Instant,
    term: LeaseTerm,
) -> String {
    loop {
        let until = term.act_until(sent);
        let next = (Instant::now() + term.renew_every()).min(until);
        tokio::time::sleep_until(next.into()).await;
        if Instant::now() >= until {
            return format!(
                "its lease was not renewed within {:?}",
                term.ttl - term.ttl / 5
            );
        }
        let trying = Instant::now();
        let renewed = tokio::time::timeout_at(until.into(), async {
            let renewed = store.renew_lease(fence, term.ttl).await?;
            store.heartbeat(seat).await?;
            store.renew_agent_leases(seat, term.ttl).await?;
            Ok::<bool, StoreError>(renewed)
        })
        .await;
        match renewed {
            Ok(Ok(true)) => sent = trying,
            Ok(Ok(false)) => return "another node took the team's lease over".into(),
            Ok(Err(e)) => tracing::warn!("renewing the team's lease failed: {e}"),
            Err(_) => {}
        }
    }
}
