/* ldt meta-init: describe a model on a meta mesh (no data anywhere), give its parameters
 * their init recipes, plan the sharding and report the parameter memory per rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ldt/ldt.h"
#include "tools/ldt/cli.h"

#define NFLAGS 17
#define BATCH 64

static cli_flag *flag_table(void) {
    static cli_flag flags[NFLAGS] = {
        {"model", 1, "mlp or gpt (required)", NULL},
        CLI_MODEL_SIZE_FLAGS,
        {"mesh", 1, "device mesh: dp=8,tp=8, 4, 2x2, ... (default 4)", NULL},
        CLI_PINS_FLAG,
        {"seed", 1, "random stream seed of the init recipes (default 0)", NULL},
        {"materialize", 0, "allocate and compute each rank's shard on a real mesh of threads", NULL},
        {"save", 1, "materialize and save the model as a sharded checkpoint in DIR", NULL},
        {"device", 1, "cpu (default) or cuda: where --materialize computes the shards (cuda: "
                      "each rank's init program on a GPU, rank r on device r % devices)", NULL},
        CLI_PROFILE_FLAG,
        {"json", 0, "one JSON object: config, param_count, memory_per_rank, ... (docs/cli.md)", NULL},
        CLI_COMM_TIMEOUT_FLAG,
        {"help", 0, "this help", NULL},
    };
    return flags;
}


/* Materializes every parameter on a real mesh shaped like the meta one, under the plan's
 * placements, a batch of parameters per launch of the rank threads (a progress bar on a
 * terminal). Without save_dir the shards are dropped once made (this shows the allocation);
 * with it they are kept and saved as a sharded checkpoint (docs/checkpoint.md). */
static int materialize_all(ldt_model *m, ldt_plan *plan, const ldt_mesh *meta, ldt_device_type dev,
                           const char *save_dir, int64_t *allocated) {
    ldt_mesh *real = NULL;
    char text[512];
    int np = ldt_model_nparams(m), tty = isatty(2), rc = 1, made = 0;
    ldt_materialize_stats ms = {0};
    ldt_shards **kept = NULL;
    const char **names = NULL;
    ldt_mesh_format(meta, text, sizeof text);
    if (ldt_mesh_parse(text, dev, &real) != LDT_OK) return 1;
    if (save_dir && (!(kept = calloc((size_t)np + 1, sizeof *kept)) ||
                     !(names = calloc((size_t)np + 1, sizeof *names)))) {
        ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "meta-init: out of memory keeping %d parameters", np);
        goto done;
    }
    for (int i0 = 0; i0 < np; i0 += BATCH) {
        const ldt_tensor *ws[BATCH];
        ldt_placement pl[BATCH][LDT_MAX_DIMS];
        const ldt_placement *pls[BATCH];
        ldt_shards *sh[BATCH];
        int n = np - i0 < BATCH ? np - i0 : BATCH;
        for (int j = 0; j < n; j++) {
            const char *name = NULL;
            ws[j] = ldt_model_param(m, i0 + j, &name);
            if (names) names[i0 + j] = name;
            pls[j] = pl[j];
            if (ldt_plan_placements(plan, ws[j], pl[j], LDT_MAX_DIMS) != LDT_OK) goto done;
        }
        if (ldt_materialize(ws, pls, n, real, sh, &ms) != LDT_OK) goto done;
        for (int j = 0; j < n; j++) {
            if (kept) kept[i0 + j] = sh[j];
            else ldt_shards_destroy(sh[j]);
        }
        made = i0 + n;
        if (tty) {
            int w40 = (int)(40L * (i0 + n) / np);
            fprintf(stderr, "\rmaterialize [%.*s%*s] %d/%d", w40, "########################################",
                    40 - w40, "", i0 + n, np);
            if (i0 + n == np) fputc('\n', stderr);
        }
    }
    *allocated = ms.allocated_bytes;
    if (save_dir && ldt_ckpt_save(save_dir, np, names, (ldt_shards *const *)kept) != LDT_OK) goto done;
    rc = 0;
