/* Calls on the dp mesh dim of the default GPT training step against the buckets the sizes
 * imply (docs/replay.md, "What is counted"; issue 22's fusion goal): on dp=4 and dp=2,tp=2,
 * with the optimizer's states whole (DDP) and split over dp (ZeRO), under the CPU profile and
 * the uniform preset. The figures are derived here from the parameters' shapes, pins and the
 * cap, not read from the library:
 *   - DDP: every gradient and the loss's [sum, count] pair is one all_reduce on dp (phase 0);
 *     the update runs where the parameters are (whole on dp), so the clip norm and the new
 *     parameters need no dp call: next fit over those bytes, 1 bucket at the default cap;
 *   - ZeRO: the split states' gradients reduce_scattered (phase 0), the others' and the pair
 *     all_reduced (phase 0), the clip norm's partial sums of the split gradients reduced once
 *     (phase 1: it reads the reduce_scattered gradients, so no bucket before it can hold it,
 *     as Megatron and DDP reduce the norm apart), the updated parameters all_gathered (phase
 *     2): 1 + 1 + 1 + 1 at the default cap.
 * The calls fused are exactly that many (ldt_exec_stats.dim_collectives), the library's own
 * figure (dim_buckets) agrees fused and unfused, ldt_exec_dim_calls lists each call with its
 * collective and phase, and the f64 losses equal the unfused step's within 1e-12. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ldt/ldt.h"
#include "ldt/models.h"
#include "tests/bucket_step.h"

#define STEPS 2
#define MAXP 64
#define MAXC 16

typedef struct run {
    double loss[STEPS];
    ldt_exec_stats es;
    ldt_exec_call calls[MAXC];
    int ncalls, np, dp;
    int64_t bytes[MAXP]; /* per parameter: its gradient's bytes on a rank, whole over dp */
    int zero[MAXP];      /* per parameter: its states split over dp */
} run;

/* STEPS steps of the demo's step (small) on mesh_text; zero: states split over dp; fused:
 * fusion on at the default cap; preset: the cost profile. */
