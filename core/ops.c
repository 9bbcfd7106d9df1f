/* The built-in ops' names and arities: the one table every layer reads them from. */
#include "core/ops.h"

typedef struct {
    const char *name;
    int arity;
} op_info;

static const op_info k_ops[] = {
#define LDT__OP_ROW(e, name, arity) {name, arity},
    LDT_OP_MAP(LDT__OP_ROW)
#undef LDT__OP_ROW
};
_Static_assert(sizeof k_ops / sizeof k_ops[0] == LDT_OP_COUNT, "one op_info row per op");

const char *ldt__builtin_op_name(int op) {
    return op >= 0 && op < LDT_OP_COUNT ? k_ops[op].name : "custom op";
}

int ldt__op_arity(int op) { return op >= 0 && op < LDT_OP_COUNT ? k_ops[op].arity : -1; }
