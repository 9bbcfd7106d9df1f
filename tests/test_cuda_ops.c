/* The CUDA kernels and the CUDA backend against the CPU reference: every covered op over
 * shapes and dtypes, and a small program captured into a CUDA Graph and replayed. What needs
 * no GPU always runs (the kernel table, argument checks, program refusal, the shared cast
 * math: suite cuda_host, also run on its own by ctest as test_cuda_host, never skipped);
 * suite cuda_ops skips, saying so, where no CUDA device is present. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <cuda_runtime.h>

#include "exec/backend_cuda.h"
#include "kernels/common/cast.h"
#include "kernels/cpu/kernel.h"
#include "kernels/cuda/kernel.h"
#include "ldt/exec.h"
#include "ldt/trace.h"
#include "trace/trace.h"
#include "tests/test_util.h"

static const ldt_dtype k_all[] = {LDT_F32, LDT_F64, LDT_F16, LDT_BF16,
                                  LDT_I32, LDT_I64, LDT_U8,  LDT_BOOL};
#define NALL 8

static int have_gpu(void) {
    if (ldt_cuda_device_count() > 0) return 1;
    /* printed as well as reported: ctest marks the test Skipped on this line */
    fprintf(stderr, "SKIPPED: no CUDA device (the runtime reports none or no driver): GPU "
                    "kernels not run\n");
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Without a GPU: the table, the checks a launcher makes before it touches the device, the
 * backend's refusal of programs it cannot run, the shared math.
 */
Test(cuda_host, table_has_a_row_or_refuses_naming_the_op) {
    ldt__cuda_kernel_fn fn;
    int have = 0;
    for (int op = LDT_OP_ADD; op < LDT_OP_COUNT; op++) {
        ldt_status st = ldt__cuda_kernel_lookup(op, &fn);
        if (st == LDT_OK) {
            cr_assert(fn != NULL && fn == ldt__cuda_kernel(op));
            have++;
            continue;
        }
        cr_assert_eq(st, LDT_ERR_UNSUPPORTED, "%s", ldt__builtin_op_name(op));
        cr_assert(strstr(ldt_last_error(), ldt__builtin_op_name(op)) != NULL, "%s: %s",
                  ldt__builtin_op_name(op), ldt_last_error());
        cr_assert(strstr(ldt_last_error(), "no CUDA kernel yet") != NULL, "%s", ldt_last_error());
    }
    /* elementwise 28, matmul 2, views 8, reductions 4, random 5, softmax..dropout 6,
     * embedding..index_put 8, argmax, argmin and topk 4, sdpa 1 */
    cr_assert_eq(have, 66, "%d ops have CUDA kernels", have);
    cr_assert(ldt__cuda_kernel(LDT_OP_SDPA) == ldt__cuda_k_attention);
    for (int op = LDT_OP_ARGMAX; op <= LDT_OP_TOPK_INDICES; op++)
        cr_assert(ldt__cuda_kernel(op) == ldt__cuda_k_argreduce, "%d", op);
    for (int op = LDT_OP_EMBEDDING; op <= LDT_OP_INDEX_PUT; op++)
        cr_assert(ldt__cuda_kernel(op) == ldt__cuda_k_index, "%d", op);
    for (int op = LDT_OP_ADD; op <= LDT_OP_CAST; op++) cr_assert(ldt__cuda_kernel(op), "%d", op);
    for (int op = LDT_OP_RESHAPE; op <= LDT_OP_AMIN; op++) cr_assert(ldt__cuda_kernel(op), "%d", op);
    for (int op = LDT_OP_SOFTMAX; op <= LDT_OP_DROPOUT; op++) cr_assert(ldt__cuda_kernel(op), "%d", op);
    cr_assert(ldt__cuda_kernel(LDT_OP_LINEAR) && ldt__cuda_kernel(LDT_OP_RANDINT));
    cr_assert(!ldt__cuda_kernel(LDT_OP_INPUT));
    cr_assert(!ldt__cuda_kernel(-1) && !ldt__cuda_kernel(LDT_OP_COUNT));
    cr_assert_eq(ldt__cuda_kernel_lookup(LDT_OP_COUNT + 3, &fn), LDT_ERR_UNSUPPORTED);
    cr_assert(strstr(ldt_last_error(), "custom"), "%s", ldt_last_error());
}

/* A call over fake device pointers: every case below must fail in its host-side checks,
 * before anything is launched (so it runs, and must pass, without a GPU). */
/* op's CUDA launcher: its table row. */
static ldt__cuda_kernel_fn cuda_fn(int op) { return ldt__cuda_kernel(op); }

static ldt_status fake_call(int op, int nin, const ldt_shape *sh, const ldt_dtype *dt,
                            const ldt_shape *osh, ldt_dtype odt, const ldt__attrs *attrs) {
    ldt__operand in[LDT_MAX_DIMS + 2];
    ldt__kcall c;
    ldt__cuda_env env;
    memset(&env, 0, sizeof env);
    memset(&c, 0, sizeof c);
    for (int k = 0; k < nin; k++) {
        in[k].data = (void *)(uintptr_t)0x1000;
        in[k].shape = sh[k];
        in[k].dtype = dt[k];
    }
    c.op = op;
    c.attrs = attrs;
    c.nin = nin;
    c.in = in;
    c.out.data = (void *)(uintptr_t)0x2000;
    c.out.shape = *osh;
    c.out.dtype = odt;
    return cuda_fn(op)(&c, &env);
}

#define EXPECT_FAIL(want, sub, call)                                                        \
    do {                                                                                    \
        ldt_status st_ = (call);                                                            \
        cr_expect_eq(st_, want, "%s: got %s: %s", #call, ldt_status_name(st_), ldt_last_error()); \
        cr_expect(strstr(ldt_last_error(), sub) != NULL, "want '%s' in: %s", sub,           \
                  ldt_last_error());                                                        \
    } while (0)

Test(cuda_host, launchers_check_arguments_before_launching) {
    ldt_shape s75 = ldt_test_shape(2, 7, 5), s4 = ldt_test_shape(1, 4), s57 = ldt_test_shape(2, 5, 7);
    ldt_shape sh[3] = {s75, s75, s75}, bad[2] = {s75, s4};
    ldt_dtype f32x3[3] = {LDT_F32, LDT_F32, LDT_F32}, mix[2] = {LDT_F32, LDT_F64};
    ldt_dtype bools[2] = {LDT_BOOL, LDT_BOOL}, i32[1] = {LDT_I32}, f32b[3] = {LDT_F32, LDT_F32, LDT_F32};
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "a is f32 but b is f64",
                fake_call(LDT_OP_ADD, 2, sh, mix, &s75, LDT_F32, NULL));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "does not broadcast",
                fake_call(LDT_OP_MUL, 2, bad, f32x3, &s75, LDT_F32, NULL));
    EXPECT_FAIL(LDT_ERR_UNSUPPORTED, "add: dtype bool is not supported on CUDA",
                fake_call(LDT_OP_ADD, 2, sh, bools, &s75, LDT_BOOL, NULL));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "lt: output is f32, expected bool",
                fake_call(LDT_OP_LT, 2, sh, f32x3, &s75, LDT_F32, NULL));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "where: cond must be bool",
                fake_call(LDT_OP_WHERE, 3, sh, f32x3, &s75, LDT_F32, NULL));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "expects 2 inputs",
                fake_call(LDT_OP_SUB, 1, sh, f32x3, &s75, LDT_F32, NULL));
    a.f[0] = 0.5;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "not an int64 integer",
                fake_call(LDT_OP_ADD_SCALAR, 1, sh, i32, &s75, LDT_I32, &a));
    a.f[0] = 0;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "integer division by zero",
                fake_call(LDT_OP_DIV_SCALAR, 1, sh, i32, &s75, LDT_I32, &a));
    EXPECT_FAIL(LDT_ERR_UNSUPPORTED, "pow_scalar: dtype i32",
                fake_call(LDT_OP_POW_SCALAR, 1, sh, i32, &s75, LDT_I32, &a));
    EXPECT_FAIL(LDT_ERR_UNSUPPORTED, "exp: dtype i32",
                fake_call(LDT_OP_EXP, 1, sh, i32, &s75, LDT_I32, NULL));
    a.i[0] = 3;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "gelu: attrs.i[0] must be",
                fake_call(LDT_OP_GELU, 1, sh, f32b, &s75, LDT_F32, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "output shape [4] differs",
                fake_call(LDT_OP_TANH, 1, sh, f32b, &s4, LDT_F32, NULL));
    memset(&a, 0, sizeof a);
    a.f[0] = 1.5;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "bernoulli: p = 1.5",
                fake_call(LDT_OP_BERNOULLI, 0, sh, f32b, &s75, LDT_F32, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "dropout: p = 1.5",
                fake_call(LDT_OP_DROPOUT, 1, sh, f32b, &s75, LDT_F32, &a));
    EXPECT_FAIL(LDT_ERR_UNSUPPORTED, "randn: dtype i32",
                fake_call(LDT_OP_RANDN, 0, sh, f32b, &s75, LDT_I32, &a));
    a.f[0] = 2, a.f[1] = 1;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "rand: range [2, 1)",
                fake_call(LDT_OP_RAND, 0, sh, f32b, &s75, LDT_F32, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "matmul: inner dims differ",
                fake_call(LDT_OP_MATMUL, 2, sh, f32x3, &s75, LDT_F32, NULL));
    {
        ldt_shape mm[2] = {s75, s57}, o77 = ldt_test_shape(2, 7, 7);
        /* a well-formed call still needs a cuBLAS handle: refused, not crashed */
        EXPECT_FAIL(LDT_ERR_INVALID_USAGE, "no cuBLAS handle",
                    fake_call(LDT_OP_MATMUL, 2, mm, f32x3, &o77, LDT_F32, NULL));
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "linear: expected x [..., in] and w [out, in]",
                    fake_call(LDT_OP_LINEAR, 2, mm, f32x3, &o77, LDT_F32, NULL));
        ldt_dtype ii[2] = {LDT_I32, LDT_I32};
        EXPECT_FAIL(LDT_ERR_UNSUPPORTED, "matmul: dtype i32",
                    fake_call(LDT_OP_MATMUL, 2, mm, ii, &o77, LDT_I32, NULL));
    }
}

/* The second installment's families: the same checks and messages as the CPU kernels
 * (kernels/common/reduce_plan.h, view_plan.h, nn_plan.h), before any device call. */
