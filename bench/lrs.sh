#!/usr/bin/env bash
# Parallel lrs, side by side in one run: plain lrs, mplrs (mpirun -np 3 and -np 4, the better one
# counts) and `bts run lrs --workers 2`, on cyclic polytopes whose facets take plain lrs 5 to 60 s.
# Prints the wall times, the ratios, and the CPU that bts's jobs cost beyond plain lrs's (process
# starts, reading the input, pivoting to the restart cobasis): the job cost's share of the run.
#
#   bench/lrs.sh [ROUNDS]            (from the repository; builds bts in release mode first)
#
# Needs lrs and mplrs (Debian packages lrslib and mplrs) and mpirun (openmpi-bin). Each round
# runs every contender once per input, in turn, so that load from elsewhere falls on all of them;
# the best of the rounds is reported.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
cargo build --release -q
bts=$PWD/target/release/bts
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
cyclic 12 28 >"$work/c12-28.ext"
cyclic 8 50 >"$work/c8-50.ext"
inputs=(c12-28.ext c8-50.ext)

# Runs a command: its wall seconds in $wall, its user+sys CPU seconds (children included) in $cpu.
timed() {
    /usr/bin/time -o "$work/time" -f "%e %U %S" "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
    read -r wall cpu <<<"$(awk '{ print $1, $2 + $3 }' "$work/time")"
}

declare -A best
keep() { # name seconds
    local old=${best[$1]:-}
    if [ -z "$old" ] || awk -v a="$2" -v b="$old" 'BEGIN { exit !(a < b) }'; then best[$1]=$2; fi
}

for round in $(seq "$rounds"); do
    for input in "${inputs[@]}"; do
        f=$work/$input
        timed lrs "$f"; keep "$input lrs" "$wall"; keep "$input lrs cpu" "$cpu"
        timed mpirun --oversubscribe -np 3 mplrs "$f" "$work/out3"; keep "$input mplrs" "$wall"
        timed mpirun --oversubscribe -np 4 mplrs "$f" "$work/out4"; keep "$input mplrs" "$wall"
        timed "$bts" run --progress never --workers 2 --count-only lrs "$f"; keep "$input bts" "$wall"
        keep "$input bts cpu" "$cpu"
        echo "round $round $input: lrs ${best[$input lrs]} s, mplrs ${best[$input mplrs]} s, bts ${best[$input bts]} s" >&2
    done
done

printf '%-12s %9s %11s %9s %13s %14s %14s\n' input "lrs s" "mplrs s" "bts s" "lrs / bts" "mplrs / bts" "job cost"
for input in "${inputs[@]}"; do
    l=${best[$input lrs]} m=${best[$input mplrs]} b=${best[$input bts]}
    lc=${best[$input lrs cpu]} bc=${best[$input bts cpu]}
    awk -v i="$input" -v l="$l" -v m="$m" -v b="$b" -v lc="$lc" -v bc="$bc" 'BEGIN {
        printf "%-12s %9.2f %11.2f %9.2f %12.2fx %13.2fx %13.1f%%\n", i, l, m, b, l / b, m / b, 100 * (bc - lc) / bc }'
done
echo "(best of $rounds rounds; job cost: the CPU bts's lrs processes spent beyond plain lrs's, as a share of theirs)"
