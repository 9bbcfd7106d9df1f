/* ZeRO buckets on the default GPT training step (docs/replay.md, "ZeRO buckets"): with the
 * optimizer states split over dp (ldt_optim_shard_states) and the gradients reduced over dp
 * (ldt_optim_sync_grads), as `ldt train --zero` does, fusion issues one reduce_scatter per
 * bucket of gradients during the backward and one all_gather per bucket of updated parameters
 * after the step; the f64 losses equal the unfused step's within 1e-12 over several steps.
 * The dp calls are counted against the buckets worked out here from the parameters' shapes,
 * their pins and the cap (next fit in readiness order: gradients as the backward makes them,
 * parameters in update order), plus the other calls named below. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ldt/ldt.h"
#include "ldt/models.h"
#include "tests/bucket_step.h"

#define STEPS 3
#define MAXP 64

typedef struct run {
    double loss[STEPS];
    ldt_exec_stats es;
    int np, dp;
    int64_t bytes[MAXP]; /* per parameter: its whole (unsplit over dp) gradient's bytes on a rank */
    int64_t order[MAXP]; /* per parameter: when its gradient is ready */
    int zero[MAXP];      /* per parameter: its state split over dp (reduce_scatter, all_gather) */
} run;

/* STEPS steps with ZeRO on `mesh_text`, fusion off (cap < 0) or at cap (0: the default);
 * overlap: collectives on each rank's communication thread (ldt_compile_options.overlap). */
