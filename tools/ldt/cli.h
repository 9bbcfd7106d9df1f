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

int cmd_layout(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_redistribute(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_meta_init(int argc, char **argv);

#endif
