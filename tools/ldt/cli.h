/* Shared helpers of the ldt subcommands: flag parsing and errors. */
#ifndef LDT_TOOLS_CLI_H
#define LDT_TOOLS_CLI_H

#include <stdio.h>

/* One accepted flag: name without dashes, whether it takes a value, its help line. */
typedef struct cli_flag {
    const char *name;
    int takes_value;
    const char *help;
    const char *value; /* filled by cli_parse: the value, or "1" for a switch; NULL if absent */
} cli_flag;

/* Parses argv (after the subcommand) into flags: "--name value" or "--name=value".
 * Returns 0, or prints the problem to stderr and returns 2. */
int cli_parse(const char *cmd, int argc, char **argv, cli_flag *flags, int nflags);
const char *cli_get(const cli_flag *flags, int nflags, const char *name);
int cli_has(const cli_flag *flags, int nflags, const char *name);
void cli_print_flags(FILE *f, const cli_flag *flags, int nflags);
/* Prints "ldt <cmd>: <ldt_last_error()>" to stderr and returns 1. */
int cli_fail(const char *cmd);

/* The flag entries of a model's sizes, for the tables of the commands that build models. */
#define CLI_MODEL_SIZE_FLAGS                                                              \
    {"layers", 1, "blocks (default 2)", NULL}, {"hidden", 1, "hidden size (default 64)", NULL}, \
        {"heads", 1, "gpt attention heads (default 4)", NULL},                            \
        {"vocab", 1, "gpt vocabulary (default 128)", NULL},                               \
        {"seq", 1, "gpt sequence length (default 16)", NULL},                             \
        {"batch", 1, "batch size (default 4)", NULL}
struct ldt_model_config;
/* Integer flag `name`: its value (>= lo) or def. Returns 0, or prints why and returns 2. */
int cli_int(const char *cmd, const cli_flag *flags, int nflags, const char *name, int64_t def,
            int64_t lo, int64_t *out);
/* The model sizes (CLI_MODEL_SIZE_FLAGS) into cfg, keeping its values where a flag is absent.
 * Returns 0, or prints why and returns 2. */
int cli_model_sizes(const char *cmd, const cli_flag *flags, int nflags, struct ldt_model_config *cfg);

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

#endif