static void train(const char *mesh_text, int zero, int fused, const char *preset, run *out) {
    bucket_step S;
    ldt_model_config cfg = ldt_model_config_default("gpt");
    ldt_compile_options copt = {0};
    ldt_cost_model cm;
    ldt_ctx *ctx;
    ldt_optim *o;
    ldt_tensor *ps[MAXP];
    int dp;
    memset(out, 0, sizeof *out);
    cfg.layers = 2, cfg.hidden = 32, cfg.heads = 4, cfg.vocab = 128, cfg.seq = 16, cfg.batch = 8;
    cfg.dtype = LDT_F64, cfg.dropout = 0.1, cfg.train = 1;
    bucket_step_open(&S, mesh_text, &cfg, 3, STEPS, ps, MAXP);
    ctx = S.ctx, o = S.o, dp = S.dp, out->np = S.np;
    cr_assert_eq(ldt_optim_sync_grads(o, dp), LDT_OK);
    if (zero) cr_assert_eq(ldt_optim_shard_states(o, dp), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_cost_model_preset(preset, &cm), LDT_OK);
    copt.plan.cost = &cm;
    copt.no_fuse = !fused;
    for (int k = 0; k < STEPS; k++) {
        ldt_tensor *g[MAXP], *loss = bucket_step_grads(&S, &cfg, k, 1, ps, g);
        ldt_exec *ex;
        for (int i = 0; k == 0 && i < out->np; i++) {
            ldt_placement pl[LDT_MAX_DIMS];
            int pinned;
            out->bytes[i] = bucket_param_bytes(&S, ps[i], pl, &pinned);
            cr_assert_eq(ldt_tensor_pin(ldt_optim_state(o, i, 0), pl, LDT_MAX_DIMS, &pinned), LDT_OK);
            out->zero[i] = pinned && pl[dp].kind == LDT_PLACE_SHARD;
        }
        cr_assert_eq(ldt_optim_step(o, g), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_compile(ctx, &loss, 1, &copt, &ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_exec_read(ex, 0, &out->loss[k], 8), LDT_OK);
        cr_assert_eq(ldt_exec_stats_get(ex, &out->es), LDT_OK);
        cr_assert_eq(ldt_exec_dim_calls(ex, dp, out->calls, MAXC, &out->ncalls), LDT_OK, "%s", ldt_last_error());
    }
    out->dp = dp;
    bucket_step_close(&S);
}

/* Buckets next fit makes of the parameters with zero[i] == zero (plus `extra` bytes, the loss
 * pair, in the same group) at the default 25 MiB cap; 0 when there is nothing. */
static int64_t next_fit(const run *r, int zero, int64_t extra) {
    int64_t nb = extra > 0, fill = extra;
    for (int i = 0; i < r->np; i++) {
        if (r->zero[i] != zero) continue;
        if (nb == 0 || fill + r->bytes[i] > (25 << 20)) nb++, fill = 0;
        fill += r->bytes[i];
    }
    return nb;
}

static void check(const char *mesh, int zero, const char *preset) {
    run unf, fus;
    int64_t want, nzero = 0;
    train(mesh, zero, 0, preset, &unf);
    train(mesh, zero, 1, preset, &fus);
    for (int k = 0; k < STEPS; k++)
        cr_assert_leq(fabs(fus.loss[k] - unf.loss[k]), 1e-12 * fmax(1, fabs(unf.loss[k])),
                      "%s zero %d %s, step %d: fused %.17g, unfused %.17g", mesh, zero, preset, k, fus.loss[k],
                      unf.loss[k]);
    for (int i = 0; i < fus.np; i++) nzero += fus.zero[i];
    cr_assert_eq(nzero > 0, zero, "%s: states split over dp only under ZeRO", mesh);
    if (!zero) /* one all_reduce bucket: every gradient and the loss's [sum, count] pair */
        want = next_fit(&fus, 0, 2 * 8);
    else /* reduce_scatter, all_reduce (the rest and the pair), the norm, all_gather */
        want = next_fit(&fus, 1, 0) + next_fit(&fus, 0, 2 * 8) + 1 + next_fit(&fus, 1, 0);
    cr_assert_eq(want, zero ? 4 : 1, "%s: the default cap holds every gradient", mesh);
    if (fus.es.dim_collectives[fus.dp] != want) /* what runs, call by call */
        for (int c = 0; c < fus.ncalls && c < MAXC; c++)
            fprintf(stderr, "%s zero %d %s: call %d: %s over %d dims, %d members, %lld bytes, phase %d\n", mesh, zero,
                    preset, c, ldt_collective_name(fus.calls[c].collective), fus.calls[c].ndims, fus.calls[c].members,
                    (long long)fus.calls[c].bytes, fus.calls[c].phase);
    cr_assert_eq(fus.es.dim_collectives[fus.dp], want, "%s zero %d %s: %lld calls on dp, %lld buckets", mesh, zero,
                 preset, (long long)fus.es.dim_collectives[fus.dp], (long long)want);
    cr_assert_eq(fus.es.dim_buckets[fus.dp], want, "%s zero %d %s: the library's figure %lld", mesh, zero, preset,
                 (long long)fus.es.dim_buckets[fus.dp]);
    cr_assert_eq(unf.es.dim_buckets[unf.dp], want, "%s zero %d %s: the same figure unfused (%lld)", mesh, zero, preset,
                 (long long)unf.es.dim_buckets[unf.dp]);
    cr_assert_gt(unf.es.dim_collectives[unf.dp], 2 * want, "%s: unfused, a call per gradient", mesh);
    cr_assert_eq(fus.ncalls, want, "%s zero %d %s: the listing", mesh, zero, preset);
    if (!zero) {
        cr_assert_eq(fus.calls[0].collective, LDT_COLL_ALL_REDUCE);
        cr_assert_eq(fus.calls[0].phase, 0);
        cr_assert_eq(fus.calls[0].members, fus.np + 1, "%s: every gradient and the pair", mesh);
    } else {
        int64_t whole = 0;
        int n[3] = {0}, rs = -1, ag = -1;
        for (int i = 0; i < fus.np; i++) whole += fus.zero[i] ? fus.bytes[i] : 0;
        for (int c = 0; c < fus.ncalls; c++) {
            cr_assert(fus.calls[c].phase >= 0 && fus.calls[c].phase <= 2, "call %d: phase %d", c, fus.calls[c].phase);
            n[fus.calls[c].phase]++;
            if (fus.calls[c].collective == LDT_COLL_REDUCE_SCATTER) rs = c;
            if (fus.calls[c].collective == LDT_COLL_ALL_GATHER) ag = c;
        }
        cr_assert(n[0] == 2 && n[1] == 1 && n[2] == 1, "%s %s: phases %d %d %d", mesh, preset, n[0], n[1], n[2]);
        cr_assert(rs >= 0 && ag > rs, "%s: the reduce_scatter bucket, then the all_gather bucket", mesh);
        cr_assert_eq(fus.calls[rs].phase, 0);
        cr_assert_eq(fus.calls[ag].phase, 2);
        cr_assert_eq(fus.calls[rs].members, nzero);
        cr_assert_eq(fus.calls[ag].members, nzero);
        cr_assert_eq(fus.calls[rs].bytes, whole, "%s: the split gradients' whole bytes", mesh);
        cr_assert_eq(fus.calls[ag].bytes, whole);
    }
}

Test(dp_buckets, dp4) { check("dp=4", 0, "cpu-threads"); }
Test(dp_buckets, dp2_tp2) { check("dp=2,tp=2", 0, "cpu-threads"); }
Test(dp_buckets, dp4_zero) { check("dp=4", 1, "cpu-threads"); }
Test(dp_buckets, dp2_tp2_zero) { check("dp=2,tp=2", 1, "cpu-threads"); }
Test(dp_buckets, dp4_uniform) { check("dp=4", 0, "uniform"); }
Test(dp_buckets, dp2_tp2_uniform) { check("dp=2,tp=2", 0, "uniform"); }
Test(dp_buckets, dp4_zero_uniform) { check("dp=4", 1, "uniform"); }
Test(dp_buckets, dp2_tp2_zero_uniform) { check("dp=2,tp=2", 1, "uniform"); }

/* ldt_exec_dim_calls refuses what it cannot answer, naming it. */
Test(dp_buckets, dim_calls_refusals) {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    ldt_exec *ex;
    ldt_exec_call c[2];
    ldt_tensor *x, *y;
    ldt_placement part = ldt_partial(LDT_REDUCE_SUM), rep = ldt_replicate();
    double d[4] = {1, 2, 3, 4};
    int n = -1;
    cr_assert_eq(ldt_mesh_parse("dp=2", LDT_DEVICE_CPU, &mesh), LDT_OK);
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    x = ldt_param(ctx, "x", &(ldt_shape){1, {4}}, LDT_F64);
    cr_assert_eq(ldt_param_set(x, d, sizeof d), LDT_OK);
    y = ldt_mul_scalar(x, 2.0);
    cr_assert_eq(ldt_pin(y, &part, 1), LDT_OK);
    y = ldt_redistribute_to(y, &rep, 1); /* one all_reduce on dp */
    cr_assert_eq(ldt_compile(ctx, &y, 1, NULL, &ex), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_exec_dim_calls(NULL, 0, c, 2, &n), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_exec_dim_calls(ex, 0, c, 2, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_exec_dim_calls(ex, 1, c, 2, &n), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "mesh dim 1"), "%s", ldt_last_error());
    cr_assert_eq(ldt_exec_dim_calls(ex, -1, c, 2, &n), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_exec_dim_calls(ex, 0, c, -1, &n), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_exec_dim_calls(ex, 0, NULL, 2, &n), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "out"), "%s", ldt_last_error());
    /* the count alone, then the call */
    cr_assert_eq(ldt_exec_dim_calls(ex, 0, NULL, 0, &n), LDT_OK);
    cr_assert_eq(n, 1);
    cr_assert_eq(ldt_exec_dim_calls(ex, 0, c, 2, &n), LDT_OK);
    cr_assert_eq(n, 1);
    cr_assert_eq(c[0].collective, LDT_COLL_ALL_REDUCE);
    cr_assert_eq(c[0].members, 1);
    cr_assert_eq(c[0].bytes, 4 * 8, "the Partial value: 4 f64 on each rank");
    cr_assert_eq(c[0].phase, 0);
    cr_assert_eq(c[0].dtype, LDT_F64);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}
