/* Strategies of rand, randn, bernoulli, trunc_normal and randint: no inputs, and element i
 * draws from the stream at global index i whatever the placement, so any Shard (or
 * InterleavedShard) is exact; the kernel gets the rank's region. */
#include "planner/strategy.h"

static void so_random(ldt__opts1 *o) {
    const ldt_shape *s = LDT__SOUT(o);
    ldt_placement none[1] = {{0}};
    for (int d = 0; d < s->ndim; d++) {
        ldt__opt_add(o, ldt_shard(d), none);
        for (int i = 0; i < o->niks; i++)
            if (o->iks[i] > 1 && s->dims[d] % o->iks[i] == 0)
                ldt__opt_add(o, ldt_interleaved_shard(d, o->iks[i]), none);
    }
}

void ldt__strategies_random(ldt__op_strategy *rows) {
    static const int ops[] = {LDT_OP_RAND, LDT_OP_RANDN, LDT_OP_BERNOULLI, LDT_OP_TRUNC_NORMAL,
                              LDT_OP_RANDINT};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        int op = ops[k];
        rows[op].options = so_random;
        rows[op].needs_region = 1;
    }
}
