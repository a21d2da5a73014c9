#!/usr/bin/env python3
"""queens: the solutions of the N-queens problem, by backtracking.

Plain use:   python3 queens.py N        prints every solution, one per line (the column of the
                                        queen in each row)

It is an ordinary sequential enumerator. The lines marked "BTS" are all it takes to run it in
parallel under bts, in one-shot mode (a process per job):

             bts run exec -- python3 queens.py N

bts starts it with the job in its environment: BTS_NODE (the columns placed so far, "2 0 3", or
"root"), BTS_DEPTH, BTS_BUDGET and BTS_MAX_DEPTH ("inf" for no limit). It then
  - restarts from the job's node,
  - visits at most BTS_BUDGET nodes and none deeper than BTS_MAX_DEPTH, printing every node it
    generates but does not visit as "unexplored <depth> <node>",
  - prints its output records as "out <record>", ends with "done <visited> ...", and exits.
"""
import os
import sys

if len(sys.argv) != 2 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
    sys.exit("usage: queens.py N (N >= 1)")
n = int(sys.argv[1])
job = os.environ.get("BTS_NODE")                                        # BTS: a job from bts?
limit = lambda name: float("inf") if os.environ[name] == "inf" else int(os.environ[name])  # BTS
budget = limit("BTS_BUDGET") if job else float("inf")                   # BTS
max_depth = limit("BTS_MAX_DEPTH") if job else float("inf")             # BTS
visited = leaves = 0


def free(cols, c):
    r = len(cols)
    return all(c != q and r - i != abs(c - q) for i, q in enumerate(cols))


def place(cols):
    """Visits the board `cols` and, depth first, the boards below it."""
    global visited, leaves
    visited += 1                                                        # BTS: count the visit
    if len(cols) == n:
        print(("out " if job else "") + " ".join(map(str, cols)))          # BTS: "out " before a record
    children = [cols + [c] for c in range(n) if free(cols, c)]
    if not children:
        leaves += 1
    for child in children:
        if visited >= budget or len(child) > max_depth:                 # BTS: budget spent or too deep:
            print("unexplored", len(child), *child)                     # BTS: hand it back to bts
        else:
            place(child)


start = [] if not job or job == "root" else [int(c) for c in job.split()]  # BTS: restart from the node
place(start)
if job:                                                                 # BTS
    print(f"done {visited} leaves={leaves}")                            # BTS: the job is finished
else:
    print(f"{visited} nodes, {leaves} leaves", file=sys.stderr)
