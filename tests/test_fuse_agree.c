/* Gradient buckets as one decision over ranks (planner/fuse.c, ldt__fuse_agreed): on
 * hand-built programs, ranks whose programs differ in length still bucket when every rank
 * would issue the same calls with the same members; where one rank would bucket differently,
 * no rank buckets; and every rank's collectives stay in the same order with the same sizes. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "planner/fuse.h"
#include "planner/memory.h"
#include "planner/program.h"

static const int k_dp[1] = {0}, k_tp[1] = {1};

typedef struct prog {
    ldt__program *p;
    ldt__lower L;
} prog;

static void prog_open(prog *g) {
    g->p = calloc(1, sizeof *g->p);
    cr_assert_not_null(g->p);
    g->L.p = g->p;
    g->L.mesh = NULL;
}

/* A new value of n f32 elements, written by a fill. */
static int32_t fill(prog *g, int64_t n) {
    int32_t v = ldt__lower_value(&g->L, &(ldt_shape){1, {n}}, LDT_F32, -1);
    cr_assert_geq(v, 0);
    cr_assert_eq(ldt__lower_fill(&g->L, -1, v, 1.0), LDT_OK);
    return v;
}

/* A kernel reading v (a new value of the same shape). */
static void reads(prog *g, int32_t v) {
    int32_t o = ldt__lower_value(&g->L, &g->p->vals[v].shape, LDT_F32, -1);
    cr_assert_geq(o, 0);
    cr_assert_eq(ldt__lower_kernel(&g->L, -1, LDT_OP_NEG, NULL, 1, &v, o, NULL, NULL), LDT_OK);
}

/* A kernel making a new value of twice v's length from v (v twice, joined). */
static int32_t doubled(prog *g, int32_t v) {
    int32_t o = ldt__lower_value(&g->L, &(ldt_shape){1, {2 * g->p->vals[v].shape.dims[0]}}, LDT_F32, -1);
    cr_assert_geq(o, 0);
    cr_assert_eq(ldt__lower_kernel(&g->L, -1, LDT_OP_CAT, NULL, 2, (int32_t[]){v, v}, o, NULL, NULL), LDT_OK);
    return o;
}

static void all_reduce(prog *g, int32_t v) {
    cr_assert_eq(ldt__lower_all_reduce(&g->L, -1, v, LDT_REDUCE_SUM, 1, k_dp), LDT_OK);
}

/* The collective calls of p in order: per call its operand count and bytes. */
static int calls(const ldt__program *p, int64_t *nin, int64_t *bytes) {
    int n = 0;
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        if (x->kind != LDT__I_ALL_REDUCE) continue;
        nin[n] = x->nin;
        bytes[n] = 0;
        for (int k = 0; k < x->nin; k++) bytes[n] += ldt__value_bytes(&p->vals[p->ops[x->in + k]]);
        n++;
    }
    return n;
}

/* Rank 0 has two more instructions (work of its own) than rank 1; both make gradients a, b, c
 * and reduce them after all three exist, then read them. */
static void gradients(prog *g, int extra) {
    int32_t a, b, c;
    if (extra) reads(g, fill(g, 3));
    a = fill(g, 8);
    b = fill(g, 16);
    c = fill(g, 4);
    all_reduce(g, a);
    all_reduce(g, b);
    all_reduce(g, c);
    reads(g, a);
    reads(g, b);
    reads(g, c);
}

Test(fuse_agree, programs_of_different_lengths_share_one_bucket) {
    prog g[2];
    ldt__program *ps[2];
    ldt__fuse_stats st;
    int agreed = -1;
    int64_t nin[2][8], bytes[2][8];
    for (int r = 0; r < 2; r++) {
        prog_open(&g[r]);
        gradients(&g[r], r == 0);
        ps[r] = g[r].p;
    }
    cr_assert_neq(ps[0]->nins, ps[1]->nins, "the programs differ in length");
    cr_assert_eq(ldt__fuse_agreed(ps, 2, 1 << 20, 0, &st, &agreed), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(agreed, 1);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(calls(ps[r], nin[r], bytes[r]), 1, "rank %d: one call", r);
        cr_assert_eq(nin[r][0], 3);
        cr_assert_eq(bytes[r][0], (8 + 16 + 4) * 4);
        cr_assert_eq(ps[r]->ngroups, 1, "one memory-plan group: zero-copy");
    }
    cr_assert_eq(st.fused_calls, 1);
    cr_assert_eq(st.fused_members, 3);
    for (int r = 0; r < 2; r++) {
        ldt__program_free(ps[r]);
        free(ps[r]);
    }
}