static void train(const char *mesh_text, int64_t cap, int overlap, run *out) {
    bucket_step S;
    ldt_model_config cfg = ldt_model_config_default("gpt");
    ldt_compile_options copt = {0};
    ldt_cost_model cm;
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_optim *o;
    ldt_tensor *ps[MAXP];
    int dp, late = 0, is[MAXP];
    cfg.layers = 2, cfg.hidden = 32, cfg.heads = 4, cfg.vocab = 256, cfg.seq = 32, cfg.batch = 8;
    cfg.dtype = LDT_F64, cfg.dropout = 0.1, cfg.train = 1;
    bucket_step_open(&S, mesh_text, &cfg, 5, STEPS, ps, MAXP);
    mesh = S.mesh, ctx = S.ctx, o = S.o, dp = S.dp, out->np = S.np;
    cr_assert_eq(ldt_optim_shard_states(o, dp), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_optim_sync_grads(o, dp), LDT_OK);
    /* the plan under the uniform preset, as test_fusion: this test counts buckets, and the
     * cpu-threads profile also moves some tiny activations across dp (docs/cost-model.md) */
    cr_assert_eq(ldt_cost_model_preset("uniform", &cm), LDT_OK);
    copt.plan.cost = &cm;
    if (cap < 0) copt.no_fuse = 1;
    else copt.bucket_bytes = cap;
    copt.overlap = overlap ? 1 : -1;
    for (int k = 0; k < STEPS; k++) {
        ldt_tensor *g[MAXP], *loss = bucket_step_grads(&S, &cfg, k, 1, ps, g);
        ldt_exec *ex;
        for (int i = 0; k == 0 && i < out->np; i++) {
            ldt_placement pl[LDT_MAX_DIMS];
            int pinned;
            out->bytes[i] = bucket_param_bytes(&S, ps[i], pl, &pinned);
            out->order[i] = bucket_ready_node(g[i]);
            is[i] = 0;
            for (int d = 0; pinned && d < ldt_mesh_ndim(mesh); d++) is[i] |= pl[d].kind == LDT_PLACE_INTERLEAVED_SHARD;
            cr_assert_eq(ldt_tensor_pin(ldt_optim_state(o, i, 0), pl, LDT_MAX_DIMS, &pinned), LDT_OK);
            out->zero[i] = pinned && pl[dp].kind == LDT_PLACE_SHARD;
        }
        cr_assert_eq(ldt_optim_step(o, g), LDT_OK, "%s", ldt_last_error());
        /* an interleaved-sharded parameter's gradient is redistributed to its placement
         * with dp Partial first (no op strategy makes it directly), after the backward, in
         * parameter order (trace/optim.c) */
        for (int i = 0; k == 0 && i < out->np; i++)
            if (is[i]) out->order[i] = ((int64_t)1 << 40) + late++;
        cr_assert_eq(ldt_compile(ctx, &loss, 1, &copt, &ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_read(ex, 0, &out->loss[k], 8), LDT_OK);
        cr_assert_eq(ldt_exec_stats_get(ex, &out->es), LDT_OK);
    }
    out->dp = dp;
    bucket_step_close(&S);
}

/* Next fit over the parameters with zero[i] == zero in `order` (NULL: parameter order). */
static int64_t buckets(const run *r, int64_t cap, int zero, const int64_t *order) {
    int idx[MAXP], n = 0;
    int64_t nb = 0, fill = 0;
    if (cap == 0) cap = 25 << 20;
    for (int i = 0; i < r->np; i++)
        if (r->zero[i] == zero) idx[n++] = i;
    for (int a = 1; order && a < n; a++)
        for (int b = a; b > 0 && order[idx[b]] < order[idx[b - 1]]; b--) {
            int t = idx[b];
            idx[b] = idx[b - 1];
            idx[b - 1] = t;
        }
    for (int a = 0; a < n; a++) {
        if (fill > 0 && fill + r->bytes[idx[a]] > cap) fill = 0;
        if (fill == 0) nb++;
        fill += r->bytes[idx[a]];
    }
    return nb;
}

static void check_mesh(const char *mesh) {
    run unf, fused;
    const int64_t caps[3] = {0, 16 << 10, 16 << 10}; /* the default 25 MiB, 16 KiB (in line, overlapped) */
    int nzero = 0;
    train(mesh, -1, 0, &unf);
    for (int i = 0; i < unf.np; i++) nzero += unf.zero[i];
    cr_assert_gt(nzero, unf.np / 2, "%s: %d of %d parameters' states split over dp", mesh, nzero, unf.np);
    for (int c = 0; c < 3; c++) {
        int dp = unf.dp;
        int64_t rs = buckets(&unf, caps[c], 1, unf.order), ag = buckets(&unf, caps[c], 1, NULL);
        int64_t ar = buckets(&unf, caps[c], 0, unf.order);
        train(mesh, caps[c], c == 2, &fused); /* the last: buckets started and waited for */
        for (int k = 0; k < STEPS; k++)
            cr_assert_leq(fabs(fused.loss[k] - unf.loss[k]), 1e-12 * fmax(1, fabs(unf.loss[k])),
                          "%s, cap %lld, step %d: fused %.17g, unfused %.17g", mesh, (long long)caps[c], k,
                          fused.loss[k], unf.loss[k]);
        if (c == 0) cr_assert_eq(rs + ag, 2, "%s: the default cap holds every gradient and parameter", mesh);
        else cr_assert_gt(rs + ag, 4, "%s: a 16 KiB cap, several buckets", mesh);
        /* on dp besides the buckets: the clipping norm's partial sums (one call, which no
         * bucket can take: the norm needs the reduce_scattered gradients and the updated
         * parameters that are all_gathered need the norm), a move the search may pick across
         * dp in the backward, and the loss's [sum, count] pair where no all_reduce bucket's
         * window meets its own (its backward reads neither; the gradients are divided by the
         * count after their reduction, the interleaved-sharded ones' on dp=2,tp=2 too). The
         * positions' gradient, broadcast over the batch, is Partial on dp and bucketed with
         * the parameters' gradients. The clip norm's call, where the plan makes it one
         * all_reduce on dp alone, is counted among the all_reduce buckets (ar). */
        cr_assert(fused.es.dim_collectives[dp] >= rs + ag + ar &&
                      fused.es.dim_collectives[dp] <= rs + ag + ar + 3,
                     "%s, cap %lld: %lld calls on dp; buckets: %lld reduce_scatter, %lld all_gather, %lld all_reduce",
                     mesh, (long long)caps[c], (long long)fused.es.dim_collectives[dp], (long long)rs, (long long)ag,
                     (long long)ar);
        /* the goal: at most one call a bucket the sizes imply, phase by phase (the clip
         * norm's call a phase of its own: docs/replay.md, "What is counted") */
        cr_assert_leq(fused.es.dim_collectives[dp], fused.es.dim_buckets[dp], "%s, cap %lld: %lld calls, %lld buckets",
                      mesh, (long long)caps[c], (long long)fused.es.dim_collectives[dp],
                      (long long)fused.es.dim_buckets[dp]);
        if (c == 0) /* the unfused run's figure is at the default cap */
            cr_assert_eq(fused.es.dim_buckets[dp], unf.es.dim_buckets[dp], "%s: the same figure unfused", mesh);
        cr_assert_gt(unf.es.dim_collectives[dp], 2 * nzero, "%s: unfused, a reduce_scatter and an all_gather each",
                     mesh);
        cr_assert_eq(fused.es.pack_buckets > 0, 1, "%s: a bucket's pieces by rank are staged", mesh);
    }
}

Test(zero_buckets, dp4) { check_mesh("dp=4"); }

Test(zero_buckets, dp2_tp2) { check_mesh("dp=2,tp=2"); }

/* K values of [R, C] on mesh_text, each fused kind one call: x (pinned split, made again in
 * the arena) gathered to `whole`, and the Partial(sum) of a [nslices, R, C] source (pinned
 * src_pl) reduce_scattered to `split`; every element as the host computes it (integer values:
 * the sums are exact) on two replays, fused and not. Calls are counted on mesh dim `dim`, or
 * in all with dim NULL. */
static void check_blocks(const char *mesh_text, int nd, int nslices, const ldt_placement *split,
                         const ldt_placement *whole, const ldt_placement *part,
                         const ldt_placement *src_pl, const char *dim) {
    enum { K = 3, R = 6, C = 8 };
    for (int fused = 0; fused < 2; fused++) {
        ldt_mesh *mesh;
        ldt_ctx *ctx;
        ldt_ctx_options co = {0};
        ldt_compile_options copt = {0};
        ldt_exec *ex;
        ldt_exec_stats es;
        ldt_tensor *outs[2 * K];
        double src[K][4 * R * C], got[R * C];
        int d = -1;
        cr_assert(nslices <= 4);
        cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &mesh), LDT_OK);
        if (dim) cr_assert_eq(ldt_mesh_dim_index(mesh, dim, &d), LDT_OK);
        co.mesh = mesh;
        cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
        for (int k = 0; k < K; k++) {
            char name[16];
            ldt_tensor *x, *a, *y, *s;
            for (int i = 0; i < nslices * R * C; i++) src[k][i] = (double)((i * 7 + k * 5) % 19) - 9;
            snprintf(name, sizeof name, "x%d", k);
            x = ldt_param(ctx, name, &(ldt_shape){2, {R, C}}, LDT_F64);
            cr_assert_eq(ldt_param_set(x, src[k], R * C * 8), LDT_OK, "%s", ldt_last_error());
            cr_assert_eq(ldt_pin(x, split, nd), LDT_OK);
            y = ldt_mul_scalar(x, 1.0); /* made in the arena */
            cr_assert_eq(ldt_pin(y, split, nd), LDT_OK);
            outs[k] = ldt_redistribute_to(y, whole, nd); /* an all_gather of blocks */
            snprintf(name, sizeof name, "a%d", k);
            a = ldt_param(ctx, name, &(ldt_shape){3, {nslices, R, C}}, LDT_F64);
            cr_assert_eq(ldt_param_set(a, src[k], (int64_t)nslices * R * C * 8), LDT_OK, "%s", ldt_last_error());
            cr_assert_eq(ldt_pin(a, src_pl, nd), LDT_OK);
            s = ldt_sum(a, (int[]){0}, 1, 0); /* a Partial(sum) of each rank's slice */
            cr_assert_eq(ldt_pin(s, part, nd), LDT_OK);
            outs[K + k] = ldt_redistribute_to(s, split, nd); /* a reduce_scatter to blocks */
        }
        copt.no_fuse = !fused;
        cr_assert_eq(ldt_compile(ctx, outs, 2 * K, &copt, &ex), LDT_OK, "%s", ldt_last_error());
        for (int rp = 0; rp < 2; rp++) {
            cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
            for (int o = 0; o < 2 * K; o++) {
                int k = o % K;
                cr_assert_eq(ldt_exec_read(ex, o, got, sizeof got), LDT_OK, "%s", ldt_last_error());
                for (int i = 0; i < R * C; i++) {
                    double want = 0;
                    if (o < K) want = src[k][i];
                    else
                        for (int j = 0; j < nslices; j++) want += src[k][j * R * C + i];
                    cr_assert_eq(got[i], want, "%s, fused %d, replay %d, output %d [%d]: %g, expected %g",
                                 mesh_text, fused, rp, o, i, got[i], want);
                }
            }
        }
        cr_assert_eq(ldt_exec_stats_get(ex, &es), LDT_OK);
        cr_assert_eq(d < 0 ? es.collectives_unfused : es.dim_collectives_unfused[d], 2 * K,
                     "%s: a gather and a reduce_scatter per value unfused", mesh_text);
        cr_assert_eq(d < 0 ? es.collectives : es.dim_collectives[d], fused ? 2 : 2 * K, "%s, fused %d: %lld calls",
                     mesh_text, fused, (long long)(d < 0 ? es.collectives : es.dim_collectives[d]));
        if (d < 0) cr_assert_eq(es.fuse_agreed, fused);
        ldt_ctx_destroy(ctx);
        ldt_mesh_destroy(mesh);
    }
}

