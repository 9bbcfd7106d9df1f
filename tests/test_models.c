/* The model builders: configs, counts, names, init, forward passes vs naive references. */
#include <math.h>
#include <stdio.h>
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

/* The tiny GPT of the forward tests: L=2, H=8, A=2, V=11, S=5, B=2. */
static ldt_model_config tiny_gpt(void) {
    ldt_model_config c = ldt_model_config_default("gpt");
    c.layers = 2;
    c.hidden = 8;
    c.heads = 2;
    c.vocab = 11;
    c.seq = 5;
    c.batch = 2;
    return c;
}

static int64_t numel(const ldt_tensor *t) {
    ldt_shape s;
    int64_t n;
    cr_assert_eq(ldt_tensor_shape(t, &s), LDT_OK);
    cr_assert_eq(ldt_shape_numel(&s, &n), LDT_OK);
    return n;
}

/* A float tensor's value (any float dtype) as fresh doubles; runs the trace if pending. */
static double *values_of(ldt_tensor *t, int64_t *np) {
    ldt_dtype dt = ldt_tensor_dtype(t);
    int64_t n = numel(t), es = (int64_t)ldt_dtype_size(dt);
    unsigned char *raw = malloc((size_t)(n * es + 1));
    double *d = malloc((size_t)(n + 1) * sizeof *d);
    ldt_status st = ldt_read(t, raw, n * es);
    cr_assert_eq(st, LDT_OK, "read: %s", ldt_last_error());
    for (int64_t k = 0; k < n; k++) switch (dt) {
        case LDT_F64: d[k] = ((double *)raw)[k]; break;
        case LDT_F16: d[k] = ldt_f16_to_f32(((uint16_t *)raw)[k]); break;
        case LDT_BF16: d[k] = ldt_bf16_to_f32(((uint16_t *)raw)[k]); break;
        default: d[k] = ((float *)raw)[k]; break;
        }
    free(raw);
    if (np) *np = n;
    return d;
}

static double scalar_of(ldt_tensor *t) {
    double *v = values_of(t, NULL), r = v[0];
    free(v);
    return r;
}

/* Sets a parameter or binds an input from doubles, rounded to the tensor's dtype. */
static void set_values(ldt_tensor *t, const double *v, int input) {
    ldt_dtype dt = ldt_tensor_dtype(t);
    int64_t n = numel(t), es = (int64_t)ldt_dtype_size(dt);
    unsigned char *raw = malloc((size_t)(n * es + 1));
    for (int64_t k = 0; k < n; k++) switch (dt) {
        case LDT_F64: ((double *)raw)[k] = v[k]; break;
        case LDT_F16: ((uint16_t *)raw)[k] = ldt_f32_to_f16((float)v[k]); break;
        case LDT_BF16: ((uint16_t *)raw)[k] = ldt_f32_to_bf16((float)v[k]); break;
        default: ((float *)raw)[k] = (float)v[k]; break;
        }
    cr_assert_eq(input ? ldt_input_bind(t, raw, n * es) : ldt_param_set(t, raw, n * es), LDT_OK,
                 "%s", ldt_last_error());
    free(raw);
}

/* Every parameter set to 0.3 sin(17 i + 3.1 k): larger than GPT-2's 0.02, so attention,
 * norms and the MLP all matter, and no two parameters alike. */
static void set_pattern(ldt_model *m) {
    for (int i = 0; i < ldt_model_nparams(m); i++) {
        ldt_tensor *p = ldt_model_param(m, i, NULL);
        int64_t n = numel(p);
        double *v = malloc((size_t)n * sizeof *v);
        for (int64_t k = 0; k < n; k++) v[k] = 0.3 * sin(17.0 * i + 3.1 * (double)k);
        set_values(p, v, 0);
        free(v);
    }
}

/* All parameters as doubles, in model order. */
static double **params_of(ldt_model *m) {
    int np = ldt_model_nparams(m);
    double **P = malloc((size_t)np * sizeof *P);
    for (int i = 0; i < np; i++) P[i] = values_of(ldt_model_param(m, i, NULL), NULL);
    return P;
}

static void free_params(double **P, int np) {
    for (int i = 0; i < np; i++) free(P[i]);
    free(P);
}

/* Counts elements with |got - want| > tol (1 + |want|), prints the first few and (on failure
 * or when verbose) the worst; returns the count. */
static int64_t count_differing(const char *what, const double *got, const double *want, int64_t n,
                               double tol, int verbose) {
    int64_t bad = 0, worst = 0;
    double wd = 0;
    for (int64_t k = 0; k < n; k++) {
        double d = fabs(got[k] - want[k]);
        if (!(d <= tol * (1 + fabs(want[k])))) {
            if (bad < 5)
                cr_log_error("%s[%lld] = %.9g, want %.9g", what, (long long)k, got[k], want[k]);
            bad++;
        }
        if (!(d <= wd)) wd = d, worst = k;
    }
    if (n > 0 && (verbose || bad))
        cr_log_info("%s: %lld of %lld differ; the largest difference %.3g at %lld (%.9g vs %.9g)",
                    what, (long long)bad, (long long)n, wd, (long long)worst, got[worst],
                    want[worst]);
    return bad;
}

/* ---- naive references ------------------------------------------------------------------ */

