/* Strategies of the elementwise ops: the output and every input sharded alike (broadcast
 * dims of an input stay Replicate), and Partial carried through the ops that are linear in it
 * (add/sub of two Partial(sum), mul/div of a Partial(sum) by a Replicate, neg, mul/div by a
 * scalar). */
#include "planner/strategy.h"

/* Option: output dim d held as p (a Shard or InterleavedShard on d); each input the same on
 * its aligned dim, or Replicate where it broadcasts (size 1 against a larger dim, or absent). */
static void shard_follow(ldt__opts1 *o, ldt_placement p) {
    const ldt_shape *os = LDT__SOUT(o);
    ldt_placement in[LDT__SMAX_IN];
    int d = p.dim;
    for (int k = 0; k < o->nin; k++) {
        const ldt_shape *s = LDT__SIN(o, k);
        int j = d - (os->ndim - s->ndim);
        if (j >= 0 && s->dims[j] == os->dims[d])
            in[k] = ldt__pl_on_dim(p, j);
        else
            in[k] = ldt_replicate();
    }
    ldt__opt_add(o, p, in);
}

/* Shard options on every output dim, and InterleavedShard ones for the graph's block counts. */
static void follow_all_dims(ldt__opts1 *o) {
    for (int d = 0; d < LDT__SOUT(o)->ndim; d++) {
        shard_follow(o, ldt_shard(d));
        for (int i = 0; i < o->niks; i++)
            if (o->iks[i] > 1 && LDT__SOUT(o)->dims[d] % o->iks[i] == 0)
                shard_follow(o, ldt_interleaved_shard(d, o->iks[i]));
    }
}

int ldt__s_all_float(const ldt_tensor *t) {
    if (!ldt_dtype_is_float((ldt_dtype)t->dtype)) return 0;
    for (int k = 0; k < t->nin; k++)
        if (!ldt_dtype_is_float((ldt_dtype)LDT__IN(t)[k]->dtype)) return 0;
    return 1;
}

static void so_binary(ldt__opts1 *o) {
    ldt_placement P = ldt_partial(LDT_REDUCE_SUM), R = ldt_replicate();
    ldt__opt_all(o, R);
    follow_all_dims(o);
    if (!ldt__s_all_float(o->t)) return;
    /* Partial(sum) only where the op is linear in it, and only when no input broadcasts: a
     * broadcast Partial addend would be counted once per output element it reaches, which is
     * still right, but keeping it simple keeps it obviously right */
    switch (o->t->op) {
    case LDT_OP_ADD:
    case LDT_OP_SUB:
        ldt__opt_add(o, P, (ldt_placement[]){P, P});
        break;
    case LDT_OP_MUL:
        ldt__opt_add(o, P, (ldt_placement[]){P, R});
        ldt__opt_add(o, P, (ldt_placement[]){R, P});
        break;
    case LDT_OP_DIV:
        ldt__opt_add(o, P, (ldt_placement[]){P, R});
        break;
    default:
        break;
    }
}

static void so_unary(ldt__opts1 *o) {
    ldt__opt_all(o, ldt_replicate());
    follow_all_dims(o);
    if (!ldt__s_all_float(o->t)) return;
    switch (o->t->op) {
    case LDT_OP_NEG:
    case LDT_OP_MUL_SCALAR:
    case LDT_OP_DIV_SCALAR:
        ldt__opt_all(o, ldt_partial(LDT_REDUCE_SUM));
        break;
    default:
        break;
    }
}

void ldt__strategies_elementwise(ldt__op_strategy *rows) {
    for (int op = LDT_OP_ADD; op <= LDT_OP_WHERE; op++) rows[op].options = so_binary;
    for (int op = LDT_OP_ADD_SCALAR; op <= LDT_OP_CAST; op++) rows[op].options = so_unary;
}
