/* The indexing kernels against naive references written here: gather, scatter, scatter_add,
 * index_put (with broadcasting and duplicates), one_hot, embedding; and the error paths. */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "kernels/cpu/kernel.h"
#include "tests/test_util.h"

static ldt__kcall call_of(int op, ldt__attrs *a, ldt__operand *in, int nin, ldt__operand out) {
    ldt__kcall c;
    memset(&c, 0, sizeof c);
    c.op = op;
    c.attrs = a;
    c.nin = nin;
    c.in = in;
    c.out = out;
    return c;
}

Test(index, hand_cases) {
    float w[12] = {0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23}, e[8];
    int64_t ids[2] = {2, -3}, oh[9];
    int32_t cls[3] = {0, 2, 1};
    ldt__attrs a = {{0}, {0}};
    ldt__operand in[2] = {{w, {2, {3, 4}}, LDT_F32}, {ids, {1, {2}}, LDT_I64}};
    ldt__kcall c = call_of(LDT_OP_EMBEDDING, &a, in, 2, (ldt__operand){e, {2, {2, 4}}, LDT_F32});
    cr_assert_eq(ldt__k_index(&c), LDT_OK, "%s", ldt_last_error());
    cr_expect(e[0] == 20 && e[3] == 23 && e[4] == 0 && e[7] == 3, "%g %g %g %g", e[0], e[3], e[4], e[7]);
    ids[1] = 3;
    cr_expect_eq(ldt__k_index(&c), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "embedding: index 3 at position 1 is out of range for 3 rows") != NULL,
              "%s", ldt_last_error());
    in[0] = (ldt__operand){cls, {1, {3}}, LDT_I32};
    a.i[0] = 3;
    c = call_of(LDT_OP_ONE_HOT, &a, in, 1, (ldt__operand){oh, {2, {3, 3}}, LDT_I64});
    cr_assert_eq(ldt__k_index(&c), LDT_OK, "%s", ldt_last_error());
    for (int i = 0; i < 9; i++) cr_expect_eq(oh[i], (i == 0 || i == 5 || i == 7), "one_hot[%d]", i);
    in[0] = (ldt__operand){w, {1, {3}}, LDT_F32};
    cr_expect_eq(ldt__k_index(&c), LDT_ERR_INVALID_ARGUMENT);
    cr_expect(strstr(ldt_last_error(), "indices are f32") != NULL, "%s", ldt_last_error());
}

/* Random gather / scatter / scatter_add on 2-D and 3-D, against loops written here. */
Test(index, gather_scatter_match_reference) {
    uint64_t rng = 11;
    for (int cse = 0; cse < ldt_test_cases(300); cse++) {
        int nd = (int)ldt_test_range(&rng, 1, 3), dim = (int)ldt_test_range(&rng, 0, nd - 1);
        int64_t xd[3], id[3], n = 1, m = 1, xs[3], is[3];
        float x[216], src[216], out[216], want[216];
        int64_t ix[216];
        ldt__attrs a = {{0}, {0}};
        ldt__operand in[3];
        ldt__kcall c;
        for (int d = 0; d < nd; d++) {
            xd[d] = ldt_test_range(&rng, 1, 6);
            id[d] = d == dim ? ldt_test_range(&rng, 1, 6) : ldt_test_range(&rng, 1, xd[d]);
            n *= xd[d];
            m *= id[d];
        }
        xs[nd - 1] = is[nd - 1] = 1;
        for (int d = nd - 2; d >= 0; d--) {
            xs[d] = xs[d + 1] * xd[d + 1];
            is[d] = is[d + 1] * id[d + 1];
        }
        for (int64_t i = 0; i < n; i++) x[i] = (float)i;
        for (int64_t i = 0; i < m; i++) {
            ix[i] = ldt_test_range(&rng, -xd[dim], xd[dim] - 1);
            src[i] = (float)(1000 + i);
        }
        a.i[0] = dim;
        in[0] = (ldt__operand){x, {nd, {0}}, LDT_F32};
        in[1] = (ldt__operand){ix, {nd, {0}}, LDT_I64};
        in[2] = (ldt__operand){src, {nd, {0}}, LDT_F32};
        for (int d = 0; d < nd; d++) {
            in[0].shape.dims[d] = xd[d];
            in[1].shape.dims[d] = in[2].shape.dims[d] = id[d];
        }
        for (int op = 0; op < 3; op++) {
            int kop = op == 0 ? LDT_OP_GATHER : op == 1 ? LDT_OP_SCATTER : LDT_OP_SCATTER_ADD;
            ldt_shape os = op == 0 ? in[1].shape : in[0].shape;
            c = call_of(kop, &a, in, op == 0 ? 2 : 3, (ldt__operand){out, os, LDT_F32});
            cr_assert_eq(ldt__k_index(&c), LDT_OK, "%s", ldt_last_error());
            if (op) memcpy(want, x, (size_t)n * sizeof *x);
            for (int64_t p = 0; p < m; p++) {
                int64_t rem = p, xo = 0;
                for (int d = 0; d < nd; d++) {
                    int64_t coord = rem / is[d];
                    rem %= is[d];
                    if (d == dim) {
                        coord = ix[p] < 0 ? ix[p] + xd[dim] : ix[p];
                    }
                    xo += coord * xs[d];
                }
                if (op == 0) want[p] = x[xo];
                else if (op == 1) want[xo] = src[p];
                else want[xo] += src[p];
            }
            for (int64_t i = 0; i < (op == 0 ? m : n); i++)
                cr_assert_eq(out[i], want[i], "op %d case %d [%lld]: %g, want %g", op, cse,
                             (long long)i, out[i], want[i]);
        }
    }
}

