/*
 * topsort: the topological sorts (linear extensions) of a partial order, by backtracking.
 *
 * Plain use:   topsort N a<b a<b ...      prints every linear extension of the order on 0..N-1
 *              topsort 10 '0<1' '1<2' '3<4'     (at most 64 elements)
 *
 * It is an ordinary sequential enumerator. The lines marked "BTS" are all it takes to run it in
 * parallel under bts, in persistent mode:
 *
 *              bts run exec --persistent -- ./topsort --bts 10 '0<1' '1<2' '3<4'
 *
 * With --bts it reads jobs from stdin, one per line: "job <budget> <max_depth> <depth> <node>",
 * where a node is the elements placed so far ("3 0 1"), or "root". For each job it
 *   - restarts from the job's node (places its elements),
 *   - visits at most <budget> nodes and none deeper than <max_depth>, printing every node it
 *     generates but does not visit as "unexplored <depth> <node>",
 *   - prints its output records as "out <record>", and ends with "done <visited> ...".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n;                 /* elements 0..n-1 */
static uint64_t pred[64];     /* pred[e]: the elements that must come before e */
static int seq[64];           /* the elements placed so far */
static int len;
static uint64_t placed;

static int bts_mode;          /* BTS: running under bts */
static long long budget = -1; /* BTS: nodes a job may visit (-1: no limit) */
static long long max_depth = -1; /* BTS: deepest node a job may visit (-1: no limit) */
static long long visited, leaves, deepest; /* BTS: what the job did */

static void print_sequence(const char *prefix) {
    fputs(prefix, stdout);
    for (int i = 0; i < len; i++) printf(i ? " %d" : "%d", seq[i]);
    putchar('\n');
}

static int available(int e) {
    return !((placed >> e) & 1) && (pred[e] & ~placed) == 0;
}

static void place(int e) { seq[len++] = e; placed |= 1ULL << e; }
static void unplace(void) { placed &= ~(1ULL << seq[--len]); }

/* Visits the current node and, depth first, the nodes below it. */
static void extend(void) {
    visited++;                                                  /* BTS: count the visit */
    if (len > deepest) deepest = len;                           /* BTS */
    if (len == n) {
        leaves++;                                               /* BTS */
        print_sequence(bts_mode ? "out " : "");                 /* BTS: "out " before a record */
        return;
    }
    for (int e = 0; e < n; e++) {
        if (!available(e)) continue;
        place(e);
        if ((budget >= 0 && visited >= budget)                  /* BTS: the budget is spent, */
            || (max_depth >= 0 && len > max_depth)) {           /* BTS: or the child is too deep: */
            printf("unexplored %d ", len);                      /* BTS: hand it back to bts */
            print_sequence("");                                 /* BTS */
        } else {
            extend();
        }
        unplace();
    }
}

/* BTS: runs the jobs bts writes on stdin, one at a time. */
static int serve_jobs(void) {
    static char line[1 << 16];
    long long jobs = 0;
    if (getenv("BTS_NODE")) {                                   /* BTS: a one-shot job */
        fprintf(stderr, "topsort --bts reads its jobs on stdin: run it with bts run exec --persistent\n");
        return 2;
    }
    while (fgets(line, sizeof line, stdin)) {
        char b[32], d[32];
        int depth, off = 0;
        if (sscanf(line, "job %31s %31s %d %n", b, d, &depth, &off) != 3 || off == 0) {
            fprintf(stderr, "topsort: not a job line: %s", line);
            return 1;
        }
        budget = strcmp(b, "inf") ? atoll(b) : -1;
        max_depth = strcmp(d, "inf") ? atoll(d) : -1;
        len = 0, placed = 0, visited = 0, leaves = 0, deepest = 0;
        char *node = line + off, *end;
        if (strncmp(node, "root", 4) != 0) {                    /* restart from the job's node */
            for (long e = strtol(node, &end, 10); end != node; e = strtol(node, &end, 10)) {
                place((int)e);
                node = end;
            }
        }
        extend();
        /* job=: the answer is checked against its job */
        printf("done %lld leaves=%lld max_depth=%lld job=%lld\n", visited, leaves, deepest, ++jobs);
        fflush(stdout);
    }
    return 0;
}

/* The number at the start of s, ended by `end`; -1 if there is none or it is out of range. */
static long element(const char *s, char end) {
    char *rest;
    long x = strtol(s, &rest, 10);
    return rest == s || *rest != end || x < 0 || x > 64 ? -1 : x;
}

int main(int argc, char **argv) {
    int a = 1;
    if (a < argc && strcmp(argv[a], "--bts") == 0) bts_mode = 1, a++;   /* BTS */
    long size = a < argc ? element(argv[a], '\0') : -1;
    if (size < 1 || size > 64) {
        fprintf(stderr, "usage: topsort [--bts] N a<b a<b ... (1 <= N <= 64)\n");
        return 2;
    }
    n = (int)size;
    for (a++; a < argc; a++) {
        char *less = strchr(argv[a], '<');
        long x = less ? element(argv[a], '<') : -1, y = less ? element(less + 1, '\0') : -1;
        if (x < 0 || y < 0 || x >= n || y >= n || x == y) {
            fprintf(stderr, "topsort: bad relation %s\n", argv[a]);
            return 2;
        }
        pred[y] |= 1ULL << x;
    }
    if (bts_mode) return serve_jobs();                          /* BTS */
    extend();
    fprintf(stderr, "%lld nodes, %lld linear extensions\n", visited, leaves);
    return 0;
}
