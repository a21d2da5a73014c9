//! The built-in trees of bts, each with its command-line options:
//! - [`Uts`]: the Unbalanced Tree Search benchmark, bit-exact with the reference implementation;
//! - [`Gw`]: critical Galton-Watson trees as in Avis & Devroye, Section 6;
//! - [`Queens`]: the backtracking tree of N-queens, whose solutions are output records;
//! - [`Knapsack`] and [`MaxClique`]: branch and bound for 0/1 knapsack and maximum clique.

mod gw;
mod knapsack;
mod maxclique;
mod queens;
mod uts;

pub use gw::{Gw, GwArgs, GwNode};
pub use knapsack::{
    Knapsack, KnapsackArgs, KnapsackOf, Packing, PackingChildren, Taken, Wide, WideKnapsack, knapsack_searcher,
};
pub use maxclique::{Clique, CliqueChildren, MaxClique, MaxCliqueArgs};
pub use queens::{Board, Queens, QueensArgs};
pub use uts::{Preset, Shape, Uts, UtsArgs, UtsChildren, UtsNode, UtsParams, UtsType};

/// Reads an instance file as text: one that is not UTF-8 is refused with the line where it stops
/// being so. An error about its contents then goes through [`about_file`].
fn read_instance(tree: &str, path: &std::path::Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{tree}: cannot read {}: {e}", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
        format!("{tree}: {}: line {line} is not UTF-8 text", path.display())
    })
}

/// An error about the instance file `text`, named: a file whose lines end in CR alone reads as one
/// line, and the message says so.
fn about_file(tree: &str, path: &std::path::Path, text: &str, error: String) -> String {
    let cr_alone = text.as_bytes().windows(2).any(|w| w[0] == b'\r' && w[1] != b'\n');
    let hint = if cr_alone { " (the file's lines end in CR alone: save it with LF line ends)" } else { "" };
    format!("{tree}: {}: {error}{hint}", path.display())
}

/// A line quoted in an error message, its control characters escaped (a CR would garble a terminal),
/// and the invisible ones that break a number (a byte-order mark, a zero-width space).
fn quoted(line: &str) -> String {
    let invisible = |c: char| c.is_control() || matches!(c, '\u{feff}' | '\u{200b}'..='\u{200d}' | '\u{2060}');
    line.trim().chars().map(|c| if invisible(c) { c.escape_default().to_string() } else { c.to_string() }).collect()
}