/* Buckets whose pieces are blocks of runs (ldt__bucket_chunk): values split on dim 1 over 4
 * ranks (each rank's piece of a [6, 8] value is 6 runs of 2). */
Test(zero_buckets, blocks_of_runs) {
    ldt_placement s0 = ldt_shard(0), s1 = ldt_shard(1), rep = ldt_replicate(), part = ldt_partial(LDT_REDUCE_SUM);
    check_blocks("4", 1, 4, &s1, &rep, &part, &s0, NULL);
}

/* Pieces of values interleaved on tp (merged QKV's layout, IS0:3) moved over dp on a 2x2
 * mesh: split on dim 1 over dp, the interleaved blocks kept on tp (each rank's piece: one run
 * per row of its 3 interleaved blocks, ldt__bucket_chunk); calls counted on dp. */
Test(zero_buckets, interleaved_pieces_over_dp) {
    ldt_placement split[2] = {ldt_shard(1), ldt_interleaved_shard(0, 3)};
    ldt_placement whole[2] = {ldt_replicate(), ldt_interleaved_shard(0, 3)};
    ldt_placement part[2] = {ldt_partial(LDT_REDUCE_SUM), ldt_interleaved_shard(0, 3)};
    ldt_placement src_pl[2] = {ldt_shard(0), ldt_interleaved_shard(1, 3)};
    check_blocks("dp=2,tp=2", 2, 2, split, whole, part, src_pl, "dp");
}
