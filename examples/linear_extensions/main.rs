//! A program of your own on the bts library: the whole `bts` command line, with your tree added to
//! the built-in ones.
//!
//! ```text
//! cargo run --release --example linear_extensions -- run --workers 2 linext --grid 2x10
//! ```

mod tree;

use clap::Parser;
use tree::LinearExtensions;

/// Options of the `linext` tree, parsed by clap like those of the built-in trees.
#[derive(Parser)]
#[command(name = "linext", no_binary_name = true, about = "Linear extensions of a partial order (a user-defined tree)")]
struct LinextArgs {
    /// The product of two chains, ROWSxCOLS (its linear extensions are standard Young tableaux).
    #[arg(long, value_name = "ROWSxCOLS", conflicts_with = "antichain")]
    grid: Option<String>,
    /// N unrelated elements (N! linear extensions).
    #[arg(long, value_name = "N")]
    antichain: Option<usize>,
}

fn build(args: LinextArgs) -> Result<LinearExtensions, String> {
    match (args.grid, args.antichain) {
        (Some(grid), None) => {
            let (r, c) = grid.split_once('x').ok_or("--grid takes ROWSxCOLS, such as 2x10")?;
            let parse = |s: &str| s.parse::<usize>().map_err(|_| format!("bad --grid size '{s}'"));
            LinearExtensions::grid(parse(r)?, parse(c)?)
        }
        (None, Some(n)) => LinearExtensions::new(n, &[]),
        _ => Err("give --grid ROWSxCOLS or --antichain N".into()),
    }
}

fn main() {
    let mut registry = bts::Registry::builtin();
    registry.register::<LinextArgs, _>("linext", build);
    bts::cli::main_with(registry)
}