static double gelu_erf(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double gelu_tanh(double x) {
    return 0.5 * x * (1 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

/* y[r, o] (+)= b[o] + sum_i w[o, i] x[r, i] over rows r < R; w is [O, I]. */
static void linear_ref(double *y, const double *x, const double *w, const double *b, int64_t R,
                       int64_t I, int64_t O, int accumulate) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t o = 0; o < O; o++) {
            double acc = b ? b[o] : 0;
            for (int64_t i = 0; i < I; i++) acc += w[o * I + i] * x[r * I + i];
            y[r * O + o] = accumulate ? y[r * O + o] + acc : acc;
        }
}

static void layer_norm_ref(double *y, const double *x, const double *w, const double *b, int64_t R,
                           int64_t H) {
    for (int64_t r = 0; r < R; r++) {
        double mu = 0, var = 0;
        for (int64_t i = 0; i < H; i++) mu += x[r * H + i] / (double)H;
        for (int64_t i = 0; i < H; i++) var += pow(x[r * H + i] - mu, 2) / (double)H;
        for (int64_t i = 0; i < H; i++)
            y[r * H + i] = (x[r * H + i] - mu) / sqrt(var + 1e-5) * w[i] + b[i];
    }
}

/* The mlp forward: x [B, H] becomes the output in place; returns the MSE against t. */
static double mlp_ref(double **P, const ldt_model_config *c, double *x, const double *t) {
    int64_t B = c->batch, H = c->hidden;
    double *h = malloc((size_t)(B * 4 * H) * sizeof *h), loss = 0;
    for (int64_t l = 0; l < c->layers; l++) {
        double **w = &P[4 * l];
        linear_ref(h, x, w[0], w[1], B, H, 4 * H, 0);
        for (int64_t k = 0; k < B * 4 * H; k++) h[k] = gelu_erf(h[k]);
        linear_ref(x, h, w[2], w[3], B, 4 * H, H, 1);
    }
    for (int64_t k = 0; k < B * H; k++) loss += pow(x[k] - t[k], 2);
    free(h);
    return loss / (double)(B * H);
}

/* The dropout masks of one gpt layer (1 = dropped, as the stream's bernoulli(p) says):
 * attention weights [B, A, S, S], after the attention projection and after the MLP [B, S, H]. */
typedef struct {
    double *attn, *proj, *mlp;
} layer_masks;

/* The naive GPT-2 forward in double. masks (one per layer, or NULL) with probability p;
 * logits [B, S, V] out; returns the mean cross entropy over targets != -1. */
static double gpt_ref(double **P, const ldt_model_config *c, const int64_t *tok, const int64_t *tgt,
                      const layer_masks *masks, double p, double *logits) {
    int64_t L = c->layers, H = c->hidden, A = c->heads, D = H / A, V = c->vocab, S = c->seq,
            B = c->batch, R = B * S;
    int np = (int)(2 + 12 * L + 2);
    double *x = calloc((size_t)(R * H), sizeof *x), *h = calloc((size_t)(R * H), sizeof *h);
    double *qkv = calloc((size_t)(R * 3 * H), sizeof *qkv), *y = calloc((size_t)(R * H), sizeof *y);
    double *f = calloc((size_t)(R * 4 * H), sizeof *f), *o = calloc((size_t)(R * H), sizeof *o);
    double *sc = calloc((size_t)S, sizeof *sc), loss = 0, keep = 1 / (1 - p);
    int64_t count = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t i = 0; i < H; i++)
                x[(b * S + s) * H + i] = P[0][tok[b * S + s] * H + i] + P[1][s * H + i];
    for (int64_t l = 0; l < L; l++) {
        double **w = &P[2 + 12 * l];
        const layer_masks *mk = masks ? &masks[l] : NULL;
        layer_norm_ref(h, x, w[0], w[1], R, H);
        linear_ref(qkv, h, w[2], w[3], R, H, 3 * H, 0);
        for (int64_t b = 0; b < B; b++)
            for (int64_t a = 0; a < A; a++)
                for (int64_t i = 0; i < S; i++) {
                    double mx = -INFINITY, z = 0;
                    for (int64_t j = 0; j <= i; j++) { /* causal: j <= i */
                        double dot = 0;
                        for (int64_t e = 0; e < D; e++)
                            dot += qkv[(b * S + i) * 3 * H + a * D + e] *
                                   qkv[(b * S + j) * 3 * H + H + a * D + e];
                        sc[j] = dot / sqrt((double)D);
                        if (sc[j] > mx) mx = sc[j];
                    }
                    for (int64_t j = 0; j <= i; j++) z += (sc[j] = exp(sc[j] - mx));
                    for (int64_t j = 0; j <= i; j++) {
                        sc[j] /= z;
                        if (mk) sc[j] *= mk->attn[((b * A + a) * S + i) * S + j] ? 0 : keep;
                    }
                    for (int64_t e = 0; e < D; e++) {
                        double acc = 0;
                        for (int64_t j = 0; j <= i; j++)
                            acc += sc[j] * qkv[(b * S + j) * 3 * H + 2 * H + a * D + e];
                        y[(b * S + i) * H + a * D + e] = acc;
                    }
                }
        linear_ref(o, y, w[4], w[5], R, H, H, 0);
        for (int64_t k = 0; k < R * H; k++) x[k] += mk ? (mk->proj[k] ? 0 : keep * o[k]) : o[k];
        layer_norm_ref(h, x, w[6], w[7], R, H);
        linear_ref(f, h, w[8], w[9], R, H, 4 * H, 0);
        for (int64_t k = 0; k < R * 4 * H; k++) f[k] = gelu_tanh(f[k]);
        linear_ref(o, f, w[10], w[11], R, 4 * H, H, 0);
        for (int64_t k = 0; k < R * H; k++) x[k] += mk ? (mk->mlp[k] ? 0 : keep * o[k]) : o[k];
    }
    layer_norm_ref(h, x, P[np - 2], P[np - 1], R, H);
    linear_ref(logits, h, P[0], NULL, R, H, V, 0); /* tied head */
    for (int64_t r = 0; r < R; r++) {
        double mx = -INFINITY, z = 0;
        if (tgt[r] == -1) continue;
        for (int64_t v = 0; v < V; v++) mx = fmax(mx, logits[r * V + v]);
        for (int64_t v = 0; v < V; v++) z += exp(logits[r * V + v] - mx);
        loss += log(z) + mx - logits[r * V + tgt[r]];
        count++;
    }
    free(x);
    free(h);
    free(qkv);
    free(y);
    free(f);
    free(o);
    free(sc);
    return loss / (double)count;
}

