//! 0/1 knapsack as a branch and bound: items sorted by value density, a node decides the first
//! remaining item that fits (take it, then leave it; the items before it, which do not fit, are
//! left at once), and Dantzig's fractional bound prunes.
//!
//! The file format: the capacity, then one `value weight` pair per line (non-negative integers);
//! blank lines and lines starting with `#` are ignored. A solution's record is
//! `value=V weight=W items=I,J,...` with the items numbered from 0 in the file's order.

use bts_worker::{Entry, Optimise, Recursive, Scope, Searcher, Tree, TreeSearcher};
use clap::Parser;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Arc;

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
    /// The search of the file's instance (see [`knapsack_searcher`]).
    pub fn searcher(&self) -> Result<Arc<dyn Searcher>, String> {
        let text = crate::read_instance("knapsack", &self.file)?;
        let error = |e: String| crate::about_file("knapsack", &self.file, &text, e);
        let (capacity, items) = parse(&text).map_err(error)?;
        knapsack_searcher(capacity, &items, text.as_bytes()).map_err(error)
    }
}

/// The search of an instance, jobs run by its recursion, its packings' bits inline up to 512 items
/// (a [`Knapsack`] up to 128, then four or eight 64-bit words), a [`WideKnapsack`] above. `file`
/// is the instance's text, which remote workers must have the same.
pub fn knapsack_searcher(capacity: u64, items: &[(u64, u64)], file: &[u8]) -> Result<Arc<dyn Searcher>, String> {
    let searcher = match items.len() {
        0..=128 => searcher_of::<u128>,
        129..=256 => searcher_of::<[u64; 4]>,
        257..=512 => searcher_of::<[u64; 8]>,
        _ => searcher_of::<Wide>,
    };
    searcher(capacity, items, file)
}

/// The search of an instance whose packings keep their bits as `B`, jobs run by its recursion.
fn searcher_of<B: Taken>(capacity: u64, items: &[(u64, u64)], file: &[u8]) -> Result<Arc<dyn Searcher>, String> {
    let knapsack = KnapsackOf::<B>::new(capacity, items)?;
    Ok(Arc::new(TreeSearcher::optimising(knapsack).recursive().read_from(file)))
}

/// The largest value or weight (so that no sum can overflow).
const MAX_NUMBER: u64 = 1 << 40;
/// The most items.
const MAX_ITEMS: usize = 1 << 16;

/// An instance of up to 128 items: its packings keep their bits inline, and a child is a few moves.
pub type Knapsack = KnapsackOf<u128>;

/// An instance of any size (up to 65,536 items).
pub type WideKnapsack = KnapsackOf<Wide>;

/// An instance, items sorted by value density (highest first), its packings' items as `B`.
#[derive(Clone, Debug)]
pub struct KnapsackOf<B> {
    capacity: i64,
    /// (value, weight), by decreasing value / weight: what the search reads, apart from the rest.
    items: Vec<(i64, i64)>,
    /// The items' positions in the file.
    positions: Vec<u32>,
    bits: std::marker::PhantomData<B>,
}

/// The items a packing takes, as bits.
pub trait Taken: Clone + Debug + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The most items it can hold.
    const MAX_ITEMS: usize;

    /// No item.
    fn none() -> Self;

    fn has(&self, i: usize) -> bool;

    /// Calls `f` with each item taken, in increasing order.
    fn each(&self, f: impl FnMut(usize));

    /// A copy with item `i` added; no item after `i` is taken (packings decide items in order).
    fn with(&self, i: usize) -> Self;

    /// The bits, handed on to the child that leaves an item: the parent has no other child left.
    fn hand_on(&mut self) -> Self;
}

impl Taken for u128 {
    const MAX_ITEMS: usize = 128;

    fn none() -> Self {
        0
    }

    fn has(&self, i: usize) -> bool {
        self >> i & 1 == 1
    }

    fn each(&self, mut f: impl FnMut(usize)) {
        each_bit(&[*self as u64, (self >> 64) as u64], 0, &mut f);
    }

    #[inline(always)]
    fn with(&self, i: usize) -> Self {
        self | 1 << i
    }

    #[inline(always)]
    fn hand_on(&mut self) -> Self {
        *self
    }
}

