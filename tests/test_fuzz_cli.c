/* Generated bad command lines: every one must end with a non-zero exit status (not a signal)
 * and a non-empty message, within 10 s, with no sanitizer report. A plain program (each case
 * is a process of its own); the seed is printed, LDT_FUZZ_SEED picks another, LDT_FUZZ_COUNT
 * another count (default 500).
 *
 * Each case starts from a command line that is valid but for the mutation made to it, and
 * the mutations only make lines that are wrong whatever the rest says: a flag's value
 * replaced by one its type never accepts, an unknown flag, a value-taking flag left without
 * its value, an unknown command or subcommand, a stray argument. The base lines are cheap
 * (a few steps, small sizes), so a refusal that comes late still comes within the limit.
 *
 * Usage: test_fuzz_cli LDT_PATH */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { T_POS_INT, T_NONNEG_INT, T_MESH, T_SHAPE, T_PLACEMENTS, T_DTYPE, T_MODEL, T_PINS, T_REAL01,
       T_REAL_POS, T_DEVICE, T_BACKEND, T_PATH_IN, T_OPTIMIZER, T_NTYPES };

/* values each type never accepts */
static const char *const k_bad[T_NTYPES][12] = {
    [T_POS_INT] = {"", "0", "-5", "1.5", "abc", "99999999999999999999", "1e3", "0x10", " ", "7q", NULL},
    [T_NONNEG_INT] = {"", "-1", "2.5", "zz", "99999999999999999999", "1e2", "--", NULL},
    [T_MESH] = {"", "0", "2x0", "dp=", "=2", "dp=2,dp=2", "a", "-4", "99999999999999999999", "2x", "x2", NULL},
    [T_SHAPE] = {"", "x", "-1", "1,,2", "99999999999999999999", "3,-2", "2.5", ",", NULL},
    [T_PLACEMENTS] = {"", "Q", "S9", "IS0:0", "Pfoo", "S", "S-1", "R,R,R,R,R,R,R,R,R,R", ",", NULL},
    [T_DTYPE] = {"", "f7", "int", "f32x", "complex", NULL},
    [T_MODEL] = {"", "cnn", "gpt2x", "mlp ", NULL},
    [T_PINS] = {"", "megatronx", "zzz", NULL},
    [T_REAL01] = {"", "nan", "inf", "x", "1e999", "1.5", "-0.5", "0.1.2", NULL},
    [T_REAL_POS] = {"", "nan", "-1", "0", "x", "1e999", NULL},
    [T_DEVICE] = {"", "tpu", "cuda0", NULL},
    [T_BACKEND] = {"", "pigeon", "mpix", NULL},
    [T_PATH_IN] = {"", "/nonexistent/ldt-fuzz/none", "/dev/null/x", NULL},
    [T_OPTIMIZER] = {"", "lamb", "adam", NULL},
};

typedef struct {
    const char *name;
    int type;
} flag;

typedef struct {
    const char *base;   /* a valid line (without "ldt") */
    flag flags[12];     /* flags whose values may be replaced (each present in base) */
} templ;

