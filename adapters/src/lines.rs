//! The line protocol of `bts run exec` (see ARCHITECTURE.md, "Legacy programs"): the job line bts
//! writes and the lines a program answers with.

use bts_protocol::{Budget, Job};
use std::fmt::Write;

/// A line from the program.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// `out <text>`: an output record.
    Out(&'a str),
    /// `unexplored <depth> <node>`: a node generated but not visited.
    Unexplored { depth: u32, node: &'a str },
    /// `done <visited> [leaves=<n>] [max_depth=<n>]`: the job is finished.
    Done { visited: u64, leaves: Option<u64>, max_depth: Option<u32> },
    /// `log <text>`: a message for bts's log.
    Log(&'a str),
}

/// Parses one line (without its newline); `None` if it is not a protocol line.
pub fn parse(line: &str) -> Option<Line<'_>> {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
    match word {
        "out" => Some(Line::Out(rest)),
        "log" => Some(Line::Log(rest)),
        "unexplored" => {
            let (depth, node) = rest.split_once(' ')?;
            Some(Line::Unexplored { depth: depth.parse().ok()?, node })
        }
        "done" => {
            let mut parts = rest.split(' ').filter(|p| !p.is_empty());
            let visited = parts.next()?.parse().ok()?;
            let (mut leaves, mut max_depth) = (None, None);
            for p in parts {
                let (key, value) = p.split_once('=')?;
                match key {
                    "leaves" if leaves.is_none() => leaves = Some(value.parse().ok()?),
                    "max_depth" if max_depth.is_none() => max_depth = Some(value.parse().ok()?),
                    _ => return None,
                }
            }
            Some(Line::Done { visited, leaves, max_depth })
        }
        _ => None,
    }
}

/// `inf` or the number.
pub fn budget_text(b: Budget) -> String {
    b.to_string()
}

pub fn max_depth_text(d: Option<u32>) -> String {
    d.map_or_else(|| "inf".to_string(), |d| d.to_string())
}

/// The line that gives a persistent program its next job (with its newline).
pub fn job_line(job: &Job, node: &str) -> String {
    let mut s = String::with_capacity(32 + node.len());
    let _ = writeln!(s, "job {} {} {} {node}", budget_text(job.budget), max_depth_text(job.max_depth), job.depth);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use bts_protocol::{JobId, NodeBytes};

    #[test]
    fn protocol_lines_parse() {
        assert_eq!(parse("out 1 2 3"), Some(Line::Out("1 2 3")));
        assert_eq!(parse("out"), Some(Line::Out("")));
        assert_eq!(parse("log hello world"), Some(Line::Log("hello world")));
        assert_eq!(parse("unexplored 4 a b  c"), Some(Line::Unexplored { depth: 4, node: "a b  c" }));
        assert_eq!(parse("unexplored 4 "), Some(Line::Unexplored { depth: 4, node: "" }));
        assert_eq!(parse("done 17"), Some(Line::Done { visited: 17, leaves: None, max_depth: None }));
        assert_eq!(
            parse("done 17 leaves=3 max_depth=9\r"),
            Some(Line::Done { visited: 17, leaves: Some(3), max_depth: Some(9) })
        );
        assert_eq!(parse("done 5 max_depth=2"), Some(Line::Done { visited: 5, leaves: None, max_depth: Some(2) }));
    }

    #[test]
    fn anything_else_is_not_a_protocol_line() {
        for bad in [
            "",
            "Out x",
            "hello",
            "unexplored",
            "unexplored x node",
            "unexplored -1 node",
            "unexplored 3",
            "done",
            "done x",
            "done -1",
            "done 5 leaves",
            "done 5 leaves=x",
            "done 5 colour=red",
            "done 5 leaves=1 leaves=2",
            " out x",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn job_lines_say_inf_for_no_limit() {
        let job = Job { id: JobId(1), depth: 3, budget: Budget(50), max_depth: Some(7), node: NodeBytes::new() };
        assert_eq!(job_line(&job, "1 2 3"), "job 50 7 3 1 2 3\n");
        let job = Job { budget: Budget::UNLIMITED, max_depth: None, ..job };
        assert_eq!(job_line(&job, "x"), "job inf inf 3 x\n");
    }
}
