/* Internal: this machine's physical memory, for refusing up front what cannot fit. */
#ifndef LDT_CORE_SYSMEM_H
#define LDT_CORE_SYSMEM_H

/* Bytes of physical memory, or 0 when the system does not say. */
double ldt__machine_memory_bytes(void);

#endif
