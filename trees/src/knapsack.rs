//! 0/1 knapsack as a branch and bound: items sorted by value density, a node decides the next item
//! (take it if it fits, then leave it), and Dantzig's fractional bound prunes.
//!
//! The file format: the capacity, then one `value weight` pair per line (non-negative integers);
//! blank lines and lines starting with `#` are ignored. A solution's record is
//! `value=V weight=W items=I,J,...` with the items numbered from 0 in the file's order.

use bts_worker::{Optimise, Tree};
use clap::Parser;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Options of `bts run knapsack`.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "knapsack",
    no_binary_name = true,
    about = "0/1 knapsack by branch and bound (Dantzig bound); the best packing is the output record"
)]
pub struct KnapsackArgs {
    /// The instance: the capacity, then one `value weight` pair per line.
    #[arg(long)]
    pub file: PathBuf,
}

impl KnapsackArgs {
    pub fn build(&self) -> Result<Knapsack, String> {
        let text = std::fs::read_to_string(&self.file)
            .map_err(|e| format!("knapsack: cannot read {}: {e}", self.file.display()))?;
        Knapsack::parse(&text).map_err(|e| format!("knapsack: {}: {e}", self.file.display()))
    }
}

/// The largest value or weight (so that no sum can overflow).
const MAX_NUMBER: u64 = 1 << 40;
/// The most items.
const MAX_ITEMS: usize = 1 << 16;

/// An instance, items sorted by value density (highest first).
#[derive(Clone, Debug)]
pub struct Knapsack {
    capacity: i64,
    /// (value, weight, position in the file), by decreasing value / weight.
    items: Vec<(i64, i64, u32)>,
}

/// The items decided so far: the first `next` items in density order, those taken as bits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Packing {
    next: u32,
    value: i64,
    weight: i64,
    /// Items 0 to 127 taken: inline, so that a child costs a few moves, not a copy of a buffer.
    taken: u128,
    /// Items from 128 on taken, bit `i - 128`; none until one of them is taken.
    beyond: Beyond,
}

/// A thin box: a node of the first 128 items carries one null word, and dropping it is one test
/// (measured: a `Vec` or a boxed slice here cost 10% to 18% of the search's speed).
#[allow(clippy::box_collection)]
type Beyond = Option<Box<Vec<u64>>>;

impl Packing {
    fn has(&self, i: usize) -> bool {
        match i.checked_sub(128) {
            None => self.taken >> i & 1 == 1,
            Some(j) => self.beyond.as_ref().and_then(|b| b.get(j / 64)).is_some_and(|w| w >> (j % 64) & 1 == 1),
        }
    }

    /// The child that takes item `next` (of value `v` and weight `w`).
    #[inline(always)]
    fn taking(&self, v: i64, w: i64) -> Packing {
        let i = self.next as usize;
        // Items are decided in order: below item 128 no item beyond it is decided yet.
        let (mut taken, mut beyond) = (self.taken, None);
        match i.checked_sub(128) {
            None => taken |= 1 << i,
            Some(j) => beyond = self.beyond_with(j),
        }
        Packing { next: self.next + 1, value: self.value + v, weight: self.weight + w, taken, beyond }
    }

    /// A copy of `beyond` with bit `j` set.
    #[cold]
    fn beyond_with(&self, j: usize) -> Beyond {
        let old = self.beyond.as_deref().map_or(&[][..], Vec::as_slice);
        let mut beyond = vec![0; old.len().max(j / 64 + 1)];
        beyond[..old.len()].copy_from_slice(old);
        beyond[j / 64] |= 1 << (j % 64);
        Some(Box::new(beyond))
    }
}

impl Knapsack {
    /// An instance of items `(value, weight)` and a capacity.
    pub fn new(capacity: u64, items: &[(u64, u64)]) -> Result<Self, String> {
        if capacity > MAX_NUMBER {
            return Err(format!("the capacity {capacity} is above the limit of 2^40"));
        }
        if items.len() > MAX_ITEMS {
            return Err(format!("{} items: at most {MAX_ITEMS} are allowed", items.len()));
        }
        if let Some((v, w)) = items.iter().find(|&&(v, w)| v > MAX_NUMBER || w > MAX_NUMBER) {
            return Err(format!("the item `{v} {w}` is above the limit of 2^40"));
        }
        let mut items: Vec<(i64, i64, u32)> =
            items.iter().enumerate().map(|(i, &(v, w))| (v as i64, w as i64, i as u32)).collect();
        // v1/w1 > v2/w2 as v1*w2 > v2*w1 (weight 0 items come first); ties keep the file's order.
        items.sort_by(|a, b| (b.0 as i128 * a.1 as i128).cmp(&(a.0 as i128 * b.1 as i128)));
        Ok(Self { capacity: capacity as i64, items })
    }

