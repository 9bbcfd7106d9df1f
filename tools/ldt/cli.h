/* Shared helpers of the ldt subcommands: flag parsing and errors. */
#ifndef LDT_TOOLS_CLI_H
#define LDT_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "ldt/ldt.h"

/* One accepted flag: name without dashes, whether it takes a value, its help line. */
typedef struct cli_flag {
    const char *name;
    int takes_value;
    const char *help;
    const char *value; /* filled by cli_parse: the value, or "1" for a switch; NULL if absent */
} cli_flag;

/* Parses argv (after the subcommand) into flags: "--name value" or "--name=value"; "-h" is
 * "--help" where the table has a help flag.
 * Returns 0, or prints the problem to stderr and returns 2. */
int cli_parse(const char *cmd, int argc, char **argv, cli_flag *flags, int nflags);
const char *cli_get(const cli_flag *flags, int nflags, const char *name);
int cli_has(const cli_flag *flags, int nflags, const char *name);
void cli_print_flags(FILE *f, const cli_flag *flags, int nflags);
/* Prints "ldt <cmd>: <ldt_last_error()>" to stderr and returns 1. */
int cli_fail(const char *cmd);
/* The most rank threads one process runs (the library's limit, include/ldt/exec.h). */
#define CLI_MAX_RANK_THREADS 4096
/* For a command about to run mesh on rank threads of this process: 0 when it can; else prints
 * why not to stderr and returns 1, right after the mesh is parsed (a 2^24-rank mesh went on to
 * fill shards for a minute and gigabytes before the threads refused it). */
int cli_rank_threads_fit(const char *cmd, const ldt_mesh *mesh);

/* The flag entries of a model's sizes, for the tables of the commands that build models, with
 * the defaults the command applies (CLI_MODEL_SIZE_FLAGS: ldt_model_config_default's). */