Test(cuda_host, view_reduce_nn_launchers_check_arguments_before_launching) {
    ldt_shape s75 = ldt_test_shape(2, 7, 5), s57 = ldt_test_shape(2, 5, 7), s7 = ldt_test_shape(1, 7);
    ldt_shape s5 = ldt_test_shape(1, 5), s05 = ldt_test_shape(2, 0, 5), s35 = ldt_test_shape(2, 3, 5);
    ldt_shape sh[3] = {s75, s75, s75}, one[1] = {s75}, empty[1] = {s05};
    ldt_dtype f32[3] = {LDT_F32, LDT_F32, LDT_F32}, i32[3] = {LDT_I32, LDT_I32, LDT_I32};
    ldt_dtype mix[2] = {LDT_F32, LDT_F64}, bools[1] = {LDT_BOOL};
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    /* reductions */
    a.i[0] = 0x4;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "sum: dim mask 0x4 names dims beyond the 2 of [7,5]",
                fake_call(LDT_OP_SUM, 1, one, f32, &s7, LDT_F32, &a));
    a.i[0] = 0x2;
    EXPECT_FAIL(LDT_ERR_UNSUPPORTED, "mean: dtype i32 is not supported",
                fake_call(LDT_OP_MEAN, 1, one, i32, &s7, LDT_I32, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "sum: output dtype is i32, expected i64",
                fake_call(LDT_OP_SUM, 1, one, i32, &s7, LDT_I32, &a));
    EXPECT_FAIL(LDT_ERR_UNSUPPORTED, "amax: dtype bool is not supported",
                fake_call(LDT_OP_AMAX, 1, one, bools, &s7, LDT_BOOL, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "amin: output shape is [5], expected [7]",
                fake_call(LDT_OP_AMIN, 1, one, f32, &s5, LDT_F32, &a));
    a.i[0] = 0x1;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "amax: reducing an empty dim of [0,5]",
                fake_call(LDT_OP_AMAX, 1, empty, f32, &s5, LDT_F32, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "sum: takes 1 input and attributes",
                fake_call(LDT_OP_SUM, 1, one, f32, &s5, LDT_F32, NULL));
    /* views */
    memset(&a, 0, sizeof a);
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "reshape: input [7,5] has 35 elements, output [3,5]",
                fake_call(LDT_OP_RESHAPE, 1, one, f32, &s35, LDT_F32, NULL));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "views keep the dtype",
                fake_call(LDT_OP_ALIAS, 1, one, f32, &s75, LDT_F64, NULL));
    a.i[0] = 0, a.i[1] = 0;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "permute: attrs.i[1] = 0: the dims must be a permutation",
                fake_call(LDT_OP_PERMUTE, 1, one, f32, &s57, LDT_F32, &a));
    a.i[0] = 1, a.i[1] = 0;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "permute: output is [7,5], expected [5,7]",
                fake_call(LDT_OP_PERMUTE, 1, one, f32, &s75, LDT_F32, &a));
    a.i[0] = 1, a.i[1] = 0, a.i[2] = 4, a.i[3] = 0;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "step 0 on dim 1 of size 5",
                fake_call(LDT_OP_SLICE, 1, one, f32, &s75, LDT_F32, &a));
    a.i[0] = 0, a.i[1] = 7;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "select: index 7 out of range for dim 0 of size 7",
                fake_call(LDT_OP_SELECT, 1, one, f32, &s5, LDT_F32, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "expand: input [7,5] does not broadcast to [3,5]",
                fake_call(LDT_OP_EXPAND, 1, one, f32, &s35, LDT_F32, NULL));
    a.i[0] = 0;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cat: inputs sum to 21 along dim 0 but the output [7,5]",
                fake_call(LDT_OP_CAT, 3, sh, f32, &s75, LDT_F32, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "slice: attrs missing",
                fake_call(LDT_OP_SLICE, 1, one, f32, &s75, LDT_F32, NULL));
    /* softmax..cross_entropy */
    memset(&a, 0, sizeof a);
    EXPECT_FAIL(LDT_ERR_UNSUPPORTED, "softmax: dtype i32 is not supported (f32, f64, f16, bf16)",
                fake_call(LDT_OP_SOFTMAX, 1, one, i32, &s75, LDT_I32, &a));
    a.i[0] = 2;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "log_softmax: dim 2 is out of range for x [7,5]",
                fake_call(LDT_OP_LOG_SOFTMAX, 1, one, f32, &s75, LDT_F32, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "softmax: no attributes",
                fake_call(LDT_OP_SOFTMAX, 1, one, f32, &s75, LDT_F32, NULL));
    a.i[0] = 1, a.i[1] = 1, a.i[2] = 0;
    {
        ldt_shape xw[2] = {s75, s7};
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "layer_norm: weight is [7] f32; expected the last 1 dims",
                    fake_call(LDT_OP_LAYER_NORM, 2, xw, f32, &s75, LDT_F32, &a));
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "weight is [7] f64",
                    fake_call(LDT_OP_LAYER_NORM, 2, xw, mix, &s75, LDT_F32, &a));
    }
    a.i[2] = 1;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "rms_norm: has no bias",
                fake_call(LDT_OP_RMS_NORM, 2, sh, f32, &s75, LDT_F32, &a));
    a.i[0] = 3, a.i[1] = 0, a.i[2] = 0;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "layer_norm: normalising the last 3 dims of x [7,5]",
                fake_call(LDT_OP_LAYER_NORM, 1, one, f32, &s75, LDT_F32, &a));
    {
        ldt_shape xt[2] = {s75, s7}, scalar = {0, {0}};
        ldt_dtype ff[2] = {LDT_F32, LDT_F32}, fi[2] = {LDT_F32, LDT_I64};
        a.i[0] = -100;
        EXPECT_FAIL(LDT_ERR_UNSUPPORTED, "cross_entropy: targets of dtype f32 are not supported",
                    fake_call(LDT_OP_CROSS_ENTROPY, 2, xt, ff, &scalar, LDT_F32, &a));
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cross_entropy: x is [7,5] f32 and the output [7]",
                    fake_call(LDT_OP_CROSS_ENTROPY, 2, xt, fi, &s7, LDT_F32, &a));
        xt[1] = s5;
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cross_entropy: logits are [7,5] and targets [5]",
                    fake_call(LDT_OP_CROSS_ENTROPY, 2, xt, fi, &scalar, LDT_F32, &a));
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cross_entropy: 1 inputs; expected 2",
                    fake_call(LDT_OP_CROSS_ENTROPY, 1, xt, fi, &scalar, LDT_F32, &a));
    }
}

/* The third installment's index family: the CPU kernel's checks and messages
 * (kernels/common/index_plan.h), before any device call. Index values are not read on the
 * host (they live on the device): a kernel flags those out of range (cuda_ops below). */
Test(cuda_host, index_launchers_check_arguments_before_launching) {
    ldt_shape s75 = ldt_test_shape(2, 7, 5), s7 = ldt_test_shape(1, 7), s5 = ldt_test_shape(1, 5);
    ldt_shape s76 = ldt_test_shape(2, 7, 6), s3 = ldt_test_shape(1, 3), s35 = ldt_test_shape(2, 3, 5);
    ldt_dtype fi[4] = {LDT_F32, LDT_I64, LDT_F32, LDT_I64}, ff[2] = {LDT_F32, LDT_F32};
    ldt_dtype fid[3] = {LDT_F32, LDT_I32, LDT_F64}, bib[3] = {LDT_BOOL, LDT_I32, LDT_BOOL};
    ldt_dtype i64[1] = {LDT_I64};
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    {
        ldt_shape wi[2] = {s75, s3}, w1[2] = {s7, s3};
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "embedding: indices are f32 (input 1), expected i32 or i64",
                    fake_call(LDT_OP_EMBEDDING, 2, wi, ff, &s35, LDT_F32, NULL));
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "embedding: weight is [7], expected [V, H]",
                    fake_call(LDT_OP_EMBEDDING, 2, w1, fi, &s35, LDT_F32, NULL));
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "embedding: output is [7,5], expected [3,5]",
                    fake_call(LDT_OP_EMBEDDING, 2, wi, fi, &s75, LDT_F32, NULL));
        a.i[0] = 1, a.i[1] = 4, a.i[2] = 10;
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "embedding: range mode with rows [4, 11) of a 10-row table",
                    fake_call(LDT_OP_EMBEDDING, 2, wi, fi, &s35, LDT_F32, &a));
    }
    a.i[0] = -1;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "one_hot: -1 classes",
                fake_call(LDT_OP_ONE_HOT, 1, &s7, i64, &s75, LDT_I64, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "one_hot: attrs missing",
                fake_call(LDT_OP_ONE_HOT, 1, &s7, i64, &s75, LDT_I64, NULL));
    {
        ldt_shape xi[3] = {s75, s75, s35}, x1[3] = {s75, s3, s35};
        a.i[0] = 0;
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "index_select: index is [7,5], expected 1-D",
                    fake_call(LDT_OP_INDEX_SELECT, 2, xi, fi, &s35, LDT_F32, &a));
        EXPECT_FAIL(LDT_ERR_UNSUPPORTED, "index_add: cannot accumulate bool values",
                    fake_call(LDT_OP_INDEX_ADD, 3, x1, bib, &s75, LDT_BOOL, &a));
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "index_add: src is f64 but x is f32",
                    fake_call(LDT_OP_INDEX_ADD, 3, x1, fid, &s75, LDT_F32, &a));
        x1[2] = s75;
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "index_add: src is [7,5], expected [3,5]",
                    fake_call(LDT_OP_INDEX_ADD, 3, x1, fi, &s75, LDT_F32, &a));
        a.i[0] = 2;
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "gather: dim 2 is out of range for x [7,5]",
                    fake_call(LDT_OP_GATHER, 2, xi, fi, &s75, LDT_F32, &a));
        a.i[0] = 0;
        xi[1] = s76;
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT,
                    "gather: index [7,6] is larger than x [7,5] in dim 1 (only dim 0 may be larger)",
                    fake_call(LDT_OP_GATHER, 2, xi, fi, &s76, LDT_F32, &a));
        xi[1] = s7;
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "scatter: index is [7] and x [7,5] and src [3,5]; expected one ndim",
                    fake_call(LDT_OP_SCATTER, 3, xi, fi, &s75, LDT_F32, &a));
        xi[1] = s35;
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "scatter_add: output is [5], expected [7,5]",
                    fake_call(LDT_OP_SCATTER_ADD, 3, xi, fi, &s5, LDT_F32, &a));
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "gather: expects 2 input(s), got 3",
                    fake_call(LDT_OP_GATHER, 3, xi, fi, &s35, LDT_F32, &a));
    }
    {
        ldt_shape put[4] = {s75, s35, s3, s3};
        ldt_dtype ffii[4] = {LDT_F32, LDT_F32, LDT_I64, LDT_I32};
        a.i[0] = 0, a.i[1] = 3;
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "index_put: 3 index tensors (attrs.i[1]) for x [7,5]; expected 1 to 2",
                    fake_call(LDT_OP_INDEX_PUT, 4, put, ffii, &s75, LDT_F32, &a));
        a.i[1] = 1;
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "index_put: 4 inputs for 1 index tensors",
                    fake_call(LDT_OP_INDEX_PUT, 4, put, ffii, &s75, LDT_F32, &a));
        a.i[1] = 2;
        put[1] = s75;
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "index_put: values [7,5] do not broadcast to [3]",
                    fake_call(LDT_OP_INDEX_PUT, 4, put, ffii, &s75, LDT_F32, &a));
        put[1] = s3;
        put[3] = s5;
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "index_put: index tensor 1 is [5], expected 1-D of length 3",
                    fake_call(LDT_OP_INDEX_PUT, 4, put, ffii, &s75, LDT_F32, &a));
        EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "index_put: expects x, values and at least one index tensor",
                    fake_call(LDT_OP_INDEX_PUT, 2, put, ffii, &s75, LDT_F32, &a));
    }
}

/* argmax, argmin, topk: the CPU kernel's checks and messages (argreduce_plan.h). */
Test(cuda_host, argreduce_launchers_check_arguments_before_launching) {
    ldt_shape s75 = ldt_test_shape(2, 7, 5), s7 = ldt_test_shape(1, 7), s05 = ldt_test_shape(2, 0, 5);
    ldt_shape s5 = ldt_test_shape(1, 5), s35 = ldt_test_shape(2, 3, 5);
    ldt_dtype f32[1] = {LDT_F32}, b[1] = {LDT_BOOL};
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    a.i[0] = 1;
    EXPECT_FAIL(LDT_ERR_UNSUPPORTED, "argmax: dtype bool is not supported (numeric dtypes only)",
                fake_call(LDT_OP_ARGMAX, 1, &s75, b, &s7, LDT_I64, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "argmin: output dtype is f32, expected i64",
                fake_call(LDT_OP_ARGMIN, 1, &s75, f32, &s7, LDT_F32, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "argmax: output shape is [5], expected [7] for input [7,5]",
                fake_call(LDT_OP_ARGMAX, 1, &s75, f32, &s5, LDT_I64, &a));
    a.i[0] = 2;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "argmin: dim 2 is out of range for [7,5] (expected [-2, 2))",
                fake_call(LDT_OP_ARGMIN, 1, &s75, f32, &s7, LDT_I64, &a));
    a.i[0] = 0;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "argmax: reducing an empty dim 0 of [0,5]",
                fake_call(LDT_OP_ARGMAX, 1, &s05, f32, &s5, LDT_I64, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "argmax: takes 1 input and attributes",
                fake_call(LDT_OP_ARGMAX, 1, &s75, f32, &s5, LDT_I64, NULL));
    a.i[0] = 0, a.i[1] = 8, a.i[2] = 1;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "topk_values: k = 8 is out of range for dim 0 of [7,5] (expected 0..7)",
                fake_call(LDT_OP_TOPK_VALUES, 1, &s75, f32, &s35, LDT_F32, &a));
    a.i[1] = 3;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "topk_indices: output dtype is f32, expected i64",
                fake_call(LDT_OP_TOPK_INDICES, 1, &s75, f32, &s35, LDT_F32, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "topk_values: output shape is [7,5], expected [3,5]",
                fake_call(LDT_OP_TOPK_VALUES, 1, &s75, f32, &s75, LDT_F32, &a));
}

