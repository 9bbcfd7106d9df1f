/* Strategy probes (include/ldt/planner.h): a plan's strategies, their own prices and the
 * moves between them, the chosen assignment, and the price of any full assignment, so a
 * test can search the same cost function on its own and compare. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "planner/plan_internal.h"

static ldt_status check_node(const ldt_plan *p, int64_t node, const char *what) {
    if (!p) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: plan is NULL", what);
    if (node < 0 || node >= p->nnodes)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: node %lld is out of range, expected 0..%lld",
                 what, (long long)node, (long long)p->nnodes - 1);
    return LDT_OK;
}

static ldt_status check_strategy(const ldt_plan *p, int64_t node, int s, const char *what) {
    LDT_CHECK(check_node(p, node, what));
    if (s < 0 || s >= p->node_ss[node]->n)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "%s: strategy %d of node %lld is out of range, expected 0..%d", what, s,
                 (long long)node, p->node_ss[node]->n - 1);
    return LDT_OK;
}

static int node_nin(const ldt_plan *p, int64_t node) {
    const ldt_tensor *t = p->ctx->nodes[node];
    return t->kind == LDT__PERSISTENT ? 0 : t->nin;
}

ldt_status ldt_plan_strategy_count(const ldt_plan *p, int64_t node, int *out) {
    LDT_CHECK(check_node(p, node, "plan strategy count"));
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan strategy count: out is NULL");
    *out = p->node_ss[node]->n;
    return LDT_OK;
}

ldt_status ldt_plan_strategy_placements(const ldt_plan *p, int64_t node, int s, int k,
                                        ldt_placement *out, int cap) {
    LDT_CHECK(check_strategy(p, node, s, "plan strategy placements"));
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan strategy placements: out is NULL");
    if (k < -1 || k >= node_nin(p, node))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "plan strategy placements: input %d of node %lld, expected -1 (the output) or "
                 "0..%d",
                 k, (long long)node, node_nin(p, node) - 1);
    if (cap < p->nd)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "plan strategy placements: room for %d placements, the mesh has %d dims", cap, p->nd);
    memcpy(out, ldt__plist(p, LDT__SSET_PL(p->node_ss[node], s)[1 + k]), (size_t)p->nd * sizeof *out);
    return LDT_OK;
}

ldt_status ldt_plan_strategy_describe(const ldt_plan *p, int64_t node, int s, char *buf, size_t cap) {
    const uint16_t *pl;
    size_t len = 0;
    char t[128];
    int nin;
    LDT_CHECK(check_strategy(p, node, s, "plan strategy describe"));
    if (!buf || cap == 0) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan strategy describe: no buffer");
    pl = LDT__SSET_PL(p->node_ss[node], s);
    nin = node_nin(p, node);
    buf[0] = 0;
    ldt_placements_format(ldt__plist(p, pl[0]), p->nd, t, sizeof t);
    len = (size_t)snprintf(buf, cap, "out %s", t);
    for (int k = 0; k < nin && len < cap; k++) {
        ldt_placements_format(ldt__plist(p, pl[1 + k]), p->nd, t, sizeof t);
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", k ? " | " : " <- in ", t);
    }
    return LDT_OK;
}

ldt_status ldt_plan_strategy_seconds(const ldt_plan *p, int64_t node, int s, double *out) {
    const ldt__sset *ss;
    LDT_CHECK(check_strategy(p, node, s, "plan strategy seconds"));
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan strategy seconds: out is NULL");
    ss = p->node_ss[node];
    *out = p->ctx->nodes[node]->kind != LDT__PERSISTENT && ss->own ? ss->own[s] : 0;
    return LDT_OK;
}

ldt_status ldt_plan_move_seconds(ldt_plan *p, int64_t node, int k, int from_s, int s, double *out) {
    const ldt_tensor *u;
    int from, to;
    ldt__redist_memo *e;
    LDT_CHECK(check_strategy(p, node, s, "plan move seconds"));
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan move seconds: out is NULL");
    if (k < 0 || k >= node_nin(p, node))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan move seconds: input %d of node %lld, expected 0..%d",
                 k, (long long)node, node_nin(p, node) - 1);
    u = LDT__IN(p->ctx->nodes[node])[k];
    LDT_CHECK(check_strategy(p, u->id, from_s, "plan move seconds (the producer's strategy)"));
    from = LDT__SSET_PL(p->node_ss[u->id], from_s)[0];
    to = LDT__SSET_PL(p->node_ss[node], s)[1 + k];
    if (from == to) {
        *out = 0;
        return LDT_OK;
    }
    if (!(e = ldt__plan_redist(p, p->node_class[u->id], from, to, 0)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan move seconds: out of memory");
    if (e->failed || !isfinite(e->seconds)) {
        char a[128], b[128];
        ldt_placements_format(ldt__plist(p, from), p->nd, a, sizeof a);
        ldt_placements_format(ldt__plist(p, to), p->nd, b, sizeof b);
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                 "plan move seconds: node %lld cannot take strategy %d with its input %d from "
                 "strategy %d: no redistribution makes %s from %s",
                 (long long)node, s, k, from_s, b, a);
    }
    *out = e->seconds;
    return LDT_OK;
}

ldt_status ldt_plan_choice(const ldt_plan *p, int32_t *out, int64_t n) {
    if (!p || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan choice: NULL argument");
    if (n != p->nnodes)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan choice: room for %lld choices, expected %lld (one per node)",
                 (long long)n, (long long)p->nnodes);
    memcpy(out, p->choice, (size_t)n * sizeof *out);
    return LDT_OK;
}

ldt_status ldt_plan_price(ldt_plan *p, const int32_t *choice, int64_t n, double *out) {
    double c;
    if (!p || !choice || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan price: NULL argument");
    if (n != p->nnodes)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan price: %lld choices given, expected %lld (one per node)",
                 (long long)n, (long long)p->nnodes);
    for (int64_t v = 0; v < n; v++)
        LDT_CHECK(check_strategy(p, v, choice[v], "plan price"));
    c = ldt__plan_price(p, choice);
    if (!isfinite(c)) {
        /* name the first move that has no redistribution */
        for (int64_t v = 0; v < n; v++) {
            const ldt_tensor *t = p->ctx->nodes[v];
            for (int k = 0; k < node_nin(p, v); k++) {
                double m;
                if (ldt_plan_move_seconds(p, v, k, choice[LDT__IN(t)[k]->id], choice[v], &m) != LDT_OK) {
                    char msg[1024];
                    snprintf(msg, sizeof msg, "%s", ldt_last_error());
                    LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan price: %s", msg);
                }
            }
        }
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan price: the assignment has no finite price");
    }
    *out = c;
    return LDT_OK;
}

const char *ldt_plan_method(const ldt_plan *p) { return p && p->method ? p->method : ""; }
double ldt_plan_gap(const ldt_plan *p) { return p ? p->gap : 0; }
int ldt_plan_tied(const ldt_plan *p) { return p ? p->tied : 0; }