static const templ k_templates[] = {
    {"layout --mesh 2x3 --shape 7,5 --placements S0,S1",
     {{"mesh", T_MESH}, {"shape", T_SHAPE}, {"placements", T_PLACEMENTS}}},
    {"layout --mesh 4 --shape 8 --placements S0 --dtype f32 --json",
     {{"mesh", T_MESH}, {"shape", T_SHAPE}, {"placements", T_PLACEMENTS}, {"dtype", T_DTYPE}}},
    {"redistribute --mesh 2x2 --shape 8,6 --from S0,R --to R,S1",
     {{"mesh", T_MESH}, {"shape", T_SHAPE}, {"from", T_PLACEMENTS}, {"to", T_PLACEMENTS}}},
    {"redistribute --mesh 4 --shape 9 --from S0 --to R --run --dtype f64",
     {{"mesh", T_MESH}, {"shape", T_SHAPE}, {"from", T_PLACEMENTS}, {"to", T_PLACEMENTS}, {"dtype", T_DTYPE}}},
    {"plan --model mlp --mesh tp=4 --pins megatron --layers 2 --hidden 16",
     {{"model", T_MODEL}, {"mesh", T_MESH}, {"pins", T_PINS}, {"layers", T_POS_INT}, {"hidden", T_POS_INT}}},
    {"plan --model gpt --mesh dp=2,tp=2 --layers 1 --hidden 16 --heads 2 --seq 8 --vocab 16 --batch 2",
     {{"mesh", T_MESH}, {"layers", T_POS_INT}, {"hidden", T_POS_INT}, {"heads", T_POS_INT}, {"seq", T_POS_INT},
      {"vocab", T_POS_INT}, {"batch", T_POS_INT}}},
    {"plan --model mlp --mesh 4 --layers 1 --hidden 8 --program --rank 1",
     {{"mesh", T_MESH}, {"rank", T_NONNEG_INT}, {"hidden", T_POS_INT}}},
    {"run --model mlp --mesh 2 --layers 1 --hidden 8 --steps 2 --dropout 0.1",
     {{"model", T_MODEL}, {"mesh", T_MESH}, {"steps", T_POS_INT}, {"dropout", T_REAL01}, {"hidden", T_POS_INT}}},
    {"train --mesh 2 --layers 1 --hidden 16 --heads 2 --seq 8 --batch 2 --steps 2 --sample 0 --lr 0.01 "
     "--dropout 0.1 --dtype f32 --optimizer sgd --seed 3",
     {{"mesh", T_MESH}, {"steps", T_POS_INT}, {"lr", T_REAL_POS}, {"dropout", T_REAL01}, {"dtype", T_DTYPE},
      {"optimizer", T_OPTIMIZER}, {"seed", T_NONNEG_INT}, {"sample", T_NONNEG_INT}, {"seq", T_POS_INT},
      {"batch", T_POS_INT}}},
    {"train --mesh 2 --layers 1 --hidden 16 --heads 2 --seq 8 --batch 2 --steps 1 --sample 0 --device cpu "
     "--backend threads",
     {{"device", T_DEVICE}, {"backend", T_BACKEND}, {"heads", T_POS_INT}}},
    {"train --mesh 2 --layers 1 --hidden 16 --heads 2 --seq 8 --batch 2 --steps 1 --sample 0 --data /etc/hostname",
     {{"data", T_PATH_IN}}},
    {"step-bench --mesh 2 --layers 1 --hidden 16 --heads 2 --seq 8 --batch 2 --steps 1",
     {{"mesh", T_MESH}, {"steps", T_POS_INT}, {"hidden", T_POS_INT}}},
    {"meta-init --model gpt --layers 2 --hidden 32 --heads 4 --vocab 64 --seq 16 --mesh dp=2,tp=2 --pins megatron",
     {{"model", T_MODEL}, {"mesh", T_MESH}, {"pins", T_PINS}, {"layers", T_POS_INT}, {"vocab", T_POS_INT}}},
    {"rand --mesh 2x2 --shape 6,4 --placements S0,R --seed 7",
     {{"mesh", T_MESH}, {"shape", T_SHAPE}, {"placements", T_PLACEMENTS}}},
    {"spec --mesh 2x4 --shape 4,8,8 --placements R,S0",
     {{"mesh", T_MESH}, {"shape", T_SHAPE}, {"placements", T_PLACEMENTS}}},
    {"calibrate --mesh 2", {{"mesh", T_MESH}}},
    {"ckpt info /nonexistent/ldt-fuzz-ckpt", {{NULL, 0}}},
    {"info", {{NULL, 0}}},
};

static uint64_t g_state;

