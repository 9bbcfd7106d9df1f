/* Process mode: the shards of outputs and assigned values gathered from every process. */
#include <stdlib.h>
#include <string.h>

#include "core/copy.h"
#include "core/error.h"
#include "exec/exec_internal.h"

/* Process mode: every rank's local piece of shards s into every process's copy (this
 * process's own piece already in place). A collective over the world: every process calls it
 * at the same point of the same code. */
ldt_status ldt__gather_shards(ldt_exec *e, ldt_shards *s) {
    int n = e->nranks;
    int64_t *counts = calloc((size_t)n, sizeof *counts), total = 0, at = 0, mine = 0;
    char *buf = NULL;
    ldt_status st = LDT_OK;
    if (!counts) LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "gather: out of memory");
    for (int r = 0; r < n; r++) {
        ldt_shards_local(s, r, &counts[r]);
        total += counts[r];
    }
    for (int r = 0; r < e->me; r++) at += counts[r];
    mine = counts[e->me];
    if (!(buf = malloc((size_t)(total ? total : 1)))) {
        free(counts);
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "gather: out of memory for %lld bytes", (long long)total);
    }
    if (mine) ldt__copy(buf + at, ldt_shards_local(s, e->me, NULL), (size_t)mine);
    st = ldt_all_gather_v(e->world, buf + at, buf, counts, LDT_U8);
    at = 0;
    for (int r = 0; r < n && st == LDT_OK; r++) {
        if (counts[r] && r != e->me) ldt__copy(ldt_shards_local(s, r, NULL), buf + at, (size_t)counts[r]);
        at += counts[r];
    }
    free(buf);
    free(counts);
    return st == LDT_OK ? LDT_OK : ldt__trace(ldt__error_prefix(st, "gather the ranks' shards"), __FILE__, __LINE__);
}
