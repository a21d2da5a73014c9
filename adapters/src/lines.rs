//! The line protocol of `bts run exec` (see README, "The line protocol"): the job line bts
//! writes and the lines a program answers with. Lines are bytes: records and nodes are carried
//! exactly as the program wrote them, whatever their encoding.

use bts_protocol::{Budget, Incumbent, Job, NO_VALUE};

/// A line from the program.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// `out <text>`: an output record.
    Out(&'a [u8]),
    /// `unexplored <depth> <node>`: a node generated but not visited.
    Unexplored { depth: u32, node: &'a [u8] },
    /// `done <visited> [leaves=<n>] [max_depth=<n>] [job=<n>] [pruned=<n>]`: the job is finished.
    /// `job` is the number of jobs the process has been given, counting from 1, when it says;
    /// `pruned` the nodes a branch and bound did not enter.
    Done { visited: u64, leaves: Option<u64>, max_depth: Option<u32>, job: Option<u64>, pruned: Option<u64> },
    /// `solution <value> <record>`: a feasible solution of a branch and bound (`exec --optimise`).
    Solution { value: i64, record: &'a [u8] },
    /// `log <text>`: a message for bts's log.
    Log(&'a [u8]),
}

/// Parses one line (without its newline); `None` if it is not a protocol line.
pub fn parse(line: &[u8]) -> Option<Line<'_>> {
    let (word, rest) = split_once(line, b' ').unwrap_or((line, b""));
    match word {
        b"out" => Some(Line::Out(rest)),
        // An empty record or message of a program that ends its lines with \r\n: the \r stays, as
        // it does after a record's text.
        b"out\r" => Some(Line::Out(&line[3..])),
        b"log\r" => Some(Line::Log(&line[3..])),
        b"solution" => {
            let (value, record) = match split_once(rest, b' ') {
                Some(split) => split,
                // An empty record of a program that ends its lines with \r\n: the \r stays, as
                // for `out`.
                None => match rest.strip_suffix(b"\r") {
                    Some(value) => (value, &rest[value.len()..]),
                    None => (rest, &b""[..]),
                },
            };
            let value = number::<i64>(value).filter(|&v| v != NO_VALUE)?;
            Some(Line::Solution { value, record })
        }
        b"log" => Some(Line::Log(rest)),
        b"unexplored" => {
            let (depth, node) = split_once(rest, b' ')?;
            Some(Line::Unexplored { depth: number(depth)?, node })
        }
        // The numbers of `done` are text; a program that ends its lines with \r\n is understood.
        b"done" | b"done\r" => {
            let rest = std::str::from_utf8(rest).ok()?;
            let rest = rest.strip_suffix('\r').unwrap_or(rest);
            let mut parts = rest.split(' ').filter(|p| !p.is_empty());
            let visited = parts.next()?.parse().ok()?;
            // leaves, max_depth, job and pruned, each at most once.
            let mut fields = [None; 4];
            for p in parts {
                let (key, value) = p.split_once('=')?;
                let i = ["leaves", "max_depth", "job", "pruned"].iter().position(|&k| k == key)?;
                if fields[i].replace(value.parse::<u64>().ok()?).is_some() {
                    return None;
                }
            }
            let [leaves, max_depth, job, pruned] = fields;
            let max_depth = max_depth.map(u32::try_from).transpose().ok()?;
            Some(Line::Done { visited, leaves, max_depth, job, pruned })
        }
        _ => None,
    }
}

/// What a line that [`parse`] refused should have been, when it starts with a word of the
/// protocol in lower or upper case, followed by any blank (`done` with no count, `DONE 5`,
/// `unexplored\t2 n`): the error says so. A word in mixed case is a program's chatter (`Out of
/// memory`), told no form; so are `solution` in a plain enumeration and `out` in a branch and
/// bound (`optimise`), whose protocols do not have them.
pub fn expected_form(line: &[u8], optimise: bool) -> Option<&'static str> {
    let word = line.split(|b| b.is_ascii_whitespace()).next()?;
    if word.iter().any(u8::is_ascii_lowercase) && word.iter().any(u8::is_ascii_uppercase) {
        return None;
    }
    Some(match word.to_ascii_lowercase().as_slice() {
        b"done" => {
            "`done <visited> [leaves=<n>] [max_depth=<n>] [job=<n>] [pruned=<n>]`, in lower case, the count of \
             visited nodes first, each field at most once (counts below 2^64, depths below 2^32; pruned= for a branch \
             and bound)"
        }
        b"unexplored" => "`unexplored <depth> <node>`, in lower case, one space apart (a depth below 2^32)",
        b"solution" if optimise => {
            "`solution <value> <record>`, in lower case, one space apart, with a value from -2^63+1 to 2^63-1 \
             (-2^63 means none)"
        }
        b"out" if !optimise => "`out <text>`, in lower case, one space before the text",
        b"log" => "`log <text>`, in lower case, one space before the text",
        _ => return None,
    })
}

fn split_once(bytes: &[u8], at: u8) -> Option<(&[u8], &[u8])> {
    let i = bytes.iter().position(|&b| b == at)?;
    Some((&bytes[..i], &bytes[i + 1..]))
}

fn number<T: std::str::FromStr>(bytes: &[u8]) -> Option<T> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// `inf` or the number.
pub fn budget_text(b: Budget) -> String {
    b.to_string()
}

pub fn max_depth_text(d: Option<u32>) -> String {
    d.map_or_else(|| "inf".to_string(), |d| d.to_string())
}

/// The least value a branch and bound's job must still report and search for: `none` before any
/// solution, else one more than the incumbent's value, or the value itself when ties are kept.
pub fn least_text(incumbent: Incumbent) -> String {
    match incumbent.value {
        NO_VALUE => "none".to_string(),
        _ => least(incumbent).to_string(),
    }
}

/// The least value as a number ([`NO_VALUE`] before any solution): a solution below it cannot
/// improve on the incumbent.
pub fn least(incumbent: Incumbent) -> i64 {
    match incumbent.value {
        NO_VALUE => NO_VALUE,
        v if incumbent.keep_ties => v,
        v => v.saturating_add(1),
    }
}

/// The line that gives a persistent program its next job (with its newline); a branch and bound's
/// (`optimise`) says the least value worth reporting before the node.
pub fn job_line(job: &Job, optimise: bool) -> Vec<u8> {
    let node = job.node.as_slice();
    let mut head = format!("job {} {} {} ", budget_text(job.budget), max_depth_text(job.max_depth), job.depth);
    if optimise {
        head += &least_text(job.incumbent);
        head.push(' ');
    }
    let mut line = Vec::with_capacity(head.len() + node.len() + 1);
    line.extend_from_slice(head.as_bytes());
    line.extend_from_slice(node);
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use bts_protocol::{JobId, NodeBytes};

    fn done(visited: u64, leaves: Option<u64>, max_depth: Option<u32>, job: Option<u64>) -> Option<Line<'static>> {
        Some(Line::Done { visited, leaves, max_depth, job, pruned: None })
    }

    #[test]
    fn branch_and_bound_lines() {
        assert_eq!(parse(b"solution -7 a b"), Some(Line::Solution { value: -7, record: b"a b" }));
        assert_eq!(parse(b"solution 3"), Some(Line::Solution { value: 3, record: b"" }));
        assert_eq!(parse(b"solution 3\r"), Some(Line::Solution { value: 3, record: b"\r" }));
        assert_eq!(parse(b"solution 3 a\r"), Some(Line::Solution { value: 3, record: b"a\r" }));
        assert_eq!(parse(b"solution x y"), None);
        assert_eq!(parse(b"solution -9223372036854775808 y"), None);
        let pruned = Some(Line::Done { visited: 4, leaves: None, max_depth: None, job: None, pruned: Some(9) });
        assert_eq!(parse(b"done 4 pruned=9"), pruned);
        let job = Job {
            id: JobId(1),
            depth: 2,
            budget: Budget(5),
            max_depth: None,
            node: NodeBytes::from_slice(b"n"),
            incumbent: Incumbent { value: 10, ..Incumbent::NONE },
        };
        assert_eq!(job_line(&job, true), b"job 5 inf 2 11 n\n");
        assert_eq!(job_line(&job, false), b"job 5 inf 2 n\n");
        let ties = Job { incumbent: Incumbent { value: 10, keep_ties: true, target: None }, ..job.clone() };
        assert_eq!(job_line(&ties, true), b"job 5 inf 2 10 n\n");
        let none = Job { incumbent: Incumbent::NONE, ..job };
        assert_eq!(job_line(&none, true), b"job 5 inf 2 none n\n");
    }

    #[test]
    fn protocol_lines_parse() {
        assert_eq!(parse(b"out 1 2 3"), Some(Line::Out(b"1 2 3")));
        assert_eq!(parse(b"out"), Some(Line::Out(b"")));
        assert_eq!(parse(b"log hello world"), Some(Line::Log(b"hello world")));
        assert_eq!(parse(b"unexplored 4 a b  c"), Some(Line::Unexplored { depth: 4, node: b"a b  c" }));
        assert_eq!(parse(b"unexplored 4 "), Some(Line::Unexplored { depth: 4, node: b"" }));
        assert_eq!(parse(b"done 17"), done(17, None, None, None));
        assert_eq!(parse(b"done 17 leaves=3 max_depth=9\r"), done(17, Some(3), Some(9), None));
        assert_eq!(parse(b"done 5 max_depth=2"), done(5, None, Some(2), None));
        assert_eq!(parse(b"done 5 job=12 leaves=1"), done(5, Some(1), None, Some(12)));
        assert_eq!(parse(b"done\r"), None);
    }

    /// A line that starts with a word of the protocol but is not one says what it should be.
    #[test]
    fn malformed_lines_of_the_protocol_say_their_form() {
        for line in [&b"done"[..], b"done\r", b"done many", b"done 3 leaves"] {
            assert_eq!(parse(line), None);
            assert!(expected_form(line, false).unwrap().starts_with("`done <visited>"), "{line:?}");
        }
        assert_eq!(parse(b"unexplored x n"), None);
        assert!(expected_form(b"unexplored x n", false).unwrap().starts_with("`unexplored <depth> <node>`"));
        // The protocol's words in another case, or followed by a tab.
        for (line, form) in [
            (&b"DONE 5"[..], "`done <visited>"),
            (b"done\t5", "`done <visited>"),
            (b"UNEXPLORED 2 n", "`unexplored <depth>"),
            (b"unexplored\t2 n", "`unexplored <depth>"),
            (b"OUT x", "`out <text>`"),
            (b"out\tx", "`out <text>`"),
            (b"LOG x", "`log <text>`"),
            (b"solution\t5 x", "`solution <value> <record>`"),
            (b"solution x y", "`solution <value> <record>`"),
        ] {
            assert_eq!(parse(line), None, "{line:?}");
            let optimise = line.starts_with(b"solution");
            assert!(expected_form(line, optimise).unwrap().starts_with(form), "{line:?}");
        }
        // A program's chatter; words the run's protocol does not have.
        for (line, optimise) in [(&b"Out of memory"[..], false), (b"Solution found: 42", true), (b"hello bts", false)] {
            assert_eq!(expected_form(line, optimise), None, "{line:?}");
        }
        assert_eq!(expected_form(b"solution\t5 x", false), None);
        assert_eq!(expected_form(b"OUT x", true), None);
        assert_eq!(expected_form(b"outx", false), None);
        assert_eq!(expected_form(b"", false), None);
    }

    /// Records and nodes are bytes, carried exactly: no encoding is assumed, no \r taken away.
    #[test]
    fn records_and_nodes_are_carried_byte_for_byte() {
        assert_eq!(parse(b"out caf\xe9\r"), Some(Line::Out(b"caf\xe9\r")));
        // An empty record, or message, ended by \r\n.
        assert_eq!(parse(b"out\r"), Some(Line::Out(b"\r")));
        assert_eq!(parse(b"out \r"), Some(Line::Out(b"\r")));
        assert_eq!(parse(b"log\r"), Some(Line::Log(b"\r")));
        assert_eq!(parse(b"unexplored 2 \xff\x00z\r"), Some(Line::Unexplored { depth: 2, node: b"\xff\x00z\r" }));
        let job = Job {
            id: JobId(1),
            depth: 1,
            budget: Budget(5),
            max_depth: None,
            node: NodeBytes::from_slice(b"\xff\x00z\r"),
            incumbent: Default::default(),
        };
        assert_eq!(job_line(&job, false), b"job 5 inf 1 \xff\x00z\r\n");
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
            "done 5 job=1 job=1",
            "done 5 job=x",
            "done 5 max_depth=1 max_depth=2",
            " out x",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn job_lines_say_inf_for_no_limit() {
        let job = Job {
            id: JobId(1),
            depth: 3,
            budget: Budget(50),
            max_depth: Some(7),
            node: NodeBytes::new(),
            incumbent: Default::default(),
        };
        let job = Job { node: NodeBytes::from_slice(b"1 2 3"), ..job };
        assert_eq!(job_line(&job, false), b"job 50 7 3 1 2 3\n");
        let job = Job { budget: Budget::UNLIMITED, max_depth: None, node: NodeBytes::from_slice(b"x"), ..job };
        assert_eq!(job_line(&job, false), b"job inf inf 3 x\n");
    }
}
