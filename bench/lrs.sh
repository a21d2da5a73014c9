#!/usr/bin/env bash
# Parallel lrs, side by side in one run: plain lrs, mplrs (mpirun -np 3 and -np 4, the better one
# counts) and `bts run lrs --workers 2`, on cyclic polytopes whose facets take plain lrs 5 to 60 s.
# Two ways of running, each like for like:
#   count   all three count without printing: lrs with `countonly`, mplrs -countonly, bts --count-only
#   output  all three write the facets to a file: lrs FILE >out, mplrs FILE out, bts --output out
# Prints the wall times, the ratios, the host's ceiling (two plain lrs at once against one), and
# the CPU that bts's run costs beyond plain lrs's (process
# starts, reading the input, pivoting to the restart cobasis, bts itself) as a share of it; and
# the cost of one job (a budget-1 job's CPU) times the jobs of the run, as a share of its CPU.
#
#   bench/lrs.sh [ROUNDS]            (from the repository; builds bts in release mode first)
#   BENCH_INPUTS="c8-50.ext c12-30.ext" bench/lrs.sh 1       (other cyclic polytopes C(N, D))
#
# Needs lrs and mplrs (Debian packages lrslib and mplrs) and mpirun (openmpi-bin). Each round
# runs every contender once per input, in turn, so that load from elsewhere falls on all of them;
# the best of the rounds is reported.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
cargo build --release -q
bts=${CARGO_TARGET_DIR:-$PWD/target}/release/bts
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# The cyclic polytope C(n, d): n points (t, t^2, .., t^d) on the moment curve, t = 1..n (exact
# integers: python3, since awk's doubles round t^d).
cyclic() {
    python3 -c 'import sys
d, n = int(sys.argv[1]), int(sys.argv[2])
print(f"cyclic-{d}-{n}\nV-representation\nbegin\n{n} {d + 1} rational")
for t in range(1, n + 1): print(" ".join(str(t**k) for k in range(d + 1)))
print("end")' "$1" "$2"
}
# Inputs cN-D.ext (any D and N): by default three that take plain lrs 10 to 20 s on the machine of
# the latest runs (C(30, 12), C(50, 8) and C(40, 10) in the runs before 2026-11-25).
inputs=(${BENCH_INPUTS:-c12-33.ext c8-60.ext c10-44.ext})
for input in "${inputs[@]}"; do
    d=${input#c} d=${d%%-*} n=${input#*-} n=${n%.ext}
    cyclic "$d" "$n" >"$work/$input"
    { cat "$work/$input"; echo countonly; } >"$work/count-$input"
done

# Runs a command: its wall seconds in $wall, its user+sys CPU seconds (children included) in $cpu.
timed() {
    /usr/bin/time -o "$work/time" -f "%e %U %S" "$@" >"$work/stdout" 2>"$work/stderr" || {
        echo "failed: $*" >&2
        cat "$work/stderr" >&2
        exit 1
    }
    read -r wall cpu <<<"$(awk '{ print $1, $2 + $3 }' "$work/time")"
}

declare -A best
keep() { # name seconds
    local old=${best[$1]:-}
    if [ -z "$old" ] || awk -v a="$2" -v b="$old" 'BEGIN { exit !(a < b) }'; then best[$1]=$2; fi
}

jobs_of() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["jobs"])' "$work/s.json"; }
keep_cpu() { # "input mode": bts's CPU, and the jobs of the run that took the least
    local old=${best[$1 bts cpu]:-}
    keep "$1 bts cpu" "$cpu"
    if [ "${best[$1 bts cpu]}" != "$old" ]; then best[$1 jobs]=$(jobs_of); fi
}

