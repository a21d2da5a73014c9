//! The messages of a run, whatever carries them (a channel to a thread or a TCP connection).

use crate::{Incumbent, Job, JobId, ReportBatch};
use serde::{Deserialize, Serialize};

/// Master to worker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToWorker {
    /// More jobs to run, in addition to those the worker holds.
    Jobs(Vec<Job>),
    /// A better solution was found elsewhere: prune with this value from now on.
    Incumbent(Incumbent),
    /// The run is over: stop once the current message is handled.
    Finish,
    /// The run stops: finish the jobs under way, but give up whatever would only hold the stop up
    /// (a tree's job ends at its next look; a legacy program's failed job is not tried again), and
    /// hand the jobs not started back ([`FromWorker::Unstarted`]). Sent once, at once, to every
    /// worker that holds jobs.
    Stopping,
    /// Jobs failed here and succeeded elsewhere: this worker gets no more jobs (unless no other
    /// worker is left), and its host's set-up should be checked. Why, for its log.
    Barred(String),
}

/// Worker to master.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FromWorker {
    /// Finished jobs.
    Reports(ReportBatch),
    /// A job that could not be run (the oracle panicked, the node could not be decoded, ...).
    /// Nothing of it is committed.
    Failed(JobFailure),
    /// Jobs the worker held but will not start, as the run stops: they go back to the job list.
    Unstarted(Vec<JobId>),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFailure {
    pub id: JobId,
    /// The job's start node in the tree's debug form.
    pub node: String,
    pub message: String,
    /// The worker gave the job up only because it stops (the run stops, or the worker leaves): it
    /// failed a try that would have been made again. The job goes back to the job list, and the
    /// run is not failed.
    pub given_up: bool,
}

impl JobFailure {
    /// A failure of job `id` (not [`given_up`](Self::given_up)). The node and the message are cut
    /// to 64 KiB each: a panic message may hold a whole node of megabytes, which no frame to the
    /// master could carry and no reader wants.
    pub fn new(id: JobId, node: impl Into<String>, message: impl Into<String>) -> Self {
        Self { id, node: cut(node.into()), message: cut(message.into()), given_up: false }
    }
}

/// `text`, or its first 64 KiB (to a character's boundary) and how much was cut.
fn cut(mut text: String) -> String {
    const MAX: usize = 64 << 10;
    if text.len() > MAX {
        let end = (0..=MAX).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
        let cut = text.len() - end;
        text.truncate(end);
        text.push_str(&format!("... ({cut} more bytes)"));
    }
    text
}

/// Names a tree and its options, so that any worker can build the same tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeSpec {
    pub name: String,
    pub args: Vec<String>,
}

impl TreeSpec {
    pub fn new(name: impl Into<String>, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self { name: name.into(), args: args.into_iter().map(Into::into).collect() }
    }

    /// The tree as a user would type it in a shell: `uts --preset T1`, `exec -- ./prog 'x y'`.
    pub fn command_line(&self) -> String {
        std::iter::once(&self.name).chain(&self.args).map(|a| shell_word(a)).collect::<Vec<_>>().join(" ")
    }
}

/// `word` as a shell reads it back: quoted when empty or holding anything but plain characters.
pub fn shell_word(word: &str) -> std::borrow::Cow<'_, str> {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b);
    // A leading `=` expands in zsh.
    match !word.is_empty() && !word.starts_with('=') && word.bytes().all(plain) {
        true => word.into(),
        false => format!("'{}'", word.replace('\'', r"'\''")).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failure that would not fit in a frame to the master stalled a remote run: its message
    /// held a node of 26 MB.
    #[test]
    fn a_failure_carries_at_most_64_kib_of_node_and_message() {
        let f = JobFailure::new(JobId(3), "n".repeat(100_000), format!("bad node {}", "é".repeat(10_000_000)));
        assert!(f.node.starts_with("nnn") && f.node.ends_with("... (34464 more bytes)"), "{}", &f.node[65_000..]);
        assert!(f.message.len() < (64 << 10) + 40 && f.message.starts_with("bad node é"));
        assert!(f.message.ends_with(" more bytes)"));
        let mut frame = Vec::new();
        crate::codec::encode_frame(
            &crate::WorkerFrame::Message { thread: 0, message: FromWorker::Failed(f) },
            &mut frame,
        )
        .unwrap();
        assert_eq!(
            JobFailure::new(JobId(3), "n", "m"),
            JobFailure { id: JobId(3), node: "n".into(), message: "m".into(), given_up: false }
        );
    }

    /// A shell given the command line gets the tree's words back.
    #[test]
    fn a_command_line_quotes_what_a_shell_would_split_or_drop() {
        let spec = TreeSpec::new("exec", ["--root", "", "--", "./bin.py", "x y", "it's", "a*", "--n=3"]);
        let line = spec.command_line();
        assert_eq!(line, r#"exec --root '' -- ./bin.py 'x y' 'it'\''s' 'a*' --n=3"#);
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("for w in {line}; do printf '%s\\n' \"$w\"; done")])
            .output()
            .unwrap();
        let words: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(String::from).collect();
        assert_eq!(words[0], "exec");
        assert_eq!(&words[1..], &spec.args[..]);
    }
}
