//! The library snippets of the README, verbatim (tests/examples.rs checks that they are): a tree
//! of your own, run from your program or given the whole `bts` command line.
//!
//! ```text
//! cargo run --release --example readme -- run subsets --n 16
//! ```

use bts::Tree;

pub struct Subsets {
    pub n: u32,
}

impl Tree for Subsets {
    type Node = Vec<u32>; // serde-serialisable, Debug
    type Children<'a> = Box<dyn Iterator<Item = Vec<u32>> + 'a>;

    fn root(&self) -> Vec<u32> {
        Vec::new()
    }

    // The children of a node, lazily and always in the same order: when a job's budget runs
    // out, the children not yet taken become new jobs.
    fn children<'a>(&'a self, node: &Vec<u32>, _depth: u32) -> Self::Children<'a> {
        let start = node.last().map_or(0, |&x| x + 1);
        let node = node.clone();
        Box::new((start..self.n).map(move |x| {
            let mut c = node.clone();
            c.push(x);
            c
        }))
    }

    // Optional: one output record (a line) per node.
    fn output(&self, node: &Vec<u32>, _depth: u32, out: &mut String) -> bool {
        out.push_str(&format!("{node:?}"));
        true
    }
}

// Called by tests/examples.rs.
#[allow(dead_code)]
pub fn count() -> Result<u64, bts::RunError> {
    let finished = bts::Run::new("subsets", Subsets { n: 16 })
        .options(bts::RunOptions { workers: 4, ..Default::default() })
        .run(&mut std::io::sink())?; // where the output records go: any io::Write
    // A run that did not end complete (a panic in the tree fails it) says why in its outcome.
    assert_eq!(finished.outcome, bts::Outcome::Complete);
    Ok(finished.summary.totals.nodes) // 65536: every subset of 16 elements
}

/// The subsets of {0, ..., n-1}
#[derive(clap::Parser)]
pub struct SubsetsArgs {
    /// Elements of the set
    #[arg(long)]
    pub n: u32,
}

fn main() {
    let mut registry = bts::Registry::builtin();
    registry.register::<SubsetsArgs, _>("subsets", |args| Ok(Subsets { n: args.n }));
    bts::cli::main_with(registry)
}