for round in $(seq "$rounds"); do
    for input in "${inputs[@]}"; do
        f=$work/$input out=$work/out.ext
        # count
        timed lrs "$work/count-$input"; keep "$input count lrs" "$wall"; keep "$input count lrs cpu" "$cpu"
        timed sh -c 'lrs "$1" >/dev/null 2>&1 & lrs "$1"; wait' two "$work/count-$input"; keep "$input count two" "$wall"
        for np in 3 4; do
            timed mpirun --oversubscribe -np $np mplrs -countonly "$f"; keep "$input count mplrs" "$wall"
        done
        timed "$bts" run --progress never --workers 2 --count-only --summary-json "$work/s.json" lrs "$f"
        keep "$input count bts" "$wall"; keep_cpu "$input count"
        # output
        timed sh -c 'lrs "$1" >"$2"' lrs "$f" "$out"; keep "$input output lrs" "$wall"; keep "$input output lrs cpu" "$cpu"
        timed sh -c 'lrs "$1" >"$2.2" 2>&1 & lrs "$1" >"$2"; wait' two "$f" "$out"; keep "$input output two" "$wall"
        for np in 3 4; do
            timed mpirun --oversubscribe -np $np mplrs "$f" "$out"; keep "$input output mplrs" "$wall"
        done
        timed "$bts" run --progress never --workers 2 --output "$out" --summary-json "$work/s.json" lrs "$f"
        keep "$input output bts" "$wall"; keep_cpu "$input output"
        echo "round $round $input: count lrs ${best[$input count lrs]} s, mplrs ${best[$input count mplrs]} s," \
            "bts ${best[$input count bts]} s; output lrs ${best[$input output lrs]} s," \
            "mplrs ${best[$input output mplrs]} s, bts ${best[$input output bts]} s" \
            "(load $(cut -d' ' -f1 /proc/loadavg))" >&2
    done
done

# The cost of one job: budget-1 jobs (each visits its own restart cobasis) of the count mode, one
# worker, 300 of them; the CPU per job, bts's included.
for input in "${inputs[@]}"; do
    # A node limit ends the run with exit 3.
    /usr/bin/time -o "$work/time" -f "%U %S" "$bts" run --progress never --workers 1 --count-only --fixed-budget \
        --budget 1 --node-limit 300 --summary-json "$work/s.json" lrs "$work/$input" >/dev/null 2>&1 || true
    best[$input job ms]=$(awk -v j="$(jobs_of)" 'END { printf "%.2f", 1000 * ($1 + $2) / j }' "$work/time")
done

printf '%-11s %-7s %7s %8s %7s %10s %12s %10s %6s %9s %8s\n' input mode "lrs s" "mplrs s" "bts s" "lrs/bts" \
    "mplrs/bts" "bts cpu+" jobs "job cost" ceiling
for input in "${inputs[@]}"; do
    for mode in count output; do
        k="$input $mode"
        awk -v i="$input" -v mode="$mode" -v l="${best[$k lrs]}" -v m="${best[$k mplrs]}" -v b="${best[$k bts]}" \
            -v lc="${best[$k lrs cpu]}" -v bc="${best[$k bts cpu]}" -v jobs="${best[$k jobs]}" \
            -v ms="${best[$input job ms]}" -v two="${best[$k two]}" 'BEGIN {
            printf "%-11s %-7s %7.2f %8.2f %7.2f %9.2fx %11.2fx %9.1f%% %6d %8.1f%% %7.2fx\n", i, mode, l, m, b, l / b,
                m / b, 100 * (bc - lc) / bc, jobs, 100 * jobs * ms / 1000 / bc, 2 * l / two }'
    done
done
echo "(best of $rounds rounds; bts cpu+: the CPU of bts's run beyond plain lrs's, as a share of bts's;"
echo " ceiling: two plain lrs at once, each on the whole input, against one: what two cores of this host give"
echo " work that shares nothing, and so the most any parallel lrs could reach here;"
echo " job cost: the jobs of the run times the CPU of a budget-1 job ($(for i in "${inputs[@]}"; do printf '%s %s ms ' "$i" "${best[$i job ms]}"; done)), as a share of the run's CPU)"