/* sdpa: the CPU kernel's checks and messages (attention_plan.h). */
Test(cuda_host, attention_launcher_checks_arguments_before_launching) {
    ldt_shape q = ldt_test_shape(3, 2, 5, 8), k = ldt_test_shape(3, 2, 7, 8);
    ldt_shape v = ldt_test_shape(3, 2, 7, 6), o = ldt_test_shape(3, 2, 5, 6);
    ldt_shape sh[3] = {q, k, v};
    ldt_dtype f32[3] = {LDT_F32, LDT_F32, LDT_F32}, i32[3] = {LDT_I32, LDT_I32, LDT_I32};
    ldt_dtype mix[3] = {LDT_F32, LDT_F64, LDT_F32};
    ldt__attrs a;
    memset(&a, 0, sizeof a);
    a.f[1] = 0.125;
    EXPECT_FAIL(LDT_ERR_UNSUPPORTED, "scaled_dot_product_attention: dtype i32 is not supported",
                fake_call(LDT_OP_SDPA, 3, sh, i32, &o, LDT_I32, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "q, k, v and the output are f32 f64 f32 f32; expected one dtype",
                fake_call(LDT_OP_SDPA, 3, sh, mix, &o, LDT_F32, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "scaled_dot_product_attention: q [2,5,8], k [2,7,8], v [2,7,6], output [2,5,8]",
                fake_call(LDT_OP_SDPA, 3, sh, f32, &q, LDT_F32, &a));
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "scaled_dot_product_attention: 2 inputs",
                fake_call(LDT_OP_SDPA, 2, sh, f32, &o, LDT_F32, &a));
    a.f[0] = 1.5;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "scaled_dot_product_attention: dropout p = 1.5",
                fake_call(LDT_OP_SDPA, 3, sh, f32, &o, LDT_F32, &a));
    a.f[0] = 0, a.f[1] = INFINITY;
    EXPECT_FAIL(LDT_ERR_INVALID_ARGUMENT, "scaled_dot_product_attention: scale inf",
                fake_call(LDT_OP_SDPA, 3, sh, f32, &o, LDT_F32, &a));
}

/* The conversions moved into kernels/common/cast.h keep the CPU kernel's results (the CPU
 * elementwise tests check the kernel; these pin the helpers themselves). */
Test(cuda_host, shared_cast_math) {
    /* 1 + 2^-11 + 2^-30: f32 round-to-odd keeps the sticky bit, so f16 rounds up once */
    double d = 1.0 + ldexp(1, -11) + ldexp(1, -30);
    cr_assert_eq(ldt_f32_to_f16(ldt__cast_f64_to_f32_odd(d)), 0x3c01);
    cr_assert_eq(ldt_f32_to_f16((float)d), 0x3c00); /* twice rounded: the wrong neighbour */
    cr_assert_eq(ldt__cast_f64_to_f32_odd(0.5), 0.5f);
    cr_assert(isnan(ldt__cast_f64_to_f32_odd(NAN)));
    cr_assert_eq(ldt__cast_i64_to_f32_odd((1ll << 24) + 1), (float)(1 << 24) + 2.0f);
    cr_assert_eq(ldt__cast_i64_to_f32_odd(-5), -5.0f);
    cr_assert_eq(ldt__cast_sat_i32(1e12), INT32_MAX);
    cr_assert_eq(ldt__cast_sat_i32(-1e12), INT32_MIN);
    cr_assert_eq(ldt__cast_sat_i32(NAN), 0);
    cr_assert_eq(ldt__cast_sat_i32(-2.9), -2);
    cr_assert_eq(ldt__cast_sat_i64(1e300), INT64_MAX);
    cr_assert_eq(ldt__cast_sat_u8(-3), 0);
    cr_assert_eq(ldt__cast_sat_u8(300.5), 255);
    cr_assert_eq(ldt__cast_wrap_i32((1ll << 32) + 7), 7);
    cr_assert_eq(ldt__cast_wrap_i32(2147483648ll), INT32_MIN);
    cr_assert_eq(ldt__idiv64(INT64_MIN, -1), INT64_MIN);
    cr_assert_eq(ldt__idiv64(-7, 2), -3);
}

/* A small forward on one rank, traced and planned: x [8,16] -> linear -> gelu -> dropout ->
 * linear -> (+ rand) -> mul_scalar, and its output's value in the rank's program. */
typedef struct prog_case {
    ldt_ctx *ctx;
    ldt_plan *plan;
    ldt_tensor *out, *xin;
    const ldt__program *p;
    int32_t out_val;
    float *x, *w1, *b1, *w2;
} prog_case;

static ldt_status halve_shape(int nin, const ldt_shape *in, const ldt_dtype *dts, void *user, ldt_shape *out,
                              ldt_dtype *odt, char *msg, size_t cap) {
    (void)nin, (void)user, (void)msg, (void)cap;
    *out = in[0];
    *odt = dts[0];
    return LDT_OK;
}

static ldt_status halve_cpu(int nin, const void *const *in, const ldt_shape *shapes, const ldt_dtype *dts,
                            void *out, const ldt_shape *oshape, ldt_dtype odt, void *user) {
    int64_t n = 1;
    (void)nin, (void)shapes, (void)dts, (void)odt, (void)user;
    for (int d = 0; d < oshape->ndim; d++) n *= oshape->dims[d];
    for (int64_t i = 0; i < n; i++) ((float *)out)[i] = 0.5f * ((const float *)in[0])[i];
    return LDT_OK;
}

static void prog_open(prog_case *pc, int with_unsupported) {
    ldt_ctx_options co = {0};
    ldt_shape xs = ldt_test_shape(2, 8, 16), w1s = ldt_test_shape(2, 32, 16);
    ldt_shape b1s = ldt_test_shape(1, 32), w2s = ldt_test_shape(2, 4, 32);
    ldt_status st;
    uint64_t rng = 3;
    memset(pc, 0, sizeof *pc);
    co.seed = 5;
    cr_assert_eq(ldt_ctx_create(&co, &pc->ctx), LDT_OK);
    pc->x = malloc(8 * 16 * sizeof(float));
    pc->w1 = malloc(32 * 16 * sizeof(float));
    pc->b1 = malloc(32 * sizeof(float));
    pc->w2 = malloc(4 * 32 * sizeof(float));
    for (int i = 0; i < 8 * 16; i++) pc->x[i] = (float)ldt_test_range(&rng, -100, 100) / 50.0f;
    for (int i = 0; i < 32 * 16; i++) pc->w1[i] = (float)ldt_test_range(&rng, -100, 100) / 400.0f;
    for (int i = 0; i < 32; i++) pc->b1[i] = (float)ldt_test_range(&rng, -100, 100) / 100.0f;
    for (int i = 0; i < 4 * 32; i++) pc->w2[i] = (float)ldt_test_range(&rng, -100, 100) / 400.0f;
    ldt_tensor *x = pc->xin = ldt_input(pc->ctx, "x", &xs, LDT_F32);
    ldt_tensor *w1 = ldt_param(pc->ctx, "w1", &w1s, LDT_F32);
    ldt_tensor *b1 = ldt_param(pc->ctx, "b1", &b1s, LDT_F32);
    ldt_tensor *w2 = ldt_param(pc->ctx, "w2", &w2s, LDT_F32);
    cr_assert_eq(ldt_input_bind(x, pc->x, 8 * 16 * sizeof(float)), LDT_OK);
    cr_assert_eq(ldt_param_set(w1, pc->w1, 32 * 16 * sizeof(float)), LDT_OK);
    cr_assert_eq(ldt_param_set(b1, pc->b1, 32 * sizeof(float)), LDT_OK);
    cr_assert_eq(ldt_param_set(w2, pc->w2, 4 * 32 * sizeof(float)), LDT_OK);
    ldt_tensor *h = ldt_dropout(ldt_gelu(ldt_linear(x, w1, b1), 0), 0.25, 1);
    ldt_tensor *y = ldt_linear(h, w2, NULL);
    ldt_shape ys = ldt_test_shape(2, 8, 4);
    y = ldt_add(y, ldt_rand(pc->ctx, &ys, LDT_F32));
    if (with_unsupported) { /* a custom op: CPU only, by design */
        int id = -1;
        cr_assert_eq(ldt_custom_op_register(pc->ctx, "halve", 1, halve_shape, halve_cpu, NULL, &id), LDT_OK, "%s",
                     ldt_last_error());
        y = ldt_custom(pc->ctx, id, &y, 1);
    }
    pc->out = ldt_mul_scalar(y, 0.5);
    cr_assert(pc->out != NULL, "%s", ldt_ctx_errmsg(pc->ctx));
    cr_assert_eq(ldt_plan_create(pc->ctx, NULL, &pc->plan), LDT_OK, "%s", ldt_last_error());
    pc->p = ldt__plan_program(pc->plan, 0, &st);
    cr_assert(pc->p != NULL, "%s", ldt_last_error());
    pc->out_val = pc->p->node_val[pc->out->id];
}

static void prog_close(prog_case *pc) {
    ldt_plan_destroy(pc->plan);
    ldt_ctx_destroy(pc->ctx);
    free(pc->x);
    free(pc->w1);
    free(pc->b1);
    free(pc->w2);
}

