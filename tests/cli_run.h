/* Running the ldt CLI from a Criterion test (LDT_CLI_PATH is set by tests/CMakeLists.txt). */
#ifndef LDT_TESTS_CLI_RUN_H
#define LDT_TESTS_CLI_RUN_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <sys/wait.h>

/* Runs `ldt args`; returns its exit status, its stdout in out (and its stderr too if merge). */
static inline int run(const char *args, char *out, size_t cap, int merge_stderr) {
    char cmd[2048];
    FILE *f;
    size_t n;
    int st;
    snprintf(cmd, sizeof cmd, "%s %s %s", LDT_CLI_PATH, args, merge_stderr ? "2>&1" : "2>/dev/null");
    f = popen(cmd, "r");
    cr_assert_not_null(f);
    n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The same with stderr merged. */
static inline int run_cli(const char *args, char *out, size_t cap) { return run(args, out, cap, 1); }

#endif
