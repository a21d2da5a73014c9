//! Maximum clique as a branch and bound, in the manner of MCS and San Segundo's BBMC: a node is a
//! clique and its candidates (a bitset), the candidates are coloured greedily, and the children
//! extend the clique by one candidate each, highest colour first, each bounded by the clique's size
//! plus its colour. Vertices are renumbered by decreasing degree; records use the file's numbers.
//!
//! Graphs come in DIMACS `.clq` form: `c` comment lines, one `p edge N M` line, then `e U V` lines
//! with vertices numbered from 1. A solution's record is its vertices, sorted, space-separated.

use bts_worker::{Optimise, Searcher, Tree, TreeSearcher};
use clap::Parser;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use std::path::PathBuf;
use std::sync::Arc;

/// Options of `bts run maxclique`.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "maxclique",
    no_binary_name = true,
    about = "Maximum clique by branch and bound (greedy colouring bound, bitsets); the clique is the output record"
)]
pub struct MaxCliqueArgs {
    /// The graph, in DIMACS `.clq` form (`p edge N M`, `e U V`).
    #[arg(long)]
    pub graph: PathBuf,
}

impl MaxCliqueArgs {
    pub fn build(&self) -> Result<MaxClique, String> {
        Ok(self.read()?.0)
    }

    /// The graph's search, which knows the file it was read from.
    pub fn searcher(&self) -> Result<Arc<dyn Searcher>, String> {
        let (graph, text) = self.read()?;
        Ok(Arc::new(TreeSearcher::optimising(graph).read_from(text.as_bytes())))
    }

    fn read(&self) -> Result<(MaxClique, String), String> {
        let text = crate::read_instance("maxclique", &self.graph)?;
        let graph = MaxClique::parse(&text).map_err(|e| crate::about_file("maxclique", &self.graph, &text, e))?;
        Ok((graph, text))
    }
}

/// The most vertices.
const MAX_VERTICES: usize = 1 << 16;

/// A graph with bitset adjacency rows, vertices renumbered by decreasing degree.
#[derive(Clone, Debug)]
pub struct MaxClique {
    n: usize,
    words: usize,
    /// Row v: the neighbours of v, `words` words from `v * words`.
    adjacency: Vec<u64>,
    /// The file's number (from 1) of each vertex.
    original: Vec<u32>,
}

/// A clique, its candidates (vertices adjacent to all of it), and a bound on the cliques below.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clique {
    vertices: SmallVec<[u32; 32]>,
    candidates: Bits,
    bound: u32,
}

/// A vertex set, inline up to 512 vertices: nodes and colourings cost no allocation.
type Bits = SmallVec<[u64; 8]>;

impl MaxClique {
    /// A graph on vertices `0..n` with `edges` (self-loops are ignored).
    pub fn new(n: usize, edges: &[(usize, usize)]) -> Result<Self, String> {
        if n > MAX_VERTICES {
            return Err(format!("{n} vertices: at most {MAX_VERTICES} are allowed"));
        }
        let mut neighbours = vec![Vec::new(); n];
        for &(u, v) in edges {
            if u >= n || v >= n {
                return Err(format!("the edge {} {} names a vertex beyond {n}", u + 1, v + 1));
            }
            if u != v {
                neighbours[u].push(v);
                neighbours[v].push(u);
            }
        }
        for list in &mut neighbours {
            list.sort_unstable();
            list.dedup();
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&v| (std::cmp::Reverse(neighbours[v].len()), v));
        let mut rank = vec![0; n];
        for (i, &v) in order.iter().enumerate() {
            rank[v] = i;
        }
        let words = n.div_ceil(64);
        let mut adjacency = vec![0u64; n * words];
        for (v, list) in neighbours.iter().enumerate() {
            for &u in list {
                let (rv, ru) = (rank[v], rank[u]);
                adjacency[rv * words + ru / 64] |= 1 << (ru % 64);
            }
        }
        let original = order.iter().map(|&v| v as u32 + 1).collect();
        Ok(Self { n, words, adjacency, original })
    }

