#!/usr/bin/env python3
"""Many worker processes on one master, on loopback (issue 13).

Budget mode: N `bts worker --threads 1` processes (default 1,000) join one master running T1L;
reports the totals against the published ones, the master's threads and memory (sampled through
the run), how long until every worker had joined and how many were busy at once; then the same
with a tenth of the workers killed with SIGKILL mid-run. Random polling: P processes (default
128) of one thread: totals, and the threads and TCP connections of each process.

    cargo build --release && python3 bench/scale.py [--workers N] [--polling P] [--skip-kill]
"""

import argparse
import csv
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time

T1L = {"nodes": 102_181_082, "leaves": 81_746_377, "max_depth": 13}
BTS = os.path.join(os.path.dirname(__file__), "..", "target", "release", "bts")


def status(pid):
    """Threads, resident and peak resident memory (MiB) of a process."""
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields[key] = value.split()
    except OSError:
        return None
    return int(fields["Threads"][0]), int(fields["VmRSS"][0]) / 1024, int(fields["VmHWM"][0]) / 1024


def sockets(pid):
    """TCP sockets the process holds (descriptors pointing at a socket)."""
    n = 0
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
            except OSError:
                pass
    except OSError:
        return 0
    return n


def start_master(dir, args):
    addr = os.path.join(dir, "addr")
    cmd = [BTS, "run", "-q", "--progress", "never", "--listen", "127.0.0.1:0", "--address-file", addr,
           "--summary-json", os.path.join(dir, "summary.json"), "--hist", os.path.join(dir, "hist.csv"),
           "--workers", "0"] + args
    master = subprocess.Popen(cmd, stderr=open(os.path.join(dir, "master.log"), "w"))
    deadline = time.time() + 20
    while not (os.path.exists(addr) and open(addr).read().strip()):
        if time.time() > deadline or master.poll() is not None:
            sys.exit(f"the master did not start: {open(os.path.join(dir, 'master.log')).read()}")
        time.sleep(0.01)
    return master, open(addr).read().split()[0]


def start_workers(address, n):
    null = subprocess.DEVNULL
    return [subprocess.Popen([BTS, "worker", "--connect", address, "--threads", "1"], stdout=null, stderr=null)
            for _ in range(n)]


def watch(master, workers, kill_at=None):
    """Samples the master until it ends; kills a tenth of the workers `kill_at` s after the start."""
    began, samples, killed = time.time(), [], []
    while master.poll() is None:
        s = status(master.pid)
        if s:
            samples.append(s)
        if kill_at is not None and not killed and time.time() - began >= kill_at:
            killed = random.sample(workers, len(workers) // 10)
            for w in killed:
                w.send_signal(signal.SIGKILL)
        time.sleep(0.2)
    return samples, killed


def finish(dir, master, workers):
    for w in workers:
        try:
            w.wait(timeout=60)
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()
    import json
    with open(os.path.join(dir, "summary.json")) as f:
        return json.load(f)


def exact(summary):
    got = {k: summary.get(k) for k in T1L}
    return "exact" if got == T1L else f"WRONG: {got}, published {T1L}"


def joined_at(dir, n):
    """From the run's history: when all `n` workers had joined, and the most busy at once."""
    with open(os.path.join(dir, "hist.csv")) as f:
        rows = list(csv.DictReader(f))
    all_in = next((float(r["elapsed_s"]) for r in rows if int(r["workers"]) >= n), None)
    return all_in, max((int(r["busy_workers"]) for r in rows), default=0)


def budget(n, kill):
    with tempfile.TemporaryDirectory() as dir:
        master, address = start_master(dir, ["uts", "--preset", "T1L"])
        t0 = time.time()
        workers = start_workers(address, n)
        spawned = time.time() - t0
        samples, killed = watch(master, workers, kill_at=6.0 if kill else None)
        summary = finish(dir, master, workers)
        all_in, busy = joined_at(dir, n)
        threads = sorted({s[0] for s in samples})
        rss = max((s[1] for s in samples), default=0)
        what = f"{n} workers" + (f", {len(killed)} killed with SIGKILL at 6 s" if kill else "")
        print(f"budget, T1L, {what}: {exact(summary)}; {summary['elapsed_s']:.1f} s, "
              f"{summary['nodes_per_s'] / 1e6:.1f} M nodes/s, {summary['jobs']} jobs")
        print(f"  master: threads {threads}, resident memory up to {rss:.0f} MiB")
        print(f"  start-up: {n} processes started in {spawned:.1f} s; all joined by "
              f"{all_in if all_in is None else f'{all_in:.2f} s'} into the run; up to {busy} busy at once")


def polling(p):
    with tempfile.TemporaryDirectory() as dir:
        master, address = start_master(dir, ["--mode", "polling", "uts", "--preset", "T1L"])
        workers = start_workers(address, p)
        time.sleep(5)
        per_worker = [(status(w.pid) or (0, 0, 0), sockets(w.pid)) for w in workers]
        mstatus, msockets = status(master.pid), sockets(master.pid)
        samples, _ = watch(master, workers)
        summary = finish(dir, master, workers)
        threads = sorted({s[0] for s, _ in per_worker})
        conns = [c for _, c in per_worker]
        rss = max(s[1] for s, _ in per_worker)
        print(f"polling, T1L, {p} processes of 1 thread: {exact(summary)}; {summary['elapsed_s']:.1f} s, "
              f"{summary['nodes_per_s'] / 1e6:.1f} M nodes/s")
        print(f"  each worker process at 5 s: threads {threads}, sockets min {min(conns)} / "
              f"median {sorted(conns)[len(conns) // 2]} / max {max(conns)}, resident memory up to {rss:.0f} MiB")
        print(f"  master at 5 s: {mstatus[0]} threads, {msockets} sockets, "
              f"{max((s[1] for s in samples), default=0):.0f} MiB")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--polling", type=int, default=128)
    parser.add_argument("--skip-kill", action="store_true")
    args = parser.parse_args()
    # Every worker holds a connection, and in polling mode one to each process it steals from.
    need = 4 * max(args.workers, args.polling * args.polling // 8) + 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    print(f"# bench/scale.py on {os.cpu_count()} cores, loopback")
    budget(args.workers, kill=False)
    if not args.skip_kill:
        budget(args.workers, kill=True)
    if args.polling:
        polling(args.polling)


if __name__ == "__main__":
    main()
