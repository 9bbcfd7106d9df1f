/* Runs the tests registered through tests/tsan/criterion/criterion.h, in order; an optional
 * argument runs only the tests whose name contains it, and --part K/N only every N-th test
 * from the K-th (0-based), so that N processes share a long program's tests. */
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
    int ran = 0, part = 0, parts = 1;
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--part") == 0) {
            if (i + 1 >= argc || sscanf(argv[++i], "%d/%d", &part, &parts) != 2 || parts < 1 || part < 0 ||
                part >= parts) {
                fprintf(stderr, "tsan runner: --part wants K/N with 0 <= K < N\n");
                return 2;
            }
        } else if (strncmp(argv[i], "--", 2) != 0) {
            filter = argv[i];
        }
    }
    for (int i = 0; i < g_ntests; i++) {
        if (i % parts != part) continue;
        if (filter && !strstr(g_tests[i].name, filter)) continue;
        fprintf(stderr, "[RUN ] %s\n", g_tests[i].name);
        g_tests[i].fn();
        ran++;
    }
    fprintf(stderr, "[PASS] %d tests\n", ran);
    return ran > 0 ? 0 : 1;
}
