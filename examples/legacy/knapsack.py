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

lines = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
capacity = int(lines[0][0])
# Densest first, exactly (floats tie densities that differ past their 53 bits, and the bound is then
# wrong); items of weight 0 first of all.
items = sorted(((int(v), int(w), i) for i, (v, w) in enumerate(lines[1:])),
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

    def visit(self, nxt, value, weight, taken):
        self.visited += 1
        if value >= self.least:                                         # worth reporting
            self.best = (value, taken)
            self.least = value if bts else value + 1                    # BTS: ties, for --all-best
            if bts:                                                     # BTS: report it at once
                print(f"solution {value} {record(value, taken)}")
        if nxt == n:
            return
        v, w, _ = items[nxt]
        children = []
        if weight + w <= capacity:
            children.append((nxt + 1, value + v, weight + w, taken + [nxt]))
        children.append((nxt + 1, value, weight, taken))
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
    s.visit(0, 0, 0, [])
    print(record(*s.best))
    sys.exit(0)
if sys.stdin.isatty() or "BTS_NODE" in os.environ:                      # BTS: jobs come on stdin
    sys.exit("knapsack.py --bts reads its jobs on stdin: run it with bts run exec --persistent")
for line in sys.stdin:                                                  # BTS: one job a line
    _, budget, max_depth, depth, least, node = line.rstrip("\n").split(" ", 5)
    number = lambda t, none: none if t in ("inf", "none") else int(t)
    s = Search(number(least, 0), number(budget, float("inf")), number(max_depth, float("inf")))
    nxt, value, weight, taken = node.split() if node != "root" else ("0", "0", "0", "-")
    taken = [] if taken == "-" else [int(t) for t in taken.split(",")]
    if bound(int(nxt), int(value), int(weight)) < s.least:             # the job's own node is pruned
        print("done 0 pruned=1", flush=True)
        continue
    s.visit(int(nxt), int(value), int(weight), taken)
    print(f"done {s.visited} pruned={s.pruned}", flush=True)
