/* The recomputation parts ldt plan and ldt train share (docs/recompute.md): --recompute's
 * modes (one for every layer, or a list with one per layer) and their JSON, the rest of a
 * training step after the forward as a plan of the step records it, and the chooser of
 * --recompute auto under a memory budget. */
#include <stdlib.h>
#include <string.h>

#include "ldt/ldt.h"
#include "tools/ldt/cli.h"

const char *const cli_recompute_modes[3] = {"none", "selective", "full"};

/* The index in cli_recompute_modes of the n characters at s; -1 when none matches. */
static int mode_index(const char *s, size_t n) {
    for (int i = 0; i < 3; i++)
        if (strlen(cli_recompute_modes[i]) == n && strncmp(s, cli_recompute_modes[i], n) == 0) return i;
    return -1;
}

/* A --recompute list ("full,selective,none": exactly `layers` modes) into modes (indices of
 * cli_recompute_modes). Returns 0, or 2 after printing "ldt CMD: --recompute TEXT ..." (the
 * wrong count, the unknown mode). */
static int parse_list(const char *cmd, const char *text, int64_t layers, unsigned char *modes) {
    const char *s = text;
    int64_t n = 1;
    for (const char *c = text; *c; c++) n += *c == ',';
    if (n != layers) {
        fprintf(stderr, "ldt %s: --recompute %s gives %lld modes for --layers %lld: expected one mode (every layer) or "
                        "exactly one per layer, comma-separated\n", cmd, text, (long long)n, (long long)layers);
        return 2;
    }
    for (int64_t l = 0; l < layers; l++) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        int u = mode_index(s, len);
        if (u < 0) {
            fprintf(stderr, "ldt %s: --recompute %s: layer %lld's mode '%.*s', expected none, selective or full\n", cmd,
                    text, (long long)l, (int)len, s);
            return 2;
        }
        modes[l] = (unsigned char)u;
        s = e ? e + 1 : s + len;
    }
    return 0;
}

int cli_recompute_set(const char *cmd, ldt_model *m, const char *text) {
    int64_t layers = 0;
    unsigned char *modes;
    int rc;
    while (ldt_model_recompute(m, layers)) layers++;
    if (layers == 0 || !strchr(text, ',')) { /* one mode: the model's own refusals (an mlp, an unknown mode) */
        if (ldt_model_set_recompute(m, -1, text) == LDT_OK) return 0;
        fprintf(stderr, "ldt %s: --recompute %s, expected none, selective or full (%s)\n", cmd, text, ldt_last_error());
        ldt_clear_error();
        return 2;
    }
    if (!(modes = malloc((size_t)layers))) {
        fprintf(stderr, "ldt %s: out of memory\n", cmd);
        return 2;
    }
    rc = parse_list(cmd, text, layers, modes);
    for (int64_t l = 0; l < layers && rc == 0; l++)
        if (ldt_model_set_recompute(m, l, cli_recompute_modes[modes[l]]) != LDT_OK) {
            cli_fail(cmd);
            rc = 2;
        }
    free(modes);
    return rc;
}

void cli_recompute_json(FILE *f, const ldt_model *m) {
    int64_t count[3] = {0, 0, 0}, l;
    if (!ldt_model_recompute(m, 0)) return;
    fprintf(f, "\"recompute\":[");
    for (l = 0; ldt_model_recompute(m, l); l++) {
        const char *r = ldt_model_recompute(m, l);
        for (int i = 0; i < 3; i++) count[i] += strcmp(r, cli_recompute_modes[i]) == 0;
        fprintf(f, "%s\"%s\"", l ? "," : "", r);
    }
    fprintf(f, "],\"recompute_mix\":{\"none\":%lld,\"selective\":%lld,\"full\":%lld}", (long long)count[0],
            (long long)count[1], (long long)count[2]);
}

