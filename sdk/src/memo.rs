//! Counts by topology domain, kept across scheduling cycles node by node.
//!
//! PreFilter and PreScore of InterPodAffinity and PodTopologySpread walk every pod of
//! the cluster to count, per topology domain, the pods that matter to the incoming
//! pod. The pods of a workload usually look alike (same namespace, labels and
//! terms), and between two cycles only the nodes where pods landed or left change.
//! A [`DomainMemo`] keeps what each node added to the counts, under the node's
//! [`stamp`](crate::NodeInfo::stamp) and a key describing the incoming pod: while
//! the key stays the same, only the nodes whose stamp moved are walked again.

use std::sync::{Mutex, MutexGuard};

use crate::NodeInfo;
use crate::helpers::FastHashMap;

/// One addition of a node: to which table, which domain, how much.
#[derive(Clone, Copy, Debug)]
struct Entry {
    table: u32,
    domain: u32,
    n: i64,
}

/// The domains (topology key and value) seen, numbered densely.
#[derive(Debug, Default)]
struct Domains {
    ids: FastHashMap<String, FastHashMap<String, u32>>,
    names: Vec<(String, String)>,
}

impl Domains {
    fn id(&mut self, key: &str, value: &str) -> u32 {
        let by_value = match self.ids.get_mut(key) {
            Some(m) => m,
            None => self.ids.entry(key.to_owned()).or_default(),
        };
        if let Some(&id) = by_value.get(value) {
            return id;
        }
        let id = self.names.len() as u32;
        by_value.insert(value.to_owned(), id);
        self.names.push((key.to_owned(), value.to_owned()));
        id
    }
}

/// What one node adds to the counts; see [`DomainMemo::count`].
pub struct NodePart<'m> {
    sink: Sink<'m>,
    volatile: &'m mut bool,
}

/// Where a node's additions go.
enum Sink<'m> {
    /// Recorded for the node, to be kept (and added to the totals by the memo).
    Keep {
        domains: &'m mut Domains,
        entries: &'m mut Vec<Entry>,
    },
    /// Straight into this call's tables: nothing is kept.
    Direct {
        tables: &'m mut Vec<DomainCounts>,
        additions: &'m mut usize,
    },
}

impl NodePart<'_> {
    /// Adds `n` to domain (`key`, `value`) of table `table`. A domain added to, even
    /// with 0, is listed by [`DomainTotals::domains`].
    pub fn add(&mut self, table: usize, key: &str, value: &str, n: i64) {
        match &mut self.sink {
            Sink::Keep { domains, entries } => {
                let domain = domains.id(key, value);
                entries.push(Entry {
                    table: table as u32,
                    domain,
                    n,
                });
            }
            Sink::Direct { tables, additions } => {
                change_sum(table_of(tables, table), key, value, |sum| *sum += n);
                **additions += 1;
            }
        }
    }

    /// Says that this part depends on more than the node and the memo's key (for
    /// example on a namespace's labels, which change without any node changing):
    /// the memo forgets everything once this count is read.
    pub fn volatile(&mut self) {
        *self.volatile = true;
    }
}

/// Sums by topology key, then value: what [`DomainTotals::table`] answers.
///
/// Iterated, it lists the domains in no defined order: a hash table's, which depends
/// on what the memo saw before and differs between a native twin and its component.
/// Look domains up, or sort them, before an answer depends on their order.
pub type DomainCounts = FastHashMap<String, FastHashMap<String, i64>>;

/// The kept state: the key it is for, each node's stamp and additions (by position
/// in the node list), and the totals by table and domain.
#[derive(Debug)]
struct Kept<K> {
    /// The key whose nodes' additions are kept.
    key: Option<K>,
    /// The key of the last call, when it kept nothing.
    seen: Option<K>,
    stamps: Vec<u64>,
    parts: Vec<Vec<Entry>>,
    domains: Domains,
    /// By table, by domain id: the sum and how many additions made it.
    totals: Vec<Vec<(i64, u32)>>,
    /// By table, the domains with at least one addition and their sums, kept up to
    /// date as nodes change so that reading costs nothing per domain.
    tables: Vec<DomainCounts>,
    /// How many additions there are in all.
    additions: usize,
}

