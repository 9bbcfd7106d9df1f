/* The README's and docs' examples, run as written (a plain program, not Criterion: each
 * example is a shell command or a C program, and one report lists every mismatch).
 *
 * In a fenced code block, a line "$ CMD" whose command starts with ./build/ldt, ldt or
 * scripts/ldt-mpirun is run (ldt is the build's), in one scratch directory per markdown file
 * (which holds an empty build/ folder, so paths like build/x.json work). The lines under it,
 * up to the next "$ " line or the end of the block, are the output shown: stdout and stderr
 * together must match them line by line, where a line "..." stands for any number of lines
 * and a line ending in " ..." (or "...") for any line that starts with the text before it.
 * With no output shown, the command must succeed; with output shown, a failing command is
 * fine when it prints what is shown (docs show refusals too). A command line ending in "\"
 * continues on the next line. Any other "$ " line fails the test unless its block is marked.
 * A ```c block holding main() is compiled against the build's library, linked and run; it
 * must exit 0. A comment line <!-- no-test: REASON --> right before a block skips it, and
 * the reason is printed.
 *
 * Usage: test_docs [--no-mpi] SRC_DIR BUILD_DIR LDT_PATH [FILE.md ...]   (default: README.md
 * and every docs page; --no-mpi, for builds without MPI, skips the scripts/ldt-mpirun lines) */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    char **v;
    int n, cap;
} lines;

static void push(lines *l, const char *s, size_t len) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = realloc(l->v, (size_t)l->cap * sizeof *l->v);
        if (!l->v) abort();
    }
    l->v[l->n] = malloc(len + 1);
    if (!l->v[l->n]) abort();
    memcpy(l->v[l->n], s, len);
    l->v[l->n][len] = '\0';
    while (len > 0 && (l->v[l->n][len - 1] == ' ' || l->v[l->n][len - 1] == '\t' ||
                       l->v[l->n][len - 1] == '\r'))
        l->v[l->n][--len] = '\0';
    l->n++;
}

static void clear(lines *l) {
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Splits text into lines (trailing blanks dropped, then trailing empty lines dropped). */
static void split(const char *text, lines *out) {
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        push(out, p, len);
        p += len + (e ? 1 : 0);
    }
    while (out->n > 0 && out->v[out->n - 1][0] == '\0') free(out->v[--out->n]);
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* Does shown[i..] match got[j..]? "..." is any run of lines, "text..." a prefix. */
static int match(const lines *shown, int i, const lines *got, int j) {
    if (i == shown->n) return j == got->n;
    const char *s = shown->v[i];
    if (strcmp(s, "...") == 0) {
        for (int k = j; k <= got->n; k++)
            if (match(shown, i + 1, got, k)) return 1;
        return 0;
    }
    if (j == got->n) return 0;
    if (ends_with(s, "...")) {
        size_t len = strlen(s) - 3;
        if (strncmp(got->v[j], s, len) != 0) return 0;
    } else if (strcmp(s, got->v[j]) != 0) {
        return 0;
    }
    return match(shown, i + 1, got, j + 1);
}

/* Everything f gives, NUL-terminated (the caller frees it). */
static char *read_stream(FILE *f) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n + 4096 > cap) buf = realloc(buf, cap *= 2);
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        if (r == 0) break;
        n += r;
    }
    buf[n] = '\0';
    return buf;
}

static char *slurp_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = read_stream(f);
    fclose(f);
    return buf;
}

