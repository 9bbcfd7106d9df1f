/* Strategies of matmul and linear: batch dims follow, M and N shard the output, K shards
 * both operands and gives Partial(sum), and a Partial(sum) operand times a Replicate one stays
 * Partial; InterleavedShard like Shard on M, N and K (both operands split alike). linear's
 * weight is [out, in]: S0 is column parallel (output sharded on its last dim), S1 row
 * parallel (Partial output; the bias then joins as Partial, added once). */
#include "planner/strategy.h"

/* Interleaved variants of an output-dim shard for the graph's block counts. */
static int ik_ok(int64_t n, int64_t k) { return k > 1 && n % k == 0; }

static void so_matmul(ldt__opts1 *o) {
    const ldt_shape *a = LDT__SIN(o, 0), *b = LDT__SIN(o, 1), *y = LDT__SOUT(o);
    ldt_placement R = ldt_replicate(), P = ldt_partial(LDT_REDUCE_SUM);
    int na = a->ndim, nb = b->ndim, ny = y->ndim;
    /* output dims: batch dims [0, nbatch), then M (if a is 2-D+), then N (if b is 2-D+) */
    int nbatch = ny - (na >= 2) - (nb >= 2);
    ldt__opt_all(o, R);
    for (int d = 0; d < nbatch; d++) {
        ldt_placement in[2];
        int ja = d - (nbatch - (na - 2)), jb = d - (nbatch - (nb - 2));
        in[0] = na > 2 && ja >= 0 && a->dims[ja] == y->dims[d] ? ldt_shard(ja) : R;
        in[1] = nb > 2 && jb >= 0 && b->dims[jb] == y->dims[d] ? ldt_shard(jb) : R;
        ldt__opt_add(o, ldt_shard(d), in);
    }
    if (na >= 2) { /* M */
        ldt__opt_add(o, ldt_shard(nbatch), (ldt_placement[]){ldt_shard(na - 2), R});
        for (int i = 0; i < o->niks; i++)
            if (ik_ok(y->dims[nbatch], o->iks[i]))
                ldt__opt_add(o, ldt_interleaved_shard(nbatch, o->iks[i]),
                             (ldt_placement[]){ldt_interleaved_shard(na - 2, o->iks[i]), R});
    }
    if (nb >= 2) { /* N */
        ldt__opt_add(o, ldt_shard(ny - 1), (ldt_placement[]){R, ldt_shard(nb - 1)});
        for (int i = 0; i < o->niks; i++)
            if (ik_ok(y->dims[ny - 1], o->iks[i]))
                ldt__opt_add(o, ldt_interleaved_shard(ny - 1, o->iks[i]),
                             (ldt_placement[]){R, ldt_interleaved_shard(nb - 1, o->iks[i])});
    }
    /* K */
    ldt__opt_add(o, P, (ldt_placement[]){ldt_shard(na - 1), ldt_shard(nb >= 2 ? nb - 2 : 0)});
    for (int i = 0; i < o->niks; i++) /* both split alike in blocks: a fused QKV's gradient */
        if (ik_ok(a->dims[na - 1], o->iks[i]))
            ldt__opt_add(o, P, (ldt_placement[]){ldt_interleaved_shard(na - 1, o->iks[i]),
                                                 ldt_interleaved_shard(nb >= 2 ? nb - 2 : 0, o->iks[i])});
    if (ldt__s_all_float(o->t)) {
        ldt__opt_add(o, P, (ldt_placement[]){P, R});
        ldt__opt_add(o, P, (ldt_placement[]){R, P});
    }
}

static void so_linear(ldt__opts1 *o) {
    const ldt_shape *x = LDT__SIN(o, 0), *y = LDT__SOUT(o);
    ldt_placement R = ldt_replicate(), P = ldt_partial(LDT_REDUCE_SUM);
    int nx = x->ndim, ny = y->ndim;
    ldt__opt_all(o, R);
    /* batch dims of x */
    for (int d = 0; d < nx - 1; d++) ldt__opt_add(o, ldt_shard(d), (ldt_placement[]){ldt_shard(d), R, R});
    /* column parallel: the weight's output dim (and the bias) sharded */
    ldt__opt_add(o, ldt_shard(ny - 1), (ldt_placement[]){R, ldt_shard(0), ldt_shard(0)});
    for (int i = 0; i < o->niks; i++)
        if (ik_ok(y->dims[ny - 1], o->iks[i])) {
            ldt_placement is0 = ldt_interleaved_shard(0, o->iks[i]);
            ldt__opt_add(o, ldt_interleaved_shard(ny - 1, o->iks[i]), (ldt_placement[]){R, is0, is0});
        }
    /* row parallel: contraction dim sharded; the bias as Partial is added on one rank */
    ldt__opt_add(o, P, (ldt_placement[]){ldt_shard(nx - 1), ldt_shard(1), P});
    if (ldt__s_all_float(o->t)) {
        ldt__opt_add(o, P, (ldt_placement[]){P, R, P});
        ldt__opt_add(o, P, (ldt_placement[]){R, P, P});
    }
}

void ldt__strategies_linalg(ldt__op_strategy *rows) {
    rows[LDT_OP_MATMUL].options = so_matmul;
    rows[LDT_OP_LINEAR].options = so_linear;
}