ldt_status cli_train_step(ldt_model *m, ldt_tensor *loss, const cli_step_optim *so, ldt_optim **out) {
    int np = ldt_model_nparams(m), dp = -1;
    ldt_tensor **ps = malloc((size_t)np * sizeof *ps), **gs = malloc((size_t)np * sizeof *gs);
    const ldt_mesh *mesh = ldt_ctx_mesh(ldt_tensor_ctx(loss));
    ldt_optim_config oc = {0};
    ldt_optim *o = NULL;
    ldt_status st;
    if (out) *out = NULL;
    if (!ps || !gs) {
        free(ps);
        free(gs);
        return ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "training step: out of memory");
    }
    for (int i = 0; i < np; i++) ps[i] = ldt_model_param(m, i, NULL);
    if (so) {
        oc = so->oc;
    } else { /* ldt plan --train's update */
        oc.kind = LDT_OPTIM_ADAMW;
        oc.lr = 3e-3, oc.beta1 = 0.9, oc.beta2 = 0.95, oc.eps = 1e-8, oc.weight_decay = 0.01;
        oc.clip_norm = 1.0, oc.total_steps = 1;
    }
    st = ldt_grad(loss, ps, np, gs);
    if (st == LDT_OK) st = ldt_optim_create(ldt_tensor_ctx(loss), &oc, ps, np, &o);
    if (st == LDT_OK && so && (so->zero || so->sync_dp)) {
        if (ldt_mesh_dim_index(mesh, "dp", &dp) != LDT_OK) {
            ldt_clear_error();
            dp = -1;
        }
        if (dp >= 0 && so->zero) st = ldt_optim_shard_states(o, dp);
        if (dp >= 0 && so->sync_dp && st == LDT_OK) st = ldt_optim_sync_grads(o, dp);
    }
    if (st == LDT_OK) st = ldt_optim_step(o, gs);
    if (st == LDT_OK && out) *out = o;
    else ldt_optim_destroy(o);
    free(ps);
    free(gs);
    return st;
}

/* The training step of job's model planned with per-layer modes `modes` (indices of
 * cli_recompute_modes; the weights unweighted): its peak memory per rank and modeled step. */
static ldt_status plan_mix(const cli_rc_job *job, const unsigned char *modes, int64_t *peak, double *seconds) {
    ldt_ctx_options co = {0};
    ldt_ctx *ctx = NULL;
    ldt_model *model = NULL;
    ldt_plan *plan = NULL;
    ldt_optim *o = NULL;
    ldt_tensor *loss;
    ldt_plan_step ps;
    cli_memory mpr;
    ldt_status st;
    co.mesh = job->mesh;
    if ((st = ldt_ctx_create(&co, &ctx)) != LDT_OK ||
        (st = ldt_model_create(ctx, job->kind, job->cfg, &model)) != LDT_OK ||
        (st = ldt_model_pin(model, job->pins)) != LDT_OK)
        goto done;
    for (int64_t l = 0; l < job->cfg->layers && st == LDT_OK; l++)
        st = ldt_model_set_recompute(model, l, cli_recompute_modes[modes[l]]);
    if (st != LDT_OK) goto done;
    if (!(loss = ldt_model_forward(model))) {
        st = ldt_set_error(ldt_ctx_status(ctx), "%s", ldt_ctx_errmsg(ctx));
        goto done;
    }
    if ((st = cli_train_step(model, loss, job->so, &o)) != LDT_OK ||
        (st = ldt_plan_create(ctx, job->po, &plan)) != LDT_OK ||
        (st = ldt_plan_step_get(plan, loss, &ps)) != LDT_OK ||
        (st = cli_memory_per_rank_optim(plan, model, job->so ? o : NULL, job->mesh, &mpr)) != LDT_OK)
        goto done;
    *peak = mpr.peak;
    *seconds = ps.modeled_step_seconds;
done:
    ldt_plan_destroy(plan);
    ldt_optim_destroy(o);
    ldt_model_destroy(model);
    ldt_ctx_destroy(ctx);
    return st;
}