impl<K> Default for Kept<K> {
    fn default() -> Self {
        Kept {
            key: None,
            seen: None,
            stamps: Vec::new(),
            parts: Vec::new(),
            domains: Domains::default(),
            totals: Vec::new(),
            tables: Vec::new(),
            additions: 0,
        }
    }
}

impl<K> Kept<K> {
    /// Adds (`sign` 1) or takes back (-1) a node's additions.
    fn apply(&mut self, entries: &[Entry], sign: i64) {
        for e in entries {
            let table = e.table as usize;
            if self.totals.len() <= table {
                self.totals.resize_with(table + 1, Vec::new);
            }
            let by_domain = &mut self.totals[table];
            let d = e.domain as usize;
            if by_domain.len() <= d {
                by_domain.resize(d + 1, (0, 0));
            }
            let slot = &mut by_domain[d];
            slot.0 += sign * e.n;
            if sign > 0 {
                slot.1 += 1;
                self.additions += 1;
            } else {
                slot.1 -= 1;
                self.additions -= 1;
            }
        }
    }

    /// Brings `tables` up to date for the domains of `entries`.
    fn publish(&mut self, entries: &[Entry]) {
        for e in entries {
            let table = e.table as usize;
            let (sum, additions) = self.totals[table][e.domain as usize];
            let (key, value) = &self.domains.names[e.domain as usize];
            let counts = table_of(&mut self.tables, table);
            if additions == 0 {
                if let Some(by_value) = counts.get_mut(key) {
                    by_value.remove(value);
                    if by_value.is_empty() {
                        counts.remove(key);
                    }
                }
                continue;
            }
            change_sum(counts, key, value, |n| *n = sum);
        }
    }
}

/// Table `table` of `tables`, added (empty) if there are fewer.
fn table_of(tables: &mut Vec<DomainCounts>, table: usize) -> &mut DomainCounts {
    if tables.len() <= table {
        tables.resize_with(table + 1, DomainCounts::default);
    }
    &mut tables[table]
}

/// Changes the sum of domain (`key`, `value`) in `counts` with `f`, the domain added
/// at 0 first if absent; the strings are copied only then.
fn change_sum(counts: &mut DomainCounts, key: &str, value: &str, f: impl FnOnce(&mut i64)) {
    let by_value = match counts.get_mut(key) {
        Some(m) => m,
        None => counts.entry(key.to_owned()).or_default(),
    };
    match by_value.get_mut(value) {
        Some(sum) => f(sum),
        None => {
            let mut sum = 0;
            f(&mut sum);
            by_value.insert(value.to_owned(), sum);
        }
    }
}

/// Counts by topology domain over the nodes, remembered node by node across calls.
///
/// `K` describes the incoming pod as far as the counts depend on it (for example
/// its namespace, labels and terms); the additions of a node are reused while the
/// key is equal and the node keeps its [`stamp`](NodeInfo::stamp). A node without
/// a stamp (0) is walked every time. The memo is behind a lock, so a plugin can keep
/// it in `self`.
#[derive(Debug)]
pub struct DomainMemo<K> {
    kept: Mutex<Kept<K>>,
}

impl<K> Default for DomainMemo<K> {
    fn default() -> Self {
        DomainMemo {
            kept: Mutex::new(Kept::default()),
        }
    }
}