/* Deterministic tokens in [0, V) and targets with every fourth one ignored (-1). */
static void tokens_for(const ldt_model_config *c, int64_t *tok, int64_t *tgt) {
    for (int64_t i = 0; i < c->batch * c->seq; i++) {
        tok[i] = (i * 7 + 3) % c->vocab;
        tgt[i] = i % 4 == 3 ? -1 : (i * 5 + 1) % c->vocab;
    }
}

static void bind_tokens(ldt_model *m, const int64_t *tok, const int64_t *tgt, int64_t n) {
    cr_assert_eq(ldt_input_bind(ldt_model_input(m, 0, NULL), tok, n * 8), LDT_OK, "%s",
                 ldt_last_error());
    cr_assert_eq(ldt_input_bind(ldt_model_input(m, 1, NULL), tgt, n * 8), LDT_OK, "%s",
                 ldt_last_error());
}

/* Runs one forward; the loss, and the output (logits or the mlp's x) when out is given. */
static double run_forward(ldt_model *m, double **out, int64_t *nout) {
    ldt_tensor *loss = ldt_model_forward(m), *kept = NULL;
    double l;
    cr_assert(loss != NULL, "forward: %s", ldt_last_error());
    if (out) cr_assert((kept = ldt_keep(ldt_model_output(m))) != NULL, "%s", ldt_last_error());
    l = scalar_of(loss);
    if (out) *out = values_of(kept, nout);
    return l;
}

/* ---- sizes, names, configs ------------------------------------------------------------- */

