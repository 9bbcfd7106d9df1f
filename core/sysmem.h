/* Internal: this machine's physical memory, for refusing up front what cannot fit; and what
 * other processes did with its cores while a measurement ran. */
#ifndef LDT_CORE_SYSMEM_H
#define LDT_CORE_SYSMEM_H

/* Bytes of physical memory, or 0 when the system does not say. */
double ldt__machine_memory_bytes(void);

/* The machine's cores during an interval: ldt__host_watch_start, the work, then
 * ldt__host_watch_stop. others_cpu_s is the CPU time the machine's cores spent busy (user,
 * nice, system, interrupts, and time a hypervisor gave to other guests) less this process's
 * own (user + system); others_share that over wall_s x cores. known is 0 where the system
 * does not say (no /proc/stat): then only wall_s, own_cpu_s and cores hold. */
typedef struct ldt__host_watch {
    int known, cores;
    double wall_s, own_cpu_s, others_cpu_s, others_share;
    double busy0; /* at start: the machine's busy seconds */
    /* with probe set before start: the cores' round trip (ldt__core_round_trip_ns) at start
     * and at stop; <= 0 where it could not be measured */
    int probe;
    double round_trip_ns[2];
} ldt__host_watch;
void ldt__host_watch_start(ldt__host_watch *w);
void ldt__host_watch_stop(ldt__host_watch *w);

/* Nanoseconds of one round trip of a cache line between two of the machine's cores (two
 * threads pinned to the first two CPUs this process may use, else CPUs 0 and 1, passing a
 * counter back and forth): the median of five runs of up to 20000 trips or 20 ms each (a
 * run of under 100 trips by then goes on to 100, or 250 ms: on busy cores the threads meet
 * only when both are scheduled, and a trip then costs up to 2.5 ms), after one more that
 * wakes the cores. What every message between ranks on different cores pays; a
 * virtual machine whose cores the host moves shows it changing (about 110 and 500 ns on one
 * 2-core guest, each lasting seconds to minutes). -1 with
 * fewer than two CPUs, where threads cannot be pinned, or where three of the runs made under
 * 100 trips in 250 ms. */
double ldt__core_round_trip_ns(void);
/* Whether round trips a and b (<= 0: unknown) differ by more than ROUND_TRIP_SHIFT (1.5x): the
 * cores' links changed speed between them. 0 when either is unknown. */
#define LDT__ROUND_TRIP_SHIFT 1.5
int ldt__round_trip_shifted(double a, double b);

#endif
