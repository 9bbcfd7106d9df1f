/* This machine's physical memory, and its cores' use by others (core/sysmem.h). */
#include <stdio.h>
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

void ldt__host_watch_start(ldt__host_watch *w) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
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
    w->known = busy >= 0;
    if (!w->known) return;
    /* the kernel's ticks and this process's rusage are counted apart: a few ticks of
     * difference either way, never less than none */
    w->others_cpu_s = busy - w->busy0 - w->own_cpu_s;
    if (w->others_cpu_s < 0) w->others_cpu_s = 0;
    w->others_share = w->wall_s > 0 ? w->others_cpu_s / (w->wall_s * w->cores) : 0;
}
