//! Splitting `bts run`'s arguments into run options and the tree's own options.
//!
//! Everything before the tree's name is a run option. After it, arguments belong to the tree,
//! except long options that `bts run` knows (`--workers 2`, `--budget=50`) and the tree does
//! not, which may follow the tree's options; after `--` everything belongs to the tree (a legacy
//! program's command line).

use clap::Command;
use std::collections::HashMap;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// Run options, in order.
    pub run: Vec<String>,
    /// The tree's name, if one was given.
    pub tree: Option<String>,
    /// The tree's options.
    pub tree_args: Vec<String>,
}

/// Which options of `command` take a value, by long name and by short letter.
struct OptionTable {
    long: HashMap<String, bool>,
    short: HashMap<char, bool>,
}

impl OptionTable {
    fn new(command: &Command) -> Self {
        let mut long = HashMap::new();
        let mut short = HashMap::new();
        for arg in command.get_arguments() {
            let takes_value = arg.get_action().takes_values();
            if let Some(l) = arg.get_long() {
                long.insert(l.to_string(), takes_value);
            }
            if let Some(s) = arg.get_short() {
                short.insert(s, takes_value);
            }
        }
        Self { long, short }
    }

    /// For `--name` or `--name=value`: whether the next argument is its value (None: unknown).
    fn long_takes_next(&self, token: &str) -> Option<bool> {
        let body = token.strip_prefix("--")?;
        let (name, inline_value) = match body.split_once('=') {
            Some((n, _)) => (n, true),
            None => (body, false),
        };
        self.long.get(name).map(|&takes| takes && !inline_value)
    }
}

/// `tree_options`: a tree's own long options, by the tree's name.
pub fn split<'a>(args: &[String], command: &Command, tree_options: impl Fn(&str) -> &'a [String]) -> Split {
    let table = OptionTable::new(command);
    let mut out = Split::default();
    let mut i = 0;
    // Run options up to the tree's name.
    while i < args.len() {
        let token = &args[i];
        i += 1;
        if token == "--" {
            if i < args.len() {
                out.tree = Some(args[i].clone());
                i += 1;
            }
            break;
        }
        if token.starts_with("--") {
            out.run.push(token.clone());
            if table.long_takes_next(token) == Some(true) && i < args.len() {
                out.run.push(args[i].clone());
                i += 1;
            }
        } else if token.len() > 1 && token.starts_with('-') {
            out.run.push(token.clone());
            let last = token.chars().last().unwrap_or('-');
            if table.short.get(&last) == Some(&true) && !token[1..].contains('=') && i < args.len() {
                out.run.push(args[i].clone());
                i += 1;
            }
        } else {
            out.tree = Some(token.clone());
            break;
        }
    }
    // The tree's options, with run options (long form only) picked out.
    let own = out.tree.as_deref().map_or(&[][..], &tree_options);
    let the_trees = |token: &str| {
        let name = token.strip_prefix("--").map(|b| b.split_once('=').map_or(b, |(n, _)| n));
        name.is_some_and(|n| own.iter().any(|o| o == n))
    };
    while i < args.len() {
        let token = &args[i];
        i += 1;
        if token == "--" {
            out.tree_args.extend(args[i - 1..].iter().cloned());
            break;
        }
        let is_help = token == "--help" || token.starts_with("--help=");
        match table.long_takes_next(token) {
            Some(takes_next) if !is_help && !the_trees(token) => {
                out.run.push(token.clone());
                if takes_next && i < args.len() {
                    out.run.push(args[i].clone());
                    i += 1;
                }
            }
            _ => out.tree_args.push(token.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::RunArgs;
    use clap::CommandFactory;

    fn s(args: &[&str]) -> Split {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        split(&args, &RunArgs::command(), |_| &[])
    }

    fn v(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn run_options_before_the_tree_with_their_values() {
        let got = s(&["--workers", "2", "--fixed-budget", "--budget=5", "-v", "uts", "-t", "1"]);
        assert_eq!(got.run, v(&["--workers", "2", "--fixed-budget", "--budget=5", "-v"]));
        assert_eq!(got.tree.as_deref(), Some("uts"));
        assert_eq!(got.tree_args, v(&["-t", "1"]));
    }

    #[test]
    fn run_options_may_follow_the_tree_options() {
        let got = s(&["uts", "--preset", "T1", "--workers", "2", "-q", "0.2", "--count-only"]);
        assert_eq!(got.run, v(&["--workers", "2", "--count-only"]));
        assert_eq!(got.tree_args, v(&["--preset", "T1", "-q", "0.2"]));
    }

    #[test]
    fn everything_after_double_dash_belongs_to_the_tree() {
        let got = s(&["exec", "--persistent", "--", "prog", "--workers", "3"]);
        assert_eq!(got.run, Vec::<String>::new());
        assert_eq!(got.tree_args, v(&["--persistent", "--", "prog", "--workers", "3"]));
    }

    /// A tree's own option is the tree's, though `bts run` has one of that name (it was taken by
    /// the run, and the tree got its default).
    #[test]
    fn a_trees_own_option_named_as_a_run_option_is_the_trees() {
        let args = v(&["mine", "--scale", "7", "--budget=3", "--workers", "2", "--scale=8"]);
        let own = v(&["scale", "budget"]);
        let got = split(&args, &RunArgs::command(), |tree| if tree == "mine" { &own } else { &[] });
        assert_eq!(got.tree_args, v(&["--scale", "7", "--budget=3", "--scale=8"]));
        assert_eq!(got.run, v(&["--workers", "2"]));
        // Before the tree's name, it is the run's.
        let got = split(&v(&["--scale", "4", "mine"]), &RunArgs::command(), |_| &own);
        assert_eq!((got.run, got.tree_args), (v(&["--scale", "4"]), Vec::new()));
    }

    #[test]
    fn help_after_the_tree_is_the_tree_s_help() {
        let got = s(&["queens", "--help"]);
        assert_eq!(got.tree_args, v(&["--help"]));
        let got = s(&["--help"]);
        assert_eq!((got.run, got.tree), (v(&["--help"]), None));
    }
}
