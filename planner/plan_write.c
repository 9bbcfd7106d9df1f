/* What a plan reports: totals, collective counts, the JSON and DOT of `ldt plan`, and the
 * printed program of a rank. Per-rank figures come from the lowered programs (max over
 * ranks). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/error.h"
#include "planner/memory.h"
#include "planner/plan_internal.h"
#include "planner/redistribute.h"

static int is_coll(ldt_collective c) { return c <= LDT_COLL_ALL_TO_ALL || c == LDT_COLL_SEND_RECV; }

static int64_t value_bytes(const ldt__program *p, int32_t v) {
    int64_t n = ldt_dtype_size((ldt_dtype)p->vals[v].dtype);
    for (int d = 0; d < p->vals[v].shape.ndim; d++) n *= p->vals[v].shape.dims[d];
    return n;
}

static int group_size(const ldt_mesh *m, const ldt__instr *x) {
    int64_t n = 1;
    for (int i = 0; i < x->ndims; i++) n *= ldt_mesh_dim_size(m, x->dims[i]);
    return (int)n;
}

typedef struct rank_totals {
    int64_t colls[LDT_COLL_COUNT + 1];
    int64_t bytes;
    double seconds;
} rank_totals;

static void program_totals(const ldt_plan *plan, const ldt__program *p, rank_totals *t) {
    memset(t, 0, sizeof *t);
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        if (x->kind == LDT__I_REDIST) {
            for (int s = 0; s < ldt_redist_plan_nsteps(x->plan); s++) {
                ldt_redist_step st;
                ldt_redist_plan_step(x->plan, s, &st);
                if (is_coll(st.collective)) t->colls[st.collective]++;
                t->bytes += st.bytes_sent > st.bytes_recv ? st.bytes_sent : st.bytes_recv;
                t->seconds += st.seconds;
            }
        } else if (x->kind == LDT__I_ALL_REDUCE) {
            int n = group_size(plan->mesh, x), dims[LDT_MAX_DIMS];
            int64_t b = n > 1 ? 2 * (n - 1) * value_bytes(p, x->out) / n : 0;
            if (n <= 1) continue;
            for (int d = 0; d < x->ndims; d++) dims[d] = x->dims[d];
            t->colls[LDT_COLL_ALL_REDUCE]++;
            t->bytes += b;
            t->seconds += ldt_cost_seconds(&plan->cost, plan->mesh, x->ndims, dims,
                                           LDT_COLL_ALL_REDUCE, b, 0);
        }
    }
    for (int c = 0; c < LDT_COLL_COUNT; c++) t->colls[LDT_COLL_COUNT] += t->colls[c];
}

/* ---------------------------------------------------------------------------------------
 * Classes of ranks. A rank's program depends on its coordinates through torch.chunk lengths
 * (and whether a coordinate is 0): along a mesh dim of size k the chunk of a length L is full
 * below a = L / ceil(L/k), short at a and empty above. Cutting every mesh dim at each a and
 * a + 1 of every length that a spec of the programs chunks there (every node's output and
 * every input as its consumer takes it, under the chosen placements: ldt__chunk_lengths)
 * leaves intervals over which all local shapes agree; one rank per combination of intervals
 * stands for all. Lengths that no chosen placement chunks along a mesh dim cut nothing there,
 * so a mesh of 4096 ranks has about as many classes as one of 64. Intervals of one mesh dim
 * whose coordinates chunk every length alike are one group (a cut at a + 1 where chunk a is
 * empty separates nothing), so a class is one group per mesh dim.
 *
 * The figures (totals, arenas) cost one lowering per class at most: classes whose local shapes
 * of those specs digest alike share one lowering (a length cut on one mesh dim may matter only
 * beside some coordinates of another), and classes whose programs digest alike share one
 * memory plan. A GPT-2-small training step on dp=512,tp=8 has 7 classes, 7 programs (dp=8,tp=8:
 * 2 and 2); their memory plans are most of what its figures cost.
 */
#define MAX_CLASS_LENGTHS 4096

