/* The strategy row of every built-in op: each family file fills its own rows once. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "planner/strategy.h"

static ldt__op_strategy rows[LDT_OP_COUNT];
static pthread_once_t rows_once = PTHREAD_ONCE_INIT;

static void fill_rows(void) {
    memset(rows, 0, sizeof rows);
    ldt__strategies_elementwise(rows);
    ldt__strategies_linalg(rows);
    ldt__strategies_view(rows);
    ldt__strategies_reduce(rows);
    ldt__strategies_nn(rows);
    ldt__strategies_index(rows);
    ldt__strategies_random(rows);
}

const ldt__op_strategy *ldt__op_strategy_of(int op) {
    static const ldt__op_strategy none;
    pthread_once(&rows_once, fill_rows);
    return op >= 0 && op < LDT_OP_COUNT ? &rows[op] : &none;
}

ldt_placement ldt__pl_on_dim(ldt_placement p, int dim) {
    if (ldt__pl_is_shard(&p)) p.dim = dim;
    return p;
}

static int opt_same(const ldt__opt1 *a, const ldt__opt1 *b, int nin) {
    if (!ldt_placement_equal(&a->out, &b->out)) return 0;
    for (int k = 0; k < nin; k++)
        if (!ldt_placement_equal(&a->in[k], &b->in[k])) return 0;
    return 1;
}

void ldt__opt_add(ldt__opts1 *o, ldt_placement out, const ldt_placement *in) {
    ldt__opt1 x;
    memset(&x, 0, sizeof x);
    x.out = out;
    for (int k = 0; k < o->nin && k < LDT__SMAX_IN; k++) x.in[k] = in[k];
    for (int i = 0; i < o->n; i++)
        if (opt_same(&o->v[i], &x, o->nin)) return;
    if (o->n == o->cap) {
        int cap = o->cap ? 2 * o->cap : 16;
        ldt__opt1 *v = realloc(o->v, (size_t)cap * sizeof *v);
        if (!v) {
            o->oom = 1;
            return;
        }
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = x;
}

void ldt__opt_all(ldt__opts1 *o, ldt_placement p) {
    ldt_placement in[LDT__SMAX_IN];
    for (int k = 0; k < LDT__SMAX_IN; k++) in[k] = p;
    ldt__opt_add(o, p, in);
}
