/*
 * The cheapest possible legacy program, for measuring what the line protocol costs per job: the
 * complete binary tree of N nodes in heap order (node v has children 2v+1 and 2v+2 below N).
 *   trivial N            persistent: jobs on stdin
 *   trivial N oneshot    one job from BTS_NODE and BTS_BUDGET (depth limits are not used)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long n;

static long depth_of(long v) {
    long d = 0;
    for (v = v + 1; v > 1; v >>= 1) d++;
    return d;
}

static void job(long budget, long v) {
    long stack[128], top = 0, visited = 0;
    stack[top++] = v;
    while (top) {
        long u = stack[--top];
        if (budget >= 0 && visited == budget) {
            printf("unexplored %ld %ld\n", depth_of(u), u);
            continue;
        }
        visited++;
        if (2 * u + 2 < n) stack[top++] = 2 * u + 2;
        if (2 * u + 1 < n) stack[top++] = 2 * u + 1;
    }
    printf("done %ld\n", visited);
    fflush(stdout);
}

int main(int argc, char **argv) {
    n = atol(argv[1]);
    if (argc > 2 && strcmp(argv[2], "oneshot") == 0) {
        const char *b = getenv("BTS_BUDGET"), *node = getenv("BTS_NODE");
        job(strcmp(b, "inf") ? atol(b) : -1, strcmp(node, "root") ? atol(node) : 0);
        return 0;
    }
    char line[256], b[32], node[64];
    while (fgets(line, sizeof line, stdin)) {
        if (sscanf(line, "job %31s %*s %*s %63s", b, node) != 2) return 1;
        job(strcmp(b, "inf") ? atol(b) : -1, strcmp(node, "root") ? atol(node) : 0);
    }
    return 0;
}