static int cmp_len(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The lengths each mesh dim chunks in p's programs (see above); 0 when a set is full. */
static int class_lengths(const ldt_plan *p, int64_t *lens, int *nlens) {
    for (int64_t v = 0; v < p->nnodes; v++) {
        const ldt_tensor *t = p->ctx->nodes[v];
        if (!ldt__chunk_lengths(p->mesh, t->shape, ldt__plist(p, ldt__chosen_out(p, v)), lens, nlens,
                                MAX_CLASS_LENGTHS))
            return 0;
        for (int k = 0; t->kind != LDT__PERSISTENT && k < t->nin; k++)
            if (ldt__edge_moves(p, v, k) &&
                !ldt__chunk_lengths(p->mesh, LDT__IN(t)[k]->shape, ldt__plist(p, ldt__chosen_in(p, v, k)),
                                    lens, nlens, MAX_CLASS_LENGTHS))
                return 0;
    }
    return 1;
}

/* The torch.chunk length of a length L at coordinate c of a mesh dim of size k. */
static int64_t chunk_at(int64_t L, int64_t k, int64_t c) {
    int64_t ch, a;
    if (L <= 0) return 0;
    ch = L / k + (L % k != 0);
    a = L / ch;
    return c < a ? ch : c == a ? L - a * ch : 0;
}

ldt_status ldt_plan_rank_classes(ldt_plan *p, int *ranks, int64_t *counts, int cap, int *n) {
    ldt_status st = LDT_OK;
    const ldt_mesh *m;
    int64_t *lens = NULL, *cut[LDT_MAX_DIMS] = {0}, pstride[LDT_MAX_DIMS];
    int64_t *grep[LDT_MAX_DIMS] = {0}, *gcnt[LDT_MAX_DIMS] = {0}; /* per dim: groups' first coordinate, size */
    int nlen[LDT_MAX_DIMS] = {0}, ncut[LDT_MAX_DIMS] = {0}, ngrp[LDT_MAX_DIMS] = {0}, ok, nd;
    int idx[LDT_MAX_DIMS] = {0}, total = 0;
    if (!p || !n || cap < 0 || (cap > 0 && (!ranks || !counts)))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan rank classes: invalid arguments");
    m = p->mesh;
    nd = ldt_mesh_ndim(m);
    lens = malloc((size_t)LDT_MAX_DIMS * MAX_CLASS_LENGTHS * sizeof *lens);
    if (!lens) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan rank classes: out of memory");
    ok = class_lengths(p, lens, nlen);
    for (int i = 0; i < nd && ok; i++) {
        int64_t k = ldt_mesh_dim_size(m, i), *li = lens + (size_t)i * MAX_CLASS_LENGTHS;
        cut[i] = malloc((size_t)(2 * nlen[i] + 2) * sizeof *cut[i]);
        if (!cut[i]) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan rank classes: out of memory");
        cut[i][ncut[i]++] = 0;
        cut[i][ncut[i]++] = k;
        for (int j = 0; j < nlen[i]; j++) {
            int64_t L = li[j], ch, a;
            if (L <= 0) continue;
            ch = L / k + (L % k != 0);
            a = L / ch;
            if (a < k) cut[i][ncut[i]++] = a;
            if (a + 1 < k) cut[i][ncut[i]++] = a + 1;
        }
        qsort(cut[i], (size_t)ncut[i], sizeof *cut[i], cmp_len);
    }
    for (int d = nd - 1, s = 1; d >= 0; d--) {
        pstride[d] = s;
        s *= (int)ldt_mesh_dim_size(m, d);
    }
    if (!ok) {
        /* too many lengths to cut by: every rank its own class */
        for (int i = 0; i < ldt_mesh_nranks(m); i++) {
            if (total < cap) {
                ranks[total] = ldt_mesh_rank_at(m, i);
                counts[total] = 1;
            }
            total++;
        }
        *n = total;
        goto fail;
    }
    /* intervals between distinct cuts; intervals whose coordinates chunk every length alike
     * form one group (a cut at a + 1 where chunk a is empty, or a length chunked alike on both
     * sides of a cut, separates nothing), and one class is one group per dim */
    for (int i = 0; i < nd; i++) {
        int w = 0, ng = 0;
        const int64_t *li = lens + (size_t)i * MAX_CLASS_LENGTHS;
        int64_t k = ldt_mesh_dim_size(m, i);
        for (int j = 0; j < ncut[i]; j++)
            if (w == 0 || cut[i][j] != cut[i][w - 1]) cut[i][w++] = cut[i][j];
        ncut[i] = w;
        grep[i] = malloc((size_t)w * sizeof *grep[i]);
        gcnt[i] = malloc((size_t)w * sizeof *gcnt[i]);
        if (!grep[i] || !gcnt[i]) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan rank classes: out of memory");
        for (int j = 0; j + 1 < w; j++) {
            int64_t c = cut[i][j], len = cut[i][j + 1] - c;
            int g = 0;
            for (; g < ng; g++) {
                int same = 1;
                for (int l = 0; l < nlen[i] && same; l++)
                    same = chunk_at(li[l], k, c) == chunk_at(li[l], k, grep[i][g]);
                if (same) break;
            }
            if (g == ng) {
                grep[i][ng] = c;
                gcnt[i][ng++] = 0;
            }
            gcnt[i][g] += len;
        }
        ngrp[i] = ng;
    }
    for (;;) {
        int64_t pos = 0, cnt = 1;
        for (int i = 0; i < nd; i++) {
            pos += grep[i][idx[i]] * pstride[i];
            cnt *= gcnt[i][idx[i]];
        }
        if (total < cap) {
            ranks[total] = ldt_mesh_rank_at(m, (int)pos);
            counts[total] = cnt;
        }
        total++;
        int i = nd - 1;
        while (i >= 0 && ++idx[i] == ngrp[i]) idx[i--] = 0;
        if (i < 0) break;
    }
    *n = total;
fail:
    for (int i = 0; i < nd; i++) {
        free(cut[i]);
        free(grep[i]);
        free(gcnt[i]);
    }
    free(lens);
    return st;
}

/* A digest of what a program's figures are computed from: its values' local shapes and
 * dtypes, and its instructions (kind, op, operands, collective group, redistribution plan,
 * the tensor a load reads). Classes whose programs digest alike share their figures. */
static uint64_t program_sig(const ldt__program *p) {
    XXH3_state_t *h = XXH3_createState();
    uint64_t r;
    if (!h) return 0;
    XXH3_64bits_reset(h);
    XXH3_64bits_update(h, &p->nvals, sizeof p->nvals);
    XXH3_64bits_update(h, &p->nins, sizeof p->nins);
    for (int32_t v = 0; v < p->nvals; v++) {
        int64_t k[LDT_MAX_DIMS + 2];
        const ldt__value *x = &p->vals[v];
        k[0] = x->shape.ndim;
        k[1] = x->dtype;
        for (int d = 0; d < x->shape.ndim; d++) k[2 + d] = x->shape.dims[d];
        XXH3_64bits_update(h, k, (size_t)(2 + x->shape.ndim) * sizeof k[0]);
    }
    for (int64_t i = 0; i < p->nins; i++) {
        const ldt__instr *x = &p->ins[i];
        uintptr_t k[8 + LDT_MAX_DIMS];
        k[0] = x->kind;
        k[1] = (uintptr_t)(uint32_t)x->op;
        k[2] = (uintptr_t)(uint32_t)x->out;
        k[3] = (uintptr_t)(uint32_t)x->nin;
        k[4] = (uintptr_t)x->plan;
        k[5] = (uintptr_t)x->src;
        k[6] = x->reduce;
        k[7] = x->ndims;
        for (int d = 0; d < x->ndims; d++) k[8 + d] = x->dims[d];
        XXH3_64bits_update(h, k, (size_t)(8 + x->ndims) * sizeof k[0]);
        XXH3_64bits_update(h, p->ops + x->in, (size_t)x->nin * sizeof *p->ops);
    }
    r = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    return r;
}

/* A digest of the local shapes at mesh coordinates coord of every spec that the class cuts
 * look at (each node's output under its chosen placements, each moved input as its consumer
 * takes it): ranks that digest alike hold alike programs, so one lowering serves them. */
static uint64_t local_shapes_sig(const ldt_plan *p, const int64_t *coord) {
    XXH3_state_t *h = XXH3_createState();
    uint64_t r;
    if (!h) return 0;
    XXH3_64bits_reset(h);
    for (int64_t v = 0; v < p->nnodes; v++) {
        const ldt_tensor *t = p->ctx->nodes[v];
        for (int k = -1; k < (t->kind == LDT__PERSISTENT ? 0 : t->nin); k++) {
            const ldt_shape *sh;
            const ldt_placement *pl;
            int64_t dims[LDT_MAX_DIMS];
            if (k >= 0 && !ldt__edge_moves(p, v, k)) continue;
            sh = k < 0 ? t->shape : LDT__IN(t)[k]->shape;
            pl = ldt__plist(p, k < 0 ? ldt__chosen_out(p, v) : ldt__chosen_in(p, v, k));
            for (int d = 0; d < sh->ndim; d++) dims[d] = sh->dims[d];
            for (int i = 0; i < p->nd; i++) {
                int64_t st, len, bs;
                if (pl[i].kind == LDT_PLACE_SHARD) {
                    ldt_chunk(dims[pl[i].dim], ldt_mesh_dim_size(p->mesh, i), coord[i], &st, &len);
                    dims[pl[i].dim] = len;
                } else if (pl[i].kind == LDT_PLACE_INTERLEAVED_SHARD) {
                    bs = pl[i].blocks > 0 ? sh->dims[pl[i].dim] / pl[i].blocks : 0;
                    ldt_chunk(bs, ldt_mesh_dim_size(p->mesh, i), coord[i], &st, &len);
                    dims[pl[i].dim] = len * pl[i].blocks;
                }
            }
            XXH3_64bits_update(h, dims, (size_t)sh->ndim * sizeof dims[0]);
        }
    }
    r = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    return r;
}

/* The arena of a lowered program (see ldt_plan_arena_bytes). */
static ldt_status program_arena(const ldt__program *prog, int64_t *out) {
    ldt__mem_plan m = {0};
    uint8_t *outside;
    ldt_status st;
    if (!(outside = calloc((size_t)(prog->nvals ? prog->nvals : 1), 1)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan arena: out of memory");
    for (int64_t i = 0; i < prog->nins; i++) {
        const ldt__instr *x = &prog->ins[i];
        if (x->kind == LDT__I_LOAD && x->src->op != LDT_OP_INPUT) outside[x->out] = 1;
    }
    st = ldt__memory_plan(prog, outside, NULL, &m);
    free(outside);
    if (st != LDT_OK) return st;
    *out = m.arena_bytes;
    ldt__mem_plan_free(&m);
    return LDT_OK;
}

/* Rank r's program: the plan's when lowered, else lowered into *own (the caller frees it). */
static const ldt__program *program_of(ldt_plan *plan, int r, ldt__program **own, ldt_status *st) {
    *own = NULL;
    if (r >= 0 && r < plan->nprograms && plan->programs[r]) return plan->programs[r];
    if ((*st = ldt__lower_program(plan, r, own)) != LDT_OK) return NULL;
    return *own;
}

static void drop_program(ldt__program *own) {
    if (!own) return;
    ldt__program_free(own);
    free(own);
}

static void fold_totals(rank_totals *out, const rank_totals *t) {
    for (int c = 0; c <= LDT_COLL_COUNT; c++)
        if (t->colls[c] > out->colls[c]) out->colls[c] = t->colls[c];
    if (t->bytes > out->bytes) out->bytes = t->bytes;
    if (t->seconds > out->seconds) out->seconds = t->seconds;
}

/* Totals of every rank, the maximum of each figure: one program per class of ranks, lowered
 * for its figures and dropped (a huge mesh's classes need not all stay in memory), and
 * classes whose programs digest alike counted once. The classes, which one each shares its
 * figures with, and their arenas (planned while the program is lowered) are kept with the
 * totals. */
static ldt_status class_totals(ldt_plan *plan, rank_totals *out) {
    ldt_status st = LDT_OK;
    int nc;
    int64_t *counts = NULL;
    uint64_t *sig = NULL, *key = NULL;
    rank_totals *tt = NULL;
    memset(out, 0, sizeof *out);
    free(plan->cls_rank);
    free(plan->cls_same);
    free(plan->cls_arena);
    plan->cls_rank = plan->cls_same = NULL;
    plan->cls_arena = NULL;
    plan->ncls = 0;
    memset(&plan->step, 0, sizeof plan->step);
    LDT_CHECK(ldt_plan_rank_classes(plan, NULL, NULL, 0, &nc));
    plan->cls_rank = malloc((size_t)nc * sizeof *plan->cls_rank);
    plan->cls_same = malloc((size_t)nc * sizeof *plan->cls_same);
    plan->cls_arena = malloc((size_t)nc * sizeof *plan->cls_arena);
    counts = malloc((size_t)nc * sizeof *counts);
    sig = malloc((size_t)nc * sizeof *sig);
    key = malloc((size_t)nc * sizeof *key);
    tt = malloc((size_t)nc * sizeof *tt);
    if (!plan->cls_rank || !plan->cls_same || !plan->cls_arena || !counts || !sig || !key || !tt)
        LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan totals: out of memory");
    LDT_CHECK_GOTO(ldt_plan_rank_classes(plan, plan->cls_rank, counts, nc, &nc));
    for (int i = 0; i < nc; i++) {
        ldt__program *own;
        const ldt__program *p;
        int64_t coord[LDT_MAX_DIMS];
        int j = 0;
        LDT_CHECK_GOTO(ldt_mesh_coord(plan->mesh, plan->cls_rank[i], coord));
        key[i] = local_shapes_sig(plan, coord);
        while (j < i && key[j] != key[i]) j++;
        if (j < i) { /* a class holding alike programs: its figures, no lowering */
            plan->cls_same[i] = plan->cls_same[j];
            plan->cls_arena[i] = -1;
            sig[i] = sig[j];
            tt[i] = tt[j];
            fold_totals(out, &tt[i]);
            continue;
        }
        j = 0;
        if (!(p = program_of(plan, plan->cls_rank[i], &own, &st))) goto fail;
        sig[i] = program_sig(p);
        while (j < i && sig[j] != sig[i]) j++;
        plan->cls_same[i] = j;
        plan->cls_arena[i] = -1;
        if (j == i) {
            /* its arena too, while it is lowered: ldt_plan_arena_bytes need not lower again */
            program_totals(plan, p, &tt[i]);
            if ((st = ldt__plan_step_fold(plan, p)) != LDT_OK || (st = program_arena(p, &plan->cls_arena[i])) != LDT_OK) {
                drop_program(own);
                goto fail;
            }
        } else {
            tt[i] = tt[j];
        }
        drop_program(own);
        fold_totals(out, &tt[i]);
    }
    plan->ncls = nc;
fail:
    free(counts);
    free(sig);
    free(key);
    free(tt);
    return st;
}

static ldt_status all_totals(ldt_plan *plan, int rank, rank_totals *out) {
    ldt_status st = LDT_OK;
    const ldt__program *p;
    ldt__program *own = NULL;
    int on = 0;
    memset(out, 0, sizeof *out);
    if (rank < 0 && plan->have_totals) {
        memcpy(out->colls, plan->totals_colls, sizeof out->colls);
        out->bytes = plan->totals_bytes;
        out->seconds = plan->totals_seconds;
        return LDT_OK;
    }
    if (rank < 0) {
        LDT_CHECK(class_totals(plan, out));
        memcpy(plan->totals_colls, out->colls, sizeof out->colls);
        plan->totals_bytes = out->bytes;
        plan->totals_seconds = out->seconds;
        plan->have_totals = 1;
        return LDT_OK;
    }
    for (int i = 0; i < ldt_mesh_nranks(plan->mesh); i++) on |= ldt_mesh_rank_at(plan->mesh, i) == rank;
    if (!on) return LDT_OK;
    if (!(p = program_of(plan, rank, &own, &st))) return st;
    program_totals(plan, p, out);
    drop_program(own);
    return LDT_OK;
}

ldt_status ldt_plan_count(ldt_plan *p, ldt_collective c, int rank, int64_t *out) {
    rank_totals t;
    if (!p || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan count: NULL argument");
    if ((unsigned)c > (unsigned)LDT_COLL_COUNT)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan count: collective %d out of range", (int)c);
    LDT_CHECK(all_totals(p, rank, &t));
    *out = t.colls[c];
    return LDT_OK;
}

ldt_status ldt_plan_totals_get(ldt_plan *p, ldt_plan_totals *out) {
    rank_totals t;
    if (!p || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan totals: NULL argument");
    LDT_CHECK(all_totals(p, -1, &t));
    memset(out, 0, sizeof *out);
    out->collectives = t.colls[LDT_COLL_COUNT];
    out->comm_bytes_per_rank = t.bytes;
    out->modeled_seconds = t.seconds;
    out->plan_seconds = p->plan_seconds;
    for (int64_t v = 0; v < p->nnodes; v++) {
        const ldt_tensor *n = p->ctx->nodes[v];
        if (n->kind == LDT__PERSISTENT) continue;
        for (int k = 0; k < n->nin; k++) out->redistributions += ldt__edge_moves(p, v, k);
    }
    return LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * JSON.
 */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void json_plist(FILE *f, const ldt_placement *pl, int n) {
    char b[256];
    ldt_placements_format(pl, n, b, sizeof b);
    json_str(f, b);
}

static void json_dims(FILE *f, const int *dims, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", dims[i]);
    fputc(']', f);
}

static int64_t node_bytes(const ldt_tensor *t) { return ldt__nbytes(t); }

static void json_node_moves(FILE *f, ldt_plan *p, int64_t v) {
    const ldt_tensor *t = p->ctx->nodes[v];
    int first = 1;
    fputs("\"redistributions\":[", f);
    for (int k = 0; t->kind != LDT__PERSISTENT && k < t->nin; k++) {
        const ldt_tensor *u = LDT__IN(t)[k];
        ldt__redist_memo *e;
        if (!ldt__edge_moves(p, v, k)) continue;
        e = ldt__plan_redist(p, p->node_class[u->id], ldt__chosen_out(p, u->id),
                             ldt__chosen_in(p, v, k), 1);
        if (!e || !e->plan) continue;
        for (int s = 0; s < ldt_redist_plan_nsteps(e->plan); s++) {
            ldt_redist_step st;
            ldt_redist_plan_step(e->plan, s, &st);
            fprintf(f, "%s{\"input\":%d,\"from\":", first ? "" : ",", k);
            json_plist(f, st.from, st.nfrom);
            fputs(",\"to\":", f);
            json_plist(f, st.to, st.nto);
            fputs(",\"collective\":", f);
            json_str(f, ldt_collective_name(st.collective));
            fputs(",\"mesh_dims\":", f);
            json_dims(f, st.dims, st.ndims);
            fprintf(f, ",\"tensor_bytes\":%" PRId64 ",\"bytes_per_rank\":%" PRId64
                       ",\"modeled_seconds\":%.9g}",
                    node_bytes(u), st.bytes_sent > st.bytes_recv ? st.bytes_sent : st.bytes_recv,
                    st.seconds);
            first = 0;
        }
    }
    fputc(']', f);
}

/* The collectives a node's own lowering issues (vocab-parallel cross_entropy, ...), from
 * program p (instructions in node order; *at walks forward). */
static void json_node_colls(FILE *f, const ldt_plan *plan, const ldt__program *p, int64_t v,
                            int64_t *at) {
    int first = 1;
    fputs("\"collectives\":[", f);
    while (*at < p->nins && p->ins[*at].node < v) (*at)++;
    for (int64_t i = *at; i < p->nins && p->ins[i].node == v; i++) {
        const ldt__instr *x = &p->ins[i];
        int dims[LDT_MAX_DIMS];
        if (x->kind != LDT__I_ALL_REDUCE || group_size(plan->mesh, x) <= 1) continue;
        for (int d = 0; d < x->ndims; d++) dims[d] = x->dims[d];
        fprintf(f, "%s{\"collective\":\"all_reduce\",\"op\":", first ? "" : ",");
        json_str(f, ldt_reduce_op_name((ldt_reduce_op)x->reduce));
        fputs(",\"mesh_dims\":", f);
        json_dims(f, dims, x->ndims);
        fprintf(f, ",\"bytes\":%" PRId64 "}", value_bytes(p, x->out));
        first = 0;
    }
    fputc(']', f);
}

ldt_status ldt_plan_write_json(ldt_plan *p, FILE *f) {
    ldt_plan_totals tot;
    ldt_status st;
    const ldt__program *prog;
    char mesh[256];
    int64_t at = 0;
    if (!p || !f) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan json: NULL argument");
    LDT_CHECK(ldt_plan_totals_get(p, &tot));
    if (!(prog = ldt__plan_program(p, ldt_mesh_rank_at(p->mesh, 0), &st))) return st;
    ldt_mesh_format(p->mesh, mesh, sizeof mesh);
    fputs("{\"mesh\":", f);
    json_str(f, mesh);
    fputs(",\"nodes\":[", f);
    for (int64_t v = 0; v < p->nnodes; v++) {
        const ldt_tensor *t = p->ctx->nodes[v];
        const char *name = LDT__NAME(t);
        fprintf(f, "%s\n{\"id\":%" PRId64 ",\"op\":", v ? "," : "", v);
        json_str(f, ldt__op_name(p->ctx, t->op));
        if (name) {
            fputs(",\"name\":", f);
            json_str(f, name);
        }
        fputs(",\"shape\":[", f);
        for (int d = 0; d < t->shape->ndim; d++)
            fprintf(f, "%s%" PRId64, d ? "," : "", t->shape->dims[d]);
        fputs("],\"in\":[", f);
        for (int k = 0; t->kind != LDT__PERSISTENT && k < t->nin; k++) {
            if (k) fputc(',', f);
            json_plist(f, ldt__plist(p, ldt__chosen_in(p, v, k)), p->nd);
        }
        fputs("],\"out\":[", f);
        json_plist(f, ldt__plist(p, ldt__chosen_out(p, v)), p->nd);
        fputs("],", f);
        json_node_moves(f, p, v);
        fputc(',', f);
        json_node_colls(f, p, prog, v, &at);
        fputc('}', f);
    }
    fprintf(f,
            "\n],\"totals\":{\"collectives\":%" PRId64 ",\"comm_bytes_per_rank\":%" PRId64
            ",\"modeled_comm_seconds\":%.9g,\"plan_seconds\":%.9g,\"redistributions\":%" PRId64
            ",\"plan_cost_seconds\":%.9g,\"greedy_cost_seconds\":%.9g,\"nodes\":%" PRId64
            ",\"plan_method\":\"%s\",\"plan_gap\":%.9g,\"plan_tied\":%s}}\n",
            tot.collectives, tot.comm_bytes_per_rank, tot.modeled_seconds, tot.plan_seconds,
            tot.redistributions, p->cost_chosen, p->cost_greedy, p->nnodes, ldt_plan_method(p),
            ldt_plan_gap(p), ldt_plan_tied(p) ? "true" : "false");
    return ferror(f) ? ldt__error(LDT_ERR_SYSTEM, "plan json: write failed") : LDT_OK;
}

/* ---------------------------------------------------------------------------------------
 * DOT.
 */
/* "[4,64]", the local shape of node v's output on the mesh's first rank, with " (uneven)"
 * when another rank's differs: one rank per class of ranks alike (reps[0..nc), from
 * ldt_plan_rank_classes, whose cuts include every node's output lengths) stands for every
 * rank of its class, so a 2^24-rank mesh looks at a few ranks per node, not every one. */
static void local_shape(const ldt_plan *p, const ldt_tensor *t, int out, const int *reps, int nc, char *buf,
                        size_t cap) {
    ldt_spec spec;
    ldt_region r0, r;
    int uneven = 0;
    buf[0] = '\0';
    if (ldt_spec_init(&spec, p->mesh, t->shape, ldt__plist(p, out), p->nd, (ldt_dtype)t->dtype) != LDT_OK ||
        ldt_layout(&spec, ldt_mesh_rank_at(p->mesh, 0), &r0) != LDT_OK) {
        ldt_clear_error();
        snprintf(buf, cap, "?");
        return;
    }
    for (int i = 0; i < nc && !uneven; i++)
        if (ldt_layout(&spec, reps[i], &r) == LDT_OK)
            for (int d = 0; d < r.ndim; d++) uneven |= r.local_shape.dims[d] != r0.local_shape.dims[d];
    ldt_shape_format(&r0.local_shape, buf, cap);
    if (uneven && strlen(buf) + 10 < cap) strcat(buf, " (uneven)");
}

ldt_status ldt_plan_write_dot(ldt_plan *p, FILE *f) { return ldt_plan_write_dot_titled(p, NULL, f); }

ldt_status ldt_plan_write_dot_titled(ldt_plan *p, const char *title, FILE *f) {
    static const char *const palette[] = {"#ffffff", "#a6cee3", "#b2df8a", "#fb9a99",
                                          "#fdbf6f", "#cab2d6", "#ffff99", "#1f78b4",
                                          "#33a02c", "#e31a1c", "#ff7f00", "#6a3d9a"};
    const int npal = (int)(sizeof palette / sizeof palette[0]);
    char mesh[256];
    uint8_t *used;
    int nc = 0, *reps = NULL;
    int64_t *counts = NULL;
    if (!p || !f) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan dot: NULL argument");
    LDT_CHECK(ldt_plan_rank_classes(p, NULL, NULL, 0, &nc));
    reps = malloc((size_t)(nc ? nc : 1) * sizeof *reps);
    counts = malloc((size_t)(nc ? nc : 1) * sizeof *counts);
    if (!reps || !counts || ldt_plan_rank_classes(p, reps, counts, nc, &nc) != LDT_OK) {
        free(reps);
        free(counts);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan dot: out of memory");
    }
    free(counts);
    if (!(used = calloc((size_t)npal, 1))) {
        free(reps);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "plan dot: out of memory");
    }
    ldt_mesh_format(p->mesh, mesh, sizeof mesh);
    fputs("digraph plan {\n  labelloc=t;\n  label=", f);
    if (title) {
        json_str(f, title); /* a DOT string is quoted and escaped as JSON's is */
    } else {
        fprintf(f, "\"plan on mesh %s: %" PRId64 " nodes\"", mesh, p->nnodes);
    }
    fputs(";\n  node [shape=box, style=filled, fontname=\"monospace\"];\n", f);
    for (int64_t v = 0; v < p->nnodes; v++) {
        const ldt_tensor *t = p->ctx->nodes[v];
        int out = ldt__chosen_out(p, v);
        char pl[256], gs[128], ls[160];
        ldt_placements_format(ldt__plist(p, out), p->nd, pl, sizeof pl);
        ldt_shape_format(t->shape, gs, sizeof gs);
        local_shape(p, t, out, reps, nc, ls, sizeof ls);
        /* the colour is the placement list's id: the same placements, the same colour */
        fprintf(f, "  n%" PRId64 " [label=\"%%%" PRId64 " %s%s%s\\n%s\\nglobal %s local %s\", fillcolor=\"%s\"];\n", v,
                v, ldt__op_name(p->ctx, t->op), LDT__NAME(t) ? " " : "", LDT__NAME(t) ? LDT__NAME(t) : "", pl, gs,
                ls, palette[out % npal]);
        used[out % npal] = 1;
    }
    /* the legend: each colour in use with its placement list (ids that share a colour listed
     * together), and what a red edge means */
    fputs("  subgraph cluster_legend {\n    label=\"legend\";\n    style=dashed;\n", f);
    for (int c = 0; c < npal; c++) {
        char pl[256];
        int first = 1;
        if (!used[c]) continue;
        fprintf(f, "    legend%d [label=\"", c);
        for (int64_t v = 0, k; v < p->nnodes; v++) {
            int out = ldt__chosen_out(p, v);
            if (out % npal != c) continue;
            for (k = 0; k < v && ldt__chosen_out(p, k) != out; k++) {}
            if (k < v) continue; /* listed already */
            ldt_placements_format(ldt__plist(p, out), p->nd, pl, sizeof pl);
            fprintf(f, "%s%s", first ? "" : " | ", pl);
            first = 0;
        }
        fprintf(f, "\", fillcolor=\"%s\"];\n", palette[c]);
    }
    fputs("    legend_edge_from [label=\"producer\", style=solid];\n"
          "    legend_edge_to [label=\"consumer\", style=solid];\n"
          "    legend_edge_from -> legend_edge_to [color=red, fontcolor=red, label=\"redistribution: its collectives\"];\n"
          "  }\n", f);
    free(used);
    free(reps);
    for (int64_t v = 0; v < p->nnodes; v++) {
        const ldt_tensor *t = p->ctx->nodes[v];
        for (int k = 0; t->kind != LDT__PERSISTENT && k < t->nin; k++) {
            const ldt_tensor *u = LDT__IN(t)[k];
            fprintf(f, "  n%d -> n%" PRId64, u->id, v);
            if (ldt__edge_moves(p, v, k)) {
                ldt__redist_memo *e = ldt__plan_redist(p, p->node_class[u->id],
                                                       ldt__chosen_out(p, u->id),
                                                       ldt__chosen_in(p, v, k), 1);
                fputs(" [color=red, fontcolor=red, label=\"", f);
                for (int s = 0; e && e->plan && s < ldt_redist_plan_nsteps(e->plan); s++) {
                    ldt_redist_step st;
                    ldt_redist_plan_step(e->plan, s, &st);
                    fprintf(f, "%s%s", s ? "+" : "", ldt_collective_name(st.collective));
                }
                fputs("\"]", f);
            }
            fputs(";\n", f);
        }
    }
    fputs("}\n", f);
    return ferror(f) ? ldt__error(LDT_ERR_SYSTEM, "plan dot: write failed") : LDT_OK;
}

ldt_status ldt_plan_write_program(ldt_plan *p, int rank, FILE *f) {
    const ldt__program *prog;
    ldt_status st;
    if (!p || !f) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan program: NULL argument");
    if (!(prog = ldt__plan_program(p, rank, &st))) return st;
    return ldt__program_print(prog, p->ctx, f);
}

/* ---------------------------------------------------------------------------------------
 * Parameter memory.
 */
/* One rank per class of ranks alike (ldt_plan_rank_classes: every length a chosen placement
 * chunks, parameters' included, has the same chunk across a class), not every rank: a meta mesh
 * of 2^24 ranks costs what a few ranks do. */
ldt_status ldt_plan_memory_get(const ldt_plan *p, ldt_plan_memory *out) {
    ldt_status st = LDT_OK;
    int nc = 0, *reps = NULL;
    int64_t *bytes = NULL, *elems = NULL, *counts = NULL;
    if (!p || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan memory: NULL argument");
    memset(out, 0, sizeof *out);
    /* the classes only read the plan */
    LDT_CHECK(ldt_plan_rank_classes((ldt_plan *)p, NULL, NULL, 0, &nc));
    reps = malloc((size_t)(nc ? nc : 1) * sizeof *reps);
    counts = malloc((size_t)(nc ? nc : 1) * sizeof *counts);
    bytes = calloc((size_t)(nc ? nc : 1), sizeof *bytes);
    elems = calloc((size_t)(nc ? nc : 1), sizeof *elems);
    if (!reps || !counts || !bytes || !elems) LDT_FAIL_GOTO(LDT_ERR_OUT_OF_MEMORY, "plan memory: out of memory");
    LDT_CHECK_GOTO(ldt_plan_rank_classes((ldt_plan *)p, reps, counts, nc, &nc));
    for (int64_t v = 0; v < p->nnodes; v++) {
        const ldt_tensor *t = p->ctx->nodes[v];
        ldt_spec spec;
        int64_t es = (int64_t)ldt_dtype_size((ldt_dtype)t->dtype);
        if (t->kind != LDT__PERSISTENT || t->op != LDT_OP_PARAM) continue;
        out->params += ldt__nbytes(t) / es;
        out->param_bytes += ldt__nbytes(t);
        if (ldt_spec_init(&spec, p->mesh, t->shape, ldt__plan_out(p, v), p->nd, (ldt_dtype)t->dtype) != LDT_OK)
            continue; /* cannot happen: the plan checked it */
        for (int i = 0; i < nc; i++) {
            ldt_region r;
            if (ldt_layout(&spec, reps[i], &r) != LDT_OK) continue;
            bytes[i] += r.numel * es;
            elems[i] += r.numel;
        }
    }
    for (int i = 0; i < nc; i++) {
        if (bytes[i] > out->per_rank_param_bytes_max) out->per_rank_param_bytes_max = bytes[i];
        if (elems[i] > out->per_rank_param_elems_max) out->per_rank_param_elems_max = elems[i];
    }
fail:
    free(reps);
    free(counts);
    free(bytes);
    free(elems);
    if (st == LDT_OK) ldt_clear_error();
    return st;
}

/* The arena of rank's program, as ldt_compile binds it: parameter and constant shards are held
 * outside, every other value (inputs, activations, gradients) gets an offset. */
ldt_status ldt_plan_arena_bytes(ldt_plan *p, int rank, int64_t *out) {
    const ldt__program *prog;
    ldt__program *own = NULL;
    ldt_status st = LDT_OK;
    if (!p || !out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "plan arena: NULL argument");
    /* a class representative's, found once per distinct program (see class_totals), even
     * where the rank's program is lowered too: a huge program's memory plan takes seconds */
    for (int i = 0; p->have_totals && i < p->ncls; i++) {
        int j;
        if (p->cls_rank[i] != rank) continue;
        j = p->cls_same[i];
        if (p->cls_arena[j] < 0) {
            if (!(prog = program_of(p, p->cls_rank[j], &own, &st))) return st;
            st = program_arena(prog, &p->cls_arena[j]);
            drop_program(own);
            LDT_CHECK(st);
        }
        *out = p->cls_arena[j];
        return LDT_OK;
    }
    if (rank >= 0 && rank < p->nprograms && p->programs[rank]) return program_arena(p->programs[rank], out);
    if (!(prog = ldt__plan_program(p, rank, &st))) return st;
    return program_arena(prog, out);
}
