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
} bench_opts;

typedef struct bench_results bench_results;

/* Seconds on the monotonic clock. */
double bench_now(void);
/* Median of n values (sorts them in place); 0 for n == 0. */
double bench_median(double *v, int n);

bench_results *bench_results_create(const char *bench);
void bench_results_destroy(bench_results *r);
/* Adds a result and returns its index (for params), or -1 when out of memory. */
int bench_add(bench_results *r, const char *name, double value, const char *unit);
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

void bench_print_table(const bench_results *r, FILE *f);
/* One line; returns 0, or -1 when out of memory. */
int bench_print_json(const bench_results *r, FILE *f);

#endif
