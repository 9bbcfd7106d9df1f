/* The library's surface: the shared library exports exactly the functions the public headers
 * declare, and every one of them is documented.
 *
 * A plain program (it runs nm), usage: test_surface [LIBRARY.so INCLUDE_DIR NM]; the defaults
 * are the build's. It reads the headers of include/ldt, finds every function declaration (at file scope,
 * outside typedefs), and fails, naming each offender, on
 *   - a dynamic symbol of the library that no header declares (an internal name leaking:
 *     ldt__*, a model builder's helper, the CUDA emulator's cuda* names, C++ template code);
 *   - a declared function the library does not export (no LDT_API, or never defined);
 *   - a declaration without LDT_API in front;
 *   - a declaration without a comment: right above it, on its own lines, or heading the
 *     block of declarations it belongs to (consecutive lines, the block's first one
 *     commented above), as `ldt_shards_destroy` under `ldt_shards_create`'s comment. */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef LDT_SHARED_LIB
#define LDT_SHARED_LIB "liblazydt.so"
#endif
#ifndef LDT_INCLUDE_DIR
#define LDT_INCLUDE_DIR "include/ldt"
#endif
#ifndef LDT_NM
#define LDT_NM "nm"
#endif

#define MAX_NAMES 4096
#define MAX_TOKENS 200000

typedef struct {
    char name[128];
    char file[64];
    int first_line, last_line; /* of the whole declaration */
    int has_api;               /* LDT_API among its tokens */
    int documented;
} decl;

typedef struct {
    char text[128];
    int line;
} token;

static decl g_decls[MAX_NAMES];
static int g_ndecls;
static char g_exported[MAX_NAMES][256];
static int g_nexported;

/* Per header: which lines hold part of a comment (comment_at[line]: 1 starts one there,
 * 2 ends one there, 3 both, 4 inside). */
static unsigned char *g_comment;

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    long n;
    char *buf;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = 0;
    fclose(f);
    return buf;
}

