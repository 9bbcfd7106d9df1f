/* ldt plan: trace a model's forward pass, plan it for a mesh and report the strategies, the
 * redistributions, the totals, and on request the DOT graph and each rank's program. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ldt/ldt.h"
#include "tools/ldt/cli.h"

#define NFLAGS 24

static cli_flag *flag_table(void) {
    static cli_flag flags[NFLAGS] = {
        {"model", 1, "mlp or gpt (required)", NULL},
        {"mesh", 1, "device mesh: 4, 2x2, dp=2,tp=2, [[0,2],[1,3]] (default 4)", NULL},
        CLI_MODEL_SIZE_FLAGS,
        CLI_PINS_FLAG,
        {"strict", 0, "refuse any redistribution not asked for explicitly", NULL},
        {"greedy", 0, "op-by-op choice (each op follows its inputs) instead of the whole graph", NULL},
        {"plan-limit", 1, "work limit of the exact search, table entries (default 5000000; "
                          "past it the heuristic plans)", NULL},
        CLI_PROFILE_FLAG,
        {"json", 0, "one JSON object: nodes, totals, config, memory_per_rank (docs/cli.md)", NULL},
        {"dot", 1, "write the planned graph as Graphviz DOT to FILE (title, legend, local shapes)", NULL},
        {"program", 0, "print each rank's program (or --rank R's)", NULL},
        {"train", 0, "plan the whole training step: forward, backward and an AdamW update", NULL},
        {"rank", 1, "with --program: only this rank", NULL},
        {"meta", 0, "plan on a meta mesh (no data; what huge models use)", NULL},
        {"dtype", 1, "f32 or bf16: bf16 parameters, activations and gradients with f32 master weights "
                     "and Adam states (default f32); f64 as ldt train --dtype f64", NULL},
        {"memory-budget", 1, "bytes per rank: the search keeps each rank's peak memory within it (a plan "
                             "that cannot is refused)", NULL},
        {"sp", 0, "with --pins megatron: sequence parallel (pins megatron-sp: the gpt's norms, dropouts "
                  "and residual stream split on the sequence over tp)", NULL},
        {"recompute", 1, "gpt: none, selective (the default) or full, every layer, or one per layer "
                         "(full,selective,none,...; docs/recompute.md); auto "
                         "with --train --memory-budget: the mix of layers that fits with the least modeled step", NULL},
        {"help", 0, "this help", NULL},
    };
    return flags;
}


/* The plan's JSON (ldt_plan_write_json) as text; NULL with the error set. Free it. */
static char *plan_json_text(ldt_plan *plan) {
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    ldt_status st;
    if (!m) {
        ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
        return NULL;
    }
    st = ldt_plan_write_json(plan, m);
    if (fclose(m) != 0 && st == LDT_OK) st = ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
    if (st != LDT_OK) {
        free(buf);
        return NULL;
    }
    return buf;
}

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static double jnum(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* "[4,64]" from a JSON array of integers. */
static void fmt_ints(const cJSON *a, char *buf, size_t cap) {
    const cJSON *e;
    size_t at = (size_t)snprintf(buf, cap, "[");
    cJSON_ArrayForEach(e, a) {
        if (at >= cap) break;
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", e == a->child ? "" : ",", (long long)e->valuedouble);
    }
    if (at < cap) snprintf(buf + at, cap - at, "]");
}

/* A node's strategy: its inputs' placement lists, then its output's: "R S0 S0 -> S1". */
static void fmt_strategy(const cJSON *n, char *buf, size_t cap) {
    const cJSON *e;
    size_t at = 0;
    buf[0] = '\0';
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(n, "in")) {
        if (at >= cap) break;
        at += (size_t)snprintf(buf + at, cap - at, "%s ", e->valuestring);
    }
    if (at < cap) snprintf(buf + at, cap - at, "-> %s", cJSON_GetArrayItem(cJSON_GetObjectItem(n, "out"), 0)->valuestring);
}

