/* Pipeline stage tags on the trace (docs/pipeline.md): which virtual stage and micro-batch
 * each op belongs to, and the schedule the compile orders each rank's program by. */
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "core/error.h"
#include "kernels/common/philox.h"
#include "trace/pipeline.h"

void ldt__pp_free(ldt_ctx *ctx) {
    if (!ctx || !ctx->pp) return;
    free(ctx->pp->seg);
    free(ctx->pp);
    ctx->pp = NULL;
}

void ldt__pp_set(ldt_ctx *ctx, ldt__pp_tag tag) {
    ldt__pp *pp = ctx ? ctx->pp : NULL;
    if (!pp) return;
    if (pp->cur.stage == tag.stage && pp->cur.micro == tag.micro && pp->cur.phase == tag.phase) return;
    pp->cur = tag;
    if (pp->nseg && pp->seg[pp->nseg - 1].from == ctx->nnodes) { /* nothing recorded under the last */
        pp->seg[pp->nseg - 1].tag = tag;
        return;
    }
    if (pp->nseg == pp->cap) {
        int64_t cap = pp->cap ? 2 * pp->cap : 256;
        ldt__pp_seg *n = realloc(pp->seg, (size_t)cap * sizeof *n);
        if (!n) { /* the trace cannot be tagged: an error on it, as an op's */
            ldt__error(LDT_ERR_OUT_OF_MEMORY, "pipeline: out of memory for stage tags");
            ldt__trace_fail(ctx);
            return;
        }
        pp->seg = n;
        pp->cap = cap;
    }
    pp->seg[pp->nseg].from = ctx->nnodes;
    pp->seg[pp->nseg++].tag = tag;
}

ldt__pp_tag ldt__pp_tag_of(const ldt_ctx *ctx, int64_t id) {
    ldt__pp_tag none = {-1, 0, LDT__PP_NONE};
    const ldt__pp *pp = ctx ? ctx->pp : NULL;
    int64_t lo = 0, hi;
    if (!pp || !pp->nseg || id < pp->seg[0].from) return none;
    hi = pp->nseg - 1; /* the last segment starting at or before id */
    while (lo < hi) {
        int64_t mid = (lo + hi + 1) / 2;
        if (pp->seg[mid].from <= id) lo = mid;
        else hi = mid - 1;
    }
    return pp->seg[lo].tag;
}

uint64_t ldt__pp_hash(const ldt_ctx *ctx) {
    const ldt__pp *pp = ctx ? ctx->pp : NULL;
    int64_t head[5];
    uint64_t h;
    if (!pp) return 0;
    head[0] = pp->dim, head[1] = pp->P, head[2] = pp->V, head[3] = pp->M, head[4] = pp->schedule;
    h = XXH3_64bits(head, sizeof head);
    for (int64_t i = 0; i < pp->nseg; i++) { /* adjacent runs may repeat a tag: hash per node range */
        int64_t r[4] = {pp->seg[i].from, pp->seg[i].tag.stage, pp->seg[i].tag.micro, pp->seg[i].tag.phase};
        h = XXH3_64bits_withSeed(r, sizeof r, h);
    }
    return h | 1;
}

ldt_status ldt_pipeline_begin(ldt_ctx *ctx, ldt_pipe_schedule schedule, int chunks, int micro) {
    int d;
    int64_t P;
    ldt__pp *pp;
    if (!ctx) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "pipeline: the context is NULL");
    if (ldt_mesh_dim_index(ctx->mesh, "pp", &d) != LDT_OK) {
        ldt_clear_error();
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "pipeline: the mesh has no dim named pp; expected one (e.g. pp=2,dp=2)");
    }
    P = ldt_mesh_dim_size(ctx->mesh, d);
    if (schedule != LDT_PIPE_GPIPE && schedule != LDT_PIPE_1F1B && schedule != LDT_PIPE_INTERLEAVED)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "pipeline: schedule %d, expected gpipe, 1f1b or interleaved", (int)schedule);
    if (micro < 1 || micro > (1 << 20))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "pipeline: %d micro-batches, expected 1..2^20", micro);
    if (chunks < 1 || chunks > 64 || P * chunks > 4096 || (chunks > 1 && schedule != LDT_PIPE_INTERLEAVED))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "pipeline: %d model chunks per rank; expected 1, or 2..64 with the "
                 "interleaved schedule", chunks);
    if (schedule == LDT_PIPE_INTERLEAVED && micro % P != 0)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "pipeline: interleaved over pp=%lld needs the micro-batches (%d) to be a "
                 "multiple of %lld (Megatron's interleaved order)", (long long)P, micro, (long long)P);
    if (P > 64) LDT_FAIL(LDT_ERR_UNSUPPORTED, "pipeline: pp=%lld; up to 64 stages are supported", (long long)P);
    ldt__pp_free(ctx);
    if (!(pp = calloc(1, sizeof *pp))) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "pipeline: out of memory");
    pp->dim = d;
    pp->P = (int)P;
    pp->V = chunks;
    pp->M = micro;
    pp->schedule = schedule;
    pp->cur = (ldt__pp_tag){-1, 0, LDT__PP_NONE};
    pp->rng_base = pp->rng_pos = ctx->rng_offset;
    pp->rng_micro = -1;
    ctx->pp = pp;
    return LDT_OK;
}

ldt_status ldt__pp_rng_take(ldt_ctx *ctx, int64_t numel, uint64_t *offset, int64_t *base) {
    ldt__pp *pp = ctx->pp;
    int64_t full;
    *base = 0;
    if (!pp || pp->cur.stage < 0 || pp->cur.phase != LDT__PP_FWD) {
        *offset = ctx->rng_offset;
        ctx->rng_offset += ldt__rand_offset_advance(numel);
        return LDT_OK;
    }
    if (__builtin_mul_overflow(numel, (int64_t)pp->M, &full))
        LDT_FAIL(LDT_ERR_OVERFLOW, "pipeline: a random op over %lld elements x %d micro-batches overflows 64 bits",
                 (long long)numel, pp->M);
    if (pp->rng_micro != pp->cur.micro) { /* a micro-batch's forward begins: the ops from the first */
        pp->rng_micro = pp->cur.micro;
        pp->rng_pos = pp->rng_base;
    }
    *offset = pp->rng_pos;
    *base = numel * (int64_t)pp->cur.micro;
    pp->rng_pos += ldt__rand_offset_advance(full);
    if (pp->rng_pos > ctx->rng_offset) ctx->rng_offset = pp->rng_pos;
    return LDT_OK;
}

ldt_status ldt_pipeline_tag(ldt_ctx *ctx, int stage, int micro) {
    ldt__pp *pp = ctx ? ctx->pp : NULL;
    if (!pp) LDT_FAIL(LDT_ERR_INVALID_USAGE, "pipeline tag: the trace has no pipeline (ldt_pipeline_begin first)");
    if (stage < -1 || stage >= pp->P * pp->V)
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "pipeline tag: stage %d, expected -1 or 0..%d (pp=%d x %d chunks)", stage,
                 pp->P * pp->V - 1, pp->P, pp->V);
    if (stage >= 0 && (micro < 0 || micro >= pp->M))
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "pipeline tag: micro-batch %d, expected 0..%d", micro, pp->M - 1);
    ldt__pp_set(ctx, stage < 0 ? (ldt__pp_tag){-1, 0, LDT__PP_NONE} : (ldt__pp_tag){stage, micro, LDT__PP_FWD});
    return LDT_OK;
}