/// Up to `64 × N` items' bits inline: a child copies the words, and never allocates as a
/// [`Wide`] packing does once it takes an item beyond the 128th.
impl<const N: usize> Taken for [u64; N]
where
    [u64; N]: Serialize + DeserializeOwned,
{
    const MAX_ITEMS: usize = 64 * N;

    fn none() -> Self {
        [0; N]
    }

    fn has(&self, i: usize) -> bool {
        self[i / 64] >> (i % 64) & 1 == 1
    }

    fn each(&self, mut f: impl FnMut(usize)) {
        each_bit(self, 0, &mut f);
    }

    /// Word by word, in registers: setting the bit in a copy in memory stored one word into the
    /// copy, which the child then read whole, a load the store could not be forwarded to (a stall
    /// that took a sixth of a knapsack of 137 items).
    #[inline(always)]
    fn with(&self, i: usize) -> Self {
        let (word, bit) = (i / 64, 1 << (i % 64));
        std::array::from_fn(|k| self[k] | if k == word { bit } else { 0 })
    }

    #[inline(always)]
    fn hand_on(&mut self) -> Self {
        *self
    }
}

/// Calls `f` with `offset` plus the index of each bit set in `words`, in increasing order.
fn each_bit(words: &[u64], offset: usize, f: &mut impl FnMut(usize)) {
    for (k, &word) in words.iter().enumerate() {
        let mut rest = word;
        while rest != 0 {
            f(offset + 64 * k + rest.trailing_zeros() as usize);
            rest &= rest - 1;
        }
    }
}

/// The first 128 items' bits inline, the others in a thin box made when one of them is first taken
/// (a node of the first 128 items carries one null word, and dropping it is one test).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wide {
    first: u128,
    /// Bit `i - 128` for item `i`.
    #[allow(clippy::box_collection)]
    beyond: Option<Box<Vec<u64>>>,
}

impl Taken for Wide {
    const MAX_ITEMS: usize = MAX_ITEMS;

    fn none() -> Self {
        Wide::default()
    }

    fn has(&self, i: usize) -> bool {
        match i.checked_sub(128) {
            None => self.first.has(i),
            Some(j) => self.beyond.as_ref().and_then(|b| b.get(j / 64)).is_some_and(|w| w >> (j % 64) & 1 == 1),
        }
    }

    fn each(&self, mut f: impl FnMut(usize)) {
        self.first.each(&mut f);
        each_bit(self.beyond.as_deref().map_or(&[][..], Vec::as_slice), 128, &mut f);
    }

    #[inline(always)]
    fn with(&self, i: usize) -> Self {
        match i.checked_sub(128) {
            // Below item 128 no item beyond it is decided yet.
            None => Wide { first: self.first.with(i), beyond: None },
            Some(j) => self.beyond_with(j),
        }
    }

    #[inline(always)]
    fn hand_on(&mut self) -> Self {
        Wide { first: self.first, beyond: self.beyond.take() }
    }
}

impl Wide {
    /// A copy with bit `j` of `beyond` set.
    #[cold]
    fn beyond_with(&self, j: usize) -> Wide {
        let old = self.beyond.as_deref().map_or(&[][..], Vec::as_slice);
        let mut beyond = vec![0; old.len().max(j / 64 + 1)];
        beyond[..old.len()].copy_from_slice(old);
        beyond[j / 64] |= 1 << (j % 64);
        Wide { first: self.first, beyond: Some(Box::new(beyond)) }
    }
}

/// The items decided so far: the first `next` items in density order, those taken as bits.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct Packing<B: Taken = u128> {
    next: u32,
    value: i64,
    weight: i64,
    taken: B,
}