static char *run_capture(const char *cmd, int *status) {
    FILE *f = popen(cmd, "r");
    if (!f) {
        *status = -1;
        return strdup("");
    }
    char *buf = read_stream(f);
    int st = pclose(f);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

static const char *g_src, *g_build, *g_ldt;
static int g_failed, g_ran, g_skipped, g_no_mpi;

/* The command with its leading program replaced, or NULL when it is not one we run. */
static char *resolve(const char *cmd) {
    static const struct {
        const char *prefix;
        int ldt;
    } k[] = {{"./build/ldt", 1}, {"ldt", 1}, {"scripts/ldt-mpirun", 0}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        size_t len = strlen(k[i].prefix);
        if (strncmp(cmd, k[i].prefix, len) == 0 && (cmd[len] == ' ' || cmd[len] == '\0')) {
            const char *head = k[i].ldt ? g_ldt : NULL;
            char path[4096];
            if (!head) {
                snprintf(path, sizeof path, "%s/%s", g_src, k[i].prefix);
                head = path;
            }
            size_t n = strlen(head) + strlen(cmd + len) + 1;
            char *out = malloc(n);
            snprintf(out, n, "%s%s", head, cmd + len);
            /* ./build/ldt inside the line (as mpirun's program) is the build's ldt too */
            char *at;
            while ((at = strstr(out, " ./build/ldt ")) != NULL) {
                size_t pre = (size_t)(at - out) + 1, m = pre + strlen(g_ldt) + strlen(at + 12) + 1;
                char *o2 = malloc(m);
                snprintf(o2, m, "%.*s%s%s", (int)pre, out, g_ldt, at + 12);
                free(out);
                out = o2;
            }
            return out;
        }
    }
    return NULL;
}

static void check_command(const char *where, const char *dir, const char *cmd, const lines *shown) {
    if (g_no_mpi && strncmp(cmd, "scripts/ldt-mpirun", 18) == 0) {
        printf("skip %s: $ %s (this build has no MPI)\n", where, cmd);
        g_skipped++;
        return;
    }
    char *real = resolve(cmd);
    if (!real) {
        printf("FAIL %s: '$ %s' is not a command this test runs (./build/ldt, ldt, "
               "scripts/ldt-mpirun); mark its block <!-- no-test: REASON -->\n", where, cmd);
        g_failed++;
        return;
    }
    size_t n = strlen(dir) + strlen(real) + 64;
    char *full = malloc(n);
    snprintf(full, n, "cd '%s' && ( %s ) 2>&1", dir, real);
    int status;
    char *out = run_capture(full, &status);
    lines got = {0};
    split(out, &got);
    g_ran++;
    int ok = shown->n == 0 ? status == 0 : match(shown, 0, &got, 0);
    if (!ok) {
        g_failed++;
        printf("FAIL %s: $ %s\n  exit status %d\n  shown:\n", where, cmd, status);
        for (int i = 0; i < shown->n; i++) printf("    | %s\n", shown->v[i]);
        printf("  printed:\n");
        for (int i = 0; i < got.n; i++) printf("    | %s\n", got.v[i]);
    } else {
        printf("ok   %s: $ %s\n", where, cmd);
    }
    clear(&got);
    free(out);
    free(full);
    free(real);
}

static void check_c_block(const char *where, const char *dir, const lines *code) {
    int has_main = 0;
    for (int i = 0; i < code->n; i++)
        if (strstr(code->v[i], "int main(")) has_main = 1;
    if (!has_main) return; /* an excerpt: the text says where its whole program lives */
    char src[4096], exe[4096], cmd[16384];
    snprintf(src, sizeof src, "%s/example.c", dir);
    snprintf(exe, sizeof exe, "%s/example", dir);
    FILE *f = fopen(src, "w");
    if (!f) {
        printf("FAIL %s: cannot write %s: %s\n", where, src, strerror(errno));
        g_failed++;
        return;
    }
    for (int i = 0; i < code->n; i++) fprintf(f, "%s\n", code->v[i]);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && cc -std=c11 -Wall -Wextra -Werror -I'%s/include' example.c -o example "
             "-L'%s' -llazydt -Wl,-rpath,'%s' -lm 2>&1 && ./example 2>&1",
             dir, g_src, g_build, g_build);
    int status;
    char *out = run_capture(cmd, &status);
    g_ran++;
    if (status != 0) {
        g_failed++;
        printf("FAIL %s: the C example does not build and run (status %d):\n%s\n", where, status, out);
    } else {
        printf("ok   %s: C example compiled and ran\n", where);
    }
    free(out);
}