impl<K: PartialEq> DomainMemo<K> {
    /// An empty memo.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts over `nodes` and lets `read` see the totals. `part` says what one node
    /// adds ([`NodePart::add`]); it is called for every node whose additions are not
    /// kept: all of them when `key` differs from the last call's, else those whose
    /// stamp changed or is 0. The totals are what calling `part` on every node would
    /// have summed.
    ///
    /// A key is kept from its second call in a row on: a key seen once is counted
    /// straight into the tables, so that pods unlike each other (every pod with a
    /// label of its own) cost no more than a plain walk.
    pub fn count<'n, R>(
        &self,
        key: K,
        nodes: &[&'n NodeInfo],
        mut part: impl FnMut(&'n NodeInfo, &mut NodePart<'_>),
        read: impl FnOnce(&mut DomainTotals<'_>) -> R,
    ) -> R {
        let mut kept = self.lock();
        let kept = &mut *kept;
        let mut volatile = false;
        if kept.key.as_ref() != Some(&key) && kept.seen.as_ref() != Some(&key) {
            // A key not seen in the last call (every pod unlike the one before, as a
            // StatefulSet's pods with their own names): keeping what each node adds
            // would cost more than it saves. Count straight into the tables, and
            // remember the key: if the next call has it too, keeping starts then.
            *kept = Kept::default();
            for node in nodes {
                part(
                    node,
                    &mut NodePart {
                        sink: Sink::Direct {
                            tables: &mut kept.tables,
                            additions: &mut kept.additions,
                        },
                        volatile: &mut volatile,
                    },
                );
            }
            let answer = read(&mut DomainTotals {
                tables: &mut kept.tables,
                additions: kept.additions,
                owned: true,
            });
            *kept = Kept {
                seen: (!volatile).then_some(key),
                ..Kept::default()
            };
            return answer;
        }
        if kept.key.as_ref() != Some(&key) || kept.stamps.len() != nodes.len() {
            *kept = Kept {
                key: Some(key),
                stamps: vec![0; nodes.len()],
                parts: vec![Vec::new(); nodes.len()],
                ..Kept::default()
            };
        }
        let mut scratch = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            if node.stamp != 0 && kept.stamps[i] == node.stamp {
                continue;
            }
            let old = std::mem::take(&mut kept.parts[i]);
            kept.apply(&old, -1);
            scratch.clear();
            part(
                node,
                &mut NodePart {
                    sink: Sink::Keep {
                        domains: &mut kept.domains,
                        entries: &mut scratch,
                    },
                    volatile: &mut volatile,
                },
            );
            kept.apply(&scratch, 1);
            kept.publish(&old);
            kept.publish(&scratch);
            // Reuse the old part's buffer when it had one.
            let mut new = old;
            new.clear();
            new.extend_from_slice(&scratch);
            kept.parts[i] = new;
            kept.stamps[i] = node.stamp;
        }
        let answer = read(&mut DomainTotals {
            tables: &mut kept.tables,
            additions: kept.additions,
            owned: false,
        });
        if volatile {
            *kept = Kept::default();
        }
        answer
    }

    fn lock(&self) -> MutexGuard<'_, Kept<K>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The totals of a [`DomainMemo::count`].
pub struct DomainTotals<'a> {
    tables: &'a mut Vec<DomainCounts>,
    additions: usize,
    /// Whether the tables are this call's alone (nothing is kept), so that
    /// [`DomainTotals::take_table`] can move them out.
    owned: bool,
}