/// Reads the text format (see the module's documentation): the capacity and the items.
pub fn parse(text: &str) -> Result<(u64, Vec<(u64, u64)>), String> {
    let mut capacity = None;
    let mut items = Vec::new();
    // A byte-order mark (some Windows editors write one) is not part of the first line.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || {
            format!(
                "line {}: `{}` is not {}",
                i + 1,
                crate::quoted(line),
                if capacity.is_none() { "a capacity" } else { "`value weight`" }
            )
        };
        let mut numbers = Vec::new();
        for word in line.split_whitespace() {
            // A number past 64 bits is above the limit too, not a malformed line.
            let above = match word.parse::<u64>() {
                Ok(x) if x <= MAX_NUMBER => {
                    numbers.push(x);
                    continue;
                }
                Ok(_) => true,
                Err(e) => *e.kind() == std::num::IntErrorKind::PosOverflow,
            };
            return Err(if above { format!("line {}: {word} is above the limit of 2^40", i + 1) } else { bad() });
        }
        match (capacity, numbers.as_slice()) {
            (None, &[c]) => capacity = Some(c),
            (Some(_), &[v, w]) => items.push((v, w)),
            _ => return Err(bad()),
        }
    }
    let empty = match text.trim().is_empty() {
        true => "no capacity: the file is empty",
        false => "no capacity: the file holds only blank lines and comments",
    };
    Ok((capacity.ok_or(empty)?, items))
}

impl<B: Taken> KnapsackOf<B> {
    /// An instance of items `(value, weight)` and a capacity.
    pub fn new(capacity: u64, items: &[(u64, u64)]) -> Result<Self, String> {
        if capacity > MAX_NUMBER {
            return Err(format!("the capacity {capacity} is above the limit of 2^40"));
        }
        if items.len() > B::MAX_ITEMS {
            let wide = if B::MAX_ITEMS < MAX_ITEMS { " (a WideKnapsack takes more)" } else { "" };
            return Err(format!("{} items: at most {} are allowed{wide}", items.len(), B::MAX_ITEMS));
        }
        if let Some((v, w)) = items.iter().find(|&&(v, w)| v > MAX_NUMBER || w > MAX_NUMBER) {
            return Err(format!("the item `{v} {w}` is above the limit of 2^40"));
        }
        let mut order: Vec<u32> = (0..items.len() as u32).collect();
        // An item of neither value nor weight counts as weighing 1 (density 0): as 0/0 it would
        // tie with every item, and a sort by such an order leaves the densities out of order.
        let density = |i: u32| match items[i as usize] {
            (0, 0) => (0, 1),
            (v, w) => (v as i128, w as i128),
        };
        // v1/w1 > v2/w2 as v1*w2 > v2*w1 (weight 0 items come first); ties keep the file's order.
        order.sort_by(|&a, &b| {
            let ((va, wa), (vb, wb)) = (density(a), density(b));
            (vb * wa).cmp(&(va * wb))
        });
        Ok(Self {
            capacity: capacity as i64,
            items: order.iter().map(|&i| (items[i as usize].0 as i64, items[i as usize].1 as i64)).collect(),
            positions: order,
            bits: std::marker::PhantomData,
        })
    }

    /// Reads the text format (see the module's documentation).
    pub fn parse(text: &str) -> Result<Self, String> {
        let (capacity, items) = parse(text)?;
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
    pub fn dantzig(&self, p: &Packing<B>) -> i64 {
        let mut room = self.capacity - p.weight;
        let mut bound = p.value;
        for &(v, w) in &self.items[p.next as usize..] {
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

/// The children of a packing, made one at a time: the next item taken, then left. The second child
/// is the parent itself, moved on by one item.
pub struct PackingChildren<'a, B: Taken = u128> {
    knapsack: &'a KnapsackOf<B>,
    /// The parent's fields, apart so that the count below fits in their padding (a frame of 48
    /// bytes, not 64): its `next` moved to the item its children decide.
    next: u32,
    value: i64,
    weight: i64,
    taken: B,
    /// How many children may still come: 2 (taking the next item, then leaving it), 1 or 0.
    left: u8,
}

impl<B: Taken> Iterator for PackingChildren<'_, B> {
    type Item = Packing<B>;

    /// Inlined into the search loop: a child returned through memory stalls the next load of it.
    #[inline(always)]
    fn next(&mut self) -> Option<Packing<B>> {
        if self.left == 0 {
            return None;
        }
        let (next, value, weight) = (self.next + 1, self.value, self.weight);
        let i = self.next as usize;
        if self.left == 2 {
            self.left = 1;
            let (v, w) = self.knapsack.items[i];
            return Some(Packing { next, value: value + v, weight: weight + w, taken: self.taken.with(i) });
        }
        self.left = 0;
        Some(Packing { next, value, weight, taken: self.taken.hand_on() })
    }
}

impl<B: Taken> Tree for KnapsackOf<B> {
    type Node = Packing<B>;
    type Children<'a> = PackingChildren<'a, B>;

    fn root(&self) -> Packing<B> {
        Packing { next: 0, value: 0, weight: 0, taken: B::none() }
    }

    /// Take the first item that fits, then leave it.
    #[inline]
    fn children<'a>(&'a self, p: &Packing<B>, depth: u32) -> PackingChildren<'a, B> {
        self.children_owned(p.clone(), depth)
    }

