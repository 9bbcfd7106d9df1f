/* Gradient bucketing on the default GPT training step (docs/replay.md, "Gradient bucketing"): with the gradients
 * reduced over dp (ldt_optim_sync_grads, as ldt train does), fusion issues one all_reduce per
 * bucket on the dp dim, zero-copy, and the f64 losses equal the unfused step's within 1e-12
 * over several steps. The bucket count is recomputed here from the parameters' shapes, their
 * pins and the cap: next fit in the order the backward makes the gradients. */
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
    int64_t bytes[MAXP]; /* per parameter: its gradient's bytes on a rank */
    int64_t order[MAXP]; /* per parameter: when its gradient is ready (for the reference) */
} run;

/* STEPS steps of the GPT training step on `mesh_text`, compiled with fusion off (cap < 0) or
 * with bucket cap `cap` (0: the default). */
static void train(const char *mesh_text, int64_t cap, run *out) {
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
    cr_assert_eq(ldt_optim_sync_grads(o, dp), LDT_OK);
    /* a data-parallel plan, whose gradient reductions the buckets fuse: on cpu-threads 4 rank
     * threads share 2 cores and the roofline makes splitting replicated work worth moving
     * activations across dp (about 12 calls more), which is not what this test is about */
    cr_assert_eq(ldt_cost_model_preset("uniform", &cm), LDT_OK);
    copt.plan.cost = &cm;
    if (cap < 0) copt.no_fuse = 1;
    else copt.bucket_bytes = cap;
    for (int k = 0; k < STEPS; k++) {
        ldt_tensor *g[MAXP], *loss = bucket_step_grads(&S, &cfg, k, 0, ps, g);
        ldt_exec *ex;
        for (int i = 0; k == 0 && i < out->np; i++) {
            ldt_placement pl[LDT_MAX_DIMS];
            int pinned;
            out->bytes[i] = bucket_param_bytes(&S, ps[i], pl, &pinned);
            out->order[i] = bucket_ready_node(g[i]);
            is[i] = 0;
            for (int d = 0; pinned && d < ldt_mesh_ndim(mesh); d++) is[i] |= pl[d].kind == LDT_PLACE_INTERLEAVED_SHARD;
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

/* Buckets by next fit over the gradients in readiness order (as PyTorch DDP fills them). The
 * interleaved-sharded parameters' gradients (order 2^40 on: reduced over their other dims
 * first, after the backward) come last; like the others they are divided by the loss's count
 * after their dp reduction, so they fill the same buckets. */
static int64_t buckets(const run *r, int64_t cap) {
    int idx[MAXP];
    int64_t n = 0, fill = 0;
    if (cap == 0) cap = 25 << 20;
    for (int i = 0; i < r->np; i++) idx[i] = i;
    for (int a = 1; a < r->np; a++)
        for (int b = a; b > 0 && r->order[idx[b]] < r->order[idx[b - 1]]; b--) {
            int t = idx[b];
            idx[b] = idx[b - 1];
            idx[b - 1] = t;
        }
    for (int a = 0; a < r->np; a++) {
        int64_t b = r->bytes[idx[a]];
        if (fill > 0 && fill + b > cap) fill = 0;
        if (fill == 0) n++;
        fill += b;
    }
    return n;
}

static void check_mesh(const char *mesh) {
    run unf, *fused = malloc(3 * sizeof *fused);
    const int64_t caps[3] = {0, 40 << 10, 16 << 10}; /* the default 25 MiB, 40 KiB, 16 KiB */
    int64_t prev = 0, other = 0;
    int dp;
    cr_assert(fused);
    train(mesh, -1, &unf);
    dp = unf.dp;
    for (int c = 0; c < 3; c++) {
        run *r = &fused[c];
        int64_t want = buckets(&unf, caps[c]);
        train(mesh, caps[c], r);
        for (int k = 0; k < STEPS; k++)
            cr_assert_leq(fabs(r->loss[k] - unf.loss[k]), 1e-12 * fmax(1, fabs(unf.loss[k])),
                          "%s, cap %lld, step %d: fused %.17g, unfused %.17g", mesh, (long long)caps[c], k,
                          r->loss[k], unf.loss[k]);
        cr_assert_eq(r->es.packed_all_reduces, 0, "%s: every all_reduce bucket placed back to back", mesh);
        cr_assert_eq(r->es.dim_collectives_unfused[dp], unf.es.dim_collectives_unfused[dp]);
        /* the goal: at most one call a bucket the sizes imply (a small cap may leave the pair
         * a bucket of its own in the library's figure as in the calls) */
        cr_assert_leq(r->es.dim_collectives[dp], r->es.dim_buckets[dp], "%s, cap %lld: %lld calls on dp, %lld buckets",
                      mesh, (long long)caps[c], (long long)r->es.dim_collectives[dp], (long long)r->es.dim_buckets[dp]);
        if (c == 0) { /* the default cap holds every gradient: one bucket (the
                       * interleaved-sharded ones' too, on dp=2,tp=2) */
            cr_assert_eq(want, 1, "%s: %lld buckets at 25 MiB", mesh, (long long)want);
            /* nothing else crosses dp: the loss's [sum, count] pair rides in the gradients'
             * bucket (its backward reads neither; the gradients are divided by the count
             * after their reduction), the clip norm needs none and the update runs whole on
             * dp (the gradients are whole on every dp rank, docs/replay.md "The update where
             * the parameter is"); the library's own figure is the same */
            other = r->es.dim_collectives[dp] - want;
            cr_assert_eq(other, 0, "%s: %lld calls on dp besides the buckets", mesh, (long long)other);
            cr_assert_eq(r->es.dim_buckets[dp], want, "%s: dim_buckets %lld", mesh, (long long)r->es.dim_buckets[dp]);
            cr_assert_geq(unf.es.dim_collectives_unfused[dp] - r->es.dim_collectives[dp], unf.np - 1,
                          "%s: %lld calls on dp unfused, %lld fused: every gradient's reduction but one saved",
                          mesh, (long long)unf.es.dim_collectives_unfused[dp], (long long)r->es.dim_collectives[dp]);
        } else { /* the same other calls, one call a bucket, and at most one more: with a
                  * small cap the loss's [sum, count] pair may meet no bucket's window (the
                  * bucket that would take it closes before the pair is ready) */
            cr_assert(r->es.dim_collectives[dp] >= other + want && r->es.dim_collectives[dp] <= other + want + 1,
                         "%s, cap %lld: %lld calls on dp, %lld buckets of %d gradients and %lld other calls",
                         mesh, (long long)caps[c], (long long)r->es.dim_collectives[dp], (long long)want, unf.np,
                         (long long)other);
            cr_assert_gt(want, prev, "%s: a smaller cap, more buckets (%lld after %lld)", mesh, (long long)want,
                         (long long)prev);
        }
        prev = want;
    }
    free(fused);
}

Test(fusion, gradient_buckets_on_dp4) { check_mesh("dp=4"); }

Test(fusion, gradient_buckets_on_dp2_tp2) { check_mesh("dp=2,tp=2"); }

/* The data-parallel dim must be on the mesh; -1 turns the synchronisation off. */
Test(fusion, sync_grads_refuses_a_dim_off_the_mesh) {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    ldt_optim_config oc = {0};
    ldt_optim *o;
    ldt_tensor *w;
    cr_assert_eq(ldt_mesh_parse("dp=2", LDT_DEVICE_CPU, &mesh), LDT_OK);
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    w = ldt_param(ctx, "w", &(ldt_shape){1, {4}}, LDT_F64);
    oc.kind = LDT_OPTIM_SGD, oc.lr = 0.1, oc.total_steps = 1;
    cr_assert_eq(ldt_optim_create(ctx, &oc, &w, 1, &o), LDT_OK);
    cr_assert_eq(ldt_optim_sync_grads(o, 1), LDT_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(ldt_last_error(), "mesh dim 1") != NULL, "%s", ldt_last_error());
    cr_assert_eq(ldt_optim_sync_grads(NULL, 0), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt_optim_sync_grads(o, -1), LDT_OK);
    ldt_optim_destroy(o);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}

/* Two gathers side by side, of a parameter and of a value computed from it (what fusion may
 * bucket into one all_gather): both outputs equal the parameter, on every replay. A bucket
 * takes only values made in the arena, never the parameter's own memory. */
Test(fusion, gathers_of_a_parameter_and_a_value_are_exact) {
    static const char *const from[] = {"S0,R", "S0,S1", "R,S1"};
    for (int c = 0; c < 3; c++) {
        ldt_mesh *mesh;
        ldt_ctx *ctx;
        ldt_ctx_options co = {0};
        ldt_exec *ex;
        ldt_shape sh = {2, {8, 5}};
        ldt_placement a[2], r[2] = {ldt_replicate(), ldt_replicate()};
        int na;
        float src[40], got[40];
        ldt_tensor *x, *ys[2];
        for (int i = 0; i < 40; i++) src[i] = (float)((i * 7) % 23) - 11.0f;
        cr_assert_eq(ldt_mesh_parse("2x2", LDT_DEVICE_CPU, &mesh), LDT_OK);
        co.mesh = mesh;
        cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
        cr_assert_eq(ldt_placements_parse(from[c], 2, a, 2, &na), LDT_OK);
        x = ldt_param(ctx, "x", &sh, LDT_F32);
        cr_assert_eq(ldt_param_set(x, src, sizeof src), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_pin(x, a, na), LDT_OK);
        ys[0] = ldt_redistribute_to(x, r, 2);
        ys[1] = ldt_redistribute_to(ldt_mul_scalar(x, 1.0), r, 2);
        cr_assert_eq(ldt_compile(ctx, ys, 2, NULL, &ex), LDT_OK, "%s", ldt_last_error());
        for (int rep = 0; rep < 2; rep++) {
            cr_assert_eq(ldt_replay(ex), LDT_OK, "%s", ldt_last_error());
            for (int o = 0; o < 2; o++) {
                cr_assert_eq(ldt_exec_read(ex, o, got, sizeof got), LDT_OK, "%s", ldt_last_error());
                for (int i = 0; i < 40; i++)
                    cr_assert_eq(got[i], src[i], "%s -> R,R, replay %d, output %d [%d]: %g, expected %g", from[c],
                                 rep, o, i, got[i], src[i]);
            }
        }
        ldt_ctx_destroy(ctx);
        ldt_mesh_destroy(mesh);
    }
}

/* A mean loss's gradient is its sum's, divided by the count last (docs/autodiff.md): the same
 * values as the softmax rule (softmax - one_hot) * valid / count, computed here; with the loss
 * itself among wrt nothing is deferred, and the values agree. */
Test(fusion, mean_loss_gradients_divide_by_the_count_last) {
    enum { N = 6, C = 5 };
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_ctx_options co = {0};
    ldt_tensor *z, *t, *loss, *g1[1], *g2[2], *wrt[2];
    double zd[N * C], a[N * C], b[N * C], one = 0, want;
    int64_t td[N] = {1, -1, 4, 0, 2, -1};
    int count = 0;
    for (int i = 0; i < N * C; i++) zd[i] = (double)((i * 7) % 11) / 4.0 - 1.0;
    for (int r = 0; r < N; r++) count += td[r] != -1;
    cr_assert_eq(ldt_mesh_parse("dp=2", LDT_DEVICE_CPU, &mesh), LDT_OK);
    co.mesh = mesh;
    cr_assert_eq(ldt_ctx_create(&co, &ctx), LDT_OK);
    z = ldt_param(ctx, "z", &(ldt_shape){2, {N, C}}, LDT_F64);
    t = ldt_input(ctx, "t", &(ldt_shape){1, {N}}, LDT_I64);
    cr_assert_eq(ldt_param_set(z, zd, sizeof zd), LDT_OK);
    cr_assert_eq(ldt_input_bind(t, td, sizeof td), LDT_OK);
    cr_assert(loss = ldt_cross_entropy(z, t, -1), "%s", ldt_last_error());
    cr_assert_eq(ldt_grad(loss, &z, 1, g1), LDT_OK, "%s", ldt_last_error());
    cr_assert_str_eq(ldt_tensor_op(g1[0]), "div", "the sum's gradient divided by the count");
    wrt[0] = z, wrt[1] = loss;
    cr_assert_eq(ldt_grad(loss, wrt, 2, g2), LDT_OK, "%s", ldt_last_error());
    {
        ldt_tensor *outs[3] = {g1[0], g2[0], g2[1]};
        void *dst[3] = {a, b, &one};
        int64_t nb[3] = {sizeof a, sizeof b, sizeof one};
        cr_assert_eq(ldt_run_eager(ctx, NULL, 3, outs, dst, nb), LDT_OK, "%s", ldt_last_error());
    }
    cr_assert_eq(one, 1.0);
    for (int r = 0; r < N; r++) {
        double m = zd[r * C], s = 0;
        for (int c = 1; c < C; c++) m = fmax(m, zd[r * C + c]);
        for (int c = 0; c < C; c++) s += exp(zd[r * C + c] - m);
        for (int c = 0; c < C; c++) {
            want = td[r] == -1 ? 0 : (exp(zd[r * C + c] - m) / s - (c == td[r])) / count;
            cr_assert_leq(fabs(a[r * C + c] - want), 1e-15, "[%d,%d]: %.17g, expected %.17g", r, c, a[r * C + c], want);
            cr_assert_leq(fabs(b[r * C + c] - want), 1e-15, "[%d,%d] (loss in wrt): %.17g, expected %.17g", r, c,
                          b[r * C + c], want);
        }
    }
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
}