impl DomainTotals<'_> {
    /// The domains of `table` some node added to (even 0), with their sums.
    pub fn table(&self, table: usize) -> &DomainCounts {
        static EMPTY: std::sync::OnceLock<DomainCounts> = std::sync::OnceLock::new();
        self.tables
            .get(table)
            .unwrap_or_else(|| EMPTY.get_or_init(DomainCounts::default))
    }

    /// [`DomainTotals::table`] as a value of its own: moved out when the memo keeps
    /// nothing of this call, else copied.
    pub fn take_table(&mut self, table: usize) -> DomainCounts {
        match self.tables.get_mut(table) {
            Some(t) if self.owned => std::mem::take(t),
            Some(t) => t.clone(),
            None => DomainCounts::default(),
        }
    }

    /// Every domain of `table` some node added to (even 0), as (topology key, value,
    /// sum), in order of key, then value: whatever a plugin builds from the list is
    /// the same in every run and on every target (see [`DomainCounts`]).
    pub fn domains(&self, table: usize) -> impl Iterator<Item = (&str, &str, i64)> {
        let mut all: Vec<(&str, &str, i64)> = self
            .table(table)
            .iter()
            .flat_map(|(key, by_value)| {
                by_value
                    .iter()
                    .map(move |(value, sum)| (key.as_str(), value.as_str(), *sum))
            })
            .collect();
        // Each (key, value) is listed once: no ties.
        all.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        all.into_iter()
    }

    /// Whether any node added anything, to any table.
    pub fn any(&self) -> bool {
        self.additions > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    /// Each pod on a node adds 1 to the node's zone in table 0, and its count of
    /// labels to table 1.
    fn count(memo: &DomainMemo<u32>, key: u32, nodes: &[&NodeInfo], walked: &mut usize) -> String {
        memo.count(
            key,
            nodes,
            |node, part| {
                *walked += 1;
                let zone = &node.node.labels["zone"];
                for p in &node.pods {
                    part.add(0, "zone", zone, 1);
                    part.add(1, "zone", zone, p.labels.len() as i64);
                }
            },
            |totals| {
                let mut out: Vec<String> = (0..2)
                    .flat_map(|t| {
                        totals
                            .domains(t)
                            .map(move |(k, v, n)| format!("{t}:{k}={v}:{n}"))
                    })
                    .collect();
                out.sort();
                out.join(" ")
            },
        )
    }

    fn node(name: &str, zone: &str, pods: usize, stamp: u64) -> NodeInfo {
        let mut b = testing::node(name).label("zone", zone);
        for i in 0..pods {
            b = b.pod(testing::pod(&format!("{name}-{i}")).label("app", "x"));
        }
        let mut info = b.build();
        info.stamp = stamp;
        info
    }

    #[test]
    fn only_nodes_whose_stamp_moved_are_walked_again() {
        let memo = DomainMemo::new();
        let a = node("a", "z1", 2, 1);
        let b = node("b", "z1", 1, 2);
        let c = node("c", "z2", 0, 3);
        let mut walked = 0;
        assert_eq!(
            count(&memo, 7, &[&a, &b, &c], &mut walked),
            "0:zone=z1:3 1:zone=z1:3"
        );
        assert_eq!(walked, 3);
        // The second call with the key walks every node again, keeping them.
        walked = 0;
        assert_eq!(
            count(&memo, 7, &[&a, &b, &c], &mut walked),
            "0:zone=z1:3 1:zone=z1:3"
        );
        assert_eq!(walked, 3);

        // Nothing changed: nothing walked, same totals.
        walked = 0;
        assert_eq!(
            count(&memo, 7, &[&a, &b, &c], &mut walked),
            "0:zone=z1:3 1:zone=z1:3"
        );
        assert_eq!(walked, 0);

        // A pod lands on c: only c is walked; its zone appears.
        let c2 = node("c", "z2", 1, 4);
        walked = 0;
        assert_eq!(
            count(&memo, 7, &[&a, &b, &c2], &mut walked),
            "0:zone=z1:3 0:zone=z2:1 1:zone=z1:3 1:zone=z2:1"
        );
        assert_eq!(walked, 1);

        // Both pods leave a: its additions are taken back; z1 keeps b's.
        let a2 = node("a", "z1", 0, 5);
        walked = 0;
        assert_eq!(
            count(&memo, 7, &[&a2, &b, &c2], &mut walked),
            "0:zone=z1:1 0:zone=z2:1 1:zone=z1:1 1:zone=z2:1"
        );
        assert_eq!(walked, 1);

        // The last pod of z1 leaves: the domain is no longer listed.
        let b2 = node("b", "z1", 0, 6);
        walked = 0;
        assert_eq!(
            count(&memo, 7, &[&a2, &b2, &c2], &mut walked),
            "0:zone=z2:1 1:zone=z2:1"
        );
        assert_eq!(walked, 1);
    }

    #[test]
    fn another_key_a_missing_stamp_or_another_node_count_walks_again() {
        let memo = DomainMemo::new();
        let a = node("a", "z1", 1, 1);
        let b = node("b", "z2", 1, 2);
        let mut walked = 0;
        for _ in 0..3 {
            count(&memo, 1, &[&a, &b], &mut walked);
        }
        assert_eq!(walked, 4, "kept from the second call on");
        walked = 0;
        count(&memo, 2, &[&a, &b], &mut walked);
        assert_eq!(walked, 2, "another key");
        count(&memo, 2, &[&a, &b], &mut walked);

        let unstamped = node("u", "z3", 1, 0);
        walked = 0;
        assert_eq!(
            count(&memo, 2, &[&a, &unstamped], &mut walked),
            "0:zone=z1:1 0:zone=z3:1 1:zone=z1:1 1:zone=z3:1"
        );
        assert_eq!(walked, 1, "only the node without a stamp");
        walked = 0;
        count(&memo, 2, &[&a, &unstamped], &mut walked);
        assert_eq!(walked, 1, "a node without a stamp, every time");

        walked = 0;
        assert_eq!(
            count(&memo, 2, &[&a], &mut walked),
            "0:zone=z1:1 1:zone=z1:1"
        );
        assert_eq!(walked, 1, "another node count");
    }

    #[test]
    fn keys_that_change_every_call_keep_nothing_and_count_right() {
        let memo = DomainMemo::new();
        let a = node("a", "z1", 2, 1);
        let b = node("b", "z2", 1, 2);
        let mut walked = 0;
        for key in [1, 2, 3, 1, 2, 3] {
            assert_eq!(
                count(&memo, key, &[&a, &b], &mut walked),
                "0:zone=z1:2 0:zone=z2:1 1:zone=z1:2 1:zone=z2:1"
            );
        }
        assert_eq!(walked, 12, "every node, every call");
        assert!(memo.lock().parts.is_empty(), "nothing kept");
    }

    #[test]
    fn a_volatile_part_is_not_kept() {
        let memo: DomainMemo<u32> = DomainMemo::new();
        let a = node("a", "z1", 1, 1);
        let mut walked = 0;
        for _ in 0..2 {
            memo.count(
                0,
                &[&a],
                |_, part| {
                    walked += 1;
                    part.volatile();
                },
                |totals| assert!(!totals.any()),
            );
        }
        assert_eq!(walked, 2);
    }

    #[test]
    fn domains_are_listed_in_order_of_key_then_value() {
        let memo: DomainMemo<u32> = DomainMemo::new();
        let a = node("a", "z1", 0, 1);
        let mut want: Vec<(String, String, i64)> = Vec::new();
        for key in ["zone", "host"] {
            for i in 0..16 {
                want.push((key.to_owned(), format!("v{i:02}"), i));
            }
        }
        let listed: Vec<(String, String, i64)> = memo.count(
            0,
            &[&a],
            |_, part| {
                // Added in reverse, so that neither this order nor the hash's is the
                // order asked for.
                for (key, value, n) in want.iter().rev() {
                    part.add(0, key, value, *n);
                }
            },
            |totals| {
                totals
                    .domains(0)
                    .map(|(k, v, n)| (k.to_owned(), v.to_owned(), n))
                    .collect()
            },
        );
        want.sort();
        assert_eq!(listed, want);
    }

    #[test]
    fn a_domain_added_zero_is_listed_and_counts_as_an_addition() {
        let memo: DomainMemo<u32> = DomainMemo::new();
        let a = node("a", "z1", 0, 1);
        memo.count(
            0,
            &[&a],
            |_, part| part.add(0, "zone", "z1", 0),
            |totals| {
                assert!(totals.any());
                assert_eq!(totals.domains(0).collect::<Vec<_>>(), [("zone", "z1", 0)]);
                assert_eq!(totals.domains(1).count(), 0);
            },
        );
    }
}
