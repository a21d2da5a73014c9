//! What an lrs job prints, read line by line as `bts run lrs` reads it, never panics, and what it
//! keeps is well formed: every record a line ending in a newline, every unexplored cobasis a
//! list of row numbers that a job's `restart` line can give back to lrs.
#![no_main]

use bts_adapters::fuzzing::JobOutput;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first line is the input's name, if it is not empty.
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let name = lines.next().filter(|n| !n.is_empty());
    let mut out = JobOutput::new(name);
    for line in lines {
        let _ = out.line(line);
    }
    assert_eq!(out.records.matches('\n').count() as u64, out.record_count);
    assert!(out.records.is_empty() || out.records.ends_with('\n'));
    for (_, cobasis) in &out.unexplored {
        assert!(!cobasis.is_empty());
        assert!(cobasis.split(' ').all(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit())), "{cobasis:?}");
    }
    let _ = (out.total("bases"), out.saw_banner());
});
