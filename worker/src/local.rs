//! The loop of a worker thread: take jobs from the master, run them, send reports back in batches.

use crate::JobRunner;
use bts_protocol::{FromWorker, Job, ReportBatch, ToWorker};
use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

/// When a worker sends its finished jobs back.
#[derive(Clone, Copy, Debug)]
pub struct WorkerLoop {
    /// Send the batch once its first job finished this long ago (and whenever the worker runs out
    /// of jobs): short enough for returned nodes to reach idle workers soon, long enough that a
    /// stream of tiny jobs costs one message per interval.
    pub flush_interval: Duration,
    /// Send early when this many nodes are waiting to be returned.
    pub max_returned: usize,
    /// Send early when this many output bytes are waiting.
    pub max_output: usize,
    /// Send early when returned nodes add up to this many bytes.
    pub max_returned_bytes: usize,
}

impl Default for WorkerLoop {
    fn default() -> Self {
        Self {
            flush_interval: Duration::from_millis(1),
            max_returned: 1 << 16,
            max_output: 1 << 20,
            max_returned_bytes: 8 << 20,
        }
    }
}

/// Runs jobs from `inbox` until the master sends `Finish`, the inbox closes or `send` fails
/// (returns false). Jobs are run in the order received. When the inbox closes, the reports of the
/// jobs done are sent first, and the jobs still queued are left to the master.
pub fn run_worker(
    runner: &mut dyn JobRunner,
    inbox: &Receiver<ToWorker>,
    send: &mut dyn FnMut(FromWorker) -> bool,
    config: WorkerLoop,
) {
    let mut queue = VecDeque::new();
    let mut batch = ReportBatch::default();
    let mut batch_started = Instant::now();
    let mut returned_bytes = 0;
    loop {
        // Take what the master sent; block only when there is nothing else to do.
        loop {
            let message = if queue.is_empty() {
                if !batch.is_empty() && !send(FromWorker::Reports(std::mem::take(&mut batch))) {
                    return;
                }
                match inbox.recv() {
                    Ok(m) => m,
                    Err(_) => return,
                }
            } else {
                match inbox.try_recv() {
                    Ok(m) => m,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        // The process leaves the run: the jobs done go back; those queued the
                        // master gives to others.
                        if !batch.is_empty() {
                            send(FromWorker::Reports(std::mem::take(&mut batch)));
                        }
                        return;
                    }
                }
            };
            match message {
                ToWorker::Jobs(jobs) => queue.extend(jobs),
                ToWorker::Incumbent(incumbent) => {
                    tracing::debug!(value = incumbent.value, "the master's incumbent");
                    runner.raise(incumbent);
                }
                ToWorker::Finish => return,
                // The searcher heard it at once from its process (a thread hears it only between
                // jobs): the jobs queued here go back rather than hold the stop up.
                ToWorker::Stopping => {
                    if !queue.is_empty() && !send(FromWorker::Unstarted(queue.drain(..).map(|j: Job| j.id).collect())) {
                        return;
                    }
                }
                // The master's to log for its own threads.
                ToWorker::Barred(_) => {}
            }
        }

        let job = queue.pop_front().expect("queue is not empty");
        if batch.is_empty() {
            batch_started = Instant::now();
            returned_bytes = 0;
        }
        let before = batch.returned.len();
        if let Err(failure) = runner.run(&job, &mut batch) {
            if !batch.is_empty() && !send(FromWorker::Reports(std::mem::take(&mut batch))) {
                return;
            }
            if !send(FromWorker::Failed(failure)) {
                return;
            }
            continue;
        }
        returned_bytes += batch.returned[before..].iter().map(|r| r.node.len()).sum::<usize>();
        let due = batch_started.elapsed() >= config.flush_interval
            || batch.returned.len() >= config.max_returned
            || returned_bytes >= config.max_returned_bytes
            || batch.output.len() >= config.max_output;
        if due && !queue.is_empty() && !send(FromWorker::Reports(std::mem::take(&mut batch))) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bts_protocol::{Budget, Incumbent, Job, JobFailure, JobId, JobReport, NodeBytes};
    use std::sync::mpsc::{Sender, channel};

    /// Reports each job it runs; the first one closes the inbox (the process leaves the run).
    struct Leaving {
        inbox: Option<Sender<ToWorker>>,
        ran: Vec<JobId>,
    }

    impl JobRunner for Leaving {
        fn run(&mut self, job: &Job, batch: &mut ReportBatch) -> Result<(), JobFailure> {
            self.ran.push(job.id);
            self.inbox = None;
            report(job, batch);
            Ok(())
        }
    }

    /// A job of one node, a leaf, done.
    fn report(job: &Job, batch: &mut ReportBatch) {
        batch.reports.push(JobReport {
            id: job.id,
            visited: 1,
            leaves: Some(1),
            max_depth: Some(job.depth),
            outputs: 0,
            returned: 0,
            output_bytes: 0,
            elapsed_ns: 1,
            counters: Vec::new(),
            pruned: 0,
        });
    }

    /// Runs a worker on `inbox` to its end: what it sent.
    fn sent_by(
        runner: &mut dyn JobRunner,
        inbox: &std::sync::mpsc::Receiver<ToWorker>,
        config: WorkerLoop,
    ) -> Vec<FromWorker> {
        let mut sent = Vec::new();
        run_worker(
            runner,
            inbox,
            &mut |m| {
                sent.push(m);
                true
            },
            config,
        );
        sent
    }

    /// Reports each job it runs; the first one tells its worker the run stops, then that it is over.
    struct Stopped {
        inbox: Sender<ToWorker>,
        ran: Vec<JobId>,
    }

    impl JobRunner for Stopped {
        fn run(&mut self, job: &Job, batch: &mut ReportBatch) -> Result<(), JobFailure> {
            if self.ran.is_empty() {
                self.inbox.send(ToWorker::Stopping).unwrap();
                self.inbox.send(ToWorker::Finish).unwrap();
            }
            self.ran.push(job.id);
            report(job, batch);
            Ok(())
        }
    }

    /// A worker told that the run stops finishes the job under way and hands the queued ones back
    /// unstarted (a legacy program's jobs would hold the stop up for as long again).
    #[test]
    fn a_stop_hands_the_queued_jobs_back_unstarted() {
        let (tx, rx) = channel();
        tx.send(ToWorker::Jobs(vec![job(1), job(2), job(3)])).unwrap();
        let mut runner = Stopped { inbox: tx, ran: Vec::new() };
        let sent = sent_by(&mut runner, &rx, WorkerLoop::default());
        assert_eq!(runner.ran, vec![JobId(1)]);
        assert!(sent.contains(&FromWorker::Unstarted(vec![JobId(2), JobId(3)])), "{sent:?}");
        assert!(sent.iter().any(|m| matches!(m, FromWorker::Reports(b) if b.reports[0].id == JobId(1))), "{sent:?}");
    }

    fn job(id: u64) -> Job {
        let node = NodeBytes::new();
        Job { id: JobId(id), depth: 0, budget: Budget(1), max_depth: None, node, incumbent: Incumbent::NONE }
    }

    #[test]
    fn a_closed_inbox_sends_the_reports_of_the_jobs_done_and_leaves_the_rest() {
        let (tx, rx) = channel();
        tx.send(ToWorker::Jobs(vec![job(1), job(2)])).unwrap();
        let mut runner = Leaving { inbox: Some(tx), ran: Vec::new() };
        // Batches wait for the end: only the inbox closing sends this one.
        let config = WorkerLoop { flush_interval: Duration::from_secs(3600), ..WorkerLoop::default() };
        let sent = sent_by(&mut runner, &rx, config);
        assert_eq!(runner.ran, vec![JobId(1)], "the queued job is left to the master");
        let reported: Vec<JobId> = sent
            .iter()
            .flat_map(|m| match m {
                FromWorker::Reports(batch) => batch.reports.iter().map(|r| r.id).collect(),
                FromWorker::Failed(_) | FromWorker::Unstarted(_) => Vec::new(),
            })
            .collect();
        assert_eq!(reported, vec![JobId(1)]);
    }
}