Test(fuse_agree, a_cap_splits_alike_on_every_rank) {
    prog g[2];
    ldt__program *ps[2];
    ldt__fuse_stats st;
    int agreed = -1;
    int64_t nin[2][8], bytes[2][8];
    for (int r = 0; r < 2; r++) {
        prog_open(&g[r]);
        gradients(&g[r], r == 1);
        ps[r] = g[r].p;
    }
    /* 96 bytes: a (32) and b (64) fill one bucket, c (16) goes to the next */
    cr_assert_eq(ldt__fuse_agreed(ps, 2, 96, 0, &st, &agreed), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(agreed, 1);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(calls(ps[r], nin[r], bytes[r]), 2, "rank %d", r);
        cr_assert_eq(nin[r][0], 2);
        cr_assert_eq(bytes[r][0], 96);
        cr_assert_eq(nin[r][1], 1);
        cr_assert_eq(bytes[r][1], 16);
    }
    for (int r = 0; r < 2; r++) {
        ldt__program_free(ps[r]);
        free(ps[r]);
    }
}

Test(fuse_agree, a_rank_that_would_bucket_otherwise_leaves_every_rank_unfused) {
    prog g[2];
    ldt__program *ps[2];
    ldt__fuse_stats st;
    int agreed = -1;
    int64_t n0[2], nin[2][8], bytes[2][8];
    int32_t a, b;
    /* rank 0 makes b from a's result: a and b cannot share a call there (a reader that only
     * feeds the outputs would move after b's call, planner/fuse.c) */
    prog_open(&g[0]);
    a = fill(&g[0], 8);
    all_reduce(&g[0], a);
    b = doubled(&g[0], a);
    all_reduce(&g[0], b);
    reads(&g[0], b);
    /* rank 1 makes both first: alone, it would bucket them */
    prog_open(&g[1]);
    a = fill(&g[1], 8);
    b = fill(&g[1], 16);
    all_reduce(&g[1], a);
    all_reduce(&g[1], b);
    reads(&g[1], a);
    reads(&g[1], b);
    for (int r = 0; r < 2; r++) {
        ps[r] = g[r].p;
        n0[r] = ps[r]->nins;
    }
    cr_assert_eq(ldt__fuse_agreed(ps, 2, 1 << 20, 0, &st, &agreed), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(agreed, 0);
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(ps[r]->nins, n0[r], "rank %d unchanged", r);
        cr_assert_eq(calls(ps[r], nin[r], bytes[r]), 2);
        cr_assert_eq(nin[r][0], 1);
        cr_assert_eq(bytes[r][0], 32);
        cr_assert_eq(bytes[r][1], 64);
        cr_assert_eq(ps[r]->ngroups, 0);
    }
    /* the same pair on rank 1 alone (one rank: its own decision) does bucket */
    cr_assert_eq(ldt__fuse_agreed(&ps[1], 1, 1 << 20, 0, &st, &agreed), LDT_OK);
    cr_assert_eq(agreed, 1);
    cr_assert_eq(calls(ps[1], nin[1], bytes[1]), 1);
    cr_assert_eq(bytes[1][0], 96);
    for (int r = 0; r < 2; r++) {
        ldt__program_free(ps[r]);
        free(ps[r]);
    }
}

Test(fuse_agree, ranks_with_different_collectives_are_left_alone) {
    prog g[2];
    ldt__program *ps[2];
    ldt__fuse_stats st;
    int agreed = -1;
    int64_t nin[8], bytes[8];
    prog_open(&g[0]);
    gradients(&g[0], 0);
    prog_open(&g[1]);
    gradients(&g[1], 0);
    all_reduce(&g[1], fill(&g[1], 2)); /* one more collective on rank 1: not the same program */
    ps[0] = g[0].p;
    ps[1] = g[1].p;
    cr_assert_eq(ldt__fuse_agreed(ps, 2, 1 << 20, 0, &st, &agreed), LDT_OK);
    cr_assert_eq(agreed, 0);
    cr_assert_eq(calls(ps[0], nin, bytes), 3, "nothing fused");
    cr_assert_eq(calls(ps[1], nin, bytes), 4);
    for (int r = 0; r < 2; r++) {
        ldt__program_free(ps[r]);
        free(ps[r]);
    }
}

/* A kernel that reads one all_reduce's result and feeds only the step's outputs moves after
 * the next all_reduce (planner/fuse.c, before pass 2), so both share one call in place. */
