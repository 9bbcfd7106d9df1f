/* The model builders: parameter counts against the formula, and the mlp and gpt forward
 * passes against naive double-precision references composed here from the same values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "ldt/models.h"
#include "tests/test_util.h"

static ldt_ctx *new_ctx(void) {
    ldt_ctx *ctx;
    cr_assert_eq(ldt_ctx_create(NULL, &ctx), LDT_OK);
    return ctx;
}

/* Reads a parameter (f32) into a fresh double array. */
static double *param_values(ldt_model *m, int i, int64_t *n) {
    ldt_shape s;
    float *f;
    double *d;
    ldt_tensor_shape(ldt_model_param(m, i, NULL), &s);
    ldt_shape_numel(&s, n);
    f = malloc((size_t)*n * sizeof *f);
    d = malloc((size_t)*n * sizeof *d);
    cr_assert_eq(ldt_read(ldt_model_param(m, i, NULL), f, *n * 4), LDT_OK);
    for (int64_t k = 0; k < *n; k++) d[k] = f[k];
    free(f);
    return d;
}

Test(models, parameter_counts_and_names) {
    ldt_model_config c = ldt_model_config_default("gpt");
    int64_t n;
    ldt_ctx *ctx = new_ctx();
    ldt_model *m;
    const char *name;
    c.layers = 2;
    c.hidden = 8;
    c.heads = 2;
    c.vocab = 11;
    c.seq = 5;
    c.batch = 2;
    cr_assert_eq(ldt_model_param_count_of("gpt", &c, &n), LDT_OK);
    /* 11*8 + 5*8 + 2*(12*64 + 13*8) + 2*8 = 1888 */
    cr_expect_eq(n, 1888);
    cr_assert_eq(ldt_model_create(ctx, "gpt", &c, &m), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(ldt_model_param_count(m), 1888);
    cr_expect_eq(ldt_model_nparams(m), 2 + 2 * 12 + 2);
    ldt_model_param(m, 2 + 12 + 2, &name);
    cr_expect_str_eq(name, "h.1.attn.c_attn.w");
    ldt_model_input(m, 1, &name);
    cr_expect_str_eq(name, "targets");
    ldt_model_destroy(m);
    c = ldt_model_config_default("mlp");
    cr_assert_eq(ldt_model_param_count_of("mlp", &c, &n), LDT_OK);
    cr_expect_eq(n, 2 * (8 * 64 * 64 + 5 * 64));
    c.heads = 3; /* irrelevant to mlp */
    cr_expect_eq(ldt_model_create(ctx, "mlp", &c, &m), LDT_OK);
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
}

Test(models, bad_configs) {
    ldt_ctx *ctx = new_ctx();
    ldt_model *m;
    ldt_model_config c = ldt_model_config_default("gpt");
    c.heads = 5;
    cr_expect_eq(ldt_model_create(ctx, "gpt", &c, &m), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "hidden = 64 is not a multiple of heads = 5") != NULL, "%s",
              ldt_last_error());
    c = ldt_model_config_default("gpt");
    c.vocab = 0;
    cr_expect_eq(ldt_model_create(ctx, "gpt", &c, &m), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "vocab = 0") != NULL, "%s", ldt_last_error());
    c = ldt_model_config_default("gpt");
    c.dtype = LDT_I32;
    cr_expect_eq(ldt_model_create(ctx, "gpt", &c, &m), LDT_ERR_INVALID_ARGUMENT);
    cr_expect_eq(ldt_model_create(ctx, "bert", &c, &m), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "unknown kind 'bert'") != NULL, "%s", ldt_last_error());
    c = ldt_model_config_default("gpt");
    c.hidden = (int64_t)1 << 40;
    c.heads = 1;
    cr_expect_neq(ldt_model_create(ctx, "gpt", &c, &m), LDT_OK);
    ldt_ctx_destroy(ctx);
}