    /// Reads the text format (see the module's documentation).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut capacity = None;
        let mut items = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let numbers: Result<Vec<u64>, _> = line.split_whitespace().map(str::parse::<u64>).collect();
            let bad = || {
                format!(
                    "line {}: `{line}` is not {}",
                    i + 1,
                    if capacity.is_none() { "a capacity" } else { "`value weight`" }
                )
            };
            let numbers = numbers.map_err(|_| bad())?;
            match (capacity, numbers.as_slice()) {
                (None, &[c]) => capacity = Some(c),
                (Some(_), &[v, w]) => items.push((v, w)),
                _ => return Err(bad()),
            }
        }
        let capacity = capacity.ok_or("no capacity: the file is empty")?;
        Self::new(capacity, &items)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Dantzig's bound: the packing's value plus a greedy fill of the remaining items in density
    /// order, the first that does not fit taken fractionally (rounded down).
    #[inline]
    pub fn dantzig(&self, p: &Packing) -> i64 {
        let mut room = self.capacity - p.weight;
        let mut bound = p.value;
        for &(v, w, _) in &self.items[p.next as usize..] {
            if w <= room {
                room -= w;
                bound += v;
            } else {
                // The fraction of the item that fits; its product needs 128 bits only when
                // numbers are large.
                return bound
                    + match v.checked_mul(room) {
                        Some(product) => product / w,
                        None => (v as i128 * room as i128 / w as i128) as i64,
                    };
            }
        }
        bound
    }
}

/// The children of a packing, made one at a time: the next item taken (if it fits), then left.
/// The second child is the parent itself, moved on by one item.
pub struct PackingChildren<'a> {
    knapsack: &'a Knapsack,
    parent: Packing,
    /// How many children may still come: 2 (taking the next item, then leaving it), 1 or 0.
    left: u8,
}

impl Iterator for PackingChildren<'_> {
    type Item = Packing;

    /// Inlined into the search loop: a child returned through memory stalls the next load of it.
    #[inline(always)]
    fn next(&mut self) -> Option<Packing> {
        if self.left == 0 {
            return None;
        }
        let p = &mut self.parent;
        if self.left == 2 {
            self.left = 1;
            let (v, w, _) = self.knapsack.items[p.next as usize];
            if p.weight + w <= self.knapsack.capacity {
                return Some(p.taking(v, w));
            }
        }
        self.left = 0;
        Some(Packing { next: p.next + 1, beyond: std::mem::take(&mut p.beyond), ..*p })
    }
}

impl Tree for Knapsack {
    type Node = Packing;
    type Children<'a> = PackingChildren<'a>;

    fn root(&self) -> Packing {
        Packing { next: 0, value: 0, weight: 0, taken: 0, beyond: None }
    }

    /// Take the next item if it fits, then leave it.
    #[inline]
    fn children<'a>(&'a self, p: &Packing, depth: u32) -> PackingChildren<'a> {
        self.children_owned(p.clone(), depth)
    }

    #[inline]
    fn children_owned<'a>(&'a self, p: Packing, _depth: u32) -> PackingChildren<'a> {
        let left = if (p.next as usize) < self.items.len() { 2 } else { 0 };
        PackingChildren { knapsack: self, parent: p, left }
    }

    fn output(&self, p: &Packing, _depth: u32, out: &mut String) -> bool {
        use std::fmt::Write;
        let mut items: Vec<u32> = (0..p.next as usize).filter(|&i| p.has(i)).map(|i| self.items[i].2).collect();
        items.sort_unstable();
        let items: Vec<String> = items.iter().map(u32::to_string).collect();
        let _ = write!(out, "value={} weight={} items={}", p.value, p.weight, items.join(","));
        true
    }
}

impl Optimise for Knapsack {
    #[inline]
    fn value(&self, p: &Packing, _depth: u32) -> Option<i64> {
        Some(p.value)
    }

    #[inline]
    fn bound(&self, p: &Packing, _depth: u32) -> i64 {
        self.dantzig(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_and_its_errors() {
        let k = Knapsack::parse("# a comment\n10\n\n6 5\n5 4\n  4 3\n").unwrap();
        assert_eq!(k.len(), 3);
        assert_eq!(k.capacity, 10);
        // Densities 1.2, 1.25, 1.33: the last item comes first.
        assert_eq!(k.items.iter().map(|i| i.2).collect::<Vec<_>>(), vec![2, 1, 0]);
        for (text, error) in [
            ("", "no capacity"),
            ("10 3\n", "line 1: `10 3` is not a capacity"),
            ("10\n1 2 3\n", "line 2"),
            ("10\n1 -2\n", "line 2"),
            ("10\nx y\n", "line 2"),
            ("10\n1099511627777 1\n", "above the limit"),
        ] {
            let e = Knapsack::parse(text).unwrap_err();
            assert!(e.contains(error), "{text:?}: {e}");
        }
    }

    #[test]
    fn the_dantzig_bound_fills_greedily_then_takes_a_fraction() {
        let k = Knapsack::parse("10\n6 5\n5 4\n4 3\n").unwrap();
        // Take 4/3 and 5/4 (weight 7, value 9), then 3/5 of 6/5: 9 + 3.6 -> 12.
        assert_eq!(k.dantzig(&k.root()), 12);
        let mut out = String::new();
        k.output(&k.root(), 0, &mut out);
        assert_eq!(out, "value=0 weight=0 items=");
    }
}