    #[inline]
    fn children_owned<'a>(&'a self, p: Packing<B>, _depth: u32) -> PackingChildren<'a, B> {
        let Packing { next, value, weight, taken } = p;
        // The items that do not fit are left out at once (a chain of nodes of one child each,
        // whose bounds only fall): the children decide the first that fits.
        let room = self.capacity - weight;
        let (next, left) = match self.items[next as usize..].iter().position(|&(_, w)| w <= room) {
            Some(skipped) => (next + skipped as u32, 2),
            None => (next, 0),
        };
        PackingChildren { knapsack: self, next, value, weight, taken, left }
    }

    /// Called for every improvement (along a first descent through many items, every node) and,
    /// with `--all-best`, for every tie: it costs the items taken and a word per 64 items, not a
    /// pass over every item (65,536 tied packings of 65,536 items took 6 s).
    fn output(&self, p: &Packing<B>, _depth: u32, out: &mut String) -> bool {
        use std::fmt::Write;
        let mut taken = Vec::new();
        p.taken.each(|i| taken.push(self.positions[i]));
        taken.sort_unstable();
        let _ = write!(out, "value={} weight={} items=", p.value, p.weight);
        let mut comma = "";
        for position in taken {
            let _ = write!(out, "{comma}{position}");
            comma = ",";
        }
        true
    }
}

/// The knapsack's jobs by recursion, over the children of [`Tree::children`] in its order: a
/// packing's numbers stay in registers.
impl<B: Taken> Recursive for KnapsackOf<B> {
    #[inline]
    fn search_below(&self, p: Packing<B>, depth: u32, scope: &mut impl Scope<Self>) {
        let room = self.capacity - p.weight;
        let Some(skipped) = self.items[p.next as usize..].iter().position(|&(_, w)| w <= room) else {
            return;
        };
        let i = p.next as usize + skipped;
        let (v, w) = self.items[i];
        let next = i as u32 + 1;
        let take = Packing { next, value: p.value + v, weight: p.weight + w, taken: p.taken.with(i) };
        match scope.enter(&take, depth + 1) {
            Entry::Visited => self.search_below(take, depth + 1, scope),
            Entry::Skipped => {}
            Entry::Done => return,
        }
        let leave = Packing { next, ..p };
        if scope.enter(&leave, depth + 1) == Entry::Visited {
            self.search_below(leave, depth + 1, scope);
        }
    }
}

impl<B: Taken> Optimise for KnapsackOf<B> {
    #[inline]
    fn value(&self, p: &Packing<B>, _depth: u32) -> Option<i64> {
        Some(p.value)
    }

    #[inline]
    fn bound(&self, p: &Packing<B>, _depth: u32) -> i64 {
        self.dantzig(p)
    }

