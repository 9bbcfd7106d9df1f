/* Runs the tests registered through tests/tsan/criterion/criterion.h, in order; an optional
 * argument runs only the tests whose name contains it. */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#define MAX_TESTS 512

static ldt_tsan_test g_tests[MAX_TESTS];
static int g_ntests;

void ldt_tsan_register(const char *name, void (*fn)(void)) {
    if (g_ntests == MAX_TESTS) {
        fprintf(stderr, "tsan runner: more than %d tests\n", MAX_TESTS);
        exit(2);
    }
    g_tests[g_ntests].name = name;
    g_tests[g_ntests++].fn = fn;
}

int main(int argc, char **argv) {
    int ran = 0;
    const char *filter = NULL;
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], "--", 2) != 0) filter = argv[i];
    for (int i = 0; i < g_ntests; i++) {
        if (filter && !strstr(g_tests[i].name, filter)) continue;
        fprintf(stderr, "[RUN ] %s\n", g_tests[i].name);
        g_tests[i].fn();
        ran++;
    }
    fprintf(stderr, "[PASS] %d tests\n", ran);
    return ran > 0 ? 0 : 1;
}