    /// Reads a DIMACS `.clq` graph.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut n = None;
        let mut announced = 0;
        let mut edges = Vec::new();
        // A byte-order mark (some Windows editors write one) is not part of the first line.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (i, line) in text.lines().enumerate() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let bad = |what: &str| format!("line {}: {what}: `{}`", i + 1, crate::quoted(line));
            match fields.first().copied() {
                None | Some("c") => {}
                Some("p") => {
                    if n.is_some() {
                        return Err(bad("a second `p` line"));
                    }
                    // `p col` is how some published clique benchmarks (brock, ...) spell it.
                    let [_, "edge" | "col", count, m] = fields.as_slice() else {
                        return Err(bad("expected `p edge N M` (or `p col N M`)"));
                    };
                    let number = |word: &str| match word.parse::<usize>() {
                        Ok(x) => Ok(x),
                        Err(_) if word.bytes().all(|b| b.is_ascii_digit()) => {
                            Err(bad(&format!("{word} is above the limit of 2^64")))
                        }
                        Err(_) => Err(bad(&format!("`{word}` is not a number (expected `p edge N M`)"))),
                    };
                    let (count, m) = (number(count)?, number(m)?);
                    if count > MAX_VERTICES {
                        return Err(bad(&format!("{count} vertices: at most {MAX_VERTICES} are allowed")));
                    }
                    (n, announced) = (Some(count), m);
                }
                Some("e") => {
                    let n = n.ok_or_else(|| bad("an edge before the `p edge N M` line"))?;
                    let ends = match fields.as_slice() {
                        [_, u, v] => u.parse::<usize>().ok().zip(v.parse::<usize>().ok()),
                        _ => None,
                    };
                    let (u, v) = ends.ok_or_else(|| bad("expected `e U V`"))?;
                    if n == 0 {
                        return Err(bad("an edge of a graph of no vertices (`p edge 0 ...`)"));
                    }
                    if !(1..=n).contains(&u) || !(1..=n).contains(&v) {
                        return Err(bad(&format!("vertices are numbered 1 to {n}")));
                    }
                    edges.push((u - 1, v - 1));
                }
                Some(_) => return Err(bad("expected a `c`, `p` or `e` line")),
            }
        }
        let n = n.ok_or("no `p edge N M` line")?;
        // Fewer edges than announced is a file cut short, whose clique number would be wrong
        // without a word. More is harmless (files that list each edge both ways).
        if edges.len() < announced {
            return Err(format!(
                "the `p` line announces {announced} edges and the file has {}: is it cut short?",
                edges.len()
            ));
        }
        Self::new(n, &edges)
    }

    pub fn vertices(&self) -> usize {
        self.n
    }

    fn row(&self, v: usize) -> &[u64] {
        &self.adjacency[v * self.words..(v + 1) * self.words]
    }

    /// Greedy sequential colouring of `candidates`: the vertices in the order coloured, with their
    /// colours (from 1, non-decreasing).
    fn colour(&self, candidates: &[u64], order: &mut Vec<(u32, u32)>) {
        let mut uncoloured = Bits::from_slice(candidates);
        let mut class: Bits = smallvec::smallvec![0u64; self.words];
        let mut colour = 0;
        while uncoloured.iter().any(|&w| w != 0) {
            colour += 1;
            class.copy_from_slice(&uncoloured);
            while let Some(v) = first(&class) {
                for (c, a) in class.iter_mut().zip(self.row(v)) {
                    *c &= !a;
                }
                class[v / 64] &= !(1 << (v % 64));
                uncoloured[v / 64] &= !(1 << (v % 64));
                order.push((v as u32, colour));
            }
        }
    }
}

/// The lowest vertex of a bitset.
fn first(set: &[u64]) -> Option<usize> {
    set.iter().enumerate().find(|&(_, &w)| w != 0).map(|(i, w)| i * 64 + w.trailing_zeros() as usize)
}

/// The children of a clique: one per candidate, highest colour first; each later child loses the
/// candidates branched on before it.
pub struct CliqueChildren<'a> {
    graph: &'a MaxClique,
    vertices: SmallVec<[u32; 32]>,
    order: Vec<(u32, u32)>,
    candidates: Bits,
}

impl Iterator for CliqueChildren<'_> {
    type Item = Clique;

    fn next(&mut self) -> Option<Clique> {
        let (v, colour) = self.order.pop()?;
        let v = v as usize;
        self.candidates[v / 64] &= !(1 << (v % 64));
        let candidates = self.candidates.iter().zip(self.graph.row(v)).map(|(c, a)| c & a).collect();
        let mut vertices = self.vertices.clone();
        vertices.push(v as u32);
        Some(Clique { bound: self.vertices.len() as u32 + colour, vertices, candidates })
    }
}