#define ROW 512
typedef struct row {
    char c[8][ROW];
} row;

/* Prints rows in columns as wide as their widest cell; right-aligned where right[i]. */
/* A table's header row. */
static void set_header(row *r, const char *const *names, int n) {
    for (int i = 0; i < n; i++) snprintf(r->c[i], ROW, "%s", names[i]);
}

static void print_rows(const row *rows, int n, int ncol, const int *right) {
    int w[8] = {0};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < ncol; k++)
            if ((int)strlen(rows[i].c[k]) > w[k]) w[k] = (int)strlen(rows[i].c[k]);
    for (int i = 0; i < n; i++) {
        char line[8 * ROW + 16];
        size_t at = 0;
        for (int k = 0; k < ncol; k++)
            at += (size_t)snprintf(line + at, sizeof line - at, k ? "  %*s" : "%*s", right[k] ? w[k] : -w[k],
                                   rows[i].c[k]);
        while (at > 0 && line[at - 1] == ' ') line[--at] = '\0';
        printf("%s\n", line);
    }
}

/* Every op with its strategy, every redistribution and collective, then the totals: the
 * same figures as --json. */
static int print_table(const char *json, const ldt_mesh *mesh, const char *kind) {
    cJSON *j = cJSON_Parse(json), *nodes, *tot, *n;
    row *rows = NULL;
    int nr = 0, cap, rc = 1;
    static const int right_ops[5] = {0, 0, 0, 0, 0}, right_moves[8] = {0, 1, 0, 0, 0, 1, 1, 1};
    if (!j) {
        fprintf(stderr, "ldt plan: the plan's JSON does not parse\n");
        return 1;
    }
    nodes = cJSON_GetObjectItem(j, "nodes");
    tot = cJSON_GetObjectItem(j, "totals");
    cap = 2 * cJSON_GetArraySize(nodes) + 2;
    for (n = nodes ? nodes->child : NULL; n; n = n->next)
        cap += cJSON_GetArraySize(cJSON_GetObjectItem(n, "redistributions")) +
               cJSON_GetArraySize(cJSON_GetObjectItem(n, "collectives"));
    if (!(rows = calloc((size_t)cap, sizeof *rows))) {
        fprintf(stderr, "ldt plan: out of memory\n");
        goto done;
    }
    printf("plan of %s on mesh %s: %d ops\n\n", kind, jstr(j, "mesh"), cJSON_GetArraySize(nodes));
    set_header(&rows[0], (const char *[]){"node", "op", "name", "shape", "strategy (inputs -> output)"}, 5);
    nr = 1;
    cJSON_ArrayForEach(n, nodes) {
        row *r = &rows[nr++];
        snprintf(r->c[0], ROW, "%%%lld", (long long)jnum(n, "id"));
        snprintf(r->c[1], ROW, "%s", jstr(n, "op"));
        snprintf(r->c[2], ROW, "%s", jstr(n, "name"));
        fmt_ints(cJSON_GetObjectItem(n, "shape"), r->c[3], ROW);
        fmt_strategy(n, r->c[4], ROW);
    }
    print_rows(rows, nr, 5, right_ops);
    /* the moves: redistributions of inputs, then each node's own collectives */
    memset(rows, 0, sizeof *rows);
    set_header(&rows[0], (const char *[]){"node", "input", "collective", "mesh_dims", "from -> to",
                                          "bytes_per_rank", "tensor_bytes", "modeled_us"}, 8);
    nr = 1;
    cJSON_ArrayForEach(n, nodes) {
        const cJSON *m;
        cJSON_ArrayForEach(m, cJSON_GetObjectItem(n, "redistributions")) {
            row *r = &rows[nr++];
            snprintf(r->c[0], ROW, "%%%lld", (long long)jnum(n, "id"));
            snprintf(r->c[1], ROW, "%lld", (long long)jnum(m, "input"));
            snprintf(r->c[2], ROW, "%s", jstr(m, "collective"));
            fmt_ints(cJSON_GetObjectItem(m, "mesh_dims"), r->c[3], ROW);
            snprintf(r->c[4], ROW, "%s -> %s", jstr(m, "from"), jstr(m, "to"));
            snprintf(r->c[5], ROW, "%lld", (long long)jnum(m, "bytes_per_rank"));
            snprintf(r->c[6], ROW, "%lld", (long long)jnum(m, "tensor_bytes"));
            snprintf(r->c[7], ROW, "%.3f", jnum(m, "modeled_seconds") * 1e6);
        }
        cJSON_ArrayForEach(m, cJSON_GetObjectItem(n, "collectives")) {
            row *r = &rows[nr++];
            const cJSON *d;
            int64_t g = 1, b = (int64_t)jnum(m, "bytes");
            cJSON_ArrayForEach(d, cJSON_GetObjectItem(m, "mesh_dims")) g *= ldt_mesh_dim_size(mesh, d->valueint);
            snprintf(r->c[0], ROW, "%%%lld", (long long)jnum(n, "id"));
            snprintf(r->c[1], ROW, "own");
            snprintf(r->c[2], ROW, "%s", jstr(m, "collective"));
            fmt_ints(cJSON_GetObjectItem(m, "mesh_dims"), r->c[3], ROW);
            snprintf(r->c[4], ROW, "reduce %s", jstr(m, "op"));
            /* a ring all_reduce of b bytes sends and receives 2 (g-1)/g b */
            snprintf(r->c[5], ROW, "%lld", (long long)(g > 1 ? 2 * (g - 1) * b / g : 0));
            snprintf(r->c[6], ROW, "-");
            snprintf(r->c[7], ROW, "-");
        }
    }
    printf("\n");
    if (nr > 1) print_rows(rows, nr, 8, right_moves);
    else printf("no redistributions: every op runs on its inputs as they are\n");
    printf("\ntotals: %lld collectives per rank, %lld redistributions, %lld comm bytes per rank, "
           "modeled comm %.3f us\n",
           (long long)jnum(tot, "collectives"), (long long)jnum(tot, "redistributions"),
           (long long)jnum(tot, "comm_bytes_per_rank"), jnum(tot, "modeled_comm_seconds") * 1e6);
    printf("planned in %.3f ms\n", jnum(tot, "plan_seconds") * 1e3);
    rc = 0;
done:
    free(rows);
    cJSON_Delete(j);
    return rc;
}

