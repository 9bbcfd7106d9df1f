/* Internal: the communicator of a collective instruction's group of mesh dims. */
#ifndef LDT_EXEC_GROUPS_H
#define LDT_EXEC_GROUPS_H

#include "ldt/exec.h"
#include "planner/program.h"

/* The group over x's mesh dims that holds this rank, made at the first ask (every member
 * asks at the same instruction) and kept in cache[bitmask of the dims]. */
ldt_status ldt__instr_group(ldt_comm *world, const ldt_mesh *mesh, ldt_comm **cache,
                            const ldt__instr *x, ldt_comm **out);

/* Runs program p on this rank (exec/interp.c) with one buffer per value, values with
 * ext[v] != NULL (ext may be NULL) in the given buffers (nothing is allocated for them). ctx
 * (may be NULL) names nodes in errors and serves custom ops. */
ldt_status ldt__program_run_into(ldt_comm *world, const ldt_mesh *mesh, const ldt_ctx *ctx,
                                 const ldt__program *p, void *const *ext);

#endif