static uint64_t next(void) {
    uint64_t z = (g_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int pick(int n) { return (int)(next() % (uint64_t)n); }

/* Splits a line at spaces into argv (the line is modified). */
static int split(char *line, char **argv, int cap) {
    int n = 0;
    for (char *t = strtok(line, " "); t && n < cap - 1; t = strtok(NULL, " ")) argv[n++] = t;
    argv[n] = NULL;
    return n;
}

static int count_bad(int type) {
    int n = 0;
    while (k_bad[type][n]) n++;
    return n;
}

typedef struct {
    char *argv[64];
    int argc;
    char line[512];
    char *owned; /* a long value, freed by the caller */
    char what[160];
} fcase;

/* Makes case c from a template and one mutation. */
static void make_case(fcase *c, char *ldt) {
    const templ *t = &k_templates[pick((int)(sizeof k_templates / sizeof k_templates[0]))];
    int nflags = 0;
    while (nflags < 12 && t->flags[nflags].name) nflags++;
    snprintf(c->line, sizeof c->line, "%s", t->base);
    c->owned = NULL;
    c->argv[0] = ldt;
    c->argc = 1 + split(c->line, c->argv + 1, 60);
    int kind = pick(nflags ? 10 : 4);
    if (kind >= 4) { /* a flag's value replaced by one its type refuses (kinds 4..9: most cases) */
        const flag *f = &t->flags[pick(nflags)];
        for (int i = 1; i + 1 < c->argc; i++)
            if (strncmp(c->argv[i], "--", 2) == 0 && strcmp(c->argv[i] + 2, f->name) == 0) {
                if (pick(8) == 0 && f->type != T_PATH_IN) { /* a 100,000-character value */
                    c->owned = malloc(100001);
                    memset(c->owned, f->type == T_MESH || f->type == T_SHAPE ? '7' : 'S', 100000);
                    c->owned[100000] = '\0';
                    if (f->type == T_SHAPE || f->type == T_MESH) c->owned[50000] = ',';
                    c->argv[i + 1] = c->owned;
                    snprintf(c->what, sizeof c->what, "--%s <100000 characters>", f->name);
                } else {
                    c->argv[i + 1] = (char *)k_bad[f->type][pick(count_bad(f->type))];
                    snprintf(c->what, sizeof c->what, "--%s '%s'", f->name, c->argv[i + 1]);
                }
                break;
            }
    } else if (kind == 0) { /* an unknown flag, anywhere after the command */
        int at = 2 + pick(c->argc - 1);
        if (at > c->argc) at = c->argc;
        memmove(&c->argv[at + 1], &c->argv[at], (size_t)(c->argc - at + 1) * sizeof c->argv[0]);
        c->argv[at] = pick(2) ? "--zzz-not-a-flag" : "--json=1";
        c->argc++;
        snprintf(c->what, sizeof c->what, "unknown flag %s", c->argv[at]);
    } else if (kind == 1 && nflags) { /* a value-taking flag left without its value, at the end */
        const flag *f = &t->flags[pick(nflags)];
        static char buf[64];
        snprintf(buf, sizeof buf, "--%s", f->name);
        c->argv[c->argc++] = buf;
        c->argv[c->argc] = NULL;
        snprintf(c->what, sizeof c->what, "--%s without a value", f->name);
    } else if (kind == 2) { /* an unknown command (or ckpt subcommand) */
        c->argv[1] = strcmp(c->argv[1], "ckpt") == 0 ? c->argv[1] : (pick(2) ? "layot" : "");
        if (strcmp(c->argv[1], "ckpt") == 0) c->argv[2] = "mrege";
        snprintf(c->what, sizeof c->what, "unknown command '%s'", c->argv[1]);
    } else { /* a stray argument */
        c->argv[c->argc++] = "stray";
        c->argv[c->argc] = NULL;
        snprintf(c->what, sizeof c->what, "a stray argument");
    }
}

/* Runs argv with a 10 s limit; returns its wait status (or -1 on a timeout), its output. */
static int run(char *const *argv, char *out, size_t cap) {
    int fd[2];
    if (pipe(fd) != 0) return -2;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    size_t n = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int status = 0, done = 0;
    for (;;) {
        fd_set rs;
        struct timeval tv = {0, 100000};
        FD_ZERO(&rs);
        FD_SET(fd[0], &rs);
        if (select(fd[0] + 1, &rs, NULL, NULL, &tv) > 0) {
            char buf[4096];
            ssize_t r = read(fd[0], buf, sizeof buf);
            if (r > 0) {
                size_t k = (size_t)r < cap - 1 - n ? (size_t)r : cap - 1 - n;
                memcpy(out + n, buf, k);
                n += k;
            } else if (r == 0) {
                break;
            }
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) > 10.0) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            done = -1;
            break;
        }
    }
    close(fd[0]);
    out[n] = '\0';
    if (done == -1) return -1;
    waitpid(pid, &status, 0);
    return status;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_fuzz_cli LDT_PATH\n");
        return 2;
    }
    uint64_t seed = 20261125;
    long count = 500;
    if (getenv("LDT_FUZZ_SEED")) seed = strtoull(getenv("LDT_FUZZ_SEED"), NULL, 0);
    if (getenv("LDT_FUZZ_COUNT")) count = strtol(getenv("LDT_FUZZ_COUNT"), NULL, 10);
    g_state = seed;
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    printf("fuzz: %ld bad command lines from seed %llu (LDT_FUZZ_SEED=%llu to repeat)\n", count,
           (unsigned long long)seed, (unsigned long long)seed);
    fflush(stdout);
    static char out[1 << 16];
    int failed = 0;
    for (long k = 0; k < count; k++) {
        fcase c;
        make_case(&c, argv[1]);
        int st = run(c.argv, out, sizeof out);
        const char *why = NULL;
        if (st == -1) why = "did not end within 10 s";
        else if (st == -2) why = "could not be started";
        else if (WIFSIGNALED(st)) why = "was killed by a signal";
        else if (WEXITSTATUS(st) == 0) why = "exited 0";
        else if (out[0] == '\0') why = "printed no message";
        else if (strstr(out, "Sanitizer") || strstr(out, "runtime error:")) why = "made a sanitizer report";
        if (why) {
            failed++;
            printf("FAIL case %ld (%s) %s:", k, c.what, why);
            for (int i = 1; i < c.argc; i++)
                printf(" %.60s%s", c.argv[i], strlen(c.argv[i]) > 60 ? "..." : "");
            printf("\n  output: %.600s\n", out);
        }
        free(c.owned);
    }
    printf("fuzz: %ld lines, %d failed (seed %llu)\n", count, failed, (unsigned long long)seed);
    return failed ? 1 : 0;
}