/* "comm_bytes_per_rank_by_dim":{"<dim>":{"<collective>":bytes}}: every mesh dim (its name,
 * or its index unnamed) with its traffic by collective, then each set of several dims a
 * collective spans ("dp+tp"), where there is traffic. */
static void comm_by_dim_json(const ldt_plan_step *ps, const ldt_mesh *mesh) {
    int nd = ldt_mesh_ndim(mesh), first = 1;
    printf("\"comm_bytes_per_rank_by_dim\":{");
    for (int pass = 0; pass < 2; pass++)
        for (unsigned set = 1; set < (1u << nd); set++) {
            int multi = (set & (set - 1)) != 0, any = 0, sep = 0;
            if (multi != pass) continue;
            for (int c = 0; c < LDT_COLL_COUNT; c++) any |= ps->comm_bytes[set][c] != 0;
            if (multi && !any) continue;
            printf("%s\"", first ? "" : ",");
            first = 0;
            for (int d = 0; d < nd; d++) {
                const char *nm = ldt_mesh_dim_name(mesh, d);
                if (!(set & (1u << d))) continue;
                if (sep++) putchar('+');
                if (nm) printf("%s", nm);
                else printf("%d", d);
            }
            printf("\":{");
            for (int c = 0, k = 0; c < LDT_COLL_COUNT; c++)
                if (ps->comm_bytes[set][c])
                    printf("%s\"%s\":%lld", k++ ? "," : "", ldt_collective_name((ldt_collective)c),
                           (long long)ps->comm_bytes[set][c]);
            putchar('}');
        }
    putchar('}');
}