Test(cuda_host, backend_refuses_programs_it_cannot_run) {
    prog_case pc;
    ldt__cuda_exec *x = (ldt__cuda_exec *)1;
    prog_open(&pc, 1);
    cr_assert_eq(ldt__cuda_program_check(pc.p), LDT_ERR_UNSUPPORTED);
    cr_assert(strstr(ldt_last_error(), "custom op"), "%s", ldt_last_error());
    cr_assert(strstr(ldt_last_error(), "cuda backend: instruction"), "%s", ldt_last_error());
    /* refused at create, with or without a device, before any device work */
    cr_assert_eq(ldt__cuda_exec_create(pc.p, &pc.out_val, 1, &x), LDT_ERR_UNSUPPORTED);
    cr_assert(x == NULL);
    prog_close(&pc);
    prog_open(&pc, 0);
    cr_assert_eq(ldt__cuda_program_check(pc.p), LDT_OK, "%s", ldt_last_error());
    if (ldt_cuda_device_count() == 0) {
        cr_assert_eq(ldt__cuda_exec_create(pc.p, &pc.out_val, 1, &x), LDT_ERR_UNSUPPORTED);
        cr_assert(strstr(ldt_last_error(), "no CUDA device"), "%s", ldt_last_error());
    }
    prog_close(&pc);
    /* no executable: argument errors, not crashes */
    float f;
    uint64_t d;
    cr_assert_eq(ldt__cuda_exec_replay(NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt__cuda_exec_run_eager(NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt__cuda_exec_read(NULL, 0, &f, sizeof f), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt__cuda_exec_set_rng(NULL, 0, 1), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt__cuda_exec_rng(NULL, &d, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_eq(ldt__cuda_exec_create(NULL, NULL, 0, &x), LDT_ERR_INVALID_ARGUMENT);
    { /* a step's extras, checked before any device work */
        ldt__cuda_step s = {NULL, 0, NULL, NULL, 2, 1, 0, NULL, NULL, NULL};
        ldt__program p;
        memset(&p, 0, sizeof p);
        cr_assert_eq(ldt__cuda_exec_create_step(&p, &s, &x), LDT_ERR_INVALID_ARGUMENT);
        cr_assert(strstr(ldt_last_error(), "2 step-end copies but no list"), "%s", ldt_last_error());
        s.ncopies = 0;
        s.nouts = -1;
        cr_assert_eq(ldt__cuda_exec_create_step(&p, &s, &x), LDT_ERR_INVALID_ARGUMENT);
        cr_assert_null(x);
    }
    cr_assert_eq(ldt__cuda_exec_reload(NULL, NULL), LDT_ERR_INVALID_ARGUMENT);
    cr_assert_neq(ldt__cuda_select_device(1 << 20), LDT_OK); /* no such device */
    cr_assert_eq(ldt__cuda_exec_graph_nodes(NULL), 0);
    ldt__cuda_exec_destroy(NULL);
    {
        /* collectives (a multi-rank program's) are refused, naming the instruction */
        ldt__instr ins[2];
        ldt__program p;
        memset(ins, 0, sizeof ins);
        memset(&p, 0, sizeof p);
        ins[0].kind = LDT__I_FILL;
        ins[1].kind = LDT__I_ALL_REDUCE;
        ins[1].node = 3;
        p.ins = ins;
        p.nins = 2;
        cr_assert_eq(ldt__cuda_program_check(&p), LDT_ERR_UNSUPPORTED);
        cr_assert(strstr(ldt_last_error(), "instruction 1 (all_reduce of node %3)"), "%s",
                  ldt_last_error());
        ins[1].kind = LDT__I_ARANGE; /* init recipes' arange has a kernel */
        cr_assert_eq(ldt__cuda_program_check(&p), LDT_OK, "%s", ldt_last_error());
        ins[1].kind = LDT__I_KERNEL;
        ins[1].op = LDT_OP_COUNT;
        cr_assert_eq(ldt__cuda_program_check(&p), LDT_ERR_UNSUPPORTED);
        cr_assert(strstr(ldt_last_error(), "custom ops"), "%s", ldt_last_error());
    }
}

/* ---------------------------------------------------------------------------------------
 * With a GPU: each covered op on CUDA against the CPU kernel.
 */
#include <cublas_v2.h>

#include "exec/cuda_libs.h"
#include "exec/fill.h"

static int64_t numel_of(const ldt_shape *s) {
    int64_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= s->dims[d];
    return n;
}

static size_t nbytes_of(const ldt_shape *s, ldt_dtype t) {
    return (size_t)numel_of(s) * ldt_dtype_size(t);
}

/* Element i as a double (halves exactly, integers exactly up to 2^53). */
static double elem(const void *b, ldt_dtype t, int64_t i) {
    switch (t) {
    case LDT_F32: return ((const float *)b)[i];
    case LDT_F64: return ((const double *)b)[i];
    case LDT_F16: return ldt_f16_to_f32(((const uint16_t *)b)[i]);
    case LDT_BF16: return ldt_bf16_to_f32(((const uint16_t *)b)[i]);
    case LDT_I32: return ((const int32_t *)b)[i];
    case LDT_I64: return (double)((const int64_t *)b)[i];
    default: return ((const uint8_t *)b)[i];
    }
}

/* Random values of dtype t: floats in about [-4, 4] with fractions (plus a few specials
 * when `special`), integers small and signed, u8 over its range, bool 0/1 and a stray 2;
 * nonzero: no zeros (integer divisors). */
static void fill_values(void *b, ldt_dtype t, int64_t n, uint64_t *rng, int nonzero, int special) {
    static const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e30, -1e30, 70000.5,
                                      300.7, -300.2, 2.5, -2.5, 1e-42, 3e9, -3e9};
    for (int64_t i = 0; i < n; i++) {
        double v = (double)ldt_test_range(rng, -4000, 4000) / 1000.0;
        int64_t k = ldt_test_range(rng, -50, 50);
        if (nonzero && k == 0) k = 7;
        if (nonzero && v == 0) v = 0.25;
        if (special && ldt_test_range(rng, 0, 5) == 0) {
            v = specials[ldt_test_range(rng, 0, (int64_t)(sizeof specials / sizeof *specials) - 1)];
            k = (int64_t)ldt_test_range(rng, 0, 1) ? INT32_MIN : (int64_t)1 << 40;
        }
        switch (t) {
        case LDT_F32: ((float *)b)[i] = (float)v; break;
        case LDT_F64: ((double *)b)[i] = v; break;
        case LDT_F16: ((uint16_t *)b)[i] = ldt_f32_to_f16((float)v); break;
        case LDT_BF16: ((uint16_t *)b)[i] = ldt_f32_to_bf16((float)v); break;
        case LDT_I32: ((int32_t *)b)[i] = (int32_t)(k == INT32_MIN ? INT32_MIN : k % 100000); break;
        case LDT_I64: ((int64_t *)b)[i] = k; break;
        case LDT_U8: ((uint8_t *)b)[i] = (uint8_t)(nonzero ? ldt_test_range(rng, 1, 255) : ldt_test_range(rng, 0, 255)); break;
        default: ((uint8_t *)b)[i] = (uint8_t)ldt_test_range(rng, 0, 2); break;
        }
    }
}

static cublasHandle_t g_blas;
static const ldt__cublas_api *g_blas_api; /* cuBLAS as the backend loads it */

/* Runs call c (host operands) on the CPU and, on device copies, on CUDA, and compares:
 * bitwise when rtol and atol are 0, else |gpu - cpu| <= atol + rtol |cpu| (infinities
 * match exactly); NaN matches NaN whatever its payload, in both modes. */
static void check_op(const ldt__kcall *c, double rtol, double atol, const char *what) {
    ldt__operand din[LDT_MAX_DIMS + 2];
    ldt__kcall g = *c;
    size_t ob = nbytes_of(&c->out.shape, c->out.dtype);
    void *cpu = calloc(ob ? ob : 1, 1), *gpu = calloc(ob ? ob : 1, 1), *dout = NULL;
    int *derr, herr = 0;
    ldt__cuda_env env;
    ldt__kcall h = *c;
    memset(&env, 0, sizeof env);
    h.out.data = cpu;
    cr_assert_eq(ldt__cpu_kernel(c->op)(&h), LDT_OK, "%s: cpu: %s", what, ldt_last_error());
    for (int k = 0; k < c->nin; k++) {
        size_t b = nbytes_of(&c->in[k].shape, c->in[k].dtype);
        din[k] = c->in[k];
        cr_assert_eq(cudaMalloc(&din[k].data, b ? b : 1), cudaSuccess);
        cr_assert_eq(cudaMemcpy(din[k].data, c->in[k].data, b, cudaMemcpyHostToDevice), cudaSuccess);
    }
    cr_assert_eq(cudaMalloc(&dout, ob ? ob : 1), cudaSuccess);
    cr_assert_eq(cudaMemset(dout, 0, ob ? ob : 1), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&derr, sizeof(int)), cudaSuccess);
    cr_assert_eq(cudaMemset(derr, 0, sizeof(int)), cudaSuccess);
    g.in = din;
    g.out.data = dout;
    env.stream = NULL;
    env.blas = (struct cublasContext *)g_blas;
    env.blas_api = g_blas_api;
    env.err = derr;
    cr_assert_eq(cudaMalloc(&env.scratch, LDT__CUDA_KSCRATCH), cudaSuccess); /* as the backend's */
    env.scratch_bytes = LDT__CUDA_KSCRATCH;
    cr_assert_eq(cuda_fn(c->op)(&g, &env), LDT_OK, "%s: cuda: %s", what, ldt_last_error());
    cr_assert_eq(cudaDeviceSynchronize(), cudaSuccess, "%s", what);
    cr_assert_eq(cudaMemcpy(gpu, dout, ob, cudaMemcpyDeviceToHost), cudaSuccess);
    cr_assert_eq(cudaMemcpy(&herr, derr, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    cr_assert_eq(herr, 0, "%s: device error %s", what, ldt__cuda_derr_text(herr));
    for (int64_t i = 0; i < numel_of(&c->out.shape); i++) {
        double a = elem(gpu, c->out.dtype, i), b = elem(cpu, c->out.dtype, i);
        size_t es = ldt_dtype_size(c->out.dtype);
        if (isnan(a) && isnan(b)) continue; /* NaN payloads differ: x86 and CUDA make their own */
        if (rtol == 0 && atol == 0) {
            cr_assert(!memcmp((char *)gpu + i * es, (char *)cpu + i * es, es),
                      "%s [%s %s]: element %lld: cuda %.17g, cpu %.17g", what,
                      ldt_dtype_name(c->out.dtype), ldt_test_fmt_shape(&c->out.shape),
                      (long long)i, a, b);
            continue;
        }
        int ok = a == b || fabs(a - b) <= atol + rtol * fabs(b);
        cr_assert(ok, "%s [%s %s]: element %lld: cuda %.17g, cpu %.17g (rtol %g, atol %g)", what,
                  ldt_dtype_name(c->out.dtype), ldt_test_fmt_shape(&c->out.shape), (long long)i,
                  a, b, rtol, atol);
    }
    for (int k = 0; k < c->nin; k++) cudaFree(din[k].data);
    cudaFree(dout);
    cudaFree(derr);
    cudaFree(env.scratch);
    free(cpu);
    free(gpu);
}

/* Tolerances of math that goes through libm / CUDA's math library (a few ulps), by dtype. */
static void math_tol(ldt_dtype t, double *rtol, double *atol) {
    switch (t) {
    case LDT_F32: *rtol = 1e-5, *atol = 1e-6; break;
    case LDT_F64: *rtol = 1e-13, *atol = 1e-14; break;
    case LDT_F16: *rtol = 2e-3, *atol = 1e-4; break; /* one f16 ulp: rounding may flip */
    case LDT_BF16: *rtol = 1.6e-2, *atol = 1e-3; break;
    default: *rtol = 0, *atol = 0; break;
    }
}

/* The broadcast shape of a and b (numpy rules), for the cases below (which broadcast). */
static ldt_shape bcast(const ldt_shape *a, const ldt_shape *b) {
    ldt_shape o = {a->ndim > b->ndim ? a->ndim : b->ndim, {0}};
    for (int d = 0; d < o.ndim; d++) {
        int da = d - (o.ndim - a->ndim), db = d - (o.ndim - b->ndim);
        int64_t x = da >= 0 ? a->dims[da] : 1, y = db >= 0 ? b->dims[db] : 1;
        o.dims[d] = x == 1 ? y : x;
    }
    return o;
}

static void op_setup(void) {
    if (ldt_cuda_device_count() == 0) return;
    cr_assert_eq(ldt__cublas_load(&g_blas_api), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(g_blas_api->create(&g_blas), CUBLAS_STATUS_SUCCESS);
}

static void op_teardown(void) {
    if (g_blas) g_blas_api->destroy(g_blas);
    g_blas = NULL;
}

typedef struct shape_pair {
    ldt_shape a, b;
} shape_pair;

static shape_pair k_pairs[6];

static void make_pairs(void) {
    k_pairs[0] = (shape_pair){ldt_test_shape(2, 7, 5), ldt_test_shape(2, 7, 5)};
    k_pairs[1] = (shape_pair){ldt_test_shape(2, 7, 5), ldt_test_shape(1, 5)};
    k_pairs[2] = (shape_pair){ldt_test_shape(2, 7, 1), ldt_test_shape(2, 1, 5)};
    k_pairs[3] = (shape_pair){ldt_test_shape(3, 3, 1, 4), ldt_test_shape(2, 2, 1)};
    k_pairs[4] = (shape_pair){ldt_test_shape(0), ldt_test_shape(1, 6)};
    k_pairs[5] = (shape_pair){ldt_test_shape(2, 300, 257), ldt_test_shape(1, 257)};
}

Test(cuda_ops, binary_and_where_match_cpu, .init = op_setup, .fini = op_teardown) {
    uint64_t rng = 11;
    char what[128];
    if (!have_gpu()) cr_skip("no CUDA device");
    make_pairs();
    for (int op = LDT_OP_ADD; op <= LDT_OP_GE; op++)
        for (int ti = 0; ti < NALL; ti++)
            for (int pi = 0; pi < 6; pi++) {
                ldt_dtype t = k_all[ti];
                int cmp = op >= LDT_OP_EQ;
                if (t == LDT_BOOL && !cmp) continue;
                ldt__operand in[2];
                ldt__kcall c;
                memset(&c, 0, sizeof c);
                in[0].shape = k_pairs[pi].a;
                in[1].shape = k_pairs[pi].b;
                for (int k = 0; k < 2; k++) {
                    in[k].dtype = t;
                    in[k].data = malloc(nbytes_of(&in[k].shape, t) + 1);
                    fill_values(in[k].data, t, numel_of(&in[k].shape), &rng,
                                k == 1 && op == LDT_OP_DIV, 1);
                }
                c.op = op;
                c.nin = 2;
                c.in = in;
                c.out.shape = bcast(&in[0].shape, &in[1].shape);
                c.out.dtype = cmp ? LDT_BOOL : t;
                snprintf(what, sizeof what, "%s %s with %s", ldt__builtin_op_name(op),
                         ldt_test_fmt_shape(&in[0].shape), ldt_test_fmt_shape(&in[1].shape));
                check_op(&c, 0, 0, what); /* IEEE arithmetic and integer wrap: bitwise */
                free(in[0].data);
                free(in[1].data);
            }
    for (int ti = 0; ti < NALL; ti++) {
        ldt_dtype t = k_all[ti];
        ldt__operand in[3];
        ldt__kcall c;
        memset(&c, 0, sizeof c);
        in[0].shape = ldt_test_shape(2, 7, 1);
        in[1].shape = ldt_test_shape(2, 7, 5);
        in[2].shape = ldt_test_shape(1, 5);
        in[0].dtype = LDT_BOOL;
        in[1].dtype = in[2].dtype = t;
        for (int k = 0; k < 3; k++) {
            in[k].data = malloc(nbytes_of(&in[k].shape, in[k].dtype));
            fill_values(in[k].data, in[k].dtype, numel_of(&in[k].shape), &rng, 0, 1);
        }
        c.op = LDT_OP_WHERE;
        c.nin = 3;
        c.in = in;
        c.out.shape = in[1].shape;
        c.out.dtype = t;
        check_op(&c, 0, 0, "where");
        for (int k = 0; k < 3; k++) free(in[k].data);
    }
}

Test(cuda_ops, integer_division_by_zero_is_flagged_on_the_device) {
    int32_t a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 1, 1}, *da, *db, *dout;
    int *derr, herr = 0;
    ldt__operand in[2];
    ldt__kcall c;
    ldt__cuda_env env;
    memset(&env, 0, sizeof env);
    if (!have_gpu()) cr_skip("no CUDA device");
    cr_assert_eq(cudaMalloc((void **)&da, sizeof a), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&db, sizeof b), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&dout, sizeof a), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&derr, sizeof(int)), cudaSuccess);
    cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, sizeof b, cudaMemcpyHostToDevice);
    cudaMemset(derr, 0, sizeof(int));
    memset(&c, 0, sizeof c);
    in[0] = (ldt__operand){da, ldt_test_shape(1, 4), LDT_I32};
    in[1] = (ldt__operand){db, ldt_test_shape(1, 4), LDT_I32};
    c.op = LDT_OP_DIV;
    c.nin = 2;
    c.in = in;
    c.out = (ldt__operand){dout, ldt_test_shape(1, 4), LDT_I32};
    env.err = derr;
    cr_assert_eq(ldt__cuda_k_binary(&c, &env), LDT_OK, "%s", ldt_last_error());
    cudaMemcpy(&herr, derr, sizeof(int), cudaMemcpyDeviceToHost);
    cr_assert_eq(herr, LDT__CUDA_DERR_INT_DIV_ZERO);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dout);
    cudaFree(derr);
}

