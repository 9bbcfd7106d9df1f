/* ldt plan: trace a model's forward pass, plan it for a mesh and report the strategies, the
 * redistributions, the totals, and on request the DOT graph and each rank's program. */
#include <stdlib.h>
#include <string.h>

#include "ldt/ldt.h"
#include "tools/ldt/cli.h"

#define NFLAGS 19

static cli_flag *flag_table(void) {
    static cli_flag flags[NFLAGS] = {
        {"model", 1, "mlp or gpt (required)", NULL},
        {"mesh", 1, "device mesh: 4, 2x2, dp=2,tp=2, [[0,2],[1,3]] (default 4)", NULL},
        CLI_MODEL_SIZE_FLAGS,
        {"pins", 1, "megatron or none (default none)", NULL},
        {"strict", 0, "refuse any redistribution not asked for explicitly", NULL},
        {"greedy", 0, "op-by-op choice (each op follows its inputs) instead of the whole graph", NULL},
        {"profile", 1, "cost profile JSON from ldt calibrate, or a preset name (default uniform)", NULL},
        {"json", 0, "one JSON object: nodes and totals", NULL},
        {"dot", 1, "write the planned graph as Graphviz DOT to FILE", NULL},
        {"program", 0, "print each rank's program (or --rank R's)", NULL},
        {"train", 0, "plan the whole training step: forward, backward and an AdamW update", NULL},
        {"rank", 1, "with --program: only this rank", NULL},
        {"meta", 0, "plan on a meta mesh (no data; what huge models use)", NULL},
        {"help", 0, "this help", NULL},
    };
    return flags;
}


static void print_table(ldt_plan *plan, ldt_ctx *ctx, const ldt_plan_totals *t) {
    (void)ctx;
    printf("%-14s %14s %18s %14s %14s\n", "collectives", "redistributions", "comm_bytes_per_rank",
           "modeled_us", "plan_us");
    printf("%-14lld %14lld %18lld %14.3f %14.1f\n", (long long)t->collectives,
           (long long)t->redistributions, (long long)t->comm_bytes_per_rank,
           t->modeled_seconds * 1e6, t->plan_seconds * 1e6);
    for (int c = 0; c < LDT_COLL_COUNT; c++) {
        int64_t n = 0;
        if (ldt_plan_count(plan, (ldt_collective)c, -1, &n) == LDT_OK && n)
            printf("  %-16s %lld per rank\n", ldt_collective_name((ldt_collective)c), (long long)n);
    }
}

/* The rest of a training step after the forward: gradients of every parameter and an AdamW
 * update (assigned in place), as ldt train records it. */
static ldt_status train_step(ldt_model *m, ldt_tensor *loss) {
    int np = ldt_model_nparams(m);
    ldt_tensor **ps = malloc((size_t)np * sizeof *ps), **gs = malloc((size_t)np * sizeof *gs);
    ldt_optim_config oc = {0};
    ldt_optim *o = NULL;
    ldt_status st;
    if (!ps || !gs) {
        free(ps);
        free(gs);
        return ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "plan --train: out of memory");
    }
    for (int i = 0; i < np; i++) ps[i] = ldt_model_param(m, i, NULL);
    oc.kind = LDT_OPTIM_ADAMW;
    oc.lr = 3e-3, oc.beta1 = 0.9, oc.beta2 = 0.95, oc.eps = 1e-8, oc.weight_decay = 0.01;
    oc.clip_norm = 1.0, oc.total_steps = 1;
    st = ldt_grad(loss, ps, np, gs);
    if (st == LDT_OK) st = ldt_optim_create(ldt_tensor_ctx(loss), &oc, ps, np, &o);
    if (st == LDT_OK) st = ldt_optim_step(o, gs);
    ldt_optim_destroy(o);
    free(ps);
    free(gs);
    return st;
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
    ldt_plan_totals tot;
    const char *kind, *prof, *pins;
    int rc = 1;
    if (cli_parse("plan", argc, argv, f, NFLAGS)) return 2;
    if (cli_has(f, NFLAGS, "help")) {
        printf("usage: ldt plan --model mlp|gpt [--layers N --hidden H --heads A --vocab V --seq S\n"
               "                --batch B] [--mesh M] [--pins megatron|none] [--strict] [--greedy]\n"
               "                [--profile F] [--json] [--dot FILE] [--program [--rank R]] [--train]\n\n"
               "Traces the model's forward pass, chooses one sharding strategy per op for the\n"
               "whole graph under the cost model (pins honoured), and reports the placements,\n"
               "every redistribution with its collectives, and the totals (per-rank figures\n"
               "are the maximum over ranks).\n\nflags:\n");
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
    pins = cli_has(f, NFLAGS, "pins") ? cli_get(f, NFLAGS, "pins") : "none";
    prof = cli_get(f, NFLAGS, "profile");
    if (prof && ldt_cost_model_preset(prof, &cm) != LDT_OK && ldt_cost_model_load(prof, &cm) != LDT_OK)
        return cli_fail("plan");
    po.cost = prof ? &cm : NULL;
    po.strict = cli_has(f, NFLAGS, "strict");
    po.search = cli_has(f, NFLAGS, "greedy") ? LDT_PLAN_GREEDY : LDT_PLAN_GLOBAL;
    if (ldt_mesh_parse(cli_has(f, NFLAGS, "mesh") ? cli_get(f, NFLAGS, "mesh") : "4",
                       cli_has(f, NFLAGS, "meta") ? LDT_DEVICE_META : LDT_DEVICE_CPU, &mesh) != LDT_OK)
        return cli_fail("plan");
    co.mesh = mesh;
    if (ldt_ctx_create(&co, &ctx) != LDT_OK || ldt_model_create(ctx, kind, &cfg, &model) != LDT_OK ||
        ldt_model_pin(model, pins) != LDT_OK)
        goto fail;
    {
        ldt_tensor *loss = ldt_model_forward(model);
        if (!loss) {
            ldt_set_error(ldt_ctx_status(ctx), "%s", ldt_ctx_errmsg(ctx));
            goto fail;
        }
        if (cli_has(f, NFLAGS, "train") && train_step(model, loss) != LDT_OK) goto fail;
    }
    if (ldt_plan_create(ctx, &po, &plan) != LDT_OK || ldt_plan_totals_get(plan, &tot) != LDT_OK)
        goto fail;
    if (cli_has(f, NFLAGS, "dot")) {
        FILE *d = fopen(cli_get(f, NFLAGS, "dot"), "w");
        ldt_status st;
        if (!d) {
            ldt_set_error(LDT_ERR_SYSTEM, "cannot write '%s'", cli_get(f, NFLAGS, "dot"));
            goto fail;
        }
        st = ldt_plan_write_dot(plan, d);
        if (fclose(d) != 0 || st != LDT_OK) goto fail;
    }
    if (cli_has(f, NFLAGS, "json")) {
        if (ldt_plan_write_json(plan, stdout) != LDT_OK) goto fail;
    } else {
        print_table(plan, ctx, &tot);
    }
    if (cli_has(f, NFLAGS, "program")) {
        int64_t only = -1;
        if (cli_has(f, NFLAGS, "rank")) {
            only = atoll(cli_get(f, NFLAGS, "rank"));
            if (ldt_plan_write_program(plan, (int)only, stdout) != LDT_OK) goto fail;
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
    ldt_plan_destroy(plan);
    ldt_model_destroy(model);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    return rc;
}