Test(index, index_put_broadcast_and_accumulate) {
    /* x [3,2] zeros; indices rows [0,2,0]; values [2] broadcast to [3,2] */
    double x[6] = {0}, out[6], v[2] = {1.5, -2};
    int32_t rows[3] = {0, 2, 0};
    ldt__attrs a = {{0}, {0}};
    ldt__operand in[3] = {{x, {2, {3, 2}}, LDT_F64}, {v, {1, {2}}, LDT_F64}, {rows, {1, {3}}, LDT_I32}};
    ldt__kcall c = call_of(LDT_OP_INDEX_PUT, &a, in, 3, (ldt__operand){out, {2, {3, 2}}, LDT_F64});
    a.i[1] = 1;
    cr_assert_eq(ldt__k_index(&c), LDT_OK, "%s", ldt_last_error());
    cr_expect(out[0] == 1.5 && out[1] == -2 && out[2] == 0 && out[4] == 1.5, "%g %g %g %g", out[0],
              out[1], out[2], out[4]);
    a.i[0] = 1; /* accumulate: row 0 twice */
    cr_assert_eq(ldt__k_index(&c), LDT_OK);
    cr_expect(out[0] == 3 && out[1] == -4 && out[5] == -2, "%g %g %g", out[0], out[1], out[5]);
    /* two index tensors address single elements: x[r[j], c[j]] += vals[j] */
    {
        int64_t r2[2] = {1, 1}, c2[2] = {0, 0};
        double vals[2] = {5, 7};
        ldt__operand in2[4] = {{x, {2, {3, 2}}, LDT_F64}, {vals, {1, {2}}, LDT_F64},
                               {r2, {1, {2}}, LDT_I64}, {c2, {1, {2}}, LDT_I64}};
        a.i[1] = 2;
        c = call_of(LDT_OP_INDEX_PUT, &a, in2, 4, (ldt__operand){out, {2, {3, 2}}, LDT_F64});
        cr_assert_eq(ldt__k_index(&c), LDT_OK, "%s", ldt_last_error());
        cr_expect(out[2] == 12 && out[3] == 0, "%g %g", out[2], out[3]);
    }
    {
        uint8_t bx[2] = {0}, bo[2], bvals[1] = {1};
        int64_t r1[1] = {0};
        ldt__operand in3[3] = {{bx, {1, {2}}, LDT_BOOL}, {bvals, {1, {1}}, LDT_BOOL}, {r1, {1, {1}}, LDT_I64}};
        a.i[0] = 1;
        a.i[1] = 1;
        c = call_of(LDT_OP_INDEX_PUT, &a, in3, 3, (ldt__operand){bo, {1, {2}}, LDT_BOOL});
        cr_expect_eq(ldt__k_index(&c), LDT_ERR_UNSUPPORTED);
    }
}