Test(cuda_ops, scalar_unary_and_cast_match_cpu) {
    uint64_t rng = 12;
    char what[128];
    ldt_shape shapes[3] = {ldt_test_shape(2, 7, 5), ldt_test_shape(0), ldt_test_shape(1, 70001)};
    if (!have_gpu()) cr_skip("no CUDA device");
    for (int si = 0; si < 3; si++) {
        int64_t n = numel_of(&shapes[si]);
        for (int ti = 0; ti < NALL; ti++) {
            ldt_dtype t = k_all[ti];
            void *x = malloc((size_t)n * 8), *xnz = malloc((size_t)n * 8);
            fill_values(x, t, n, &rng, 0, 1);
            fill_values(xnz, t, n, &rng, 1, 0);
            ldt__operand in;
            ldt__kcall c;
            ldt__attrs a;
            double rt, at;
            math_tol(t, &rt, &at);
            in.shape = shapes[si];
            in.dtype = t;
            memset(&c, 0, sizeof c);
            c.nin = 1;
            c.in = &in;
            c.out.shape = shapes[si];
            c.out.dtype = t;
            c.attrs = &a;
            for (int op = LDT_OP_ADD_SCALAR; op <= LDT_OP_POW_SCALAR && t != LDT_BOOL; op++) {
                static const double sv[] = {2.5, -3, 0.5};
                int isf = ldt_dtype_is_float(t);
                if (op == LDT_OP_POW_SCALAR && !isf) continue;
                for (int k = 0; k < 3; k++) {
                    memset(&a, 0, sizeof a);
                    a.f[0] = isf ? sv[k] : (k == 0 ? 3 : k == 1 ? -3 : 1099511627776.0);
                    in.data = op == LDT_OP_RDIV_SCALAR && !isf ? xnz : x;
                    c.op = op;
                    snprintf(what, sizeof what, "%s %g", ldt__builtin_op_name(op), a.f[0]);
                    if (op == LDT_OP_POW_SCALAR)
                        check_op(&c, rt, at, what);
                    else
                        check_op(&c, 0, 0, what);
                }
            }
            memset(&a, 0, sizeof a);
            for (int op = LDT_OP_NEG; op <= LDT_OP_SILU; op++) {
                int exact = op == LDT_OP_NEG || op == LDT_OP_RELU || op == LDT_OP_SQRT ||
                            op == LDT_OP_RSQRT; /* IEEE-rounded on both */
                if (!ldt_dtype_is_float(t) && !(op == LDT_OP_NEG || op == LDT_OP_RELU)) continue;
                if (t == LDT_BOOL) continue;
                for (int form = 0; form < (op == LDT_OP_GELU ? 3 : 1); form++) {
                    a.i[0] = form;
                    in.data = x;
                    c.op = op;
                    snprintf(what, sizeof what, "%s form %d", ldt__builtin_op_name(op), form);
                    check_op(&c, exact ? 0 : rt, exact ? 0 : at, what);
                }
            }
            for (int ui = 0; ui < NALL; ui++) { /* casts: one rounding, saturation: bitwise */
                in.data = x;
                c.op = LDT_OP_CAST;
                c.attrs = NULL;
                c.out.dtype = k_all[ui];
                snprintf(what, sizeof what, "cast %s -> %s", ldt_dtype_name(t),
                         ldt_dtype_name(k_all[ui]));
                check_op(&c, 0, 0, what);
            }
            free(x);
            free(xnz);
        }
    }
}

/* Rows 2..6 of 10, and columns {1,2,3, 7,8,9} of 12: two runs of 3 every 6. */
static void make_region(ldt_region *r, ldt_shape *global) {
    memset(r, 0, sizeof *r);
    *global = ldt_test_shape(2, 10, 12);
    r->ndim = 2;
    r->runs[0] = (ldt_dim_runs){2, 5, 1, 0};
    r->runs[1] = (ldt_dim_runs){1, 3, 2, 6};
    r->local_shape = ldt_test_shape(2, 5, 6);
    r->offset[0] = 2;
    r->offset[1] = 1;
    r->nslices = 2;
    r->numel = 30;
}

Test(cuda_ops, random_ops_and_dropout_match_cpu) {
    ldt_region reg;
    ldt_shape global;
    char what[128];
    uint64_t rng = 13;
    if (!have_gpu()) cr_skip("no CUDA device");
    make_region(&reg, &global);
    for (int op = LDT_OP_RAND; op <= LDT_OP_RANDINT; op++)
        for (int ti = 0; ti < NALL; ti++)
            for (int whole = 0; whole < 2; whole++) {
                ldt_dtype t = k_all[ti];
                int isf = ldt_dtype_is_float(t);
                if (!isf && !(op == LDT_OP_BERNOULLI) && !(op == LDT_OP_RANDINT && t != LDT_BOOL))
                    continue;
                ldt__kcall c;
                ldt__attrs a;
                memset(&c, 0, sizeof c);
                memset(&a, 0, sizeof a);
                a.i[0] = 1234567;
                a.i[1] = 89;
                if (op == LDT_OP_RAND) a.f[0] = -2, a.f[1] = 3;
                if (op == LDT_OP_RANDN) a.f[0] = 0.5, a.f[1] = 2;
                if (op == LDT_OP_BERNOULLI) a.f[0] = 0.3;
                if (op == LDT_OP_TRUNC_NORMAL) {
                    double lo = -1.5, hi = 2.0;
                    a.f[0] = 0.1, a.f[1] = 1.2;
                    memcpy(&a.i[2], &lo, 8);
                    memcpy(&a.i[3], &hi, 8);
                }
                if (op == LDT_OP_RANDINT) a.i[2] = t == LDT_U8 ? 3 : -20, a.i[3] = 100;
                c.op = op;
                c.attrs = &a;
                c.out.dtype = t;
                if (whole) {
                    c.out.shape = ldt_test_shape(2, 37, 5);
                } else {
                    c.out.shape = reg.local_shape;
                    c.region = &reg;
                    c.global_shape = &global;
                }
                snprintf(what, sizeof what, "%s %s", ldt__builtin_op_name(op),
                         whole ? "whole" : "region");
                if (op == LDT_OP_RANDN || op == LDT_OP_TRUNC_NORMAL) {
                    /* through logf/sinf/cosf/erfc: the last bits may differ */
                    double rt, at;
                    math_tol(t, &rt, &at);
                    if (t == LDT_F32 || (t == LDT_F64 && op == LDT_OP_RANDN))
                        rt = 1e-5, at = 1e-5; /* randn is made in f32, even for f64 */
                    else if (t == LDT_F64)
                        rt = 1e-12, at = 1e-12; /* trunc_normal: double libm, a few ulps */
                    check_op(&c, rt, at, what);
                } else {
                    check_op(&c, 0, 0, what); /* uniform, bernoulli, randint: bitwise */
                }
            }
    for (int ti = 0; ti < 4; ti++)
        for (int whole = 0; whole < 2; whole++) {
            ldt_dtype t = k_all[ti];
            ldt__operand in;
            ldt__kcall c;
            ldt__attrs a;
            memset(&c, 0, sizeof c);
            memset(&a, 0, sizeof a);
            a.i[0] = 42;
            a.i[1] = 7;
            a.f[0] = 0.3;
            in.dtype = t;
            in.shape = whole ? ldt_test_shape(2, 33, 7) : reg.local_shape;
            in.data = malloc(nbytes_of(&in.shape, t));
            fill_values(in.data, t, numel_of(&in.shape), &rng, 0, 0);
            c.op = LDT_OP_DROPOUT;
            c.attrs = &a;
            c.nin = 1;
            c.in = &in;
            c.out.shape = in.shape;
            c.out.dtype = t;
            if (!whole) {
                c.region = &reg;
                c.global_shape = &global;
            }
            check_op(&c, 0, 0, whole ? "dropout whole" : "dropout region");
            free(in.data);
        }
}

Test(cuda_ops, fill_matches_the_cpu_store) {
    static const double vals[] = {2.7, -1.0, 0.0, 70000.0, 1e-8};
    if (!have_gpu()) cr_skip("no CUDA device");
    for (int ti = 0; ti < NALL; ti++)
        for (int k = 0; k < 5; k++) {
            ldt_dtype t = k_all[ti];
            ldt__operand o = {NULL, ldt_test_shape(2, 9, 13), t};
            size_t b = nbytes_of(&o.shape, t);
            void *cpu = malloc(b), *gpu = malloc(b);
            ldt__fill_f64(cpu, t, numel_of(&o.shape), vals[k]);
            cr_assert_eq(cudaMalloc(&o.data, b), cudaSuccess);
            cr_assert_eq(ldt__cuda_fill(&o, vals[k], NULL), LDT_OK, "%s", ldt_last_error());
            cr_assert_eq(cudaMemcpy(gpu, o.data, b, cudaMemcpyDeviceToHost), cudaSuccess);
            cr_assert(!memcmp(cpu, gpu, b), "fill %g as %s", vals[k], ldt_dtype_name(t));
            cudaFree(o.data);
            free(cpu);
            free(gpu);
        }
}

Test(cuda_ops, matmul_and_linear_match_cpu, .init = op_setup, .fini = op_teardown) {
    typedef struct mm_case {
        int op, nin;
        ldt_shape a, b, bias, out;
    } mm_case;
    mm_case cases[] = {
        {LDT_OP_MATMUL, 2, ldt_test_shape(2, 5, 7), ldt_test_shape(2, 7, 3), {0, {0}}, ldt_test_shape(2, 5, 3)},
        {LDT_OP_MATMUL, 2, ldt_test_shape(3, 2, 5, 7), ldt_test_shape(2, 7, 3), {0, {0}}, ldt_test_shape(3, 2, 5, 3)},
        {LDT_OP_MATMUL, 2, ldt_test_shape(3, 4, 5, 7), ldt_test_shape(3, 4, 7, 3), {0, {0}}, ldt_test_shape(3, 4, 5, 3)},
        {LDT_OP_MATMUL, 2, ldt_test_shape(4, 2, 1, 5, 7), ldt_test_shape(3, 3, 7, 4), {0, {0}}, ldt_test_shape(4, 2, 3, 5, 4)},
        {LDT_OP_MATMUL, 2, ldt_test_shape(1, 7), ldt_test_shape(2, 7, 3), {0, {0}}, ldt_test_shape(1, 3)},
        {LDT_OP_MATMUL, 2, ldt_test_shape(2, 5, 7), ldt_test_shape(1, 7), {0, {0}}, ldt_test_shape(1, 5)},
        {LDT_OP_MATMUL, 2, ldt_test_shape(2, 5, 0), ldt_test_shape(2, 0, 3), {0, {0}}, ldt_test_shape(2, 5, 3)},
        {LDT_OP_MATMUL, 2, ldt_test_shape(2, 96, 130), ldt_test_shape(2, 130, 70), {0, {0}}, ldt_test_shape(2, 96, 70)},
        {LDT_OP_LINEAR, 3, ldt_test_shape(3, 2, 5, 7), ldt_test_shape(2, 3, 7), ldt_test_shape(1, 3), ldt_test_shape(3, 2, 5, 3)},
        {LDT_OP_LINEAR, 2, ldt_test_shape(2, 64, 48), ldt_test_shape(2, 40, 48), {0, {0}}, ldt_test_shape(2, 64, 40)},
        {LDT_OP_LINEAR, 3, ldt_test_shape(2, 4, 0), ldt_test_shape(2, 3, 0), ldt_test_shape(1, 3), ldt_test_shape(2, 4, 3)},
    };
    uint64_t rng = 14;
    char what[160];
    if (!have_gpu()) cr_skip("no CUDA device");
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
        for (int ti = 0; ti < 4; ti++) {
            const mm_case *m = &cases[ci];
            ldt_dtype t = k_all[ti];
            ldt__operand in[3];
            ldt__kcall c;
            const ldt_shape *sh[3] = {&m->a, &m->b, &m->bias};
            memset(&c, 0, sizeof c);
            for (int k = 0; k < m->nin; k++) {
                in[k].shape = *sh[k];
                in[k].dtype = t;
                in[k].data = malloc(nbytes_of(sh[k], t) + 1);
                fill_values(in[k].data, t, numel_of(sh[k]), &rng, 0, 0);
            }
            c.op = m->op;
            c.nin = m->nin;
            c.in = in;
            c.out.shape = m->out;
            c.out.dtype = t;
            snprintf(what, sizeof what, "%s %s @ %s", ldt__builtin_op_name(m->op),
                     ldt_test_fmt_shape(&m->a), ldt_test_fmt_shape(&m->b));
            /* sums of up to 130 products of values up to 4: absolute error from the order */
            double rt = t == LDT_F64 ? 1e-12 : t == LDT_F32 ? 1e-5 : t == LDT_F16 ? 2e-3 : 1.6e-2;
            double at = t == LDT_F64 ? 1e-10 : t == LDT_F32 ? 1e-2 : t == LDT_F16 ? 0.25 : 2.0;
            check_op(&c, rt, at, what);
            for (int k = 0; k < m->nin; k++) free(in[k].data);
        }
}