#define CLI_MODEL_SIZE_FLAGS_AT(...) CLI_MODEL_SIZE_FLAGS_AT_(__VA_ARGS__)
#define CLI_MODEL_SIZE_FLAGS_AT_(L, H, A, V, S, B)                                              \
    {"layers", 1, "blocks (default " #L ")", NULL}, {"hidden", 1, "hidden size (default " #H ")", NULL}, \
        {"heads", 1, "gpt attention heads (default " #A ")", NULL},                               \
        {"vocab", 1, "gpt vocabulary (default " #V ")", NULL},                                    \
        {"seq", 1, "gpt sequence length (default " #S ")", NULL},                                 \
        {"batch", 1, "batch size (default " #B ")", NULL}
/* ldt_model_config_default's sizes (models/model.c), in the order above; test_cli checks
 * that each command's help names the sizes it applies. */
#define CLI_DEFAULT_SIZES 2, 64, 4, 128, 16, 4
#define CLI_MODEL_SIZE_FLAGS CLI_MODEL_SIZE_FLAGS_AT(CLI_DEFAULT_SIZES)
/* The pins every command that builds a model applies without --pins. */
#define CLI_DEFAULT_PINS "megatron"
#define CLI_PINS_FLAG {"pins", 1, "megatron or none (default " CLI_DEFAULT_PINS ")", NULL}
/* "config":{model, layers, hidden, heads, vocab, seq, batch, dtype, pins, mesh}: what the
 * command built (no braces around it). */
void cli_config_json(FILE *f, const char *kind, const ldt_model_config *cfg, const char *pins,
                     const ldt_mesh *mesh);
/* --profile for the commands that plan: the device profile that prices the plan. */
#define CLI_PROFILE_FLAG                                                                          \
    {"profile", 1,                                                                                \
     "cost profile: cpu-threads, a100-80g, h100-80g, uniform, nvlink-ib or a JSON file (default: " \
     "LDT_PROFILE, then the saved profile, then cpu-threads, h100-80g on meta meshes; "           \
     "docs/cost-model.md)", NULL}
/* The profile the command plans with on mesh: --profile, LDT_PROFILE, the saved profile or
 * the mesh's default (ldt_cost_model_default); the error set when it fails. */
ldt_status cli_profile(const cli_flag *flags, int nflags, const ldt_mesh *mesh, ldt_cost_model *cm);
/* "profile":"NAME" (no braces): which profile priced the plan. */
void cli_profile_json(FILE *f, const ldt_cost_model *cm);
/* --comm-timeout-ms for the commands that run collectives: the library's communication
 * timeout for every backend (docs/communicator.md), passed on as LDT_COMM_TIMEOUT_MS. */
#define CLI_COMM_TIMEOUT_FLAG                                                                     \
    {"comm-timeout-ms", 1,                                                                        \
     "ms a collective waits for a missing peer before the run fails (default 60000, or "          \
     "LDT_COMM_TIMEOUT_MS; 0: no limit)", NULL}
/* Checks --comm-timeout-ms (an integer >= 0) and sets LDT_COMM_TIMEOUT_MS from it (before
 * any communicator exists). Returns 0, or prints why and returns 2. */
int cli_comm_timeout(const char *cmd, const cli_flag *flags, int nflags);
/* --bucket-mb for the commands that compile a training step: the cap of a fused collective's
 * bucket (ldt_compile_options.bucket_bytes), in MiB. */
#define CLI_BUCKET_FLAG                                                                           \
    {"bucket-mb", 1, "cap of a gradient bucket (one fused all_reduce) in MiB, fractions allowed "  \
                     "(default 25)", NULL}
/* Checks --bucket-mb (a number > 0, at most 2^20) and puts it in *bytes (0 without the flag:
 * the library's default). Returns 0, or prints why and returns 2. */
int cli_bucket_bytes(const char *cmd, const cli_flag *flags, int nflags, int64_t *bytes);
/* Data parallel over the mesh dim named dp, when the mesh has one: o reduces the gradients
 * there explicitly (ldt_optim_sync_grads), so fusion buckets them. */
ldt_status cli_sync_grads(ldt_optim *o, const ldt_mesh *mesh);
/* Integer flag `name`: its value (>= lo) or def. Returns 0, or prints why and returns 2. */
int cli_int(const char *cmd, const cli_flag *flags, int nflags, const char *name, int64_t def,
            int64_t lo, int64_t *out);
/* Real flag `name`: its value (a finite number; not empty) or def. Returns 0, or prints why
 * and returns 2. */
int cli_real(const char *cmd, const cli_flag *flags, int nflags, const char *name, double def, double *out);
/* The model sizes (CLI_MODEL_SIZE_FLAGS) into cfg, keeping its values where a flag is absent.
 * Returns 0, or prints why and returns 2. */
int cli_model_sizes(const char *cmd, const cli_flag *flags, int nflags, ldt_model_config *cfg);

/* memory_per_rank (docs/cli.md), bytes, each figure its busiest rank's: params (the model's
 * parameter shards under the plan), grads (one per parameter element, in its dtype), optimizer
 * (AdamW: two states per parameter element, f32 for bf16/f16 parameters with an f32 master
 * beside them: 12 bytes an element; else in the parameter's dtype), activations_peak
 * (ldt_plan_arena_bytes: the planned program's transient values), peak (the four summed on one
 * rank, the largest); activations_saved (-1: not measured) is set by the caller
 * (ldt_plan_step.saved_bytes). */
typedef struct cli_memory {
    int64_t params, grads, optimizer, activations_peak, peak, activations_saved;
    double params_all_ranks; /* every rank's parameter shards together (not in the JSON) */
} cli_memory;
/* Returns LDT_OK or the library's error (its message set). */
ldt_status cli_memory_per_rank(ldt_plan *plan, ldt_model *m, const ldt_mesh *mesh, cli_memory *out);
/* Writes "memory_per_rank":{...} (no braces around it). */
void cli_memory_json(FILE *f, const cli_memory *m);
/* memory_per_rank with the optimizer's figure from o's own state tensors (momentum, moments,
 * masters) as the plan places them (ZeRO's shards, SGD's one state); o NULL: AdamW's, as
 * cli_memory_per_rank. */
ldt_status cli_memory_per_rank_optim(ldt_plan *plan, ldt_model *m, const ldt_optim *o, const ldt_mesh *mesh,
                                     cli_memory *out);

/* ---- recomputation (tools/ldt/cli_recompute.c; docs/recompute.md) ---- */
/* "none", "selective", "full": a mode's index is what the mode arrays below hold. */
extern const char *const cli_recompute_modes[3];
/* --recompute TEXT set on gpt model m: one mode (none, selective or full) for every layer, or
 * a comma-separated list with exactly one per layer. 0, or 2 after printing "ldt CMD:
 * --recompute TEXT ..." (an unknown mode, a wrong count, the model's refusal: an mlp). */
int cli_recompute_set(const char *cmd, ldt_model *m, const char *text);
/* "recompute":["none"|"selective"|"full", one per layer],"recompute_mix":{"none":n,
 * "selective":n,"full":n} of gpt model m (nothing for another model). */
void cli_recompute_json(FILE *f, const ldt_model *m);
/* The update a planned training step records after the forward. */
typedef struct cli_step_optim {
    ldt_optim_config oc; /* the optimizer's settings */
    int zero;            /* its states sharded over the mesh dim named dp (ldt_optim_shard_states) */
    int sync_dp;         /* the gradients reduced over dp explicitly (ldt_optim_sync_grads) */
} cli_step_optim;
/* The rest of a training step after loss: the gradients of every parameter of m and an update
 * by so's optimizer (NULL: ldt plan --train's AdamW). *out (when out is not NULL) gets the
 * optimizer on success (the caller destroys it). */
ldt_status cli_train_step(ldt_model *m, ldt_tensor *loss, const cli_step_optim *so, ldt_optim **out);
/* What --recompute auto plans: the model (kind, cfg, pins) on mesh (a meta mesh), planned
 * with po, its step's update so's (NULL: plan's AdamW, memory by cli_memory_per_rank). */
typedef struct cli_rc_job {
    const char *cmd; /* "plan" or "train": the messages' */
    const char *kind;
    const ldt_model_config *cfg;
    const char *pins;
    const ldt_mesh *mesh;
    const ldt_plan_options *po;
    const cli_step_optim *so;
} cli_rc_job;
/* The chooser's answer. */
typedef struct cli_rc_choice {
    int plans;               /* training steps planned */
    int fits;                /* the chosen mix's peak is within the budget */
    int64_t peak;            /* the chosen mix's modeled memory_per_rank.peak */
    double seconds;          /* its modeled step */
    int64_t uniform_peak[3]; /* every layer none, selective, full: their peaks */
} cli_rc_choice;
/* --recompute auto under `budget` bytes per rank (docs/recompute.md, "Under a memory budget"):
 * job->cfg->layers modes into modes, the mix that fits with the least modeled step (the first
 * layers full, the next selective, the rest none); none fitting: every layer full, out->fits
 * 0. A count of plans, never a time: every process chooses alike. */
ldt_status cli_recompute_choose(const cli_rc_job *job, int64_t budget, unsigned char *modes, cli_rc_choice *out);

int cmd_layout(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_redistribute(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_meta_init(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_step_bench(int argc, char **argv);
int cmd_rand(int argc, char **argv);
int cmd_ckpt(int argc, char **argv);
int cmd_spec(int argc, char **argv);
int cmd_predict(int argc, char **argv);

#endif