static void check_file(const char *path, const char *name) {
    char *text = slurp_file(path);
    if (!text) {
        printf("FAIL %s: cannot read: %s\n", path, strerror(errno));
        g_failed++;
        return;
    }
    char tmpl[] = "/tmp/ldt-docs-XXXXXX";
    char *dir = mkdtemp(tmpl);
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/build", dir);
    if (!dir || mkdir(sub, 0755) != 0) {
        printf("FAIL %s: no scratch directory\n", name);
        g_failed++;
        free(text);
        return;
    }
    lines all = {0};
    split(text, &all);
    const char *skip = NULL;
    char skipbuf[512];
    for (int i = 0; i < all.n; i++) {
        const char *l = all.v[i];
        if (strncmp(l, "<!-- no-test:", 13) == 0) {
            snprintf(skipbuf, sizeof skipbuf, "%s", l + 13);
            char *e = strstr(skipbuf, "-->");
            if (e) *e = '\0';
            skip = skipbuf;
            continue;
        }
        if (strncmp(l, "```", 3) != 0) {
            if (l[0] != '\0') skip = NULL; /* the marker must come right before its block */
            continue;
        }
        int is_c = strcmp(l + 3, "c") == 0;
        int start = i + 1, end = start;
        while (end < all.n && strncmp(all.v[end], "```", 3) != 0) end++;
        char where[1024];
        snprintf(where, sizeof where, "%s:%d", name, i + 1);
        if (skip) {
            printf("skip %s:%s\n", where, skip);
            g_skipped++;
        } else if (is_c) {
            lines code = {0};
            for (int k = start; k < end; k++) push(&code, all.v[k], strlen(all.v[k]));
            check_c_block(where, dir, &code);
            clear(&code);
        } else {
            for (int k = start; k < end;) {
                if (strncmp(all.v[k], "$ ", 2) != 0) {
                    k++;
                    continue;
                }
                char cmd[8192] = "";
                int line = k + 1;
                for (;;) { /* a trailing backslash continues the command */
                    const char *c = all.v[k] + (strlen(cmd) == 0 ? 2 : 0);
                    strncat(cmd, c, sizeof cmd - strlen(cmd) - 1);
                    k++;
                    size_t len = strlen(cmd);
                    if (len == 0 || cmd[len - 1] != '\\' || k >= end) break;
                    cmd[len - 1] = ' ';
                }
                lines shown = {0};
                while (k < end && strncmp(all.v[k], "$ ", 2) != 0) {
                    push(&shown, all.v[k], strlen(all.v[k]));
                    k++;
                }
                snprintf(where, sizeof where, "%s:%d", name, line);
                check_command(where, dir, cmd, &shown);
                clear(&shown);
            }
        }
        skip = NULL;
        i = end;
    }
    clear(&all);
    char rm[4400];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0) printf("note: could not remove %s\n", dir);
    free(text);
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--no-mpi") == 0) {
        g_no_mpi = 1;
        argv++;
        argc--;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: test_docs [--no-mpi] SRC_DIR BUILD_DIR LDT_PATH [FILE.md ...]\n");
        return 2;
    }
    g_src = argv[1];
    g_build = argv[2];
    g_ldt = argv[3];
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    char path[4096];
    if (argc > 4) {
        for (int i = 4; i < argc; i++) {
            snprintf(path, sizeof path, "%s/%s", g_src, argv[i]);
            check_file(path, argv[i]);
        }
    } else {
        snprintf(path, sizeof path, "%s/README.md", g_src);
        check_file(path, "README.md");
        snprintf(path, sizeof path, "%s/docs", g_src);
        DIR *d = opendir(path);
        if (!d) {
            printf("FAIL: cannot open %s\n", path);
            return 1;
        }
        char *names[256];
        int n = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL && n < 256)
            if (strlen(e->d_name) > 3 && strcmp(e->d_name + strlen(e->d_name) - 3, ".md") == 0)
                names[n++] = strdup(e->d_name);
        closedir(d);
        qsort(names, (size_t)n, sizeof names[0], by_name);
        for (int i = 0; i < n; i++) {
            char name[600];
            snprintf(name, sizeof name, "docs/%s", names[i]);
            snprintf(path, sizeof path, "%s/%s", g_src, name);
            check_file(path, name);
            free(names[i]);
        }
    }
    printf("docs examples: %d run, %d skipped, %d failed\n", g_ran, g_skipped, g_failed);
    return g_failed ? 1 : 0;
}