impl Tree for MaxClique {
    type Node = Clique;
    type Children<'a> = CliqueChildren<'a>;

    fn root(&self) -> Clique {
        let mut candidates: Bits = smallvec::smallvec![u64::MAX; self.words];
        if !self.n.is_multiple_of(64) {
            candidates[self.words - 1] = (1 << (self.n % 64)) - 1;
        }
        Clique { vertices: SmallVec::new(), candidates, bound: self.n as u32 }
    }

    fn children<'a>(&'a self, c: &Clique, depth: u32) -> CliqueChildren<'a> {
        self.children_owned(c.clone(), depth)
    }

    /// The clique and its candidates move into the children, which need them both.
    fn children_owned<'a>(&'a self, c: Clique, _depth: u32) -> CliqueChildren<'a> {
        let count = c.candidates.iter().map(|w| w.count_ones() as usize).sum();
        let mut order = Vec::with_capacity(count);
        self.colour(&c.candidates, &mut order);
        CliqueChildren { graph: self, vertices: c.vertices, order, candidates: c.candidates }
    }

    fn output(&self, c: &Clique, _depth: u32, out: &mut String) -> bool {
        let mut vertices: Vec<u32> = c.vertices.iter().map(|&v| self.original[v as usize]).collect();
        vertices.sort_unstable();
        let text: Vec<String> = vertices.iter().map(u32::to_string).collect();
        out.push_str(&text.join(" "));
        true
    }
}

impl Optimise for MaxClique {
    fn value(&self, c: &Clique, _depth: u32) -> Option<i64> {
        Some(c.vertices.len() as i64)
    }

    fn bound(&self, c: &Clique, _depth: u32) -> i64 {
        i64::from(c.bound)
    }

    /// Children come highest colour first.
    const BOUNDS_DESCEND: bool = true;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dimacs_files_and_their_errors() {
        let g = MaxClique::parse("c a triangle and a pendant\np edge 4 4\ne 1 2\ne 2 3\ne 1 3\ne 3 4\n").unwrap();
        assert_eq!(g.vertices(), 4);
        assert_eq!(MaxClique::parse("\u{feff}p col 2 1\ne 1 2\ne 2 1\n").unwrap().vertices(), 2);
        for (text, error) in [
            ("", "no `p edge N M` line"),
            ("e 1 2\n", "line 1: an edge before"),
            ("p edge 3 1\ne 1 4\n", "line 2: vertices are numbered 1 to 3"),
            ("p edge 3 1\ne 1\n", "expected `e U V`"),
            ("p edge x 1\n", "`x` is not a number (expected `p edge N M`)"),
            ("p edge 3 x\n", "`x` is not a number"),
            ("p edge 3\n", "expected `p edge N M` (or `p col N M`)"),
            ("p cnf 3 1\n", "expected `p edge N M` (or `p col N M`)"),
            ("p edge 99999999999999999999 0\n", "99999999999999999999 is above the limit of 2^64"),
            ("p edge 65537 0\n", "65537 vertices: at most 65536 are allowed"),
            ("p edge 3 99999999999999999999\n", "99999999999999999999 is above the limit of 2^64"),
            ("p edge 0 1\ne 1 1\n", "line 2: an edge of a graph of no vertices"),
            ("p edge 3 0\nq\n", "expected a `c`, `p` or `e` line"),
            ("p edge 3 0\np edge 3 0\n", "a second `p` line"),
            ("p edge 3 2\ne 1 2\n", "the `p` line announces 2 edges and the file has 1: is it cut short?"),
        ] {
            let e = MaxClique::parse(text).unwrap_err();
            assert!(e.contains(error), "{text:?}: {e}");
        }
    }

    #[test]
    fn colouring_is_proper_and_bounds_the_children() {
        // A 5-cycle needs 3 colours.
        let g = MaxClique::new(5, &[(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]).unwrap();
        let mut order = Vec::new();
        g.colour(&g.root().candidates, &mut order);
        assert_eq!(order.len(), 5);
        assert_eq!(order.iter().map(|o| o.1).max(), Some(3));
        for &(u, cu) in &order {
            for &(v, cv) in &order {
                if u != v && cu == cv {
                    assert_eq!(g.row(u as usize)[0] >> v & 1, 0, "{u} and {v} share colour {cu}");
                }
            }
        }
        let bounds: Vec<u32> = g.children(&g.root(), 0).map(|c| c.bound).collect();
        assert_eq!(bounds.first(), Some(&3));
    }
}
