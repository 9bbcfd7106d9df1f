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
} ldt__host_watch;
void ldt__host_watch_start(ldt__host_watch *w);
void ldt__host_watch_stop(ldt__host_watch *w);

#endif
