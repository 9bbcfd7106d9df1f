/* Internal: what the CUDA backend needs of an NCCL communicator beyond comm.h (exec/comm_nccl.c).
 * comm.h's calls wait for their collective; a captured step instead enqueues its collectives
 * on its own communication stream and learns of failures when it waits for the step. */
#ifndef LDT_EXEC_COMM_NCCL_H
#define LDT_EXEC_COMM_NCCL_H

#include <stdint.h>

#include "exec/comm.h"

/* Whether c is an NCCL communicator. */
int ldt__nccl_is(const ldt_comm *c);
/* Enqueues op (consistent as comm.c would check it; device pointers) on stream (a
 * cudaStream_t) and returns without waiting: capturable. */
ldt_status ldt__nccl_enqueue(ldt_comm *c, const ldt__op *op, void *stream);
/* ncclGroupStart / ncclGroupEnd around several enqueues (one launch for them all). */
ldt_status ldt__nccl_group_start(void);
ldt_status ldt__nccl_group_end(void);
/* LDT_OK, or the asynchronous error c's communicator reports (it is then aborted). */
ldt_status ldt__nccl_check(ldt_comm *c);
/* Aborts c's communicator (a peer did not come within the timeout): every later call fails,
 * and a kernel waiting on a peer returns. */
void ldt__nccl_abort(ldt_comm *c);
/* c's timeout in milliseconds. */
int64_t ldt__nccl_timeout_ms(const ldt_comm *c);

#endif
