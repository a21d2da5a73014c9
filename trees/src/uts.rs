//! UTS, the Unbalanced Tree Search benchmark (Olivier et al., LCPC 2006), bit-exact with the
//! reference implementation and its SHA-1 splittable random number generator.
//!
//! A node is the 20-byte SHA-1 digest of its generator state. The root's state is SHA-1 of 16 zero
//! bytes followed by the root seed (big endian); child `i` of a node has state SHA-1(state ‖ i) with
//! `i` as 4 big-endian bytes. Both messages fit in one 64-byte block, so a child costs exactly one
//! SHA-1 compression, done here on a block padded by hand (with the CPU's SHA extensions when it has
//! them). A node's random number is the last four bytes of its state (big endian, top bit cleared).

use bts_worker::Tree;
use clap::{Parser, ValueEnum};
use serde::{Deserialize, Serialize};
use std::mem::MaybeUninit;

/// UTS tree types (`-t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UtsType {
    Binomial = 0,
    Geometric = 1,
    Hybrid = 2,
    Balanced = 3,
}

/// Shapes of the geometric tree's expected branching over depth (`-a`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Linear = 0,
    ExpDec = 1,
    Cyclic = 2,
    Fixed = 3,
}

/// The reference implementation's cap on children of any node but a binomial root.
const MAX_CHILDREN: i32 = 100;

/// The parameters of a UTS tree, named as in the reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UtsParams {
    pub tree_type: UtsType,
    pub shape: Shape,
    /// `-d`: gen_mx, the depth parameter of geometric shapes and balanced trees.
    pub gen_mx: i32,
    /// `-b`: b_0, the root's (expected) branching factor.
    pub b0: f64,
    /// `-r`: the root seed.
    pub root_id: i32,
    /// `-q`: probability that a binomial node has children.
    pub non_leaf_prob: f64,
    /// `-m`: number of children of a binomial non-leaf.
    pub non_leaf_bf: i32,
    /// `-f`: hybrid trees are geometric above depth shift_depth·gen_mx and binomial below.
    pub shift_depth: f64,
    /// `-g`: SHA-1 evaluations per child (the reference's compute granularity), to make nodes dearer.
    pub granularity: u32,
}

impl Default for UtsParams {
    /// The reference implementation's defaults.
    fn default() -> Self {
        UtsParams {
            tree_type: UtsType::Geometric,
            shape: Shape::Linear,
            gen_mx: 6,
            b0: 4.0,
            root_id: 0,
            non_leaf_prob: 15.0 / 64.0,
            non_leaf_bf: 4,
            shift_depth: 0.5,
            granularity: 1,
        }
    }
}

/// The sample trees of the UTS distribution (`sample_trees.sh`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "UPPER")]
pub enum Preset {
    T1,
    T2,
    T3,
    T4,
    T5,
    T1L,
    T2L,
    T3L,
    T1XL,
    T1XXL,
    T3XXL,
    T2XXL,
}

impl Preset {
    pub fn params(self) -> UtsParams {
        use Shape::*;
        use UtsType::*;
        let d = UtsParams::default();
        let geo = |shape, gen_mx, b0, root_id| UtsParams { tree_type: Geometric, shape, gen_mx, b0, root_id, ..d };
        let bin = |q, m, root_id| UtsParams {
            tree_type: Binomial,
            b0: 2000.0,
            non_leaf_prob: q,
            non_leaf_bf: m,
            root_id,
            ..d
        };
        match self {
            Preset::T1 => geo(Fixed, 10, 4.0, 19),
            Preset::T2 => geo(Cyclic, 16, 6.0, 502),
            Preset::T3 => bin(0.124875, 8, 42),
            Preset::T4 => UtsParams {
                tree_type: Hybrid,
                shape: Linear,
                gen_mx: 16,
                b0: 6.0,
                root_id: 1,
                non_leaf_prob: 0.234375,
                non_leaf_bf: 4,
                ..d
            },
            Preset::T5 => geo(Linear, 20, 4.0, 34),
            Preset::T1L => geo(Fixed, 13, 4.0, 29),
            Preset::T2L => geo(Cyclic, 23, 7.0, 220),
            Preset::T3L => bin(0.200014, 5, 7),
            Preset::T1XL => geo(Fixed, 15, 4.0, 29),
            Preset::T1XXL => geo(Fixed, 15, 4.0, 19),
            Preset::T3XXL => bin(0.499995, 2, 316),
            Preset::T2XXL => bin(0.499999995, 2, 0),
        }
    }
}