Test(models, param_count_formula) {
    ldt_model_config c = tiny_gpt();
    int64_t n;
    /* V*H + S*H + L*(12H^2 + 13H) + 2H by hand */
    cr_assert_eq(ldt_model_param_count_of("gpt", &c, &n), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(n, 11 * 8 + 5 * 8 + 2 * (12 * 64 + 13 * 8) + 2 * 8, "tiny gpt: %lld",
                 (long long)n);
    cr_expect_eq(n, 1888);
    /* GPT-2 small: 124,439,808 (the published count with the tied head) */
    c.layers = 12, c.hidden = 768, c.heads = 12, c.vocab = 50257, c.seq = 1024;
    cr_assert_eq(ldt_model_param_count_of("gpt", &c, &n), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(n, 124439808LL, "gpt-2 small: %lld", (long long)n);
    /* GPT-2 XL: 1,557,611,200 */
    c.layers = 48, c.hidden = 1600, c.heads = 25;
    cr_assert_eq(ldt_model_param_count_of("gpt", &c, &n), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(n, 1557611200LL, "gpt-2 xl: %lld", (long long)n);
    /* mlp: L*(8H^2 + 5H) */
    c = ldt_model_config_default("mlp");
    cr_assert_eq(ldt_model_param_count_of("mlp", &c, &n), LDT_OK);
    cr_expect_eq(n, 2 * (8 * 64 * 64 + 5 * 64), "mlp default: %lld", (long long)n);
    c.layers = 5, c.hidden = 3;
    cr_assert_eq(ldt_model_param_count_of("mlp", &c, &n), LDT_OK);
    cr_expect_eq(n, 435, "mlp L=5 H=3: %lld", (long long)n);
}

/* The formula, ldt_model_param_count and the created tensors' sizes all agree. */
Test(models, param_count_matches_created_params) {
    ldt_ctx *ctx = new_ctx();
    struct {
        const char *kind;
        int64_t L, H, A, V, S, want;
    } cases[] = {{"gpt", 2, 8, 2, 11, 5, 1888},
                 {"gpt", 3, 12, 3, 7, 4, 7 * 12 + 4 * 12 + 3 * (12 * 144 + 13 * 12) + 24},
                 {"gpt", 1, 6, 6, 1, 1, 6 + 6 + 12 * 36 + 13 * 6 + 12},
                 {"mlp", 2, 64, 1, 1, 1, 66176},
                 {"mlp", 5, 3, 1, 1, 1, 435}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ldt_model_config c = ldt_model_config_default(cases[i].kind);
        ldt_model *m;
        int64_t n, sum = 0;
        c.layers = cases[i].L, c.hidden = cases[i].H, c.heads = cases[i].A;
        c.vocab = cases[i].V, c.seq = cases[i].S;
        cr_assert_eq(ldt_model_param_count_of(cases[i].kind, &c, &n), LDT_OK, "%s",
                     ldt_last_error());
        cr_assert_eq(ldt_model_create(ctx, cases[i].kind, &c, &m), LDT_OK, "%s", ldt_last_error());
        for (int k = 0; k < ldt_model_nparams(m); k++) sum += numel(ldt_model_param(m, k, NULL));
        cr_expect(n == cases[i].want && sum == n && ldt_model_param_count(m) == n,
                  "case %zu (%s L=%lld H=%lld): formula %lld, by hand %lld, created %lld, "
                  "param_count %lld",
                  i, cases[i].kind, (long long)c.layers, (long long)c.hidden, (long long)n,
                  (long long)cases[i].want, (long long)sum, (long long)ldt_model_param_count(m));
        ldt_model_destroy(m);
    }
    ldt_ctx_destroy(ctx);
}

static void expect_param(ldt_model *m, int i, const char *name, int nd, int64_t d0, int64_t d1,
                         ldt_dtype dt) {
    const char *got = NULL;
    ldt_tensor *t = ldt_model_param(m, i, &got);
    ldt_shape s;
    cr_assert(t != NULL, "param %d missing", i);
    ldt_tensor_shape(t, &s);
    cr_expect_str_eq(got, name, "param %d is %s, want %s", i, got, name);
    cr_expect(s.ndim == nd && s.dims[0] == d0 && (nd < 2 || s.dims[1] == d1),
              "param %s is %s, want [%lld%s%lld]", name, ldt_test_fmt_shape(&s), (long long)d0,
              nd == 2 ? "," : "", nd == 2 ? (long long)d1 : 0LL);
    cr_expect_eq(ldt_tensor_dtype(t), dt, "param %s is %s", name,
                 ldt_dtype_name(ldt_tensor_dtype(t)));
}

static void expect_input(ldt_model *m, int i, const char *name, int64_t d0, int64_t d1,
                         ldt_dtype dt) {
    const char *got = NULL;
    ldt_tensor *t = ldt_model_input(m, i, &got);
    ldt_shape s;
    cr_assert(t != NULL, "input %d missing", i);
    ldt_tensor_shape(t, &s);
    cr_expect_str_eq(got, name);
    cr_expect(s.ndim == 2 && s.dims[0] == d0 && s.dims[1] == d1, "input %s is %s", name,
              ldt_test_fmt_shape(&s));
    cr_expect_eq(ldt_tensor_dtype(t), dt, "input %s is %s", name,
                 ldt_dtype_name(ldt_tensor_dtype(t)));
}

Test(models, names_shapes_and_inputs) {
    ldt_ctx *ctx = new_ctx();
    ldt_model_config c = tiny_gpt();
    ldt_model *m;
    static const char *const block[12] = {
        "ln_1.w", "ln_1.b", "attn.c_attn.w", "attn.c_attn.b", "attn.c_proj.w", "attn.c_proj.b",
        "ln_2.w", "ln_2.b", "mlp.c_fc.w",    "mlp.c_fc.b",    "mlp.c_proj.w",  "mlp.c_proj.b"};
    const int64_t H = 8,
                  shapes[12][3] = {{1, H, 0},     {1, H, 0},     {2, 3 * H, H}, {1, 3 * H, 0},
                                   {2, H, H},     {1, H, 0},     {1, H, 0},     {1, H, 0},
                                   {2, 4 * H, H}, {1, 4 * H, 0}, {2, H, 4 * H}, {1, H, 0}};
    c.dtype = LDT_F64;
    cr_assert_eq(ldt_model_create(ctx, "gpt", &c, &m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_nparams(m), 2 + 12 * 2 + 2);
    expect_param(m, 0, "wte", 2, 11, H, LDT_F64);
    expect_param(m, 1, "wpe", 2, 5, H, LDT_F64);
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < 12; k++) {
            char name[64];
            snprintf(name, sizeof name, "h.%d.%s", l, block[k]);
            expect_param(m, 2 + 12 * l + k, name, (int)shapes[k][0], shapes[k][1], shapes[k][2],
                         LDT_F64);
        }
    expect_param(m, 26, "ln_f.w", 1, H, 0, LDT_F64);
    expect_param(m, 27, "ln_f.b", 1, H, 0, LDT_F64);
    cr_expect_null(ldt_model_param(m, 28, NULL));
    cr_expect_null(ldt_model_param(m, -1, NULL));
    cr_assert_eq(ldt_model_ninputs(m), 2);
    expect_input(m, 0, "tokens", 2, 5, LDT_I64);
    expect_input(m, 1, "targets", 2, 5, LDT_I64);
    cr_expect_null(ldt_model_input(m, 2, NULL));
    cr_expect_null(ldt_model_output(m), "no output before a forward");
    ldt_model_destroy(m);

    c = ldt_model_config_default("mlp");
    c.layers = 3, c.hidden = 4, c.batch = 6;
    c.heads = 3; /* not a divisor of hidden: irrelevant to mlp */
    cr_assert_eq(ldt_model_create(ctx, "mlp", &c, &m), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt_model_nparams(m), 12);
    for (int l = 0; l < 3; l++) {
        char name[4][32];
        snprintf(name[0], 32, "l.%d.w1", l);
        snprintf(name[1], 32, "l.%d.b1", l);
        snprintf(name[2], 32, "l.%d.w2", l);
        snprintf(name[3], 32, "l.%d.b2", l);
        expect_param(m, 4 * l, name[0], 2, 16, 4, LDT_F32);
        expect_param(m, 4 * l + 1, name[1], 1, 16, 0, LDT_F32);
        expect_param(m, 4 * l + 2, name[2], 2, 4, 16, LDT_F32);
        expect_param(m, 4 * l + 3, name[3], 1, 4, 0, LDT_F32);
    }
    cr_assert_eq(ldt_model_ninputs(m), 2);
    expect_input(m, 0, "x", 6, 4, LDT_F32);
    expect_input(m, 1, "target", 6, 4, LDT_F32);
    ldt_model_destroy(m);
    ldt_model_destroy(NULL);
    cr_expect_eq(ldt_model_nparams(NULL), 0);
    cr_expect_null(ldt_model_forward(NULL));
    ldt_ctx_destroy(ctx);
}

/* create and param_count_of both refuse cfg with st and a message holding `needle`. */
static void expect_bad(ldt_ctx *ctx, const char *kind, const ldt_model_config *c, ldt_status st,
                       const char *needle) {
    ldt_model *m = (ldt_model *)&m; /* not NULL: create must clear it */
    int64_t n = -7;
    ldt_status got = ldt_model_create(ctx, kind, c, &m);
    cr_expect_eq(got, st, "%s: create gave %s (%s), want %s; needle '%s'", kind ? kind : "(null)",
                 ldt_status_name(got), ldt_last_error(), ldt_status_name(st), needle);
    cr_expect(strstr(ldt_last_error(), needle) != NULL, "message '%s' lacks '%s'", ldt_last_error(),
              needle);
    cr_expect_null(m, "out not cleared");
    if (got == LDT_OK) ldt_model_destroy(m);
    got = ldt_model_param_count_of(kind, c, &n);
    /* the count only fails on the config or its own overflow, not on activation sizes */
    if (got != LDT_OK) {
        cr_expect_eq(got, st, "param_count_of gave %s, want %s (%s)", ldt_status_name(got),
                     ldt_status_name(st), needle);
        cr_expect_eq(n, -7, "out written on error");
    }
}

Test(models, bad_configs) {
    ldt_ctx *ctx = new_ctx();
    ldt_model *m;
    const char *kinds[2] = {"gpt", "mlp"};
    for (int k = 0; k < 2; k++) {
        const char *fields[6] = {"layers", "hidden", "heads", "vocab", "seq", "batch"};
        for (int f = 0; f < 6; f++) {
            const int64_t vals[3] = {0, -1, INT64_MIN};
            if (k == 1 && (f == 2 || f == 3 || f == 4)) continue; /* mlp ignores them */
            for (int v = 0; v < 3; v++) {
                ldt_model_config c = ldt_model_config_default(kinds[k]);
                int64_t *fp[6] = {&c.layers, &c.hidden, &c.heads, &c.vocab, &c.seq, &c.batch};
                char needle[64];
                *fp[f] = vals[v];
                snprintf(needle, sizeof needle, "%s = %lld", fields[f], (long long)vals[v]);
                expect_bad(ctx, kinds[k], &c, LDT_ERR_INVALID_ARGUMENT, needle);
            }
        }
    }
    {
        ldt_model_config c = ldt_model_config_default("gpt");
        c.heads = 5;
        expect_bad(ctx, "gpt", &c, LDT_ERR_INVALID_ARGUMENT,
                   "hidden = 64 is not a multiple of heads = 5");
        c.heads = 128;
        expect_bad(ctx, "gpt", &c, LDT_ERR_INVALID_ARGUMENT,
                   "hidden = 64 is not a multiple of heads = 128");
        c = ldt_model_config_default("gpt");
        c.dtype = LDT_I32;
        expect_bad(ctx, "gpt", &c, LDT_ERR_INVALID_ARGUMENT, "dtype = i32");
        c.dtype = LDT_BOOL;
        expect_bad(ctx, "mlp", &c, LDT_ERR_INVALID_ARGUMENT, "dtype = bool");
        c.dtype = (ldt_dtype)99;
        expect_bad(ctx, "gpt", &c, LDT_ERR_INVALID_ARGUMENT, "dtype = ");
        c = ldt_model_config_default("gpt");
        c.dropout = 1.5;
        expect_bad(ctx, "gpt", &c, LDT_ERR_INVALID_ARGUMENT, "dropout = 1.5");
        c.dropout = -0.1;
        expect_bad(ctx, "gpt", &c, LDT_ERR_INVALID_ARGUMENT, "dropout = -0.1");
        c.dropout = NAN;
        expect_bad(ctx, "gpt", &c, LDT_ERR_INVALID_ARGUMENT, "dropout = ");
        c = ldt_model_config_default("gpt");
        expect_bad(ctx, "bert", &c, LDT_ERR_INVALID_ARGUMENT, "unknown kind 'bert'");
        expect_bad(ctx, NULL, &c, LDT_ERR_INVALID_ARGUMENT, "unknown kind");
        cr_expect_eq(ldt_model_create(NULL, "gpt", &c, &m), LDT_ERR_INVALID_ARGUMENT);
        cr_expect_eq(ldt_model_create(ctx, "gpt", NULL, &m), LDT_ERR_INVALID_ARGUMENT);
        cr_expect_eq(ldt_model_create(ctx, "gpt", &c, NULL), LDT_ERR_INVALID_ARGUMENT);
        cr_expect_eq(ldt_model_param_count_of("gpt", NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    }
    /* sizes that overflow: LDT_ERR_OVERFLOW naming them, never a crash or a giant allocation */
    {
        ldt_model_config c = ldt_model_config_default("gpt");
        c.hidden = (int64_t)1 << 41, c.heads = 1;
        expect_bad(ctx, "gpt", &c, LDT_ERR_OVERFLOW, "hidden = 2199023255552");
        c.hidden = (int64_t)1 << 40; /* 12 H^2 */
        expect_bad(ctx, "gpt", &c, LDT_ERR_OVERFLOW, "parameter count overflows");
        c.hidden = (int64_t)1 << 30, c.vocab = (int64_t)1 << 35; /* V*H */
        expect_bad(ctx, "gpt", &c, LDT_ERR_OVERFLOW, "parameter count overflows");
        c = ldt_model_config_default("gpt");
        c.layers = (int64_t)1 << 30; /* 12 L + 4 tensors do not fit an int */
        expect_bad(ctx, "gpt", &c, LDT_ERR_OVERFLOW, "layers = 1073741824, expected at most");
        c = ldt_model_config_default("gpt");
        c.batch = (int64_t)1 << 20, c.seq = (int64_t)1 << 20, c.vocab = (int64_t)1 << 30;
        c.hidden = 4, c.heads = 1;
        expect_bad(ctx, "gpt", &c, LDT_ERR_OVERFLOW, "the logits");
        c = ldt_model_config_default("gpt");
        c.batch = (int64_t)1 << 10, c.seq = (int64_t)1 << 27, c.hidden = 4, c.heads = 1;
        expect_bad(ctx, "gpt", &c, LDT_ERR_OVERFLOW, "the attention weights");
        c = ldt_model_config_default("mlp");
        c.hidden = (int64_t)1 << 29; /* 2^62 parameters fit, their f32 bytes do not */
        expect_bad(ctx, "mlp", &c, LDT_ERR_OVERFLOW, "parameters of f32 overflow");
        c.hidden = (int64_t)1 << 31;
        expect_bad(ctx, "mlp", &c, LDT_ERR_OVERFLOW, "parameter count overflows");
        c = ldt_model_config_default("mlp");
        c.batch = (int64_t)1 << 40, c.hidden = (int64_t)1 << 20, c.layers = 1;
        expect_bad(ctx, "mlp", &c, LDT_ERR_OVERFLOW, "the MLP activations");
    }
    ldt_ctx_destroy(ctx);
}

/* ---- init -------------------------------------------------------------------------------- */

/* Checks init's documented rule on m (created on ctx): weights, in order, are ldt_normal(0,
 * 0.02) draws from (seed, 0) onwards, biases 0, norm weights 1, and the stream is left after
 * the last weight. */
static void check_init(ldt_ctx *ctx, ldt_model *m, uint64_t seed) {
    uint64_t off = 0;
    int64_t nw = 0;
    double ss = 0;
    set_pattern(m); /* so that init must overwrite biases and norms too */
    cr_assert_eq(ldt_model_init(m, seed), LDT_OK, "%s", ldt_last_error());
    cr_expect_eq(ldt_ctx_seed(ctx), seed);
    for (int i = 0; i < ldt_model_nparams(m); i++) {
        const char *name;
        ldt_tensor *p = ldt_model_param(m, i, &name);
        int64_t n, bad = 0;
        double *v = values_of(p, &n);
        size_t len = strlen(name);
        int is_norm = strstr(name, "ln_") != NULL && name[len - 1] == 'w';
        int is_bias = name[len - 1] == 'b' || (len > 2 && name[len - 2] == 'b');
        if (is_norm || is_bias) {
            for (int64_t k = 0; k < n; k++) bad += v[k] != (is_norm ? 1.0 : 0.0);
            cr_expect_eq(bad, 0, "%s: %lld values are not %d, e.g. %g", name, (long long)bad,
                         is_norm, v[0]);
        } else {
            ldt_shape s;
            double *want;
            uint64_t saved_seed = ldt_ctx_seed(ctx), saved_off = ldt_ctx_rng_offset(ctx);
            ldt_tensor_shape(p, &s);
            cr_assert_eq(ldt_ctx_set_seed(ctx, seed, off), LDT_OK);
            want = values_of(ldt_normal(ctx, &s, ldt_tensor_dtype(p), 0.0, 0.02), NULL);
            cr_expect_eq(count_differing(name, v, want, n, 0, 0), 0,
                         "%s is not the stream's normal at offset %llu", name,
                         (unsigned long long)off);
            cr_assert_eq(ldt_ctx_set_seed(ctx, saved_seed, saved_off), LDT_OK);
            off += (uint64_t)(n + 3) / 4;
            for (int64_t k = 0; k < n; k++) ss += v[k] * v[k];
            nw += n;
            free(want);
        }
        free(v);
    }
    cr_expect_eq(ldt_ctx_rng_offset(ctx), off, "init left the stream at %llu, want %llu",
                 (unsigned long long)ldt_ctx_rng_offset(ctx), (unsigned long long)off);
    if (nw > 1000)
        cr_expect(fabs(sqrt(ss / (double)nw) - 0.02) < 0.002,
                  "weights' rms %g over %lld, want 0.02", sqrt(ss / (double)nw), (long long)nw);
}

Test(models, init_follows_the_stream) {
    ldt_ctx *ctx = new_ctx();
    ldt_model_config c = tiny_gpt();
    ldt_model *m;
    double **a, **b;
    int np, same = 1, differ = 0;
    cr_assert_eq(ldt_model_create(ctx, "gpt", &c, &m), LDT_OK, "%s", ldt_last_error());
    check_init(ctx, m, 99);
    /* the same seed gives the same values, another seed others */
    np = ldt_model_nparams(m);
    a = params_of(m);
    cr_assert_eq(ldt_model_init(m, 99), LDT_OK);
    b = params_of(m);
    for (int i = 0; i < np; i++)
        for (int64_t k = 0; k < numel(ldt_model_param(m, i, NULL)); k++) same &= a[i][k] == b[i][k];
    free_params(b, np);
    cr_assert_eq(ldt_model_init(m, 100), LDT_OK);
    b = params_of(m);
    for (int64_t k = 0; k < 88; k++) differ += a[0][k] != b[0][k];
    cr_expect(same, "init(99) twice gave different values");
    cr_expect_gt(differ, 80, "init(100) and init(99) share %d of 88 wte values", 88 - differ);
    free_params(a, np);
    free_params(b, np);
    ldt_model_destroy(m);
    /* more than 64 weights: the tree of cats; f64, mlp and 16-bit dtypes */
    c.layers = 20, c.hidden = 4, c.heads = 1, c.vocab = 5, c.seq = 3;
    cr_assert_eq(ldt_model_create(ctx, "gpt", &c, &m), LDT_OK, "%s", ldt_last_error());
    check_init(ctx, m, 7);
    ldt_model_destroy(m);
    {
        const ldt_dtype dts[3] = {LDT_F64, LDT_BF16, LDT_F16};
        for (int d = 0; d < 3; d++) {
            c = tiny_gpt();
            c.dtype = dts[d];
            cr_assert_eq(ldt_model_create(ctx, "gpt", &c, &m), LDT_OK, "%s", ldt_last_error());
            check_init(ctx, m, 5);
            ldt_model_destroy(m);
        }
    }
    c = ldt_model_config_default("mlp");
    cr_assert_eq(ldt_model_create(ctx, "mlp", &c, &m), LDT_OK, "%s", ldt_last_error());
    check_init(ctx, m, 3);
    cr_expect_eq(ldt_model_init(NULL, 1), LDT_ERR_INVALID_ARGUMENT);
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
}

/* ---- forward passes ------------------------------------------------------------------- */

Test(models, mlp_forward_matches_reference) {
    ldt_ctx *ctx = new_ctx();
    ldt_model_config c = ldt_model_config_default("mlp");
    enum { B = 3, H = 4 };
    double xv[B * H], tv[B * H];
    c.layers = 2, c.hidden = H, c.batch = B;
    for (int i = 0; i < B * H; i++) {
        xv[i] = sin(i + 1.0);
        tv[i] = cos(i * 0.5);
    }
    /* the pattern's larger weights, then init's */
    for (int pass = 0; pass < 2; pass++) {
        ldt_model *m;
        double x[B * H], **P, loss, want, *out;
        int64_t nout;
        cr_assert_eq(ldt_model_create(ctx, "mlp", &c, &m), LDT_OK, "%s", ldt_last_error());
        if (pass == 0)
            set_pattern(m);
        else
            cr_assert_eq(ldt_model_init(m, 7), LDT_OK, "%s", ldt_last_error());
        set_values(ldt_model_input(m, 0, NULL), xv, 1);
        set_values(ldt_model_input(m, 1, NULL), tv, 1);
        loss = run_forward(m, &out, &nout);
        P = params_of(m);
        for (int i = 0; i < B * H; i++) x[i] = (float)xv[i];
        {
            double t[B * H];
            for (int i = 0; i < B * H; i++) t[i] = (float)tv[i];
            want = mlp_ref(P, &c, x, t);
        }
        cr_expect(fabs(loss - want) <= 1e-5 * fabs(want), "pass %d: mlp loss %.9g, want %.9g", pass,
                  loss, want);
        cr_log_info("pass %d: mlp loss %.9g, reference %.9g", pass, loss, want);
        cr_assert_eq(nout, B * H);
        cr_expect_eq(count_differing("mlp output", out, x, nout, 1e-5, 1), 0);
        free(out);
        free_params(P, ldt_model_nparams(m));
        ldt_model_destroy(m);
    }
    ldt_ctx_destroy(ctx);
}

/* The tiny GPT's loss and logits against the reference in dtype dt, within tol. */
static void gpt_matches(ldt_dtype dt, double tol) {
    ldt_ctx *ctx = new_ctx();
    ldt_model_config c = tiny_gpt();
    ldt_model *m;
    int64_t tok[10], tgt[10], nl;
    double loss, loss2, want, *logits, ref[10 * 11], **P;
    uint64_t h1, h2;
    c.dtype = dt;
    cr_assert_eq(ldt_model_create(ctx, "gpt", &c, &m), LDT_OK, "%s", ldt_last_error());
    set_pattern(m);
    tokens_for(&c, tok, tgt);
    bind_tokens(m, tok, tgt, 10);
    loss = run_forward(m, &logits, &nl);
    P = params_of(m);
    want = gpt_ref(P, &c, tok, tgt, NULL, 0, ref);
    cr_log_info("%s: gpt loss %.9g, reference %.9g", ldt_dtype_name(dt), loss, want);
    cr_expect(fabs(loss - want) <= tol * fabs(want), "%s: gpt loss %.9g, want %.9g (rel %.3g)",
              ldt_dtype_name(dt), loss, want, fabs(loss - want) / fabs(want));
    cr_assert_eq(nl, 10 * 11);
    cr_expect_eq(count_differing("gpt logits", logits, ref, nl, tol, 1), 0, "%s logits differ",
                 ldt_dtype_name(dt));
    /* the same forward again: the same bits and the same structural hash */
    ldt_model_forward(m);
    h1 = ldt_trace_hash(ctx);
    ldt_trace_discard(ctx);
    loss2 = scalar_of(ldt_model_forward(m));
    cr_expect_eq(loss, loss2, "%.9g then %.9g", loss, loss2);
    ldt_model_forward(m);
    h2 = ldt_trace_hash(ctx);
    ldt_trace_discard(ctx);
    cr_expect_eq(h1, h2, "the same forward traced to hashes %llx and %llx", (unsigned long long)h1,
                 (unsigned long long)h2);
    free(logits);
    free_params(P, ldt_model_nparams(m));
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
}

Test(models, gpt_forward_matches_reference) { gpt_matches(LDT_F32, 1e-5); }
Test(models, gpt_forward_matches_reference_f64) { gpt_matches(LDT_F64, 1e-10); }

/* bf16 storage with f32 accumulation: the reference in double from the rounded parameters;
 * activations are rounded on the way, hence the loose tolerance. */
Test(models, gpt_forward_bf16_close_to_reference) { gpt_matches(LDT_BF16, 1e-2); }

/* Train-mode dropout: masks are the stream's bernoulli(p) at the offsets the forward takes,
 * in recording order (per layer: attention weights, attention output, MLP output). */
Test(models, gpt_dropout_follows_the_stream) {
    ldt_ctx *ctx = new_ctx();
    ldt_model_config c = tiny_gpt();
    ldt_model *m;
    const double p = 0.3;
    int64_t tok[10], tgt[10], L = c.layers, nl, dropped = 0, total = 0;
    double a, b, e, e2, z, want, ref[110], *logits, **P;
    layer_masks masks[2];
    ldt_shape as = {4, {c.batch, c.heads, c.seq, c.seq}}, xs = {3, {c.batch, c.seq, c.hidden}};
    uint64_t off0, off1;
    c.dropout = p;
    c.train = 1;
    cr_assert_eq(ldt_model_create(ctx, "gpt", &c, &m), LDT_OK, "%s", ldt_last_error());
    set_pattern(m);
    tokens_for(&c, tok, tgt);
    bind_tokens(m, tok, tgt, 10);
    cr_assert_eq(ldt_ctx_set_seed(ctx, 5, 0), LDT_OK);
    a = run_forward(m, &logits, &nl);
    off1 = ldt_ctx_rng_offset(ctx);
    cr_assert_eq(ldt_ctx_set_seed(ctx, 5, 0), LDT_OK);
    b = scalar_of(ldt_model_forward(m));
    cr_expect_eq(a, b, "same seed, same loss: %.9g then %.9g", a, b);
    cr_assert_eq(ldt_ctx_set_seed(ctx, 6, 0), LDT_OK);
    b = scalar_of(ldt_model_forward(m));
    cr_expect_neq(a, b, "another seed gave the same loss %.9g", a);
    /* the reference with the stream's masks */
    cr_assert_eq(ldt_ctx_set_seed(ctx, 5, 0), LDT_OK);
    for (int64_t l = 0; l < L; l++) {
        masks[l].attn = values_of(ldt_bernoulli(ctx, &as, LDT_F32, p), NULL);
        masks[l].proj = values_of(ldt_bernoulli(ctx, &xs, LDT_F32, p), NULL);
        masks[l].mlp = values_of(ldt_bernoulli(ctx, &xs, LDT_F32, p), NULL);
        for (int64_t k = 0; k < 10 * 8; k++) dropped += masks[l].proj[k] != 0, total++;
    }
    cr_expect_eq(ldt_ctx_rng_offset(ctx), off1,
                 "the forward took the stream to %llu, the masks to %llu", (unsigned long long)off1,
                 (unsigned long long)ldt_ctx_rng_offset(ctx));
    cr_expect(dropped > 0 && dropped < total, "%lld of %lld dropped", (long long)dropped,
              (long long)total);
    P = params_of(m);
    want = gpt_ref(P, &c, tok, tgt, masks, p, ref);
    cr_expect(fabs(a - want) <= 1e-5 * fabs(want),
              "train loss %.9g, reference with the stream's masks %.9g", a, want);
    cr_expect_eq(count_differing("train logits", logits, ref, nl, 1e-5, 1), 0);
    /* eval: no stream taken, the loss without dropout; dropout 0 in train mode is eval */
    ldt_model_set_train(m, 0);
    off0 = ldt_ctx_rng_offset(ctx);
    e = scalar_of(ldt_model_forward(m));
    cr_expect_eq(ldt_ctx_rng_offset(ctx), off0, "eval forward took the stream");
    cr_expect_neq(a, e, "train-mode dropout changed nothing: %.9g", a);
    z = gpt_ref(P, &c, tok, tgt, NULL, 0, ref);
    cr_expect(fabs(e - z) <= 1e-5 * fabs(z), "eval loss %.9g, want %.9g", e, z);
    ldt_model_destroy(m);
    c.dropout = 0;
    cr_assert_eq(ldt_model_create(ctx, "gpt", &c, &m), LDT_OK);
    set_pattern(m);
    bind_tokens(m, tok, tgt, 10);
    e2 = scalar_of(ldt_model_forward(m));
    cr_expect_eq(e, e2, "train with dropout 0 gave %.9g, eval %.9g", e2, e);
    for (int64_t l = 0; l < L; l++) {
        free(masks[l].attn);
        free(masks[l].proj);
        free(masks[l].mlp);
    }
    free(logits);
    free_params(P, ldt_model_nparams(m));
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
}

/* A forward with a stuck error returns it at the read, not a crash. */
Test(models, forward_errors_stick) {
    ldt_ctx *ctx = new_ctx();
    ldt_model_config c = tiny_gpt();
    ldt_model *m;
    int64_t tok[10], tgt[10];
    double v;
    cr_assert_eq(ldt_model_create(ctx, "gpt", &c, &m), LDT_OK, "%s", ldt_last_error());
    tokens_for(&c, tok, tgt);
    tok[3] = 11; /* out of the vocabulary */
    bind_tokens(m, tok, tgt, 10);
    cr_expect_neq(ldt_read(ldt_model_forward(m), &v, 4), LDT_OK, "an out-of-range token ran");
    cr_log_info("out-of-range token: %s", ldt_ctx_errmsg(ctx));
    ldt_model_destroy(m);
    ldt_ctx_destroy(ctx);
}