done:
    if (kept)
        for (int i = 0; i < made; i++) ldt_shards_destroy(kept[i]);
    free(kept);
    free(names);
    ldt_mesh_destroy(real);
    return rc;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cmd_meta_init(int argc, char **argv) {
    cli_flag *f = flag_table();
    ldt_mesh *mesh = NULL;
    ldt_ctx *ctx = NULL;
    ldt_model *model = NULL;
    ldt_plan *plan = NULL;
    ldt_ctx_options co = {0};
    ldt_plan_options po = {0};
    ldt_cost_model cm;
    ldt_model_config cfg;
    ldt_plan_memory mem;
    cli_memory mpr;
    const char *kind, *save_dir, *dev_text, *pins;
    int64_t seed, allocated = 0;
    double t0;
    int rc = 1;
    if (cli_parse("meta-init", argc, argv, f, NFLAGS)) return 2;
    if (cli_comm_timeout("meta-init", f, NFLAGS)) return 2;
    if (cli_has(f, NFLAGS, "help")) {
        printf("usage: ldt meta-init --model mlp|gpt [--layers N --hidden H --heads A --vocab V\n"
               "                     --seq S --batch B] [--mesh M] [--pins megatron|none]\n"
               "                     [--seed S] [--materialize] [--save DIR] [--device cpu|cuda]\n"
               "                     [--profile P] [--json]\n\n"
               "Builds the model on a meta mesh (parameters hold no data, only their init\n"
               "recipes), plans its forward pass and reports the memory per rank: parameters,\n"
               "gradients, AdamW states, the forward's activations (its memory plan), the peak.\n\n"
               "flags:\n");
        cli_print_flags(stdout, f, NFLAGS);
        return 0;
    }
    kind = cli_get(f, NFLAGS, "model");
    pins = cli_has(f, NFLAGS, "pins") ? cli_get(f, NFLAGS, "pins") : CLI_DEFAULT_PINS;
    if (!kind) {
        fprintf(stderr, "ldt meta-init: --model is required (mlp or gpt)\n");
        return 2;
    }
    cfg = ldt_model_config_default(kind);
    if (cli_model_sizes("meta-init", f, NFLAGS, &cfg) || cli_int("meta-init", f, NFLAGS, "seed", 0, 0, &seed))
        return 2;
    save_dir = cli_get(f, NFLAGS, "save");
    if (save_dir && !*save_dir) {
        fprintf(stderr, "ldt meta-init: --save is empty, expected a directory\n");
        return 2;
    }
    if ((dev_text = cli_get(f, NFLAGS, "device")) && strcmp(dev_text, "cpu") != 0 &&
        strcmp(dev_text, "cuda") != 0) {
        fprintf(stderr, "ldt meta-init: --device %s, expected cpu or cuda\n", dev_text);
        return 2;
    }
    t0 = now_s();
    if (ldt_mesh_parse(cli_has(f, NFLAGS, "mesh") ? cli_get(f, NFLAGS, "mesh") : "4", LDT_DEVICE_META,
                       &mesh) != LDT_OK)
        return cli_fail("meta-init");
    if (cli_profile(f, NFLAGS, mesh, &cm) != LDT_OK) goto fail;
    po.cost = &cm;
    co.mesh = mesh;
    if (ldt_ctx_create(&co, &ctx) != LDT_OK || ldt_model_create(ctx, kind, &cfg, &model) != LDT_OK ||
        ldt_model_init(model, (uint64_t)seed) != LDT_OK ||
        ldt_model_pin(model, pins) != LDT_OK)
        goto fail;
    if (!ldt_model_forward(model)) {
        ldt_set_error(ldt_ctx_status(ctx), "%s", ldt_ctx_errmsg(ctx));
        goto fail;
    }
    if (ldt_plan_create(ctx, &po, &plan) != LDT_OK || ldt_plan_memory_get(plan, &mem) != LDT_OK) goto fail;
    if (cli_memory_per_rank(plan, model, mesh, &mpr) != LDT_OK) goto fail;
    if (save_dir) { /* a save keeps every rank's shards in this process until it writes them */
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        double have = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
        if (have > 0 && mpr.params_all_ranks > have) {
            ldt_set_error(LDT_ERR_OUT_OF_MEMORY,
                          "--save keeps the shards of every rank in this process: %.4g GB, more "
                          "than this machine's %.4g GB of memory",
                          mpr.params_all_ranks / 1e9, have / 1e9);
            goto fail;
        }
    }
    if ((cli_has(f, NFLAGS, "materialize") || save_dir) &&
        materialize_all(model, plan, mesh,
                        dev_text && strcmp(dev_text, "cuda") == 0 ? LDT_DEVICE_CUDA : LDT_DEVICE_CPU,
                        save_dir, &allocated) != 0)
        goto fail;
    if (cli_has(f, NFLAGS, "json")) {
        printf("{");
        cli_config_json(stdout, kind, &cfg, pins, mesh);
        putchar(',');
        cli_profile_json(stdout, &cm);
        printf(",\"param_count\":%lld,\"param_bytes\":%lld,", (long long)mem.params, (long long)mem.param_bytes);
        cli_memory_json(stdout, &mpr);
        printf(",\"allocated_bytes\":%lld,\"wall_seconds\":%.6f}\n", (long long)allocated, now_s() - t0);
    } else {
        printf("params %lld (%.3f GB); per rank at most %.3f GB of parameters, as much again of "
               "gradients, %.3f GB of Adam states, %.3f GB of activations (peak %.3f GB); %lld bytes "
               "allocated; %.1f ms\n",
               (long long)mem.params, (double)mem.param_bytes / 1e9, (double)mpr.params / 1e9,
               (double)mpr.optimizer / 1e9, (double)mpr.activations_peak / 1e9, (double)mpr.peak / 1e9,
               (long long)allocated, (now_s() - t0) * 1e3);
    }
    rc = 0;
    goto done;
fail:
    rc = cli_fail("meta-init");
done:
    ldt_plan_destroy(plan);
    ldt_model_destroy(model);
    ldt_ctx_destroy(ctx);
    ldt_mesh_destroy(mesh);
    return rc;
}
