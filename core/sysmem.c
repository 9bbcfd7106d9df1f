/* This machine's physical memory, and its cores' use by others (core/sysmem.h). */
#define _GNU_SOURCE /* sched_getaffinity, pthread_setaffinity_np */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/sysmem.h"

double ldt__machine_memory_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0;
}

/* Seconds every core together spent busy since boot (/proc/stat's first line: user, nice,
 * system, idle, iowait, irq, softirq, steal in clock ticks; idle and iowait are not busy),
 * or -1 when it cannot be read. */
static double machine_busy_s(void) {
    unsigned long long v[8] = {0};
    long hz = sysconf(_SC_CLK_TCK);
    FILE *f = fopen("/proc/stat", "r");
    int got;
    if (!f) return -1;
    got = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                 &v[6], &v[7]);
    fclose(f);
    if (got < 4 || hz <= 0) return -1;
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)hz;
}

static double own_cpu_s(void) {
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
    return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + (double)u.ru_stime.tv_sec +
           u.ru_stime.tv_usec * 1e-6;
}

static double mono_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* The round trip probe: "ping" (a thread of its own) writes 2i+1, "pong" answers 2i+2. */
typedef struct probe {
    _Alignas(64) _Atomic long turn;
    _Alignas(64) _Atomic int stop;
    int cpu[2], pinned[2];
    long trips;
    double seconds;
} probe;

static int pin_self(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

static void *probe_pong(void *arg) {
    probe *p = arg;
    long want = 1;
    p->pinned[1] = pin_self(p->cpu[1]);
    for (;;) {
        while (atomic_load_explicit(&p->turn, memory_order_acquire) != want)
            if (atomic_load_explicit(&p->stop, memory_order_relaxed)) return NULL;
        atomic_store_explicit(&p->turn, want + 1, memory_order_release);
        want += 2;
    }
}

#define PROBE_TRIPS 20000
#define PROBE_RUN_S 0.02
#define PROBE_MIN_TRIPS 100
/* a run that has not made PROBE_MIN_TRIPS goes on up to this long (busy cores: the two
 * threads meet only when both are scheduled) */
#define PROBE_MAX_S 0.25

/* Whether a run started at t0 that has made `done` trips should end. */
static int probe_over(double t0, long done) {
    double t = mono_s() - t0;
    return t > PROBE_MAX_S || (t > PROBE_RUN_S && done >= PROBE_MIN_TRIPS);
}

static void *probe_ping(void *arg) {
    probe *p = arg;
    double t0;
    long i = 0;
    p->pinned[0] = pin_self(p->cpu[0]);
    t0 = mono_s();
    for (; i < PROBE_TRIPS; i++) {
        unsigned spins = 0;
        atomic_store_explicit(&p->turn, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&p->turn, memory_order_acquire) != 2 * i + 2)
            if (++spins % 4096 == 0 && probe_over(t0, i)) goto out;
        if (i % 64 == 63 && probe_over(t0, i + 1)) {
            i++;
            break;
        }
    }
out:
    p->seconds = mono_s() - t0;
    p->trips = i;
    atomic_store_explicit(&p->stop, 1, memory_order_relaxed);
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double ldt__core_round_trip_ns(void) {
    int cpu[2] = {0, 1}, found = 0, ok = 0;
    double ns[5];
    cpu_set_t set;
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) return -1;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
            if (CPU_ISSET(c, &set)) cpu[found++] = c;
    if (found < 2) cpu[0] = 0, cpu[1] = 1; /* a process bound to one core (mpirun) */
    for (int r = -1; r < 5; r++) { /* run -1 wakes the cores up: not counted */
        probe *p = aligned_alloc(64, sizeof *p);
        pthread_t a, b;
        if (!p) return -1;
        atomic_init(&p->turn, 0);
        atomic_init(&p->stop, 0);
        p->cpu[0] = cpu[0];
        p->cpu[1] = cpu[1];
        p->pinned[0] = p->pinned[1] = 0;
        p->trips = 0;
        p->seconds = 0;
        if (pthread_create(&b, NULL, probe_pong, p) != 0) {
            free(p);
            return -1;
        }
        if (pthread_create(&a, NULL, probe_ping, p) != 0) {
            atomic_store(&p->stop, 1);
            pthread_join(b, NULL);
            free(p);
            return -1;
        }
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        if (r >= 0 && p->pinned[0] && p->pinned[1] && p->trips >= PROBE_MIN_TRIPS)
            ns[ok++] = 1e9 * p->seconds / (double)p->trips;
        free(p);
    }
    if (ok < 3) return -1;
    qsort(ns, (size_t)ok, sizeof ns[0], cmp_double);
    return ns[ok / 2];
}

int ldt__round_trip_shifted(double a, double b) {
    if (!(a > 0) || !(b > 0)) return 0;
    return (a > b ? a / b : b / a) > LDT__ROUND_TRIP_SHIFT;
}

void ldt__host_watch_start(ldt__host_watch *w) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    w->round_trip_ns[0] = w->round_trip_ns[1] = -1;
    if (w->probe) w->round_trip_ns[0] = ldt__core_round_trip_ns();
    w->cores = c > 0 ? (int)c : 1;
    w->others_cpu_s = w->others_share = 0;
    w->busy0 = machine_busy_s();
    w->known = w->busy0 >= 0;
    w->own_cpu_s = own_cpu_s();
    w->wall_s = mono_s();
}

void ldt__host_watch_stop(ldt__host_watch *w) {
    double busy = w->known ? machine_busy_s() : -1;
    w->wall_s = mono_s() - w->wall_s;
    w->own_cpu_s = own_cpu_s() - w->own_cpu_s;
    if (w->probe) w->round_trip_ns[1] = ldt__core_round_trip_ns(); /* after the figures above */
    w->known = busy >= 0;
    if (!w->known) return;
    /* the kernel's ticks and this process's rusage are counted apart: a few ticks of
     * difference either way, never less than none */
    w->others_cpu_s = busy - w->busy0 - w->own_cpu_s;
    if (w->others_cpu_s < 0) w->others_cpu_s = 0;
    w->others_share = w->wall_s > 0 ? w->others_cpu_s / (w->wall_s * w->cores) : 0;
}