static int count_lines(const char *s) {
    int n = 1;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* Splits a header into tokens (identifiers, numbers, single punctuation characters; string
 * and character literals as one token), dropping comments and preprocessor lines and the
 * `#ifdef __cplusplus` blocks (extern "C"), and marks the comment lines. */
static int tokenize(const char *src, token *toks, int cap, unsigned char *comment) {
    int n = 0, line = 1, bol = 1, skip_cpp = 0;
    const char *p = src;
    while (*p) {
        if (*p == '\n') {
            line++;
            bol = 1;
            p++;
            continue;
        }
        if (isspace((unsigned char)*p)) {
            p++;
            continue;
        }
        if (p[0] == '/' && p[1] == '*') {
            comment[line] |= 1;
            for (p += 2; *p && !(p[0] == '*' && p[1] == '/'); p++)
                if (*p == '\n') comment[++line] |= 4;
            comment[line] |= 2;
            if (*p) p += 2;
            continue;
        }
        if (p[0] == '/' && p[1] == '/') {
            comment[line] |= 3;
            while (*p && *p != '\n') p++;
            continue;
        }
        if (*p == '#' && bol) { /* a directive, with its continuation lines */
            const char *d = p + 1;
            while (*d == ' ' || *d == '\t') d++;
            if (!strncmp(d, "ifdef __cplusplus", 17)) skip_cpp = 1;
            else if (!strncmp(d, "endif", 5)) skip_cpp = 0;
            while (*p && *p != '\n') {
                if (p[0] == '\\' && p[1] == '\n') {
                    line++;
                    p++;
                }
                p++;
            }
            continue;
        }
        bol = 0;
        if (skip_cpp) {
            p++;
            continue;
        }
        if (n == cap) return -1;
        toks[n].line = line;
        if (isalnum((unsigned char)*p) || *p == '_') {
            size_t k = 0;
            while ((isalnum((unsigned char)*p) || *p == '_') && k + 1 < sizeof toks[n].text)
                toks[n].text[k++] = *p++;
            toks[n].text[k] = 0;
        } else if (*p == '"' || *p == '\'') {
            char q = *p++;
            while (*p && *p != q) p += (*p == '\\' && p[1]) ? 2 : 1;
            if (*p) p++;
            strcpy(toks[n].text, "\"\"");
        } else {
            toks[n].text[0] = *p++;
            toks[n].text[1] = 0;
        }
        n++;
    }
    return n;
}

static int is_ident(const char *s) { return isalpha((unsigned char)*s) || *s == '_'; }

/* A comment documents lines [first, last] when it ends on the line above or starts on one of
 * them. */
static int commented(int first, int last) {
    if (first > 1 && (g_comment[first - 1] & 2)) return 1;
    for (int l = first; l <= last; l++)
        if (g_comment[l] & 1) return 1;
    return 0;
}

/* Finds the file-scope function declarations among a header's statements. */
static int scan_header(const char *dir, const char *fname) {
    char path[1024];
    char *src;
    token *toks;
    int n, start = 0, depth = 0, nlines, prev_fn = -1, prev_last = -10;
    src = snprintf(path, sizeof path, "%s/%s", dir, fname) < (int)sizeof path ? read_file(path) : NULL;
    if (!src) {
        fprintf(stderr, "test_surface: cannot read %s\n", path);
        return 1;
    }
    nlines = count_lines(src);
    g_comment = calloc((size_t)nlines + 2, 1);
    toks = malloc(sizeof *toks * MAX_TOKENS);
    n = tokenize(src, toks, MAX_TOKENS, g_comment);
    if (n < 0) {
        fprintf(stderr, "test_surface: %s has too many tokens\n", path);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        const char *t = toks[i].text;
        if (*t == '{') depth++;
        else if (*t == '}') depth--;
        if (depth != 0 || *t != ';') continue;
        /* a statement: toks[start..i] */
        int first = toks[start].line, last = toks[i].line, paren = 0, fn = -1, api = 0;
        int is_typedef = !strcmp(toks[start].text, "typedef");
        for (int k = start; k < i && !is_typedef; k++) {
            const char *s = toks[k].text;
            if (!strcmp(s, "LDT_API")) api = 1;
            if (*s == '(') paren++;
            else if (*s == ')') paren--;
            else if (paren == 0 && fn < 0 && is_ident(s) && toks[k + 1].text[0] == '(' &&
                     strcmp(s, "__attribute__") != 0)
                fn = k;
        }
        if (fn >= 0) {
            decl *d = &g_decls[g_ndecls++];
            memcpy(d->name, toks[fn].text, sizeof d->name);
            if (snprintf(d->file, sizeof d->file, "%s", fname) >= (int)sizeof d->file) return 1;
            d->first_line = first;
            d->last_line = last;
            d->has_api = api;
            /* its own comment, or the one heading its block of consecutive declarations */
            d->documented = commented(first, last) ||
                            (prev_fn >= 0 && prev_last == first - 1 && g_decls[prev_fn].documented);
            prev_fn = (int)(d - g_decls);
            prev_last = last;
        } else {
            prev_fn = -1;
        }
        start = i + 1;
        if (g_ndecls == MAX_NAMES) break;
    }
    free(toks);
    free(g_comment);
    free(src);
    return 0;
}

static int read_exports(const char *nm, const char *lib) {
    char cmd[2048], line[1024];
    FILE *f;
    snprintf(cmd, sizeof cmd, "'%s' -D --defined-only '%s'", nm, lib);
    f = popen(cmd, "r");
    if (!f) return 1;
    while (fgets(line, sizeof line, f)) {
        /* "0000000000012340 T ldt_layout" (some lines have no address) */
        char a[256], b[256], c[256];
        int k = sscanf(line, "%255s %255s %255s", a, b, c);
        const char *name = k == 3 ? c : k == 2 ? b : NULL;
        if (!name || g_nexported == MAX_NAMES) continue;
        snprintf(g_exported[g_nexported++], sizeof g_exported[0], "%s", name);
    }
    return pclose(f) != 0;
}

static int declared(const char *name) {
    for (int i = 0; i < g_ndecls; i++)
        if (!strcmp(g_decls[i].name, name)) return 1;
    return 0;
}

static int exported(const char *name) {
    for (int i = 0; i < g_nexported; i++)
        if (!strcmp(g_exported[i], name)) return 1;
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(a, b); }

int main(int argc, char **argv) {
    const char *lib = argc > 1 ? argv[1] : LDT_SHARED_LIB;
    const char *inc = argc > 2 ? argv[2] : LDT_INCLUDE_DIR;
    const char *nm = argc > 3 ? argv[3] : LDT_NM;
    char headers[64][64];
    int nheaders = 0, bad_export = 0, bad_missing = 0, bad_api = 0, bad_doc = 0;
    DIR *d = opendir(inc);
    struct dirent *e;
    if (!d) {
        fprintf(stderr, "test_surface: cannot open %s\n", inc);
        return 1;
    }
    while ((e = readdir(d)) && nheaders < 64) {
        size_t len = strlen(e->d_name);
        if (len > 2 && len < 64 && !strcmp(e->d_name + len - 2, ".h"))
            memcpy(headers[nheaders++], e->d_name, len + 1);
    }
    closedir(d);
    qsort(headers, (size_t)nheaders, sizeof headers[0], by_name);
    for (int i = 0; i < nheaders; i++)
        if (scan_header(inc, headers[i])) return 1;
    if (read_exports(nm, lib)) {
        fprintf(stderr, "test_surface: '%s -D --defined-only %s' failed\n", nm, lib);
        return 1;
    }
    /* a parser that found nothing would pass everything */
    if (g_ndecls < 100 || g_nexported == 0) {
        fprintf(stderr, "test_surface: found only %d declarations in %s and %d symbols in %s\n",
                g_ndecls, inc, g_nexported, lib);
        return 1;
    }
    qsort(g_exported, (size_t)g_nexported, sizeof g_exported[0], by_name);
    for (int i = 0; i < g_nexported; i++)
        if (!declared(g_exported[i])) {
            if (!bad_export++)
                printf("exported by %s but declared in no public header (make it static, or "
                       "internal: ldt__ and no LDT_API):\n", lib);
            printf("  %s\n", g_exported[i]);
        }
    for (int i = 0; i < g_ndecls; i++)
        if (!g_decls[i].has_api) {
            if (!bad_api++) printf("public declarations without LDT_API (ldt/export.h):\n");
            printf("  %s:%d %s\n", g_decls[i].file, g_decls[i].first_line, g_decls[i].name);
        }
    for (int i = 0; i < g_ndecls; i++)
        if (!exported(g_decls[i].name)) {
            if (!bad_missing++) printf("declared but not exported by %s:\n", lib);
            printf("  %s:%d %s\n", g_decls[i].file, g_decls[i].first_line, g_decls[i].name);
        }
    for (int i = 0; i < g_ndecls; i++)
        if (!g_decls[i].documented) {
            if (!bad_doc++)
                printf("public functions without a comment above them (or heading their "
                       "block of declarations):\n");
            printf("  %s:%d %s\n", g_decls[i].file, g_decls[i].first_line, g_decls[i].name);
        }
    printf("%d public functions in %d headers, %d dynamic symbols; %d exported but not declared, "
           "%d declared but not exported, %d without LDT_API, %d without a comment\n",
           g_ndecls, nheaders, g_nexported, bad_export, bad_missing, bad_api, bad_doc);
    return bad_export || bad_missing || bad_api || bad_doc;
}