Test(models, mlp_forward_matches_reference) {
    ldt_ctx *ctx = new_ctx();
    ldt_model_config c = ldt_model_config_default("mlp");
    ldt_model *m;
    enum { B = 3, H = 4 };
    float xv[B * H], tv[B * H], loss;
    double x[B][H], want = 0;
    c.layers = 2;
    c.hidden = H;
    c.batch = B;
    cr_assert_eq(ldt_model_create(ctx, "mlp", &c, &m), LDT_OK);
    cr_assert_eq(ldt_model_init(m, 7), LDT_OK, "%s", ldt_last_error());
    for (int i = 0; i < B * H; i++) {
        xv[i] = (float)sin(i + 1.0);
        tv[i] = (float)cos(i * 0.5);
        x[i / H][i % H] = xv[i];
    }
    cr_assert_eq(ldt_input_bind(ldt_model_input(m, 0, NULL), xv, sizeof xv), LDT_OK);
    cr_assert_eq(ldt_input_bind(ldt_model_input(m, 1, NULL), tv, sizeof tv), LDT_OK);
    cr_assert_eq(ldt_read(ldt_model_forward(m), &loss, sizeof loss), LDT_OK, "%s", ldt_last_error());
    for (int l = 0; l < 2; l++) {
        int64_t n;
        double *w1 = param_values(m, 4 * l, &n), *b1 = param_values(m, 4 * l + 1, &n);
        double *w2 = param_values(m, 4 * l + 2, &n), *b2 = param_values(m, 4 * l + 3, &n);
        for (int b = 0; b < B; b++) {
            double h[4 * H], y[H];
            for (int o = 0; o < 4 * H; o++) {
                double s = b1[o];
                for (int i = 0; i < H; i++) s += w1[o * H + i] * x[b][i];
                h[o] = 0.5 * s * (1 + erf(s / sqrt(2.0)));
            }
            for (int o = 0; o < H; o++) {
                y[o] = b2[o];
                for (int i = 0; i < 4 * H; i++) y[o] += w2[o * 4 * H + i] * h[i];
            }
            for (int o = 0; o < H; o++) x[b][o] += y[o];
        }
        free(w1);
        free(b1);
        free(w2);
        free(b2);
    }
    for (int i = 0; i < B * H; i++) want += pow(x[i / H][i % H] - tv[i], 2) / (B * H);
    cr_expect(fabs(loss - want) <= 1e-5 * fabs(want) + 1e-7, "mlp loss %.9g, want %.9g", loss, want);
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
}

/* The naive GPT-2 forward in double, from the model's parameter values. */
static double gpt_reference(ldt_model *m, const ldt_model_config *c, const int64_t *tok,
                            const int64_t *tgt) {
    int64_t L = c->layers, H = c->hidden, A = c->heads, D = H / A, V = c->vocab, S = c->seq,
            B = c->batch, n;
    int np = ldt_model_nparams(m);
    double **P = malloc((size_t)np * sizeof *P);
    double *x = calloc((size_t)(B * S * H), sizeof *x), *h = calloc((size_t)(B * S * H), sizeof *h);
    double *qkv = calloc((size_t)(B * S * 3 * H), sizeof *qkv), *y = calloc((size_t)(B * S * H), sizeof *y);
    double *f = calloc((size_t)(4 * H), sizeof *f), loss = 0;
    int count = 0;
    for (int i = 0; i < np; i++) P[i] = param_values(m, i, &n);
    /* layer norm of row r of src into dst */
#define LN(dst, src, w, b)                                                                   \
    for (int64_t r = 0; r < B * S; r++) {                                                    \
        double mu = 0, var = 0;                                                              \
        for (int64_t i = 0; i < H; i++) mu += src[r * H + i] / H;                            \
        for (int64_t i = 0; i < H; i++) var += pow(src[r * H + i] - mu, 2) / H;              \
        for (int64_t i = 0; i < H; i++)                                                      \
            dst[r * H + i] = (src[r * H + i] - mu) / sqrt(var + 1e-5) * (w)[i] + (b)[i];     \
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t i = 0; i < H; i++)
                x[(b * S + s) * H + i] = P[0][tok[b * S + s] * H + i] + P[1][s * H + i];
    for (int64_t l = 0; l < L; l++) {
        double **w = &P[2 + 12 * l];
        LN(h, x, w[0], w[1])
        for (int64_t r = 0; r < B * S; r++)
            for (int64_t o = 0; o < 3 * H; o++) {
                double acc = w[3][o];
                for (int64_t i = 0; i < H; i++) acc += w[2][o * H + i] * h[r * H + i];
                qkv[r * 3 * H + o] = acc;
            }
        for (int64_t b = 0; b < B; b++)
            for (int64_t a = 0; a < A; a++)
                for (int64_t i = 0; i < S; i++) {
                    double sc[64], mx = -INFINITY, z = 0;
                    for (int64_t j = 0; j <= i; j++) {
                        double dot = 0;
                        for (int64_t e = 0; e < D; e++)
                            dot += qkv[(b * S + i) * 3 * H + a * D + e] *
                                   qkv[(b * S + j) * 3 * H + H + a * D + e];
                        sc[j] = dot / sqrt((double)D);
                        if (sc[j] > mx) mx = sc[j];
                    }
                    for (int64_t j = 0; j <= i; j++) z += (sc[j] = exp(sc[j] - mx));
                    for (int64_t e = 0; e < D; e++) {
                        double o = 0;
                        for (int64_t j = 0; j <= i; j++)
                            o += sc[j] / z * qkv[(b * S + j) * 3 * H + 2 * H + a * D + e];
                        y[(b * S + i) * H + a * D + e] = o;
                    }
                }
        for (int64_t r = 0; r < B * S; r++)
            for (int64_t o = 0; o < H; o++) {
                double acc = w[5][o];
                for (int64_t i = 0; i < H; i++) acc += w[4][o * H + i] * y[r * H + i];
                x[r * H + o] += acc;
            }
        LN(h, x, w[6], w[7])
        for (int64_t r = 0; r < B * S; r++) {
            for (int64_t o = 0; o < 4 * H; o++) {
                double acc = w[9][o], u;
                for (int64_t i = 0; i < H; i++) acc += w[8][o * H + i] * h[r * H + i];
                u = sqrt(2.0 / 3.14159265358979323846) * (acc + 0.044715 * acc * acc * acc);
                f[o] = 0.5 * acc * (1 + tanh(u));
            }
            for (int64_t o = 0; o < H; o++) {
                double acc = w[11][o];
                for (int64_t i = 0; i < 4 * H; i++) acc += w[10][o * 4 * H + i] * f[i];
                x[r * H + o] += acc;
            }
        }
    }
    LN(h, x, P[np - 2], P[np - 1])
    for (int64_t r = 0; r < B * S; r++) {
        double lg[64], mx = -INFINITY, z = 0;
        if (tgt[r] < 0) continue;
        for (int64_t v = 0; v < V; v++) {
            lg[v] = 0;
            for (int64_t i = 0; i < H; i++) lg[v] += P[0][v * H + i] * h[r * H + i];
            if (lg[v] > mx) mx = lg[v];
        }
        for (int64_t v = 0; v < V; v++) z += exp(lg[v] - mx);
        loss += log(z) + mx - lg[tgt[r]];
        count++;
    }
#undef LN
    for (int i = 0; i < np; i++) free(P[i]);
    free(P);
    free(x);
    free(h);
    free(qkv);
    free(y);
    free(f);
    return loss / count;
}

