//! The branch-and-bound snippet of the README, verbatim (tests/examples.rs checks that it is): the
//! subset of numbers whose sum comes closest to a capacity without passing it.
//!
//! ```text
//! cargo run --release --example bnb
//! ```

use bts::{Optimise, Tree};

pub struct SubsetSum {
    pub items: Vec<i64>, // non-negative
    pub capacity: i64,
}

/// The items decided so far (taken or not, in order), those taken and their sum.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Partial {
    next: usize,
    taken: Vec<usize>,
    sum: i64,
}

impl Tree for SubsetSum {
    type Node = Partial;
    type Children<'a> = std::vec::IntoIter<Partial>;

    fn root(&self) -> Partial {
        Partial { next: 0, taken: Vec::new(), sum: 0 }
    }

    // Take the next item if it fits, then leave it.
    fn children<'a>(&'a self, p: &Partial, _depth: u32) -> Self::Children<'a> {
        let mut children = Vec::new();
        if let Some(&item) = self.items.get(p.next) {
            if p.sum + item <= self.capacity {
                let mut taken = p.taken.clone();
                taken.push(p.next);
                children.push(Partial { next: p.next + 1, taken, sum: p.sum + item });
            }
            children.push(Partial { next: p.next + 1, ..p.clone() });
        }
        children.into_iter()
    }

    // The record of a solution: what the run writes for the best one.
    fn output(&self, p: &Partial, _depth: u32, out: &mut String) -> bool {
        out.push_str(&format!("sum {} items {:?}", p.sum, p.taken));
        true
    }
}

impl Optimise for SubsetSum {
    // Every node is a feasible solution: the sum of the items taken.
    fn value(&self, p: &Partial, _depth: u32) -> Option<i64> {
        Some(p.sum)
    }

    // No solution below can pass the capacity, nor take more than all the items left.
    fn bound(&self, p: &Partial, _depth: u32) -> i64 {
        let rest: i64 = self.items[p.next..].iter().sum();
        (p.sum + rest).min(self.capacity)
    }
}

pub fn best(items: Vec<i64>, capacity: i64) -> Result<Option<bts::Best>, bts::RunError> {
    let mut record = Vec::new(); // the best solution's record
    let finished = bts::Run::optimising("subset-sum", SubsetSum { items, capacity })
        .options(bts::RunOptions { workers: 2, ..Default::default() })
        .run(&mut record)?;
    assert_eq!(finished.outcome, bts::Outcome::Complete);
    Ok(finished.summary.totals.best) // its value and record
}

// The end of the README's branch and bound; its "own recursion" follows.

use bts::{Entry, Recursive, Scope, TreeSearcher, TreeSpec};
use std::sync::Arc;

impl Recursive for SubsetSum {
    // The children of `children`, in its order; the scope prunes, visits or hands back each.
    fn search_below(&self, p: Partial, depth: u32, scope: &mut impl Scope<Self>) {
        for child in self.children(&p, depth) {
            match scope.enter(&child, depth + 1) {
                Entry::Visited => self.search_below(child, depth + 1, scope), // counted and offered
                Entry::Skipped => {}   // pruned, or handed back: past the budget or the depth limit
                Entry::Done => return, // pruned, and so are its later siblings (BOUNDS_DESCEND)
            }
        }
    }
}

pub fn best_by_recursion(items: Vec<i64>, capacity: i64) -> Result<Option<bts::Best>, bts::RunError> {
    let searcher = TreeSearcher::optimising(SubsetSum { items, capacity }).recursive();
    let spec = TreeSpec::new("subset-sum", Vec::<String>::new());
    let finished = bts::Run::with_searcher(spec, Arc::new(searcher))
        .options(bts::RunOptions { workers: 2, ..Default::default() })
        .run(&mut Vec::new())?;
    assert_eq!(finished.outcome, bts::Outcome::Complete);
    Ok(finished.summary.totals.best)
}

fn main() {
    let items = vec![31, 41, 59, 26, 53, 58, 97, 93, 23, 84, 62, 64, 33, 83, 27, 95, 2, 88];
    let best = best(items.clone(), 500).unwrap().expect("the empty subset at least");
    println!("{}: {}", best.value, String::from_utf8_lossy(&best.records[0]));
    let by_recursion = best_by_recursion(items, 500).unwrap().expect("the empty subset at least");
    println!("by recursion: {}", by_recursion.value);
}