/// Options of `bts run uts`, as the reference names them; explicit options override a preset.
#[derive(Clone, Debug, Default, Parser)]
#[command(
    name = "uts",
    no_binary_name = true,
    // A negative number is a bad value, not an unknown option.
    allow_negative_numbers = true,
    // As the reference's getopt: a repeated option's last value counts (T4's command line repeats -r).
    args_override_self = true,
    about = "The Unbalanced Tree Search benchmark (bit-exact with the reference). Options given override \
             --preset's; as under the reference's getopt, a repeated option's last value counts, and options of \
             another tree type (such as -q and -m on a geometric tree) are taken and unused"
)]
pub struct UtsArgs {
    /// A sample tree of the UTS distribution.
    #[arg(long, value_enum, ignore_case = true)]
    pub preset: Option<Preset>,
    /// Tree type: 0 binomial, 1 geometric, 2 hybrid, 3 balanced [default: 1]
    #[arg(short = 't', value_parser = clap::value_parser!(u8).range(0..=3))]
    pub tree_type: Option<u8>,
    /// Geometric shape: 0 linear, 1 exponential decrease, 2 cyclic, 3 fixed [default: 0]
    #[arg(short = 'a', value_parser = clap::value_parser!(u8).range(0..=3))]
    pub shape: Option<u8>,
    /// Depth parameter gen_mx [default: 6]
    #[arg(short = 'd', allow_negative_numbers = true)]
    pub depth: Option<i32>,
    /// Root branching factor b_0 [default: 4]
    #[arg(short = 'b', allow_negative_numbers = true)]
    pub b0: Option<f64>,
    /// Root seed [default: 0]
    #[arg(short = 'r', allow_negative_numbers = true)]
    pub root: Option<i32>,
    /// Binomial: probability of a non-leaf node [default: 0.234375]
    #[arg(short = 'q', allow_negative_numbers = true)]
    pub q: Option<f64>,
    /// Binomial: children of a non-leaf node [default: 4]
    #[arg(short = 'm')]
    pub m: Option<i32>,
    /// Hybrid: fraction of gen_mx at which the tree turns binomial [default: 0.5]
    #[arg(short = 'f')]
    pub shift: Option<f64>,
    /// SHA-1 evaluations per child, to make nodes dearer [default: 1]
    #[arg(short = 'g')]
    pub granularity: Option<u32>,
}

impl UtsArgs {
    /// The tree's parameters: the preset (or the reference defaults) with explicit options on top.
    pub fn params(&self) -> Result<UtsParams, String> {
        let mut p = self.preset.map_or_else(UtsParams::default, Preset::params);
        if let Some(t) = self.tree_type {
            p.tree_type = [UtsType::Binomial, UtsType::Geometric, UtsType::Hybrid, UtsType::Balanced][t as usize];
        }
        if let Some(a) = self.shape {
            p.shape = [Shape::Linear, Shape::ExpDec, Shape::Cyclic, Shape::Fixed][a as usize];
        }
        p.gen_mx = self.depth.unwrap_or(p.gen_mx);
        p.b0 = self.b0.unwrap_or(p.b0);
        p.root_id = self.root.unwrap_or(p.root_id);
        p.non_leaf_prob = self.q.unwrap_or(p.non_leaf_prob);
        p.non_leaf_bf = self.m.unwrap_or(p.non_leaf_bf);
        p.shift_depth = self.shift.unwrap_or(p.shift_depth);
        p.granularity = self.granularity.unwrap_or(p.granularity);
        p.validate()?;
        Ok(p)
    }
}

impl UtsParams {
    pub fn validate(&self) -> Result<(), String> {
        if self.gen_mx < 1 {
            return Err(format!("uts: -d must be at least 1, got {}", self.gen_mx));
        }
        if !(self.b0.is_finite() && self.b0 >= 0.0) {
            return Err(format!("uts: -b must be a finite number >= 0, got {}", self.b0));
        }
        // The reference counts children in an int; past about 4.5e15 a geometric tree's law
        // rounds to no children at all, and the tree was silently one node.
        if self.b0 > i32::MAX as f64 {
            return Err(format!(
                "uts: -b must be at most {} (the reference counts children in an int), got {}",
                i32::MAX,
                self.b0
            ));
        }
        if !(0.0..=1.0).contains(&self.non_leaf_prob) {
            return Err(format!("uts: -q must lie in [0, 1], got {}", self.non_leaf_prob));
        }
        if self.non_leaf_bf < 0 {
            return Err(format!("uts: -m must be >= 0, got {}", self.non_leaf_bf));
        }
        if !self.shift_depth.is_finite() {
            return Err(format!("uts: -f must be finite, got {}", self.shift_depth));
        }
        if self.granularity < 1 {
            return Err("uts: -g must be at least 1".to_string());
        }
        Ok(())
    }
}

