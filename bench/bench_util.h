/* Benchmark helpers: a monotonic clock, statistics over repetitions, and a results collector
 * that prints a human table or the one-line JSON object the benchmark contract asks for:
 * {"bench":"<name>","results":[{"name":..,"value":..,"unit":..,"params":{..}}]}. */
#ifndef LDT_BENCH_UTIL_H
#define LDT_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>

typedef struct bench_opts {
    int json;  /* --json: stdout gets the JSON object only */
    int quick; /* --quick: smaller sizes and fewer repetitions */
    int nfiles;         /* the files after the name (calibrate_refit's two calibrations) */
    const char *files[2];
} bench_opts;

typedef struct bench_results bench_results;

/* Seconds on the monotonic clock. */
double bench_now(void);
/* CPU seconds of the whole process (every thread) so far: CLOCK_PROCESS_CPUTIME_ID. */
double bench_cpu_now(void);

/* An interval on both clocks: wall seconds and the process's CPU seconds over it. Every
 * timing figure `<name>` comes with `<name>_cpu`: the same formula with the interval's CPU
 * seconds divided by the working threads in place of its wall seconds, so on an idle machine
 * with every working thread on a core the two agree, and a loaded machine (threads waiting
 * for a core) shows as a _cpu figure well below its wall figure's time. */
typedef struct bench_clock {
    double wall, cpu;
} bench_clock;
/* Both clocks now. */
bench_clock bench_clock_now(void);
/* Wall and CPU seconds since t0; cpu divided by `threads` (the working threads, >= 1). */
bench_clock bench_clock_since(bench_clock t0, int threads);
/* Median of n values (sorts them in place); 0 for n == 0. */
double bench_median(double *v, int n);

bench_results *bench_results_create(const char *bench);
void bench_results_destroy(bench_results *r);
/* Adds a result and returns its index (for params), or -1 when out of memory. */
int bench_add(bench_results *r, const char *name, double value, const char *unit);
/* Adds `name` (wall) and `name`_cpu (cpu) in one unit; returns the first's index, and params
 * set on it go to both. -1 when out of memory. */
int bench_add_timed(bench_results *r, const char *name, double wall, double cpu,
                    const char *unit);
/* Params apply to result idx (and to its _cpu twin when bench_add_timed made it). */
void bench_param_int(bench_results *r, int idx, const char *key, int64_t v);
void bench_param_str(bench_results *r, int idx, const char *key, const char *v);
/* The value of the first result called name whose params have every key=value given
 * (keys and values as int64 pairs, nkv pairs); returns 0 if none matched. */
int bench_find(const bench_results *r, const char *name, double *value, int nkv, ...);

/* "Progress: ..." lines on stderr, so stdout stays a table or JSON. */
void bench_note(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* A goal, printed under the human table as "goal: <text>: met" or "not met" (never a failure:
 * timings on a shared machine are evidence, not tests). Not in the JSON. */
void bench_goal(bench_results *r, int met, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* Medians of interleaved rounds: bench_median over each column of a rounds x k table. */
typedef struct bench_rounds {
    int k, n, cap;
    double *v; /* cap x k, row-major: round i's k figures */
} bench_rounds;
/* A table of up to `cap` rounds of k figures; 0, or -1 when out of memory. */
int bench_rounds_init(bench_rounds *t, int k, int cap);
/* Appends one round's k figures (ignored past cap). */
void bench_rounds_add(bench_rounds *t, const double *figures);
/* The median of figure j over the rounds so far. */
double bench_rounds_median(const bench_rounds *t, int j);
void bench_rounds_free(bench_rounds *t);

void bench_print_table(const bench_results *r, FILE *f);
/* One line; returns 0, or -1 when out of memory. */
int bench_print_json(const bench_results *r, FILE *f);

#endif
