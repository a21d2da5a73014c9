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
import json
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time

# T1L's published node count; its leaves and depth come from a run on local threads (`reference`).
T1L = {"nodes": 102_181_082}
# Three SHA-1 evaluations per child (the tree is the same): runs long enough to see every worker join
# and to kill some mid-run on 2 cores.
TREE = ["uts", "--preset", "T1L", "-g", "3"]
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
    if "VmRSS" not in fields:
        return None  # exited, not yet reaped
    return int(fields["Threads"][0]), int(fields["VmRSS"][0]) / 1024, int(fields["VmHWM"][0]) / 1024


def sockets(pid):
    """Sockets the process holds (distinct ones: the master keeps two descriptors of each connection)."""
    found = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:"):
                found.add(link)
    except OSError:
        return 0
    return len(found)


def start_master(dir, args):
    addr = os.path.join(dir, "addr")
    cmd = [BTS, "run", "-q", "--progress", "never", "--listen", "127.0.0.1:0", "--address-file", addr,
           "--summary-json", os.path.join(dir, "summary.json"), "--hist", os.path.join(dir, "hist.csv"),
           "--workers", "0"] + args
    started = time.time()
    master = subprocess.Popen(cmd, stderr=open(os.path.join(dir, "master.log"), "w"))
    deadline = time.time() + 20
    while not (os.path.exists(addr) and open(addr).read().strip()):
        if time.time() > deadline or master.poll() is not None:
            sys.exit(f"the master did not start: {open(os.path.join(dir, 'master.log')).read()}")
        time.sleep(0.01)
    return master, open(addr).read().split()[0], started


def start_workers(address, n):
    null = subprocess.DEVNULL
    return [subprocess.Popen([BTS, "worker", "--connect", address, "--threads", "1"], stdout=null, stderr=null,
                             close_fds=False) for _ in range(n)]


def watch(master, workers, kill=False):
    """Samples the master until it ends; with `kill`, kills a tenth of the workers with SIGKILL one
    second after all of them joined."""
    samples, killed, all_in = [], [], None
    while master.poll() is None:
        s = status(master.pid)
        if s:
            samples.append(s)
        if kill and all_in is None and sockets(master.pid) > len(workers):
            all_in = time.time()
        if all_in and not killed and time.time() - all_in >= 1.0:
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
    with open(os.path.join(dir, "summary.json")) as f:
        return json.load(f)


def reference():
    """T1L's totals counted by two local threads: the second method the remote runs must match."""
    with tempfile.TemporaryDirectory() as dir:
        path = os.path.join(dir, "summary.json")
        subprocess.run([BTS, "run", "-q", "--progress", "never", "--workers", "2", "--summary-json", path,
                        "uts", "--preset", "T1L"], check=True)
        with open(path) as f:
            local = json.load(f)
    if local["nodes"] != T1L["nodes"]:
        sys.exit(f"local threads counted {local['nodes']} nodes of T1L, published {T1L['nodes']}")
    T1L.update(leaves=local["leaves"], max_depth=local["max_depth"])


def exact(summary):
    got = {k: summary.get(k) for k in T1L}
    return "exact" if got == T1L else f"WRONG: {got}, published {T1L}"


def joined_at(dir, n):
    """From the run's history: when all `n` workers had joined, and the most busy at once."""
    try:
        with open(os.path.join(dir, "hist.csv")) as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return None, 0
    all_in = next((float(r["elapsed_s"]) for r in rows if int(r["workers"]) >= n), None)
    return all_in, max((int(r["busy_workers"]) for r in rows), default=0)


def budget(n, kill):
    with tempfile.TemporaryDirectory() as dir:
        master, address, started = start_master(dir, TREE)
        t0 = time.time()
        workers = start_workers(address, n)
        spawned = time.time() - t0
        samples, killed = watch(master, workers, kill)
        summary = finish(dir, master, workers)
        all_in, busy = joined_at(dir, n)
        threads = sorted({s[0] for s in samples})
        rss = max((s[1] for s in samples), default=0)
        what = f"{n} workers" + (f", {len(killed)} killed with SIGKILL 1 s after all joined" if kill else "")
        print(f"budget, T1L -g 3, {what}: {exact(summary)}; {summary['elapsed_s']:.1f} s, "
              f"{summary['nodes_per_s'] / 1e6:.1f} M nodes/s, {summary['jobs']} jobs")
        print(f"  master: threads {threads}, resident memory up to {rss:.0f} MiB")
        # The history counts from the master's start; the workers were started from t0 on.
        joined = "never seen in the history" if all_in is None else (
            f"{all_in - (t0 - started):.1f} s after the first was started, "
            f"{all_in - (t0 + spawned - started):.1f} s after the last")
        print(f"  start-up: {n} processes started (by this script) in {spawned:.1f} s; all {n} joined {joined}; "
              f"up to {busy} busy at once")


def polling(p):
    with tempfile.TemporaryDirectory() as dir:
        master, address, _ = start_master(dir, ["--mode", "polling"] + TREE)
        workers = start_workers(address, p)
        time.sleep(3)
        per_worker = [(s, sockets(w.pid)) for w in workers if (s := status(w.pid))]
        mstatus, msockets = status(master.pid), sockets(master.pid)
        samples, _ = watch(master, workers)
        summary = finish(dir, master, workers)
        threads = sorted({s[0] for s, _ in per_worker})
        conns = [c for _, c in per_worker]
        rss = max(s[1] for s, _ in per_worker)
        print(f"polling, T1L -g 3, {p} processes of 1 thread: {exact(summary)}; {summary['elapsed_s']:.1f} s, "
              f"{summary['nodes_per_s'] / 1e6:.1f} M nodes/s")
        print(f"  each of the {len(per_worker)} worker processes still running at 3 s: threads {threads}, sockets (the master, peers it polls, peers polling it) min {min(conns)} / "
              f"median {sorted(conns)[len(conns) // 2]} / max {max(conns)}, resident memory up to {rss:.0f} MiB")
        print(f"  master at 3 s: {mstatus[0]} threads, {msockets} sockets, "
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
    reference()
    print(f"T1L: {T1L['nodes']} nodes (published), {T1L['leaves']} leaves, depth {T1L['max_depth']} (local threads)")
    budget(args.workers, kill=False)
    if not args.skip_kill:
        budget(args.workers, kill=True)
    if args.polling:
        polling(args.polling)


if __name__ == "__main__":
    main()
