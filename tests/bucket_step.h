/* What the gradient-bucket tests share (test_fusion, test_zero_buckets, test_dp_buckets): the
 * GPT training step's set-up (a CPU mesh, Megatron pins, AdamW over every parameter), a step's
 * batch, when a gradient is ready, and a parameter's bytes on a rank. */
#ifndef LDT_TESTS_BUCKET_STEP_H
#define LDT_TESTS_BUCKET_STEP_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ldt/ldt.h"
#include "ldt/models.h"

typedef struct bucket_step {
    ldt_mesh *mesh;
    ldt_ctx *ctx;
    ldt_model *m;
    ldt_optim *o;
    int dp; /* the mesh's "dp" dim */
    int np; /* parameters */
} bucket_step;

/* mesh_text's mesh, a context and the GPT of cfg seeded `seed`, pinned megatron; AdamW (lr 3e-3,
 * betas 0.9/0.95, eps 1e-8, weight decay 0.01, clip norm 1) over its parameters, which go into
 * ps (at most maxp). Neither data parallelism nor ZeRO is set: the caller says. */
static inline void bucket_step_open(bucket_step *s, const char *mesh_text, const ldt_model_config *cfg,
                                    uint64_t seed, int total_steps, ldt_tensor **ps, int maxp) {
    ldt_ctx_options co = {0};
    ldt_optim_config oc = {0};
    memset(s, 0, sizeof *s);
    cr_assert_eq(ldt_mesh_parse(mesh_text, LDT_DEVICE_CPU, &s->mesh), LDT_OK);
    cr_assert_eq(ldt_mesh_dim_index(s->mesh, "dp", &s->dp), LDT_OK);
    co.mesh = s->mesh;
    co.seed = seed;
    cr_assert_eq(ldt_ctx_create(&co, &s->ctx), LDT_OK);
    cr_assert_eq(ldt_model_create(s->ctx, "gpt", cfg, &s->m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_init(s->m, seed), LDT_OK);
    cr_assert_eq(ldt_model_pin(s->m, "megatron"), LDT_OK);
    s->np = ldt_model_nparams(s->m);
    cr_assert_leq(s->np, maxp);
    for (int i = 0; i < s->np; i++) ps[i] = ldt_model_param(s->m, i, NULL);
    oc.kind = LDT_OPTIM_ADAMW, oc.lr = 3e-3, oc.beta1 = 0.9, oc.beta2 = 0.95, oc.eps = 1e-8;
    oc.weight_decay = 0.01, oc.clip_norm = 1.0, oc.total_steps = total_steps;
    cr_assert_eq(ldt_optim_create(s->ctx, &oc, ps, s->np, &s->o), LDT_OK, "%s", ldt_last_error());
}

/* Binds step k's tokens and targets; ignore: every 11th target (from the 4th) is -1, ignored. */
static inline void bucket_step_batch(const bucket_step *s, const ldt_model_config *cfg, int k, int ignore) {
    int64_t n = cfg->batch * cfg->seq;
    int64_t *tok = malloc((size_t)n * sizeof *tok), *tgt = malloc((size_t)n * sizeof *tgt);
    cr_assert(tok && tgt);
    for (int64_t i = 0; i < n; i++) {
        tok[i] = (i * 7 + k * 3) % cfg->vocab;
        tgt[i] = ignore && i % 11 == 3 ? -1 : (i * 5 + k + 1) % cfg->vocab;
    }
    cr_assert_eq(ldt_input_bind(ldt_model_input(s->m, 0, NULL), tok, n * 8), LDT_OK);
    cr_assert_eq(ldt_input_bind(ldt_model_input(s->m, 1, NULL), tgt, n * 8), LDT_OK);
    free(tok);
    free(tgt);
}

/* Step k's batch bound (ignore: as bucket_step_batch), its forward's loss, and the gradients
 * of the first np parameters ps into g. */
static inline ldt_tensor *bucket_step_grads(const bucket_step *s, const ldt_model_config *cfg, int k, int ignore,
                                           ldt_tensor **ps, ldt_tensor **g) {
    ldt_tensor *loss;
    bucket_step_batch(s, cfg, k, ignore);
    cr_assert(loss = ldt_model_forward(s->m), "%s", ldt_last_error());
    cr_assert_eq(ldt_grad(loss, ps, s->np, g), LDT_OK, "%s", ldt_last_error());
    return loss;
}

static inline void bucket_step_close(bucket_step *s) {
    ldt_optim_destroy(s->o);
    ldt_model_destroy(s->m);
    ldt_ctx_destroy(s->ctx);
    ldt_mesh_destroy(s->mesh);
}

/* When gradient g is ready: its node, or where it is a mean loss's gradient divided by the
 * count after its reduction (div(u, count), docs/autodiff.md) the node of u. */
static inline int64_t bucket_ready_node(const ldt_tensor *g) {
    if (strcmp(ldt_tensor_op(g), "div") == 0 && ldt_tensor_ninputs(g) == 2)
        return ldt_tensor_node(ldt_tensor_input(g, 0));
    return ldt_tensor_node(g);
}

/* The bytes on a rank of a tensor of shape s placed by pl (when pinned) on mesh m, elements of
 * es bytes (splits rounded up). */
static inline int64_t bucket_local_bytes(const ldt_shape *s, const ldt_placement *pl, int pinned, const ldt_mesh *m,
                                         size_t es) {
    ldt_shape l = *s;
    int64_t n = (int64_t)es;
    for (int d = 0; pinned && d < ldt_mesh_ndim(m); d++)
        if (pl[d].kind == LDT_PLACE_SHARD || pl[d].kind == LDT_PLACE_INTERLEAVED_SHARD) {
            int64_t k = ldt_mesh_dim_size(m, d);
            l.dims[pl[d].dim] = (l.dims[pl[d].dim] + k - 1) / k;
        }
    for (int d = 0; d < l.ndim; d++) n *= l.dims[d];
    return n;
}

/* Parameter p's pin into pl (*pinned) and its f64 bytes on a rank of s's mesh. */
static inline int64_t bucket_param_bytes(const bucket_step *s, const ldt_tensor *p, ldt_placement *pl, int *pinned) {
    ldt_shape sh;
    *pinned = 0;
    ldt_tensor_shape(p, &sh);
    cr_assert_eq(ldt_tensor_pin(p, pl, LDT_MAX_DIMS, pinned), LDT_OK);
    return bucket_local_bytes(&sh, pl, *pinned, s->mesh, 8);
}

#endif
