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
} ldt__pp;

/* Sets the tag of the nodes recorded from now on (a no-op without a pipeline). */
void ldt__pp_set(ldt_ctx *ctx, ldt__pp_tag tag);
/* The tag node id carries (stage -1 without a pipeline or a tag). */
ldt__pp_tag ldt__pp_tag_of(const ldt_ctx *ctx, int64_t id);
/* The stream offset of a random op over numel elements recorded now, the context's offset
 * advanced. Refused (on the context) in a pipeline's tagged forward: a micro-batch would have
 * to draw its rows of the single-device op's elements (a global index base in the dropout and
 * attention kernels), which is not built yet, and a pipelined backward with dropout was seen
 * to differ from one device even with one micro-batch (docs/pipeline.md, "Not done"). */
ldt_status ldt__pp_rng_take(ldt_ctx *ctx, int64_t numel, uint64_t *offset);
/* A hash of the schedule and every node's tag (0 without a pipeline), for the plan cache. */
uint64_t ldt__pp_hash(const ldt_ctx *ctx);

#endif