    /// Taking the decided item first: Dantzig's bound is the linear relaxation's optimum (rounded
    /// down), and the relaxation over the items from the decided one on takes that item whole, so
    /// the first child's bound is that optimum and the second's (the same items but that one) is
    /// no greater.
    const BOUNDS_DESCEND: bool = true;
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
        assert_eq!(k.positions, vec![2, 1, 0]);
        assert_eq!(Knapsack::parse("\u{feff}10\n6 5\n").unwrap().capacity, 10, "a byte-order mark");
        for (text, error) in [
            ("", "no capacity: the file is empty"),
            ("# only a comment\n\n", "no capacity: the file holds only blank lines and comments"),
            ("\u{feff}\u{feff}10\n", "line 1: `\\u{feff}10` is not a capacity"),
            ("10 3\n", "line 1: `10 3` is not a capacity"),
            ("10\n1 2 3\n", "line 2"),
            ("10\n1 -2\n", "line 2"),
            ("10\nx y\n", "line 2"),
            ("10\n1099511627777 1\n", "line 2: 1099511627777 is above the limit of 2^40"),
            ("1099511627777\n", "line 1: 1099511627777 is above"),
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

    #[test]
    fn the_children_decide_the_first_item_that_fits() {
        // By density: 9/3 (item 1), 8/4 (item 0), 1/1 (item 2).
        let k = Knapsack::parse("8\n8 4\n9 3\n1 1\n").unwrap();
        let children = |next, value, weight, taken| -> Vec<Packing> {
            k.children(&Packing { next, value, weight, taken }, 0).collect()
        };
        // Room 5: 8/4 fits; take it, then leave it.
        assert_eq!(
            children(1, 9, 3, 0b1),
            vec![
                Packing { next: 2, value: 17, weight: 7, taken: 0b11 },
                Packing { next: 2, value: 9, weight: 3, taken: 0b1 }
            ]
        );
        // Room 2: neither 9/3 nor 8/4 fits, both are left at once and 1/1 decided.
        assert_eq!(
            children(0, 0, 6, 0),
            vec![
                Packing { next: 3, value: 1, weight: 7, taken: 0b100 },
                Packing { next: 3, value: 0, weight: 6, taken: 0 }
            ]
        );
        // Room 0: nothing fits, a leaf.
        assert!(children(0, 0, 8, 0).is_empty());
        let mut out = String::new();
        k.output(&Packing { next: 3, value: 10, weight: 4, taken: 0b101 }, 0, &mut out);
        assert_eq!(out, "value=10 weight=4 items=1,2");
    }

    proptest::proptest! {
        // Small numbers: items of value or weight 0, or both, and equal densities come often.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// A search that prunes by the bound finds the optimum of every subset (items of weight or
        /// value 0 among them).
        #[test]
        fn pruning_by_the_bound_keeps_the_optimum_of_brute_force(
            capacity in 0u64..60,
            items in proptest::collection::vec((0u64..10, 0u64..10), 0..10),
        ) {
            let brute = (0..1u32 << items.len())
                .map(|set| {
                    let chosen = items.iter().enumerate().filter(|&(i, _)| set >> i & 1 == 1);
                    chosen.fold((0, 0), |(v, w), (_, item)| (v + item.0, w + item.1))
                })
                .filter(|&(_, w)| w <= capacity)
                .map(|(v, _)| v as i64)
                .max();
            let k = Knapsack::new(capacity, &items).unwrap();
            let (mut best, mut stack) = (-1, vec![k.root()]);
            while let Some(p) = stack.pop() {
                best = best.max(p.value);
                stack.extend(k.children(&p, 0).filter(|c| k.dantzig(c) > best));
            }
            proptest::prop_assert_eq!(Some(best), brute);
        }

        /// What `BOUNDS_DESCEND` promises, on every node of small instances (items of weight or
        /// value 0 and equal densities among them): no child's bound exceeds an earlier sibling's.
        #[test]
        fn the_children_come_in_non_increasing_order_of_bound(
            capacity in 0u64..60,
            items in proptest::collection::vec((0u64..10, 0u64..10), 0..10),
        ) {
            let k = Knapsack::new(capacity, &items).unwrap();
            let mut stack = vec![k.root()];
            while let Some(p) = stack.pop() {
                let children: Vec<Packing> = k.children(&p, 0).collect();
                let bounds: Vec<i64> = children.iter().map(|c| k.dantzig(c)).collect();
                proptest::prop_assert!(bounds.windows(2).all(|b| b[0] >= b[1]), "{p:?}: {bounds:?}");
                stack.extend(children);
            }
        }
    }

    /// What a job did: its solutions, the nodes it returned and its statistics.
    type JobOutcome<B> = (Vec<bts_protocol::Solution>, Vec<(Packing<B>, u32)>, bts_worker::JobStats);

    /// One job of `k` from `start`, by the loop over children iterators and by the recursion,
    /// each with an incumbent of its own at `incumbent`.
    fn both_ways<B: Taken>(
        k: &KnapsackOf<B>,
        start: &Packing<B>,
        depth: u32,
        limits: bts_worker::Limits,
        incumbent: i64,
    ) -> [JobOutcome<B>; 2] {
        let run = |recursive: bool| {
            let goal = bts_worker::Maximise::default();
            goal.0.raise(bts_protocol::Incumbent { value: incumbent, ..Default::default() });
            let (mut found, mut back) = (Vec::new(), Vec::new());
            let job = bts_worker::Job { start, depth, limits, abort: None };
            let mut give_back = |p, d| back.push((p, d));
            let out = &mut bts_worker::CountOnly;
            let stats = if recursive {
                bts_worker::search_recursive(k, &goal, job, out, &mut found, &mut give_back)
            } else {
                bts_worker::search_with(k, &goal, job, out, &mut found, &mut give_back)
            };
            (found, back, stats)
        };
        [run(false), run(true)]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        /// The knapsack's own recursion runs a job as the loop over its children does: the same
        /// solutions, frontier and statistics, whatever the budget, depth limit, start node and
        /// incumbent; with narrow and wide packings.
        #[test]
        fn the_recursion_runs_a_job_as_the_children_do(
            capacity in 0u64..80,
            items in proptest::collection::vec((0u64..10, 0u64..10), 0..12),
            budget in 1u64..60,
            limit in proptest::option::of(0u32..8),
            walk in proptest::collection::vec(proptest::bool::ANY, 0..6),
            incumbent in proptest::option::of(0i64..40),
        ) {
            let incumbent = incumbent.unwrap_or(bts_protocol::NO_VALUE);
            let k = Knapsack::new(capacity, &items).unwrap();
            let wide = WideKnapsack::new(capacity, &items).unwrap();
            // The start: down from the root, taking or leaving as `walk` says while there is a child.
            let (mut start, mut wide_start, mut depth) = (k.root(), wide.root(), 0);
            for &take in &walk {
                let (c, wc): (Vec<Packing>, Vec<Packing<Wide>>) = (k.children(&start, depth).collect(), wide.children(&wide_start, depth).collect());
                let Some(i) = (!c.is_empty()).then(|| usize::from(!take) % c.len()) else { break };
                (start, wide_start, depth) = (c[i].clone(), wc[i].clone(), depth + 1);
            }
            let limits = bts_worker::Limits { budget, max_depth: limit.map(|l| depth + l) };
            let [looped, recursive] = both_ways(&k, &start, depth, limits, incumbent);
            proptest::prop_assert_eq!(&recursive, &looped);
            let [looped, recursive] = both_ways(&wide, &wide_start, depth, limits, incumbent);
            proptest::prop_assert_eq!(&recursive, &looped);
        }
    }

    fn taken_items(bits: &impl Taken) -> Vec<usize> {
        let mut items = Vec::new();
        bits.each(|i| items.push(i));
        items
    }

    #[test]
    fn wide_packings_keep_the_bits_of_every_item() {
        let none = Wide::none();
        let a = none.with(5);
        let b = a.with(130).with(300);
        assert!(a.has(5) && !a.has(130) && a.beyond.is_none());
        assert!(b.has(5) && b.has(130) && b.has(300) && !b.has(131) && !b.has(299));
        assert_eq!(taken_items(&b), [5, 130, 300]);
        assert_eq!(taken_items(&0u128.with(0).with(64).with(127)), [0, 64, 127]);
        let mut handed = b.clone();
        assert_eq!(handed.hand_on(), b);
        let items = vec![(1, 1); 129];
        assert!(Knapsack::new(10, &items).unwrap_err().contains("WideKnapsack"));
        assert_eq!(WideKnapsack::new(10, &items).unwrap().len(), 129);
    }

    #[test]
    fn inline_packings_keep_the_bits_of_every_item() {
        let taken = [0, 5, 127, 128, 130, 255, 256, 300, 511];
        let bits = taken.iter().fold(<[u64; 8]>::none(), |b, &i| b.with(i));
        for i in 0..512 {
            assert_eq!(bits.has(i), taken.contains(&i), "item {i}");
        }
        assert_eq!(taken_items(&bits), taken);
        let items = vec![(1, 1); 257];
        assert!(KnapsackOf::<[u64; 4]>::new(10, &items).unwrap_err().contains("at most 256"));
        assert_eq!(KnapsackOf::<[u64; 8]>::new(10, &items).unwrap().len(), 257);
    }
}
