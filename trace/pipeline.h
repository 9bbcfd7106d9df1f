/* Internal: a trace's pipeline stages (docs/pipeline.md). Ops are tagged by runs: a segment
 * starts at a node id and tags every node up to the next one, so recording stays as it is. */
#ifndef LDT_TRACE_PIPELINE_H
#define LDT_TRACE_PIPELINE_H

#include "trace/trace.h"

enum { LDT__PP_NONE = 0, LDT__PP_FWD = 1, LDT__PP_BWD = 2 };

/* The stage tag of one node: virtual stage (-1: none), micro-batch and phase. */
typedef struct ldt__pp_tag {
    int32_t stage;
    int32_t micro;
    int32_t phase;
} ldt__pp_tag;

typedef struct ldt__pp_seg {
    int64_t from; /* first node id it tags */
    ldt__pp_tag tag;
} ldt__pp_seg;

typedef struct ldt__pp {
    int dim;        /* the mesh dim named "pp" */
    int P, V, M;    /* ranks on it, chunks per rank, micro-batches */
    ldt_pipe_schedule schedule;
    ldt__pp_tag cur; /* what ops recorded now get */
    ldt__pp_seg *seg;
    int64_t nseg, cap;
    /* random ops in the micro-batches' forwards (ldt__pp_rng_take): the stream offset at
     * ldt_pipeline_begin, the next single-device op's offset, the micro-batch taking */
    uint64_t rng_base, rng_pos;
    int rng_micro;
} ldt__pp;

/* Sets the tag of the nodes recorded from now on (a no-op without a pipeline). */
void ldt__pp_set(ldt_ctx *ctx, ldt__pp_tag tag);
/* The tag node id carries (stage -1 without a pipeline or a tag). */
ldt__pp_tag ldt__pp_tag_of(const ldt_ctx *ctx, int64_t id);
/* The stream offset and global index base of a random op over numel elements recorded now
 * (the context's offset advanced). In a micro-batch's forward, micro-batch i of M is rows
 * [i b, (i + 1) b) of the global batch, so its op draws elements [i n, (i + 1) n) of the
 * single-device op over M n elements: that op's offset, and base i n added to each element's
 * index (the dropout and attention kernels' attrs i[3]); the micro-batches take the
 * single-device ops' offsets in turn. Elsewhere base 0. Refused (on the context) when M n
 * overflows. */
ldt_status ldt__pp_rng_take(ldt_ctx *ctx, int64_t numel, uint64_t *offset, int64_t *base);
/* A hash of the schedule and every node's tag (0 without a pipeline), for the plan cache. */
uint64_t ldt__pp_hash(const ldt_ctx *ctx);

#endif