Test(cuda_ops, program_captured_and_replayed_equals_cpu) {
    prog_case pc;
    ldt__cuda_exec *x = NULL;
    float ref[32], got[32];
    void *dst = ref;
    int64_t nb = sizeof ref;
    if (!have_gpu()) cr_skip("no CUDA device");
    prog_open(&pc, 0);
    cr_assert_eq(ldt_plan_run(pc.plan, 1, &pc.out, &dst, &nb), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt__cuda_exec_create(pc.p, &pc.out_val, 1, &x), LDT_OK, "%s", ldt_last_error());
    cr_assert(ldt__cuda_exec_graph_nodes(x) > 0);
    for (int step = 0; step < 4; step++) {
        if (step < 3)
            cr_assert_eq(ldt__cuda_exec_replay(x), LDT_OK, "%s", ldt_last_error());
        else
            cr_assert_eq(ldt__cuda_exec_run_eager(x), LDT_OK, "%s", ldt_last_error());
        cr_assert_eq(ldt__cuda_exec_read(x, pc.out_val, got, sizeof got), LDT_OK, "%s",
                     ldt_last_error());
        for (int i = 0; i < 32; i++)
            cr_assert(fabsf(got[i] - ref[i]) <= 1e-5f + 1e-4f * fabsf(ref[i]),
                      "step %d, element %d: cuda %.9g, cpu %.9g", step, i, got[i], ref[i]);
    }
    /* a new input is staged into the graph's static buffer at the next replay */
    for (int i = 0; i < 8 * 16; i++) pc.x[i] *= -1.0f;
    cr_assert_eq(ldt_input_bind(pc.xin, pc.x, 8 * 16 * sizeof(float)), LDT_OK);
    cr_assert_eq(ldt_plan_run(pc.plan, 1, &pc.out, &dst, &nb), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt__cuda_exec_replay(x), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt__cuda_exec_read(x, pc.out_val, got, sizeof got), LDT_OK);
    for (int i = 0; i < 32; i++)
        cr_assert(fabsf(got[i] - ref[i]) <= 1e-5f + 1e-4f * fabsf(ref[i]),
                  "new input, element %d: cuda %.9g, cpu %.9g", i, got[i], ref[i]);
    ldt__cuda_exec_destroy(x);
    prog_close(&pc);
}

Test(cuda_ops, random_offsets_from_device_memory) {
    /* a kernel adds the device word to its offset: equal to the CPU kernel at offset + 5 */
    ldt__attrs a, acpu;
    ldt__kcall c;
    ldt__cuda_env env;
    uint64_t delta = 5, *ddelta;
    float cpu[300], gpu[300], *dout;
    if (!have_gpu()) cr_skip("no CUDA device");
    memset(&a, 0, sizeof a);
    memset(&c, 0, sizeof c);
    memset(&env, 0, sizeof env);
    a.i[0] = 77;
    a.i[1] = 1000;
    a.f[0] = 0, a.f[1] = 1;
    acpu = a;
    acpu.i[1] += 5;
    c.op = LDT_OP_RAND;
    c.attrs = &acpu;
    c.out = (ldt__operand){cpu, ldt_test_shape(1, 300), LDT_F32};
    cr_assert_eq(ldt__cpu_kernel(LDT_OP_RAND)(&c), LDT_OK);
    cr_assert_eq(cudaMalloc((void **)&ddelta, sizeof delta), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&dout, sizeof gpu), cudaSuccess);
    cudaMemcpy(ddelta, &delta, sizeof delta, cudaMemcpyHostToDevice);
    env.rng_delta = ddelta;
    c.attrs = &a;
    c.out.data = dout;
    cr_assert_eq(ldt__cuda_k_random(&c, &env), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(cudaMemcpy(gpu, dout, sizeof gpu, cudaMemcpyDeviceToHost), cudaSuccess);
    cr_assert(!memcmp(cpu, gpu, sizeof gpu), "rand at offset 1000 + device delta 5");
    cudaFree(ddelta);
    cudaFree(dout);

    /* a replayed step advances the delta inside the graph: each replay draws anew */
    prog_case pc;
    ldt__cuda_exec *x = NULL;
    float ref[32], r1[32], r2[32];
    void *dst = ref;
    int64_t nb = sizeof ref;
    uint64_t d, steps;
    prog_open(&pc, 0);
    cr_assert_eq(ldt_plan_run(pc.plan, 1, &pc.out, &dst, &nb), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt__cuda_exec_create(pc.p, &pc.out_val, 1, &x), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt__cuda_exec_rng(x, &d, &steps), LDT_OK);
    cr_assert(d == 0 && steps == 0, "after create: delta %llu, %llu steps", (unsigned long long)d,
              (unsigned long long)steps);
    cr_assert_eq(ldt__cuda_exec_set_rng(x, 0, 1000), LDT_OK);
    cr_assert_eq(ldt__cuda_exec_replay(x), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt__cuda_exec_read(x, pc.out_val, r1, sizeof r1), LDT_OK);
    cr_assert_eq(ldt__cuda_exec_replay(x), LDT_OK, "%s", ldt_last_error());
    cr_assert_eq(ldt__cuda_exec_read(x, pc.out_val, r2, sizeof r2), LDT_OK);
    cr_assert_eq(ldt__cuda_exec_rng(x, &d, &steps), LDT_OK);
    cr_assert(d == 2000 && steps == 2, "delta %llu, %llu steps", (unsigned long long)d,
              (unsigned long long)steps);
    for (int i = 0; i < 32; i++) /* the first replay drew at delta 0: the lowered offsets */
        cr_assert(fabsf(r1[i] - ref[i]) <= 1e-5f + 1e-4f * fabsf(ref[i]), "element %d", i);
    cr_assert(memcmp(r1, r2, sizeof r1) != 0, "the second replay drew the same values");
    ldt__cuda_exec_destroy(x);
    prog_close(&pc);
}

/* ---------------------------------------------------------------------------------------
 * Second installment: reductions, views, softmax..cross_entropy.
 */

/* One call of op on inputs of the given shapes and dtypes (values from fill_values), output
 * out_shape/out_dtype, compared by check_op; inputs freed after. */
static void run_case(int op, int nin, const ldt_shape *sh, const ldt_dtype *dt,
                     const ldt_shape *osh, ldt_dtype odt, const ldt__attrs *a, int special,
                     double rtol, double atol, const char *what, uint64_t *rng) {
    ldt__operand in[3];
    ldt__kcall c;
    memset(&c, 0, sizeof c);
    for (int k = 0; k < nin; k++) {
        in[k].shape = sh[k];
        in[k].dtype = dt[k];
        in[k].data = malloc(nbytes_of(&sh[k], dt[k]) + 8);
        fill_values(in[k].data, dt[k], numel_of(&sh[k]), rng, 0, special);
    }
    c.op = op;
    c.attrs = a;
    c.nin = nin;
    c.in = in;
    c.out.shape = *osh;
    c.out.dtype = odt;
    check_op(&c, rtol, atol, what);
    for (int k = 0; k < nin; k++) free(in[k].data);
}

Test(cuda_ops, reductions_match_cpu) {
    /* shape, mask; the last four are long reductions over few outputs (a block per output,
     * or several: the split reductions) */
    struct { ldt_shape s; uint64_t mask; int block; } cases[] = {
        {ldt_test_shape(2, 7, 5), 0x1, 0},        {ldt_test_shape(2, 7, 5), 0x2, 0},
        {ldt_test_shape(3, 3, 4, 5), 0x5, 0},     {ldt_test_shape(3, 3, 4, 5), 0x7, 0},
        {ldt_test_shape(2, 300, 257), 0x1, 0},    {ldt_test_shape(2, 0, 5), 0x1, 0},
        {ldt_test_shape(0), 0x0, 0},              {ldt_test_shape(3, 2, 1, 3000), 0x4, 1},
        {ldt_test_shape(2, 300, 257), 0x3, 1},
        /* 40001 of each of 3 outputs: split over 2 blocks each, the parts joined after */
        {ldt_test_shape(2, 3, 40001), 0x2, 1},
        /* 70 outputs of 2100: each split into 2 chunks, a thread each, joined after */
        {ldt_test_shape(2, 2100, 70), 0x1, 1},
    };
    char what[160];
    uint64_t rng = 21;
    if (!have_gpu()) cr_skip("no CUDA device");
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
        for (int op = LDT_OP_SUM; op <= LDT_OP_AMIN; op++)
            for (int ti = 0; ti < NALL; ti++)
                for (int keep = 0; keep < 2; keep++) {
                    ldt_dtype t = k_all[ti];
                    int isf = ldt_dtype_is_float(t), ext = op == LDT_OP_AMAX || op == LDT_OP_AMIN;
                    ldt_shape is = cases[ci].s, os = {0, {0}};
                    int64_t count = 1;
                    if ((op == LDT_OP_MEAN && !isf) || (ext && t == LDT_BOOL)) continue;
                    for (int d = 0; d < is.ndim; d++) {
                        if ((cases[ci].mask >> d) & 1) count *= is.dims[d];
                        if (!((cases[ci].mask >> d) & 1)) os.dims[os.ndim++] = is.dims[d];
                        else if (keep) os.dims[os.ndim++] = 1;
                    }
                    if (ext && count == 0) continue; /* refused on both: checked on the host */
                    ldt__attrs a;
                    memset(&a, 0, sizeof a);
                    a.i[0] = (int64_t)cases[ci].mask;
                    a.i[1] = keep;
                    /* a block per output adds a compensated double sum in another order: within
                     * an ulp of the CPU's before the one rounding; everything else bitwise */
                    int sum_block = cases[ci].block && isf && !ext;
                    double rt = 0, at = 0;
                    if (sum_block) math_tol(t, &rt, &at);
                    if (sum_block && t == LDT_F64) rt = 1e-14, at = 1e-14;
                    snprintf(what, sizeof what, "%s %s mask 0x%llx keepdim %d", ldt__builtin_op_name(op),
                             ldt_test_fmt_shape(&is), (unsigned long long)cases[ci].mask, keep);
                    run_case(op, 1, &is, &t, &os, (op == LDT_OP_SUM && !isf) ? LDT_I64 : t, &a,
                             !sum_block, rt, at, what, &rng);
                }
}

