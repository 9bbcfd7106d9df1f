/* This machine's physical memory (core/sysmem.h). */
#include <unistd.h>

#include "core/sysmem.h"

double ldt__machine_memory_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : 0;
}