Test(models, gpt_forward_matches_reference) {
    ldt_ctx *ctx = new_ctx();
    ldt_model_config c = ldt_model_config_default("gpt");
    ldt_model *m;
    int64_t tok[10], tgt[10];
    float loss, loss2;
    double want;
    c.layers = 2;
    c.hidden = 8;
    c.heads = 2;
    c.vocab = 11;
    c.seq = 5;
    c.batch = 2;
    cr_assert_eq(ldt_model_create(ctx, "gpt", &c, &m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_init(m, 123), LDT_OK, "%s", ldt_last_error());
    /* larger weights than GPT-2's 0.02 so the reference is exercised */
    for (int i = 0; i < ldt_model_nparams(m); i++) {
        ldt_tensor *p = ldt_model_param(m, i, NULL);
        ldt_shape s;
        int64_t n;
        float *v;
        ldt_tensor_shape(p, &s);
        ldt_shape_numel(&s, &n);
        v = malloc((size_t)n * sizeof *v);
        for (int64_t k = 0; k < n; k++) v[k] = (float)(0.3 * sin(17.0 * i + 3.1 * k));
        cr_assert_eq(ldt_param_set(p, v, n * 4), LDT_OK);
        free(v);
    }
    for (int i = 0; i < 10; i++) {
        tok[i] = (i * 7 + 3) % 11;
        tgt[i] = i % 4 == 3 ? -1 : (i * 5 + 1) % 11;
    }
    cr_assert_eq(ldt_input_bind(ldt_model_input(m, 0, NULL), tok, sizeof tok), LDT_OK);
    cr_assert_eq(ldt_input_bind(ldt_model_input(m, 1, NULL), tgt, sizeof tgt), LDT_OK);
    cr_assert_eq(ldt_read(ldt_model_forward(m), &loss, sizeof loss), LDT_OK, "%s", ldt_last_error());
    want = gpt_reference(m, &c, tok, tgt);
    cr_expect(fabs(loss - want) <= 1e-5 * fabs(want), "gpt loss %.9g, want %.9g", loss, want);
    cr_log_info("gpt loss %.9g, reference %.9g", loss, want);
    /* the same forward again gives the same bits */
    cr_assert_eq(ldt_read(ldt_model_forward(m), &loss2, sizeof loss2), LDT_OK);
    cr_expect_eq(loss, loss2);
    ldt_model_destroy(m);
    /* dropout in train mode changes the loss; the same seed gives the same loss */
    {
        float a, b;
        c.dropout = 0.3;
        c.train = 1;
        cr_assert_eq(ldt_model_create(ctx, "gpt", &c, &m), LDT_OK);
        cr_assert_eq(ldt_model_init(m, 123), LDT_OK);
        ldt_input_bind(ldt_model_input(m, 0, NULL), tok, sizeof tok);
        ldt_input_bind(ldt_model_input(m, 1, NULL), tgt, sizeof tgt);
        cr_assert_eq(ldt_ctx_set_seed(ctx, 5, 0), LDT_OK);
        cr_assert_eq(ldt_read(ldt_model_forward(m), &a, sizeof a), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt_ctx_set_seed(ctx, 5, 0), LDT_OK);
        cr_assert_eq(ldt_read(ldt_model_forward(m), &b, sizeof b), LDT_OK);
        cr_expect_eq(a, b, "same seed, same loss");
        ldt_model_set_train(m, 0);
        cr_assert_eq(ldt_read(ldt_model_forward(m), &b, sizeof b), LDT_OK);
        cr_expect_neq(a, b, "train-mode dropout changed nothing");
        ldt_model_destroy(m);
    }
    ldt_ctx_destroy(ctx);
}