/* What the budget bound: "none" when the plan without it fits, else the part of the memory
 * per rank it cut the most from that plan's (free) to the chosen one's (m). */
static const char *memory_binding(const cli_memory *free_, const cli_memory *m, int bound) {
    const char *nm[4] = {"params", "grads", "optimizer", "activations_peak"};
    int64_t cut[4] = {free_->params - m->params, free_->grads - m->grads, free_->optimizer - m->optimizer,
                      free_->activations_peak - m->activations_peak};
    int best = 0;
    if (!bound) return "none";
    for (int i = 1; i < 4; i++)
        if (cut[i] > cut[best]) best = i;
    return nm[best];
}

/* The budget search's figure (ldt_plan_create_budget): the memory per rank's peak; the first
 * plan's parts kept (the plan without a memory weight). */
typedef struct budget_ctx {
    ldt_model *model;
    const ldt_mesh *mesh;
    int n;
    cli_memory free_;
} budget_ctx;

static ldt_status budget_peak(ldt_plan *plan, void *user, int64_t *peak) {
    budget_ctx *b = user;
    cli_memory m;
    ldt_status st = cli_memory_per_rank(plan, b->model, b->mesh, &m);
    if (st != LDT_OK) return st;
    if (b->n++ == 0) b->free_ = m;
    *peak = m.peak;
    return LDT_OK;
}

