//! Which node runs which agent of a team across machines: the agents spread evenly over the
//! live nodes, and as few as possible move when a node joins or goes (an agent moves only off
//! a node that is gone, or that holds more than its share).

use std::collections::BTreeMap;

/// Where each of `agents` runs over `nodes`, given where they run now (`current`; agents and
/// nodes it does not list are new). Every node gets `agents.len() / nodes.len()` agents, the
/// first few one more (those that hold most now, so fewer move). Empty without nodes.
pub fn place<A, N>(agents: &[A], nodes: &[N], current: &BTreeMap<A, N>) -> BTreeMap<A, N>
where
    A: Ord + Clone,
    N: Ord + Clone,
{
    let mut placed = BTreeMap::new();
    if nodes.is_empty() {
        return placed;
    }
    let share =
        |rank: usize| agents.len() / nodes.len() + usize::from(rank < agents.len() % nodes.len());
    // The nodes that hold most now get the larger shares: fewer agents move.
    let mut ranked: Vec<&N> = nodes.iter().collect();
    ranked.sort_by_key(|n| {
        let held = agents
            .iter()
            .filter(|a| current.get(*a) == Some(*n))
            .count();
        (std::cmp::Reverse(held), (*n).clone())
    });
    let quota: BTreeMap<&N, usize> = ranked
        .iter()
        .enumerate()
        .map(|(r, n)| (*n, share(r)))
        .collect();
    let mut load: BTreeMap<&N, usize> = BTreeMap::new();
    let mut homeless = Vec::new();
    for a in agents {
        match current.get(a).and_then(|n| quota.get_key_value(n)) {
            Some((n, q)) if load.get(n).copied().unwrap_or(0) < *q => {
                *load.entry(n).or_default() += 1;
                placed.insert(a.clone(), (*n).clone());
            }
            _ => homeless.push(a),
        }
    }
    let mut room = ranked
        .iter()
        .flat_map(|n| std::iter::repeat_n(*n, quota[n] - load.get(n).copied().unwrap_or(0)));
    for a in homeless {
        if let Some(n) = room.next() {
            placed.insert(a.clone(), n.clone());
        }
    }
    placed
}

/// The agents whose node differs between `before` and `after` (new ones included), with the
/// node each goes to.
pub fn moves<'a, A: Ord, N: PartialEq>(
    before: &BTreeMap<A, N>,
    after: &'a BTreeMap<A, N>,
) -> Vec<(&'a A, &'a N)> {
    after
        .iter()
        .filter(|(a, n)| before.get(*a) != Some(*n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agents(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("a{i:02}")).collect()
    }

    fn counts(p: &BTreeMap<String, &'static str>) -> BTreeMap<&'static str, usize> {
        let mut c = BTreeMap::new();
        for n in p.values() {
            *c.entry(*n).or_default() += 1;
        }
        c
    }

    #[test]
    fn agents_spread_evenly_over_the_nodes() {
        let p = place(&agents(10), &["a", "b", "c"], &BTreeMap::new());
        assert_eq!(p.len(), 10);
        let c = counts(&p);
        assert_eq!(c.values().copied().collect::<Vec<_>>(), vec![4, 3, 3]);
        assert!(place(&agents(3), &[] as &[&str], &BTreeMap::new()).is_empty());
    }

    #[test]
    fn a_joining_node_takes_a_share_and_nothing_else_moves() {
        let before = place(&agents(12), &["a", "b"], &BTreeMap::new());
        let after = place(&agents(12), &["a", "b", "c"], &before);
        assert_eq!(
            counts(&after).values().copied().collect::<Vec<_>>(),
            vec![4, 4, 4]
        );
        let moved = moves(&before, &after);
        assert_eq!(moved.len(), 4, "only the new node's share moves");
        assert!(moved.iter().all(|(_, n)| **n == "c"));
    }

    #[test]
    fn a_gone_nodes_agents_go_to_the_others_and_only_they_move() {
        let before = place(&agents(9), &["a", "b", "c"], &BTreeMap::new());
        let after = place(&agents(9), &["a", "c"], &before);
        let moved = moves(&before, &after);
        assert_eq!(moved.len(), 3);
        assert!(moved.iter().all(|(a, _)| before[*a] == "b"));
        let mut c = counts(&after).values().copied().collect::<Vec<_>>();
        c.sort();
        assert_eq!(c, vec![4, 5]);
        // Placing again changes nothing.
        assert!(moves(&after, &place(&agents(9), &["a", "c"], &after)).is_empty());
    }

    #[test]
    fn a_new_agent_goes_where_there_is_room() {
        let before = place(&agents(4), &["a", "b"], &BTreeMap::new());
        let after = place(&agents(5), &["a", "b"], &before);
        assert_eq!(
            moves(&before, &after).len(),
            1,
            "only the new agent is placed"
        );
    }
}