/// A UTS node: its 20-byte generator state.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UtsNode(pub [u8; 20]);

impl std::fmt::Debug for UtsNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UtsNode(")?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

impl UtsNode {
    /// The node's random number in [0, 2^31).
    fn rand(&self) -> i32 {
        (u32::from_be_bytes([self.0[16], self.0[17], self.0[18], self.0[19]]) & 0x7fff_ffff) as i32
    }
}

/// The UTS tree.
pub struct Uts {
    params: UtsParams,
    /// ln(1 - p) of the geometric law at each depth (p = 1/(1 + b_i)), computed once.
    geo_log: Vec<f64>,
}

const H0: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];

/// SHA-1 of a message of at most 55 bytes, as one hand-padded block.
#[inline]
fn sha1_short(message: &[u8]) -> [u8; 20] {
    debug_assert!(message.len() <= 55);
    let mut block = [0u8; 64];
    block[..message.len()].copy_from_slice(message);
    block[message.len()] = 0x80;
    block[56..].copy_from_slice(&((message.len() as u64) * 8).to_be_bytes());
    let mut state = H0;
    sha1::block_api::compress(&mut state, &[block]);
    let mut digest = [0u8; 20];
    for (chunk, word) in digest.chunks_exact_mut(4).zip(state) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    digest
}

/// Depths below this get their ln(1 - p) from a table.
const GEO_TABLE_DEPTH: usize = 1 << 12;

impl Uts {
    pub fn new(params: UtsParams) -> Result<Self, String> {
        params.validate()?;
        let mut uts = Uts { params, geo_log: Vec::new() };
        uts.geo_log = (0..GEO_TABLE_DEPTH as i32).map(|d| uts.geo_log_at(d)).collect();
        Ok(uts)
    }

    pub fn params(&self) -> &UtsParams {
        &self.params
    }

    /// The reference's `uts_numChildren_geo` up to the logarithm of 1 - p.
    fn geo_log_at(&self, depth: i32) -> f64 {
        let p = &self.params;
        let b0 = p.b0;
        let mut b_i = b0;
        if depth > 0 {
            let depth_f = depth as f64;
            let gen_mx = p.gen_mx as f64;
            b_i = match p.shape {
                Shape::ExpDec => b0 * depth_f.powf(-b0.ln() / gen_mx.ln()),
                // The reference writes π as 3.141592653589793, which is exactly f64 PI.
                Shape::Cyclic => {
                    if depth > 5 * p.gen_mx {
                        0.0
                    } else {
                        b0.powf((2.0 * std::f64::consts::PI * depth_f / gen_mx).sin())
                    }
                }
                Shape::Fixed => {
                    if depth < p.gen_mx {
                        b0
                    } else {
                        0.0
                    }
                }
                Shape::Linear => b0 * (1.0 - depth_f / gen_mx),
            };
        }
        let prob = 1.0 / (1.0 + b_i);
        (1.0 - prob).ln()
    }

    fn num_children_geo(&self, node: &UtsNode, depth: u32) -> i32 {
        let log_q = match self.geo_log.get(depth as usize) {
            Some(&l) => l,
            None => self.geo_log_at(depth as i32),
        };
        let u = node.rand() as f64 / 2147483648.0;
        ((1.0 - u).ln() / log_q).floor() as i32
    }

    fn num_children_bin(&self, node: &UtsNode) -> i32 {
        let d = node.rand() as f64 / 2147483648.0;
        if d < self.params.non_leaf_prob { self.params.non_leaf_bf } else { 0 }
    }

    /// The reference's `uts_numChildren`.
    pub fn num_children(&self, node: &UtsNode, depth: u32) -> u32 {
        let p = &self.params;
        let n = match p.tree_type {
            UtsType::Binomial if depth == 0 => p.b0.floor() as i32,
            UtsType::Binomial => self.num_children_bin(node),
            UtsType::Geometric => self.num_children_geo(node, depth),
            UtsType::Hybrid if (depth as f64) < p.shift_depth * p.gen_mx as f64 => self.num_children_geo(node, depth),
            UtsType::Hybrid => self.num_children_bin(node),
            UtsType::Balanced if (depth as i64) < p.gen_mx as i64 => p.b0 as i32,
            UtsType::Balanced => 0,
        };
        let n = if depth == 0 && p.tree_type == UtsType::Binomial {
            n.min(p.b0.ceil() as i32)
        } else if p.tree_type != UtsType::Balanced {
            n.min(MAX_CHILDREN)
        } else {
            n
        };
        n.max(0) as u32
    }

