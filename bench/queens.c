/*
 * The fastest N-queens backtracking count we know how to write, the yardstick of bts's queens tree
 * (benches/core.rs): bitboards of the columns and both diagonals, free squares taken with
 * free & -free. Prints the nodes of the tree (the empty board included) and the solutions.
 *   queens N
 */
#include <stdio.h>
#include <stdlib.h>

static unsigned long long nodes, solutions;
static unsigned all;

static void place(unsigned cols, unsigned left, unsigned right) {
    nodes++;
    if (cols == all) {
        solutions++;
        return;
    }
    unsigned free = ~(cols | left | right) & all;
    while (free) {
        unsigned bit = free & -free;
        free ^= bit;
        place(cols | bit, (left | bit) << 1, (right | bit) >> 1);
    }
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 8;
    all = n >= 32 ? ~0u : (1u << n) - 1;
    place(0, 0, 0);
    printf("%llu %llu\n", nodes, solutions);
    return 0;
}
