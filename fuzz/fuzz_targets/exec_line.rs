//! A line of a program run by `bts run exec` is parsed without a panic, and a protocol line, written
//! again as the README spells it, parses back the same.
#![no_main]

use bts_adapters::fuzzing::{Line, parse_line};
use libfuzzer_sys::fuzz_target;

fn write(line: &Line) -> Vec<u8> {
    let (head, tail): (String, &[u8]) = match *line {
        Line::Out(text) => ("out ".into(), text),
        Line::Log(text) => ("log ".into(), text),
        Line::Unexplored { depth, node } => (format!("unexplored {depth} "), node),
        Line::Solution { value, record } => (format!("solution {value} "), record),
        Line::Done { visited, leaves, max_depth, job, pruned } => {
            let mut done = format!("done {visited}");
            let fields =
                [("leaves", leaves), ("max_depth", max_depth.map(u64::from)), ("job", job), ("pruned", pruned)];
            for (key, value) in fields {
                if let Some(value) = value {
                    done += &format!(" {key}={value}");
                }
            }
            (done, b"")
        }
    };
    [head.as_bytes(), tail].concat()
}

fuzz_target!(|data: &[u8]| {
    // The program's output is cut at newlines before it is parsed.
    for line in data.split(|&b| b == b'\n') {
        if let Some(parsed) = parse_line(line) {
            let again = write(&parsed);
            assert_eq!(parse_line(&again).as_ref(), Some(&parsed), "{:?} written as {:?}", line, again);
        }
    }
});