Test(fuse_agree, a_reader_of_outputs_only_waits_for_the_bucket) {
    prog g;
    ldt__program *p;
    ldt__fuse_stats st;
    int agreed = -1;
    int64_t nin[8], bytes[8];
    int32_t a, b;
    prog_open(&g);
    a = fill(&g, 8);
    all_reduce(&g, a);
    reads(&g, a); /* the loss value from its reduced pair: read by nothing in the step */
    b = fill(&g, 16);
    all_reduce(&g, b);
    reads(&g, b);
    p = g.p;
    cr_assert_eq(ldt__fuse_agreed(&p, 1, 1 << 20, 0, &st, &agreed), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(agreed, 1);
    cr_assert_eq(calls(p, nin, bytes), 1, "a and b in one call");
    cr_assert_eq(nin[0], 2);
    cr_assert_eq(bytes[0], 96);
    for (int64_t i = 0, seen = 0; i < p->nins; i++) { /* a's reader after the call */
        seen |= p->ins[i].kind == LDT__I_ALL_REDUCE;
        if (p->ins[i].kind == LDT__I_KERNEL && p->ops[p->ins[i].in] == a)
            cr_assert(seen, "a is read after the fused call (instruction %lld)", (long long)i);
    }
    ldt__program_free(p);
    free(p);
}

/* Gradients a and b are Partial on dp and tp (sequence parallel): each is reduced over tp,
 * then over dp, so it is a member of a tp bucket and of a dp bucket (with c, reduced over dp
 * only, first). The two calls land side by side, the dp one first; they share a and b, so
 * they are not one group (in a group, the packed dp call would copy its stale copy of a and b
 * back over the tp call's result). And the memory plan places every value once, inside its
 * group's bytes: no two values live at one instruction share a byte. */
Test(fuse_agree, buckets_that_share_a_value_are_not_grouped_and_place_it_once) {
    prog g;
    ldt__program *p;
    ldt__fuse_stats st;
    ldt__mem_plan m;
    int agreed = -1, nar = 0;
    int32_t a, b, c, x;
    int64_t *first, *last, at[2] = {-1, -1};
    prog_open(&g);
    x = fill(&g, 64); /* live throughout, placed first (the largest) */
    c = fill(&g, 4);
    cr_assert_eq(ldt__lower_all_reduce(&g.L, -1, c, LDT_REDUCE_SUM, 1, k_dp), LDT_OK);
    a = fill(&g, 8);
    b = fill(&g, 16);
    cr_assert_eq(ldt__lower_all_reduce(&g.L, -1, a, LDT_REDUCE_SUM, 1, k_tp), LDT_OK);
    cr_assert_eq(ldt__lower_all_reduce(&g.L, -1, b, LDT_REDUCE_SUM, 1, k_tp), LDT_OK);
    cr_assert_eq(ldt__lower_all_reduce(&g.L, -1, a, LDT_REDUCE_SUM, 1, k_dp), LDT_OK);
    cr_assert_eq(ldt__lower_all_reduce(&g.L, -1, b, LDT_REDUCE_SUM, 1, k_dp), LDT_OK);
    reads(&g, c);
    reads(&g, a);
    reads(&g, b);
    reads(&g, x);
    p = g.p;
    cr_assert_eq(ldt__fuse_agreed(&p, 1, 1 << 20, 0, &st, &agreed), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(agreed, 1);
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *y = &p->ins[i];
        if (y->kind != LDT__I_ALL_REDUCE) continue;
        /* the dp bucket reads what the tp bucket makes (a's and b's tp sums): after it */
        cr_assert_eq(y->nin, nar == 0 ? 2 : 3, "call %d: %d members", nar, y->nin);
        cr_assert_eq(y->dims[0], nar == 0 ? 1 : 0, "the tp call first, then the dp one");
        cr_assert_eq(y->group, 0, "call %d is not in a group with a call that shares its values", nar);
        at[nar++] = i;
    }
    cr_assert_eq(nar, 2);
    cr_assert_eq(at[1], at[0] + 1, "the two calls are side by side");
    cr_assert_eq(ldt__memory_plan(p, NULL, NULL, &m), LDT_OK, "%s", ldt_last_error());
    first = malloc((size_t)p->nvals * sizeof *first);
    last = malloc((size_t)p->nvals * sizeof *last);
    cr_assert(first && last);
    for (int32_t v = 0; v < p->nvals; v++) first[v] = last[v] = -1;
    for (int64_t i = 0; i < p->nins; i++) { /* lifetimes: first write to last use */
        const ldt__instr *y = &p->ins[i];
        for (int k = -1; k < y->nin; k++) {
            int32_t v = k < 0 ? y->out : p->ops[y->in + k];
            if (first[v] < 0) first[v] = i;
            last[v] = i;
        }
    }
    for (int32_t v = 0; v < p->nvals; v++)
        for (int32_t w = v + 1; w < p->nvals; w++) {
            int64_t bv = ldt__value_bytes(&p->vals[v]), bw = ldt__value_bytes(&p->vals[w]);
            if (first[v] < 0 || first[w] < 0 || first[v] > last[w] || first[w] > last[v]) continue;
            cr_expect(m.offset[v] + bv <= m.offset[w] || m.offset[w] + bw <= m.offset[v],
                      "v%d [%lld, %lld) and v%d [%lld, %lld) overlap while both live", v, (long long)m.offset[v],
                      (long long)(m.offset[v] + bv), w, (long long)m.offset[w], (long long)(m.offset[w] + bw));
        }
    free(first);
    free(last);
    ldt__mem_plan_free(&m);
    ldt__program_free(p);
    free(p);
}