int cmd_plan(int argc, char **argv) {
    cli_flag *f = flag_table();
    ldt_mesh *mesh = NULL;
    ldt_ctx *ctx = NULL;
    ldt_model *model = NULL;
    ldt_plan *plan = NULL;
    ldt_cost_model cm;
    ldt_plan_options po = {0};
    ldt_ctx_options co = {0};
    ldt_model_config cfg;
    cli_memory mpr;
    ldt_plan_step *ps = NULL;
    ldt_tensor *loss = NULL;
    ldt_plan_budget_info binfo;
    budget_ctx bctx;
    int64_t budget = 0;
    const char *rc_mode = NULL;
    unsigned char *modes = NULL;
    cli_rc_choice choice = {0};
    char *json = NULL;
    const char *kind, *pins;
    int rc = 1;
    if (cli_parse("plan", argc, argv, f, NFLAGS)) return 2;
    if (cli_has(f, NFLAGS, "help")) {
        printf("usage: ldt plan --model mlp|gpt [--layers N --hidden H --heads A --vocab V --seq S\n"
               "                --batch B] [--mesh M] [--pins megatron|none] [--strict] [--greedy]\n"
               "                [--plan-limit N] [--profile P] [--json] [--dot FILE] [--program [--rank R]]\n"
               "                [--train] [--meta] [--dtype f32|bf16|f64] [--memory-budget BYTES] [--sp]\n"
               "                [--recompute none|selective|full|MODE,MODE,...|auto]\n\n"
               "Traces the model's forward pass, chooses one sharding strategy per op for the\n"
               "whole graph under the cost model (pins honoured), and prints every op with its\n"
               "strategy, every redistribution (collective, mesh dims, bytes) and the totals, in\n"
               "columns (per-rank figures are the maximum over ranks).\n\nflags:\n");
        cli_print_flags(stdout, f, NFLAGS);
        return 0;
    }
    kind = cli_get(f, NFLAGS, "model");
    if (!kind) {
        fprintf(stderr, "ldt plan: --model is required (mlp or gpt; see ldt plan --help)\n");
        return 2;
    }
    cfg = ldt_model_config_default(kind);
    if (cli_model_sizes("plan", f, NFLAGS, &cfg)) return 2;
    if (cli_has(f, NFLAGS, "dtype") &&
        (ldt_dtype_parse(cli_get(f, NFLAGS, "dtype"), &cfg.dtype) != LDT_OK ||
         (cfg.dtype != LDT_F32 && cfg.dtype != LDT_BF16 && cfg.dtype != LDT_F64))) {
        ldt_clear_error();
        fprintf(stderr, "ldt plan: --dtype %s, expected f32 or bf16, or f64 (as ldt train --dtype f64)\n",
                cli_get(f, NFLAGS, "dtype"));
        return 2;
    }
    if (cli_int("plan", f, NFLAGS, "memory-budget", 0, 1, &budget)) return 2;
    pins = cli_has(f, NFLAGS, "pins") ? cli_get(f, NFLAGS, "pins") : CLI_DEFAULT_PINS;
    if (cli_has(f, NFLAGS, "sp")) {
        if (strcmp(pins, "megatron") != 0) {
            fprintf(stderr, "ldt plan: --sp with --pins %s; sequence parallelism is pinned with --pins megatron\n",
                    pins);
            return 2;
        }
        pins = "megatron-sp";
    }
    po.strict = cli_has(f, NFLAGS, "strict");
    po.search = cli_has(f, NFLAGS, "greedy") ? LDT_PLAN_GREEDY : LDT_PLAN_GLOBAL;
    if (cli_has(f, NFLAGS, "plan-limit")) {
        const char *lim = cli_get(f, NFLAGS, "plan-limit");
        char *end = NULL;
        long long v = strtoll(lim, &end, 10);
        if (!*lim || *end || v < 1) {
            fprintf(stderr, "ldt plan: --plan-limit '%s': expected a positive count of table entries\n", lim);
            return 2;
        }
        po.plan_limit = (int64_t)v;
    }
    if (ldt_mesh_parse(cli_has(f, NFLAGS, "mesh") ? cli_get(f, NFLAGS, "mesh") : "4",
                       cli_has(f, NFLAGS, "meta") ? LDT_DEVICE_META : LDT_DEVICE_CPU, &mesh) != LDT_OK)
        return cli_fail("plan");
    if (cli_profile(f, NFLAGS, mesh, &cm) != LDT_OK) goto fail;
    po.cost = &cm;
    co.mesh = mesh;
    rc_mode = cli_get(f, NFLAGS, "recompute");
    if (rc_mode && strcmp(kind, "gpt") != 0) {
        fprintf(stderr, "ldt plan: --recompute with --model %s; only the gpt recomputes\n", kind);
        rc = 2;
        goto done;
    }
    if (rc_mode && strcmp(rc_mode, "auto") == 0) {
        if (!cli_has(f, NFLAGS, "train") || budget <= 0) {
            fprintf(stderr, "ldt plan: --recompute auto needs --train and --memory-budget BYTES (the mix that "
                            "fits the budget)\n");
            rc = 2;
            goto done;
        }
        if (!(modes = malloc((size_t)cfg.layers))) {
            ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
            goto fail;
        }
        {
            cli_rc_job job = {"plan", kind, &cfg, pins, mesh, &po, NULL};
            if (cli_recompute_choose(&job, budget, modes, &choice) != LDT_OK) goto fail;
        }
    }
    if (ldt_ctx_create(&co, &ctx) != LDT_OK || ldt_model_create(ctx, kind, &cfg, &model) != LDT_OK ||
        ldt_model_pin(model, pins) != LDT_OK)
        goto fail;
    if (modes) {
        for (int64_t l = 0; l < cfg.layers; l++)
            if (ldt_model_set_recompute(model, l, cli_recompute_modes[modes[l]]) != LDT_OK) goto fail;
    } else if (rc_mode && cli_recompute_set("plan", model, rc_mode)) {
        rc = 2;
        goto done;
    }
    if (!(loss = ldt_model_forward(model))) {
        ldt_set_error(ldt_ctx_status(ctx), "%s", ldt_ctx_errmsg(ctx));
        goto fail;
    }
    if (cli_has(f, NFLAGS, "train") && cli_train_step(model, loss, NULL, NULL) != LDT_OK) goto fail;
    memset(&binfo, 0, sizeof binfo);
    memset(&bctx, 0, sizeof bctx);
    if (budget > 0) { /* the budget constrains the search (docs/planner.md, "Memory budget") */
        ldt_plan_budget b = {budget, budget_peak, &bctx, 0};
        bctx.model = model, bctx.mesh = mesh;
        if (ldt_plan_create_budget(ctx, &po, &b, &plan, &binfo) != LDT_OK) goto fail;
    } else if (ldt_plan_create(ctx, &po, &plan) != LDT_OK) {
        goto fail;
    }
    if (cli_has(f, NFLAGS, "json") || budget > 0) {
        /* memory per rank (the saved activations of a training step), the step's figures, and
         * the budget's verdict before anything is printed */
        if (!(ps = malloc(sizeof *ps))) {
            ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "plan: out of memory");
            goto fail;
        }
        if (ldt_plan_step_get(plan, cli_has(f, NFLAGS, "train") ? loss : NULL, ps) != LDT_OK ||
            cli_memory_per_rank(plan, model, mesh, &mpr) != LDT_OK)
            goto fail;
        if (cli_has(f, NFLAGS, "train")) mpr.activations_saved = ps->saved_bytes;
        if (budget > 0 && (!binfo.fits || mpr.peak > budget)) {
            const char *nm[4] = {"optimizer", "params", "grads", "activations_peak"};
            int64_t v[4] = {mpr.optimizer, mpr.params, mpr.grads, mpr.activations_peak};
            for (int i = 1; i < 4; i++) /* largest first */
                for (int k = i; k > 0 && v[k] > v[k - 1]; k--) {
                    int64_t t = v[k];
                    const char *tn = nm[k];
                    v[k] = v[k - 1], nm[k] = nm[k - 1];
                    v[k - 1] = t, nm[k - 1] = tn;
                }
            fprintf(stderr, "ldt plan: no plan fits --memory-budget %lld bytes (%.2f GiB) per rank: the least "
                            "peak of the %d plans searched (memory weight %.3g s/byte) is %lld bytes "
                            "(%.2f GiB); its parts, largest first: %s %lld, %s %lld, %s %lld, %s %lld (dtype %s)\n",
                    (long long)budget, budget / 1073741824.0, binfo.plans, binfo.memory_weight,
                    (long long)mpr.peak, mpr.peak / 1073741824.0,
                    nm[0], (long long)v[0], nm[1], (long long)v[1], nm[2], (long long)v[2], nm[3], (long long)v[3],
                    ldt_dtype_name(cfg.dtype));
            if (modes)
                fprintf(stderr, "ldt plan: --recompute auto: no mix of the %d planned fits; every layer full has "
                                "the least peak (the one above)\n", choice.plans);
            rc = 1;
            goto done;
        }
    }
    if (cli_has(f, NFLAGS, "dot")) {
        FILE *d = fopen(cli_get(f, NFLAGS, "dot"), "w");
        ldt_status st;
        if (!d) {
            ldt_set_error(LDT_ERR_SYSTEM, "cannot write '%s'", cli_get(f, NFLAGS, "dot"));
            goto fail;
        }
        char title[512], mtext[256];
        ldt_mesh_format(mesh, mtext, sizeof mtext);
        if (strcmp(kind, "gpt") == 0)
            snprintf(title, sizeof title, "%s%s (layers %lld, hidden %lld, heads %lld, vocab %lld, seq %lld, batch %lld) "
                     "on mesh %s, pins %s", kind, cli_has(f, NFLAGS, "train") ? " training step" : "",
                     (long long)cfg.layers, (long long)cfg.hidden, (long long)cfg.heads, (long long)cfg.vocab,
                     (long long)cfg.seq, (long long)cfg.batch, mtext, pins);
        else
            snprintf(title, sizeof title, "%s%s (layers %lld, hidden %lld, batch %lld) on mesh %s, pins %s", kind,
                     cli_has(f, NFLAGS, "train") ? " training step" : "", (long long)cfg.layers,
                     (long long)cfg.hidden, (long long)cfg.batch, mtext, pins);
        st = ldt_plan_write_dot_titled(plan, title, d);
        if (fclose(d) != 0 || st != LDT_OK) goto fail;
    }
    if (!(json = plan_json_text(plan))) goto fail;
    if (cli_has(f, NFLAGS, "json")) {
        /* the plan's object, with the memory per rank added before its closing brace */
        size_t n = strlen(json);
        while (n > 0 && json[n - 1] != '}') n--;
        if (n == 0) goto fail;
        printf("%.*s,", (int)(n - 1), json);
        cli_config_json(stdout, kind, &cfg, pins, mesh);
        putchar(',');
        cli_profile_json(stdout, &cm);
        putchar(',');
        cli_memory_json(stdout, &mpr);
        if (strcmp(kind, "gpt") == 0) {
            putchar(',');
            cli_recompute_json(stdout, model);
            if (modes) printf(",\"recompute_plans\":%d", choice.plans);
        }
        if (budget > 0)
            printf(",\"memory_budget\":%lld,\"memory_binding\":\"%s\",\"memory_lambda\":%.9g,"
                   "\"memory_iterations\":%d,\"memory_peak_unconstrained\":%lld",
                   (long long)budget, memory_binding(&bctx.free_, &mpr, binfo.memory_weight > 0),
                   binfo.memory_weight, binfo.plans, (long long)binfo.peak_free);
        printf(",\"modeled_step_seconds\":%.9g,", ps->modeled_step_seconds);
        comm_by_dim_json(ps, mesh);
        printf(",\"plan_seconds\":%.9g}\n", budget > 0 ? binfo.seconds : ldt_plan_seconds(plan));
    } else if (print_table(json, mesh, kind) != 0) {
        rc = 1;
        goto done;
    } else if (budget > 0) {
        printf("memory per rank: peak %lld bytes within --memory-budget %lld (binding: %s; %d plans, "
               "memory weight %.3g s/byte; without the budget the peak is %lld)\n",
               (long long)mpr.peak, (long long)budget, memory_binding(&bctx.free_, &mpr, binfo.memory_weight > 0),
               binfo.plans, binfo.memory_weight, (long long)binfo.peak_free);
        if (modes) {
            int64_t cnt[3] = {0, 0, 0};
            for (int64_t l = 0; l < cfg.layers; l++) cnt[modes[l]]++;
            printf("recompute (auto, %d mixes planned): %lld layers full, %lld selective, %lld none; modeled step "
                   "%.6g s\n", choice.plans, (long long)cnt[2], (long long)cnt[1], (long long)cnt[0],
                   ps->modeled_step_seconds);
        }
    }
    if (cli_has(f, NFLAGS, "program")) {
        int64_t only = -1;
        if (cli_has(f, NFLAGS, "rank")) {
            if (cli_int("plan", f, NFLAGS, "rank", 0, 0, &only)) {
                rc = 2;
                goto done;
            }
            if (only >= ldt_mesh_nranks(mesh)) {
                char mt[256];
                ldt_mesh_format(mesh, mt, sizeof mt);
                fprintf(stderr, "ldt plan: --rank %s is not on mesh %s, expected 0 to %d\n",
                        cli_get(f, NFLAGS, "rank"), mt, ldt_mesh_nranks(mesh) - 1);
                rc = 2;
                goto done;
            }
            if (ldt_plan_write_program(plan, ldt_mesh_rank_at(mesh, (int)only), stdout) != LDT_OK) goto fail;
        } else {
            for (int i = 0; i < ldt_mesh_nranks(mesh); i++)
                if (ldt_plan_write_program(plan, ldt_mesh_rank_at(mesh, i), stdout) != LDT_OK) goto fail;
        }
    }
    rc = 0;
    goto done;
fail:
    rc = cli_fail("plan");
done:
    free(ps);
    free(json);
    free(modes);
    ldt_plan_destroy(plan);
    ldt_model_destroy(model);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    return rc;
}
