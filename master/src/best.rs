//! The incumbent of a branch and bound as the master keeps it: the best value, its record (or
//! every optimal record with `--all-best`), and what the workers must be told.
//!
//! Workers send solutions with their reports; the master takes every solution it is sent (a
//! solution is feasible whether or not its job is committed) and broadcasts each improvement. Jobs
//! carry the incumbent the master knew when it handed them out, so no worker prunes with a value
//! the master cannot back with a record.

use crate::Totals;
use bts_protocol::{Incumbent, NO_VALUE, Solution};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The best solutions found so far.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Best {
    pub value: i64,
    /// The record of the first solution of `value` to arrive, or with `--all-best` every distinct
    /// record of that value: sorted when the run has ended, in order of arrival before.
    pub records: Vec<Vec<u8>>,
}

/// How a branch and bound run treats its incumbent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OptimumConfig {
    /// Keep every optimal solution (`--all-best`): subtrees that can tie are searched too.
    pub keep_ties: bool,
    /// Stop as soon as a solution of this value or more is found (`--target`).
    pub target: Option<i64>,
}

/// The master's incumbent.
#[derive(Clone, Debug)]
pub(crate) struct Incumbents {
    config: OptimumConfig,
    value: i64,
    records: BTreeSet<Vec<u8>>,
    /// The order in which records arrived when ties are not kept (the first one stays).
    first: Option<Vec<u8>>,
}

impl Incumbents {
    pub(crate) fn new(config: OptimumConfig, saved: Option<&Best>) -> Self {
        let mut s = Self { config, value: NO_VALUE, records: BTreeSet::new(), first: None };
        if let Some(best) = saved {
            s.value = best.value;
            s.first = best.records.first().cloned();
            s.records = best.records.iter().cloned().collect();
        }
        s
    }

    /// What workers must beat.
    pub(crate) fn incumbent(&self) -> Incumbent {
        Incumbent { value: self.value, keep_ties: self.config.keep_ties, target: self.config.target }
    }

    /// Takes solutions from a report, and brings `best` (the run's totals' copy, which checkpoints
    /// save) up to date: a tie is added to it, not copied with all the others. True if the best
    /// value rose (workers should be told).
    pub(crate) fn offer(&mut self, solutions: impl IntoIterator<Item = Solution>, best: &mut Option<Best>) -> bool {
        let before = self.value;
        let mut ties = Vec::new();
        for s in solutions {
            if s.value == NO_VALUE || s.value < self.value {
                continue;
            }
            if s.value > self.value {
                self.value = s.value;
                self.records.clear();
                self.first = Some(s.record.clone());
                self.records.insert(s.record);
            } else if self.config.keep_ties && !self.records.contains(&s.record) {
                self.records.insert(s.record.clone());
                ties.push(s.record);
            }
        }
        match best {
            Some(b) if self.value == before => b.records.append(&mut ties),
            _ => *best = self.best(),
        }
        self.value > before
    }

    /// A solution reached the target.
    pub(crate) fn reached_target(&self) -> bool {
        self.value != NO_VALUE && self.config.target.is_some_and(|t| self.value >= t)
    }

    /// Commits the best records as the run's output: appended to `output`, counted in `totals`.
    pub(crate) fn write(&self, totals: &mut Totals, output: &mut Vec<u8>) {
        totals.best = self.best();
        for record in totals.best.iter().flat_map(|b| &b.records) {
            output.extend_from_slice(record);
            output.push(b'\n');
            totals.outputs += 1;
            totals.output_bytes += record.len() as u64 + 1;
            totals.best_len += record.len() as u64 + 1;
        }
    }

    /// The best solutions, if any was found.
    pub(crate) fn best(&self) -> Option<Best> {
        if self.value == NO_VALUE {
            return None;
        }
        let records = match self.config.keep_ties {
            true => self.records.iter().cloned().collect(),
            false => self.first.iter().cloned().collect(),
        };
        Some(Best { value: self.value, records })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solution(value: i64, record: &str) -> Solution {
        Solution { value, record: record.as_bytes().to_vec() }
    }

    #[test]
    fn the_best_value_keeps_its_first_record() {
        let (mut inc, mut best) = (Incumbents::new(OptimumConfig::default(), None), None);
        assert!(inc.best().is_none());
        assert!(inc.offer([solution(3, "a"), solution(5, "b")], &mut best));
        assert!(!inc.offer([solution(5, "c"), solution(4, "d")], &mut best));
        assert_eq!(inc.best(), Some(Best { value: 5, records: vec![b"b".to_vec()] }));
        assert_eq!(best, inc.best());
        assert_eq!(inc.incumbent(), Incumbent { value: 5, keep_ties: false, target: None });
    }

    #[test]
    fn all_best_keeps_distinct_ties_and_drops_them_on_improvement() {
        let config = OptimumConfig { keep_ties: true, target: Some(9) };
        let (mut inc, mut best) = (Incumbents::new(config, None), None);
        inc.offer([solution(5, "b"), solution(5, "a"), solution(5, "b")], &mut best);
        assert_eq!(inc.best().unwrap().records, vec![b"a".to_vec(), b"b".to_vec()]);
        // Ties that come later are added to the totals' copy, each once, in order of arrival.
        assert!(!inc.offer([solution(5, "d"), solution(5, "a"), solution(5, "c"), solution(4, "e")], &mut best));
        let arrived: Vec<&[u8]> = best.as_ref().unwrap().records.iter().map(Vec::as_slice).collect();
        assert_eq!(arrived, [b"a", b"b", b"d", b"c"]);
        assert!(!inc.reached_target());
        inc.offer([solution(9, "z")], &mut best);
        assert_eq!(inc.best().unwrap().records, vec![b"z".to_vec()]);
        assert_eq!(best, inc.best());
        assert!(inc.reached_target());
        let resumed = Incumbents::new(config, inc.best().as_ref());
        assert_eq!(resumed.best(), inc.best());
    }
}
