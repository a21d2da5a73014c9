#!/usr/bin/env python3
"""knapsack: a 0/1 knapsack by branch and bound (Dantzig's bound), in the file format of
`bts run knapsack` (the capacity, then one "value weight" pair per line).

Plain use:   python3 knapsack.py FILE       prints the best packing: "value=V items=I,J,..."

The lines marked "BTS" run it in parallel under bts, in persistent mode, as a branch and bound:

             bts run exec --persistent --optimise -- python3 knapsack.py FILE --bts

bts writes "job <budget> <max_depth> <depth> <least> <node>" lines on stdin: <least> is the least
value still worth reporting ("none" before any solution): a subtree whose bound is below it is
pruned. A node is "next value weight items" (items taken so far, in density order, or "-"). The
program answers with "solution <value> <record>" for each packing worth reporting (and raises its
own <least> to it: packings that tie are worth reporting under `bts run --all-best`),
"unexplored <depth> <node>" for the nodes it hands back, and "done <visited> pruned=<n>".
"""
import os
import sys
from fractions import Fraction



def read_items(path):
    """The capacity and the (value, weight) pairs; blank lines and lines starting with # are skipped."""
    try:
        with open(path, encoding="utf-8-sig") as f:
            lines = [(k, l.split()) for k, l in enumerate(f, 1) if l.strip() and not l.lstrip().startswith("#")]
        if not lines or len(lines[0][1]) != 1:
            raise ValueError("the first line must be the capacity alone")
        pairs = []
        for k, words in lines[1:]:
            if len(words) != 2:
                raise ValueError(f"line {k}: expected 'value weight'")
            pairs.append(tuple(int(x) for x in words))
        capacity = int(lines[0][1][0])
        if capacity < 0 or any(v < 0 or w < 0 for v, w in pairs):
            raise ValueError("the numbers must not be negative")
        return capacity, pairs
    except (OSError, ValueError, UnicodeDecodeError) as e:
        sys.exit(f"knapsack.py: {path}: {e}")


if len(sys.argv) < 2:
    sys.exit("usage: knapsack.py FILE [--bts]")
capacity, pairs = read_items(sys.argv[1])
# Densest first, exactly (floats tie densities that differ past their 53 bits, and the bound is then
# wrong); items of weight 0 first of all.
items = sorted(((v, w, i) for i, (v, w) in enumerate(pairs)),
               key=lambda t: (t[1] != 0, -Fraction(t[0], t[1]) if t[1] else 0))
n = len(items)


def bound(nxt, value, weight):
    room, b = capacity - weight, value
    for v, w, _ in items[nxt:]:
        if w > room:
            return b + v * room // w
        room, b = room - w, b + v
    return b


class Search:
    def __init__(self, least, budget, max_depth):
        self.least, self.budget, self.max_depth = least, budget, max_depth
        self.visited = self.pruned = 0
        self.best = None

    def visit(self, nxt, value, weight, taken, fresh):
        self.visited += 1
        if fresh and value >= self.least:                               # a new packing, worth reporting
            self.best = (value, taken)
            self.least = value if bts else value + 1                    # BTS: ties, for --all-best
            if bts:                                                     # BTS: report it at once
                print(f"solution {value} {record(value, taken)}")
        if nxt == n:
            return
        v, w, _ = items[nxt]
        children = []
        if weight + w <= capacity:
            children.append((nxt + 1, value + v, weight + w, taken + [nxt], True))
        children.append((nxt + 1, value, weight, taken, False))                 # the same packing
        for child in children:
            if bound(*child[:3]) < self.least:                           # cannot reach least: prune
                self.pruned += 1
            elif self.visited >= self.budget or child[0] > self.max_depth:  # BTS: hand it back
                print("unexplored", child[0], child[0], child[1], child[2], ",".join(map(str, child[3])) or "-")
            else:
                self.visit(*child)


def record(value, taken):
    """The packing's items numbered in the file's order."""
    return f"value={value} items={','.join(str(i) for i in sorted(items[t][2] for t in taken))}"


sys.setrecursionlimit(10 * n + 100)
bts = "--bts" in sys.argv
if not bts:
    s = Search(0, float("inf"), float("inf"))
    s.visit(0, 0, 0, [], True)
    print(record(*s.best))
    sys.exit(0)
if sys.stdin.isatty() or "BTS_NODE" in os.environ:                      # BTS: jobs come on stdin
    sys.exit("knapsack.py --bts reads its jobs on stdin: run it with bts run exec --persistent --optimise")
for line in sys.stdin:                                                  # BTS: one job a line
    words = line.rstrip("\n").split(" ", 5)
    if len(words) != 6:
        sys.exit("knapsack.py --bts: a job line without <least>: run it with bts run exec --persistent --optimise")
    _, budget, max_depth, depth, least, node = words
    number = lambda t, none: none if t in ("inf", "none") else int(t)
    s = Search(number(least, 0), number(budget, float("inf")), number(max_depth, float("inf")))
    nxt, value, weight, taken = node.split() if node != "root" else ("0", "0", "0", "-")
    taken = [] if taken == "-" else [int(t) for t in taken.split(",")]
    if bound(int(nxt), int(value), int(weight)) < s.least:             # the job's own node is pruned
        print("done 0 pruned=1", flush=True)
        continue
    # A node that took its last item holds a packing no job has reported yet.
    fresh = node == "root" or (taken and taken[-1] == int(nxt) - 1)
    s.visit(int(nxt), int(value), int(weight), taken, fresh)
    print(f"done {s.visited} pruned={s.pruned}", flush=True)