    /// Child `index` of `node` (the reference's `rng_spawn`).
    #[inline]
    pub fn child(&self, node: &UtsNode, index: u32) -> UtsNode {
        let mut message = [0u8; 24];
        message[..20].copy_from_slice(&node.0);
        message[20..].copy_from_slice(&index.to_be_bytes());
        let mut digest = sha1_short(&message);
        for _ in 1..self.params.granularity {
            digest = std::hint::black_box(sha1_short(&message));
        }
        UtsNode(digest)
    }
}

/// How many siblings' states are computed back to back: independent SHA-1 compressions, which
/// the CPU overlaps (one at a time, each waits for the last).
const BATCH: usize = 4;

/// The children of a UTS node, one SHA-1 compression each, computed four at a time.
pub struct UtsChildren<'a> {
    uts: &'a Uts,
    parent: UtsNode,
    /// Index of the next child to compute.
    next: u32,
    count: u32,
    /// `batch[taken..ready]` are computed and not yet given out.
    batch: [MaybeUninit<UtsNode>; BATCH],
    taken: u8,
    ready: u8,
}

impl UtsChildren<'_> {
    fn fill(&mut self) -> bool {
        let n = (self.count - self.next).min(BATCH as u32);
        for (i, slot) in self.batch[..n as usize].iter_mut().enumerate() {
            slot.write(self.uts.child(&self.parent, self.next + i as u32));
        }
        self.next += n;
        self.taken = 0;
        self.ready = n as u8;
        n > 0
    }
}

impl Iterator for UtsChildren<'_> {
    type Item = UtsNode;

    #[inline]
    fn next(&mut self) -> Option<UtsNode> {
        if self.taken == self.ready && (self.next == self.count || !self.fill()) {
            return None;
        }
        // SAFETY: slots below `ready` were written by `fill`.
        let child = unsafe { self.batch[self.taken as usize].assume_init() };
        self.taken += 1;
        Some(child)
    }
}

impl Tree for Uts {
    type Node = UtsNode;
    type Children<'a> = UtsChildren<'a>;

    fn root(&self) -> UtsNode {
        let mut message = [0u8; 20];
        message[16..].copy_from_slice(&self.params.root_id.to_be_bytes());
        UtsNode(sha1_short(&message))
    }

    #[inline]
    fn children<'a>(&'a self, node: &UtsNode, depth: u32) -> UtsChildren<'a> {
        UtsChildren {
            uts: self,
            parent: *node,
            next: 0,
            count: self.num_children(node, depth),
            batch: [MaybeUninit::uninit(); BATCH],
            taken: 0,
            ready: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sha1::{Digest, Sha1};

    proptest! {
        #[test]
        fn hand_padded_block_equals_the_sha1_crate(message in proptest::collection::vec(any::<u8>(), 0..=55)) {
            let expected: [u8; 20] = Sha1::digest(&message).into();
            prop_assert_eq!(sha1_short(&message), expected);
        }
    }

    #[test]
    fn presets_parse_case_insensitively_and_options_override_them() {
        let args = UtsArgs::try_parse_from(["--preset", "t1", "-r", "5"]).unwrap();
        let p = args.params().unwrap();
        assert_eq!((p.tree_type, p.shape, p.gen_mx, p.b0, p.root_id), (UtsType::Geometric, Shape::Fixed, 10, 4.0, 5));
        // As under the reference's getopt, the last of a repeated option counts.
        let args = UtsArgs::try_parse_from(["--preset", "t4", "-r", "1", "-r", "34"]).unwrap();
        assert_eq!(args.params().unwrap().root_id, 34);
    }

    #[test]
    fn bad_parameters_are_refused_with_a_message() {
        for args in [&["-d", "0"][..], &["-q", "1.5"], &["-q", "-0.1"], &["-b", "-1"], &["-t", "4"], &["-g", "0"]] {
            let result = UtsArgs::try_parse_from(args).map_err(|e| e.to_string()).and_then(|a| a.params());
            assert!(result.is_err(), "{args:?} accepted");
            // Refused for its value, not taken for an option.
            assert!(!result.unwrap_err().contains("unexpected argument"), "{args:?}");
        }
    }
}