Test(cuda_ops, views_match_cpu_bitwise) {
    ldt_shape s3 = ldt_test_shape(3, 4, 7, 5), s75 = ldt_test_shape(2, 7, 5);
    char what[160];
    uint64_t rng = 22;
    if (!have_gpu()) cr_skip("no CUDA device");
    for (int ti = 0; ti < NALL; ti++) {
        ldt_dtype t = k_all[ti], tt[3] = {t, t, t};
        ldt__attrs a;
        ldt_shape o;
#define VIEW(op_, nin_, shp_, out_, label_)                                                  \
    do {                                                                                    \
        o = (out_);                                                                         \
        snprintf(what, sizeof what, "%s %s", label_, ldt_dtype_name(t));                    \
        run_case(op_, nin_, shp_, tt, &o, t, &a, 1, 0, 0, what, &rng);                      \
    } while (0)
        memset(&a, 0, sizeof a);
        VIEW(LDT_OP_RESHAPE, 1, &s3, ldt_test_shape(2, 28, 5), "reshape");
        VIEW(LDT_OP_ALIAS, 1, &s3, s3, "alias");
        VIEW(LDT_OP_REDISTRIBUTE, 1, &s3, s3, "redistribute");
        a.i[0] = 2, a.i[1] = 0, a.i[2] = 1;
        VIEW(LDT_OP_PERMUTE, 1, &s3, ldt_test_shape(3, 5, 4, 7), "permute 2,0,1");
        a.i[0] = 1, a.i[1] = 0;
        VIEW(LDT_OP_PERMUTE, 1, &s75, ldt_test_shape(2, 5, 7), "transpose");
        {
            ldt_shape big = ldt_test_shape(2, 300, 257);
            VIEW(LDT_OP_PERMUTE, 1, &big, ldt_test_shape(2, 257, 300), "transpose 300x257");
        }
        a.i[0] = 1, a.i[1] = 1, a.i[2] = 6, a.i[3] = 2;
        VIEW(LDT_OP_SLICE, 1, &s3, ldt_test_shape(3, 4, 3, 5), "slice dim 1 [1:6:2]");
        a.i[0] = 0, a.i[1] = 1, a.i[2] = 3, a.i[3] = 1;
        VIEW(LDT_OP_SLICE, 1, &s3, ldt_test_shape(3, 2, 7, 5), "slice dim 0 [1:3]");
        a.i[0] = 2, a.i[1] = 0, a.i[2] = 0, a.i[3] = 1;
        VIEW(LDT_OP_SLICE, 1, &s3, ldt_test_shape(3, 4, 7, 0), "slice empty");
        a.i[0] = 1, a.i[1] = 6;
        VIEW(LDT_OP_SELECT, 1, &s3, ldt_test_shape(2, 4, 5), "select dim 1 index 6");
        a.i[0] = 2, a.i[1] = 0;
        VIEW(LDT_OP_SELECT, 1, &s3, ldt_test_shape(2, 4, 7), "select dim 2 index 0");
        {
            ldt_shape col = ldt_test_shape(2, 7, 1);
            VIEW(LDT_OP_EXPAND, 1, &col, ldt_test_shape(3, 3, 7, 5), "expand [7,1] -> [3,7,5]");
            VIEW(LDT_OP_EXPAND, 1, &s75, ldt_test_shape(3, 2, 7, 5), "expand [7,5] -> [2,7,5]");
        }
        {
            ldt_shape cs[3] = {ldt_test_shape(3, 4, 2, 5), ldt_test_shape(3, 4, 0, 5),
                               ldt_test_shape(3, 4, 3, 5)};
            a.i[0] = 1;
            VIEW(LDT_OP_CAT, 3, cs, ldt_test_shape(3, 4, 5, 5), "cat dim 1");
            ldt_shape cl[2] = {ldt_test_shape(2, 7, 2), ldt_test_shape(2, 7, 3)};
            a.i[0] = -1;
            VIEW(LDT_OP_CAT, 2, cl, ldt_test_shape(2, 7, 5), "cat dim -1");
        }
#undef VIEW
    }
}

Test(cuda_ops, softmax_norms_and_cross_entropy_match_cpu) {
    ldt_shape s3 = ldt_test_shape(3, 4, 7, 33), wide = ldt_test_shape(2, 3, 3000);
    char what[160];
    uint64_t rng = 23;
    if (!have_gpu()) cr_skip("no CUDA device");
    for (int ti = 0; ti < 4; ti++) {
        ldt_dtype t = k_all[ti], tt[3] = {t, t, t};
        double rt, at;
        ldt__attrs a;
        math_tol(t, &rt, &at); /* exp and log: CUDA's math library, a few ulps */
        for (int op = LDT_OP_SOFTMAX; op <= LDT_OP_LOG_SOFTMAX; op++) {
            for (int dim = 0; dim < 3; dim++) {
                memset(&a, 0, sizeof a);
                a.i[0] = dim;
                snprintf(what, sizeof what, "%s dim %d", ldt__builtin_op_name(op), dim);
                run_case(op, 1, &s3, tt, &s3, t, &a, 1, rt, at, what, &rng);
            }
            a.i[0] = 1;
            run_case(op, 1, &wide, tt, &wide, t, &a, 0, rt, at, "softmax of 3000", &rng);
        }
        /* norms: double statistics, no FMA contraction on either side: bitwise */
        for (int op = LDT_OP_LAYER_NORM; op <= LDT_OP_RMS_NORM; op++)
            for (int k = 1; k <= 2; k++)
                for (int hw = 0; hw < 2; hw++)
                    for (int hb = 0; hb < 2; hb++) {
                        if (op == LDT_OP_RMS_NORM && hb) continue;
                        ldt_shape sh[3] = {s3, s3, s3};
                        int nin = 1;
                        memset(&a, 0, sizeof a);
                        a.i[0] = k, a.i[1] = hw, a.i[2] = hb;
                        a.f[0] = 1e-5;
                        for (int j = 0; j < hw + hb; j++) {
                            sh[nin].ndim = k;
                            for (int d = 0; d < k; d++) sh[nin].dims[d] = s3.dims[3 - k + d];
                            nin++;
                        }
                        snprintf(what, sizeof what, "%s k %d weight %d bias %d",
                                 ldt__builtin_op_name(op), k, hw, hb);
                        run_case(op, nin, sh, tt, &s3, t, &a, 0, 0, 0, what, &rng);
                    }
        /* cross_entropy: targets of both dtypes, some rows ignored, and all rows ignored; 300
         * rows: 37 blocks of 8 rows and one of 4, their sums joined after */
        for (int ig = 0; ig < 3; ig++) {
            ldt_dtype tdt = ig == 1 ? LDT_I32 : LDT_I64;
            int rows = 300;
            ldt_shape xs = ldt_test_shape(2, rows, 33), ts = ldt_test_shape(1, rows), sc = {0, {0}};
            ldt__operand in[2];
            ldt__kcall c;
            memset(&c, 0, sizeof c);
            memset(&a, 0, sizeof a);
            a.i[0] = ig == 2 ? 5 : -100;
            in[0] = (ldt__operand){malloc(nbytes_of(&xs, t)), xs, t};
            in[1] = (ldt__operand){malloc(nbytes_of(&ts, tdt)), ts, tdt};
            fill_values(in[0].data, t, numel_of(&xs), &rng, 0, 0);
            for (int r = 0; r < rows; r++) {
                int64_t k = ig == 2 ? 5 : (r % 7 == 3 ? -100 : ldt_test_range(&rng, 0, 32));
                if (tdt == LDT_I32) ((int32_t *)in[1].data)[r] = (int32_t)k;
                else ((int64_t *)in[1].data)[r] = k;
            }
            c.op = LDT_OP_CROSS_ENTROPY;
            c.attrs = &a;
            c.nin = 2;
            c.in = in;
            c.out = (ldt__operand){NULL, sc, t};
            snprintf(what, sizeof what, "cross_entropy %s targets%s", ldt_dtype_name(tdt),
                     ig == 2 ? ", all ignored" : "");
            check_op(&c, rt, at, what);
            free(in[0].data);
            free(in[1].data);
        }
    }
}

Test(cuda_ops, cross_entropy_target_out_of_range_is_flagged_on_the_device) {
    float x[6] = {1, 2, 3, 4, 5, 6}, *dx, *dy;
    int64_t tg[2] = {1, 3}, *dt;
    int *derr, herr = 0;
    ldt__operand in[2];
    ldt__attrs a;
    ldt__kcall c;
    ldt__cuda_env env;
    memset(&env, 0, sizeof env);
    memset(&a, 0, sizeof a);
    if (!have_gpu()) cr_skip("no CUDA device");
    cr_assert_eq(cudaMalloc((void **)&dx, sizeof x), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&dt, sizeof tg), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&dy, sizeof(float)), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&derr, sizeof(int)), cudaSuccess);
    cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice);
    cudaMemcpy(dt, tg, sizeof tg, cudaMemcpyHostToDevice);
    cudaMemset(derr, 0, sizeof(int));
    memset(&c, 0, sizeof c);
    a.i[0] = -100;
    in[0] = (ldt__operand){dx, ldt_test_shape(2, 2, 3), LDT_F32};
    in[1] = (ldt__operand){dt, ldt_test_shape(1, 2), LDT_I64};
    c.op = LDT_OP_CROSS_ENTROPY;
    c.attrs = &a;
    c.nin = 2;
    c.in = in;
    c.out = (ldt__operand){dy, ldt_test_shape(0), LDT_F32};
    env.err = derr;
    cr_assert_eq(ldt__cuda_k_nn(&c, &env), LDT_OK, "%s", ldt_last_error());
    cudaMemcpy(&herr, derr, sizeof(int), cudaMemcpyDeviceToHost);
    cr_assert_eq(herr, LDT__CUDA_DERR_TARGET_RANGE, "%d", herr);
    cr_assert(strstr(ldt__cuda_derr_text(herr), "cross_entropy"));
    cudaFree(dx);
    cudaFree(dt);
    cudaFree(dy);
    cudaFree(derr);
}

/* ---------------------------------------------------------------------------------------
 * Third installment: the index family.
 */

/* One index-family call: inputs of the given shapes and dtypes, values from fill_values
 * except the inputs in ixk[0..nix), filled with indices in -n..n-1 (negatives and repeats
 * included; n = ixn[j]); compared bitwise with the CPU kernel. */
static void index_case(int op, int nin, const ldt_shape *sh, const ldt_dtype *dt, int nix,
                       const int *ixk, const int64_t *ixn, const ldt_shape *osh, ldt_dtype odt,
                       const ldt__attrs *a, const char *what, uint64_t *rng) {
    ldt__operand in[LDT_MAX_DIMS + 2];
    ldt__kcall c;
    memset(&c, 0, sizeof c);
    for (int k = 0; k < nin; k++) {
        in[k].shape = sh[k];
        in[k].dtype = dt[k];
        in[k].data = malloc(nbytes_of(&sh[k], dt[k]) + 8);
        fill_values(in[k].data, dt[k], numel_of(&sh[k]), rng, 0, 1);
        for (int j = 0; j < nix; j++) {
            if (ixk[j] != k) continue;
            for (int64_t i = 0; i < numel_of(&sh[k]); i++) {
                int64_t v = ixn[j] ? ldt_test_range(rng, -ixn[j], ixn[j] - 1) : 0;
                if (dt[k] == LDT_I32) ((int32_t *)in[k].data)[i] = (int32_t)v;
                else ((int64_t *)in[k].data)[i] = v;
            }
        }
    }
    c.op = op;
    c.attrs = a;
    c.nin = nin;
    c.in = in;
    c.out.shape = *osh;
    c.out.dtype = odt;
    check_op(&c, 0, 0, what);
    for (int k = 0; k < nin; k++) free(in[k].data);
}