/* The mix for --recompute auto under `budget` into modes (the first layers full, the next
 * selective, the rest none): the three uniform mixes planned, each layer's saving and cost
 * taken as 1/L of their differences (linear in the counts: layers are alike), every
 * (full, selective) count ordered by that estimate of the modeled step (then fewer layers
 * recomputed, then fewer full), and the mixes planned in that order until one's measured
 * peak fits, at most AUTO_PLANS plans in all (a uniform mix is not planned twice); none
 * fitting: every layer full (the least peak of the three, the budget search splits weights).
 * A count of plans, never a time: every run chooses alike. */
#define AUTO_PLANS 8
typedef struct mix {
    int64_t full, sel;
    double est;
} mix;

static int by_est(const void *a, const void *b) {
    const mix *x = a, *y = b;
    if (x->est != y->est) return x->est < y->est ? -1 : 1;
    if (x->full + x->sel != y->full + y->sel) return x->full + x->sel < y->full + y->sel ? -1 : 1;
    return x->full < y->full ? -1 : x->full > y->full;
}

ldt_status cli_recompute_choose(const cli_rc_job *job, int64_t budget, unsigned char *modes, cli_rc_choice *out) {
    int64_t L = job->cfg->layers, peak[3], n = 0;
    double sec[3];
    mix *c = NULL;
    ldt_status st = LDT_OK;
    memset(out, 0, sizeof *out);
    if (L < 1 || L > 100000)
        return ldt_set_error(LDT_ERR_INVALID_ARGUMENT, "%s --recompute auto: %lld layers, expected 1 to 100000",
                             job->cmd, (long long)L);
    for (int u = 0; u < 3; u++) { /* every layer none, selective, full */
        memset(modes, u, (size_t)L);
        if ((st = plan_mix(job, modes, &peak[u], &sec[u])) != LDT_OK) return st;
        out->plans++;
        out->uniform_peak[u] = peak[u];
    }
    if (!(c = malloc((size_t)((L + 1) * (L + 2) / 2) * sizeof *c)))
        return ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "%s --recompute auto: out of memory", job->cmd);
    for (int64_t f = 0; f <= L; f++)
        for (int64_t s = 0; f + s <= L; s++) {
            double ep = (double)peak[0] + (double)s * (double)(peak[1] - peak[0]) / (double)L +
                        (double)f * (double)(peak[2] - peak[0]) / (double)L;
            if (ep > (double)budget) continue;
            c[n].full = f, c[n].sel = s;
            c[n++].est = sec[0] + (double)s * (sec[1] - sec[0]) / (double)L + (double)f * (sec[2] - sec[0]) / (double)L;
        }
    qsort(c, (size_t)n, sizeof *c, by_est);
    memset(modes, 2, (size_t)L); /* none fits: every layer full */
    out->peak = peak[2], out->seconds = sec[2];
    for (int64_t i = 0; i < n; i++) {
        int64_t p = 0;
        double t = 0;
        int u = c[i].full == L ? 2 : c[i].sel == L ? 1 : c[i].full + c[i].sel == 0 ? 0 : -1;
        if (u >= 0) { /* a uniform mix: measured already */
            if (peak[u] <= budget) {
                memset(modes, u, (size_t)L);
                out->peak = peak[u], out->seconds = sec[u];
                break;
            }
            continue;
        }
        if (out->plans >= AUTO_PLANS) break;
        for (int64_t l = 0; l < L; l++) modes[l] = l < c[i].full ? 2 : l < c[i].full + c[i].sel ? 1 : 0;
        if ((st = plan_mix(job, modes, &p, &t)) != LDT_OK) break;
        out->plans++;
        if (p <= budget) {
            out->peak = p, out->seconds = t;
            break;
        }
        memset(modes, 2, (size_t)L);
    }
    out->fits = out->peak <= budget;
    free(c);
    return st;
}