Test(cuda_ops, index_ops_match_cpu_bitwise) {
    ldt_shape x3 = ldt_test_shape(3, 4, 7, 5);
    char what[200];
    uint64_t rng = 31;
    if (!have_gpu()) cr_skip("no CUDA device");
    for (int ti = 0; ti < NALL; ti++)
        for (int it = 0; it < 2; it++) {
            ldt_dtype t = k_all[ti], ixt = it ? LDT_I64 : LDT_I32, dt[LDT_MAX_DIMS + 2];
            int acc_ok = t != LDT_BOOL, k1 = 1;
            ldt__attrs a;
            memset(&a, 0, sizeof a);
            for (int k = 0; k < LDT_MAX_DIMS + 2; k++) dt[k] = k == 0 ? t : ixt;
#define NAME(fmt_, ...) snprintf(what, sizeof what, fmt_ " [%s, %s index]", __VA_ARGS__,   \
                                 ldt_dtype_name(t), ldt_dtype_name(ixt))
            { /* embedding: whole table and range mode (rows [3, 7) of an 11-row table) */
                ldt_shape sh[2] = {ldt_test_shape(2, 11, 6), ldt_test_shape(2, 3, 4)};
                ldt_shape o = ldt_test_shape(3, 3, 4, 6);
                int64_t n = 11;
                NAME("embedding %s", "whole");
                index_case(LDT_OP_EMBEDDING, 2, sh, dt, 1, &k1, &n, &o, t, NULL, what, &rng);
                sh[0] = ldt_test_shape(2, 4, 6);
                a.i[0] = 1, a.i[1] = 3, a.i[2] = 11;
                NAME("embedding %s", "range mode");
                index_case(LDT_OP_EMBEDDING, 2, sh, dt, 1, &k1, &n, &o, t, &a, what, &rng);
            }
            { /* one_hot: out dtype t, indices [5,3] */
                ldt_shape sh[1] = {ldt_test_shape(2, 5, 3)}, o = ldt_test_shape(3, 5, 3, 7);
                ldt_dtype idt[1] = {ixt};
                int k0 = 0;
                int64_t n = 7;
                memset(&a, 0, sizeof a);
                a.i[0] = 7;
                NAME("one_hot %d", 7);
                index_case(LDT_OP_ONE_HOT, 1, sh, idt, 1, &k0, &n, &o, t, &a, what, &rng);
            }
            for (int dim = -1; dim < 3; dim++) { /* index_select, index_add: 9 indices */
                int d = dim < 0 ? 2 : dim;
                ldt_shape o = x3, sh[3] = {x3, ldt_test_shape(1, 9), x3};
                int64_t n = x3.dims[d];
                o.dims[d] = 9;
                sh[2] = o;
                memset(&a, 0, sizeof a);
                a.i[0] = dim;
                NAME("index_select dim %d", dim);
                index_case(LDT_OP_INDEX_SELECT, 2, sh, dt, 1, &k1, &n, &o, t, &a, what, &rng);
                if (!acc_ok) continue;
                ldt_dtype dd[3] = {t, ixt, t};
                NAME("index_add dim %d", dim);
                index_case(LDT_OP_INDEX_ADD, 3, sh, dd, 1, &k1, &n, &x3, t, &a, what, &rng);
            }
            for (int dim = 0; dim < 3; dim++) { /* gather, scatter(_add): index longer on dim */
                ldt_shape ix = ldt_test_shape(3, 3, 6, 4), src = ldt_test_shape(3, 4, 7, 5);
                int64_t n = x3.dims[dim];
                ix.dims[dim] = 9;
                src.dims[dim] = 10;
                ldt_shape sh[3] = {x3, ix, src};
                ldt_dtype dd[3] = {t, ixt, t};
                memset(&a, 0, sizeof a);
                a.i[0] = dim;
                NAME("gather dim %d", dim);
                index_case(LDT_OP_GATHER, 2, sh, dt, 1, &k1, &n, &ix, t, &a, what, &rng);
                NAME("scatter dim %d", dim);
                index_case(LDT_OP_SCATTER, 3, sh, dd, 1, &k1, &n, &x3, t, &a, what, &rng);
                if (!acc_ok) continue;
                NAME("scatter_add dim %d", dim);
                index_case(LDT_OP_SCATTER_ADD, 3, sh, dd, 1, &k1, &n, &x3, t, &a, what, &rng);
            }
            { /* index_put: k index tensors of 6 entries, values broadcast to [6, x.dims[k:]] */
                struct { int k; ldt_shape v; } pc[] = {
                    {1, ldt_test_shape(3, 6, 7, 5)}, {1, ldt_test_shape(2, 7, 5)},
                    {1, ldt_test_shape(3, 6, 1, 5)}, {1, ldt_test_shape(1, 1)},
                    {2, ldt_test_shape(2, 6, 5)},    {2, ldt_test_shape(1, 5)},
                    {3, ldt_test_shape(1, 6)},       {3, ldt_test_shape(0)},
                };
                for (size_t ci = 0; ci < sizeof pc / sizeof *pc; ci++)
                    for (int acc = 0; acc < 2; acc++) {
                        ldt_shape sh[5] = {x3, pc[ci].v};
                        int ixk[3];
                        int64_t ixn[3];
                        ldt_dtype dd[5] = {t, t, ixt, it ? LDT_I32 : LDT_I64, ixt};
                        if (acc && !acc_ok) continue;
                        for (int i = 0; i < pc[ci].k; i++) {
                            sh[2 + i] = ldt_test_shape(1, 6);
                            ixk[i] = 2 + i;
                            ixn[i] = x3.dims[i];
                        }
                        memset(&a, 0, sizeof a);
                        a.i[0] = acc, a.i[1] = pc[ci].k;
                        NAME("index_put k %d values %s accumulate %d", pc[ci].k,
                             ldt_test_fmt_shape(&pc[ci].v), acc);
                        index_case(LDT_OP_INDEX_PUT, 2 + pc[ci].k, sh, dd, pc[ci].k, ixk, ixn,
                                   &x3, t, &a, what, &rng);
                    }
            }
#undef NAME
        }
}

Test(cuda_ops, index_out_of_range_is_flagged_on_the_device) {
    float x[6] = {1, 2, 3, 4, 5, 6}, *dx, *dy;
    int64_t ix[2] = {1, -4}, *di; /* -4 is outside -3..2 */
    int *derr, herr = 0;
    ldt__operand in[2];
    ldt__attrs a;
    ldt__kcall c;
    ldt__cuda_env env;
    memset(&env, 0, sizeof env);
    memset(&a, 0, sizeof a);
    if (!have_gpu()) cr_skip("no CUDA device");
    cr_assert_eq(cudaMalloc((void **)&dx, sizeof x), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&di, sizeof ix), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&dy, 4 * sizeof(float)), cudaSuccess);
    cr_assert_eq(cudaMalloc((void **)&derr, sizeof(int)), cudaSuccess);
    cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice);
    cudaMemcpy(di, ix, sizeof ix, cudaMemcpyHostToDevice);
    env.err = derr;
    static const int ops[2] = {LDT_OP_INDEX_SELECT, LDT_OP_EMBEDDING};
    for (int oi = 0; oi < 2; oi++) {
        /* index_select dim 0 of x [3,2], then embedding of weight [3,2] */
        int op = ops[oi];
        cudaMemset(derr, 0, sizeof(int));
        memset(&c, 0, sizeof c);
        in[0] = (ldt__operand){dx, ldt_test_shape(2, 3, 2), LDT_F32};
        in[1] = (ldt__operand){di, ldt_test_shape(1, 2), LDT_I64};
        c.op = op;
        c.attrs = &a;
        c.nin = 2;
        c.in = in;
        c.out = (ldt__operand){dy, ldt_test_shape(2, 2, 2), LDT_F32};
        cr_assert_eq(ldt__cuda_k_index(&c, &env), LDT_OK, "%s", ldt_last_error());
        cudaMemcpy(&herr, derr, sizeof(int), cudaMemcpyDeviceToHost);
        cr_assert_eq(herr, LDT__CUDA_DERR_INDEX_RANGE, "%s: %d", ldt__builtin_op_name(op), herr);
        cr_assert(strstr(ldt__cuda_derr_text(herr), "index out of range"));
        /* the CPU refuses the same call before writing */
        float out[4];
        c.in = (ldt__operand[2]){{x, in[0].shape, LDT_F32}, {ix, in[1].shape, LDT_I64}};
        c.out.data = out;
        cr_assert_eq(ldt__cpu_kernel(op)(&c), LDT_ERR_INVALID_ARGUMENT);
        cr_assert(strstr(ldt_last_error(), "index -4 at position 1"), "%s", ldt_last_error());
    }
    cudaFree(dx);
    cudaFree(di);
    cudaFree(dy);
    cudaFree(derr);
}

/* argmax, argmin, topk: the CPU's answer exactly (NaN the largest, -0 tied with +0, ties to
 * the lower index; topk sorted by (value, index)), over specials, ties and every dim. */
Test(cuda_ops, argreduce_ops_match_cpu_bitwise) {
    ldt_shape shapes[] = {ldt_test_shape(3, 4, 7, 5), ldt_test_shape(2, 3, 300),
                          ldt_test_shape(1, 9), ldt_test_shape(0), ldt_test_shape(2, 0, 4)};
    char what[200];
    uint64_t rng = 41;
    if (!have_gpu()) cr_skip("no CUDA device");
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int ti = 0; ti < NALL - 1; ti++) { /* no bool */
            ldt_shape s = shapes[si];
            ldt_dtype t = k_all[ti];
            int nd = s.ndim ? s.ndim : 1;
            for (int dim = -1; dim < nd; dim++) {
                int d = dim < 0 ? nd - 1 : dim;
                int64_t R = s.ndim ? s.dims[d] : 1;
                ldt__attrs a;
                for (int op = LDT_OP_ARGMAX; op <= LDT_OP_ARGMIN && R > 0; op++)
                    for (int keep = 0; keep < 2; keep++) {
                        ldt_shape o = {0, {0}};
                        for (int e = 0; e < s.ndim; e++)
                            if (e != d) o.dims[o.ndim++] = s.dims[e];
                            else if (keep) o.dims[o.ndim++] = 1;
                        memset(&a, 0, sizeof a);
                        a.i[0] = dim, a.i[1] = keep;
                        snprintf(what, sizeof what, "%s %s dim %d keepdim %d [%s]",
                                 ldt__builtin_op_name(op), ldt_test_fmt_shape(&s), dim, keep,
                                 ldt_dtype_name(t));
                        run_case(op, 1, &s, &t, &o, LDT_I64, &a, 1, 0, 0, what, &rng);
                    }
                int64_t ks[3] = {0, R < 3 ? R : 3, R};
                for (int ki = 0; ki < 3; ki++)
                    for (int largest = 0; largest < 2; largest++)
                        for (int op = LDT_OP_TOPK_VALUES; op <= LDT_OP_TOPK_INDICES; op++) {
                            ldt_shape o = s;
                            if (s.ndim == 0 && ks[ki] != 1) continue;
                            if (s.ndim) o.dims[d] = ks[ki];
                            memset(&a, 0, sizeof a);
                            a.i[0] = dim, a.i[1] = ks[ki], a.i[2] = largest;
                            snprintf(what, sizeof what, "%s %s dim %d k %lld largest %d [%s]",
                                     ldt__builtin_op_name(op), ldt_test_fmt_shape(&s), dim,
                                     (long long)ks[ki], largest, ldt_dtype_name(t));
                            run_case(op, 1, &s, &t, &o, op == LDT_OP_TOPK_VALUES ? t : LDT_I64,
                                     &a, 1, 0, 0, what, &rng);
                        }
            }
        }
}

/* sdpa: scores and the weighted sum are GEMMs on the CPU (another order) and exp is CUDA's:
 * compared within a few ulps of the result; the dropout mask is the same stream's. */
Test(cuda_ops, attention_matches_cpu) {
    struct { ldt_shape q, k, v, o; } cases[] = {
        {ldt_test_shape(4, 2, 3, 5, 8), ldt_test_shape(4, 2, 3, 7, 8), ldt_test_shape(4, 2, 3, 7, 6),
         ldt_test_shape(4, 2, 3, 5, 6)},
        {ldt_test_shape(3, 2, 9, 4), ldt_test_shape(3, 2, 4, 4), ldt_test_shape(3, 2, 4, 3),
         ldt_test_shape(3, 2, 9, 3)}, /* Lq > Lk */
        {ldt_test_shape(2, 70, 16), ldt_test_shape(2, 300, 16), ldt_test_shape(2, 300, 200),
         ldt_test_shape(2, 70, 200)}, /* keys and columns beyond one chunk */
        {ldt_test_shape(2, 5, 0), ldt_test_shape(2, 7, 0), ldt_test_shape(2, 7, 3),
         ldt_test_shape(2, 5, 3)}, /* E = 0: uniform weights */
        {ldt_test_shape(2, 5, 4), ldt_test_shape(2, 0, 4), ldt_test_shape(2, 0, 3),
         ldt_test_shape(2, 5, 3)}, /* no keys: zeros */
        {ldt_test_shape(2, 3, 4), ldt_test_shape(2, 2100, 4), ldt_test_shape(2, 2100, 2),
         ldt_test_shape(2, 3, 2)}, /* more keys than the scores kept in shared memory */
    };
    char what[200];
    uint64_t rng = 51;
    if (!have_gpu()) cr_skip("no CUDA device");
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
        for (int ti = 0; ti < 4; ti++)
            for (int causal = 0; causal < 2; causal++)
                for (int drop = 0; drop < 2; drop++) {
                    ldt_dtype t = k_all[ti], tt[3] = {t, t, t};
                    ldt_shape sh[3] = {cases[ci].q, cases[ci].k, cases[ci].v};
                    int64_t E = cases[ci].q.dims[cases[ci].q.ndim - 1];
                    ldt__attrs a;
                    double rt = t == LDT_F64 ? 1e-12 : t == LDT_F32 ? 1e-4 : t == LDT_F16 ? 2e-3 : 1.6e-2;
                    double at = t == LDT_F64 ? 1e-12 : t == LDT_F32 ? 1e-5 : t == LDT_F16 ? 1e-3 : 1e-2;
                    memset(&a, 0, sizeof a);
                    a.i[0] = 99, a.i[1] = 1000 + (int64_t)ci, a.i[2] = causal;
                    a.f[0] = drop ? 0.3 : 0.0;
                    a.f[1] = E ? 1.0 / sqrt((double)E) : 1.0;
                    snprintf(what, sizeof what, "sdpa q %s k %s causal %d dropout %g [%s]",
                             ldt_test_fmt_shape(&sh[0]), ldt_test_fmt_shape(&sh[1]), causal,
                             a.f[0], ldt_dtype_name(t));
                    run_case(LDT_OP_SDPA, 3, sh, tt, &cases[ci].o, t, &a, 0, rt, at, what, &rng);
                }
}
